//! The lowering of the stages that combine or number whole streams: `enumerate`,
//! `take_while`, and the sources made of other pipelines of the file, `zip` and
//! `concatenate` (which name their inputs as `sample_from` does, with its checks: E0309 a
//! pipeline that takes itself, E0310 an unknown pipeline, E0120 a parameter with the
//! name of a pipeline it takes).
//!
//! Codes: E0330 `zip` of pipelines that share a field name, E0331 `concatenate` of
//! pipelines of different element types, E0332 `enumerate` of elements without fields,
//! of batches or of elements that have an `index` already, E0333 `zip` of elements
//! without fields, of batches of them, or of batches with elements that are not. A
//! `take_while` predicate is a `filter`'s (E0407).
//!
//! `zip` of batches: element `i` of a zip is the pair of its inputs' `i`-th elements,
//! merged; so a zip of batched pipelines yields batches whose columns are the inputs'
//! columns (tf.data's zip of two batched datasets). A batch is columnar, so the batches
//! paired must have as many rows: checked at run time (an error naming the element and
//! both sizes, the runtime's `zip_batches`); a zip of batches with unbatched elements is
//! refused (E0333).

use crate::ast::{self, Span};
use crate::diagnostic::Diagnostic;
use crate::ir::plan::{ArgValue, Concatenate, Element, Enumerate, FieldType, Plan, TakeWhile, Zip};
use crate::ir::types::Value;

use super::decls::Declarations;
use super::lower::Pipelines;

/// The pipelines a source of pipelines (`sample_from`, `zip`, `concatenate`) names, each
/// with its element and where it is named; `None` (with E0309/E0310) when one is the
/// pipeline itself or unknown, `None` alone when one had errors of its own. `verb` says
/// what the stage does with them (`mixes`).
pub(super) fn input_pipelines(
    s: &ast::Stage,
    p: &ast::Pipeline,
    pipelines: &Pipelines,
    verb: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<Vec<(String, Element, Span)>> {
    let mut out = Vec::new();
    for a in s.args.iter().filter(|a| a.name.is_none()) {
        let name = a.value.to_string();
        if name == p.name.name {
            diags.push(Diagnostic::error(
                "E0309",
                format!("pipeline `{name}` {verb} itself"),
                a.span,
                "a cycle",
            ));
            return None;
        }
        if let Some(param) = p.params.iter().find(|q| q.name.name == name) {
            // Its parameters are `--set NAME.PARAM=...` and a field `NAME` of `Params`,
            // which the parameter would be too.
            diags.push(
                Diagnostic::error(
                    "E0120",
                    format!("parameter `{name}` has the name of a pipeline that `{}` takes", p.name.name),
                    a.span,
                    "the pipeline",
                )
                .with_label(param.name.span, "the parameter")
                .with_help(format!("rename the parameter: `{name}` alone names the pipeline here")),
            );
            return None;
        }
        let element = match pipelines.get(&name) {
            Some(Some(e)) => e.clone(),
            // It had errors of its own, reported there.
            Some(None) => return None,
            None => {
                let known: Vec<&str> = pipelines.keys().map(String::as_str).collect();
                let d = Diagnostic::error(
                    "E0310",
                    format!("no pipeline `{name}` in this file"),
                    a.span,
                    "unknown pipeline",
                );
                diags.push(match super::decls::closest(&name, &known) {
                    Some(c) => d.with_help(format!("did you mean `{c}`?")),
                    None => d.with_help(format!("`{}` {verb} other pipelines of the same file", s.name)),
                });
                return None;
            }
        };
        out.push((name, element, a.span));
    }
    Some(out)
}

/// `zip(a, b, ...)`: elements with fields, no field name in two inputs.
pub(super) fn zip(
    s: &ast::Stage,
    p: &ast::Pipeline,
    pipelines: &Pipelines,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let inputs = input_pipelines(s, p, pipelines, "zips", diags)?;
    let mut fields: Vec<(FieldType, usize)> = Vec::new();
    let mut ok = true;
    // Records with fields, or batches of them (then every input is batches): element `i`
    // of the zip is the inputs' `i`-th elements merged, so batches zip into batches.
    let batched = matches!(inputs.first(), Some((_, Element::Batch(_), _)));
    for (k, (name, element, span)) in inputs.iter().enumerate() {
        let fs = match (element, batched) {
            (Element::Fields(fs), false) => fs,
            (Element::Batch(inner), true) if matches!(**inner, Element::Fields(_)) => inner.fields(),
            _ => {
                let (first, first_element, first_span) = &inputs[0];
                let d = match (element, batched) {
                    (Element::Fields(_), true) | (Element::Batch(_), false)
                        if matches!(first_element, Element::Fields(_) | Element::Batch(_)) =>
                    {
                        Diagnostic::error(
                            "E0333",
                            format!("`zip` of batches and elements that are not: `{first}` and `{name}`"),
                            *span,
                            format!("`{name}` makes {element}"),
                        )
                        .with_label(*first_span, format!("`{first}` makes {first_element}"))
                        .with_help(
                            "zip pipelines of one kind: batch every input by the same size, or zip the \
                             elements and `batch` the zip",
                        )
                    }
                    _ => Diagnostic::error(
                        "E0333",
                        "`zip` merges elements with fields, or batches of them",
                        *span,
                        format!("`{name}` makes {element}"),
                    )
                    .with_help(match element {
                        Element::Batch(_) => {
                            "zip batches of records with fields (`batch` after `parse_example`)"
                        }
                        _ => "parse the records first (`map { parse_example(); }`)",
                    }),
                };
                diags.push(d);
                ok = false;
                continue;
            }
        };
        for f in fs {
            if let Some((_, j)) = fields.iter().find(|(g, _)| g.name == f.name) {
                let (other, other_span) = (&inputs[*j].0, inputs[*j].2);
                diags.push(
                    Diagnostic::error(
                        "E0330",
                        format!("pipelines `{other}` and `{name}` both have a field `{}`", f.name),
                        *span,
                        format!("`{name}` has a field `{}`", f.name),
                    )
                    .with_label(other_span, format!("so has `{other}`"))
                    .with_help(format!(
                        "a zip merges the fields of its inputs: rename or `select` away `{}` in one of them",
                        f.name
                    )),
                );
                ok = false;
            } else {
                fields.push((f.clone(), k));
            }
        }
    }
    if !ok || inputs.is_empty() {
        return None;
    }
    Some(Plan::Zip(Zip {
        inputs: inputs.iter().map(|(n, _, _)| n.clone()).collect(),
        elements: inputs.iter().map(|(_, e, _)| e.clone()).collect(),
        output: {
            let merged = Element::Fields(fields.into_iter().map(|(f, _)| f).collect());
            if batched { Element::Batch(Box::new(merged)) } else { merged }
        },
    }))
}

/// `concatenate(a, b, ...)`: inputs of one element type.
pub(super) fn concatenate(
    s: &ast::Stage,
    p: &ast::Pipeline,
    pipelines: &Pipelines,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let inputs = input_pipelines(s, p, pipelines, "concatenates", diags)?;
    let (first, first_element, first_span) = inputs.first()?;
    let mut ok = true;
    for (name, element, span) in &inputs[1..] {
        if element != first_element {
            diags.push(
                Diagnostic::error(
                    "E0331",
                    format!("`concatenate` of `{first}` and `{name}`, whose elements differ"),
                    *span,
                    format!("`{name}` makes {element}"),
                )
                .with_label(*first_span, format!("`{first}` makes {first_element}"))
                .with_help("the pipelines concatenated make elements of one type: the same fields, in order"),
            );
            ok = false;
        }
    }
    ok.then(|| {
        Plan::Concatenate(Concatenate {
            inputs: inputs.iter().map(|(n, _, _)| n.clone()).collect(),
            output: first_element.clone(),
        })
    })
}

/// `enumerate(start: N)` on `input`: elements with fields, none called `index`.
pub(super) fn enumerate(
    s: &ast::Stage,
    input: Box<Plan>,
    start: Option<Result<ArgValue, String>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let element = input.output();
    let problem = match &element {
        Element::Fields(f) if f.iter().any(|x| x.name == "index") => Some((
            "`enumerate` adds a field `index`, which the elements have already".to_string(),
            format!("its input is {element}"),
            "rename the field first (`map { position = index; }` then `select`)",
        )),
        Element::Fields(_) => None,
        Element::Batch(_) => Some((
            "`enumerate` numbers elements with fields, not batches".to_string(),
            format!("its input is {element}"),
            "enumerate before `batch`",
        )),
        _ => Some((
            "`enumerate` numbers elements with fields".to_string(),
            format!("its input is {element}"),
            "parse the records first (`map { parse_example(); }`)",
        )),
    };
    if let Some((message, label, help)) = problem {
        diags.push(Diagnostic::error("E0332", message, s.name.span, label).with_help(help));
        return None;
    }
    let bad = |label: String| {
        Diagnostic::error("E0332", "the `start` of `enumerate` must be an i64", s.name.span, label)
    };
    let start = match start {
        None => ArgValue::Const(Value::Int(0)),
        Some(Ok(ArgValue::Const(Value::UInt(n)))) => {
            diags.push(bad(format!("{n} is more than the largest i64")));
            return None;
        }
        Some(Err(w)) => {
            diags.push(bad(format!("`{w}` is not an i64")));
            return None;
        }
        Some(Ok(v)) => v,
    };
    Some(Plan::Enumerate(Enumerate { input, start }))
}

/// `take_while(predicate)`: the predicate typed as a `filter`'s.
pub(super) fn take_while(
    s: &ast::Stage,
    pred: &ast::Expr,
    input: Box<Plan>,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let condition = super::ops::predicate("take_while", s, pred, &input.output(), decls, diags)?;
    Some(Plan::TakeWhile(TakeWhile {
        input,
        predicate: pred.to_string(),
        reads: condition.reads(),
        conditions: vec![condition],
    }))
}

#[cfg(test)]
mod tests {
    /// The output of pipeline `z`, `zip(a, b)` of the pipelines `a` and `b` whose stages
    /// are given, or the diagnostics.
    fn zipped(a: &str, b: &str) -> String {
        let src = format!("pipeline a() {{ {a} }}\npipeline b() {{ {b} }}\npipeline z() {{ zip(a, b); }}\n");
        match crate::compile(&src).into_result() {
            Ok(p) => p[2].logical.output().to_string(),
            Err(d) => d.iter().map(|d| format!("{}: {}\n", d.code, d.message)).collect(),
        }
    }

    #[test]
    fn a_zip_of_batches_is_batches_of_the_merged_fields() {
        let a = "range(10); batch(4);";
        let b = "range(10); map { twice = value * 2; } select(twice); batch(4);";
        insta::assert_snapshot!(zipped(a, b), @"batch<{value: i64, twice: i64}>");
        insta::assert_snapshot!(zipped("range(10);", "range(3); map { w = value; } select(w);"), @"{value: i64, w: i64}");
    }

    #[test]
    fn a_zip_of_batches_and_elements_or_of_batches_without_fields_is_an_error() {
        insta::assert_snapshot!(
            zipped("range(10); batch(4);", "range(3); map { w = value; } select(w);"),
            @"E0333: `zip` of batches and elements that are not: `a` and `b`"
        );
        insta::assert_snapshot!(
            zipped("range(10);", "range(3); map { w = value; } select(w); batch(2);"),
            @"E0333: `zip` of batches and elements that are not: `a` and `b`"
        );
        insta::assert_snapshot!(
            zipped("files(\"d/*\"); tfrecord(); batch(2);", "range(3); batch(2);"),
            @"E0333: `zip` merges elements with fields, or batches of them"
        );
    }

    #[test]
    fn an_enumerate_start_that_is_not_an_i64_is_an_error() {
        let start = |n: &str| {
            let src = format!("pipeline a() {{ range(3); enumerate(start: {n}); }}");
            let diags = crate::compile(&src).diagnostics;
            diags
                .iter()
                .map(|d| format!("{}: {}: {}", d.code, d.message, d.primary.message))
                .collect::<String>()
        };
        insta::assert_snapshot!(
            start("-9223372036854775809"),
            @"E0332: the `start` of `enumerate` must be an i64: `-9223372036854775809` is not an i64"
        );
        insta::assert_snapshot!(
            start("9223372036854775808"),
            @"E0332: the `start` of `enumerate` must be an i64: 9223372036854775808 is more than the largest i64"
        );
    }
}
