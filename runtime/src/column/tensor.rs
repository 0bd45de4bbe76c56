//! [`Tensor`]: a dense value whose shape is known at run time, and its batching into a
//! [`Dense`] column `[n, ...shape]`, plain (every element the same shape) or padded.

use std::mem::size_of;

use super::{
    Batchable, ColumnBuilder, ColumnError, ColumnErrorKind, Dense, DenseRow, Element, PadShape, Scalar,
    checked_product,
};
use crate::error::{Error, Result};

/// A dense, row-major array whose shape is known at run time.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<T> {
    shape: Vec<usize>,
    data: Vec<T>,
}

impl<T: Scalar> Tensor<T> {
    /// A tensor from its shape and row-major values. Errors unless the shape holds
    /// exactly `data.len()` values.
    pub fn new(shape: Vec<usize>, data: Vec<T>) -> Result<Self> {
        if checked_product(&shape) != Some(data.len()) {
            return Err(Error::Invalid(format!(
                "tensor: shape {shape:?} does not hold {} values",
                data.len()
            )));
        }
        Ok(Tensor { shape, data })
    }

    /// A one-dimensional tensor of `data`.
    pub fn from_vec(data: Vec<T>) -> Self {
        Tensor { shape: vec![data.len()], data }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The values, row-major.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The values, row-major, to change in place.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// The shape and the values, without copying.
    pub fn into_parts(self) -> (Vec<usize>, Vec<T>) {
        (self.shape, self.data)
    }
}

impl<T: Scalar> Element for Tensor<T> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.shape.len() * size_of::<usize>() + self.data.len() * size_of::<T>()
    }
}

impl<T: Scalar> DenseRow<T> for Tensor<T> {
    fn fits(shape: &[usize]) -> bool {
        !shape.is_empty()
    }

    #[inline]
    fn from_values(values: &[T], row_shape: &[usize]) -> Self {
        Tensor { shape: row_shape.to_vec(), data: values.to_vec() }
    }
}

/// Builds a [`Dense`] column from tensors that all have the first one's shape.
#[derive(Debug)]
pub struct TensorBuilder<T> {
    shape: Option<Vec<usize>>,
    data: Vec<T>,
    rows: usize,
    capacity: usize,
}

impl<T: Scalar> ColumnBuilder for TensorBuilder<T> {
    type Item = Tensor<T>;
    type Columns = Dense<T, Tensor<T>>;

    #[inline]
    fn push(&mut self, x: Tensor<T>) -> Result<(), ColumnError> {
        match &self.shape {
            None => {
                self.data.reserve(x.data.len().saturating_mul(self.capacity));
                self.shape = Some(x.shape);
            }
            Some(shape) if *shape != x.shape => {
                return Err(ColumnError::new(
                    self.rows,
                    ColumnErrorKind::ShapeMismatch { expected: shape.clone(), found: x.shape },
                ));
            }
            Some(_) => {}
        }
        self.data.extend_from_slice(&x.data);
        self.rows += 1;
        Ok(())
    }

    fn finish(self) -> Dense<T, Tensor<T>> {
        let mut shape = Vec::with_capacity(1 + self.shape.as_ref().map_or(0, Vec::len));
        shape.push(self.rows);
        shape.extend(self.shape.unwrap_or_default());
        Dense::from_valid(shape, self.data)
    }
}

/// Builds a [`Dense`] column from tensors of one rank, each padded to the declared shape
/// or to the largest size in the batch in every dimension.
#[derive(Debug)]
pub struct PaddedTensorBuilder<T> {
    pad: PadShape<T>,
    rank: Option<usize>,
    /// Every element's shape, end to end (`rank` values each).
    shapes: Vec<usize>,
    values: Vec<T>,
    largest: Vec<usize>,
    rows: usize,
    capacity: usize,
}

impl<T: Scalar> ColumnBuilder for PaddedTensorBuilder<T> {
    type Item = Tensor<T>;
    type Columns = Dense<T, Tensor<T>>;

    fn push(&mut self, x: Tensor<T>) -> Result<(), ColumnError> {
        let rank = *self.rank.get_or_insert(x.shape.len());
        if x.shape.len() != rank {
            return Err(ColumnError::new(
                self.rows,
                ColumnErrorKind::RankMismatch { expected: rank, found: x.shape },
            ));
        }
        if let Some(declared) = &self.pad.shape
            && x.shape.iter().zip(declared).any(|(d, l)| l.is_some_and(|l| *d > l))
        {
            return Err(ColumnError::new(
                self.rows,
                ColumnErrorKind::TooLong { found: x.shape, declared: declared.clone() },
            ));
        }
        if self.rows == 0 {
            self.largest = vec![0; rank];
        }
        // The padded batch's size with this element must be addressable before anything
        // grows (a declared shape may be absurdly large).
        let declared = self.pad.shape.as_deref();
        let padded_dim = |d: usize| declared.and_then(|s| s[d]).unwrap_or(self.largest[d].max(x.shape[d]));
        let values = (0..rank).try_fold(self.rows + 1, |n, d| n.checked_mul(padded_dim(d)));
        if values.and_then(|n| n.checked_mul(size_of::<T>())).is_none_or(|b| b > isize::MAX as usize) {
            let shape = std::iter::once(self.rows + 1).chain((0..rank).map(padded_dim)).collect();
            return Err(ColumnError::new(self.rows, ColumnErrorKind::TooLarge { shape }));
        }
        if self.rows == 0 {
            self.shapes.reserve(rank.saturating_mul(self.capacity));
            self.values.reserve(x.data.len().saturating_mul(self.capacity));
        }
        for (l, d) in self.largest.iter_mut().zip(&x.shape) {
            *l = (*l).max(*d);
        }
        self.shapes.extend_from_slice(&x.shape);
        self.values.extend_from_slice(&x.data);
        self.rows += 1;
        Ok(())
    }

    fn finish(self) -> Dense<T, Tensor<T>> {
        let rank = self.rank.unwrap_or(0);
        let target: Vec<usize> = match &self.pad.shape {
            Some(declared) => declared.iter().zip(&self.largest).map(|(d, l)| d.unwrap_or(*l)).collect(),
            None => self.largest.clone(),
        };
        let k = checked_product(&target).unwrap_or(usize::MAX);
        let mut out = vec![self.pad.value; self.rows.saturating_mul(k)];
        // Strides of the padded row (row-major).
        let mut strides = vec![1usize; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].saturating_mul(target[d + 1]);
        }
        let mut index = Vec::with_capacity(rank);
        let mut at = 0;
        for r in 0..self.rows {
            let shape = &self.shapes[r * rank..(r + 1) * rank];
            let n = checked_product(shape).unwrap_or(0);
            copy_padded(&self.values[at..at + n], shape, &mut out[r * k..(r + 1) * k], &strides, &mut index);
            at += n;
        }
        let mut shape = Vec::with_capacity(1 + rank);
        shape.push(self.rows);
        shape.extend_from_slice(&target);
        Dense::from_valid(shape, out)
    }
}

/// Copies the row-major `src` of shape `shape` into the top-left corner of `dst`, a
/// row-major array with `strides` (of the same rank, at least as large in every
/// dimension). `index` is scratch space.
fn copy_padded<T: Copy>(
    src: &[T],
    shape: &[usize],
    dst: &mut [T],
    strides: &[usize],
    index: &mut Vec<usize>,
) {
    let Some((&inner, outer)) = shape.split_last() else {
        dst.copy_from_slice(src);
        return;
    };
    if src.is_empty() {
        return;
    }
    index.clear();
    index.resize(outer.len(), 0);
    for run in src.chunks_exact(inner) {
        let at: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        dst[at..at + inner].copy_from_slice(run);
        for d in (0..outer.len()).rev() {
            index[d] += 1;
            if index[d] < outer[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

impl<T: Scalar> Batchable for Tensor<T> {
    type Columns = Dense<T, Tensor<T>>;
    type Builder = TensorBuilder<T>;
    type Padding = PadShape<T>;
    type Padded = Dense<T, Tensor<T>>;
    type PaddedBuilder = PaddedTensorBuilder<T>;

    fn builder(capacity: usize) -> TensorBuilder<T> {
        TensorBuilder { shape: None, data: Vec::new(), rows: 0, capacity }
    }

    fn padded_builder(capacity: usize, padding: &PadShape<T>) -> PaddedTensorBuilder<T> {
        PaddedTensorBuilder {
            pad: padding.clone(),
            rank: padding.shape.as_ref().map(Vec::len),
            shapes: Vec::new(),
            values: Vec::new(),
            largest: Vec::new(),
            rows: 0,
            capacity,
        }
    }
}
