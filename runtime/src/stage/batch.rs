//! `batch`, `padded_batch` and `unbatch`: elements to columnar batches and back.
//!
//! A batching pass pulls up to `n` elements into a staging buffer it keeps for the whole
//! pass (time counted as waiting for input), then builds the batch's columns from them
//! (busy time), each column allocated once with room for the batch. The last, partial
//! batch is delivered unless `drop_remainder`. An element that does not fit its batch (a
//! shape differing from the first element's, or longer than a declared padded shape)
//! ends the pass with [`Error::Stage`] whose source is a [`ColumnError`](crate::column::ColumnError) naming the batch,
//! the element's index in it, the field and both shapes.
//!
//! `unbatch` splits each batch into its rows at once (busy time), then hands them out.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::{Ctx, DataIter, Dataset, Element, StageStats};
use crate::column::{Batchable, ColumnBuilder, Columns};
use crate::error::{Error, Result};

/// The most elements the staging buffer reserves room for up front.
const MAX_RESERVE: usize = 1 << 16;

/// Makes the column builder of each batch: plain or padded.
pub trait MakeBuilder<T>: Send + 'static {
    /// The builder made.
    type Builder: ColumnBuilder<Item = T>;
    /// A builder for a batch of `capacity` elements.
    fn make(&self, capacity: usize) -> Self::Builder;
}

/// Builds plain batches ([`Batchable::Columns`]).
#[derive(Debug, Clone, Copy)]
pub struct Plain;

impl<T: Batchable> MakeBuilder<T> for Plain {
    type Builder = T::Builder;
    #[inline]
    fn make(&self, capacity: usize) -> T::Builder {
        T::builder(capacity)
    }
}

/// Builds padded batches ([`Batchable::Padded`]) with a padding.
#[derive(Debug)]
pub struct Padded<P>(Arc<P>);

impl<T: Batchable> MakeBuilder<T> for Padded<T::Padding> {
    type Builder = T::PaddedBuilder;
    #[inline]
    fn make(&self, capacity: usize) -> T::PaddedBuilder {
        T::padded_builder(capacity, &self.0)
    }
}

/// The `batch` stage: groups `n` consecutive elements into [`Batchable::Columns`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Batch<D> {
    input: D,
    n: usize,
    drop_remainder: bool,
    stats: Arc<StageStats>,
}

impl<D> Batch<D> {
    pub(crate) fn new(input: D, n: usize, drop_remainder: bool) -> Self {
        Batch { input, n, drop_remainder, stats: Arc::new(StageStats::new("batch")) }
    }
}

impl<D: Dataset> Dataset for Batch<D>
where
    D::Item: Batchable,
{
    type Item = <D::Item as Batchable>::Columns;
    type Iter = BatchIter<D::Iter, Plain>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        BatchIter::start(&self.input, ctx, 0, self.n, self.drop_remainder, Plain, &self.stats)
    }

    /// `output` batches are `output × n` elements.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<super::StagePosition>) {
        self.input.positions(epoch, output.saturating_mul(self.n as u64), found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<super::Layer> {
        self.input.redeal_of(epoch)
    }

    /// `skip` batches are `skip × n` elements.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        BatchIter::start(&self.input, ctx, skip, self.n, self.drop_remainder, Plain, &self.stats)
    }
}

/// The `padded_batch` stage: like [`Batch`], with every variable-length field padded into
/// a dense column ([`Batchable::Padded`]).
#[must_use = "datasets are lazy: iterate them"]
pub struct PaddedBatch<D: Dataset>
where
    D::Item: Batchable,
{
    input: D,
    n: usize,
    drop_remainder: bool,
    padding: Arc<<D::Item as Batchable>::Padding>,
    stats: Arc<StageStats>,
}

impl<D: Dataset> PaddedBatch<D>
where
    D::Item: Batchable,
{
    pub(crate) fn new(
        input: D,
        n: usize,
        drop_remainder: bool,
        padding: <D::Item as Batchable>::Padding,
    ) -> Self {
        PaddedBatch {
            input,
            n,
            drop_remainder,
            padding: Arc::new(padding),
            stats: Arc::new(StageStats::new("padded_batch")),
        }
    }
}

impl<D: Dataset + fmt::Debug> fmt::Debug for PaddedBatch<D>
where
    D::Item: Batchable,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaddedBatch")
            .field("input", &self.input)
            .field("n", &self.n)
            .field("drop_remainder", &self.drop_remainder)
            .field("padding", &self.padding)
            .finish()
    }
}

impl<D: Dataset> Dataset for PaddedBatch<D>
where
    D::Item: Batchable,
{
    type Item = <D::Item as Batchable>::Padded;
    type Iter = BatchIter<D::Iter, Padded<<D::Item as Batchable>::Padding>>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// `output` batches are `output × n` elements.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<super::StagePosition>) {
        self.input.positions(epoch, output.saturating_mul(self.n as u64), found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<super::Layer> {
        self.input.redeal_of(epoch)
    }

    /// `skip` batches are `skip × n` elements (each batch is padded on its own).
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        let make = Padded(self.padding.clone());
        BatchIter::start(&self.input, ctx, skip, self.n, self.drop_remainder, make, &self.stats)
    }
}

/// One pass of [`Batch`] or [`PaddedBatch`]. Its state is the input's position and the
/// number of batches delivered.
pub struct BatchIter<I: DataIter, M> {
    input: Option<I>,
    n: usize,
    drop_remainder: bool,
    make: M,
    staging: Vec<I::Item>,
    batches: u64,
    stats: Arc<StageStats>,
}

impl<I: DataIter, M: MakeBuilder<I::Item>> BatchIter<I, M> {
    fn start<D: Dataset<Iter = I>>(
        input: &D,
        ctx: &Ctx,
        skip: u64,
        n: usize,
        drop_remainder: bool,
        make: M,
        stats: &Arc<StageStats>,
    ) -> Result<Self> {
        if n == 0 {
            return Err(Error::Invalid(format!("{}: the batch size must be at least 1", stats.name())));
        }
        ctx.register(stats);
        Ok(BatchIter {
            input: Some(input.iter_from(ctx, skip.saturating_mul(n as u64))?),
            n,
            drop_remainder,
            make,
            staging: Vec::with_capacity(n.min(MAX_RESERVE)),
            batches: 0,
            stats: stats.clone(),
        })
    }
}

impl<I: DataIter, M> fmt::Debug for BatchIter<I, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchIter")
            .field("stage", &self.stats.name())
            .field("n", &self.n)
            .field("drop_remainder", &self.drop_remainder)
            .field("batches", &self.batches)
            .field("done", &self.input.is_none())
            .finish_non_exhaustive()
    }
}

impl<I: DataIter, M: MakeBuilder<I::Item>> DataIter for BatchIter<I, M> {
    type Item = <M::Builder as ColumnBuilder>::Columns;

    fn next(&mut self) -> Result<Option<Self::Item>> {
        let Some(input) = self.input.as_mut() else { return Ok(None) };
        let start = Instant::now();
        while self.staging.len() < self.n {
            match input.next() {
                Ok(Some(x)) => self.staging.push(x),
                Ok(None) => {
                    self.input = None;
                    break;
                }
                Err(e) => {
                    self.input = None;
                    self.staging.clear();
                    return Err(e);
                }
            }
        }
        let pulled = Instant::now();
        self.stats.add_wait_input(pulled - start);
        if self.staging.is_empty() || (self.staging.len() < self.n && self.drop_remainder) {
            self.staging.clear();
            return Ok(None);
        }
        let mut builder = self.make.make(self.staging.len());
        for x in self.staging.drain(..) {
            if let Err(e) = builder.push(x) {
                self.input = None;
                return Err(Error::Stage {
                    stage: self.stats.name().to_string(),
                    source: Box::new(e.at_batch(self.batches)),
                });
            }
        }
        let columns = builder.finish();
        self.batches += 1;
        self.stats.add_busy(pulled.elapsed());
        self.stats.produced(columns.byte_size());
        Ok(Some(columns))
    }
}

/// The `unbatch` stage: the rows of every batch, in order.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Unbatch<D> {
    input: D,
    stats: Arc<StageStats>,
}

impl<D> Unbatch<D> {
    pub(crate) fn new(input: D) -> Self {
        Unbatch { input, stats: Arc::new(StageStats::new("unbatch")) }
    }
}

impl<D: Dataset> Dataset for Unbatch<D>
where
    D::Item: Columns,
{
    type Item = <D::Item as Columns>::Row;
    type Iter = UnbatchIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        Ok(UnbatchIter {
            input: Some(self.input.iter(ctx)?),
            rows: Vec::new(),
            batches: 0,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`Unbatch`]: the rows of the current batch (last first, handed out from
/// the end) and the input's position.
pub struct UnbatchIter<I: DataIter>
where
    I::Item: Columns,
{
    input: Option<I>,
    rows: Vec<<I::Item as Columns>::Row>,
    batches: u64,
    stats: Arc<StageStats>,
}

impl<I: DataIter> fmt::Debug for UnbatchIter<I>
where
    I::Item: Columns,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnbatchIter")
            .field("rows_left", &self.rows.len())
            .field("batches", &self.batches)
            .field("done", &self.input.is_none())
            .finish_non_exhaustive()
    }
}

impl<I: DataIter> DataIter for UnbatchIter<I>
where
    I::Item: Columns,
{
    type Item = <I::Item as Columns>::Row;

    fn next(&mut self) -> Result<Option<Self::Item>> {
        loop {
            if let Some(x) = self.rows.pop() {
                self.stats.produced(x.byte_size());
                return Ok(Some(x));
            }
            let Some(input) = self.input.as_mut() else { return Ok(None) };
            let start = Instant::now();
            let batch = input.next();
            let pulled = Instant::now();
            self.stats.add_wait_input(pulled - start);
            let batch = match batch {
                Ok(Some(batch)) => batch,
                Ok(None) => {
                    self.input = None;
                    return Ok(None);
                }
                Err(e) => {
                    self.input = None;
                    return Err(e);
                }
            };
            let n = match batch.num_rows() {
                Ok(n) => n,
                Err(e) => {
                    self.input = None;
                    return Err(Error::Stage {
                        stage: self.stats.name().to_string(),
                        source: Box::new(e.at_batch(self.batches)),
                    });
                }
            };
            self.rows.reserve(n);
            self.rows.extend((0..n).rev().map(|i| batch.row(i)));
            self.batches += 1;
            self.stats.add_busy(pulled.elapsed());
        }
    }
}
