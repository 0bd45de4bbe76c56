//! Columnar batches: the column types a batch is made of, and the [`Batchable`] trait
//! that turns elements into columns and columns back into elements.
//!
//! A batch of `n` elements holds one contiguous buffer per field:
//!
//! - [`Dense<T, R>`]: shape `[n, ...row_shape]`, for scalars (`[n]`), fixed arrays
//!   (`[n, N]`), [`Tensor`]s of one shape (`[n, ...shape]`) and padded variable-length
//!   fields; `R` is the type of one row, so the column knows how to give rows back;
//! - [`Ragged<T>`]: the values of every element end to end, plus `n + 1` offsets
//!   (`offsets[0] == 0`, row `i` is `values[offsets[i]..offsets[i + 1]]`), for `Vec<T>`
//!   fields (`Vec<u8>` is a bytes column);
//! - [`Text`]: a [`Ragged<u8>`] whose rows are UTF-8, for `String` fields (the `str`
//!   type).
//!
//! Both expose their raw, dtype-typed buffers (`as_slice`, `shape`, `into_vec`,
//! `into_parts`) so a training loop can hand them to a tensor library without copying.
//!
//! # Implementing `Batchable` (what generated code does)
//!
//! For a record struct, the code generator emits a batch struct with one column per
//! field (`<F as Batchable>::Columns`), a builder struct with one builder per field, and
//! implements the traits field by field: `push` pushes each field and tags an error with
//! [`ColumnError::in_field`]; `finish` finishes each field; [`Columns::num_rows`] checks
//! that the fields agree with [`check_rows`]; [`Columns::row`] reassembles the record
//! from each field's row. Tuples (arity 1 to 4) are implemented exactly that way.
//!
//! Builders allocate their buffers once per batch, with capacity for the batch's
//! elements; nothing is boxed or dispatched dynamically per element.

use std::fmt;

mod append;
mod dense;
mod element;
mod named;
mod pool;
mod ragged;
pub mod recycle;
mod tensor;
mod text;
mod tuple;

pub use append::{Append, ColumnPart, Filled, split as split_column};
pub use dense::{Dense, DenseBuilder, DenseRow};
pub use element::Element;
pub use named::{AnyColumn, Buffer, IntoAnyColumn, IntoBuffer, NamedColumns};
pub use pool::{BufferPool, PooledVec};
pub use ragged::{PaddedVecBuilder, Ragged, RaggedBuilder};
pub use tensor::{PaddedTensorBuilder, Tensor, TensorBuilder};
pub use text::{Text, TextBuilder};

/// The element type of a column's buffer, for handing it to a tensor library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bool`.
    Bool,
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64` (what `range` yields).
    U64,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

/// A number a column can hold: plain data, copied into and out of column buffers.
pub trait Scalar: Element + Copy + PartialEq + fmt::Debug + Sync {
    /// The buffer's element type.
    const DTYPE: DType;
}

macro_rules! scalar {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Scalar for $t { const DTYPE: DType = DType::$d; })*
    };
}
scalar!(bool => Bool, u8 => U8, u16 => U16, u32 => U32, u64 => U64, i8 => I8, i16 => I16, i32 => I32, i64 => I64, f32 => F32, f64 => F64);

/// The columns of a batch, as one element of a dataset: what `batch` produces and
/// `unbatch` consumes.
pub trait Columns: Element {
    /// One element of the batch.
    type Row: Element;

    /// The number of rows, or an error when the columns of one batch disagree about it.
    fn num_rows(&self) -> Result<usize, ColumnError>;

    /// Row `i`, copied out of the columns. The caller guarantees `i < num_rows()`; a
    /// larger `i` may panic.
    fn row(&self, i: usize) -> Self::Row;
}

/// A batch of whole elements (what `chunks` makes, such as a batch of serialized
/// records): `unbatch` gives them back.
impl<T: Element + Clone> Columns for Vec<T> {
    type Row = T;
    fn num_rows(&self) -> Result<usize, ColumnError> {
        Ok(self.len())
    }
    fn row(&self, i: usize) -> T {
        self[i].clone()
    }
}

/// Builds the columns of one batch from its elements, in order.
///
/// After `push` returns an error the builder is in an unspecified state: drop it.
pub trait ColumnBuilder: Send + 'static {
    /// The elements pushed.
    type Item;
    /// What [`finish`](ColumnBuilder::finish) returns.
    type Columns: Columns;

    /// Appends one element. Errors when its shape does not fit the batch (a shape that
    /// differs from the batch's, or one longer than a declared padded shape); the error's
    /// `index` is the element's position in the batch.
    fn push(&mut self, x: Self::Item) -> Result<(), ColumnError>;

    /// The columns of the elements pushed.
    fn finish(self) -> Self::Columns;
}

/// An element that can be batched into columns, plain (`batch`) or padded
/// (`padded_batch`), and given back by `unbatch`.
pub trait Batchable: Element {
    /// The columns of a plain batch.
    type Columns: Columns<Row = Self>;
    /// Builds [`Columns`](Batchable::Columns).
    type Builder: ColumnBuilder<Item = Self, Columns = Self::Columns>;
    /// How `padded_batch` pads this type: `()` for fixed shapes, [`PadLen`] for `Vec<T>`,
    /// [`PadShape`] for [`Tensor`], a tuple of paddings for a tuple.
    type Padding: Clone + fmt::Debug + Send + Sync + 'static;
    /// The columns of a padded batch: dense for every variable-length field.
    type Padded: Columns<Row = Self>;
    /// Builds [`Padded`](Batchable::Padded).
    type PaddedBuilder: ColumnBuilder<Item = Self, Columns = Self::Padded>;

    /// A builder for a batch of `capacity` elements.
    fn builder(capacity: usize) -> Self::Builder;

    /// A builder for a padded batch of `capacity` elements.
    fn padded_builder(capacity: usize, padding: &Self::Padding) -> Self::PaddedBuilder;
}

/// How `padded_batch` pads a `Vec<T>` field: to the longest element of the batch
/// (rounded up to a multiple of `multiple`), or to a declared length, with `value`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PadLen<T> {
    /// The padded length; `None` pads to the longest element of each batch.
    pub len: Option<usize>,
    /// The value appended.
    pub value: T,
    /// Without a declared length: the padded length is the longest rounded up to a
    /// multiple of this (1: the longest itself; 0 counts as 1).
    pub multiple: usize,
}

impl<T> PadLen<T> {
    /// Pads every element to the longest of its batch.
    pub fn longest(value: T) -> Self {
        PadLen { len: None, value, multiple: 1 }
    }

    /// Pads every element to `len` (a longer element is an error).
    pub fn to(len: usize, value: T) -> Self {
        PadLen { len: Some(len), value, multiple: 1 }
    }

    /// Pads to the longest of the batch rounded up to a multiple of `k`
    /// (`padded_batch(pad_to_multiple: k)`); no effect with a declared length.
    #[must_use]
    pub fn multiple_of(self, k: usize) -> Self {
        PadLen { multiple: k.max(1), ..self }
    }
}

/// How `padded_batch` pads a [`Tensor`] field: every dimension to the largest in the
/// batch or to a declared size, with `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct PadShape<T> {
    /// The padded shape, one entry per dimension (`None`: the largest in the batch);
    /// `None` for the whole shape pads every dimension to the largest in the batch, the
    /// rank being the first element's.
    pub shape: Option<Vec<Option<usize>>>,
    /// The value padding is made of.
    pub value: T,
}

impl<T> PadShape<T> {
    /// Pads every dimension to the largest in the batch.
    pub fn longest(value: T) -> Self {
        PadShape { shape: None, value }
    }

    /// Pads to `shape` (`None` in a dimension: the largest in the batch).
    pub fn to(shape: impl Into<Vec<Option<usize>>>, value: T) -> Self {
        PadShape { shape: Some(shape.into()), value }
    }
}

/// Why elements do not fit in one batch, or columns do not form one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnError {
    /// The batch's position in its pass, counting from 0 (set by the batching stage; 0
    /// from a builder used directly).
    pub batch: u64,
    /// The element's position in the batch, counting from 0.
    pub index: usize,
    /// The field concerned, as a dotted path (`"1"`, `"image"`, `"0.tokens"`); empty for
    /// the element itself.
    pub field: String,
    /// What is wrong.
    pub kind: ColumnErrorKind,
}

/// What is wrong, in a [`ColumnError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnErrorKind {
    /// The element's shape differs from that of the batch's first element.
    ShapeMismatch {
        /// The batch's shape (its first element's).
        expected: Vec<usize>,
        /// This element's shape.
        found: Vec<usize>,
    },
    /// The element has more dimensions or fewer than the batch's padded shape.
    RankMismatch {
        /// The rank of the padded shape (declared, or the first element's).
        expected: usize,
        /// This element's shape.
        found: Vec<usize>,
    },
    /// The element is longer, in some dimension, than the declared padded shape.
    TooLong {
        /// This element's shape.
        found: Vec<usize>,
        /// The declared padded shape (`None`: the largest in the batch).
        declared: Vec<Option<usize>>,
    },
    /// The padded batch would not fit in memory (a declared padded shape far too large:
    /// more bytes than a buffer can address, or than the allocator grants for a padded
    /// `Vec` field).
    TooLarge {
        /// The padded batch's shape, up to and including this element.
        shape: Vec<usize>,
    },
    /// Two fields of one batch have different numbers of rows.
    RowCount {
        /// The first field's number of rows.
        expected: usize,
        /// This field's number of rows.
        found: usize,
    },
}

impl ColumnError {
    /// An error about element `index` of the batch.
    pub fn new(index: usize, kind: ColumnErrorKind) -> Self {
        ColumnError { batch: 0, index, field: String::new(), kind }
    }

    /// The same error, about field `name` of the element (prepended to the path).
    pub fn in_field(mut self, name: &str) -> Self {
        self.field = if self.field.is_empty() { name.to_string() } else { format!("{name}.{}", self.field) };
        self
    }

    /// The same error, in batch `batch` of the pass.
    pub fn at_batch(mut self, batch: u64) -> Self {
        self.batch = batch;
        self
    }
}

impl fmt::Display for ColumnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = if self.field.is_empty() { String::new() } else { format!(", field `{}`", self.field) };
        match &self.kind {
            ColumnErrorKind::RowCount { expected, found } => {
                write!(f, "batch {}{field}: {found} rows where the other fields have {expected}", self.batch)
            }
            kind => {
                write!(f, "batch {}, element {}{field}: ", self.batch, self.index)?;
                match kind {
                    ColumnErrorKind::ShapeMismatch { expected, found } => write!(
                        f,
                        "shape {found:?} differs from the batch's shape {expected:?} \
                         (use padded_batch for variable shapes)"
                    ),
                    ColumnErrorKind::RankMismatch { expected, found } => {
                        write!(f, "shape {found:?} does not have the padded rank {expected}")
                    }
                    ColumnErrorKind::TooLong { found, declared } => {
                        write!(f, "shape {found:?} is longer than the declared padded shape [")?;
                        for (i, d) in declared.iter().enumerate() {
                            let sep = if i == 0 { "" } else { ", " };
                            match d {
                                Some(d) => write!(f, "{sep}{d}")?,
                                None => write!(f, "{sep}?")?,
                            }
                        }
                        write!(f, "]")
                    }
                    ColumnErrorKind::TooLarge { shape } => {
                        write!(f, "the padded batch of shape {shape:?} would not fit in memory")
                    }
                    ColumnErrorKind::RowCount { .. } => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for ColumnError {}

/// The number of rows of a batch whose fields have `rows` rows each (`(name, rows)`),
/// or a [`ColumnErrorKind::RowCount`] error naming the first field that disagrees.
pub fn check_rows(rows: &[(&str, usize)]) -> Result<usize, ColumnError> {
    let Some(&(_, first)) = rows.first() else { return Ok(0) };
    match rows.iter().find(|(_, n)| *n != first) {
        None => Ok(first),
        Some(&(name, found)) => {
            Err(ColumnError::new(0, ColumnErrorKind::RowCount { expected: first, found }).in_field(name))
        }
    }
}

/// The product of `dims`, or `None` when it overflows.
pub(crate) fn checked_product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, d| acc.checked_mul(*d))
}
