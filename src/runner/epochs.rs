//! The epoch loop of a run: `--epochs` passes over one dataset, each its own epoch of one
//! context (a reshuffling `shuffle` or a random op sees a new one; the statistics add up),
//! with the epoch turns overlapped.
//!
//! **Overlap.** Without it (the default), each pass starts when the last one has delivered
//! its last element, so every turn waits for the new pass's start-up (threads, files, the
//! shuffle buffer's fill, AUTOTUNE) while the old pass's tail leaves cores idle. With it
//! (`--overlap`), the pass of epoch `e + 1` is started once pass
//! `e` has delivered all but [`LEAD_DIVISOR`]th of the elements the pass before it gave
//! (at least one before its end): it computes its first elements, up to its own buffers,
//! while pass `e` drains. The first turn is not overlapped (no pass has been counted yet).
//!
//! Each pass is independent (its own stream in its own epoch), so when the next one starts
//! changes no element and no order: only timing. Memory: while both run, at most one more
//! pipeline's buffers; AUTOTUNE's reservations of both come from the one memory budget.
//! An error starting the pass ahead is reported at its turn, as without overlap.
//!
//! It is off by default because on a pipeline that already keeps every core busy (such as
//! `image_raw` on 2 cores) the pass ahead only competes with the current one and its
//! buffers are fresh memory: measured there, 4 epochs ran slower and peaked higher with it
//! (BENCHMARKS.md, "Epoch turns"). It pays where the turn leaves cores idle.

use std::time::Instant;

use sluice_runtime::stage::{Ctx, Dataset, Stream};

/// The next pass starts when the current one has this fraction (1/LEAD_DIVISOR) of the
/// previous pass's element count left to deliver.
pub(super) const LEAD_DIVISOR: u64 = 32;

/// One pass, as the loop saw it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PassReport {
    /// Elements delivered.
    pub elements: u64,
    /// Seconds from the previous pass's last element (or the loop's start) to this one's.
    pub seconds: f64,
    /// Whether this pass was started before the previous one ended.
    pub started_ahead: bool,
}

/// Runs `epochs` passes of `ds` in `ctx` (epochs `0..epochs`), calling `visit(epoch,
/// element)` for every element in order; with `overlap`, each turn after the first is
/// overlapped. Stops at the first error.
pub(super) fn each_pass<D: Dataset>(
    ds: &D,
    ctx: &Ctx,
    epochs: u64,
    overlap: bool,
    mut visit: impl FnMut(u64, &D::Item),
) -> sluice_runtime::Result<Vec<PassReport>> {
    let mut reports: Vec<PassReport> = Vec::new();
    let mut ahead: Option<sluice_runtime::Result<Stream<D::Iter>>> = None;
    let mut turn = Instant::now();
    for epoch in 0..epochs {
        let started_ahead = ahead.is_some();
        let mut stream = match ahead.take() {
            Some(s) => s?,
            None => ds.stream_in(&ctx.with_epoch(epoch))?,
        };
        let start_next_at = reports
            .last()
            .filter(|_| overlap && epoch + 1 < epochs)
            .map(|p| p.elements.saturating_sub((p.elements / LEAD_DIVISOR).max(1)));
        let mut elements = 0u64;
        for item in &mut stream {
            visit(epoch, &item?);
            elements += 1;
            if ahead.is_none() && start_next_at.is_some_and(|at| elements >= at) {
                ahead = Some(ds.stream_in(&ctx.with_epoch(epoch + 1)));
            }
        }
        // The pass's threads end here; the one ahead (if any) goes on.
        drop(stream);
        let now = Instant::now();
        reports.push(PassReport { elements, seconds: (now - turn).as_secs_f64(), started_ahead });
        turn = now;
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_runtime::stage::{RuntimeOptions, range};

    /// Every element of `epochs` passes of a shuffled (reshuffled each epoch), parallel-
    /// mapped, batched and prefetched pipeline, by epoch, and the pass reports.
    fn passes(epochs: u64, overlap: bool, n: u64) -> (Vec<(u64, Vec<u64>)>, Vec<PassReport>) {
        let ds = range(0..n)
            .shuffle(64, 7)
            .reshuffle_each_epoch(true)
            .map(|i: u64| i * 3)
            .num_parallel(3)
            .chunks(5, false)
            .prefetch(2);
        let ctx = Ctx::new(&RuntimeOptions::default());
        let mut seen = Vec::new();
        let reports =
            each_pass(&ds, &ctx, epochs, overlap, |e, b: &Vec<u64>| seen.push((e, b.clone()))).unwrap();
        (seen, reports)
    }

    #[test]
    fn overlapped_turns_give_the_same_elements_in_the_same_order() {
        let (plain, plain_reports) = passes(4, false, 1000);
        let (over, over_reports) = passes(4, true, 1000);
        assert_eq!(plain.len(), 4 * 200);
        assert!(plain == over, "the same batches, epoch by epoch, in the same order");
        // Reshuffled: the epochs differ.
        assert_ne!(
            plain[..200].iter().map(|x| &x.1).collect::<Vec<_>>(),
            plain[200..400].iter().map(|x| &x.1).collect::<Vec<_>>()
        );
        let ahead = |r: &[PassReport]| r.iter().map(|p| p.started_ahead).collect::<Vec<_>>();
        assert_eq!(ahead(&plain_reports), [false; 4]);
        assert_eq!(ahead(&over_reports), [false, false, true, true], "every turn after the first");
        assert!(over_reports.iter().all(|p| p.elements == 200));
    }

    #[test]
    fn short_and_single_passes_run_as_without_overlap() {
        // One element per pass: the next pass starts at the current one's first.
        let (plain, _) = passes(3, false, 3);
        let (over, reports) = passes(3, true, 3);
        assert_eq!(plain, over);
        assert_eq!(reports.iter().map(|p| p.started_ahead).collect::<Vec<_>>(), [false, false, true]);
        let (one, reports) = passes(1, true, 10);
        assert_eq!(one.len(), 2);
        assert!(!reports[0].started_ahead);
    }

    /// Ten elements per pass; pass `cannot_start` fails to start, and element 4 of pass
    /// `bad` fails.
    struct Failing {
        cannot_start: u64,
        bad: u64,
    }

    struct FailingIter {
        next: u64,
        bad: bool,
    }

    impl Dataset for Failing {
        type Item = u64;
        type Iter = FailingIter;

        fn iter(&self, ctx: &Ctx) -> sluice_runtime::Result<FailingIter> {
            if ctx.epoch() == self.cannot_start {
                return Err(sluice_runtime::Error::Invalid(format!("pass {} cannot start", ctx.epoch())));
            }
            Ok(FailingIter { next: 0, bad: ctx.epoch() == self.bad })
        }
    }

    impl sluice_runtime::stage::DataIter for FailingIter {
        type Item = u64;

        fn next(&mut self) -> sluice_runtime::Result<Option<u64>> {
            if self.bad && self.next == 4 {
                return Err(sluice_runtime::Error::Invalid("element 4 is bad".into()));
            }
            self.next += 1;
            Ok((self.next <= 10).then_some(self.next - 1))
        }
    }

    #[test]
    fn errors_of_the_pass_ahead_are_reported_at_its_turn() {
        for overlap in [false, true] {
            let run = |ds: &Failing| {
                let ctx = Ctx::new(&RuntimeOptions::default());
                let mut seen = 0;
                let r = each_pass(ds, &ctx, 4, overlap, |_, _| seen += 1);
                (seen, r.map(|_| ()).map_err(|e| e.to_string()))
            };
            // Passes 0 and 1 whole, then pass 2's start fails (started ahead in pass 1).
            let (seen, r) = run(&Failing { cannot_start: 2, bad: 9 });
            assert_eq!((seen, r), (20, Err("pass 2 cannot start".into())), "overlap {overlap}");
            // Passes 0 and 1 whole, then pass 2's elements 0 to 3.
            let (seen, r) = run(&Failing { cannot_start: 9, bad: 2 });
            assert_eq!((seen, r), (24, Err("element 4 is bad".into())), "overlap {overlap}");
        }
    }
}
