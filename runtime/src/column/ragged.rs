//! [`Ragged`] columns (values end to end plus offsets) for `Vec<T>` fields, and their
//! padded form: a [`Dense`] column `[n, len]`.

use std::fmt;
use std::mem::size_of;

use super::{
    Batchable, ColumnBuilder, ColumnError, ColumnErrorKind, Columns, DType, Dense, Element, PadLen, Scalar,
};
use crate::error::{Error, Result};

/// The most values a padded builder reserves up front (it grows past this as needed).
const MAX_RESERVE: usize = 1 << 24;

/// A ragged column: the values of `n` variable-length rows end to end, and `n + 1`
/// offsets into them (`offsets[0] == 0`, row `i` is `values[offsets[i]..offsets[i + 1]]`).
/// Offsets are `i64`, the index type tensor libraries take.
#[derive(Clone, PartialEq)]
pub struct Ragged<T> {
    values: Vec<T>,
    offsets: Vec<i64>,
}

impl<T: Scalar> Ragged<T> {
    /// A column from its values and offsets. Errors unless the offsets start at 0, never
    /// decrease and end at `values.len()`.
    pub fn new(values: Vec<T>, offsets: Vec<i64>) -> Result<Self> {
        let ok = offsets.first() == Some(&0)
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets.last().and_then(|o| usize::try_from(*o).ok()) == Some(values.len());
        if !ok {
            return Err(Error::Invalid(format!(
                "ragged column: offsets must start at 0, never decrease and end at {} (the number of values)",
                values.len()
            )));
        }
        Ok(Ragged { values, offsets })
    }

    /// The values of every row, end to end.
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// The `n + 1` offsets.
    pub fn offsets(&self) -> &[i64] {
        &self.offsets
    }

    /// The values and the offsets, without copying.
    pub fn into_parts(self) -> (Vec<T>, Vec<i64>) {
        (self.values, self.offsets)
    }

    /// The values' element type.
    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`'s values (`i < len()`, or this panics like slice indexing).
    pub fn row_values(&self, i: usize) -> &[T] {
        &self.values[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

impl<T: fmt::Debug> fmt::Debug for Ragged<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ragged").field("values", &self.values).field("offsets", &self.offsets).finish()
    }
}

impl<T: Scalar> Element for Ragged<T> {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.values.len() * size_of::<T>() + self.offsets.len() * size_of::<i64>()
    }
}

impl<T: Scalar> Columns for Ragged<T> {
    type Row = Vec<T>;

    fn num_rows(&self) -> Result<usize, ColumnError> {
        Ok(self.len())
    }

    #[inline]
    fn row(&self, i: usize) -> Vec<T> {
        self.row_values(i).to_vec()
    }
}

/// Builds a [`Ragged`] column.
#[derive(Debug)]
pub struct RaggedBuilder<T> {
    values: Vec<T>,
    offsets: Vec<i64>,
    capacity: usize,
}

impl<T: Scalar> ColumnBuilder for RaggedBuilder<T> {
    type Item = Vec<T>;
    type Columns = Ragged<T>;

    #[inline]
    fn push(&mut self, x: Vec<T>) -> Result<(), ColumnError> {
        if self.offsets.len() == 1 {
            // The first element's length times the batch size is the guess for the values.
            self.values.reserve(x.len().saturating_mul(self.capacity));
        }
        self.values.extend_from_slice(&x);
        self.offsets.push(self.values.len() as i64);
        Ok(())
    }

    fn finish(self) -> Ragged<T> {
        Ragged { values: self.values, offsets: self.offsets }
    }
}

/// Builds the padded form of a `Vec<T>` field: a [`Dense`] column `[n, len]`, `len` being
/// declared or the longest element's.
#[derive(Debug)]
pub struct PaddedVecBuilder<T> {
    pad: PadLen<T>,
    data: Vec<T>,
    /// Where each row ends in `data` (only when padding to the longest).
    ends: Vec<usize>,
    rows: usize,
    longest: usize,
    capacity: usize,
}

impl<T: Scalar> ColumnBuilder for PaddedVecBuilder<T> {
    type Item = Vec<T>;
    type Columns = Dense<T, Vec<T>>;

    #[inline]
    fn push(&mut self, x: Vec<T>) -> Result<(), ColumnError> {
        match self.pad.len {
            Some(len) => {
                if x.len() > len {
                    return Err(ColumnError::new(
                        self.rows,
                        ColumnErrorKind::TooLong { found: vec![x.len()], declared: vec![Some(len)] },
                    ));
                }
                // A declared length far too large for memory is an error, not an abort.
                if self.data.try_reserve(len).is_err() {
                    let shape = vec![self.rows + 1, len];
                    return Err(ColumnError::new(self.rows, ColumnErrorKind::TooLarge { shape }));
                }
                self.data.extend_from_slice(&x);
                self.data.resize(self.data.len() + (len - x.len()), self.pad.value);
            }
            None => {
                if self.rows == 0 {
                    self.data.reserve(x.len().saturating_mul(self.capacity));
                }
                self.data.extend_from_slice(&x);
                self.ends.push(self.data.len());
                self.longest = self.longest.max(x.len());
            }
        }
        self.rows += 1;
        Ok(())
    }

    fn finish(mut self) -> Dense<T, Vec<T>> {
        let len = match self.pad.len {
            Some(len) => len,
            None => {
                // Spread the rows out in place, last first: row i moves to i * longest,
                // which is at or after where it is, and after every row not yet moved.
                let k = self.pad.multiple.max(1);
                let m = self.longest.div_ceil(k).saturating_mul(k);
                self.data.resize(self.rows * m, self.pad.value);
                for i in (0..self.rows).rev() {
                    let start = if i == 0 { 0 } else { self.ends[i - 1] };
                    let end = self.ends[i];
                    self.data.copy_within(start..end, i * m);
                    self.data[i * m + (end - start)..(i + 1) * m].fill(self.pad.value);
                }
                m
            }
        };
        Dense::from_valid(vec![self.rows, len], self.data)
    }
}

impl<T: Scalar> Batchable for Vec<T> {
    type Columns = Ragged<T>;
    type Builder = RaggedBuilder<T>;
    type Padding = PadLen<T>;
    type Padded = Dense<T, Vec<T>>;
    type PaddedBuilder = PaddedVecBuilder<T>;

    fn builder(capacity: usize) -> RaggedBuilder<T> {
        let mut offsets = Vec::with_capacity(capacity.saturating_add(1));
        offsets.push(0);
        RaggedBuilder { values: Vec::new(), offsets, capacity }
    }

    fn padded_builder(capacity: usize, padding: &PadLen<T>) -> PaddedVecBuilder<T> {
        let (data, ends) = match padding.len {
            // Reserve for the whole batch only when it is a sane size: a declared length too large
            // for memory is reported by `push`.
            Some(len) => (Vec::with_capacity(capacity.saturating_mul(len).min(MAX_RESERVE)), Vec::new()),
            None => (Vec::new(), Vec::with_capacity(capacity)),
        };
        PaddedVecBuilder { pad: *padding, data, ends, rows: 0, longest: 0, capacity }
    }
}
