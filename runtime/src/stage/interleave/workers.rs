//! The parallel interleave's shared state and its worker threads: the per-slot buffers
//! they fill ahead of the consumer, and the input elements they open early.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::{Ctx, DataIter, InnerItem, InnerIter, InterleaveFn, StageStats, call_user, open_inner};
use crate::error::{Error, Result};
use crate::stage::Element;

/// Elements a worker reads outside the lock before handing them over.
const FILL_CHUNK: usize = 32;

/// Where the dataset of one input element is.
pub(super) enum Src<X, J> {
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
pub(super) enum Taken<X, J> {
    Unopened(X),
    Open(J),
}

/// A worker's next piece of work.
pub(super) enum Task<I, X, J> {
    /// Open (if needed) and read ahead the job with this index.
    Fill(usize, Taken<X, J>),
    /// Pull the next input element.
    Fetch(I),
}

/// The dataset of one input element and the elements read from it ahead of the consumer.
pub(super) struct Job<X, J, Y> {
    pub(super) src: Src<X, J>,
    pub(super) buf: VecDeque<Result<Y>>,
}

/// Everything the consumer and the workers share, under one mutex.
pub(super) struct State<I, X, J, Y> {
    /// The input iterator; `None` while a worker pulls from it, or once it is done.
    pub(super) input: Option<I>,
    pub(super) input_done: bool,
    /// Jobs, indexed by the slots and `future`; at most `cycle_length + prefetch` in use.
    pub(super) pool: Vec<Job<X, J, Y>>,
    pub(super) free: Vec<usize>,
    /// The job in each slot of the cycle.
    pub(super) slots: Vec<Option<usize>>,
    /// Input elements pulled (and maybe opened) ahead, in input order.
    pub(super) future: VecDeque<usize>,
    pub(super) num_open: usize,
    pub(super) cycle_index: usize,
    pub(super) block_index: usize,
    /// Elements in all buffers.
    pub(super) buffered: usize,
    pub(super) consumer_waiting: bool,
    pub(super) idle_workers: usize,
    pub(super) stop: bool,
}

impl<I, X, J, Y> State<I, X, J, Y> {
    pub(super) fn advance(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.slots.len();
    }

    /// A job for `src`, from the free list.
    pub(super) fn alloc(&mut self, src: Src<X, J>) -> usize {
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
    pub(super) fn release(&mut self, j: usize) {
        self.pool[j].src = Src::Free;
        self.free.push(j);
    }

    /// Takes job `j`'s input element or open pass for a worker, if it has room to read.
    pub(super) fn take(&mut self, j: usize, capacity: usize) -> Option<Taken<X, J>> {
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
    pub(super) fn finish_job(&mut self, j: usize, err: Option<Error>) {
        let job = &mut self.pool[j];
        job.src = Src::Done;
        if let Some(e) = err {
            job.buf.push_back(Err(e));
            self.buffered += 1;
        }
    }
}

pub(super) struct Shared<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    pub(super) state: Mutex<SharedState<I, G>>,
    /// Workers wait here for work.
    pub(super) work: Condvar,
    /// The consumer waits here for elements.
    pub(super) data: Condvar,
    pub(super) f: Arc<G>,
    pub(super) ctx: Ctx,
    pub(super) stats: Arc<StageStats>,
    pub(super) slot_capacity: usize,
    pub(super) prefetch: usize,
}

pub(super) type SharedState<I, G> =
    State<I, <I as DataIter>::Item, InnerIter<G, <I as DataIter>::Item>, InnerItem<G, <I as DataIter>::Item>>;

pub(super) type TaskOf<I, G> = Task<I, <I as DataIter>::Item, InnerIter<G, <I as DataIter>::Item>>;

/// Locks the state. No code panics while holding the lock (user code runs outside it, or
/// under `call_user`), so a poisoned lock still holds consistent state.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<I, G> Shared<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    pub(super) fn wake_worker(&self, st: &SharedState<I, G>) {
        if st.idle_workers > 0 {
            self.work.notify_one();
        }
    }

    pub(super) fn wake_consumer(&self, st: &SharedState<I, G>) {
        if st.consumer_waiting {
            self.data.notify_one();
        }
    }

    /// Pops the next buffered result of job `j`, counting it.
    pub(super) fn pop(&self, st: &mut SharedState<I, G>, j: usize) -> Option<Result<InnerItem<G, I::Item>>> {
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
    pub(super) fn pick(&self, st: &mut SharedState<I, G>) -> Option<TaskOf<I, G>> {
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
    pub(super) fn fill(
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
    pub(super) fn fetch(&self, mut input: I) -> MutexGuard<'_, SharedState<I, G>> {
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
pub(super) fn work<I, G>(sh: Arc<Shared<I, G>>)
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
