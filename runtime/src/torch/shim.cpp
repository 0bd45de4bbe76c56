// A tensor over memory Rust owns: `at::from_blob` with a deleter, which tch's C API
// (`at_tensor_of_blob`) does not expose. The deleter hands the buffer back to Rust when
// the last tensor sharing the storage is gone, so a batch column becomes a tensor
// without a copy and lives exactly as long as the tensor (and its views) do.
#include <ATen/ops/from_blob.h>

#include <cstdlib>
#include <cstring>
#include <exception>

extern "C" {

// Returns a new `at::Tensor*` (what tch's `C_tensor` is) of `scalar_type` and shape
// `dims[0..ndims]`, contiguous, on the CPU, over `data`. When libtorch frees the
// storage it calls `release(ctx)`. On failure returns null and stores a message in
// `*error` (free it with `sluice_free_error`); `ctx` is then never released (leaked
// rather than risk releasing it twice).
void *sluice_tensor_from_owned(void *data, const int64_t *dims, size_t ndims, int scalar_type,
                               void (*release)(void *), void *ctx, char **error) {
    try {
        auto options = at::TensorOptions().dtype(static_cast<at::ScalarType>(scalar_type));
        at::Tensor t = at::from_blob(
            data, at::IntArrayRef(dims, ndims), [release, ctx](void *) { release(ctx); }, options);
        return new at::Tensor(std::move(t));
    } catch (const std::exception &e) {
        *error = strdup(e.what());
    } catch (...) {
        *error = strdup("unknown C++ exception");
    }
    return nullptr;
}

void sluice_free_error(char *error) { free(error); }
}
