//! `interleave`: opens a dataset per input element (typically the records of one file)
//! and draws from up to `cycle_length` of them in turn, `block_length` elements at a time
//! — tf.data's `interleave` — on the consumer's thread, or with worker threads that read
//! the open datasets ahead into bounded per-slot buffers.
//!
//! See [`Interleave`] for the order, the threading model and errors.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use super::{Ctx, DataIter, Dataset, Files, Parallelism, StageStats, TfRecordFile, call_user, tfrecord_file};
use crate::error::{Error, Result};
use crate::tfrecord::ReaderOptions;

mod par;
mod seq;
mod workers;

use par::{Par, ParConfig};
use seq::Seq;

/// The largest accepted `cycle_length` (each slot costs a few bytes up front; files are
/// buffered only once open).
pub const MAX_CYCLE_LENGTH: usize = crate::defaults::MAX_CYCLE_LENGTH;

/// Elements each open dataset may have read ahead, by default, when the stage runs on
/// worker threads.
pub const DEFAULT_BUFFER_PER_SLOT: usize = crate::defaults::INTERLEAVE_BUFFER_PER_SLOT;

/// The function of `interleave`: makes the dataset of one input element.
///
/// Closures `Fn(T) -> D` implement it; [`OpenTfRecord`] is a nameable one for generated
/// code. A closure passed to [`Dataset::interleave`] needs its argument type written out
/// (`|path: PathBuf| …`), since the compiler does not infer it through this trait.
pub trait InterleaveFn<T>: Send + Sync + 'static {
    /// The dataset made per input element.
    type Output: Dataset;
    /// Makes the dataset of `x` (it is iterated in a [nested](Ctx::nested) context).
    fn open(&self, x: T) -> Self::Output;
}

impl<T, D, F> InterleaveFn<T> for F
where
    F: Fn(T) -> D + Send + Sync + 'static,
    D: Dataset,
{
    type Output = D;

    #[inline]
    fn open(&self, x: T) -> D {
        self(x)
    }
}

/// Opens each path as a TFRecord file with shared [`ReaderOptions`].
#[derive(Debug, Clone)]
pub struct OpenTfRecord {
    options: Arc<ReaderOptions>,
}

impl OpenTfRecord {
    /// Opens files with `options`.
    pub fn new(options: ReaderOptions) -> Self {
        OpenTfRecord { options: Arc::new(options) }
    }

    /// The reader options.
    pub fn options(&self) -> &ReaderOptions {
        &self.options
    }
}

impl InterleaveFn<PathBuf> for OpenTfRecord {
    type Output = TfRecordFile;

    fn open(&self, path: PathBuf) -> TfRecordFile {
        tfrecord_file(path, (*self.options).clone())
    }
}

/// tf.data's AUTOTUNE cycle length for an interleave over `input`'s elements (file
/// paths): the cores available, at most the number of elements (no slot stays empty), at
/// least 1. It counts the input once, when the pipeline is built; the order of an
/// interleave depends on its cycle, so a pipeline with `cycle: auto` reads in another
/// order on a machine with another number of cores.
pub fn auto_cycle<D: Dataset>(input: &D) -> Result<usize> {
    let mut n = 0usize;
    for x in input.stream()? {
        x?;
        n += 1;
    }
    Ok(crate::stage::available_cores().min(n).clamp(1, MAX_CYCLE_LENGTH))
}

/// The records of `files`, read `cycle_length` files at a time, one record from each in
/// turn (block length 1). Set threads with [`num_parallel`](Interleave::num_parallel).
pub fn tfrecords(
    files: Files,
    options: ReaderOptions,
    cycle_length: usize,
) -> Interleave<Files, OpenTfRecord> {
    files.interleave(OpenTfRecord::new(options), cycle_length, 1)
}

/// The `interleave` stage: made by [`Dataset::interleave`] or [`tfrecords`].
///
/// `cycle_length` must be in `1..=MAX_CYCLE_LENGTH` and `block_length` at least 1;
/// otherwise [`iter`](Dataset::iter) returns [`Error::Invalid`] (so does
/// `num_parallel(0)` or `buffer_per_slot(0)`).
///
/// # Order
///
/// The order is tf.data's, step for step. A cursor walks `cycle_length` slots. At a slot
/// holding an open dataset it takes that dataset's next element; after `block_length`
/// elements it moves on to the next slot. When the dataset in a slot is exhausted, the slot
/// is emptied and the cursor moves on; when the cursor reaches an empty slot and the input
/// has elements left, the next input element is opened there and read at once. The stream
/// ends when the input and every slot are exhausted.
///
/// # Threads
///
/// With one thread (`num_parallel(1)`, the default) the stage runs that loop directly on
/// the consumer's thread. With more, the consumer still runs the same loop, so the order
/// is the same for any thread count when `deterministic` is true, but it takes each
/// element from a bounded buffer per open dataset. Worker threads fill those buffers: the
/// datasets in the slots nearest the cursor first, then they pull upcoming input elements
/// and open them early (at most `min(threads, cycle_length)` ahead), so opening and reading
/// many files overlaps. A worker blocks on a condition variable when every buffer it could
/// fill is full (backpressure); memory is bounded by `(cycle_length + prefetched inputs) ×
/// buffer_per_slot` elements. With `deterministic(false)` the consumer, instead of waiting
/// for the slot under the cursor, takes an element from any other slot that has one ready
/// (tf.data's "sloppy" interleave): the same elements, in an order that depends on timing.
///
/// Errors from the input, from opening a dataset or from reading one reach the consumer at
/// the point of the sequential order where they occurred, and end the stream. A panic in
/// the user's `open` function (on any thread), or in an inner iterator on a worker thread,
/// becomes [`Error::Panic`] naming the stage. Dropping the iterator stops and joins its
/// workers; a worker finishes at most the one element it is reading. (On the consumer's
/// thread an inner iterator that panics unwinds into the consumer, as in every sequential
/// stage; the stages inside it catch their own user functions.)
///
/// # Statistics
///
/// The stage registers one [`StageStats`]: elements and bytes delivered, its thread count,
/// busy time (opening and reading the inner datasets), input wait (pulling the input
/// elements), output wait (idle workers: every buffer they could fill is full or taken,
/// or the input is done), and
/// the fill of all per-slot buffers, sampled at each delivered element. Inner datasets run
/// in a nested context and register nothing.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Interleave<D, G> {
    input: D,
    f: Arc<G>,
    cycle_length: usize,
    block_length: usize,
    parallelism: Parallelism,
    deterministic: bool,
    buffer_per_slot: usize,
    stats: Arc<StageStats>,
}

impl<D, G> Interleave<D, G> {
    pub(crate) fn new(input: D, f: G, cycle_length: usize, block_length: usize) -> Self {
        Interleave {
            input,
            f: Arc::new(f),
            cycle_length,
            block_length,
            parallelism: Parallelism::Fixed(1),
            deterministic: true,
            buffer_per_slot: DEFAULT_BUFFER_PER_SLOT,
            stats: Arc::new(StageStats::new("interleave")),
        }
    }

    /// Worker threads: `Fixed(1)` (the default) runs on the consumer's thread; `Auto`
    /// uses `cycle_length` threads, at most the cores available; `Fixed(0)` is invalid.
    /// More than `2 × cycle_length + 1` threads could never all be busy, and more than
    /// [`THREADS_PER_CORE`](crate::defaults::THREADS_PER_CORE) per core could not run,
    /// so no more are started.
    pub fn num_parallel(mut self, p: impl Into<Parallelism>) -> Self {
        self.parallelism = p.into();
        self
    }

    /// Keep tf.data's sequential order (true, the default) or take from any slot with an
    /// element ready when the one under the cursor has none (only with worker threads).
    pub fn deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }

    /// Elements each open dataset may read ahead when running on worker threads
    /// (default [`DEFAULT_BUFFER_PER_SLOT`]; 0 is invalid).
    pub fn buffer_per_slot(mut self, n: usize) -> Self {
        self.buffer_per_slot = n;
        self
    }

    /// Names the stage in statistics and errors.
    pub fn named(mut self, name: &str) -> Self {
        self.stats = Arc::new(StageStats::new(name));
        self
    }

    /// The number of worker threads for a pass, or 1 to run on the consumer's thread.
    fn workers(&self, ctx: &Ctx) -> Result<usize> {
        let name = self.stats.name();
        if self.cycle_length == 0 || self.cycle_length > MAX_CYCLE_LENGTH {
            return Err(Error::Invalid(format!(
                "stage `{name}`: cycle_length must be between 1 and {MAX_CYCLE_LENGTH}, got {}",
                self.cycle_length
            )));
        }
        if self.block_length == 0 {
            return Err(Error::Invalid(format!("stage `{name}`: block_length must be at least 1, got 0")));
        }
        if self.buffer_per_slot == 0 {
            return Err(Error::Invalid(format!("stage `{name}`: buffer_per_slot must be at least 1, got 0")));
        }
        let n = match self.parallelism {
            Parallelism::Fixed(0) => {
                return Err(Error::Invalid(format!(
                    "stage `{name}`: num_parallel must be at least 1, got 0"
                )));
            }
            Parallelism::Fixed(n) => n.min(super::autotune::most_threads(ctx)),
            Parallelism::Auto => self.cycle_length.min(ctx.cores()),
        };
        Ok(n.min(2 * self.cycle_length + 1))
    }
}

impl<D: Dataset, G: InterleaveFn<D::Item>> Dataset for Interleave<D, G> {
    type Item = InnerItem<G, D::Item>;
    type Iter = InterleaveIter<D::Iter, G>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        let workers = self.workers(ctx)?;
        ctx.register(&self.stats);
        self.stats.set_parallelism(workers);
        let input = self.input.iter(ctx)?;
        let nested = ctx.nested();
        let mode = if workers <= 1 {
            Mode::Seq(Seq {
                input,
                f: self.f.clone(),
                ctx: nested,
                stats: self.stats.clone(),
                slots: (0..self.cycle_length).map(|_| None).collect(),
                block_length: self.block_length,
                cycle_index: 0,
                block_index: 0,
                num_open: 0,
                end_of_input: false,
            })
        } else {
            Mode::Par(Par::start(ParConfig {
                input,
                f: self.f.clone(),
                ctx: nested,
                stats: self.stats.clone(),
                cycle_length: self.cycle_length,
                block_length: self.block_length,
                workers,
                deterministic: self.deterministic,
                slot_capacity: self.buffer_per_slot,
            })?)
        };
        Ok(InterleaveIter { mode, finished: false })
    }
}

/// The iterator of the dataset `G` makes from an input element of type `T`.
type InnerIter<G, T> = <<G as InterleaveFn<T>>::Output as Dataset>::Iter;
/// The elements of the dataset `G` makes from an input element of type `T`.
type InnerItem<G, T> = <<G as InterleaveFn<T>>::Output as Dataset>::Item;

/// Opens the dataset of `x` and starts a pass over it, as stage `stats.name()`.
fn open_inner<T, G: InterleaveFn<T>>(f: &G, x: T, ctx: &Ctx, stats: &StageStats) -> Result<InnerIter<G, T>> {
    stats.time_busy(|| call_user(stats.name(), || f.open(x).iter(ctx)))
}

/// One pass of [`Interleave`].
pub struct InterleaveIter<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    mode: Mode<I, G>,
    finished: bool,
}

impl<I, G> fmt::Debug for InterleaveIter<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mode, workers) = match &self.mode {
            Mode::Seq(_) => ("sequential", 0),
            Mode::Par(p) => ("parallel", p.workers.len()),
        };
        f.debug_struct("InterleaveIter")
            .field("mode", &mode)
            .field("workers", &workers)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

enum Mode<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    Seq(Seq<I, G>),
    Par(Par<I, G>),
}

impl<I, G> DataIter for InterleaveIter<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    type Item = InnerItem<G, I::Item>;

    #[inline]
    fn next(&mut self) -> Result<Option<Self::Item>> {
        if self.finished {
            return Ok(None);
        }
        let r = match &mut self.mode {
            Mode::Seq(s) => s.next(),
            Mode::Par(p) => p.next(),
        };
        if !matches!(r, Ok(Some(_))) {
            // The pass is over (ended or failed): release open datasets and threads now.
            self.finished = true;
            match &mut self.mode {
                Mode::Seq(s) => s.slots.iter_mut().for_each(|slot| *slot = None),
                Mode::Par(p) => p.shutdown(),
            }
        }
        r
    }
}
