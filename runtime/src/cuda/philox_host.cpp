// The CUDA Philox source (philox.cuh, which is `PHILOX_CUDA`) compiled as host C++,
// behind `extern "C"` wrappers, so the tests check it bit for bit against rng.rs and the
// random operations without a GPU (src/cuda/philox.rs declares them).
#include "philox.cuh"

#include <stddef.h>

extern "C" {

// One Philox4x32-10 block.
void sluice_philox_host(const unsigned int ctr[4], const unsigned int key[2], unsigned int out[4]) {
    sluice_philox_block b = sluice_philox4x32_10(ctr, key);
    for (int i = 0; i < 4; ++i) {
        out[i] = b.w[i];
    }
}

// `n` draws from stream `stream` of generator `seed`, draw `i` chosen by `kinds[i]`:
// 0 next_u32, 1 next_u64, 2 next_f32 (its bits), 3 below(args[i]) (the image ops' form).
void sluice_rng_draws_host(unsigned long long seed, unsigned long long stream, const unsigned char *kinds,
                           const unsigned long long *args, size_t n, unsigned long long *out) {
    sluice_rng r = sluice_rng_new(seed, stream);
    for (size_t i = 0; i < n; ++i) {
        switch (kinds[i]) {
        case 0:
            out[i] = sluice_rng_next_u32(&r);
            break;
        case 1:
            out[i] = sluice_rng_next_u64(&r);
            break;
        case 2: {
            float f = sluice_rng_next_f32(&r);
            unsigned int bits;
            __builtin_memcpy(&bits, &f, sizeof bits);
            out[i] = bits;
            break;
        }
        default:
            out[i] = sluice_rng_below(&r, args[i]);
            break;
        }
    }
}

// The first `n` words of `element_rng(seed, op, epoch, index)`.
void sluice_element_words_host(unsigned long long seed, unsigned long long op, unsigned long long epoch,
                               unsigned long long index, unsigned int *out, size_t n) {
    sluice_rng r = sluice_element_rng(seed, op, epoch, index);
    for (size_t i = 0; i < n; ++i) {
        out[i] = sluice_rng_next_u32(&r);
    }
}

// Whether `random_flip` flips this element.
int sluice_flip_draw_host(unsigned long long seed, unsigned long long op, unsigned long long epoch,
                          unsigned long long index) {
    return sluice_flip_draw(seed, op, epoch, index);
}

// The window `random_crop` takes from this element.
void sluice_crop_draw_host(unsigned long long seed, unsigned long long op, unsigned long long epoch,
                           unsigned long long index, unsigned long long rows, unsigned long long cols,
                           unsigned long long *top, unsigned long long *left) {
    sluice_crop_draw(seed, op, epoch, index, rows, cols, top, left);
}

} // extern "C"
