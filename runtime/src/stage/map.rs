//! `map`: applies a user function to every element, on the consumer's thread or on
//! `num_parallel` worker threads, in order (`deterministic`, the default) or as results
//! complete.
//!
//! # Parallel map
//!
//! With `Fixed(n > 1)` or `Auto`, dedicated worker threads share the input iterator
//! (behind a lock; each pull gives the element a sequence number) and run the function
//! outside any lock. An in-flight window (`2 × workers`, at least 2; see
//! [`autotune`](super::autotune) for `Auto`) bounds the elements being computed or
//! finished but not yet delivered: a worker waits on a condition variable while the
//! window is full (backpressure), so memory does not grow with a slow consumer.
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
use super::{Ctx, DataIter, Dataset, Element, Fallible, Infallible, Parallelism, StageStats, call_user};
use crate::error::{BoxError, Error, Result};

/// A function of `map`.
pub trait MapFn<T>: Send + Sync + 'static {
    /// The output element.
    type Output: Element;
    /// Transforms one element.
    fn call(&self, x: T) -> std::result::Result<Self::Output, BoxError>;
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
            f.call(x).map_err(|source| Error::Stage { stage: stats.name().to_string(), source })
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

    /// Whether the consumer should be woken for a result at `seq`.
    fn wakes_consumer(&self, seq: u64) -> bool {
        self.consumer_waiting
            && match &self.results {
                Results::Ordered { next, .. } => seq == *next,
                Results::Unordered(_) => true,
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

/// The loop of worker `index`: reserve a window slot, pull an element, apply `f`, store
/// the result; until the input ends, an error closes the stream, or the cancel flag.
fn work<I: DataIter, F: MapFn<I::Item>>(sh: &Shared<I, F>, index: usize) {
    let _guard = WorkerGuard(sh);
    let stats = &*sh.stats;
    let mut st = sh.lock();
    loop {
        // Reserve a slot in the window.
        loop {
            if sh.cancel.load(Ordering::Relaxed) || st.end.is_some() {
                return;
            }
            if index >= st.tuner.active() {
                // Pass on a wake-up meant for an active worker.
                if st.space_waiters > 0 && st.in_flight < st.tuner.window() {
                    sh.space_cv.notify_one();
                }
                st = sh.wait(&sh.park_cv, st);
                continue;
            }
            if st.in_flight < st.tuner.window() {
                st.in_flight += 1;
                break;
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
        }
        drop(st);

        // Pull the next element; the input's end or error closes the stream.
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
        if input.done || sh.cancel.load(Ordering::Relaxed) {
            drop(input);
            st = sh.lock();
            st.in_flight -= 1;
            // The last release may be what the consumer waits for (unordered end).
            if st.consumer_waiting {
                sh.ready_cv.notify_one();
            }
            continue;
        }
        let seq = input.next_seq;
        // The input is a stage of ours and should not panic; if it does, the consumer
        // gets an error instead of waiting forever.
        let pulled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| input.iter.next()))
            .unwrap_or_else(|payload| Err(Error::from_panic(stats.name(), payload)));
        let x = match pulled {
            Ok(Some(x)) => {
                input.next_seq += 1;
                drop(input);
                x
            }
            Ok(None) => {
                input.done = true;
                stats.add_wait_input(t.elapsed());
                st = sh.lock();
                st.in_flight -= 1;
                sh.close(&mut st, seq);
                drop(input);
                continue;
            }
            Err(e) => {
                input.done = true;
                stats.add_wait_input(t.elapsed());
                st = sh.lock();
                st.store(seq, Err(e));
                sh.close(&mut st, seq + 1);
                drop(input);
                continue;
            }
        };
        stats.add_wait_input(t.elapsed());
        if sh.cancel.load(Ordering::Relaxed) {
            return;
        }

        let r = apply(&*sh.f, x, stats);

        st = sh.lock();
        let failed = r.is_err();
        let wake = st.wakes_consumer(seq);
        st.store(seq, r);
        if failed {
            sh.close(&mut st, seq + 1);
        } else if wake {
            sh.ready_cv.notify_one();
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
        let capacity = tuner.capacity();
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
                stats.sample_queue(ready, st.tuner.window());
                if let Ok(x) = &r {
                    st.tuner.observe(x.byte_size());
                }
                if st.space_waiters > 0 {
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
            let busy = (st.in_flight - st.ready).saturating_sub(shared.input_waiters.load(Ordering::Relaxed));
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
