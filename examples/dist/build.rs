//! Compiles `dist.pipe` to Rust (and, with the `torch` feature, links libtorch into the
//! binary with an rpath), as any crate using Sluice does.

fn main() {
    sluice_compiler::build::compile(&["dist.pipe"]);
}
