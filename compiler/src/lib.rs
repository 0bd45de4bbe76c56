//! Sluice's compiler: `.pipe` syntax → typed IR → checks → optimizer → physical plan →
//! generated Rust (and CUDA C).
//!
//! Built so far: the AST ([`ast`]) and its pest front end ([`syntax`]); user diagnostics
//! ([`diagnostic`]); semantic analysis ([`sema`]: declarations, stages, typed per-field
//! operations, lowering) into the logical plan ([`ir::plan`]); the [`optimizer`]; the
//! [`physical`] plan with its static memory bound. Code generation follows ([4/9]).

pub mod ast;
pub mod build;
pub mod codegen;
pub mod diagnostic;
pub mod ir;
pub mod optimizer;
pub mod physical;
mod print;
pub mod sema;
pub mod syntax;

pub use diagnostic::{Diagnostic, Severity};

/// The version of the language and of the codegen ABI this compiler speaks.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Parses and checks a `.pipe` file: the checked pipelines, or every diagnostic when
/// there is an error (warnings alone do not prevent the result).
pub fn compile(source: &str) -> Result<Vec<sema::Checked>, Vec<Diagnostic>> {
    compile_ast(&syntax::parse(source)?)
}

/// Checks a parsed file (from either front end): the checked pipelines, or every
/// diagnostic when there is an error.
pub fn compile_ast(file: &ast::File) -> Result<Vec<sema::Checked>, Vec<Diagnostic>> {
    let (mut checked, mut diagnostics) = sema::check_file(file);
    plan_physical(&mut checked, &mut diagnostics);
    if diagnostics.iter().any(Diagnostic::is_error) {
        diagnostics.sort_by_key(|d| d.primary.span.start);
        return Err(diagnostics);
    }
    Ok(checked)
}

/// Plans every lowered pipeline physically; a budget the memory bound exceeds is an
/// error.
fn plan_physical(checked: &mut [sema::Checked], diagnostics: &mut Vec<Diagnostic>) {
    for c in checked {
        if let Some(plan) = &c.plan {
            // The physical plan is of the optimized plan: what will run.
            let optimized = optimizer::optimize(plan.clone()).plan;
            match physical::plan(
                &optimized,
                &c.decls.params,
                c.decls.budget,
                c.decls.budget_span,
                c.decls.device,
                physical::Options::default(),
            ) {
                Ok(p) => c.physical = Some(p),
                Err(d) => diagnostics.push(*d),
            }
        }
    }
}

/// Checks a `.pipe` file: every diagnostic found, errors and warnings (empty when clean).
pub fn check(source: &str) -> Vec<Diagnostic> {
    let mut diagnostics = match syntax::parse(source) {
        Ok(file) => {
            let (mut checked, mut diagnostics) = sema::check_file(&file);
            plan_physical(&mut checked, &mut diagnostics);
            diagnostics
        }
        Err(diagnostics) => diagnostics,
    };
    // In reading order, whichever check found them.
    diagnostics.sort_by_key(|d| d.primary.span.start);
    diagnostics
}
