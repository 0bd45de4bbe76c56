//! With the `torch` feature: compiles the small C++ shim `src/torch/shim.cpp` (a tensor
//! over a Rust-owned buffer, freed by Rust when libtorch drops it, which tch's API lacks)
//! against libtorch's headers, and links libtorch into this crate's tests. With the `cuda`
//! feature: compiles the CUDA Philox source as host C++ (`src/cuda/philox_host.cpp`), whose
//! `extern "C"` wrappers the tests compare bit for bit with the Rust generator.

#[cfg(feature = "torch")]
#[path = "build/libtorch.rs"]
mod libtorch;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "torch")]
    torch();
    #[cfg(feature = "cuda")]
    cuda();
}

#[cfg(feature = "cuda")]
fn cuda() {
    println!("cargo:rerun-if-changed=src/cuda/philox.cuh");
    println!("cargo:rerun-if-changed=src/cuda/philox_host.cpp");
    cc::Build::new()
        .cpp(true)
        .file("src/cuda/philox_host.cpp")
        .flag("-std=c++17")
        .warnings(true)
        .compile("sluice_philox_host");
}

#[cfg(feature = "torch")]
fn torch() {
    println!("cargo:rerun-if-changed=build/libtorch.rs");
    println!("cargo:rerun-if-changed=src/torch/shim.cpp");
    let lib = libtorch::libtorch_lib_dir().unwrap_or_else(|e| panic!("{e}"));
    let include = lib.join("../include");
    cc::Build::new()
        .cpp(true)
        .file("src/torch/shim.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag_if_supported("-w")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .compile("sluice_torch_shim");
    libtorch::link_libtorch(&lib);
}
