//! [`Dense`] columns (one buffer of shape `[n, ...row_shape]`), the [`DenseRow`] types
//! they give back, and the batching of scalars and fixed arrays.

use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;

use super::{Batchable, ColumnBuilder, ColumnError, Columns, DType, Element, Scalar, checked_product};
use crate::error::{Error, Result};

/// A dense column: `n` rows of one shape in one contiguous row-major buffer of shape
/// `[n, ...row_shape]`. `R` is the type of one row (`T` for scalars, `[T; N]`,
/// `Vec<T>` for padded vectors, [`Tensor<T>`](super::Tensor)).
pub struct Dense<T: Scalar, R = T> {
    shape: Vec<usize>,
    data: Vec<T>,
    row_len: usize,
    row: PhantomData<fn() -> R>,
}

/// A type a row of a [`Dense`] column of `T` can be turned back into.
pub trait DenseRow<T: Scalar>: Element {
    /// Whether a column of shape `shape` (`[n, ...row_shape]`) has rows of this type.
    fn fits(shape: &[usize]) -> bool;

    /// The row made of `values`, of shape `row_shape`.
    fn from_values(values: &[T], row_shape: &[usize]) -> Self;
}

impl<T: Scalar, R: DenseRow<T>> Dense<T, R> {
    /// A column from its shape (`[n, ...row_shape]`) and row-major values. Errors when
    /// the shape does not hold `data.len()` values or does not fit rows of type `R`.
    pub fn new(shape: Vec<usize>, data: Vec<T>) -> Result<Self> {
        if !R::fits(&shape) || checked_product(&shape) != Some(data.len()) {
            return Err(Error::Invalid(format!(
                "dense column: shape {shape:?} does not fit {} values of rows of type {}",
                data.len(),
                std::any::type_name::<R>()
            )));
        }
        Ok(Dense::from_valid(shape, data))
    }

    /// A column whose shape is known to be valid.
    pub(crate) fn from_valid(shape: Vec<usize>, data: Vec<T>) -> Self {
        let row_len = checked_product(&shape[1..]).unwrap_or(0);
        Dense { shape, data, row_len, row: PhantomData }
    }
}

impl<T: Scalar, R> Dense<T, R> {
    /// The shape, `[n, ...row_shape]`.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values, row-major.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The values, row-major, for in-place work (a vectorized map after `batch`).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// The buffer, without copying.
    pub fn into_vec(mut self) -> Vec<T> {
        std::mem::take(&mut self.data)
    }

    /// The shape and the buffer, without copying.
    pub fn into_parts(mut self) -> (Vec<usize>, Vec<T>) {
        (std::mem::take(&mut self.shape), std::mem::take(&mut self.data))
    }

    /// The buffer's element type.
    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.shape[0]
    }

    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A dropped column's buffer goes back to [`recycle`](super::recycle) for the next
/// batch (a big one; a small one is freed).
impl<T: Scalar, R> Drop for Dense<T, R> {
    fn drop(&mut self) {
        super::recycle::give(std::mem::take(&mut self.data));
    }
}

impl<T: Scalar, R> Clone for Dense<T, R> {
    fn clone(&self) -> Self {
        Dense { shape: self.shape.clone(), data: self.data.clone(), row_len: self.row_len, row: PhantomData }
    }
}

impl<T: Scalar, R> PartialEq for Dense<T, R> {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape && self.data == other.data
    }
}

impl<T: Scalar, R> fmt::Debug for Dense<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dense").field("shape", &self.shape).field("data", &self.data).finish()
    }
}

impl<T: Scalar, R: 'static> Element for Dense<T, R> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.shape.len() * size_of::<usize>() + self.data.len() * size_of::<T>()
    }
}

impl<T: Scalar, R: DenseRow<T>> Columns for Dense<T, R> {
    type Row = R;

    fn num_rows(&self) -> Result<usize, ColumnError> {
        Ok(self.shape[0])
    }

    #[inline]
    fn row(&self, i: usize) -> R {
        let k = self.row_len;
        R::from_values(&self.data[i * k..(i + 1) * k], &self.shape[1..])
    }
}

impl<T: Scalar, const N: usize> DenseRow<T> for [T; N] {
    fn fits(shape: &[usize]) -> bool {
        shape.len() == 2 && shape[1] == N
    }

    #[inline]
    fn from_values(values: &[T], _: &[usize]) -> Self {
        std::array::from_fn(|j| values[j])
    }
}

impl<T: Scalar> DenseRow<T> for Vec<T> {
    fn fits(shape: &[usize]) -> bool {
        shape.len() == 2
    }

    #[inline]
    fn from_values(values: &[T], _: &[usize]) -> Self {
        values.to_vec()
    }
}

/// Builds a [`Dense`] column of scalars (`[n]`) or fixed arrays (`[n, N]`).
#[derive(Debug)]
pub struct DenseBuilder<T, R = T> {
    data: Vec<T>,
    rows: usize,
    row: PhantomData<fn() -> R>,
}

impl<T: Scalar, R> DenseBuilder<T, R> {
    fn with_capacity(values: usize) -> Self {
        DenseBuilder { data: super::recycle::vec_with_capacity(values), rows: 0, row: PhantomData }
    }
}

impl<T: Scalar, const N: usize> ColumnBuilder for DenseBuilder<T, [T; N]> {
    type Item = [T; N];
    type Columns = Dense<T, [T; N]>;

    #[inline]
    fn push(&mut self, x: [T; N]) -> Result<(), ColumnError> {
        self.data.extend_from_slice(&x);
        self.rows += 1;
        Ok(())
    }

    fn finish(self) -> Self::Columns {
        Dense::from_valid(vec![self.rows, N], self.data)
    }
}

impl<T: Scalar, const N: usize> Batchable for [T; N] {
    type Columns = Dense<T, [T; N]>;
    type Builder = DenseBuilder<T, [T; N]>;
    type Padding = ();
    type Padded = Dense<T, [T; N]>;
    type PaddedBuilder = DenseBuilder<T, [T; N]>;

    fn builder(capacity: usize) -> Self::Builder {
        DenseBuilder::with_capacity(capacity.saturating_mul(N))
    }

    fn padded_builder(capacity: usize, _: &()) -> Self::PaddedBuilder {
        Self::builder(capacity)
    }
}

// Scalars are implemented per type (not as a blanket `impl<T: Scalar>`) so that their
// impls cannot overlap those of arrays, vectors and tensors.
macro_rules! scalar_columns {
    ($($t:ty),*) => {$(
        impl DenseRow<$t> for $t {
            fn fits(shape: &[usize]) -> bool {
                shape.len() == 1
            }

            #[inline]
            fn from_values(values: &[$t], _: &[usize]) -> Self {
                values[0]
            }
        }

        impl ColumnBuilder for DenseBuilder<$t, $t> {
            type Item = $t;
            type Columns = Dense<$t, $t>;

            #[inline]
            fn push(&mut self, x: $t) -> Result<(), ColumnError> {
                self.data.push(x);
                self.rows += 1;
                Ok(())
            }

            fn finish(self) -> Self::Columns {
                Dense::from_valid(vec![self.rows], self.data)
            }
        }

        impl Batchable for $t {
            type Columns = Dense<$t, $t>;
            type Builder = DenseBuilder<$t, $t>;
            type Padding = ();
            type Padded = Dense<$t, $t>;
            type PaddedBuilder = DenseBuilder<$t, $t>;

            fn builder(capacity: usize) -> Self::Builder {
                DenseBuilder::with_capacity(capacity)
            }

            fn padded_builder(capacity: usize, _: &()) -> Self::PaddedBuilder {
                Self::builder(capacity)
            }
        }
    )*};
}
scalar_columns!(bool, u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);
