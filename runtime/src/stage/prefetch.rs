//! `prefetch`: a producer thread pulls the input ahead of the consumer into a bounded
//! queue, so the input's work overlaps the consumer's.
//!
//! The producer waits for room before it pulls (so at most `depth` elements are held),
//! forwards an input error in order and stops after it. Dropping the iterator sets a
//! cancel flag, wakes the producer and joins it (a producer inside the input's `next`
//! finishes that call first). `Buffer::Auto` grows the depth at run time within the
//! pipeline's memory budget (see [`autotune`](super::autotune)).
//!
//! Statistics: time the producer waits on the input is `wait_input`, time it waits for
//! room (the consumer is slower) is `wait_output`; every delivery samples the queue.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::autotune::{Buffer, BufferTuner};
use super::{Ctx, DataIter, Dataset, Element, StageStats};
use crate::error::{Error, Result};

/// The `prefetch` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Prefetch<D> {
    input: D,
    buffer: Buffer,
    stats: Arc<StageStats>,
}

impl<D> Prefetch<D> {
    pub(crate) fn new(input: D, buffer: Buffer) -> Self {
        Prefetch { input, buffer, stats: Arc::new(StageStats::new("prefetch")) }
    }

    /// Names the stage in statistics and errors.
    pub fn named(mut self, name: &str) -> Self {
        self.stats = Arc::new(StageStats::new(name));
        self
    }
}

impl<D: Dataset> Dataset for Prefetch<D> {
    type Item = D::Item;
    type Iter = PrefetchIter<D::Item>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// What it buffers ahead is not consumed: its input is where its consumer is.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<super::StagePosition>) {
        self.input.positions(epoch, output, found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<super::Layer> {
        self.input.redeal_of(epoch)
    }

    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        let input = self.input.iter_from(ctx, skip)?;
        self.stats.set_parallelism(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::with_capacity(2),
                tuner: BufferTuner::new(self.buffer, ctx),
                done: false,
                consumer_waiting: false,
                producer_waiting: false,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            cancel: AtomicBool::new(false),
            stats: self.stats.clone(),
        });
        let producer_shared = shared.clone();
        let producer = std::thread::Builder::new()
            .name(format!("sluice-{}", self.stats.name()))
            .spawn(move || produce(&producer_shared, input))
            .map_err(|e| Error::Stage {
                stage: self.stats.name().to_string(),
                source: format!("cannot start the producer thread: {e}").into(),
            })?;
        Ok(PrefetchIter { shared, producer: Some(producer), finished: false })
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    cancel: AtomicBool,
    stats: Arc<StageStats>,
}

struct State<T> {
    queue: VecDeque<Result<T>>,
    tuner: BufferTuner,
    /// The producer has queued its last item (the input's end or an error).
    done: bool,
    consumer_waiting: bool,
    producer_waiting: bool,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic cannot happen while the lock is held (user code runs outside it), so a
        // poisoned lock still holds consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The producer thread: waits for room, pulls one element, queues it.
fn produce<I: DataIter>(shared: &Shared<I::Item>, mut input: I) {
    let stats = &shared.stats;
    loop {
        {
            let mut st = shared.lock();
            while st.queue.len() >= st.tuner.depth() && !shared.cancel.load(Ordering::Relaxed) {
                st.tuner.producer_blocked();
                st.producer_waiting = true;
                let t = Instant::now();
                st = shared.not_full.wait(st).unwrap_or_else(PoisonError::into_inner);
                stats.add_wait_output(t.elapsed());
                st.producer_waiting = false;
            }
            if shared.cancel.load(Ordering::Relaxed) {
                return;
            }
        }
        let t = Instant::now();
        // The input is a stage of ours and should not panic; if it does, the consumer
        // gets an error instead of waiting forever.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| input.next()))
            .unwrap_or_else(|payload| Err(Error::from_panic(stats.name(), payload)));
        stats.add_wait_input(t.elapsed());
        let mut st = shared.lock();
        let last = !matches!(r, Ok(Some(_)));
        match r {
            Ok(Some(x)) => {
                let bytes = x.byte_size();
                stats.produced(bytes);
                st.tuner.observe(bytes);
                st.queue.push_back(Ok(x));
            }
            Ok(None) => {}
            Err(e) => st.queue.push_back(Err(e)),
        }
        st.done = last;
        if st.consumer_waiting {
            shared.not_empty.notify_one();
        }
        if last {
            return;
        }
    }
}

/// One pass of [`Prefetch`]: the consumer's end of the queue.
pub struct PrefetchIter<T> {
    shared: Arc<Shared<T>>,
    producer: Option<JoinHandle<()>>,
    finished: bool,
}

impl<T> fmt::Debug for PrefetchIter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("PrefetchIter")
            .field("stage", &self.shared.stats.name())
            .field("queued", &st.queue.len())
            .field("depth", &st.tuner.depth())
            .field("finished", &self.finished)
            .finish()
    }
}

impl<T> PrefetchIter<T> {
    /// Stops the producer and joins it.
    fn shut_down(&mut self) {
        self.finished = true;
        {
            let _st = self.shared.lock();
            self.shared.cancel.store(true, Ordering::Relaxed);
        }
        self.shared.not_full.notify_all();
        if let Some(h) = self.producer.take() {
            // The producer catches panics from the input; a join error would mean a bug
            // in this file, and the consumer has its answer already.
            let _ = h.join();
        }
    }
}

impl<T: Element> DataIter for PrefetchIter<T> {
    type Item = T;

    fn next(&mut self) -> Result<Option<T>> {
        if self.finished {
            return Ok(None);
        }
        let shared = &*self.shared;
        let mut st = shared.lock();
        loop {
            let len = st.queue.len();
            if let Some(r) = st.queue.pop_front() {
                shared.stats.sample_queue(len, st.tuner.depth());
                if st.producer_waiting {
                    shared.not_full.notify_one();
                }
                drop(st);
                return match r {
                    Ok(x) => Ok(Some(x)),
                    Err(e) => {
                        self.shut_down();
                        Err(e)
                    }
                };
            }
            if st.done {
                drop(st);
                self.shut_down();
                return Ok(None);
            }
            // The queue is empty, so the producer is not waiting for room: a deeper
            // queue takes effect at its next check.
            st.tuner.starved();
            st.consumer_waiting = true;
            st = shared.not_empty.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.consumer_waiting = false;
        }
    }
}

impl<T> Drop for PrefetchIter<T> {
    fn drop(&mut self) {
        self.shut_down();
    }
}
