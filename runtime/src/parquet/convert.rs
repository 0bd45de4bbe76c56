//! Arrow columns into row values of the schema's types: the check made when a file is
//! opened ([`TableColumn::check`]) and the copy of one row's value ([`write`]).

use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType};
use arrow_schema::DataType;

use crate::abi::table::{ColumnShape, ColumnType, RowValue, RowWriter, TableColumn};
use crate::column::Buffer;

impl ColumnType {
    /// Whether values of Arrow type `t` become this type without loss.
    fn takes(self, t: &DataType) -> bool {
        use ColumnType as C;
        use DataType as D;
        match t {
            D::Dictionary(_, v) => matches!(self, C::Str | C::Bytes) && self.takes(v),
            D::Boolean => self == C::Bool,
            D::Int8 | D::Int16 | D::Int32 => matches!(self, C::I32 | C::I64),
            D::UInt8 => matches!(self, C::U8 | C::I32 | C::U32 | C::I64 | C::U64),
            D::UInt16 => matches!(self, C::I32 | C::U32 | C::I64 | C::U64),
            D::UInt32 => matches!(self, C::U32 | C::I64 | C::U64),
            D::Int64 => self == C::I64,
            D::UInt64 => self == C::U64,
            D::Float32 => matches!(self, C::F32 | C::F64),
            D::Float64 => self == C::F64,
            D::Utf8 | D::LargeUtf8 | D::Utf8View => matches!(self, C::Str | C::Bytes),
            D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => self == C::Bytes,
            _ => false,
        }
    }
}

/// An Arrow type as pyarrow names it (`double`, `list<int32>`,
/// `fixed_size_list<float>[4]`), for errors.
pub(super) fn arrow_name(t: &DataType) -> String {
    use DataType as D;
    match t {
        D::Boolean => "bool".into(),
        D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => {
            format!("{t}").to_lowercase()
        }
        D::Float16 => "halffloat".into(),
        D::Float32 => "float".into(),
        D::Float64 => "double".into(),
        D::Utf8 => "string".into(),
        D::LargeUtf8 => "large_string".into(),
        D::Utf8View => "string_view".into(),
        D::Binary => "binary".into(),
        D::LargeBinary => "large_binary".into(),
        D::BinaryView => "binary_view".into(),
        D::FixedSizeBinary(n) => format!("fixed_size_binary[{n}]"),
        D::List(f) => format!("list<{}>", arrow_name(f.data_type())),
        D::LargeList(f) => format!("large_list<{}>", arrow_name(f.data_type())),
        D::FixedSizeList(f, n) => format!("fixed_size_list<{}>[{n}]", arrow_name(f.data_type())),
        D::Dictionary(k, v) => format!("dictionary<values={}, indices={}>", arrow_name(v), arrow_name(k)),
        other => format!("{other}"),
    }
}

/// The type a schema field would need for Arrow type `t` (for the error's hint).
fn suggested(t: &DataType) -> Option<&'static str> {
    use DataType as D;
    Some(match t {
        D::Boolean => "bool",
        D::Int8 | D::Int16 | D::Int32 => "i32",
        D::UInt8 => "u8",
        D::UInt16 | D::UInt32 => "u32",
        D::Int64 => "i64",
        D::UInt64 => "u64",
        D::Float32 => "f32",
        D::Float64 => "f64",
        D::Utf8 | D::LargeUtf8 | D::Utf8View => "str",
        D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => "bytes",
        D::Dictionary(_, v) => return suggested(v),
        _ => return None,
    })
}

impl TableColumn {
    /// Whether a column of Arrow type `t` holds this field's values: `Err` says why not.
    pub fn check(&self, t: &DataType) -> Result<(), String> {
        let want = match self.shape {
            ColumnShape::Scalar => self.dtype.name().to_string(),
            ColumnShape::List => format!("{}[]", self.dtype.name()),
            ColumnShape::Fixed(n) => format!("{}[{n}]", self.dtype.name()),
        };
        let mismatch = |why: &str| {
            let hint = match (self.shape, suggested(t)) {
                (ColumnShape::Scalar, Some(s)) => format!(" (declare it `{s}`)"),
                _ => String::new(),
            };
            Err(format!("the file holds {}, which is not {want}{why}{hint}", arrow_name(t)))
        };
        let item = match (t, self.shape) {
            (_, ColumnShape::Scalar) => t,
            (DataType::List(f) | DataType::LargeList(f), _) => f.data_type(),
            (DataType::FixedSizeList(_, m), ColumnShape::Fixed(n)) if usize::try_from(*m).ok() != Some(n) => {
                return mismatch(&format!(": its lists hold {m} values"));
            }
            (DataType::FixedSizeList(f, _), _) => f.data_type(),
            _ => return mismatch(""),
        };
        if self.shape != ColumnShape::Scalar && matches!(self.dtype, ColumnType::Str | ColumnType::Bytes) {
            return mismatch(": lists of strings are not read yet");
        }
        if !self.dtype.takes(item) {
            return mismatch(if self.shape == ColumnShape::Scalar {
                ""
            } else {
                " (its items do not convert)"
            });
        }
        Ok(())
    }
}

/// Where converted values go: a row's column ([`RowWriter`]) or a batch's column
/// ([`Buffer`] of the field's type).
pub(super) trait Sink {
    /// Appends `values` (one row's, for a row).
    fn values<T: RowValue>(&mut self, values: impl ExactSizeIterator<Item = T>) -> Result<(), String>;
}

impl Sink for RowWriter {
    fn values<T: RowValue>(&mut self, values: impl ExactSizeIterator<Item = T>) -> Result<(), String> {
        RowWriter::values(self, values)
    }
}

impl Sink for Buffer {
    fn values<T: RowValue>(&mut self, values: impl ExactSizeIterator<Item = T>) -> Result<(), String> {
        let dtype = self.dtype();
        let v = T::vec_in(self).ok_or_else(|| format!("{} values into a column of {dtype:?}", T::NAME))?;
        v.extend(values);
        Ok(())
    }
}

/// The values of `array` as bytes, with the size of one, when `c` is a scalar of the
/// array's own type (no conversion) and the array has no nulls: a row's value is then its
/// bytes as they are (the row encoding is little-endian, as Arrow's buffers are here).
pub(super) fn plain(c: &TableColumn, array: &dyn Array) -> Option<(arrow_buffer::Buffer, usize)> {
    if !cfg!(target_endian = "little") || c.shape != ColumnShape::Scalar || array.null_count() > 0 {
        return None;
    }
    let (size, values) = match (c.dtype, array.data_type()) {
        (ColumnType::U8, DataType::UInt8) => (1, array.as_primitive::<UInt8Type>().values().inner()),
        (ColumnType::I32, DataType::Int32) => (4, array.as_primitive::<Int32Type>().values().inner()),
        (ColumnType::U32, DataType::UInt32) => (4, array.as_primitive::<UInt32Type>().values().inner()),
        (ColumnType::I64, DataType::Int64) => (8, array.as_primitive::<Int64Type>().values().inner()),
        (ColumnType::U64, DataType::UInt64) => (8, array.as_primitive::<UInt64Type>().values().inner()),
        (ColumnType::F32, DataType::Float32) => (4, array.as_primitive::<Float32Type>().values().inner()),
        (ColumnType::F64, DataType::Float64) => (8, array.as_primitive::<Float64Type>().values().inner()),
        _ => return None,
    };
    (values.len() == array.len() * size).then(|| (values.clone(), size))
}

/// Writes row `i` of `array` (a column that passed [`TableColumn::check`]) as the
/// column's next value.
pub(super) fn write(c: &TableColumn, array: &dyn Array, i: usize, w: &mut RowWriter) -> Result<(), String> {
    if array.is_null(i) {
        w.null();
        return Ok(());
    }
    match c.shape {
        ColumnShape::Scalar => match c.dtype {
            ColumnType::Str | ColumnType::Bytes => w.bytes(bytes_at(array, i)?),
            _ => numbers(c.dtype, array, i..i + 1, w),
        },
        ColumnShape::List | ColumnShape::Fixed(_) => {
            let (items, range) = match array.data_type() {
                DataType::List(_) => {
                    let l = array.as_list::<i32>();
                    let o = l.value_offsets();
                    (l.values(), to_usize(o[i])..to_usize(o[i + 1]))
                }
                DataType::LargeList(_) => {
                    let l = array.as_list::<i64>();
                    let o = l.value_offsets();
                    (l.values(), to_usize(o[i])..to_usize(o[i + 1]))
                }
                DataType::FixedSizeList(..) => {
                    let l = array.as_fixed_size_list();
                    let start = to_usize(l.value_offset_at(i));
                    (l.values(), start..start + to_usize(l.value_length()))
                }
                t => return Err(format!("a list column read as {t}")),
            };
            if items.null_count() > 0 && range.clone().any(|k| items.is_null(k)) {
                return Err("a null inside the list".into());
            }
            numbers(c.dtype, items.as_ref(), range, w)
        }
    }
}

fn to_usize<T: TryInto<usize>>(v: T) -> usize {
    v.try_into().unwrap_or(usize::MAX)
}

/// The bytes of row `i` of a string or binary column.
fn bytes_at(array: &dyn Array, i: usize) -> Result<&[u8], String> {
    Ok(match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(i).as_bytes(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(i).as_bytes(),
        DataType::Utf8View => array.as_string_view().value(i).as_bytes(),
        DataType::Binary => array.as_binary::<i32>().value(i),
        DataType::LargeBinary => array.as_binary::<i64>().value(i),
        DataType::BinaryView => array.as_binary_view().value(i),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().value(i),
        DataType::Dictionary(..) => {
            let d = array.as_any_dictionary();
            let keys = d.keys();
            let key = match keys.data_type() {
                DataType::Int8 => to_usize(keys.as_primitive::<Int8Type>().value(i)),
                DataType::Int16 => to_usize(keys.as_primitive::<Int16Type>().value(i)),
                DataType::Int32 => to_usize(keys.as_primitive::<Int32Type>().value(i)),
                DataType::Int64 => to_usize(keys.as_primitive::<Int64Type>().value(i)),
                DataType::UInt8 => to_usize(keys.as_primitive::<UInt8Type>().value(i)),
                DataType::UInt16 => to_usize(keys.as_primitive::<UInt16Type>().value(i)),
                DataType::UInt32 => to_usize(keys.as_primitive::<UInt32Type>().value(i)),
                DataType::UInt64 => to_usize(keys.as_primitive::<UInt64Type>().value(i)),
                t => return Err(format!("dictionary keys of {t}")),
            };
            let values = d.values();
            if key >= values.len() {
                return Err(format!("dictionary key {key} past its {} values", values.len()));
            }
            if values.is_null(key) {
                return Err("a null dictionary value".into());
            }
            bytes_at(values.as_ref(), key)?
        }
        t => return Err(format!("a string column read as {t}")),
    })
}

/// Writes the values `range` of the numeric (or boolean) `array` as `dtype`.
#[allow(clippy::unnecessary_cast, clippy::cast_lossless)]
pub(super) fn numbers<S: Sink>(
    dtype: ColumnType,
    array: &dyn Array,
    range: Range<usize>,
    w: &mut S,
) -> Result<(), String> {
    if range.end > array.len() || range.start > range.end {
        return Err(format!("values {range:?} of an array of {}", array.len()));
    }
    if dtype == ColumnType::Bool {
        let b =
            array.as_boolean_opt().ok_or_else(|| format!("a bool column read as {}", array.data_type()))?;
        return w.values(range.map(|k| b.value(k)));
    }
    macro_rules! into {
        ($t:ty) => {
            match array.data_type() {
                DataType::Int8 => put::<Int8Type, $t, S>(array, range, w, |v| v as $t),
                DataType::Int16 => put::<Int16Type, $t, S>(array, range, w, |v| v as $t),
                DataType::Int32 => put::<Int32Type, $t, S>(array, range, w, |v| v as $t),
                DataType::Int64 => put::<Int64Type, $t, S>(array, range, w, |v| v as $t),
                DataType::UInt8 => put::<UInt8Type, $t, S>(array, range, w, |v| v as $t),
                DataType::UInt16 => put::<UInt16Type, $t, S>(array, range, w, |v| v as $t),
                DataType::UInt32 => put::<UInt32Type, $t, S>(array, range, w, |v| v as $t),
                DataType::UInt64 => put::<UInt64Type, $t, S>(array, range, w, |v| v as $t),
                DataType::Float32 => put::<Float32Type, $t, S>(array, range, w, |v| v as $t),
                DataType::Float64 => put::<Float64Type, $t, S>(array, range, w, |v| v as $t),
                t => Err(format!("a numeric column read as {t}")),
            }
        };
    }
    // The check at open allowed only lossless pairs, so each `as` keeps the value.
    match dtype {
        ColumnType::U8 => into!(u8),
        ColumnType::I32 => into!(i32),
        ColumnType::U32 => into!(u32),
        ColumnType::I64 => into!(i64),
        ColumnType::U64 => into!(u64),
        ColumnType::F32 => into!(f32),
        ColumnType::F64 => into!(f64),
        ColumnType::Bool | ColumnType::Str | ColumnType::Bytes => Err(format!("numbers as {}", dtype.name())),
    }
}

fn put<P: ArrowPrimitiveType, T: RowValue, S: Sink>(
    array: &dyn Array,
    range: Range<usize>,
    w: &mut S,
    conv: impl Fn(P::Native) -> T,
) -> Result<(), String> {
    let values = &array.as_primitive::<P>().values()[range];
    w.values(values.iter().map(|&v| conv(v)))
}
