//! Semantic analysis: resolves names and types in the AST and reports user errors as
//! diagnostics (the only compiler stage besides `syntax` that does). Every check runs and
//! every error is reported; a later check never depends on an earlier one succeeding.
//!
//! So far: the declarations of a pipeline ([`decls`]): parameters and their defaults, the
//! record schema, `budget`, `device` and `extern fn` signatures; and every stage against
//! its signature ([`stages`]); per-field operations and `filter` predicates typed into
//! the IR's typed expressions, their arguments bound once ([`ops`]); and the lowering to
//! the logical plan ([`lower`]).

pub mod args;
mod bucket;
mod calls;
mod combine;
pub mod decls;
mod flat_map;
pub mod lower;
pub mod ops;
mod pack;
mod shuffle;
mod sources;
pub mod stage_kind;
pub mod stages;
mod tokenize;
mod unbatch;
mod window;

pub use decls::{Declarations, Device, ExternDecl, FieldDecl, ParamDecl, check_declarations};

use crate::ast;
use crate::diagnostic::Diagnostic;

/// A checked pipeline: its declarations and, when its structure is sound, its logical
/// plan.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Parameters, schema, budget, device, user functions.
    pub decls: Declarations,
    /// The logical plan (`None` when the pipeline had errors that prevent lowering).
    pub plan: Option<crate::ir::plan::Plan>,
    /// The tokens of the pipeline's Rust code (`pipeline!` only), with their spans, by
    /// the index a [`RustStage`](crate::ir::plan::RustStage) holds: they travel beside
    /// the plan, which names no token type. Empty when a stage has only the text.
    pub rust_code: Vec<proc_macro2::TokenStream>,
}

/// The most stages one pipeline may have. A plan is a chain of nodes, each holding its
/// input: walking, dropping or printing it goes as deep as the chain is long, and this
/// bound keeps that within any thread's stack (a test compiles a pipeline this long on
/// a test thread, whose stack is 2 MiB; twice as many still fit there).
pub const MAX_STAGES: usize = 1024;

/// E0315 for each pipeline of more than [`MAX_STAGES`] stages.
fn too_many_stages(file: &ast::File) -> Vec<Diagnostic> {
    let stages = |p: &ast::Pipeline| p.items.iter().filter(|i| matches!(i, ast::Item::Stage(_))).count();
    file.pipelines
        .iter()
        .filter(|p| stages(p) > MAX_STAGES)
        .map(|p| {
            Diagnostic::error(
                "E0315",
                format!("pipeline `{}` has {} stages, more than {MAX_STAGES}", p.name, stages(p)),
                p.name.span,
                "too long",
            )
            .with_help("fuse stages (one `map` block takes many statements) or split the work into pipelines")
        })
        .collect()
}

/// Runs every semantic check on a parsed file and lowers each pipeline whose stages
/// check cleanly: the pipelines and all diagnostics.
pub fn check_file(file: &ast::File) -> (Vec<Checked>, Vec<Diagnostic>) {
    let too_long = too_many_stages(file);
    if !too_long.is_empty() {
        return (Vec::new(), too_long);
    }
    let (decls, mut diags) = check_declarations(file);
    let names: Vec<&str> = file.pipelines.iter().map(|p| p.name.name.as_str()).collect();
    let deps: Vec<Vec<String>> = file.pipelines.iter().map(lower::sample_inputs).collect();
    let mut plans: Vec<Option<Option<crate::ir::plan::Plan>>> = vec![None; file.pipelines.len()];
    let mut rust_code: Vec<Vec<proc_macro2::TokenStream>> = vec![Vec::new(); file.pipelines.len()];
    let mut lowered = lower::Pipelines::new();
    // Lower in dependency order: a pipeline after the pipelines it mixes.
    loop {
        let mut progress = false;
        for (i, p) in file.pipelines.iter().enumerate() {
            let ready = deps[i]
                .iter()
                .all(|d| lowered.contains_key(d) || !names.contains(&d.as_str()) || d == &p.name.name);
            if plans[i].is_some() || !ready {
                continue;
            }
            let before = diags.len();
            stages::check_stages(p, &decls[i], &mut diags);
            let plan = if diags.len() == before {
                lower::lower(p, &decls[i], &lowered, &mut rust_code[i], &mut diags)
                    .map(|plan| lower::device_tail(plan, decls[i].device))
            } else {
                None
            };
            lowered.insert(p.name.name.clone(), plan.as_ref().map(crate::ir::plan::Plan::output));
            plans[i] = Some(plan);
            progress = true;
        }
        if !progress {
            break;
        }
    }
    // What is left takes itself through other pipelines.
    for (i, p) in file.pipelines.iter().enumerate() {
        if plans[i].is_none() {
            let (verb, stage) = source_of_pipelines(p);
            diags.push(
                Diagnostic::error(
                    "E0309",
                    format!("pipeline `{}` {verb} itself through `{stage}`", p.name),
                    p.name.span,
                    "in a cycle",
                )
                .with_note(format!("it {verb} {}", deps[i].join(", "))),
            );
        }
    }
    let out = decls
        .into_iter()
        .zip(plans)
        .zip(rust_code)
        .map(|((d, plan), rust_code)| Checked { decls: d, plan: plan.flatten(), rust_code })
        .collect();
    (out, diags)
}

/// The source of pipelines `p` starts with (`sample_from`, `zip` or `concatenate`) and
/// what it does with them.
fn source_of_pipelines(p: &ast::Pipeline) -> (&'static str, &'static str) {
    let first = p.items.iter().find_map(|i| match i {
        ast::Item::Stage(s) => stages::stage(&s.name.name).map(|sig| sig.kind),
        _ => None,
    });
    match first {
        Some(stages::StageKind::Zip) => ("zips", "zip"),
        Some(stages::StageKind::Concatenate) => ("concatenates", "concatenate"),
        _ => ("mixes", "sample_from"),
    }
}
