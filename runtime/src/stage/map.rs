//! `map`: applies a user function to every element, on the consumer's thread or on
//! `num_parallel` worker threads, in order (`deterministic`, the default) or as results
//! complete.
//!
//! # Parallel map
//!
//! With `Fixed(n > 1)` or `Auto`, dedicated worker threads share the input iterator
//! (behind a lock; each pull gives the element a sequence number) and run the function
//! outside any lock. An in-flight window (`2 × workers` micro-batches, at least 2; see
//! [`autotune`](super::autotune) for `Auto`) bounds the elements being computed or
//! finished but not yet delivered: a worker waits on a condition variable while the
//! window is full (backpressure), so memory does not grow with a slow consumer.
//!
//! Workers take their input in micro-batches: a worker claims room for `micro`
//! elements, pulls that many under one lock of the input, computes them and stores the
//! results under one lock of the state, waking the consumer once. `micro` follows the
//! measured cost of an element: 1 for elements that take 50 µs or more, up to
//! [`MAP_MICRO_BATCH`](crate::defaults::MAP_MICRO_BATCH) for cheap ones (a hand-over
//! is a lock and a wake-up, microseconds: one per parsed record made a parallel map of
//! a per-record parse ten times slower than the same map on one thread), and never more
//! than [`MAP_MICRO_BATCH_BYTES`](crate::defaults::MAP_MICRO_BATCH_BYTES) of results.
//! The order (deterministic) and the elements do not depend on it.
//!
//! - `deterministic = true`: results wait in a ring indexed by sequence number and are
//!   delivered in input order, the same sequence as the sequential map for any number
//!   of workers and any tuning.
//! - `deterministic = false`: results are delivered as they complete (same multiset).
//!
//! An input error, a user `Err` or a panic in the user function becomes a result like
//! any other: delivered at its position (deterministic) or when it completes; then the
//! iterator ends and the workers stop. Dropping the iterator sets a cancel flag, wakes
//! every waiting worker and joins them all (a worker inside the input's `next` or the
//! user function finishes that call first).
//!
//! Statistics: `wait_input` is workers' time getting the shared input (its lock and its
//! `next`), `wait_output` their time waiting for window room; each delivery samples the
//! number of finished results against the window.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::autotune::WorkerTuner;
use crate::defaults::{MAP_MICRO_BATCH as MICRO_BATCH, MAP_MICRO_BATCH_BYTES as MICRO_BATCH_BYTES};

/// How long a micro-batch of cheap elements should take to compute: long enough that
/// the hand-over (a lock and a wake-up, a few microseconds) is a small part of it.
const MICRO_BATCH_TIME: std::time::Duration = std::time::Duration::from_micros(50);
use super::{Ctx, DataIter, Dataset, Element, Fallible, Infallible, Parallelism, StageStats, call_user};
use crate::error::{BoxError, Error, Result};

/// A function of `map`.
pub trait MapFn<T>: Send + Sync + 'static {
    /// The output element.
    type Output: Element;
    /// Transforms one element.
    fn call(&self, x: T) -> std::result::Result<Self::Output, BoxError>;

    /// Transforms one element for the stage whose counters are `stats`: what the stage
    /// calls. The default is [`call`](MapFn::call); a function that counts in the
    /// stage's statistics ([`SkipErrors`](super::SkipErrors)) overrides it.
    #[inline]
    fn call_in(&self, x: T, stats: &StageStats) -> std::result::Result<Self::Output, BoxError> {
        let _ = stats;
        self.call(x)
    }
}

impl<T, U, F> MapFn<T> for Infallible<F>
where
    F: Fn(T) -> U + Send + Sync + 'static,
    U: Element,
{
    type Output = U;
    #[inline]
    fn call(&self, x: T) -> std::result::Result<U, BoxError> {
        Ok((self.0)(x))
    }
}

impl<T, U, E, F> MapFn<T> for Fallible<F>
where
    F: Fn(T) -> std::result::Result<U, E> + Send + Sync + 'static,
    E: Into<BoxError>,
    U: Element,
{
    type Output = U;
    #[inline]
    fn call(&self, x: T) -> std::result::Result<U, BoxError> {
        (self.0)(x).map_err(Into::into)
    }
}

/// The `map` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Map<D, F> {
    input: D,
    f: Arc<F>,
    parallelism: Parallelism,
    deterministic: bool,
    stats: Arc<StageStats>,
}

impl<D, F> Map<D, F> {
    pub(crate) fn new(input: D, f: F, name: &str) -> Self {
        Map {
            input,
            f: Arc::new(f),
            parallelism: Parallelism::Fixed(1),
            deterministic: true,
            stats: Arc::new(StageStats::new(name)),
        }
    }

    /// Worker threads: `Fixed(1)` (the default) runs on the consumer's thread;
    /// `Fixed(n > 1)` and `Auto` (AUTOTUNE, up to the cores) run on worker threads.
    pub fn num_parallel(mut self, p: impl Into<Parallelism>) -> Self {
        self.parallelism = p.into();
        self
    }

    /// Keep input order (true, the default) or deliver results as they complete.
    pub fn deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }

    /// Names the stage in statistics and errors.
    pub fn named(mut self, name: &str) -> Self {
        self.stats = Arc::new(StageStats::new(name));
        self
    }
}

impl<D: Dataset, F: MapFn<D::Item>> Dataset for Map<D, F> {
    type Item = F::Output;
    type Iter = MapIter<D::Iter, F>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// One result per input.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<super::StagePosition>) {
        self.input.positions(epoch, output, found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<super::Layer> {
        self.input.redeal_of(epoch)
    }

    /// One result per input: skips the input, computing nothing.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        let input = self.input.iter_from(ctx, skip)?;
        let mode = match self.parallelism {
            Parallelism::Fixed(n) if n <= 1 => {
                self.stats.set_parallelism(1);
                Mode::Sequential { input, f: self.f.clone(), stats: self.stats.clone() }
            }
            p => Mode::Parallel(ParallelMap::start(
                input,
                self.f.clone(),
                self.stats.clone(),
                WorkerTuner::new(p, ctx),
                self.deterministic,
            )?),
        };
        Ok(MapIter { mode })
    }
}

/// One pass of [`Map`].
pub struct MapIter<I: DataIter, F: MapFn<I::Item>> {
    mode: Mode<I, F>,
}

enum Mode<I: DataIter, F: MapFn<I::Item>> {
    /// On the consumer's thread.
    Sequential { input: I, f: Arc<F>, stats: Arc<StageStats> },
    /// On worker threads.
    Parallel(ParallelMap<I, F>),
}

impl<I: DataIter, F: MapFn<I::Item>> fmt::Debug for MapIter<I, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.mode {
            Mode::Sequential { stats, .. } => {
                f.debug_struct("MapIter").field("stage", &stats.name()).field("parallel", &false).finish()
            }
            Mode::Parallel(p) => f
                .debug_struct("MapIter")
                .field("stage", &p.shared.stats.name())
                .field("parallel", &true)
                .field("workers", &p.workers.len())
                .field("finished", &p.finished)
                .finish(),
        }
    }
}

/// Applies `f` to `x` as stage `stats.name()`: user errors and panics become errors naming
/// the stage; busy time and output are counted.
#[inline]
pub(crate) fn apply<T, F: MapFn<T>>(f: &F, x: T, stats: &StageStats) -> Result<F::Output> {
    let y = stats.time_busy(|| {
        call_user(stats.name(), || {
            f.call_in(x, stats).map_err(|source| Error::Stage { stage: stats.name().to_string(), source })
        })
    })?;
    stats.produced(y.byte_size());
    Ok(y)
}

impl<I: DataIter, F: MapFn<I::Item>> DataIter for MapIter<I, F> {
    type Item = F::Output;

    #[inline]
    fn next(&mut self) -> Result<Option<F::Output>> {
        match &mut self.mode {
            Mode::Sequential { input, f, stats } => match input.next()? {
                Some(x) => apply(&**f, x, stats).map(Some),
                None => Ok(None),
            },
            Mode::Parallel(p) => p.next(),
        }
    }
}

/// The worker threads of a parallel map and the consumer's end of their results.
struct ParallelMap<I: DataIter, F: MapFn<I::Item>> {
    shared: Arc<Shared<I, F>>,
    workers: Vec<JoinHandle<()>>,
    finished: bool,
}

/// What the workers and the consumer share.
struct Shared<I: DataIter, F: MapFn<I::Item>> {
    state: Mutex<State<F::Output>>,
    /// The input; workers take turns pulling from it. Lock order: `input`, then `state`.
    input: Mutex<Input<I>>,
    /// The consumer waits here for a result.
    ready_cv: Condvar,
    /// Active workers wait here for window room.
    space_cv: Condvar,
    /// Workers above the active limit wait here.
    park_cv: Condvar,
    cancel: AtomicBool,
    /// Workers waiting for another worker to release the input (AUTOTUNE counts them
    /// as idle: more workers would not help).
    input_waiters: AtomicUsize,
    f: Arc<F>,
    stats: Arc<StageStats>,
}

struct Input<I> {
    iter: I,
    next_seq: u64,
    done: bool,
}

struct State<T> {
    results: Results<T>,
    /// Elements reserved by workers and not yet delivered (pulling, computing or ready).
    in_flight: usize,
    /// Results computed and not yet delivered.
    ready: usize,
    /// Workers between claiming room and storing their results (pulling or computing).
    computing: usize,
    /// Elements a worker claims at once (see [`State::tune_micro`]).
    micro: usize,
    /// One past the last sequence number to deliver, once the input ended or failed.
    end: Option<u64>,
    tuner: WorkerTuner,
    space_waiters: usize,
    consumer_waiting: bool,
    /// A worker thread died of a bug in this file; the consumer reports it.
    broken: bool,
}

enum Results<T> {
    /// Deterministic: result `seq` lives in `ring[seq % ring.len()]`; `next` is the
    /// sequence number to deliver next.
    Ordered { ring: Box<[Option<Result<T>>]>, next: u64 },
    /// As completed.
    Unordered(VecDeque<Result<T>>),
}

impl<T> State<T> {
    /// Elements allowed in flight: the tuner's window of micro-batches.
    fn window(&self) -> usize {
        self.tuner.window() * self.micro
    }

    /// Whether a worker may claim room: a whole micro-batch's, or all of it when the
    /// window is smaller (so a worker waiting for room is woken once per micro-batch
    /// delivered, not once per element).
    fn has_room(&self) -> bool {
        self.window() - self.in_flight.min(self.window()) >= self.micro
    }

    /// Sets the micro-batch from one that took `took` for `n` elements whose largest
    /// result was `largest` bytes: as many elements as take [`MICRO_BATCH_TIME`] (a
    /// hand-over costs microseconds: cheap elements are handed over many at a time), at
    /// most [`MICRO_BATCH`], and at most [`MICRO_BATCH_BYTES`] of results of that size
    /// (so large elements go one by one, and memory stays as the window bounds it).
    fn tune_micro(&mut self, n: usize, took: std::time::Duration, largest: usize) {
        let per_ns = (took.as_nanos() / n as u128).max(1);
        let by_time = (MICRO_BATCH_TIME.as_nanos() / per_ns).max(1) as usize;
        let by_bytes = (MICRO_BATCH_BYTES / largest.max(1)).max(1);
        self.micro = by_time.min(by_bytes).min(MICRO_BATCH);
        self.tuner.set_micro(self.micro);
    }

    /// Whether the next result to deliver is ready.
    fn next_ready(&self) -> bool {
        match &self.results {
            Results::Ordered { ring, next } => ring[(*next % ring.len() as u64) as usize].is_some(),
            Results::Unordered(q) => !q.is_empty(),
        }
    }

    fn store(&mut self, seq: u64, r: Result<T>) {
        match &mut self.results {
            Results::Ordered { ring, .. } => {
                let slot = &mut ring[(seq % ring.len() as u64) as usize];
                debug_assert!(slot.is_none(), "the window bounds the ring");
                *slot = Some(r);
            }
            Results::Unordered(q) => q.push_back(r),
        }
        self.ready += 1;
    }

    /// The next result to deliver, if it is ready.
    fn take(&mut self) -> Option<Result<T>> {
        let r = match &mut self.results {
            Results::Ordered { ring, next } => {
                let r = ring[(*next % ring.len() as u64) as usize].take()?;
                *next += 1;
                r
            }
            Results::Unordered(q) => q.pop_front()?,
        };
        self.ready -= 1;
        self.in_flight -= 1;
        Some(r)
    }

    /// True when every result before the end has been delivered.
    fn exhausted(&self) -> bool {
        match (&self.results, self.end) {
            (Results::Ordered { next, .. }, Some(end)) => *next >= end,
            (Results::Unordered(_), Some(_)) => self.in_flight == 0,
            (_, None) => false,
        }
    }
}

impl<I: DataIter, F: MapFn<I::Item>> Shared<I, F> {
    fn lock(&self) -> MutexGuard<'_, State<F::Output>> {
        // User code runs outside this lock, so a poisoned lock still holds consistent
        // state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(
        &self,
        cv: &Condvar,
        st: MutexGuard<'a, State<F::Output>>,
    ) -> MutexGuard<'a, State<F::Output>> {
        cv.wait(st).unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the stream at `end` (or earlier): no more input is pulled, and everyone
    /// waiting re-checks.
    fn close(&self, st: &mut State<F::Output>, end: u64) {
        st.end = Some(st.end.map_or(end, |e| e.min(end)));
        self.space_cv.notify_all();
        self.park_cv.notify_all();
        if st.consumer_waiting {
            self.ready_cv.notify_one();
        }
    }
}

/// Reports a worker that unwinds (a bug in this file, as user code and the input are
/// caught), so the consumer gets an error instead of waiting forever.
struct WorkerGuard<'a, I: DataIter, F: MapFn<I::Item>>(&'a Shared<I, F>);

impl<I: DataIter, F: MapFn<I::Item>> Drop for WorkerGuard<'_, I, F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut st = self.0.lock();
            st.broken = true;
            self.0.ready_cv.notify_one();
        }
    }
}

/// The loop of worker `index`: claim room in the window for a micro-batch, pull that
/// many elements, apply `f` to each, store the results; until the input ends, an error
/// closes the stream, or the cancel flag.
fn work<I: DataIter, F: MapFn<I::Item>>(sh: &Shared<I, F>, index: usize) {
    let _guard = WorkerGuard(sh);
    let stats = &*sh.stats;
    let mut st = sh.lock();
    // A map over batches may split a batch's rows within what the CPU budget has left.
    let _in = super::rows::enter(st.tuner.ctx(), &sh.stats);
    let mut pulled: Vec<(u64, I::Item)> = Vec::new();
    let mut results: Vec<(u64, Result<F::Output>)> = Vec::new();
    loop {
        // Claim room in the window: a whole micro-batch's when the window has it.
        let claimed = loop {
            if sh.cancel.load(Ordering::Relaxed) || st.end.is_some() {
                return;
            }
            if index >= st.tuner.active() {
                // Pass on a wake-up meant for an active worker.
                if st.space_waiters > 0 && st.has_room() {
                    sh.space_cv.notify_one();
                }
                st = sh.wait(&sh.park_cv, st);
                continue;
            }
            if st.has_room() {
                let k = st.micro.min(st.window() - st.in_flight);
                st.in_flight += k;
                st.computing += 1;
                break k;
            }
            if st.tuner.output_blocked() {
                stats.set_parallelism(st.tuner.active());
                continue;
            }
            st.space_waiters += 1;
            let t = Instant::now();
            st = sh.wait(&sh.space_cv, st);
            stats.add_wait_output(t.elapsed());
            st.space_waiters -= 1;
        };
        drop(st);

        // Pull up to `claimed` elements; the input's end or error closes the stream.
        let t = Instant::now();
        let mut input = match sh.input.try_lock() {
            Ok(input) => input,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                sh.input_waiters.fetch_add(1, Ordering::Relaxed);
                let input = sh.input.lock().unwrap_or_else(PoisonError::into_inner);
                sh.input_waiters.fetch_sub(1, Ordering::Relaxed);
                input
            }
        };
        // What ended the pull early: the input's end at a sequence number, or its error.
        let mut end: Option<(u64, Option<Error>)> = None;
        while pulled.len() < claimed && !input.done && !sh.cancel.load(Ordering::Relaxed) {
            let seq = input.next_seq;
            // The input is a stage of ours and should not panic; if it does, the
            // consumer gets an error instead of waiting forever.
            let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| input.iter.next()))
                .unwrap_or_else(|payload| Err(Error::from_panic(stats.name(), payload)));
            match next {
                Ok(Some(x)) => {
                    input.next_seq += 1;
                    pulled.push((seq, x));
                }
                Ok(None) => {
                    input.done = true;
                    end = Some((seq, None));
                }
                Err(e) => {
                    input.done = true;
                    end = Some((seq, Some(e)));
                }
            }
        }
        stats.add_wait_input(t.elapsed());
        if let Some((seq, error)) = end {
            // Under the input lock, so no other worker pulls past the end meanwhile.
            st = sh.lock();
            st.in_flight -= claimed - pulled.len() - usize::from(error.is_some());
            match error {
                None => sh.close(&mut st, seq),
                Some(e) => {
                    st.store(seq, Err(e));
                    sh.close(&mut st, seq + 1);
                }
            }
            drop(st);
        } else if pulled.len() < claimed {
            // Another worker reached the end, or the pass is cancelled: give back the
            // room not used.
            st = sh.lock();
            st.in_flight -= claimed - pulled.len();
            // The last release may be what the consumer waits for (unordered end).
            if st.consumer_waiting {
                sh.ready_cv.notify_one();
            }
            drop(st);
        }
        drop(input);
        if sh.cancel.load(Ordering::Relaxed) {
            return;
        }

        // Apply `f` outside any lock; after an error the rest of the micro-batch is
        // past the end of the stream and is dropped.
        let t = Instant::now();
        let n = pulled.len();
        let mut failed = None;
        for (seq, x) in pulled.drain(..) {
            if failed.is_some() {
                continue;
            }
            let r = apply(&*sh.f, x, stats);
            if r.is_err() {
                failed = Some(seq);
            }
            results.push((seq, r));
        }
        let took = t.elapsed();

        st = sh.lock();
        st.computing -= 1;
        st.in_flight -= n - results.len();
        let mut largest = 0;
        for (seq, r) in results.drain(..) {
            if let Ok(y) = &r {
                largest = largest.max(y.byte_size());
            }
            st.store(seq, r);
        }
        if n > 0 && failed.is_none() {
            st.tune_micro(n, took, largest);
            // A larger micro-batch widens the window: room for a waiting worker.
            if st.space_waiters > 0 && st.has_room() {
                sh.space_cv.notify_one();
            }
        }
        match failed {
            Some(seq) => sh.close(&mut st, seq + 1),
            None if st.consumer_waiting && st.next_ready() => sh.ready_cv.notify_one(),
            None => {}
        }
    }
}

impl<I: DataIter, F: MapFn<I::Item>> ParallelMap<I, F> {
    fn start(
        input: I,
        f: Arc<F>,
        stats: Arc<StageStats>,
        tuner: WorkerTuner,
        deterministic: bool,
    ) -> Result<Self> {
        let capacity = tuner.capacity() * MICRO_BATCH;
        let results = if deterministic {
            Results::Ordered { ring: (0..capacity).map(|_| None).collect(), next: 0 }
        } else {
            Results::Unordered(VecDeque::with_capacity(capacity))
        };
        let active = tuner.active();
        stats.set_parallelism(active);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                results,
                in_flight: 0,
                ready: 0,
                computing: 0,
                micro: 1,
                end: None,
                tuner,
                space_waiters: 0,
                consumer_waiting: false,
                broken: false,
            }),
            input: Mutex::new(Input { iter: input, next_seq: 0, done: false }),
            ready_cv: Condvar::new(),
            space_cv: Condvar::new(),
            park_cv: Condvar::new(),
            cancel: AtomicBool::new(false),
            input_waiters: AtomicUsize::new(0),
            f,
            stats,
        });
        let mut map = ParallelMap { shared, workers: Vec::with_capacity(active), finished: false };
        for _ in 0..active {
            // On failure, dropping `map` stops the workers already started.
            Self::spawn_worker(&map.shared, &mut map.workers)?;
        }
        Ok(map)
    }

    /// Starts worker number `workers.len()`.
    fn spawn_worker(shared: &Arc<Shared<I, F>>, workers: &mut Vec<JoinHandle<()>>) -> Result<()> {
        let index = workers.len();
        let worker_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name(format!("sluice-{}-{index}", shared.stats.name()))
            .spawn(move || work(&worker_shared, index))
            .map_err(|e| Error::Stage {
                stage: shared.stats.name().to_string(),
                source: format!("cannot start worker thread {index}: {e}").into(),
            })?;
        workers.push(handle);
        Ok(())
    }

    fn next(&mut self) -> Result<Option<F::Output>> {
        if self.finished {
            return Ok(None);
        }
        let shared = &self.shared;
        let stats = &*shared.stats;
        let mut st = shared.lock();
        loop {
            let ready = st.ready;
            if let Some(r) = st.take() {
                stats.sample_queue(ready, st.window());
                if let Ok(x) = &r {
                    st.tuner.observe(x.byte_size());
                }
                if st.space_waiters > 0 && st.has_room() {
                    shared.space_cv.notify_one();
                }
                drop(st);
                if r.is_err() {
                    self.shut_down();
                }
                return r.map(Some);
            }
            if st.exhausted() {
                drop(st);
                self.shut_down();
                return Ok(None);
            }
            if st.broken {
                drop(st);
                let e = Error::Panic {
                    stage: stats.name().to_string(),
                    message: "a worker thread of the parallel map died".to_string(),
                };
                self.shut_down();
                return Err(e);
            }
            // Starved: AUTOTUNE may add a worker.
            let busy = st.computing.saturating_sub(shared.input_waiters.load(Ordering::Relaxed));
            if st.tuner.starved(busy) {
                let active = st.tuner.active();
                stats.set_parallelism(active);
                shared.park_cv.notify_all();
                shared.space_cv.notify_all();
                // A worker that cannot start leaves the stage with the ones it has.
                while self.workers.len() < active.min(st.tuner.max()) {
                    if Self::spawn_worker(shared, &mut self.workers).is_err() {
                        break;
                    }
                }
            }
            st.consumer_waiting = true;
            st = shared.wait(&shared.ready_cv, st);
            st.consumer_waiting = false;
        }
    }

    /// Sets the cancel flag, wakes every waiting worker and joins them.
    fn shut_down(&mut self) {
        self.finished = true;
        {
            let _st = self.shared.lock();
            self.shared.cancel.store(true, Ordering::Relaxed);
            self.shared.space_cv.notify_all();
            self.shared.park_cv.notify_all();
        }
        for h in self.workers.drain(..) {
            // Workers catch user and input panics; an unwinding worker has already
            // marked the state broken, so the join result adds nothing.
            let _ = h.join();
        }
    }
}

impl<I: DataIter, F: MapFn<I::Item>> Drop for ParallelMap<I, F> {
    fn drop(&mut self) {
        self.shut_down();
    }
}
