//! The runs of map statements both backends compute in one fused pass, recognized once
//! here so that the code generator (`codegen/expr/fused.rs`) and the engine
//! (`sluice-engine`) fuse exactly the same statements: `decode_jpeg` → `resize` →
//! `scale(1/255)` → `normalize` ([`jpeg_run`]) and `decode_raw` → `reshape` → arithmetic
//! ([`raw_run`]). A fused pass gives the values, errors and bits of its statements one by
//! one; only where the values are written changes. So are the maps of batches of records
//! both fill straight into fixed-size columns, row range by row range
//! ([`fills_columns_by_rows`]), whose rows the pipeline's pool may split.

use super::element::Element;
use super::expr::{Expr, ExprKind};
use super::map_op::MapOp;
use super::op::{ImageFormat, Op};
use super::types::{DType, Dim, Shape, TensorType};

/// Whether a batch of records mapped by `ops` into rows of `output` is filled straight
/// into fixed-size batch columns, row range by row range, so that the pipeline's pool may
/// split its rows (the runtime's `stage/rows.rs`): every field of the row a number or
/// `bool` of a fixed shape, and nothing random (a random row needs its position, drawn
/// in order). The code generator's `map_rows_*`/`parse_rows_*` functions and the
/// engine's `columns_of_rows` fill exactly these; `explain` marks the stages that may
/// split (`rows=split`).
pub fn fills_columns_by_rows(input: &Element, ops: &[MapOp], output: &Element) -> bool {
    let Element::Fields(fields) = output else { return false };
    *input == Element::Record
        && !fields.is_empty()
        && fields.iter().all(|f| f.ty.as_ref().is_some_and(fixed_column))
        && !ops.iter().any(MapOp::is_random)
}

/// Whether values of type `t` make a fixed-size batch column of numbers or `bool`s.
pub fn fixed_column(t: &TensorType) -> bool {
    !matches!(t.dtype, DType::Str | DType::Bytes | DType::F16 | DType::Bf16)
        && matches!(&t.shape, Shape::Dims(d) if d.iter().all(|d| matches!(d, Dim::Fixed(_))))
}

/// `t = decode_jpeg(b, channels: 3); t = resize(t, h, w); t = scale(t, 1.0 / 255.0);
/// t = normalize(t, mean, std);`: the runtime's `decode_resize_normalize_*`.
#[derive(Debug, Clone, Copy)]
pub struct JpegRun<'a> {
    /// The field the four statements assign.
    pub target: &'a str,
    /// The encoded image.
    pub bytes: &'a Expr,
    /// `decode_jpeg`'s `max_pixels`.
    pub max_pixels: Option<u64>,
    /// `resize`'s height and width.
    pub h: &'a Expr,
    /// Width.
    pub w: &'a Expr,
    /// `normalize`'s mean and standard deviation (a list of floats, or one).
    pub mean: &'a Expr,
    /// Standard deviation.
    pub std: &'a Expr,
    /// The type of the last statement's value.
    pub ty: &'a TensorType,
}

impl JpegRun<'_> {
    /// The statements a run spans.
    pub const LEN: usize = 4;
}

/// The [`JpegRun`] that `ops` starts with, if it does.
pub fn jpeg_run(ops: &[MapOp]) -> Option<JpegRun<'_>> {
    let [
        MapOp::Assign { target, value: e0, .. },
        MapOp::Assign { target: t1, value: e1, .. },
        MapOp::Assign { target: t2, value: e2, .. },
        MapOp::Assign { target: t3, value: e3, ty, .. },
        ..,
    ] = ops
    else {
        return None;
    };
    if [t1, t2, t3].iter().any(|t| *t != target) {
        return None;
    }
    let of_target = |x: &Expr| x.field() == Some(target.as_str());
    let (
        Some(Op::DecodeImage { format: ImageFormat::Jpeg, bytes, channels: None | Some(3), max_pixels }),
        Some(Op::Resize { image, h, w }),
        Some(Op::Scale { x: scaled, factor }),
        Some(Op::Normalize { x: normalized, mean, std }),
    ) = (e0.op(), e1.op(), e2.op(), e3.op())
    else {
        return None;
    };
    let factor_ok = factor.const_f64().is_some_and(|v| v as f32 == 1.0f32 / 255.0);
    if !factor_ok || !of_target(image) || !of_target(scaled) || !of_target(normalized) {
        return None;
    }
    Some(JpegRun { target, bytes, max_pixels: *max_pixels, h, w, mean, std, ty })
}

/// How many of `ops` make `t = decode_raw(b, T); t = reshape(t, dims);` and then,
/// optionally, `t = <arithmetic over t alone>` (`cast(t, f32) / 255.0`): the run decoded
/// straight into `t`'s column. 0 when `ops` does not start so.
pub fn raw_run(ops: &[MapOp]) -> usize {
    let [MapOp::Assign { target, value: e0, .. }, MapOp::Assign { target: t1, value: e1, .. }, rest @ ..] =
        ops
    else {
        return 0;
    };
    let of_target = |x: &Expr| x.field() == Some(target.as_str());
    let (Some(Op::DecodeRaw { .. }), Some(Op::Reshape { x, .. })) = (e0.op(), e1.op()) else {
        return 0;
    };
    if t1 != target || !of_target(x) {
        return 0;
    }
    match rest.first() {
        Some(MapOp::Assign { target: t2, value, reads, .. })
            if t2 == target
                && matches!(value.kind, ExprKind::Binary(..) | ExprKind::Unary(..))
                && reads.iter().all(|r| r == target) =>
        {
            3
        }
        _ => 2,
    }
}

/// Whether `op` reads or writes field `target` (a parse writes every field): a run whose
/// field nothing after it touches may write the field's batch column directly.
pub fn touches(op: &MapOp, target: &str) -> bool {
    match op {
        MapOp::Assign { target: t, reads, .. } => t == target || reads.iter().any(|r| r == target),
        MapOp::Parse { .. } => true,
    }
}

/// Whether no statement of `rest` touches `target`.
pub fn untouched(rest: &[MapOp], target: &str) -> bool {
    !rest.iter().any(|op| touches(op, target))
}
