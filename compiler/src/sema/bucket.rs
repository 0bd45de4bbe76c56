//! Lowering `bucket_by_length(length: tokens, boundaries: [...], batch_sizes: [...],
//! pad_to_bucket_boundary, drop_remainder)` to a [`BucketByLength`] node, and the checks
//! of `padded_batch`'s `pad_to_multiple`.
//!
//! `length` names a field of the element: a `T[]` field gives its number of values (the
//! usual `lambda x: tf.shape(x["tokens"])[0]`), an integer scalar field gives its value
//! (a length computed in a `map` before). The boundaries and batch sizes are constants:
//! they decide the element type's batch sizes and the memory the stage holds.
//!
//! Codes: E0370 `padded_batch` with both `pad_to` and `pad_to_multiple`; E0371
//! `pad_to_multiple` over a field of variable shape that is not `T[]` (only lists are
//! rounded up); E0372 `bucket_by_length` of elements without fields or of batches; E0373
//! a `length` that is not a `T[]` or integer field; E0374 `boundaries` that are not
//! positive, strictly increasing integer constants; E0375 `batch_sizes` that are not
//! `len(boundaries) + 1` integer constants of at least 1; E0376 `padding_values` (of
//! `padded_batch` or `bucket_by_length`) that is not one number for every field or
//! `fields(name: number, ...)`, names a field the element does not have, or gives a
//! value that the field's dtype cannot hold.
//!
//! `padding_values` is tf.data's: `padding_values: -1` pads every field with -1 (a
//! scalar, as tf.data broadcasts one), `padding_values: fields(tokens: -1, mask: 0.5)`
//! pads each field named with its value (a dict in tf.data); a field not named pads
//! with 0 (`false`), as when the argument is not given.

use crate::ast::{self, ExprKind};
use crate::ast::{Span, UnaryOp};
use crate::diagnostic::Diagnostic;
use crate::ir::bucket::{BucketByLength, BucketSpec, LengthOf, PaddingValues};
use crate::ir::plan::{Element, FieldType, Plan};
use crate::ir::types::{DType, Dim, Shape, Value};

/// The `BucketByLength` node of stage `s` (its arguments bound by name: `arg`, its flags
/// read), or `None` with diagnostics.
pub fn lower<'e>(
    s: &ast::Stage,
    arg: impl Fn(&str) -> Option<&'e ast::Expr>,
    flags: (bool, bool),
    input: Box<Plan>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let element = input.output();
    let Element::Fields(have) = &element else {
        diags.push(
            Diagnostic::error(
                "E0372",
                "`bucket_by_length` batches single elements with fields",
                s.name.span,
                format!("its input is {element}"),
            )
            .with_help("put `bucket_by_length` where `padded_batch` would go, instead of it"),
        );
        return None;
    };
    let length = arg("length").and_then(|e| length_field(e, have, diags));
    let boundaries = arg("boundaries").and_then(|e| boundaries(e, diags));
    let batch_sizes = match (arg("batch_sizes"), &boundaries) {
        (Some(e), Some(b)) => batch_sizes(e, b.len(), diags),
        _ => None,
    };
    let padding_values = padding_values(arg("padding_values"), have, diags);
    let ((length, length_of), boundaries, batch_sizes) = (length?, boundaries?, batch_sizes?);
    let padding_values = padding_values?;
    let (pad_to_bucket_boundary, drop_remainder) = flags;
    let spec = BucketSpec {
        length,
        length_of,
        boundaries,
        batch_sizes,
        pad_to_bucket_boundary,
        drop_remainder,
        padding_values,
    };
    Some(Plan::BucketByLength(BucketByLength { input, spec }))
}

/// The field `length` names, and how it gives a length.
fn length_field(
    e: &ast::Expr,
    have: &[FieldType],
    diags: &mut Vec<Diagnostic>,
) -> Option<(String, LengthOf)> {
    let name = e.to_string();
    let field = match &e.kind {
        ExprKind::Path(p) if p.segments.len() == 1 => have.iter().find(|f| f.name == name),
        _ => None,
    };
    let integer = |d: DType| matches!(d, DType::U8 | DType::I32 | DType::U32 | DType::I64);
    let of = field.and_then(|f| f.ty.as_ref()).and_then(|t| match &t.shape {
        Shape::Var if !matches!(t.dtype, DType::Str | DType::Bytes) => Some(LengthOf::Values),
        Shape::Dims(d) if d.is_empty() && integer(t.dtype) => Some(LengthOf::Value),
        _ => None,
    });
    if let Some(of) = of {
        return Some((name, of));
    }
    let label = match field.and_then(|f| f.ty.as_ref()) {
        Some(t) => format!("this is `{t}`"),
        None if field.is_some() => "a field of unknown type".to_string(),
        None => "not a field here".to_string(),
    };
    let names: Vec<&str> = have.iter().map(|f| f.name.as_str()).collect();
    diags.push(
        Diagnostic::error(
            "E0373",
            "`length` of `bucket_by_length` is a `T[]` field (its number of values) or an integer field",
            e.span,
            label,
        )
        .with_note(format!("the fields here: {}", names.join(", ")))
        .with_help("name the token field (`length: ids`), or compute a length in a `map` before"),
    );
    None
}

/// The constants of a list argument, or `None` when it is not a list of integers.
fn constants(e: &ast::Expr) -> Option<Vec<u64>> {
    match &e.kind {
        ExprKind::List(items) => items
            .iter()
            .map(|x| match x.kind {
                ExprKind::Int(n) => Some(n),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// `boundaries`: positive, strictly increasing constants.
fn boundaries(e: &ast::Expr, diags: &mut Vec<Diagnostic>) -> Option<Vec<u64>> {
    let values = constants(e);
    let why = match &values {
        None => "not a list of integers written in the pipeline".to_string(),
        Some(v) if v.contains(&0) => "a boundary of 0: every length is at least 0".to_string(),
        Some(v) if v.iter().any(|&b| b > i64::MAX as u64) => "a boundary beyond i64".to_string(),
        Some(v) => match v.windows(2).find(|w| w[0] >= w[1]) {
            Some(w) => format!("{} is not below {}", w[0], w[1]),
            None => return values,
        },
    };
    diags.push(
        Diagnostic::error(
            "E0374",
            "`boundaries` of `bucket_by_length` are positive, strictly increasing integers",
            e.span,
            why,
        )
        .with_note("bucket `i` holds the lengths from boundary `i - 1` up to, not including, boundary `i`")
        .with_help("write them in increasing order: `boundaries: [16, 32, 64]`"),
    );
    None
}

/// `batch_sizes`: one constant of at least 1 per bucket (`n + 1` for `n` boundaries).
fn batch_sizes(e: &ast::Expr, n: usize, diags: &mut Vec<Diagnostic>) -> Option<Vec<u64>> {
    let values = constants(e);
    let why = match &values {
        None => "not a list of integers written in the pipeline".to_string(),
        Some(v) if v.len() != n + 1 => format!(
            "{} batch size{} for {n} boundar{} ({} buckets)",
            v.len(),
            if v.len() == 1 { "" } else { "s" },
            if n == 1 { "y" } else { "ies" },
            n + 1
        ),
        Some(v) if v.contains(&0) => "a batch size of 0".to_string(),
        Some(_) => return values,
    };
    diags.push(
        Diagnostic::error(
            "E0375",
            "`batch_sizes` of `bucket_by_length` has one size of at least 1 per bucket",
            e.span,
            why,
        )
        .with_note(format!(
            "{n} boundaries make {} buckets: below the first, between each two, from the last up",
            n + 1
        )),
    );
    None
}

/// `padded_batch`'s `pad_to_multiple` against its other arguments and the element: E0370
/// with `pad_to`, E0371 over a tensor of variable shape. False when it is wrong.
pub fn check_pad_to_multiple<'e>(
    s: &ast::Stage,
    arg: impl Fn(&str) -> Option<&'e ast::Expr>,
    element: &Element,
    diags: &mut Vec<Diagnostic>,
) -> bool {
    let Some(multiple) = arg("pad_to_multiple") else { return true };
    if let Some(pad_to) = arg("pad_to") {
        diags.push(
            Diagnostic::error(
                "E0370",
                "`padded_batch` takes `pad_to` or `pad_to_multiple`, not both",
                multiple.span,
                "a multiple of the longest",
            )
            .with_label(pad_to.span, "a fixed length")
            .with_help("keep `pad_to: N` for one length, or `pad_to_multiple: K` to round the longest up"),
        );
        return false;
    }
    let named = |f: &&FieldType| {
        f.ty.as_ref().is_some_and(
            |t| matches!(&t.shape, Shape::Dims(d) if d.iter().any(|d| matches!(d, Dim::Named(_)))),
        )
    };
    if let Some(f) = element.fields().iter().find(named) {
        let ty = f.ty.as_ref().map_or("?".to_string(), ToString::to_string);
        diags.push(
            Diagnostic::error(
                "E0371",
                format!("`pad_to_multiple` rounds `T[]` fields only, and `{}` is `{ty}`", f.name),
                s.name.span,
                "a field of variable shape that is not a list",
            )
            .with_help(
                "give it a fixed shape first (`resize`, `center_crop`), or use `pad_to_multiple` without it",
            ),
        );
        return false;
    }
    true
}

/// `padding_values` (`None`: not given, every field pads with 0) against the fields of
/// the element batched: one number for every field (`-1`), or `fields(name: number,
/// ...)`; each value checked against its field's dtype (E0376). `None` when it is wrong.
pub fn padding_values(
    e: Option<&ast::Expr>,
    fields: &[FieldType],
    diags: &mut Vec<Diagnostic>,
) -> Option<PaddingValues> {
    let Some(e) = e else { return Some(PaddingValues::default()) };
    let bad = |span: Span, label: String| {
        Diagnostic::error(
            "E0376",
            "`padding_values` is one number, or `fields(name: number, ...)`",
            span,
            label,
        )
        .with_help("such as `padding_values: -1` for every field, or `padding_values: fields(tokens: -1)`")
    };
    let mut out = Vec::new();
    let mut ok = true;
    match &e.kind {
        ExprKind::Call { callee, args, ret: None } if callee.to_string() == "fields" => {
            for a in args {
                let Some(name) = &a.name else {
                    diags.push(bad(a.span, "a value without the field it pads".into()));
                    ok = false;
                    continue;
                };
                let Some(f) = fields.iter().find(|f| f.name == name.name) else {
                    let known: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                    let d = Diagnostic::error(
                        "E0376",
                        format!("`padding_values` of an unknown field `{}`", name.name),
                        name.span,
                        "not a field of the elements batched",
                    );
                    diags.push(match super::decls::closest(&name.name, &known) {
                        Some(c) => d.with_help(format!("did you mean `{c}`?")),
                        None => d.with_note(format!("the fields here: {}", known.join(", "))),
                    });
                    ok = false;
                    continue;
                };
                if out.iter().any(|(n, _)| n == &f.name) {
                    diags.push(Diagnostic::error(
                        "E0376",
                        format!("`padding_values` gives field `{}` twice", f.name),
                        a.span,
                        "given again",
                    ));
                    ok = false;
                    continue;
                }
                match pad_constant(&a.value, f, diags) {
                    Some(v) => out.push((f.name.clone(), v)),
                    None => ok = false,
                }
            }
        }
        _ if constant(e).is_some() => {
            // One value for every field padded (a list or a tensor), checked against each.
            for f in fields.iter().filter(|f| f.ty.as_ref().is_some_and(|t| t.shape != Shape::scalar())) {
                match pad_constant(e, f, diags) {
                    Some(v) => out.push((f.name.clone(), v)),
                    None => ok = false,
                }
            }
        }
        _ => {
            diags.push(bad(e.span, format!("this is `{e}`")));
            ok = false;
        }
    }
    if !ok {
        return None;
    }
    // In the element's field order, whatever the order written.
    out.sort_by_key(|(n, _)| fields.iter().position(|f| &f.name == n));
    Some(PaddingValues(out))
}

/// A literal number or boolean, negated or not, as a constant.
fn constant(e: &ast::Expr) -> Option<Value> {
    match &e.kind {
        ExprKind::Int(n) => Some(i64::try_from(*n).map_or(Value::UInt(*n), Value::Int)),
        ExprKind::Float(x) => Some(Value::Float(*x)),
        ExprKind::Bool(b) => Some(Value::Bool(*b)),
        ExprKind::Unary(UnaryOp::Neg, inner) => match &inner.kind {
            ExprKind::Int(n) if *n <= 1 << 63 => Some(Value::Int(0i64.wrapping_sub_unsigned(*n))),
            ExprKind::Float(x) => Some(Value::Float(-x)),
            _ => None,
        },
        _ => None,
    }
}

/// The constant `e` as a padding value of field `f`: a number its dtype holds (an
/// integer in range for integers, any number for floats, `true`/`false` for bools).
fn pad_constant(e: &ast::Expr, f: &FieldType, diags: &mut Vec<Diagnostic>) -> Option<Value> {
    let ty = f.ty.as_ref()?;
    let v = constant(e);
    let fits = match (&v, ty.dtype) {
        (Some(Value::Bool(_)), DType::Bool) => true,
        (Some(Value::Int(n)), d) if d.is_int() => int_fits(i128::from(*n), d),
        (Some(Value::UInt(n)), d) if d.is_int() => int_fits(i128::from(*n), d),
        (Some(Value::Int(_) | Value::UInt(_) | Value::Float(_)), d) => d.is_float(),
        _ => false,
    };
    if fits {
        return v;
    }
    let want = match ty.dtype {
        DType::Bool => "`true` or `false`".to_string(),
        d if d.is_int() => format!("an integer in the range of `{}`", d.name()),
        d if d.is_float() => "a number".to_string(),
        d => format!("nothing: `{}` values are never padded", d.name()),
    };
    diags.push(
        Diagnostic::error(
            "E0376",
            format!("padding value `{e}` does not fit field `{}`, which is `{ty}`", f.name),
            e.span,
            format!("`{}` pads with {want}", f.name),
        )
        .with_note(
            "a padding value is a constant of the field's dtype, checked when the pipeline is compiled",
        ),
    );
    None
}

/// Whether integer `n` is a value of integer dtype `d`.
fn int_fits(n: i128, d: DType) -> bool {
    let (lo, hi): (i128, i128) = match d {
        DType::U8 => (0, u8::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::I64 => (i64::MIN.into(), i64::MAX.into()),
        _ => (0, u64::MAX.into()),
    };
    (lo..=hi).contains(&n)
}

#[cfg(test)]
mod tests {
    /// The last node's `explain` line of `stage` over records of `tokens: i64[]`,
    /// `weights: f32[]`, `mask: u8[]` and `label: i64`, or the diagnostics.
    fn line(stage: &str) -> String {
        let src = format!(
            "pipeline p(files: glob = \"d/*\") {{
                schema {{ tokens: i64[], weights: f32[], mask: u8[], label: i64 }}
                tfrecords(files);
                map {{ parse_example(); }}
                {stage}
            }}"
        );
        match crate::compile(&src).into_result() {
            Ok(p) => p[0].logical.line().split(" -> ").next().unwrap_or_default().to_string(),
            Err(d) => d.iter().map(|d| format!("{}: {}\n", d.code, d.message)).collect(),
        }
    }

    #[test]
    fn padding_values_are_one_number_or_one_per_field_in_field_order() {
        insta::assert_snapshot!(line("padded_batch(4, padding_values: fields(weights: -0.5, tokens: -1));"), @"PaddedBatch: size=4, drop_remainder=false, pad_to=longest, padding_values={tokens: -1, weights: -0.5}");
        // One number: every padded field (not the scalar `label`), checked against each.
        insta::assert_snapshot!(line("padded_batch(4, padding_values: 7);"), @"PaddedBatch: size=4, drop_remainder=false, pad_to=longest, padding_values={tokens: 7, weights: 7, mask: 7}");
        insta::assert_snapshot!(line("padded_batch(4, padding_values: fields(label: 3));"), @"PaddedBatch: size=4, drop_remainder=false, pad_to=longest, padding_values={label: 3}");
        insta::assert_snapshot!(line("bucket_by_length(length: tokens, boundaries: [4], batch_sizes: [2, 2], padding_values: fields(mask: 255));"), @"BucketByLength: length=len(tokens), boundaries=[4], batch_sizes=[2, 2], pad_to_bucket_boundary=false, drop_remainder=false, padding_values={mask: 255}");
        // Not given: nothing printed, zeros.
        insta::assert_snapshot!(line("padded_batch(4);"), @"PaddedBatch: size=4, drop_remainder=false, pad_to=longest");
    }

    #[test]
    fn padding_values_that_do_not_fit_their_fields_are_errors() {
        insta::assert_snapshot!(line("padded_batch(4, padding_values: -1);"), @"E0376: padding value `-1` does not fit field `mask`, which is `u8[]`");
        insta::assert_snapshot!(line("padded_batch(4, padding_values: fields(tokens: 0.5, mask: 256, label: true));"), @r"
        E0376: padding value `0.5` does not fit field `tokens`, which is `i64[]`
        E0376: padding value `256` does not fit field `mask`, which is `u8[]`
        E0376: padding value `true` does not fit field `label`, which is `i64`
        ");
        insta::assert_snapshot!(line("padded_batch(4, padding_values: fields(token: 1, tokens: 1, tokens: 2));"), @r"
        E0376: `padding_values` of an unknown field `token`
        E0376: `padding_values` gives field `tokens` twice
        ");
        insta::assert_snapshot!(line("bucket_by_length(length: tokens, boundaries: [4], batch_sizes: [2, 2], padding_values: [1, 2]);"), @"E0376: `padding_values` is one number, or `fields(name: number, ...)`");
        insta::assert_snapshot!(line("padded_batch(4, padding_values: fields(1));"), @"E0376: `padding_values` is one number, or `fields(name: number, ...)`");
    }
}
