//! Compiles `digits.pipe` to Rust, as any crate using Sluice does. With the `torch`
//! feature, `compile` also links libtorch into the binary with an rpath (it learns where
//! libtorch is from sluice's build script), so the binary runs with no environment.

fn main() {
    sluice_compiler::build::compile(&["digits.pipe"]);
}
