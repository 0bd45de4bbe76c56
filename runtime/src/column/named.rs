//! Batches as named, type-erased columns: what a training loop (the `torch` feature's
//! tensors, or any other tensor library) takes from a generated batch struct.
//!
//! Every batch struct the code generator writes implements [`NamedColumns`]: it gives up
//! its columns, in field order, each as an [`AnyColumn`] that owns the column's buffer.
//! Nothing is copied: the `Vec`s the batch was built in move out as they are.

use super::{DType, Dense, Ragged, Scalar, Text};

/// A column's buffer, its element type erased.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Buffer {
    Bool(Vec<bool>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Applies `$f` to the `Vec` inside a [`Buffer`], whatever its type.
macro_rules! each_buffer {
    ($buf:expr, $v:ident => $f:expr) => {
        match $buf {
            Buffer::Bool($v) => $f,
            Buffer::U8($v) => $f,
            Buffer::U16($v) => $f,
            Buffer::U32($v) => $f,
            Buffer::U64($v) => $f,
            Buffer::I8($v) => $f,
            Buffer::I16($v) => $f,
            Buffer::I32($v) => $f,
            Buffer::I64($v) => $f,
            Buffer::F32($v) => $f,
            Buffer::F64($v) => $f,
        }
    };
}

impl Buffer {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Buffer::Bool(_) => DType::Bool,
            Buffer::U8(_) => DType::U8,
            Buffer::U16(_) => DType::U16,
            Buffer::U32(_) => DType::U32,
            Buffer::U64(_) => DType::U64,
            Buffer::I8(_) => DType::I8,
            Buffer::I16(_) => DType::I16,
            Buffer::I32(_) => DType::I32,
            Buffer::I64(_) => DType::I64,
            Buffer::F32(_) => DType::F32,
            Buffer::F64(_) => DType::F64,
        }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        each_buffer!(self, v => v.len())
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values' bytes, in native byte order.
    pub fn as_bytes(&self) -> &[u8] {
        fn bytes<T: Scalar>(v: &[T]) -> &[u8] {
            // SAFETY: every `Scalar` is a plain number (or `bool`) with no padding, so
            // its bytes are initialised; the slice covers exactly `v`'s memory and
            // borrows it.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        }
        each_buffer!(self, v => bytes(v))
    }
}

/// A [`Scalar`] whose `Vec` becomes a [`Buffer`] without copying, and back.
pub trait IntoBuffer: Scalar {
    /// The buffer holding `v`.
    fn into_buffer(v: Vec<Self>) -> Buffer;
    /// The values of `b` when it holds this type (`Err(b)` otherwise), without copying.
    fn from_buffer(b: Buffer) -> Result<Vec<Self>, Buffer>;
    /// The `Vec` inside `b` when it holds this type.
    fn vec_in(b: &mut Buffer) -> Option<&mut Vec<Self>>;
}

macro_rules! into_buffer {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl IntoBuffer for $t {
            fn into_buffer(v: Vec<Self>) -> Buffer {
                Buffer::$d(v)
            }
            fn from_buffer(b: Buffer) -> Result<Vec<Self>, Buffer> {
                match b {
                    Buffer::$d(v) => Ok(v),
                    other => Err(other),
                }
            }
            fn vec_in(b: &mut Buffer) -> Option<&mut Vec<Self>> {
                match b {
                    Buffer::$d(v) => Some(v),
                    _ => None,
                }
            }
        })*
    };
}
into_buffer!(bool => Bool, u8 => U8, u16 => U16, u32 => U32, u64 => U64, i8 => I8, i16 => I16, i32 => I32, i64 => I64, f32 => F32, f64 => F64);

/// One column of a batch of `n` rows, owning its buffers.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyColumn {
    /// Shape `[n, ...row_shape]`, row-major (a [`Dense`] column).
    Dense {
        /// `[n, ...row_shape]`.
        shape: Vec<usize>,
        /// `shape.iter().product()` values.
        data: Buffer,
    },
    /// Variable-length rows end to end plus `n + 1` offsets (a [`Ragged`] column).
    Ragged {
        /// Every row's values.
        values: Buffer,
        /// Row `i` is `values[offsets[i]..offsets[i + 1]]`.
        offsets: Vec<i64>,
    },
}

impl AnyColumn {
    /// The number of rows.
    pub fn rows(&self) -> usize {
        match self {
            AnyColumn::Dense { shape, .. } => shape[0],
            AnyColumn::Ragged { offsets, .. } => offsets.len() - 1,
        }
    }
}

/// A column that can give up its buffers as an [`AnyColumn`].
pub trait IntoAnyColumn {
    /// The column, its buffers moved, not copied.
    fn into_any_column(self) -> AnyColumn;
}

impl<T: IntoBuffer, R> IntoAnyColumn for Dense<T, R> {
    fn into_any_column(self) -> AnyColumn {
        let (shape, data) = self.into_parts();
        AnyColumn::Dense { shape, data: T::into_buffer(data) }
    }
}

impl<T: IntoBuffer> IntoAnyColumn for Ragged<T> {
    fn into_any_column(self) -> AnyColumn {
        let (values, offsets) = self.into_parts();
        AnyColumn::Ragged { values: T::into_buffer(values), offsets }
    }
}

/// Strings as ragged bytes: their UTF-8 bytes and offsets.
impl IntoAnyColumn for Text {
    fn into_any_column(self) -> AnyColumn {
        self.into_ragged().into_any_column()
    }
}

/// A batch whose columns have names: every generated batch struct (one column per field
/// of its record, named like the field).
pub trait NamedColumns {
    /// The columns in field order, with their names, buffers moved out.
    fn into_named_columns(self) -> Vec<(&'static str, AnyColumn)>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::{Batchable, ColumnBuilder};

    #[test]
    fn columns_move_out_with_shape_and_type() {
        let mut b = <[f32; 2] as Batchable>::builder(2);
        b.push([1.0, 2.0]).unwrap();
        b.push([3.0, 4.0]).unwrap();
        let dense = b.finish();
        let ptr = dense.as_slice().as_ptr();
        let c = dense.into_any_column();
        assert_eq!(c.rows(), 2);
        let AnyColumn::Dense { shape, data: Buffer::F32(v) } = c else { panic!("{c:?}") };
        assert_eq!((shape, v.as_ptr()), (vec![2, 2], ptr), "moved, not copied");

        let mut b = <Vec<u8> as Batchable>::builder(2);
        b.push(b"ab".to_vec()).unwrap();
        b.push(Vec::new()).unwrap();
        let c = b.finish().into_any_column();
        assert_eq!(c.rows(), 2);
        assert_eq!(c, AnyColumn::Ragged { values: Buffer::U8(b"ab".to_vec()), offsets: vec![0, 2, 2] });

        let mut b = <String as Batchable>::builder(2);
        b.push("é".to_string()).unwrap();
        b.push("x".to_string()).unwrap();
        let c = b.finish().into_any_column();
        assert_eq!(
            c,
            AnyColumn::Ragged { values: Buffer::U8("éx".as_bytes().to_vec()), offsets: vec![0, 2, 3] }
        );
    }

    #[test]
    fn buffer_bytes_are_native_order() {
        let b = Buffer::I32(vec![1, -1]);
        assert_eq!(b.dtype(), DType::I32);
        assert_eq!(b.len(), 2);
        let mut want = 1i32.to_ne_bytes().to_vec();
        want.extend((-1i32).to_ne_bytes());
        assert_eq!(b.as_bytes(), &want[..]);
    }
}
