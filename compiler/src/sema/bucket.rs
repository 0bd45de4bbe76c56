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
//! `len(boundaries) + 1` integer constants of at least 1.

use crate::ast::{self, ExprKind};
use crate::diagnostic::Diagnostic;
use crate::ir::bucket::{BucketByLength, BucketSpec, LengthOf};
use crate::ir::plan::{Element, FieldType, Plan};
use crate::ir::types::{DType, Dim, Shape};

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
    let ((length, length_of), boundaries, batch_sizes) = (length?, boundaries?, batch_sizes?);
    let (pad_to_bucket_boundary, drop_remainder) = flags;
    let spec =
        BucketSpec { length, length_of, boundaries, batch_sizes, pad_to_bucket_boundary, drop_remainder };
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
