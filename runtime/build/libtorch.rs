//! Linking libtorch into a crate's own binaries and tests: shared, as a `#[path]` module,
//! by the build scripts of the runtime and the facade and by `sluice_compiler::build`.
//!
//! libtorch comes from scripts/setup-torch (PyPI's torch wheel; `.cargo/config.toml` sets
//! LIBTORCH to the `.libtorch` link it makes) or from torch-sys's own `links` metadata. The
//! binaries get an rpath to it, so they run with no environment, and `--no-as-needed`
//! keeps `libtorch_cuda.so`, which nothing references by symbol but which registers the
//! CUDA backend (without it `tch::Cuda::is_available()` is false on a GPU machine).

/// The directory holding `libtorch_cpu.so`, or a message saying how to get one.
pub fn libtorch_lib_dir() -> Result<std::path::PathBuf, String> {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let dir = match (std::env::var_os("DEP_TCH_LIBTORCH_LIB"), std::env::var_os("LIBTORCH")) {
        (Some(lib), _) => std::path::PathBuf::from(lib),
        (None, Some(root)) => std::path::Path::new(&root).join("lib"),
        (None, None) => {
            return Err(
                "the `torch` feature needs libtorch: run scripts/setup-torch (or set LIBTORCH)".into()
            );
        }
    };
    std::fs::canonicalize(&dir)
        .map_err(|e| format!("libtorch: {}: {e}; run scripts/setup-torch (or set LIBTORCH)", dir.display()))
}

/// Emits the link arguments for this crate's binaries and tests.
pub fn link_libtorch(lib: &std::path::Path) {
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    // PyPI's CUDA runtime libraries sit beside torch (`site-packages/nvidia/cu13/lib`).
    let cuda = lib.join("../../nvidia/cu13/lib");
    if let Ok(cuda) = std::fs::canonicalize(cuda) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", cuda.display());
    }
    // NCCL (cudarc opens `libnccl.so` at run time; scripts/setup-torch links it to the
    // wheel's `libnccl.so.2`).
    if let Ok(nccl) = std::fs::canonicalize(lib.join("../../nvidia/nccl/lib")) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", nccl.display());
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-L{}", lib.display());
    if lib.join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-ltorch_cuda");
    }
    println!("cargo:rustc-link-arg=-ltorch");
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
}
