//! The budgets one running pipeline's stages share: [`MemoryBudget`] (the RAM AUTOTUNE may
//! spend on buffers) and [`ThreadBudget`] (its CPU budget: the threads its maps, parsing
//! readers and batch-row splits may keep busy at once).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A RAM budget shared by the buffers of one pipeline that AUTOTUNE may grow.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes (`usize::MAX`: unlimited).
    pub fn new(limit: usize) -> Self {
        MemoryBudget { limit, used: AtomicUsize::new(0) }
    }

    /// Reserves `bytes` if they fit; false (and nothing reserved) otherwise.
    pub fn try_reserve(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(bytes).filter(|n| *n <= self.limit)
            })
            .is_ok()
    }

    /// Returns `bytes` reserved earlier.
    pub fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// The threads one pipeline's parallel maps, parsing readers (`tfrecord_batches`) and
/// batch-row splits ([`rows`](super::rows)) may keep working at once: its CPU budget
/// ([`RuntimeOptions::cores`], default the cores available), shared by every stage as the
/// [`MemoryBudget`] is. A map's fixed workers, each map's first worker and a reader's
/// threads are always granted (a stage must make progress); AUTOTUNE's raises and the
/// splits' threads are granted only within the budget, so that several `parallel: auto`
/// stages together never keep more threads busy than it allows (when it allows at least
/// one per stage).
///
/// Raises wait until the pass is built ([`while_building`](Self::while_building)): a stage
/// upstream of a `prefetch` starts working while the stages after it are
/// still being built, and would otherwise spend the threads their first workers need.
/// (A pass started ahead of its turn with `--overlap` takes its first workers while the
/// running one holds its own.)
#[derive(Debug)]
pub struct ThreadBudget {
    limit: usize,
    taken: AtomicUsize,
    peak: AtomicUsize,
    /// False while a pass is being built ([`while_building`](Self::while_building)).
    open: AtomicBool,
}

impl ThreadBudget {
    /// A budget of `limit` threads (at least 1).
    pub fn new(limit: usize) -> Self {
        ThreadBudget {
            limit: limit.max(1),
            taken: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            open: AtomicBool::new(true),
        }
    }

    /// Builds a pass with `build`, no raise granted meanwhile: every stage's first workers
    /// are taken before any stage's extra ones. Raises may take what is left afterwards,
    /// whether the build succeeded or not.
    pub fn while_building<T>(&self, build: impl FnOnce() -> T) -> T {
        self.open.store(false, Ordering::Release);
        let built = build();
        self.open.store(true, Ordering::Release);
        built
    }

    /// Takes one thread if the budget is open and has one left; false (nothing taken)
    /// otherwise.
    pub fn try_take(&self) -> bool {
        if !self.open.load(Ordering::Acquire) {
            return false;
        }
        let taken = self
            .taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| (t < self.limit).then_some(t + 1));
        match taken {
            Ok(before) => {
                self.peak.fetch_max(before + 1, Ordering::AcqRel);
                true
            }
            Err(_) => false,
        }
    }

    /// Takes `n` threads whatever is left (a stage's fixed or first workers).
    pub fn take(&self, n: usize) {
        let before = self.taken.fetch_add(n, Ordering::AcqRel);
        self.peak.fetch_max(before + n, Ordering::AcqRel);
    }

    /// Gives back `n` threads taken earlier.
    pub fn give_back(&self, n: usize) {
        self.taken.fetch_sub(n, Ordering::AcqRel);
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Threads taken now.
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::Acquire)
    }

    /// The most threads ever taken at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }
}

/// Threads taken from a pipeline's CPU budget whatever is left ([`ThreadBudget::take`]),
/// given back when dropped.
#[derive(Debug)]
pub(crate) struct Taken {
    ctx: super::Ctx,
    threads: usize,
}

impl Taken {
    /// Takes `threads` threads of `ctx`'s budget.
    pub(crate) fn new(ctx: &super::Ctx, threads: usize) -> Taken {
        ctx.threads().take(threads);
        Taken { ctx: ctx.clone(), threads }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.ctx.threads().give_back(self.threads);
    }
}
