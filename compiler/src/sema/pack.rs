//! Lowering `pack(length: N, fields: [ids, ...], window: W, overflow: split | error)` to
//! a [`Pack`] node: the packed fields must be `i32[]` fields of elements not yet batched;
//! the row length and window are constants (the length is part of the rows' type).
//!
//! Fields not listed are dropped. Dropping a field that could have been packed (an
//! `i32[]` field: a mask or labels beside the ids) is W0354, since it is probably
//! forgotten; dropping any other field (the `line` a tokenizer read, scalars) is what
//! packing means and says nothing.
//!
//! Codes: E0350 `pack` of elements without fields or of batches, E0351 a `length` or
//! `window` that is not a constant, E0352 a field that cannot be packed (not `i32[]`,
//! or not a field name), E0353 an `overflow` other than `split` or `error`, or a packed
//! field named `segment_ids`/`positions`; W0354 an `i32[]` field dropped.

use crate::ast::{self, ExprKind};
use crate::diagnostic::Diagnostic;
use crate::ir::pack::DEFAULT_WINDOW;
use crate::ir::pack::{Pack, PackOverflow, PackSpec};
use crate::ir::plan::{Element, Plan};
use crate::ir::types::{DType, Shape};

/// The `Pack` node of stage `s` (its arguments bound by name: `arg`), or `None` with
/// diagnostics.
pub fn lower<'e>(
    s: &ast::Stage,
    arg: impl Fn(&str) -> Option<&'e ast::Expr>,
    input: Box<Plan>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let element = input.output();
    let Element::Fields(have) = &element else {
        diags.push(
            Diagnostic::error(
                "E0350",
                "`pack` packs the fields of single elements",
                s.name.span,
                format!("its input is {element}"),
            )
            .with_help("put `pack` after the `map` that tokenizes and before `batch`"),
        );
        return None;
    };
    let mut ok = true;
    let mut constant = |name: &str, default: Option<u64>, diags: &mut Vec<Diagnostic>| match arg(name) {
        None => default,
        Some(e) => match e.kind {
            ExprKind::Int(n) if n > 0 => Some(n),
            // Zero and negative counts are E0206/E0205 of the stage checks.
            ExprKind::Int(_) => None,
            _ => {
                diags.push(
                    Diagnostic::error(
                        "E0351",
                        format!("`{name}` of `pack` is a constant"),
                        e.span,
                        "not a number written in the pipeline",
                    )
                    .with_note("the row length is part of the rows' type (`i32[N]`), known when compiling"),
                );
                ok = false;
                None
            }
        },
    };
    let length = constant("length", None, diags);
    let window = constant("window", Some(DEFAULT_WINDOW), diags);
    let overflow = match arg("overflow") {
        None => Some(PackOverflow::Split),
        Some(e) => match e.to_string().as_str() {
            "split" => Some(PackOverflow::Split),
            "error" => Some(PackOverflow::Error),
            other => {
                diags.push(Diagnostic::error(
                    "E0353",
                    "`overflow` of `pack` is `split` or `error`",
                    e.span,
                    format!("found `{other}`"),
                ));
                None
            }
        },
    };
    let packable = |ty: &Option<crate::ir::types::TensorType>| {
        ty.as_ref().is_some_and(|t| t.dtype == DType::I32 && t.shape == Shape::Var)
    };
    let mut fields = Vec::new();
    let items: Vec<&ast::Expr> = match arg("fields").map(|e| (e, &e.kind)) {
        Some((_, ExprKind::List(items))) if !items.is_empty() => items.iter().collect(),
        Some((e, _)) => {
            diags.push(
                Diagnostic::error(
                    "E0352",
                    "`fields` of `pack` is a list of field names",
                    e.span,
                    "not a list of fields",
                )
                .with_help("write `fields: [ids]`"),
            );
            return None;
        }
        // A missing `fields` is E0203 of the stage checks.
        None => return None,
    };
    for item in items {
        let name = item.to_string();
        let field = match &item.kind {
            ExprKind::Path(p) if p.segments.len() == 1 => have.iter().find(|f| f.name == name),
            _ => None,
        };
        match field {
            Some(f) if packable(&f.ty) && !PackSpec::ADDED.contains(&name.as_str()) => {
                if fields.contains(&name) {
                    continue;
                }
                fields.push(name)
            }
            Some(f) if packable(&f.ty) => {
                diags.push(Diagnostic::error(
                    "E0353",
                    format!("`pack` adds a field `{name}`"),
                    item.span,
                    "a packed field of the same name",
                ));
                ok = false;
            }
            Some(f) => {
                let ty = f.ty.as_ref().map_or("?".to_string(), ToString::to_string);
                diags.push(
                    Diagnostic::error(
                        "E0352",
                        format!("`pack` packs `i32[]` fields, not `{name}`"),
                        item.span,
                        format!("this is `{ty}`"),
                    )
                    .with_help(
                        "pack token ids (`tokenize` gives `i32[]`); `cast` other integer lists to i32",
                    ),
                );
                ok = false;
            }
            None => {
                let names: Vec<&str> = have.iter().map(|f| f.name.as_str()).collect();
                diags.push(
                    Diagnostic::error(
                        "E0352",
                        format!("`pack` has no field `{name}` to pack"),
                        item.span,
                        "not a field here",
                    )
                    .with_note(format!("the fields here: {}", names.join(", "))),
                );
                ok = false;
            }
        }
    }
    let (length, window, overflow) = (length?, window?, overflow?);
    if !ok {
        return None;
    }
    for f in have.iter().filter(|f| packable(&f.ty) && !fields.contains(&f.name)) {
        diags.push(
            Diagnostic::warning(
                "W0354",
                format!("`pack` drops the `i32[]` field `{}`", f.name),
                s.name.span,
                "only the fields listed are packed",
            )
            .with_help(format!(
                "add it to `fields` to pack it beside the others: `fields: [{}, {}]`",
                fields.join(", "),
                f.name
            )),
        );
    }
    Some(Plan::Pack(Pack { input, spec: PackSpec { length, fields, window, overflow } }))
}
