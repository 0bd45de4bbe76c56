//! The streaming runtime: lazy, composable, typed stages.
//!
//! A [`Dataset`] describes a stream of elements and can be iterated many times (one
//! [`DataIter`] per pass, or epoch); combinators build a monomorphized chain
//! (`Batch<Shuffle<Map<Interleave<Files, _>, _>>>`), so nothing in the hot path boxes
//! elements or dispatches dynamically. Generated code plugs concrete structs in as
//! elements.
//!
//! # Threading model
//!
//! Sequential stages (filter, take, skip, shard, shuffle, repeat…) run on the thread that
//! pulls from them. Parallel stages (map and interleave with `num_parallel > 1`, prefetch)
//! own dedicated worker threads, connected to their neighbours by bounded queues: a
//! worker blocks when its queue is full (backpressure), so memory is bounded by buffer
//! sizes, never by dataset size. Dropping an iterator stops its workers and joins them.
//! User functions may fail or panic: either reaches the consumer as an [`Error`] naming
//! the stage, in stream order.
//!
//! # Determinism
//!
//! With `deterministic = true` (the default) and fixed seeds, the element sequence does
//! not depend on thread counts or timing. Random stages draw from
//! [`Philox`](crate::rng::Philox) keyed by (seed, stage, epoch) and the element position,
//! never from thread-local state. Every stage keeps its state as positions and seeds
//! (plus the buffers it must hold), so a later issue can save and restore it.

mod autotune;
mod batch;
mod boxed;
mod bucket;
mod budget;
mod cache;
mod chunks;
mod concatenate;
mod enumerate;
mod filter;
mod flat_map;
mod global_shuffle;
mod interleave;
mod map;
mod pack;
mod positions;
mod prefetch;
mod read_file;
mod record;
mod record_batch;
mod repeat;
pub(crate) mod reshard;
pub mod rows;
mod sample;
mod shuffle;
mod shuffle_batches;
mod skip_errors;
mod slice;
mod source;
mod state;
pub mod stats;
mod take_while;
mod unbatch_fields;
mod window;
mod zip;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub use crate::column::Element;
pub use autotune::Buffer;
pub use batch::{Batch, BatchIter, MakeBuilder, Padded, PaddedBatch, Plain, Unbatch, UnbatchIter};
pub use boxed::{Boxed, DynDataset, Somes, SomesIter};
pub use bucket::{BucketByLength, BucketIter, BucketOptions, bucket_by_length};
pub use budget::{MemoryBudget, ThreadBudget};
pub use cache::{CacheCodec, CacheFile, CacheMemory};
pub use chunks::{Chunks, ChunksIter};
pub use concatenate::{Concatenate, ConcatenateIter, concatenate};
pub use enumerate::{Enumerate, EnumerateIter, Indexed};
pub use filter::{Fallible, Filter, FilterFn, Infallible};
pub use flat_map::{FlatMap, FlatMapIter, flat_map, slice_len, tensor_len, tensor_rows};
pub use global_shuffle::{GlobalShuffle, GlobalShuffleIter, global_shuffle};
pub use interleave::{
    DEFAULT_BUFFER_PER_SLOT, Interleave, InterleaveFn, InterleaveIter, MAX_CYCLE_LENGTH, OpenTfRecord,
    auto_cycle, tfrecords,
};
pub use map::{Map, MapFn};
pub use pack::{Overflow, Pack, PackIter, PackOptions, PackedRow, Packer, pack};
pub use prefetch::{Prefetch, PrefetchIter};
pub use read_file::{FileContents, ReadFileOptions, ReadFiles, ReadFilesIter, read_files};
pub use record::{FileId, Origin, Record, Unit};
pub use record_batch::{BatchFn, RecordBatch, TfRecordBatches, TfRecordBatchesIter, tfrecord_batches};
pub use repeat::Repeat;
pub use sample::{SampleFrom, sample_from};
pub use shuffle::Shuffle;
pub use shuffle_batches::{ShuffleBatches, ShuffleBatchesIter, shuffle_batches};
pub use skip_errors::{SkipErrors, Skippable, skippable};
pub use slice::{Remainder, Shard, Skip, Take};
pub use source::{
    Files, FromVec, Range, Steps, TfRecordFile, files, from_vec, range, range_step, tfrecord_file,
};
pub use state::{Deal, Layer, PipelineState, ShardOf, StagePosition, fingerprint};
pub use stats::{StageReport, StageStats, StatsReport};
pub use take_while::{TakeWhile, TakeWhileIter, take_while};
pub use unbatch_fields::{UnbatchFields, UnbatchFieldsIter, row_count, unbatch_fields};
pub use window::{Window, WindowIter};
pub use zip::{Zip, ZipBatches, ZipBatchesIter, ZipIter, zip, zip_batches};

use crate::column::{Batchable, Columns};
use crate::error::{BoxError, Error, Result};
use crate::tfrecord::ReaderStats;

/// How many worker threads a parallel stage uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parallelism {
    /// A fixed number of threads (1 runs the stage on the consumer's thread).
    Fixed(usize),
    /// Chosen and adjusted at run time (AUTOTUNE), within the cores available.
    #[default]
    Auto,
}

impl From<usize> for Parallelism {
    fn from(n: usize) -> Self {
        Parallelism::Fixed(n)
    }
}

/// The cores this process may run on (1 when unknown): what `Parallelism::Auto` and an
/// `auto` cycle use unless `RuntimeOptions::cores` says otherwise.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Options of a running pipeline.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// RAM that AUTOTUNE may spend on buffers (default: unlimited).
    pub memory_budget: Option<usize>,
    /// Cores AUTOTUNE may use (default: all available): the pipeline's CPU budget, the
    /// most threads its maps, parsing readers and batch-row splits keep busy at once
    /// ([`ThreadBudget`]).
    pub cores: Option<usize>,
}

/// What every stage of one running pipeline shares: statistics, the memory budget, the
/// number of cores, and the TFRecord readers' skip counts (kept per epoch, so that a pass
/// started ahead of its turn never counts in the current one's).
#[derive(Debug)]
pub struct Runtime {
    stages: Mutex<Vec<Arc<StageStats>>>,
    budget: MemoryBudget,
    cores: usize,
    threads: ThreadBudget,
    /// The readers' counts by epoch, in epoch order.
    io: Mutex<std::collections::BTreeMap<u64, ReaderStats>>,
    started: Instant,
    consumer_wait_ns: std::sync::atomic::AtomicU64,
    /// The pool batches' rows are split across ([`rows`]), started on the first split.
    rows_pool: std::sync::OnceLock<Option<rayon::ThreadPool>>,
}

impl Runtime {
    /// The pool of [`rows`]: as many threads as the CPU budget (`None`: it could not start).
    fn rows_pool(&self) -> Option<&rayon::ThreadPool> {
        self.rows_pool.get_or_init(|| rows::build_pool(self.threads.limit())).as_ref()
    }
}

/// The context a pass over a dataset runs in: the shared [`Runtime`] and the epoch.
#[derive(Debug, Clone)]
pub struct Ctx {
    rt: Arc<Runtime>,
    epoch: u64,
    nested: bool,
    /// The stage positions of a resumed pass ([`PipelineState::ctx`]), taken top-down by
    /// the filters as the pass is built.
    resume: Option<Arc<Resume>>,
}

/// The stage positions a resumed pass starts from, and how many were taken.
#[derive(Debug)]
struct Resume {
    stages: Vec<StagePosition>,
    next: std::sync::atomic::AtomicUsize,
    /// The redeal of a resharded state: what the ranks before had taken of this epoch.
    redeal: Vec<Layer>,
}

impl Ctx {
    /// A context for a new pipeline run, at epoch 0.
    pub fn new(options: &RuntimeOptions) -> Self {
        let cores = options.cores.unwrap_or_else(available_cores);
        Ctx {
            rt: Arc::new(Runtime {
                stages: Mutex::new(Vec::new()),
                budget: MemoryBudget::new(options.memory_budget.unwrap_or(usize::MAX)),
                cores: cores.max(1),
                threads: ThreadBudget::new(cores),
                io: Mutex::new(std::collections::BTreeMap::new()),
                started: Instant::now(),
                consumer_wait_ns: std::sync::atomic::AtomicU64::new(0),
                rows_pool: std::sync::OnceLock::new(),
            }),
            epoch: 0,
            nested: false,
            resume: None,
        }
    }

    /// The epoch this pass belongs to (0 for the first).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The same context at another epoch.
    /// At its own epoch, a resumed context ([`PipelineState::ctx`]) stays one: a trainer
    /// given it starts that epoch's pass as the state says, and the next plainly.
    pub fn with_epoch(&self, epoch: u64) -> Ctx {
        let resume = if epoch == self.epoch { self.resume.clone() } else { None };
        Ctx { epoch, resume, ..self.clone() }
    }

    /// The same context for a pass resumed with these stage positions and this redeal
    /// (those of a [`PipelineState`]); [`Dataset::stream_from`] in it starts each recorded
    /// filter at its input position, and its shard deals only what the redeal left.
    pub fn resuming(&self, stages: &[StagePosition], redeal: &[Layer]) -> Ctx {
        let resume = (!stages.is_empty() || !redeal.is_empty()).then(|| {
            Arc::new(Resume { stages: stages.to_vec(), next: Default::default(), redeal: redeal.to_vec() })
        });
        Ctx { resume, ..self.clone() }
    }

    /// The redeal of the resharded state this pass resumes (not in a nested context):
    /// what the ranks before the reshard had taken of this epoch ([`PipelineState::reshard`]).
    pub fn redeal(&self) -> Option<&[Layer]> {
        self.resume.as_ref().filter(|r| !self.nested && !r.redeal.is_empty()).map(|r| r.redeal.as_slice())
    }

    /// For the next stage (top-down) that records its position, starting a resumed pass
    /// after `output` elements: the input position recorded for it, if the state has one
    /// and it was recorded at that output position (otherwise the stage recomputes it).
    pub fn take_stage_position(&self, output: u64) -> Option<u64> {
        let r = self.resume.as_ref().filter(|_| !self.nested)?;
        let s = r.stages.get(r.next.fetch_add(1, Ordering::Relaxed))?;
        (s.output == output).then_some(s.input)
    }

    /// Whether this is a [`nested`](Ctx::nested) context.
    pub fn is_nested(&self) -> bool {
        self.nested
    }

    /// A context for datasets made per element by another stage (interleave's per-file
    /// readers): their statistics are not registered separately.
    pub fn nested(&self) -> Ctx {
        Ctx { nested: true, ..self.clone() }
    }

    /// Registers a stage's counters in the pipeline's report (once; not when nested).
    pub fn register(&self, stats: &Arc<StageStats>) {
        if self.nested {
            return;
        }
        let mut stages = self.rt.stages.lock().expect("stats lock");
        if !stages.iter().any(|s| Arc::ptr_eq(s, stats)) {
            stages.push(stats.clone());
        }
    }

    /// The memory budget AUTOTUNE respects.
    pub fn budget(&self) -> &MemoryBudget {
        &self.rt.budget
    }

    /// Cores available to AUTOTUNE.
    pub fn cores(&self) -> usize {
        self.rt.cores
    }

    /// The CPU budget the parallel maps' workers share ([`ThreadBudget`]).
    pub fn threads(&self) -> &ThreadBudget {
        &self.rt.threads
    }

    /// Adds a finished TFRecord reader's counts (records, skipped corrupt records) to this
    /// context's epoch.
    pub fn add_reader_stats(&self, stats: &ReaderStats) {
        self.rt.io.lock().expect("io stats lock").entry(self.epoch).or_default().merge(stats);
    }

    /// What the TFRecord readers of this pipeline delivered and skipped so far, over every
    /// epoch (skip events in epoch order).
    pub fn reader_stats(&self) -> ReaderStats {
        let io = self.rt.io.lock().expect("io stats lock");
        io.values().fold(ReaderStats::default(), |mut all, e| {
            all.merge(e);
            all
        })
    }

    /// What the readers of the passes of `epoch` delivered and skipped so far: a pass
    /// started ahead (for the next epoch) counts in its own epoch, not in this one.
    pub fn reader_stats_of(&self, epoch: u64) -> ReaderStats {
        self.rt.io.lock().expect("io stats lock").get(&epoch).cloned().unwrap_or_default()
    }

    /// Adds time the consumer spent waiting for the pipeline.
    pub fn add_consumer_wait(&self, d: Duration) {
        self.rt.consumer_wait_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Statistics of every registered stage so far, upstream first.
    pub fn report(&self) -> StatsReport {
        let stages = self.rt.stages.lock().expect("stats lock");
        StatsReport {
            wall: self.rt.started.elapsed(),
            consumer_wait: Duration::from_nanos(self.rt.consumer_wait_ns.load(Ordering::Relaxed)),
            // Stages register when their iterator is created, downstream first.
            stages: stages.iter().rev().map(|s| s.snapshot()).collect(),
        }
    }
}

/// One pass over a dataset: a fallible, pull-based iterator.
pub trait DataIter: Send + 'static {
    /// The elements.
    type Item: Element;

    /// The next element, `Ok(None)` at the end of the pass. An error ends the pass:
    /// callers do not call `next` again after one ([`Stream`] stops there; a stage that
    /// drives another stops too).
    fn next(&mut self) -> Result<Option<Self::Item>>;
}

/// A description of a stream of elements, from which passes ([`DataIter`]s) are made.
pub trait Dataset: Send + Sync + 'static {
    /// The elements.
    type Item: Element;
    /// The iterator of one pass.
    type Iter: DataIter<Item = Self::Item>;

    /// Starts a pass in `ctx` (which says the epoch).
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter>;

    /// Starts a pass in `ctx` after its first `skip` elements, as if they had been pulled
    /// and dropped: where a resumed run goes on from ([`PipelineState`]). For a
    /// deterministic pipeline the elements that follow are exactly those an uninterrupted
    /// pass yields after its `skip`th.
    ///
    /// The default pulls the `skip` elements. Stages that can get there cheaper do: a map
    /// skips its input without computing what it would have dropped, a batch skips
    /// `skip × size` elements, `take`/`skip` count, `enumerate` starts its positions at
    /// `skip`; so a `read → shuffle → map → batch` pipeline fast-forwards by reading and
    /// shuffling records, decoding none.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        let mut iter = self.iter(ctx)?;
        for _ in 0..skip {
            if iter.next()?.is_none() {
                break;
            }
        }
        Ok(iter)
    }

    /// Appends to `found` the [`StagePosition`]s, top-down, of the stages of this dataset's
    /// pass of `epoch` (the one running or last run in this process) that record their
    /// input position, at the point where its consumer has taken `output` elements: what
    /// [`PipelineState::with_stage_positions`] saves. Stages that map an output count to an
    /// input count (map, batch, chunks, prefetch) pass the translated count to their input;
    /// a `filter` records its own and goes on below it. The default (every other stage)
    /// stops: what is below it is recomputed on resume, exactly.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        let _ = (epoch, output, found);
    }

    /// The redeal its dealing stage (a `shard`, a sharded global shuffle) dealt this
    /// dataset's pass of `epoch` by (the one running or last run in this process): a
    /// resharded state's layers ([`PipelineState::reshard`]), which
    /// [`PipelineState::with_stage_positions`] saves with the positions, so that a state
    /// saved in a redealt pass resumes it as redealt. Empty for a plain pass. The stages
    /// that pass [`positions`](Self::positions) down pass this down too.
    fn redeal_of(&self, epoch: u64) -> Vec<Layer> {
        let _ = epoch;
        Vec::new()
    }

    /// Runs the dataset: a standard iterator of `Result`s over one pass, with the
    /// pipeline's statistics.
    fn stream(&self) -> Result<Stream<Self::Iter>>
    where
        Self: Sized,
    {
        self.stream_with(&RuntimeOptions::default())
    }

    /// Like [`stream`](Dataset::stream), with options (memory budget, cores).
    fn stream_with(&self, options: &RuntimeOptions) -> Result<Stream<Self::Iter>>
    where
        Self: Sized,
    {
        let ctx = Ctx::new(options);
        let iter = ctx.threads().while_building(|| self.iter(&ctx))?;
        Ok(Stream { iter, ctx, done: false })
    }

    /// Runs one pass in an existing context: `ctx.with_epoch(e)` for pass `e` of a
    /// training run, whose statistics then add up over its passes in `ctx`'s report.
    fn stream_in(&self, ctx: &Ctx) -> Result<Stream<Self::Iter>>
    where
        Self: Sized,
    {
        let iter = ctx.threads().while_building(|| self.iter(ctx))?;
        Ok(Stream { iter, ctx: ctx.clone(), done: false })
    }

    /// Like [`stream_in`](Dataset::stream_in), after the pass's first `skip` elements
    /// ([`iter_from`](Dataset::iter_from)): a resumed pass.
    fn stream_from(&self, ctx: &Ctx, skip: u64) -> Result<Stream<Self::Iter>>
    where
        Self: Sized,
    {
        let iter = ctx.threads().while_building(|| self.iter_from(ctx, skip))?;
        Ok(Stream { iter, ctx: ctx.clone(), done: false })
    }

    // ---- combinators (one stage per file) ----

    /// Applies `f` to every element (infallible). Sequential until
    /// [`num_parallel`](Map::num_parallel) says otherwise.
    fn map<U, F>(self, f: F) -> Map<Self, Infallible<F>>
    where
        Self: Sized,
        F: Fn(Self::Item) -> U + Send + Sync + 'static,
        U: Element,
    {
        Map::new(self, Infallible(f), "map")
    }

    /// Applies a fallible `f` to every element; an `Err` reaches the consumer as
    /// [`Error::Stage`] naming this stage.
    fn try_map<U, E, F>(self, f: F) -> Map<Self, Fallible<F>>
    where
        Self: Sized,
        F: Fn(Self::Item) -> std::result::Result<U, E> + Send + Sync + 'static,
        E: Into<BoxError>,
        U: Element,
    {
        Map::new(self, Fallible(f), "map")
    }

    /// `map(on_error: skip)`: applies `f`, which returns `Ok(None)` to drop an element and
    /// an error made by [`skippable`] for one it failed on, which is dropped and counted
    /// in this stage's statistics; follow it with [`somes`](Dataset::somes). See
    /// [`SkipErrors`].
    fn try_map_skipping<U, F>(self, f: F) -> Map<Self, SkipErrors<F>>
    where
        Self: Sized,
        F: Fn(Self::Item) -> std::result::Result<Option<U>, BoxError> + Send + Sync + 'static,
        U: Element,
    {
        Map::new(self, SkipErrors(f), "map")
    }

    /// Keeps the elements for which `p` is true.
    fn filter<P>(self, p: P) -> Filter<Self, Infallible<P>>
    where
        Self: Sized,
        P: Fn(&Self::Item) -> bool + Send + Sync + 'static,
    {
        Filter::new(self, Infallible(p))
    }

    /// Keeps the elements for which a fallible `p` is true.
    fn try_filter<P, E>(self, p: P) -> Filter<Self, Fallible<P>>
    where
        Self: Sized,
        P: Fn(&Self::Item) -> std::result::Result<bool, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        Filter::new(self, Fallible(p))
    }

    /// Opens a dataset per element with `f` and draws from `cycle_length` of them in
    /// turn, `block_length` elements at a time (tf.data's `interleave`). Sequential until
    /// [`num_parallel`](Interleave::num_parallel) says otherwise.
    fn interleave<G>(self, f: G, cycle_length: usize, block_length: usize) -> Interleave<Self, G>
    where
        Self: Sized,
        G: InterleaveFn<Self::Item>,
    {
        Interleave::new(self, f, cycle_length, block_length)
    }

    /// Randomly shuffles with a buffer of `buffer_size` elements, drawing from
    /// Philox(seed, epoch, position); a new order each epoch unless
    /// [`reshuffle_each_epoch(false)`](Shuffle::reshuffle_each_epoch).
    fn shuffle(self, buffer_size: usize, seed: u64) -> Shuffle<Self>
    where
        Self: Sized,
    {
        Shuffle::new(self, buffer_size, seed)
    }

    /// Repeats the dataset `count` times (`None`: forever), one epoch per pass.
    fn repeat(self, count: Option<u64>) -> Repeat<Self>
    where
        Self: Sized,
    {
        Repeat::new(self, count)
    }

    /// The first `n` elements.
    fn take(self, n: u64) -> Take<Self>
    where
        Self: Sized,
    {
        Take::new(self, n)
    }

    /// All but the first `n` elements.
    fn skip(self, n: u64) -> Skip<Self>
    where
        Self: Sized,
    {
        Skip::new(self, n)
    }

    /// Groups `n` consecutive elements into a `Vec`, moving them, not copying them into
    /// columns (the last chunk may be shorter unless `drop_remainder`): for batch-level
    /// work on elements that are not columns yet, such as serialized records.
    fn chunks(self, n: usize, drop_remainder: bool) -> Chunks<Self>
    where
        Self: Sized,
    {
        Chunks::new(self, n, drop_remainder)
    }

    /// Keeps the first complete pass in memory; later passes (epochs) replay it.
    fn cache(self) -> CacheMemory<Self>
    where
        Self: Sized,
        Self::Item: Clone + Sync,
    {
        CacheMemory::new(self)
    }

    /// Keeps the first complete pass in the file `path` (for data that does not fit in
    /// memory); later passes, and later runs, replay it. The file appears only once a pass
    /// completes.
    fn cache_file(self, path: impl AsRef<std::path::Path>) -> CacheFile<Self>
    where
        Self: Sized,
        Self::Item: CacheCodec,
    {
        CacheFile::new(self, path.as_ref())
    }

    /// Pulls the input ahead on a producer thread into a bounded queue of `buffer`
    /// elements (`Buffer::Auto`: tuned within the memory budget).
    fn prefetch(self, buffer: impl Into<Buffer>) -> Prefetch<Self>
    where
        Self: Sized,
    {
        Prefetch::new(self, buffer.into())
    }

    /// Every `num_shards`-th element, starting at `index`: worker `index`'s share, with
    /// [`Remainder::Keep`] (across all workers each element once per pass; counts differ
    /// by at most one). `index >= num_shards` or `num_shards == 0` is an
    /// [`Error::Invalid`].
    fn shard(self, num_shards: u64, index: u64) -> Result<Shard<Self>>
    where
        Self: Sized,
    {
        Shard::new(self, num_shards, index, Remainder::Keep)
    }

    /// [`shard`](Dataset::shard) with the last, partial round kept, dropped (every worker
    /// gets exactly `floor(N / num_shards)` elements) or padded (exactly
    /// `ceil(N / num_shards)`, repeating the first elements of the pass), as
    /// [`Remainder`] describes. Every worker reads the whole input; `Drop` holds back
    /// one element, `Pad` at most `num_shards - 1`.
    fn shard_with(self, num_shards: u64, index: u64, remainder: Remainder) -> Result<Shard<Self>>
    where
        Self: Sized,
    {
        Shard::new(self, num_shards, index, remainder)
    }

    /// Groups `n` consecutive elements into one columnar batch
    /// ([`Batchable::Columns`]); the last, partial batch is delivered unless
    /// `drop_remainder`. `n == 0` is an [`Error::Invalid`] when a pass starts. Elements
    /// whose fixed shapes differ end the pass with an error naming them.
    fn batch(self, n: usize, drop_remainder: bool) -> Batch<Self>
    where
        Self: Sized,
        Self::Item: Batchable,
    {
        Batch::new(self, n, drop_remainder)
    }

    /// Like [`batch`](Dataset::batch), with every variable-length field (`Vec<T>`,
    /// [`Tensor`](crate::column::Tensor)) padded into a dense column, to the longest in
    /// the batch or to a declared shape, as `padding` says ([`Batchable::Padding`]).
    fn padded_batch(
        self,
        n: usize,
        drop_remainder: bool,
        padding: <Self::Item as Batchable>::Padding,
    ) -> PaddedBatch<Self>
    where
        Self: Sized,
        Self::Item: Batchable,
    {
        PaddedBatch::new(self, n, drop_remainder, padding)
    }

    /// tf.data's `window(size, shift, stride, drop_remainder)` with each window batched
    /// ([`Window`]): window `k` is the columnar batch of elements `k × shift + j ×
    /// stride`, `j < size`, those that exist; shorter last windows unless
    /// `drop_remainder`. A zero argument is an [`Error::Invalid`] when a pass starts.
    fn window(self, size: usize, shift: usize, stride: usize, drop_remainder: bool) -> Window<Self>
    where
        Self: Sized,
        Self::Item: Batchable + Clone,
    {
        Window::new(self, size, shift, stride, drop_remainder)
    }

    /// The dataset behind a box ([`Boxed`]): one type for datasets of one element type.
    fn boxed(self) -> Boxed<Self::Item>
    where
        Self: Sized,
    {
        Boxed::new(self)
    }

    /// The `Some` elements of a dataset of `Option`s ([`Somes`]).
    fn somes<T: Element>(self) -> Somes<Self>
    where
        Self: Sized + Dataset<Item = Option<T>>,
    {
        Somes::new(self)
    }

    /// Tags each element with its pass's epoch and its position in the pass
    /// ([`Indexed`]).
    fn enumerate(self) -> Enumerate<Self>
    where
        Self: Sized,
    {
        Enumerate::new(self)
    }

    /// The rows of every batch, in order: the inverse of [`batch`](Dataset::batch).
    fn unbatch(self) -> Unbatch<Self>
    where
        Self: Sized,
        Self::Item: Columns,
    {
        Unbatch::new(self)
    }
}

/// A running pipeline as a standard iterator of `Result`s (fused after an error), with
/// access to its statistics.
#[derive(Debug)]
pub struct Stream<I> {
    iter: I,
    ctx: Ctx,
    done: bool,
}

impl<I: DataIter> Stream<I> {
    /// Statistics so far.
    pub fn report(&self) -> StatsReport {
        self.ctx.report()
    }

    /// What the TFRecord readers delivered and skipped so far.
    pub fn reader_stats(&self) -> ReaderStats {
        self.ctx.reader_stats()
    }

    /// The context of the run.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}

impl<I: DataIter> Iterator for Stream<I> {
    type Item = Result<I::Item>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let t = Instant::now();
        let r = self.iter.next();
        self.ctx.add_consumer_wait(t.elapsed());
        match r {
            Ok(Some(x)) => Some(Ok(x)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Runs a user function, turning a panic into [`Error::Panic`] naming `stage`.
#[inline]
pub fn call_user<R>(stage: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(Error::from_panic(stage, payload)),
    }
}
