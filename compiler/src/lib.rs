//! Sluice's compiler: `.pipe` syntax → typed IR → checks → optimizer → physical plan →
//! generated Rust (and CUDA C).
//!
//! The front end, IR, optimizer and code generator arrive with issues [3/9] and [4/9];
//! today this crate holds the version both front ends and generated code agree on.

/// The version of the language and of the codegen ABI this compiler speaks.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
