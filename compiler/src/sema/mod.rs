//! Semantic analysis: resolves names and types in the AST and reports user errors as
//! diagnostics (the only compiler stage besides `syntax` that does). Every check runs and
//! every error is reported; a later check never depends on an earlier one succeeding.
//!
//! So far: the declarations of a pipeline ([`decls`]): parameters and their defaults, the
//! record schema, `budget`, `device` and `extern fn` signatures. Stages and per-field
//! operations come next ([3/9]).

pub mod decls;

pub use decls::{Declarations, Device, ExternDecl, FieldDecl, ParamDecl, check_declarations};
