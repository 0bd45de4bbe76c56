//! The rustc-facing errors of `pipeline!`, locked with trybuild (the toolchain is pinned
//! by `rust-toolchain.toml`): each `tests/ui/*.rs` fails to compile with exactly the
//! `.stderr` next to it. `TRYBUILD=overwrite cargo test -p sluice-macros --test ui`
//! rewrites them after an intended change.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
