//! `interleave`: opens a dataset per input element (typically the records of one file)
//! and draws from up to `cycle_length` of them in turn, `block_length` elements at a time
//! — tf.data's `interleave` — on the consumer's thread, or with worker threads that read
//! the open datasets ahead into bounded per-slot buffers.
//!
//! See [`Interleave`] for the order, the threading model and errors.

use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::{
    Ctx, DataIter, Dataset, Element, Files, Parallelism, StageStats, TfRecordFile, call_user, tfrecord_file,
};
use crate::error::{Error, Result};
use crate::tfrecord::ReaderOptions;

/// The largest accepted `cycle_length` (each slot costs a few bytes up front; files are
/// buffered only once open).
pub const MAX_CYCLE_LENGTH: usize = crate::defaults::MAX_CYCLE_LENGTH;

/// Elements each open dataset may have read ahead, by default, when the stage runs on
/// worker threads.
pub const DEFAULT_BUFFER_PER_SLOT: usize = crate::defaults::INTERLEAVE_BUFFER_PER_SLOT;

/// Elements a worker reads outside the lock before handing them over.
const FILL_CHUNK: usize = 32;

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

// ---- sequential: tf.data's loop on the consumer's thread ----

struct Seq<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    input: I,
    f: Arc<G>,
    ctx: Ctx,
    stats: Arc<StageStats>,
    slots: Vec<Option<InnerIter<G, I::Item>>>,
    block_length: usize,
    cycle_index: usize,
    block_index: usize,
    num_open: usize,
    end_of_input: bool,
}

impl<I, G> Seq<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    fn advance(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.slots.len();
    }

    fn next(&mut self) -> Result<Option<InnerItem<G, I::Item>>> {
        while !self.end_of_input || self.num_open > 0 {
            let ci = self.cycle_index;
            if let Some(it) = &mut self.slots[ci] {
                match self.stats.time_busy(|| it.next())? {
                    Some(y) => {
                        self.stats.produced(y.byte_size());
                        self.block_index += 1;
                        if self.block_index == self.block_length {
                            self.advance();
                        }
                        return Ok(Some(y));
                    }
                    None => {
                        self.slots[ci] = None;
                        self.num_open -= 1;
                        self.advance();
                    }
                }
            } else if !self.end_of_input {
                match self.stats.time_input(|| self.input.next())? {
                    Some(x) => {
                        self.slots[ci] = Some(open_inner(&*self.f, x, &self.ctx, &self.stats)?);
                        self.num_open += 1;
                    }
                    None => self.end_of_input = true,
                }
            } else {
                self.advance();
            }
        }
        Ok(None)
    }
}

// ---- parallel: the same loop over buffers that worker threads fill ----

/// Where the dataset of one input element is.
enum Src<X, J> {
    /// The job is unused.
    Free,
    /// The input element, not opened yet.
    Unopened(X),
    /// An open pass, not being read.
    Open(J),
    /// A worker holds it.
    Busy,
    /// Exhausted or failed: only the buffer is left.
    Done,
}

/// What a worker took out of a job to work on.
enum Taken<X, J> {
    Unopened(X),
    Open(J),
}

/// A worker's next piece of work.
enum Task<I, X, J> {
    /// Open (if needed) and read ahead the job with this index.
    Fill(usize, Taken<X, J>),
    /// Pull the next input element.
    Fetch(I),
}

/// The dataset of one input element and the elements read from it ahead of the consumer.
struct Job<X, J, Y> {
    src: Src<X, J>,
    buf: VecDeque<Result<Y>>,
}

/// Everything the consumer and the workers share, under one mutex.
struct State<I, X, J, Y> {
    /// The input iterator; `None` while a worker pulls from it, or once it is done.
    input: Option<I>,
    input_done: bool,
    /// Jobs, indexed by the slots and `future`; at most `cycle_length + prefetch` in use.
    pool: Vec<Job<X, J, Y>>,
    free: Vec<usize>,
    /// The job in each slot of the cycle.
    slots: Vec<Option<usize>>,
    /// Input elements pulled (and maybe opened) ahead, in input order.
    future: VecDeque<usize>,
    num_open: usize,
    cycle_index: usize,
    block_index: usize,
    /// Elements in all buffers.
    buffered: usize,
    consumer_waiting: bool,
    idle_workers: usize,
    stop: bool,
}

impl<I, X, J, Y> State<I, X, J, Y> {
    fn advance(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.slots.len();
    }

    /// A job for `src`, from the free list.
    fn alloc(&mut self, src: Src<X, J>) -> usize {
        match self.free.pop() {
            Some(j) => {
                self.pool[j].src = src;
                j
            }
            None => {
                // The pool grows as files open: a cycle far wider than the input (65536
                // slots over 4 files) allocates for the files read, not for the cycle.
                self.pool.push(Job { src, buf: VecDeque::new() });
                self.pool.len() - 1
            }
        }
    }

    /// Returns an exhausted, drained job to the free list.
    fn release(&mut self, j: usize) {
        self.pool[j].src = Src::Free;
        self.free.push(j);
    }

    /// Takes job `j`'s input element or open pass for a worker, if it has room to read.
    fn take(&mut self, j: usize, capacity: usize) -> Option<Taken<X, J>> {
        let job = &mut self.pool[j];
        if job.buf.len() >= capacity || !matches!(job.src, Src::Unopened(_) | Src::Open(_)) {
            return None;
        }
        match std::mem::replace(&mut job.src, Src::Busy) {
            Src::Unopened(x) => Some(Taken::Unopened(x)),
            Src::Open(it) => Some(Taken::Open(it)),
            other => {
                job.src = other;
                None
            }
        }
    }

    /// Marks job `j` finished, after `err` if it failed.
    fn finish_job(&mut self, j: usize, err: Option<Error>) {
        let job = &mut self.pool[j];
        job.src = Src::Done;
        if let Some(e) = err {
            job.buf.push_back(Err(e));
            self.buffered += 1;
        }
    }
}

struct Shared<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    state: Mutex<SharedState<I, G>>,
    /// Workers wait here for work.
    work: Condvar,
    /// The consumer waits here for elements.
    data: Condvar,
    f: Arc<G>,
    ctx: Ctx,
    stats: Arc<StageStats>,
    slot_capacity: usize,
    prefetch: usize,
}

type SharedState<I, G> =
    State<I, <I as DataIter>::Item, InnerIter<G, <I as DataIter>::Item>, InnerItem<G, <I as DataIter>::Item>>;

type TaskOf<I, G> = Task<I, <I as DataIter>::Item, InnerIter<G, <I as DataIter>::Item>>;

/// Locks the state. No code panics while holding the lock (user code runs outside it, or
/// under `call_user`), so a poisoned lock still holds consistent state.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<I, G> Shared<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    fn wake_worker(&self, st: &SharedState<I, G>) {
        if st.idle_workers > 0 {
            self.work.notify_one();
        }
    }

    fn wake_consumer(&self, st: &SharedState<I, G>) {
        if st.consumer_waiting {
            self.data.notify_one();
        }
    }

    /// Pops the next buffered result of job `j`, counting it.
    fn pop(&self, st: &mut SharedState<I, G>, j: usize) -> Option<Result<InnerItem<G, I::Item>>> {
        let job = &mut st.pool[j];
        let r = job.buf.pop_front()?;
        // Wake a worker once the buffer has drained to half, not on every pop: workers
        // then refill in chunks.
        let refill = job.buf.len() == self.slot_capacity / 2;
        st.buffered -= 1;
        self.stats.sample_queue(st.buffered, (st.slots.len() + self.prefetch) * self.slot_capacity);
        if refill {
            self.wake_worker(st);
        }
        if let Ok(y) = &r {
            self.stats.produced(y.byte_size());
        }
        Some(r)
    }

    /// The most urgent piece of work: the slots from the cursor on, then pulling an input
    /// element ahead, then opening and reading those ahead.
    fn pick(&self, st: &mut SharedState<I, G>) -> Option<TaskOf<I, G>> {
        let n = st.slots.len();
        for k in 0..n {
            if let Some(j) = st.slots[(st.cycle_index + k) % n]
                && let Some(t) = st.take(j, self.slot_capacity)
            {
                return Some(Task::Fill(j, t));
            }
        }
        if !st.input_done
            && st.future.len() < self.prefetch
            && let Some(input) = st.input.take()
        {
            return Some(Task::Fetch(input));
        }
        for k in 0..st.future.len() {
            let j = st.future[k];
            if let Some(t) = st.take(j, self.slot_capacity) {
                return Some(Task::Fill(j, t));
            }
        }
        None
    }

    /// Opens job `j` if needed and reads it until its buffer is full, it ends, or the
    /// stage stops.
    fn fill(
        &self,
        j: usize,
        taken: Taken<I::Item, InnerIter<G, I::Item>>,
    ) -> MutexGuard<'_, SharedState<I, G>> {
        let mut it = match taken {
            Taken::Open(it) => it,
            Taken::Unopened(x) => match open_inner(&*self.f, x, &self.ctx, &self.stats) {
                Ok(it) => it,
                Err(e) => {
                    let mut st = lock(&self.state);
                    st.finish_job(j, Some(e));
                    self.wake_consumer(&st);
                    return st;
                }
            },
        };
        // Read a chunk outside the lock, then hand it over under one lock: one lock and
        // at most one wake-up per chunk, not per element.
        let mut chunk = Vec::with_capacity(self.slot_capacity.min(FILL_CHUNK));
        let mut room = self.slot_capacity.min(FILL_CHUNK);
        loop {
            let mut end = None;
            self.stats.time_busy(|| {
                while chunk.len() < room {
                    match call_user(self.stats.name(), || it.next()) {
                        Ok(Some(y)) => chunk.push(y),
                        Ok(None) => {
                            end = Some(None);
                            break;
                        }
                        Err(e) => {
                            end = Some(Some(e));
                            break;
                        }
                    }
                }
            });
            let mut st = lock(&self.state);
            st.buffered += chunk.len();
            st.pool[j].buf.extend(chunk.drain(..).map(Ok));
            if let Some(err) = end {
                st.finish_job(j, err);
                self.wake_consumer(&st);
                // The pass is dropped outside the lock: it may hold threads to join.
                drop(st);
                drop(it);
                return lock(&self.state);
            }
            self.wake_consumer(&st);
            if st.stop {
                drop(st);
                drop(it);
                return lock(&self.state);
            }
            let len = st.pool[j].buf.len();
            if len >= self.slot_capacity {
                st.pool[j].src = Src::Open(it);
                return st;
            }
            room = (self.slot_capacity - len).min(FILL_CHUNK);
        }
    }

    /// Pulls the next input element into `future`.
    fn fetch(&self, mut input: I) -> MutexGuard<'_, SharedState<I, G>> {
        let r = self.stats.time_input(|| call_user(self.stats.name(), || input.next()));
        let input = match r {
            Ok(Some(_)) => Some(input),
            _ => {
                drop(input);
                None
            }
        };
        let mut st = lock(&self.state);
        match r {
            Ok(Some(x)) => {
                let j = st.alloc(Src::Unopened(x));
                st.future.push_back(j);
                st.input = input;
                self.wake_worker(&st);
            }
            Ok(None) => st.input_done = true,
            Err(e) => {
                // The error takes the place of the next input element, so the consumer
                // meets it where the sequential loop would.
                let j = st.alloc(Src::Done);
                st.finish_job(j, Some(e));
                st.future.push_back(j);
                st.input_done = true;
            }
        }
        self.wake_consumer(&st);
        st
    }
}

/// A worker thread: picks work until told to stop.
fn work<I, G>(sh: Arc<Shared<I, G>>)
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    let mut st = lock(&sh.state);
    loop {
        if st.stop {
            return;
        }
        match sh.pick(&mut st) {
            Some(Task::Fill(j, taken)) => {
                drop(st);
                st = sh.fill(j, taken);
            }
            Some(Task::Fetch(input)) => {
                drop(st);
                st = sh.fetch(input);
            }
            None => {
                // Every buffer this worker could fill is full or taken: backpressure.
                st.idle_workers += 1;
                let t = Instant::now();
                st = sh.work.wait(st).unwrap_or_else(PoisonError::into_inner);
                sh.stats.add_wait_output(t.elapsed());
                st.idle_workers -= 1;
            }
        }
    }
}

struct ParConfig<I, G> {
    input: I,
    f: Arc<G>,
    ctx: Ctx,
    stats: Arc<StageStats>,
    cycle_length: usize,
    block_length: usize,
    workers: usize,
    deterministic: bool,
    slot_capacity: usize,
}

struct Par<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    shared: Arc<Shared<I, G>>,
    workers: Vec<JoinHandle<()>>,
    block_length: usize,
    deterministic: bool,
    /// Non-deterministic mode: elements taken under one lock with the one returned, so
    /// the consumer locks once per chunk rather than once per element.
    local: VecDeque<Ready<G, I::Item>>,
}

/// An element (or the error in its place) taken from a slot.
type Ready<G, T> = Result<InnerItem<G, T>>;

/// Elements the consumer takes from a slot under one lock (non-deterministic mode).
const CONSUMER_CHUNK: usize = 32;

impl<I, G> Par<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    fn start(c: ParConfig<I, G>) -> Result<Self> {
        let prefetch = c.workers.min(c.cycle_length);
        let state = State {
            input: Some(c.input),
            input_done: false,
            pool: Vec::new(),
            free: Vec::new(),
            slots: vec![None; c.cycle_length],
            future: VecDeque::with_capacity(prefetch),
            num_open: 0,
            cycle_index: 0,
            block_index: 0,
            buffered: 0,
            consumer_waiting: false,
            idle_workers: 0,
            stop: false,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            work: Condvar::new(),
            data: Condvar::new(),
            f: c.f,
            ctx: c.ctx,
            stats: c.stats,
            slot_capacity: c.slot_capacity,
            prefetch,
        });
        let mut par = Par {
            shared,
            workers: Vec::with_capacity(c.workers),
            block_length: c.block_length,
            deterministic: c.deterministic,
            local: VecDeque::new(),
        };
        for i in 0..c.workers {
            let sh = par.shared.clone();
            let spawned =
                std::thread::Builder::new().name(format!("sluice-interleave-{i}")).spawn(move || work(sh));
            match spawned {
                Ok(h) => par.workers.push(h),
                Err(e) => {
                    // Dropping `par` stops and joins the workers started so far.
                    return Err(Error::Stage {
                        stage: par.shared.stats.name().to_string(),
                        source: e.into(),
                    });
                }
            }
        }
        Ok(par)
    }

    fn next(&mut self) -> Result<Option<InnerItem<G, I::Item>>> {
        if let Some(r) = self.local.pop_front() {
            return r.map(Some);
        }
        let sh = &*self.shared;
        let mut st = lock(&sh.state);
        loop {
            if st.input_done && st.future.is_empty() && st.num_open == 0 {
                return Ok(None);
            }
            let ci = st.cycle_index;
            match st.slots[ci] {
                Some(j) => {
                    if let Some(r) = sh.pop(&mut st, j) {
                        if r.is_ok() {
                            st.block_index += 1;
                            if st.block_index == self.block_length {
                                st.advance();
                            }
                            if !self.deterministic {
                                Self::drain(sh, &mut st, j, &mut self.local);
                            }
                        }
                        return r.map(Some);
                    }
                    if matches!(st.pool[j].src, Src::Done) {
                        st.release(j);
                        st.slots[ci] = None;
                        st.num_open -= 1;
                        st.advance();
                        continue;
                    }
                }
                None => {
                    if let Some(j) = st.future.pop_front() {
                        st.slots[ci] = Some(j);
                        st.num_open += 1;
                        // Room ahead: a worker may pull the next input element.
                        sh.wake_worker(&st);
                        continue;
                    }
                    if st.input_done {
                        st.advance();
                        continue;
                    }
                }
            }
            // Nothing is ready where the sequential order takes from next.
            if !self.deterministic
                && let Some((j, r)) = self.pop_any(&mut st)
            {
                if r.is_ok() {
                    Self::drain(sh, &mut st, j, &mut self.local);
                }
                return r.map(Some);
            }
            st.consumer_waiting = true;
            st = sh.data.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.consumer_waiting = false;
        }
    }

    /// An element from any other slot that has one ready, and the slot (non-deterministic
    /// mode).
    fn pop_any(&self, st: &mut SharedState<I, G>) -> Option<(usize, Ready<G, I::Item>)> {
        let n = st.slots.len();
        for k in 1..n {
            if let Some(j) = st.slots[(st.cycle_index + k) % n]
                && let Some(r) = self.shared.pop(st, j)
            {
                return Some((j, r));
            }
        }
        None
    }

    /// Moves up to a chunk more of slot `j`'s ready elements into `local`, stopping after
    /// an error (non-deterministic mode: order is free, and one lock serves them all).
    fn drain(
        sh: &Shared<I, G>,
        st: &mut SharedState<I, G>,
        j: usize,
        local: &mut VecDeque<Ready<G, I::Item>>,
    ) {
        while local.len() < CONSUMER_CHUNK - 1 {
            let Some(r) = sh.pop(st, j) else { break };
            let failed = r.is_err();
            local.push_back(r);
            if failed {
                break;
            }
        }
    }

    /// Stops and joins the workers, then drops the open passes and buffered elements.
    fn shutdown(&mut self) {
        if self.workers.is_empty() {
            return;
        }
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_all();
        for h in self.workers.drain(..) {
            // A worker runs user code only under `call_user`, so it does not panic.
            let _ = h.join();
        }
        let (pool, input) = {
            let mut st = lock(&self.shared.state);
            st.future.clear();
            st.slots.iter_mut().for_each(|s| *s = None);
            st.free.clear();
            st.num_open = 0;
            st.buffered = 0;
            (std::mem::take(&mut st.pool), st.input.take())
        };
        drop(pool);
        drop(input);
    }
}

impl<I, G> Drop for Par<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    fn drop(&mut self) {
        self.shutdown();
    }
}
