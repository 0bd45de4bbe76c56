//! Lowering `unbatch()` to an [`Unbatch`](Plan::Unbatch) node: tf.data's `unbatch` of
//! batches (their rows) or of elements whose every field has a leading dimension (a list
//! `T[]` or a tensor of numbers), each field split along it ([`Element::unbatch`]); the
//! fields' lengths are checked equal at run time (the runtime's `unbatch_fields`).
//!
//! Codes: E0306 `unbatch` of elements that are neither batches nor fields each with a
//! leading dimension (paths, unparsed records, a scalar, bytes or text field).

use crate::ast::{self, Span};
use crate::diagnostic::Diagnostic;
use crate::ir::plan::{Element, FieldType, Plan};

/// The `Unbatch` node of stage `s` over `input`, or `None` with E0306.
pub fn lower(s: &ast::Stage, input: Box<Plan>, diags: &mut Vec<Diagnostic>) -> Option<Plan> {
    unbatchable(&input.output(), s.name.span, diags).then_some(Plan::Unbatch(input))
}

/// Whether `unbatch` applies to `element` (else E0306): batches, or elements whose every
/// field has a leading dimension (a list `T[]` or a tensor), as tf.data unbatches any
/// element whose components share one: each field loses it (`i64[]` → `i64`, `f32[n, 4]`
/// → `f32[4]`); their lengths must agree at run time.
fn unbatchable(element: &Element, span: Span, diags: &mut Vec<Diagnostic>) -> bool {
    let fields = match element {
        Element::Batch(_) => return true,
        Element::Fields(f) => f,
        other => {
            diags.push(
                Diagnostic::error(
                    "E0306",
                    "`unbatch` needs batches or fields with a leading dimension",
                    span,
                    format!("its input is {other}"),
                )
                .with_help("parse the records first (`map { parse_example(); }`), or `batch` them"),
            );
            return false;
        }
    };
    let scalars: Vec<&FieldType> =
        fields.iter().filter(|f| f.ty.as_ref().is_some_and(|t| Element::unbatched(t).is_none())).collect();
    let Some(first) = scalars.first() else { return true };
    let names: Vec<String> = scalars
        .iter()
        .map(|f| format!("`{}: {}`", f.name, f.ty.as_ref().map_or_else(String::new, ToString::to_string)))
        .collect();
    diags.push(
        Diagnostic::error(
            "E0306",
            format!("`unbatch` splits every field along its first dimension, and `{}` has none", first.name),
            span,
            format!("its input is {element}"),
        )
        .with_note(format!(
            "each field must be a list (`T[]`) or a tensor of numbers; not so: {}",
            names.join(", ")
        ))
        .with_help("`select` away the fields that are not lists, or `batch` the elements first"),
    );
    false
}

#[cfg(test)]
mod tests {
    /// The output of `stages` over records of the fields `schema`, or the diagnostics.
    fn output(schema: &str, stages: &str) -> String {
        let src = format!(
            "pipeline p(files: glob = \"d/*\") {{ schema {{ {schema} }} tfrecords(files); map {{ parse_example(); }} {stages} }}"
        );
        match crate::compile(&src).into_result() {
            Ok(p) => p[0].logical.output().to_string(),
            Err(d) => d.iter().map(|d| format!("{}: {}\n", d.code, d.message)).collect(),
        }
    }

    #[test]
    fn unbatch_of_fields_drops_each_leading_dimension() {
        insta::assert_snapshot!(output("v: i64[], w: f32[]", "unbatch();"), @"{v: i64, w: f32}");
        insta::assert_snapshot!(output("g: f32[3, 2], ids: i64[3]", "unbatch();"), @"{g: f32[2], ids: i64}");
        insta::assert_snapshot!(output("g: u8[4, 4, 3]", "unbatch();"), @"{g: u8[4, 3]}");
        // A batch's rows, as before; then the rows' lists.
        insta::assert_snapshot!(output("v: i64[]", "padded_batch(2); unbatch(); unbatch();"), @"{v: i64}");
    }

    #[test]
    fn unbatch_of_a_field_without_a_leading_dimension_is_an_error() {
        insta::assert_snapshot!(
            output("v: i64[], label: i64, name: bytes", "unbatch();"),
            @"E0306: `unbatch` splits every field along its first dimension, and `label` has none"
        );
        insta::assert_snapshot!(output("name: bytes", "unbatch();"), @"E0306: `unbatch` splits every field along its first dimension, and `name` has none");
    }
}
