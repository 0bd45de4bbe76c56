//! The parallel interleave's consumer: the same loop as the sequential one, over the
//! buffers the workers fill, and the workers' start and shutdown.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use super::workers::{Shared, SharedState, Src, State, lock, work};
use super::{Ctx, DataIter, InnerItem, InterleaveFn, StageStats};
use crate::error::{Error, Result};

pub(super) struct ParConfig<I, G> {
    pub(super) input: I,
    pub(super) f: Arc<G>,
    pub(super) ctx: Ctx,
    pub(super) stats: Arc<StageStats>,
    pub(super) cycle_length: usize,
    pub(super) block_length: usize,
    pub(super) workers: usize,
    pub(super) deterministic: bool,
    pub(super) slot_capacity: usize,
}

pub(super) struct Par<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    pub(super) shared: Arc<Shared<I, G>>,
    pub(super) workers: Vec<JoinHandle<()>>,
    pub(super) block_length: usize,
    pub(super) deterministic: bool,
    /// Non-deterministic mode: elements taken under one lock with the one returned, so
    /// the consumer locks once per chunk rather than once per element.
    pub(super) local: VecDeque<Ready<G, I::Item>>,
}

/// An element (or the error in its place) taken from a slot.
pub(super) type Ready<G, T> = Result<InnerItem<G, T>>;

/// Elements the consumer takes from a slot under one lock (non-deterministic mode).
pub(super) const CONSUMER_CHUNK: usize = 32;

impl<I, G> Par<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    pub(super) fn start(c: ParConfig<I, G>) -> Result<Self> {
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

    pub(super) fn next(&mut self) -> Result<Option<InnerItem<G, I::Item>>> {
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
    pub(super) fn pop_any(&self, st: &mut SharedState<I, G>) -> Option<(usize, Ready<G, I::Item>)> {
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
    pub(super) fn drain(
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
    pub(super) fn shutdown(&mut self) {
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
