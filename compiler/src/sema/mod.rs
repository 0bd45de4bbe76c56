//! Semantic analysis: resolves names and types in the AST and reports user errors as
//! diagnostics (the only compiler stage besides `syntax` that does). Every check runs and
//! every error is reported; a later check never depends on an earlier one succeeding.
//!
//! So far: the declarations of a pipeline ([`decls`]): parameters and their defaults, the
//! record schema, `budget`, `device` and `extern fn` signatures; and every stage against
//! its signature ([`stages`]). Typing per-field operations and lowering to the logical
//! plan come next ([3/9]).

pub mod decls;
pub mod lower;
pub mod ops;
pub mod stages;

pub use decls::{Declarations, Device, ExternDecl, FieldDecl, ParamDecl, check_declarations};

use crate::ast;
use crate::diagnostic::Diagnostic;

/// A checked pipeline: its declarations and, when its structure is sound, its logical
/// plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// Parameters, schema, budget, device, user functions.
    pub decls: Declarations,
    /// The logical plan (`None` when the pipeline had errors that prevent lowering).
    pub plan: Option<crate::ir::plan::Plan>,
    /// The physical plan, filled in by [`compile`](crate::compile).
    pub physical: Option<crate::physical::PhysicalPlan>,
}

/// Runs every semantic check on a parsed file and lowers each pipeline whose stages
/// check cleanly: the pipelines and all diagnostics.
pub fn check_file(file: &ast::File) -> (Vec<Checked>, Vec<Diagnostic>) {
    let (decls, mut diags) = check_declarations(file);
    let mut out = Vec::new();
    for (p, d) in file.pipelines.iter().zip(decls) {
        let before = diags.len();
        stages::check_stages(p, &d, &mut diags);
        let plan = if diags.len() == before { lower::lower(p, &d, &mut diags) } else { None };
        out.push(Checked { decls: d, plan, physical: None });
    }
    (out, diags)
}
