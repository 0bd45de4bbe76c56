//! Semantic analysis: resolves names and types in the AST and reports user errors as
//! diagnostics (the only compiler stage besides `syntax` that does). Every check runs and
//! every error is reported; a later check never depends on an earlier one succeeding.
//!
//! So far: the declarations of a pipeline ([`decls`]): parameters and their defaults, the
//! record schema, `budget`, `device` and `extern fn` signatures; and every stage against
//! its signature ([`stages`]). Typing per-field operations and lowering to the logical
//! plan come next ([3/9]).

pub mod decls;
pub mod stages;

pub use decls::{Declarations, Device, ExternDecl, FieldDecl, ParamDecl, check_declarations};

use crate::ast;
use crate::diagnostic::Diagnostic;

/// Runs every semantic check on a parsed file: all diagnostics, in source order of the
/// pipelines.
pub fn check_file(file: &ast::File) -> (Vec<Declarations>, Vec<Diagnostic>) {
    let (decls, mut diags) = check_declarations(file);
    for (p, d) in file.pipelines.iter().zip(&decls) {
        stages::check_stages(p, d, &mut diags);
    }
    (decls, diags)
}
