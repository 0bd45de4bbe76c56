//! Data parallelism inside a stage: the rows of one batch split across the pipeline's
//! rayon pool, each part written into its own disjoint slice of the batch's columns
//! ([`ColumnPart`](crate::column::ColumnPart)), so the batch is bit-identical to the one
//! a single thread makes.
//!
//! The stages' own threads (readers, map workers, prefetch) stay what streams elements
//! from stage to stage; this pool is for the work inside one element when that element
//! is a batch: the fused `map` + `batch` of a reader (`tfrecord_batches`'s batch
//! function), a map over batches. It shares the pipeline's CPU budget
//! ([`ThreadBudget`](super::ThreadBudget)): a batch is split only into as many parts as
//! the budget has threads left over, taken for the batch and given back after it. A
//! stage whose workers already use every core therefore never splits (two cores, two
//! readers: nothing changes), while one whose parallelism is capped below the cores (a
//! reader of `cycle: 4` on 16 cores) hands its batches' rows to the idle ones.
//!
//! Where the split applies: generated code asks [`split`] on a worker thread of a stage
//! that [`enter`]ed the pipeline (`tfrecord_batches`'s readers, a parallel `map`'s
//! workers); anywhere else (the consumer's thread, a test calling the function) a batch is
//! made on the calling thread alone.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use super::{Ctx, Runtime, StageStats};
use crate::column::{ColumnPart, Filled};
use crate::error::BoxError;

pub use crate::defaults::MIN_ROWS_PER_PART;

thread_local! {
    /// The pipeline (and the stage) the current thread works for, while it is entered.
    static CURRENT: RefCell<Option<(Arc<Runtime>, Arc<StageStats>)>> = const { RefCell::new(None) };
}

/// While alive, this thread works for the pipeline of `ctx`, as the stage `stats`:
/// batches made on it may be [`split`] within the pipeline's CPU budget.
#[must_use = "the thread leaves the pipeline when this is dropped"]
#[derive(Debug)]
pub struct Entered {
    previous: Option<(Arc<Runtime>, Arc<StageStats>)>,
}

/// Marks this thread as working for `ctx`'s pipeline, as the stage `stats`.
pub fn enter(ctx: &Ctx, stats: &Arc<StageStats>) -> Entered {
    let previous = CURRENT.with(|c| c.replace(Some((ctx.rt.clone(), stats.clone()))));
    Entered { previous }
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// A batch of `n` rows split into parts: one per thread taken from the budget, and one
/// for the calling thread's own share (its thread waits while the pool runs every part).
/// Gives its threads back when dropped.
#[derive(Debug)]
pub struct Split {
    rt: Arc<Runtime>,
    stats: Arc<StageStats>,
    extra: usize,
    ranges: Vec<Range<usize>>,
}

/// How to make a batch of `n` rows on this thread: split across the pipeline's pool, or
/// `None`, made here alone (not a worker thread of a pipeline, fewer than two parts'
/// worth of rows, or no thread left in the budget).
pub fn split(n: usize) -> Option<Split> {
    let (rt, stats) = CURRENT.with(|c| c.borrow().clone())?;
    let wanted = (n / MIN_ROWS_PER_PART).min(rt.threads.limit());
    if wanted < 2 {
        return None;
    }
    let mut extra = 0;
    while extra + 1 < wanted && rt.threads.try_take() {
        extra += 1;
    }
    if extra == 0 {
        return None;
    }
    if rt.rows_pool().is_none() {
        rt.threads.give_back(extra);
        return None;
    }
    let parts = extra + 1;
    let ranges = (0..parts).map(|k| k * n / parts..(k + 1) * n / parts).collect();
    Some(Split { rt, stats, extra, ranges })
}

impl Split {
    /// The rows of each part, in order (contiguous from 0).
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// Cuts the empty `column` (room for every row, `per` values each) into one part
    /// per range.
    pub fn column<'a, T>(
        &self,
        column: &'a mut Vec<T>,
        per: usize,
    ) -> Result<(Vec<ColumnPart<'a, T>>, Filled), BoxError> {
        Ok(crate::column::split_column(column, per, &self.ranges)?)
    }

    /// Runs `f` on each range with its part (`parts` in range order) on the pool, the
    /// calling thread waiting; the first error in row order, if any. A panic in `f`
    /// reaches the caller as a panic.
    pub fn run<P: Send, E: Send>(
        &self,
        parts: impl IntoIterator<Item = P>,
        f: impl Fn(Range<usize>, P) -> Result<(), E> + Sync,
    ) -> Result<(), E> {
        use rayon::prelude::*;
        let tasks: Vec<(Range<usize>, P)> = self.ranges.iter().cloned().zip(parts).collect();
        let pool = self.rt.rows_pool().expect("checked when the split was made");
        let results: Vec<Result<(), E>> =
            pool.install(|| tasks.into_par_iter().with_max_len(1).map(|(r, p)| f(r, p)).collect());
        self.stats.add_split(self.ranges.len());
        results.into_iter().collect()
    }
}

impl Drop for Split {
    fn drop(&mut self) {
        self.rt.threads.give_back(self.extra);
    }
}

/// The pool of a pipeline: as many threads as its CPU budget, started on the first split.
pub(super) fn build_pool(threads: usize) -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("sluice-rows-{i}"))
        .build()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::RuntimeOptions;

    fn ctx(cores: usize) -> (Ctx, Arc<StageStats>) {
        (
            Ctx::new(&RuntimeOptions { cores: Some(cores), ..Default::default() }),
            Arc::new(StageStats::new("m")),
        )
    }

    #[test]
    fn a_thread_outside_a_pipeline_never_splits() {
        assert!(split(1 << 20).is_none());
    }

    #[test]
    fn a_split_takes_what_the_budget_has_left_and_gives_it_back() {
        let (ctx, stats) = ctx(4);
        let _in = enter(&ctx, &stats);
        ctx.threads().take(1);
        let s = split(1000).expect("3 threads are left");
        assert_eq!(s.ranges().len(), 4);
        assert_eq!(ctx.threads().taken(), 4);
        assert!(split(1000).is_none(), "none left");
        drop(s);
        assert_eq!(ctx.threads().taken(), 1);
        assert!(split(2 * MIN_ROWS_PER_PART - 1).is_none(), "too few rows for two parts");
        let s = split(2 * MIN_ROWS_PER_PART).unwrap();
        assert_eq!(s.ranges(), &[0..8, 8..16]);
    }

    #[test]
    fn parts_run_on_the_pool_and_the_first_error_in_row_order_wins() {
        let (ctx, stats) = ctx(3);
        let _in = enter(&ctx, &stats);
        let s = split(300).unwrap();
        assert_eq!(s.ranges(), &[0..100, 100..200, 200..300]);
        let mut column: Vec<u64> = Vec::with_capacity(600);
        let (parts, filled) = s.column(&mut column, 2).unwrap();
        s.run(parts, |rows, mut part| {
            for i in rows {
                crate::column::Append::extend_from_slice(&mut part, &[i as u64, (i * i) as u64]);
            }
            assert!(std::thread::current().name().unwrap().starts_with("sluice-rows-"));
            Ok::<_, String>(())
        })
        .unwrap();
        filled.commit(&mut column).unwrap();
        assert_eq!(column, (0..300u64).flat_map(|i| [i, i * i]).collect::<Vec<_>>());
        let err = s.run([(); 3], |rows, ()| if rows.start > 0 { Err(rows.start) } else { Ok(()) });
        assert_eq!(err, Err(100));
        assert_eq!(stats.snapshot().splits, 2);
    }

    #[test]
    fn entering_nests_and_leaving_restores() {
        let (outer, s1) = ctx(4);
        let (inner, s2) = ctx(1);
        let _a = enter(&outer, &s1);
        {
            let _b = enter(&inner, &s2);
            assert!(split(1000).is_none(), "a budget of 1 has nothing left over");
        }
        assert!(split(1000).is_some());
    }
}
