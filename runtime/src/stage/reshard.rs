//! Redealing an interrupted epoch to another number of shards: the states of the N ranks
//! of a run, each saved where its rank was, become M states ([`PipelineState::reshard`])
//! from which M ranks together deliver every element of that epoch the N had not taken,
//! each once, and from the next epoch on exactly what a fresh run of M ranks delivers.
//!
//! It holds for a pipeline whose `shard` deals from a stream that is the same for every
//! number of shards (the compiler's **elastic** classification, `sluice explain`): what a
//! rank has taken is then a count, and the set of what all ranks have taken is named by
//! the counts. A saved state records its shard's count, the number of shards and its own
//! index ([`ShardOf`] on a [`StagePosition`]); resharding appends one [`Layer`] (the
//! old topology and its counts) to the states' redeal and starts each new rank at
//! position 0 of its share of the rest:
//!
//! - **rounds** (the `shard` stage, worker `i` of `n` takes elements `i`, `i + n`, …):
//!   an element at index `k` of the stream was taken when `k / n < taken[k mod n]`; what
//!   no rank took is, in stream order, the rest, which the new ranks are dealt in rounds
//!   as the stage always deals (its `remainder` applies to the rest);
//! - **blocks** (a sharded `shuffle(global)`: worker `i` takes a contiguous block of the
//!   epoch's permutation): block `i` was taken from its start for `taken[i]` positions;
//!   the rest (the blocks' untaken ends, in permutation order) is dealt in blocks again.
//!   With `drop`, the positions a block dealing leaves to none stay with none.
//!
//! A state resharded twice carries two layers: each applies to the rest of the one
//! before. The redeal holds for the state's epoch only (its [`Ctx`](super::Ctx) carries
//! it); the next epoch is a plain one.
//!
//! With `remainder: drop` the new ranks get equal counts again, so up to `M - 1` elements
//! of the rest are delivered by none (as a fresh run drops up to `M - 1` of an epoch); with
//! `pad`, the padding repeats elements, as it always does.

use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use super::Ctx;
use super::state::{Deal, Layer, PipelineState, ShardOf, StagePosition};
use crate::error::{Error, Result};

/// The redeals of a dealing stage's last passes (a `shard`, a sharded global shuffle), by
/// epoch: [`Dataset::redeal_of`](super::Dataset::redeal_of) hands them to a state saved in
/// a redealt pass, which would otherwise deal what the ranks before had taken again.
#[derive(Debug, Default)]
pub(crate) struct Redealt(Mutex<Vec<(u64, Vec<Layer>)>>);

impl Redealt {
    /// Records the redeal of the pass `ctx` starts (none for a plain pass, a nested one
    /// records nothing); the last two epochs' are kept, as the stages' positions are.
    pub(crate) fn record(&self, ctx: &Ctx) {
        if ctx.is_nested() {
            return;
        }
        let mut passes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        passes.retain(|(e, _)| *e != ctx.epoch());
        if let Some(layers) = ctx.redeal() {
            passes.push((ctx.epoch(), layers.to_vec()));
            if passes.len() > 2 {
                passes.remove(0);
            }
        }
    }

    /// The redeal of the pass of `epoch` last started; empty for a plain one.
    pub(crate) fn of(&self, epoch: u64) -> Vec<Layer> {
        let passes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        passes.iter().find(|(e, _)| *e == epoch).map(|(_, l)| l.clone()).unwrap_or_default()
    }
}

/// Why a redeal does not fit a stage that deals as `deal`.
fn mismatch(layer: &Layer, deal: &str) -> Error {
    Error::Invalid(format!(
        "the resumed state was resharded from a stage that deals in {}, but this pipeline's shard deals in {deal}: \
         it is of another pipeline",
        layer.deal
    ))
}

/// The rounds filter of a resumed, resharded `shard` pass: which elements of the input
/// stream no rank of any layer had taken (see the [module doc](self)).
#[derive(Debug, Clone)]
pub(crate) struct RoundsRest {
    /// Per layer: its ranks, their counts, and how many elements of its stream (the rest
    /// of the layer before) have gone by.
    layers: Vec<(u64, Vec<u64>, u64)>,
}

impl RoundsRest {
    pub(crate) fn new(layers: &[Layer]) -> Result<RoundsRest> {
        let layers = layers
            .iter()
            .map(|l| match l.deal {
                Deal::Rounds(_) if !l.taken.is_empty() => Ok((l.ranks(), l.taken.clone(), 0)),
                _ => Err(mismatch(l, "rounds")),
            })
            .collect::<Result<_>>()?;
        Ok(RoundsRest { layers })
    }

    /// Whether the next element of the input stream is one of the rest (none took it).
    #[inline]
    pub(crate) fn admit(&mut self) -> bool {
        for (n, taken, seen) in &mut self.layers {
            let k = *seen;
            *seen += 1;
            if k / *n < taken[(k % *n) as usize] {
                return false;
            }
        }
        true
    }
}

/// Block `index` of `shards` of `len` positions: as [`GlobalShuffle::shard`](super::GlobalShuffle::shard) deals.
pub(crate) fn block(len: u64, shards: u64, index: u64, drop: bool) -> Range<u64> {
    let (per, extra) = (len / shards, len % shards);
    if drop {
        index * per..(index + 1) * per
    } else {
        let start = index * per + index.min(extra);
        start..start + per + u64::from(index < extra)
    }
}

/// The positions at indexes `idx` of the concatenation of `spans`, as spans.
fn select(spans: &[Range<u64>], idx: Range<u64>, out: &mut Vec<Range<u64>>) {
    let mut at = 0u64;
    for s in spans {
        let len = s.end - s.start;
        let (lo, hi) = (idx.start.max(at), idx.end.min(at + len));
        if lo < hi {
            out.push(s.start + (lo - at)..s.start + (hi - at));
        }
        at += len;
        if at >= idx.end {
            break;
        }
    }
}

/// The spans of a global shuffle's permutation (of `n` positions) a pass reads from
/// `skip` positions on: this worker's block, `positions` (clamped to `n`), or, in the
/// pass of a redealt epoch, the rest of the old blocks ([`blocks_rest`]) when the stage
/// is `sharded` (`(shards, index, drop)`); empty spans dropped.
pub(crate) fn pass_spans(
    ctx: &Ctx,
    n: u64,
    positions: &Range<u64>,
    sharded: Option<(u64, u64, bool)>,
    mut skip: u64,
) -> Result<Vec<Range<u64>>> {
    let mut spans = match (ctx.redeal(), sharded) {
        (Some(layers), Some((shards, index, drop))) => blocks_rest(n, layers, shards, index, drop)?,
        _ => {
            let end = positions.end.min(n);
            std::iter::once(positions.start.min(end)..end).collect()
        }
    };
    spans.retain_mut(|s| {
        let cut = skip.min(s.end - s.start);
        s.start += cut;
        skip -= cut;
        s.start < s.end
    });
    Ok(spans)
}

/// The positions of a `len`-position pass that worker `index` of `shards` (dealing in
/// blocks, `drop` as the stage says) reads after the redeal `layers`: the untaken ends of
/// each layer's blocks, in order, dealt in blocks again.
pub(crate) fn blocks_rest(
    len: u64,
    layers: &[Layer],
    shards: u64,
    index: u64,
    drop: bool,
) -> Result<Vec<Range<u64>>> {
    let mut rest: Vec<Range<u64>> = std::iter::once(0..len).collect();
    for layer in layers {
        let Deal::Blocks { drop: layer_drop } = layer.deal else { return Err(mismatch(layer, "blocks")) };
        if layer.taken.is_empty() {
            return Err(mismatch(layer, "blocks"));
        }
        let total: u64 = rest.iter().map(|r| r.end - r.start).sum();
        let mut next = Vec::with_capacity(rest.len() + layer.taken.len());
        for (i, &taken) in layer.taken.iter().enumerate() {
            let b = block(total, layer.ranks(), i as u64, layer_drop);
            select(&rest, b.start.saturating_add(taken).min(b.end)..b.end, &mut next);
        }
        rest = next;
    }
    let total: u64 = rest.iter().map(|r| r.end - r.start).sum();
    let mut mine = Vec::new();
    select(&rest, block(total, shards, index, drop), &mut mine);
    Ok(mine)
}

impl PipelineState {
    /// The states of `ranks` new ranks that go on from the states of every rank of an
    /// interrupted run (see the [module doc](self)): each new rank starts at position 0
    /// of its share of what the old ranks had not taken of their epoch. `fingerprint(n,
    /// i)` is the pipeline's fingerprint as worker `i` of `n` (the generated code's
    /// `fingerprint` with its shard parameters set): each old state must match its own,
    /// and each new state gets the new rank's.
    ///
    /// Refused, with the reason: no states or no ranks; states of different pipelines,
    /// epochs or redeals; a state that records no shard position (a pipeline without a
    /// `shard`, a state saved before sluice recorded it, or a consumer that lagged more
    /// than 65 536 elements behind a filter above the shard); a rank missing or given
    /// twice; a state that does not match the pipeline now (other files or parameters).
    /// The caller checks that the pipeline is elastic (the generated `ELASTIC`).
    pub fn reshard(
        states: &[PipelineState],
        ranks: u64,
        fingerprint: impl Fn(u64, u64) -> Result<u64>,
    ) -> Result<Vec<PipelineState>> {
        let bad = |why: String| Error::Invalid(format!("cannot reshard: {why}"));
        let Some(first) = states.first() else { return Err(bad("no states given".into())) };
        if ranks == 0 {
            return Err(bad("to 0 ranks".into()));
        }
        let mut shards: Vec<(ShardOf, u64)> = Vec::with_capacity(states.len());
        for (k, s) in states.iter().enumerate() {
            if s.pipeline != first.pipeline {
                return Err(bad(format!(
                    "state {k} is of pipeline `{}`, state 0 of `{}`",
                    s.pipeline, first.pipeline
                )));
            }
            if s.epoch != first.epoch {
                return Err(bad(format!(
                    "state {k} is in epoch {}, state 0 in epoch {}: the states were not saved at one step",
                    s.epoch, first.epoch
                )));
            }
            if s.redeal != first.redeal {
                return Err(bad(format!("state {k} was resharded otherwise than state 0: not of one run")));
            }
            let Some((of, taken)) = s.shard_position() else {
                return Err(bad(format!(
                    "state {k} records no shard position: it was saved without `.with_stage_positions(&dataset)` \
                     or by an older sluice, its pipeline has no `shard`, or its consumer lagged more than 65536 \
                     elements behind a filter above the shard"
                )));
            };
            shards.push((of, taken));
        }
        let (n, deal) = (shards[0].0.shards, shards[0].0.deal);
        // What a saved state can hold (`to_bytes`): u16 layers, u32 ranks a layer.
        if first.redeal.len() >= usize::from(u16::MAX) || n > u64::from(u32::MAX) {
            return Err(bad(format!(
                "{} reshards of {n} ranks: a state holds at most {} of at most {} ranks",
                first.redeal.len() + 1,
                u16::MAX,
                u32::MAX
            )));
        }
        let mut taken = vec![None; usize::try_from(n).map_err(|_| bad(format!("{n} shards")))?];
        for (k, (of, count)) in shards.iter().enumerate() {
            if of.shards != n || of.deal != deal {
                return Err(bad(format!(
                    "state {k} is of shard {} of {} ({}), state 0 of shard {} of {n} ({deal})",
                    of.index, of.shards, of.deal, shards[0].0.index
                )));
            }
            let slot = &mut taken[of.index as usize];
            if slot.is_some() {
                return Err(bad(format!("two states of rank {} of {n}", of.index)));
            }
            let want = fingerprint(n, of.index)?;
            if states[k].fingerprint != want {
                return Err(bad(format!(
                    "the state of rank {} of {n} does not match the pipeline now: its parameters, its files \
                     (their names or lengths) or its plan changed since (fingerprint {:016x}, now {want:016x})",
                    of.index, states[k].fingerprint
                )));
            }
            *slot = Some(*count);
        }
        let taken = taken
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                t.ok_or_else(|| bad(format!("no state of rank {i} of {n} (every rank's is needed)")))
            })
            .collect::<Result<Vec<u64>>>()?;
        let mut redeal = first.redeal.clone();
        redeal.push(Layer { deal, taken });
        (0..ranks)
            .map(|j| {
                Ok(PipelineState {
                    pipeline: first.pipeline.clone(),
                    fingerprint: fingerprint(ranks, j)?,
                    epoch: first.epoch,
                    position: 0,
                    stages: Vec::new(),
                    redeal: redeal.clone(),
                })
            })
            .collect()
    }

    /// The shard its stage positions record, and how many elements that shard had
    /// delivered: the first position with a [`ShardOf`].
    pub fn shard_position(&self) -> Option<(ShardOf, u64)> {
        self.stages.iter().find_map(|s: &StagePosition| s.shard.map(|of| (of, s.output)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::Remainder;
    use super::*;

    #[test]
    fn blocks_of_the_rest_partition_what_no_rank_took() {
        // 10 positions, 3 blocks (4, 3, 3): rank 0 took 2, rank 1 took 3, rank 2 took 0.
        let layers = [Layer { deal: Deal::Blocks { drop: false }, taken: vec![2, 3, 0] }];
        let rest: Vec<Vec<Range<u64>>> =
            (0..2).map(|j| blocks_rest(10, &layers, 2, j, false).unwrap()).collect();
        // The rest is 2, 3 (block 0's end) and 7, 8, 9 (block 2): 5 positions, 3 + 2.
        assert_eq!(rest, vec![vec![2..4, 7..8], vec![8..10]]);
        let dropped = blocks_rest(10, &layers, 2, 1, true).unwrap();
        assert_eq!(dropped.len(), 1, "with drop the fifth goes to none");
        assert_eq!(dropped[0], 7..9);
    }

    #[test]
    fn rounds_rest_skips_what_each_layer_took() {
        // 3 ranks took 2, 1, 1 of 0..: 0, 1, 2, 3 taken; then 2 ranks took 1, 0 of the rest.
        let layers = [
            Layer { deal: Deal::Rounds(Remainder::Keep), taken: vec![2, 1, 1] },
            Layer { deal: Deal::Rounds(Remainder::Keep), taken: vec![1, 0] },
        ];
        let mut r = RoundsRest::new(&layers).unwrap();
        let admitted: Vec<u64> = (0..10).filter(|_| r.admit()).collect();
        // First layer's rest: 4, 5, 6, 7, …; the second's ranks had taken 4 (rank 0's first).
        assert_eq!(admitted, vec![5, 6, 7, 8, 9]);
        let blocks = [Layer { deal: Deal::Blocks { drop: false }, taken: vec![1] }];
        assert!(RoundsRest::new(&blocks).unwrap_err().to_string().contains("deals in blocks"));
    }
}
