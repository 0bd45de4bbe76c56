//! Checking and lowering `flat_map { SOURCE; STAGE; ... }` ([`ir::flat_map`](crate::ir::flat_map)):
//! the block's first stage is a source made from each input element (`range` with bounds
//! computed from its fields, or `slices` of its list and tensor fields), the others run
//! on that source's elements, lowered as a pipeline's stages are.
//!
//! `slices(a, b, keep: [c])` yields, per row of `a` and `b` (split along their first
//! dimension, of equal lengths at run time), `{a: row, b: row, c}`: only the sliced
//! fields and the kept ones, which are repeated into every row (tf.data's
//! `from_tensor_slices` of the dictionary the lambda builds). `range(start, end, step,
//! keep: [c])` yields `{value, c}`: how the inner chain reads the outer element
//! (`lambda x: Dataset.range(x).map(lambda y: y * 10 + x)`).
//!
//! Codes: E0360 an empty block or one that does not start with `range` or `slices`;
//! E0361 a stage that cannot run inside (a second source, `shuffle`, `prefetch`,
//! `cache`, `shard`, `interleave`, another `flat_map`, … or `repeat` without a count);
//! E0362 a `flat_map` of elements without fields; E0363 a bad argument of the inner
//! source (a bound that is not an integer of the element, a field that has no rows);
//! E0364 an assignment or a non-stage in the block.

use crate::ast::{self, ExprKind};
use crate::diagnostic::Diagnostic;
use crate::ir::expr::ExprType;
use crate::ir::flat_map::{FlatMap, InnerKind, InnerSource, range_element, row_type, slices_element};
use crate::ir::plan::{Element, FieldType, Plan};
use crate::ir::types::{DType, Shape};

use super::decls::{Declarations, closest};
use super::lower::Pipelines;
use super::stages::StageKind;

/// The sources a `flat_map` block may start with.
const SOURCES: &[&str] = &["range", "slices"];

/// The stages that may follow the source inside a `flat_map` block.
const INSIDE: &[StageKind] = &[
    StageKind::Map,
    StageKind::Filter,
    StageKind::Select,
    StageKind::Take,
    StageKind::Skip,
    StageKind::Enumerate,
    StageKind::TakeWhile,
    StageKind::Batch,
    StageKind::PaddedBatch,
    StageKind::Repeat,
];

/// The names of [`INSIDE`], in its order (for messages).
fn inside_names() -> Vec<&'static str> {
    INSIDE
        .iter()
        .filter_map(|k| super::stages::STAGES.iter().find(|s| s.kind == *k).map(|s| s.name))
        .collect()
}

/// A statement of the block as a stage (`name(args);` or `name(args) { ... }`).
fn stage_of(st: &ast::Stmt) -> Option<ast::Stage> {
    if st.target.is_some() {
        return None;
    }
    let (name, args) = match &st.value.kind {
        ExprKind::Call { callee, args, ret: None } if callee.segments.len() == 1 => {
            (callee.segments[0].clone(), args.clone())
        }
        ExprKind::Path(p) if p.segments.len() == 1 => (p.segments[0].clone(), Vec::new()),
        _ => return None,
    };
    Some(ast::Stage { name, args, body: st.body.clone(), span: st.span })
}

/// Checks the block of `flat_map` `s`: its source first, then stages that run per
/// element (each checked against its signature).
pub(super) fn check_block(b: &ast::Block, decls: &Declarations, diags: &mut Vec<Diagnostic>) {
    if b.stmts.is_empty() {
        diags.push(
            Diagnostic::error("E0360", "an empty `flat_map` block", b.span, "no source")
                .with_help("start it with a source made from each element: `flat_map { range(0, value); }` or `flat_map { slices(tokens); }`"),
        );
        return;
    }
    for (i, st) in b.stmts.iter().enumerate() {
        let Some(stage) = stage_of(st) else {
            diags.push(
                Diagnostic::error("E0364", "a `flat_map` block holds stages", st.span, "not a stage")
                    .with_help("assign fields in a `map { ... }` inside the block"),
            );
            continue;
        };
        let name = stage.name.name.as_str();
        let kind = super::stages::stage(name).map(|sig| sig.kind);
        if i == 0 {
            if !SOURCES.contains(&name) {
                diags.push(
                    Diagnostic::error(
                        "E0360",
                        "a `flat_map` block starts with its source",
                        stage.name.span,
                        format!("`{name}` is not a source made from the element"),
                    )
                    .with_help("start it with `range(start, end, step)` (bounds from the element's fields) or `slices(field, ...)`"),
                );
            } else if let Some(body) = &stage.body {
                diags.push(Diagnostic::error(
                    "E0208",
                    format!("`{name}` does not take a block"),
                    body.span,
                    "unexpected block",
                ));
            }
            // The source's arguments are expressions of the element: typed when lowered.
            continue;
        }
        if let Some(kind) = kind.filter(|k| INSIDE.contains(k)) {
            if kind == StageKind::Repeat && stage.args.is_empty() {
                diags.push(
                    Diagnostic::error(
                        "E0361",
                        "`repeat` inside `flat_map` needs a count",
                        stage.name.span,
                        "forever, on one element",
                    )
                    .with_help("write `repeat(2);`, or put `repeat()` after the `flat_map`"),
                );
                continue;
            }
            super::stages::check_stage(&stage, decls, diags);
            continue;
        }
        if kind.is_none() && !SOURCES.contains(&name) {
            // An unknown stage: E0200 with its suggestion.
            super::stages::check_stage(&stage, decls, diags);
            continue;
        }
        let source = SOURCES.contains(&name)
            || kind.is_some_and(|k| {
                k.is_source()
                    || matches!(k, StageKind::Tfrecord | StageKind::Interleave | StageKind::ReadFile)
            });
        diags.push(
            Diagnostic::error(
                "E0361",
                format!("`{name}` cannot run inside `flat_map`"),
                stage.name.span,
                if source { "a second source" } else { "not a stage of each element's chain" },
            )
            .with_note(format!("inside `flat_map`, after its source: {}", inside_names().join(", ")))
            .with_help(if source {
                "a `flat_map` block has one source, its first stage"
            } else {
                "put it after the `flat_map`, on the elements it yields"
            }),
        );
    }
}

/// Lowers `flat_map` `s` on `input`: its inner source, then its stages on top.
pub(super) fn lower(
    s: &ast::Stage,
    p: &ast::Pipeline,
    input: Box<Plan>,
    decls: &Declarations,
    pipelines: &Pipelines,
    rust_code: &mut Vec<proc_macro2::TokenStream>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let outer = input.output();
    let fields = match &outer {
        Element::Fields(f) if !f.is_empty() => f.clone(),
        other => {
            diags.push(
                Diagnostic::error(
                    "E0362",
                    "`flat_map` makes its source from the fields of each element",
                    s.name.span,
                    format!("its input is {other}"),
                )
                .with_help("parse the records first (`map { parse_example(); }`), and `unbatch` batches"),
            );
            return None;
        }
    };
    let stages: Vec<ast::Stage> = s.body.as_ref()?.stmts.iter().filter_map(stage_of).collect();
    let (first, rest) = stages.split_first()?;
    let kind = match first.name.name.as_str() {
        "range" => range(first, &fields, decls, diags)?,
        _ => slices(first, &fields, diags)?,
    };
    let output = match &kind {
        InnerKind::Range { keep, .. } => range_element(&fields, keep),
        InnerKind::Slices { fields: sliced, keep } => slices_element(&fields, sliced, keep),
    };
    let source = Plan::InnerSource(InnerSource { kind, outer, output });
    let rest: Vec<&ast::Stage> = rest.iter().collect();
    let inner = super::lower::chain(p, &rest, Some(source), decls, pipelines, rust_code, diags)?;
    Some(Plan::FlatMap(FlatMap { input, inner: Box::new(inner) }))
}

fn bad_arg(span: crate::ast::Span, message: impl Into<String>, label: impl Into<String>) -> Diagnostic {
    Diagnostic::error("E0363", message, span, label)
}

/// `range(end)`, `range(start, end)` or `range(start, end, step)` (or by name), each an
/// integer of the element's fields, and `keep: [fields]` copied into each element.
fn range(
    s: &ast::Stage,
    fields: &[FieldType],
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<InnerKind> {
    let positional: Vec<&ast::Expr> = s.args.iter().filter(|a| a.name.is_none()).map(|a| &a.value).collect();
    let names: &[&str] = match positional.len() {
        0 | 1 => &["end"],
        2 => &["start", "end"],
        _ => &["start", "end", "step"],
    };
    if positional.len() > 3 {
        diags.push(bad_arg(s.args[3].span, "`range` takes at most 3 arguments", "one too many"));
        return None;
    }
    let mut slots: Vec<(&str, &ast::Expr)> = names.iter().copied().zip(positional).collect();
    let field_names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    let mut keep = Vec::new();
    for a in s.args.iter().filter(|a| a.name.is_some()) {
        let n = a.name.as_ref().expect("named").name.as_str();
        if n == "keep" && !slots.iter().any(|(k, _)| *k == n) {
            slots.push((n, &a.value));
            keep = kept(&a.value, fields, &field_names, diags)?;
            if keep.iter().any(|k| k == "value") {
                diags.push(
                    bad_arg(a.value.span, "`range` yields its own `value`", "`value` kept")
                        .with_help("rename the field first (`map { n = value; }`) and keep `n`"),
                );
                return None;
            }
            continue;
        }
        if !["start", "end", "step", "keep"].contains(&n) || slots.iter().any(|(k, _)| *k == n) {
            diags.push(bad_arg(
                a.span,
                format!("`range` has no argument `{n}` here"),
                "unknown or given twice",
            ));
            return None;
        }
        slots.push((n, &a.value));
    }
    let mut typed = |name: &str, default: i64| -> Option<Option<crate::ir::expr::Expr>> {
        let Some((_, e)) = slots.iter().find(|(k, _)| *k == name) else {
            return Some((name != "end").then(|| int(default, s.span)));
        };
        let v = super::ops::Typer { fields, decls, diags }.ty(e)?;
        let is_int = matches!(v.ty, ExprType::Int(_))
            || v.tensor().is_some_and(|t| t.dtype.is_int() && t.shape == Shape::scalar());
        if !is_int {
            let found = match v.tensor() {
                Some(t) => format!("this is a `{t}` value"),
                None => format!("this is {}", v.ty.describe()),
            };
            diags.push(
                bad_arg(
                    e.span,
                    format!("`{name}` of `range` in `flat_map` is an integer of the element"),
                    found,
                )
                .with_help("compute it from integer fields: `range(0, length)`; `cast(x, i64)` a float"),
            );
            return None;
        }
        Some(Some(v))
    };
    let start = typed("start", 0)?;
    let end = typed("end", 0)?;
    let step = typed("step", 1)?;
    let Some(end) = end else {
        diags.push(
            bad_arg(s.name.span, "`range` in `flat_map` needs its end", "no end")
                .with_help("write `range(value)` for 0, 1, ..., value - 1"),
        );
        return None;
    };
    Some(InnerKind::Range {
        start: Box::new(start.expect("defaulted")),
        end: Box::new(end),
        step: Box::new(step.expect("defaulted")),
        keep,
    })
}

/// An integer literal as a typed expression.
fn int(n: i64, span: crate::ast::Span) -> crate::ir::expr::Expr {
    use crate::ir::expr::{Expr, ExprKind as K, UnaryOp};
    let lit = |n: u64| Expr::new(K::Int(n), ExprType::Int(Some(n)), span);
    if n < 0 {
        Expr::new(K::Unary(UnaryOp::Neg, Box::new(lit(n.unsigned_abs()))), ExprType::Int(None), span)
    } else {
        lit(n as u64)
    }
}

/// `slices(a, b, keep: [c, d])`: fields with rows (lists, tensors) split, others kept.
fn slices(s: &ast::Stage, fields: &[FieldType], diags: &mut Vec<Diagnostic>) -> Option<InnerKind> {
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    let mut ok = true;
    let mut sliced = Vec::new();
    let mut keep = Vec::new();
    for a in &s.args {
        match a.name.as_ref().map(|n| n.name.as_str()) {
            None => {
                let Some(f) = field(&a.value, fields, &names, diags) else {
                    ok = false;
                    continue;
                };
                let ty = f.ty.as_ref()?;
                if row_type(ty).is_none() || matches!(ty.dtype, DType::Bytes | DType::Str) {
                    diags.push(
                        bad_arg(
                            a.value.span,
                            format!("`slices` splits lists and tensors of numbers, not `{}: {ty}`", f.name),
                            "no rows of numbers",
                        )
                        .with_help("keep it whole in every row with `keep: [name]`"),
                    );
                    ok = false;
                    continue;
                }
                sliced.push(f.name.clone());
            }
            Some("keep") => match kept(&a.value, fields, &names, diags) {
                Some(k) => keep.extend(k),
                None => ok = false,
            },
            Some(other) => {
                diags.push(
                    bad_arg(a.span, format!("`slices` has no argument `{other}`"), "unknown argument")
                        .with_note("signature: `slices(field, ..., keep: [field, ...])`"),
                );
                ok = false;
            }
        }
    }
    if let Some(twice) = keep.iter().find(|k| sliced.contains(k)) {
        diags.push(bad_arg(s.span, format!("`{twice}` is both sliced and kept"), "sliced and kept"));
        ok = false;
    }
    if sliced.is_empty() && ok {
        diags.push(
            bad_arg(s.name.span, "`slices` needs the fields to split", "no fields")
                .with_help("write `slices(tokens);` or `slices(tokens, labels, keep: [id]);`"),
        );
        ok = false;
    }
    ok.then_some(InnerKind::Slices { fields: sliced, keep })
}

/// The fields a `keep: [a, b]` argument names (each once); `None` after E0363 or E0401.
fn kept(
    e: &ast::Expr,
    fields: &[FieldType],
    names: &[&str],
    diags: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let ExprKind::List(items) = &e.kind else {
        diags.push(bad_arg(e.span, "`keep` is a list of field names", "not a list"));
        return None;
    };
    let mut out: Vec<String> = Vec::new();
    let mut ok = true;
    for item in items {
        match field(item, fields, names, diags) {
            Some(f) if out.contains(&f.name) => {
                diags.push(bad_arg(item.span, format!("`{}` is kept twice", f.name), "kept twice"));
                ok = false;
            }
            Some(f) => out.push(f.name.clone()),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// The field of the element a `slices` or `keep` argument names; E0363 or E0401 (unknown field)
/// otherwise.
fn field<'f>(
    e: &ast::Expr,
    fields: &'f [FieldType],
    names: &[&str],
    diags: &mut Vec<Diagnostic>,
) -> Option<&'f FieldType> {
    let name = match &e.kind {
        ExprKind::Path(p) if p.segments.len() == 1 => p.segments[0].name.clone(),
        _ => {
            diags.push(bad_arg(e.span, "`slices` and `keep` take field names", "not a field name"));
            return None;
        }
    };
    let found = fields.iter().find(|f| f.name == name);
    if found.is_none() {
        let d = Diagnostic::error(
            "E0401",
            format!("unknown field `{name}`"),
            e.span,
            "not a field of the element here",
        );
        diags.push(match closest(&name, names) {
            Some(c) => d.with_help(format!("did you mean `{c}`?")),
            None => d.with_note(format!("the fields here: {}", names.join(", "))),
        });
    }
    found
}
