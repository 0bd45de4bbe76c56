//! The `pipeline!` proc-macro: a thin front end over `sluice-compiler` (issue [5/9]).
//!
//! It will parse the `.pipe` language from Rust tokens with syn, call the compiler, and
//! turn its diagnostics into `syn::Error`s. Until then the crate only pins the
//! dependency direction `macros → compiler`.

// The compiler version this macro crate is built against.
const _: &str = sluice_compiler::VERSION;
