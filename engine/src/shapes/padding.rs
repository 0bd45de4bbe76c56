//! A padded batch's padding: what each field pads to and with what value, by the plan's
//! types, as the generated `Padding` struct says.

use sluice_compiler::ir::bucket::PaddingValues;
use sluice_compiler::ir::plan::{ArgValue, FieldType};
use sluice_compiler::ir::types::{DType, Dim, Shape, Value as Const};

use super::{R, invalid, kind_of, usize_arg};
use crate::num::Num;
use crate::params::Params;
use crate::value::Kind;

/// How one field of a padded batch pads (by the plan's type), as the generated
/// `Padding` struct says.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Pad {
    /// Not padded (scalars, byte strings, strings).
    No,
    /// A list: to `len`, or to the longest rounded up to a multiple of `multiple`.
    Len { len: Option<usize>, multiple: usize, value: Num },
    /// A tensor: each dimension to its declared size (`None`: the largest).
    Shape { shape: Option<Vec<Option<usize>>>, value: Num },
}

/// How `padded_batch` or one bucket of `bucket_by_length` pads each field of an
/// element, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Padding(pub(super) Vec<Pad>);

/// The value a field of `dtype` pads with (`codegen/context.rs`'s `pad_value`): the
/// constant given, as a literal of the field's type, or 0 (`false`).
pub(super) fn pad_value(v: Option<&Const>, dtype: DType) -> R<Num> {
    let n = match v {
        None => Num::Bool(false),
        Some(Const::Bool(b)) => Num::Bool(*b),
        Some(Const::Int(n)) if dtype.is_float() => Num::F64(*n as f64),
        Some(Const::Int(n)) => Num::I64(*n),
        Some(Const::UInt(n)) => Num::U64(*n),
        Some(Const::Float(x)) => Num::F64(*x),
        Some(other) => return Err(invalid(format!("padding value `{other}` is not a number"))),
    };
    n.cast(dtype).map_err(invalid)
}

impl Padding {
    /// `padded_batch`'s padding: lists to `pad_to`, or to the longest (a multiple of
    /// `pad_to_multiple`), tensors to their largest.
    pub(crate) fn batch(
        fields: &[FieldType],
        pad_to: Option<&ArgValue>,
        pad_to_multiple: Option<&ArgValue>,
        values: &PaddingValues,
        p: &Params,
    ) -> R<Padding> {
        let mut pads = Vec::with_capacity(fields.len());
        for f in fields {
            let ty = f.ty.as_ref().ok_or_else(|| invalid("an untyped field"))?;
            // Byte strings and strings are never padded (and have no pad value).
            let value = match ty.dtype {
                DType::Bytes | DType::Str => Num::Bool(false),
                dtype => pad_value(values.get(&f.name), dtype)?,
            };
            pads.push(match (ty.dtype, kind_of(ty)) {
                (DType::Bytes | DType::Str, _) | (_, Kind::Scalar) => Pad::No,
                (_, Kind::List) => match (pad_to, pad_to_multiple) {
                    (Some(v), _) => Pad::Len { len: Some(usize_arg(p, v)?), multiple: 1, value },
                    (None, Some(m)) => Pad::Len { len: None, multiple: usize_arg(p, m)?.max(1), value },
                    (None, None) => Pad::Len { len: None, multiple: 1, value },
                },
                (_, Kind::Tensor) => Pad::Shape { shape: None, value },
            });
        }
        Ok(Padding(pads))
    }

    /// The padding of `bucket_by_length`'s bucket with `boundary` (`None`: the last
    /// bucket, or without `pad_to_bucket_boundary`): every variable dimension to
    /// `boundary - 1`, or to the longest (`codegen/context.rs`'s `bucket_padding`).
    pub(super) fn bucket(fields: &[FieldType], boundary: Option<u64>, values: &PaddingValues) -> R<Padding> {
        let fill = boundary
            .map(|b| usize::try_from(b - 1).map_err(|_| invalid("a bucket boundary beyond this machine")));
        let fill = fill.transpose()?;
        let mut pads = Vec::with_capacity(fields.len());
        for f in fields {
            let ty = f.ty.as_ref().ok_or_else(|| invalid("an untyped field"))?;
            // Byte strings and strings are never padded (and have no pad value).
            let value = match ty.dtype {
                DType::Bytes | DType::Str => Num::Bool(false),
                dtype => pad_value(values.get(&f.name), dtype)?,
            };
            pads.push(match (ty.dtype, kind_of(ty), fill, &ty.shape) {
                (DType::Bytes | DType::Str, ..) | (_, Kind::Scalar, ..) => Pad::No,
                (_, Kind::List, Some(n), _) => Pad::Len { len: Some(n), multiple: 1, value },
                (_, Kind::List, None, _) => Pad::Len { len: None, multiple: 1, value },
                (_, Kind::Tensor, Some(n), Shape::Dims(dims)) => Pad::Shape {
                    shape: Some(
                        dims.iter()
                            .map(|d| match d {
                                Dim::Fixed(_) => None,
                                Dim::Named(_) => Some(n),
                            })
                            .collect(),
                    ),
                    value,
                },
                (_, Kind::Tensor, ..) => Pad::Shape { shape: None, value },
            });
        }
        Ok(Padding(pads))
    }
}
