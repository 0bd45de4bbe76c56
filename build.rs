//! With the `torch` feature: links libtorch into the facade's own binaries and tests (an
//! rpath, `--no-as-needed` for `libtorch_cuda`), and hands its directory to the build
//! scripts of crates that depend on `sluice` (`DEP_SLUICE_LIBTORCH_LIB`), where
//! `sluice_compiler::build::compile` links it the same way.

#[cfg(feature = "torch")]
#[path = "runtime/build/libtorch.rs"]
mod libtorch;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "torch")]
    {
        println!("cargo:rerun-if-changed=runtime/build/libtorch.rs");
        let lib = libtorch::libtorch_lib_dir().unwrap_or_else(|e| panic!("{e}"));
        libtorch::link_libtorch(&lib);
        println!("cargo:libtorch_lib={}", lib.display());
    }
}
