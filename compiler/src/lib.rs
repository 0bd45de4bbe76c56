//! Sluice's compiler: `.pipe` syntax → typed IR → checks → optimizer → physical plan →
//! generated Rust (and CUDA C).
//!
//! The [`driver`] is the one way through: the AST ([`ast`]) from either front end
//! ([`syntax`]: pest for files, syn for `pipeline!`); semantic analysis ([`sema`]:
//! declarations, stages, typed per-field operations, lowering, with user
//! [`diagnostic`]s) into the logical plan ([`ir::plan`]); the [`optimizer`]; the
//! [`physical`] plan (what runs, and its static memory bound); [`codegen`], which prints
//! the physical plan as Rust (and CUDA C).

pub mod ast;
pub mod build;
pub mod codegen;
pub mod diagnostic;
pub mod driver;
pub mod ir;
pub mod optimizer;
pub mod physical;
mod print;
pub mod sema;
pub mod span;
pub mod syntax;

pub use diagnostic::{Diagnostic, Severity};

/// The version of the language and of the codegen ABI this compiler speaks.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use driver::{Compilation, Pipeline, compile, compile_ast};
