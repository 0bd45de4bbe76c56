//! AUTOTUNE: the run-time policies that pick a parallel `map`'s worker count and a
//! `prefetch` buffer's depth.
//!
//! Both policies are small state machines driven by events the stages observe under
//! their own locks; they change timing only, never which elements flow or (with
//! `deterministic = true`) their order.
//!
//! # Map workers ([`WorkerTuner`])
//!
//! - `Fixed(n)`: `n` workers (at most [`THREADS_PER_CORE`](crate::defaults::THREADS_PER_CORE)
//!   per core: [`most_threads`]), an in-flight window of twice that (at least 2); nothing
//!   is tuned.
//! - Every map's workers are taken from the pipeline's CPU budget
//!   ([`ThreadBudget`](super::ThreadBudget), `ctx.cores()` threads): fixed workers and an
//!   `Auto` map's first whatever is left, each `Auto` raise only when the budget has one.
//! - `Auto`: up to `ctx.cores()` workers, started lazily. The active-worker limit starts
//!   at 1 and the in-flight window is `active + 1` (at least 2): one element per worker
//!   and one finished result of slack, so memory follows the limit and stays small when
//!   elements are large (a batch-level map holds whole batches).
//!   - **Raise** by one (up to the cores, within the CPU budget) when the consumer finds no ready result while
//!     every active worker is busy (holds an element it is pulling or computing; a
//!     worker queued behind another for the shared input does not count): more workers
//!     would have had one ready. Workers starved by a slow input stop the growth.
//!   - **Lower** by one (down to 1) after [`LOWER_AFTER`] waits of workers for window
//!     room with no consumer starvation in between: the consumer is the slow side and
//!     the extra workers only hold finished results. Starvation resets the count.
//!   - **Within the budget**: each raise first reserves what one more worker holds (one
//!     micro-batch it computes and one finished: twice the mean result size seen so far
//!     times the map's micro-batch) from the pipeline's [`MemoryBudget`](super::MemoryBudget); when the
//!     reservation fails the limit stays. A lower releases the last raise's reservation,
//!     and the pass's end all of them. The first worker is not reserved.
//!
//! # Prefetch depth ([`BufferTuner`])
//!
//! - `Fixed(n)`: a queue of `n` elements (at least 1).
//! - `Auto`: the depth starts at 2 and **doubles** (up to [`MAX_AUTO_DEPTH`]) when the
//!   consumer finds the queue empty *and* the producer has had to wait for room since
//!   the last change: a bursty producer, which a deeper queue smooths out. A producer
//!   that is simply slower never fills the queue, so a deeper queue would not help and
//!   the depth stays. Each growth first reserves the new slots (slots × mean element
//!   bytes seen so far) from the pipeline's [`MemoryBudget`](super::MemoryBudget): when
//!   the reservation fails the depth stays, so `RuntimeOptions::memory_budget` bounds
//!   every autotuned buffer. The first two slots are not reserved (a fixed buffer of 2
//!   is always allowed). The depth never shrinks; the reservation is released when the
//!   pass ends (the tuner is dropped).

use super::{Ctx, Parallelism};

/// Window waits (without starvation in between) after which `Auto` map lowers its limit.
pub(crate) const LOWER_AFTER: u32 = 32;

/// The largest depth `Buffer::Auto` grows to.
pub(crate) const MAX_AUTO_DEPTH: usize = 1024;

/// The most worker threads a stage with a fixed thread count starts:
/// [`THREADS_PER_CORE`](crate::defaults::THREADS_PER_CORE) per core of `ctx`. More could
/// not run at once; thousands would only exhaust the process's threads and memory.
pub(crate) fn most_threads(ctx: &Ctx) -> usize {
    ctx.cores().max(1).saturating_mul(crate::defaults::THREADS_PER_CORE)
}

/// The worker policy of a parallel `map`: how many workers may work and how many
/// elements may be in flight.
#[derive(Debug)]
pub(crate) struct WorkerTuner {
    active: usize,
    max: usize,
    auto: bool,
    output_waits: u32,
    /// The context whose budgets the workers come from: its
    /// [`ThreadBudget`](super::ThreadBudget) holds `active` threads for this stage, and its
    /// memory budget the bytes of each `Auto` raise (`reserved`).
    ctx: Ctx,
    reserved: Vec<usize>,
    bytes_seen: u64,
    results_seen: u64,
    /// Elements a worker takes at once (the map's micro-batch).
    micro: usize,
}

impl WorkerTuner {
    /// The policy for `p` with `ctx`'s cores and memory budget (used by `Auto` only).
    pub(crate) fn new(p: Parallelism, ctx: &Ctx) -> Self {
        let (active, max, auto) = match p {
            Parallelism::Fixed(n) => {
                let n = n.clamp(1, most_threads(ctx));
                (n, n, false)
            }
            Parallelism::Auto => (1, ctx.cores().max(1), true),
        };
        // Fixed workers, and an automatic stage's first, run whatever the budget has left.
        ctx.threads().take(active);
        WorkerTuner {
            active,
            max,
            auto,
            output_waits: 0,
            ctx: ctx.clone(),
            reserved: Vec::new(),
            bytes_seen: 0,
            results_seen: 0,
            micro: 1,
        }
    }

    /// The map now hands over `micro` elements at a time: a worker holds that many.
    pub(crate) fn set_micro(&mut self, micro: usize) {
        self.micro = micro.max(1);
    }

    /// A result of `bytes` bytes was delivered.
    pub(crate) fn observe(&mut self, bytes: usize) {
        self.bytes_seen += bytes as u64;
        self.results_seen += 1;
    }

    /// Reserves what one more worker holds from the budget: false when it does not fit.
    fn reserve_raise(&mut self) -> bool {
        let mean = self.bytes_seen.div_ceil(self.results_seen.max(1)).max(1);
        let Ok(bytes) = usize::try_from(mean.saturating_mul(2 * self.micro as u64)) else { return false };
        if !self.ctx.budget().try_reserve(bytes) {
            return false;
        }
        self.reserved.push(bytes);
        true
    }

    /// Workers allowed to work now.
    pub(crate) fn active(&self) -> usize {
        self.active
    }

    /// The most workers this stage will ever run.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Micro-batches allowed in flight now (being computed or finished but not
    /// delivered); the map multiplies by its micro-batch size.
    pub(crate) fn window(&self) -> usize {
        if self.auto { self.active + 1 } else { (2 * self.active).max(2) }
    }

    /// The largest window ever allowed: the size of the result buffer.
    pub(crate) fn capacity(&self) -> usize {
        if self.auto { self.max + 1 } else { (2 * self.max).max(2) }
    }

    /// The consumer found no ready result while `busy` workers were busy. Returns true
    /// when the limit was raised.
    pub(crate) fn starved(&mut self, busy: usize) -> bool {
        self.output_waits = 0;
        let wanted = self.auto && busy >= self.active && self.active < self.max;
        if !wanted || !self.ctx.threads().try_take() {
            return false;
        }
        if !self.reserve_raise() {
            self.ctx.threads().give_back(1);
            return false;
        }
        self.active += 1;
        true
    }

    /// A worker had to wait for window room. Returns true when the limit was lowered.
    pub(crate) fn output_blocked(&mut self) -> bool {
        if !self.auto || self.active <= 1 {
            return false;
        }
        self.output_waits += 1;
        if self.output_waits >= LOWER_AFTER {
            self.output_waits = 0;
            self.active -= 1;
            self.ctx.threads().give_back(1);
            if let Some(bytes) = self.reserved.pop() {
                self.ctx.budget().release(bytes);
            }
            return true;
        }
        false
    }
}

impl WorkerTuner {
    /// The context whose budgets the workers come from.
    pub(crate) fn ctx(&self) -> &Ctx {
        &self.ctx
    }
}

impl Drop for WorkerTuner {
    fn drop(&mut self) {
        self.ctx.threads().give_back(self.active);
        self.ctx.budget().release(self.reserved.iter().sum());
    }
}

/// The depth of a `prefetch` queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Buffer {
    /// A fixed number of elements (0 counts as 1).
    Fixed(usize),
    /// Chosen at run time (AUTOTUNE), within the pipeline's memory budget.
    #[default]
    Auto,
}

impl From<usize> for Buffer {
    fn from(n: usize) -> Self {
        Buffer::Fixed(n)
    }
}

/// The depth policy of a `prefetch` queue, holding the budget it reserved.
#[derive(Debug)]
pub(crate) struct BufferTuner {
    depth: usize,
    auto: bool,
    ctx: Ctx,
    reserved: usize,
    producer_waited: bool,
    bytes_seen: u64,
    elements_seen: u64,
}

impl BufferTuner {
    /// The policy for `buffer`, reserving from `ctx`'s memory budget.
    pub(crate) fn new(buffer: Buffer, ctx: &Ctx) -> Self {
        let (depth, auto) = match buffer {
            Buffer::Fixed(n) => (n.max(1), false),
            Buffer::Auto => (crate::defaults::PREFETCH_AUTO_DEPTH, true),
        };
        BufferTuner {
            depth,
            auto,
            ctx: ctx.clone(),
            reserved: 0,
            producer_waited: false,
            bytes_seen: 0,
            elements_seen: 0,
        }
    }

    /// The queue's depth now.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// Bytes reserved from the budget now.
    #[cfg(test)]
    pub(crate) fn reserved(&self) -> usize {
        self.reserved
    }

    /// The producer made an element of `bytes` bytes.
    pub(crate) fn observe(&mut self, bytes: usize) {
        self.bytes_seen += bytes as u64;
        self.elements_seen += 1;
    }

    /// The producer had to wait for room in the queue.
    pub(crate) fn producer_blocked(&mut self) {
        self.producer_waited = true;
    }

    /// The consumer found the queue empty. Returns true when the depth grew.
    pub(crate) fn starved(&mut self) -> bool {
        if !self.auto || !self.producer_waited || self.depth >= MAX_AUTO_DEPTH {
            return false;
        }
        let new_depth = (self.depth * 2).min(MAX_AUTO_DEPTH);
        let mean = self.bytes_seen.div_ceil(self.elements_seen.max(1)).max(1);
        let Ok(bytes) = usize::try_from(mean.saturating_mul((new_depth - self.depth) as u64)) else {
            return false;
        };
        if !self.ctx.budget().try_reserve(bytes) {
            return false;
        }
        self.reserved += bytes;
        self.depth = new_depth;
        self.producer_waited = false;
        true
    }
}

impl Drop for BufferTuner {
    fn drop(&mut self) {
        self.ctx.budget().release(self.reserved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::RuntimeOptions;

    #[test]
    fn fixed_workers_are_not_tuned() {
        let mut t = WorkerTuner::new(Parallelism::Fixed(3), &cores(8, usize::MAX));
        assert_eq!((t.active(), t.max(), t.window(), t.capacity()), (3, 3, 6, 6));
        assert!(!t.starved(3));
        for _ in 0..100 {
            assert!(!t.output_blocked());
        }
        assert_eq!(t.active(), 3);
    }

    #[test]
    fn auto_workers_rise_when_starved_and_fall_when_blocked() {
        let mut t = WorkerTuner::new(Parallelism::Auto, &cores(3, usize::MAX));
        assert_eq!((t.active(), t.window(), t.capacity()), (1, 2, 4));
        // Starved while a worker idles: no raise.
        assert!(!t.starved(0));
        assert!(t.starved(1));
        assert!(t.starved(2));
        assert_eq!((t.active(), t.window()), (3, 4));
        // At the cores: no further raise.
        assert!(!t.starved(3));
        // Lowering needs LOWER_AFTER waits without starvation.
        for _ in 0..LOWER_AFTER - 1 {
            assert!(!t.output_blocked());
        }
        t.starved(0);
        for _ in 0..LOWER_AFTER - 1 {
            assert!(!t.output_blocked());
        }
        assert!(t.output_blocked());
        assert_eq!(t.active(), 2);
        for _ in 0..2 * LOWER_AFTER {
            t.output_blocked();
        }
        assert_eq!(t.active(), 1);
    }

    fn ctx(budget: usize) -> Ctx {
        Ctx::new(&RuntimeOptions { memory_budget: Some(budget), cores: Some(2) })
    }

    fn cores(cores: usize, budget: usize) -> Ctx {
        Ctx::new(&RuntimeOptions { memory_budget: Some(budget), cores: Some(cores) })
    }

    /// Each extra worker reserves two mean results from the budget; one that does not
    /// fit is not started, however starved the consumer; lowering and the end of the
    /// pass give the reservations back.
    #[test]
    fn auto_workers_grow_only_within_the_budget() {
        let ctx = cores(16, 1000);
        let mut t = WorkerTuner::new(Parallelism::Auto, &ctx);
        t.observe(200);
        assert!(t.starved(1), "400 bytes fit");
        assert!(t.starved(2), "800 bytes fit");
        assert_eq!((t.active(), ctx.budget().used()), (3, 800));
        assert!(!t.starved(3), "a third raise would need 1200 bytes");
        assert_eq!(t.active(), 3);
        for _ in 0..LOWER_AFTER {
            t.output_blocked();
        }
        assert_eq!((t.active(), ctx.budget().used()), (2, 400));
        drop(t);
        assert_eq!(ctx.budget().used(), 0);
        // Without a budget it grows to the cores.
        let ctx = cores(16, usize::MAX);
        let mut t = WorkerTuner::new(Parallelism::Auto, &ctx);
        t.observe(1 << 30);
        for busy in 1..16 {
            assert!(t.starved(busy));
        }
        assert_eq!(t.active(), 16);
    }

    /// Three automatic maps share the CPU budget: each starts with its first worker, the
    /// raises stop when the budget is spent whichever stage asks, a lower gives a thread
    /// back for another stage to take, and the end of a pass gives back all of them.
    #[test]
    fn auto_workers_share_the_pipeline_s_cpu_budget() {
        let ctx = cores(4, usize::MAX);
        let mut stages: Vec<WorkerTuner> =
            (0..3).map(|_| WorkerTuner::new(Parallelism::Auto, &ctx)).collect();
        assert_eq!(ctx.threads().taken(), 3);
        assert!(stages[0].starved(1), "the fourth thread");
        assert!(!stages[1].starved(1) && !stages[2].starved(1) && !stages[0].starved(2), "no fifth");
        assert_eq!((stages[0].active(), ctx.threads().taken()), (2, 4));
        for _ in 0..LOWER_AFTER {
            stages[0].output_blocked();
        }
        assert_eq!((stages[0].active(), ctx.threads().taken()), (1, 3));
        assert!(stages[2].starved(1), "the thread stage 0 gave back");
        assert_eq!(ctx.threads().peak(), 4);
        // Fixed workers run whatever is left, and leave nothing for raises.
        let fixed = WorkerTuner::new(Parallelism::Fixed(3), &ctx);
        assert_eq!(ctx.threads().taken(), 7);
        assert!(!stages[1].starved(1));
        drop(fixed);
        stages.clear();
        assert_eq!(ctx.threads().taken(), 0);
    }

    /// A pipeline of three `parallel: auto` maps over CPU work, with a budget of 4
    /// threads (each map alone would grow to 4): the workers computing at once, counted
    /// by the work itself, never exceed the budget, and the raises used it.
    #[test]
    fn three_automatic_maps_never_keep_more_workers_busy_than_the_budget() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        use crate::stage::{Dataset, range_step};
        let busy = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let work = |busy: Arc<(AtomicUsize, AtomicUsize)>| {
            move |x: i64| {
                let now = busy.0.fetch_add(1, Ordering::SeqCst) + 1;
                busy.1.fetch_max(now, Ordering::SeqCst);
                let mut h = x as u64;
                for _ in 0..20_000 {
                    h = std::hint::black_box(h.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
                }
                busy.0.fetch_sub(1, Ordering::SeqCst);
                x + i64::from(h == 0)
            }
        };
        let ds = range_step(0, 800, 1)
            .map(work(busy.clone()))
            .num_parallel(Parallelism::Auto)
            .map(work(busy.clone()))
            .num_parallel(Parallelism::Auto)
            .map(work(busy.clone()))
            .num_parallel(Parallelism::Auto);
        let ctx = cores(4, usize::MAX);
        let values: Vec<i64> = ds.stream_in(&ctx).unwrap().map(|x| x.unwrap()).collect();
        assert_eq!(values, (0..800).collect::<Vec<_>>());
        let (peak, busiest) = (ctx.threads().peak(), busy.1.load(Ordering::SeqCst));
        assert!(busiest <= 4, "{busiest} workers computed at once with a budget of 4");
        assert!(peak == 4, "the budget's peak: {peak} threads (3 firsts, then raises up to 4)");
        assert_eq!(ctx.threads().taken(), 0, "the pass gave every thread back");
    }

    #[test]
    fn auto_buffer_doubles_within_the_budget_and_releases_it() {
        let ctx = ctx(1000);
        let mut t = BufferTuner::new(Buffer::Auto, &ctx);
        assert_eq!(t.depth(), 2);
        t.observe(100);
        // Starved without the producer having waited: a deeper queue would not help.
        assert!(!t.starved());
        t.producer_blocked();
        assert!(t.starved());
        assert_eq!((t.depth(), t.reserved(), ctx.budget().used()), (4, 200, 200));
        // The producer must wait again before the next growth.
        assert!(!t.starved());
        t.producer_blocked();
        assert!(t.starved());
        assert_eq!((t.depth(), ctx.budget().used()), (8, 600));
        // 8 more slots (800 bytes) do not fit in the 400 left.
        t.producer_blocked();
        assert!(!t.starved());
        assert_eq!((t.depth(), ctx.budget().used()), (8, 600));
        drop(t);
        assert_eq!(ctx.budget().used(), 0);
    }

    #[test]
    fn fixed_buffer_never_grows() {
        let ctx = ctx(usize::MAX);
        let mut t = BufferTuner::new(Buffer::Fixed(0), &ctx);
        assert_eq!(t.depth(), 1);
        t.observe(8);
        t.producer_blocked();
        assert!(!t.starved());
        assert_eq!((t.depth(), ctx.budget().used()), (1, 0));
    }
}
