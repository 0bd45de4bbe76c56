//! The input positions of the stages whose input count is not a function of their output
//! count (`filter`, `somes`, the fused map + filter): how many inputs make up their first
//! `k` outputs depends on the values. Each top-level pass records, for its last [`WINDOW`]
//! outputs, how many inputs it had consumed ([`Positions`], one atomic store per output);
//! a saved [`PipelineState`](super::PipelineState) takes the count at the consumer's
//! position ([`Dataset::positions`](super::Dataset::positions)) and a resumed pass starts
//! its input there ([`Ctx::take_stage_position`]), as tf.data's checkpoints record each
//! iterator's input position. Positions only: no element is kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{Ctx, Dataset, StagePosition};

/// The position records of a stage's last top-level passes, by epoch: at most two (the
/// running one and the one before it, or the next one started ahead of time).
#[derive(Debug, Default)]
pub struct PassPositions {
    passes: Mutex<Vec<(u64, Arc<Positions>)>>,
}

impl PassPositions {
    /// A new pass's record, starting after `output` outputs made of `input` inputs (none
    /// for a nested pass: it cannot be saved). Replaces the record of the same epoch.
    pub fn record(&self, ctx: &Ctx, output: u64, input: u64) -> Option<Arc<Positions>> {
        if ctx.is_nested() {
            return None;
        }
        let p = Arc::new(Positions::new(output, input));
        let mut passes = self.passes.lock().expect("positions lock");
        passes.retain(|(e, _)| *e != ctx.epoch());
        if passes.len() >= 2 {
            passes.remove(0);
        }
        passes.push((ctx.epoch(), p.clone()));
        Some(p)
    }

    /// The inputs the pass of `epoch` had consumed when it delivered output `output`, if
    /// it is remembered.
    pub fn input_at(&self, epoch: u64, output: u64) -> Option<u64> {
        let pass = self.passes.lock().expect("positions lock").iter().find(|(e, _)| *e == epoch).cloned();
        pass.and_then(|(_, p)| p.input_at(output))
    }

    /// [`Dataset::positions`](super::Dataset::positions) of a stage that records its input
    /// position (`filter`, `somes`): its own at `output`, if remembered, then its input's
    /// at that input position.
    pub fn descend<D: Dataset>(&self, input: &D, epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        if let Some(at) = self.input_at(epoch, output) {
            found.push(StagePosition::filter(output, at));
            input.positions(epoch, at, found);
        }
    }
}

/// Outputs whose input position a pass remembers: how far a consumer (through prefetches
/// and parallel maps) may lag behind the filter and still have its position saved. 64 Ki
/// outputs, 512 KiB per pass.
pub const WINDOW: u64 = 1 << 16;

/// The input position of a pass's last [`WINDOW`] outputs. Slot `j % WINDOW` holds, for
/// output `j`, `j / WINDOW` in its top 24 bits (which pass over the ring wrote it) and the
/// number of inputs dropped before output `j` in the low 40; a reader on another thread
/// checks the first part, so a slot overwritten since is never taken for another output.
#[derive(Debug)]
pub struct Positions {
    slots: Box<[AtomicU64]>,
    /// The output and input counts the pass started from.
    start: (u64, u64),
    /// Once the pass has ended: its last output and the inputs it consumed in all
    /// (`u64::MAX` before). A consumer of batches asks for more outputs than a pass that
    /// ended in a partial batch delivered: they come from the end.
    end: [AtomicU64; 2],
}

const LAP_SHIFT: u32 = 40;
const DROPPED: u64 = (1 << LAP_SHIFT) - 1;

impl Positions {
    pub(crate) fn new(output: u64, input: u64) -> Self {
        Positions {
            slots: (0..WINDOW).map(|_| AtomicU64::new(u64::MAX)).collect(),
            start: (output, input),
            end: [AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX)],
        }
    }

    /// The pass ended after `output` outputs made of `input` inputs.
    pub(crate) fn finish(&self, output: u64, input: u64) {
        self.end[1].store(input, Ordering::Release);
        self.end[0].store(output, Ordering::Release);
    }

    fn lap(output: u64) -> u64 {
        (output / WINDOW) & ((1 << (64 - LAP_SHIFT)) - 1)
    }

    /// Output `output` (1-based) was delivered after `input` inputs were consumed.
    #[inline]
    pub(crate) fn set(&self, output: u64, input: u64) {
        let dropped = (input - output).min(DROPPED);
        let v = (Self::lap(output) << LAP_SHIFT) | dropped;
        self.slots[(output % WINDOW) as usize].store(v, Ordering::Release);
    }

    /// The inputs consumed when output `output` was delivered, if still remembered; past
    /// the end of an ended pass, all of them.
    pub fn input_at(&self, output: u64) -> Option<u64> {
        if output == self.start.0 {
            return Some(self.start.1);
        }
        let end = self.end[0].load(Ordering::Acquire);
        if end != u64::MAX && output > end {
            return Some(self.end[1].load(Ordering::Acquire));
        }
        if output < self.start.0 {
            return None;
        }
        let v = self.slots[(output % WINDOW) as usize].load(Ordering::Acquire);
        (v != u64::MAX && v >> LAP_SHIFT == Self::lap(output) && v & DROPPED < DROPPED)
            .then(|| output + (v & DROPPED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_last_window_and_refuses_older_outputs() {
        let p = Positions::new(5, 9);
        let mut input = 9;
        for output in 6..6 + 3 * WINDOW {
            input += 1 + output % 3;
            p.set(output, input);
        }
        let last = 5 + 3 * WINDOW;
        assert_eq!(p.input_at(5), Some(9));
        assert_eq!(p.input_at(4), None);
        assert_eq!(p.input_at(last), Some(input));
        assert_eq!(p.input_at(last - WINDOW), None, "overwritten by a later lap");
        assert_eq!(p.input_at(last + 1), None, "not delivered yet");
        p.finish(last, input + 3);
        assert_eq!(p.input_at(last + 1), Some(input + 3), "past the end: all");
        assert_eq!(p.input_at(last), Some(input), "the last output's own");
        let mut want = 9;
        for output in 6..=last {
            want += 1 + output % 3;
            if output > last - WINDOW {
                assert_eq!(p.input_at(output), Some(want), "output {output}");
            }
        }
    }

    #[test]
    fn keeps_two_epochs() {
        let ctx = Ctx::new(&super::super::RuntimeOptions::default());
        let passes = PassPositions::default();
        for epoch in 0..3 {
            let p = passes.record(&ctx.with_epoch(epoch), 0, 0).unwrap();
            p.set(1, 2 + epoch);
        }
        assert_eq!(passes.input_at(0, 1), None);
        assert_eq!(passes.input_at(1, 1), Some(3));
        assert_eq!(passes.input_at(2, 1), Some(4));
        assert!(passes.record(&ctx.nested(), 0, 0).is_none());
    }
}
