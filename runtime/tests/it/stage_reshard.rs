//! Resuming on another number of ranks ([`PipelineState::reshard`]): the ranks of a run
//! stop anywhere in an epoch, their states are redealt to another number of ranks (and
//! those stop and are redealt again), and the new ranks finish the epoch. Over random
//! rank counts in 1..=8, stops, seeds and lengths: what all ranks delivered before and
//! after each reshard is the epoch's elements, each once (`keep`); with `drop`, each at
//! most once and at most `M - 1` missing, the ranks' counts equal; with `pad`, every one
//! at least once. The next epoch is a fresh run's. States of a run that do not belong
//! together are refused with the reason.

use std::path::PathBuf;

use proptest::prelude::*;
use sluice_runtime::stage::{
    Ctx, Dataset, Deal, GlobalShuffle, Layer, PipelineState, Remainder, RuntimeOptions, global_shuffle, range,
};
use sluice_runtime::{Error, Result};

fn ctx() -> Ctx {
    Ctx::new(&RuntimeOptions::default())
}

/// The fingerprint of worker `i` of `n` (a stand-in for the generated `fingerprint` with
/// the shard's parameters set).
fn fp(n: u64, i: u64) -> Result<u64> {
    Ok((n << 32) | i)
}

const EPOCH: u64 = 2;

/// A pipeline as worker `i` of `n`: the elements its batches hold.
trait Ranked: Sync {
    type Ds: Dataset<Item = Vec<u64>>;
    fn rank(&self, n: u64, i: u64) -> Self::Ds;
}

/// Runs `phases` of ranks over one epoch: phase `k` has `phases[k].0` ranks, each starting
/// from its state (fresh in phase 0, resharded after) and stopping after
/// `phases[k].1[i]` per mille of its batches (the last phase runs to the end). Returns
/// every element delivered, and the last phase's ranks' counts.
fn run_phases<P: Ranked>(p: &P, phases: &[(u64, Vec<u16>)]) -> (Vec<u64>, Vec<usize>) {
    let mut delivered = Vec::new();
    let mut states: Vec<PipelineState> = Vec::new();
    let mut counts = Vec::new();
    for (k, (n, stops)) in phases.iter().enumerate() {
        let last = k + 1 == phases.len();
        if k > 0 && states.len() as u64 != *n {
            // The states in any order: each names its rank.
            states.reverse();
            states = PipelineState::reshard(&states, *n, fp).unwrap();
            assert_eq!(states.len() as u64, *n);
        }
        // The same number of ranks as before: each resumes its own state (in a redealt
        // pass, the state carries the redeal it was dealt by).
        let mut next = Vec::new();
        // Each rank's count since the epoch's start or the last reshard.
        let resumed_alike = k > 0 && counts.len() as u64 == *n;
        if !resumed_alike {
            counts = vec![0; *n as usize];
        }
        for i in 0..*n {
            let ds = p.rank(*n, i);
            let (ctx, from) = match states.get(i as usize) {
                Some(s) => {
                    assert_eq!(s.fingerprint, fp(*n, i).unwrap());
                    (s.ctx(&ctx()), s.position)
                }
                None => (ctx().with_epoch(EPOCH), 0),
            };
            let all: Vec<Vec<u64>> = ds.stream_from(&ctx, from).unwrap().map(|b| b.unwrap()).collect();
            let stop = if last { all.len() } else { all.len() * usize::from(stops[i as usize]) / 1000 };
            // Stop there: pull again up to it, and save the state while the pass runs.
            let mut pass = ds.stream_from(&ctx, from).unwrap();
            let got: Vec<Vec<u64>> = pass.by_ref().take(stop).map(|b| b.unwrap()).collect();
            assert_eq!(got, all[..stop], "a pass is deterministic");
            counts[i as usize] += got.iter().map(Vec::len).sum::<usize>();
            delivered.extend(got.into_iter().flatten());
            if !last {
                let state = PipelineState {
                    pipeline: "p".into(),
                    fingerprint: fp(*n, i).unwrap(),
                    epoch: EPOCH,
                    position: from + stop as u64,
                    stages: Vec::new(),
                    redeal: Vec::new(),
                }
                .with_stage_positions(&ds);
                let before = states.get(i as usize).map(|s| s.redeal.clone()).unwrap_or_default();
                assert_eq!(state.redeal, before, "the state saved in the pass lost its redeal");
                drop(pass);
                assert!(state.shard_position().is_some(), "{state:?}");
                // Through the file format, as the new ranks' processes read it.
                next.push(PipelineState::from_bytes(&state.to_bytes(), "state").unwrap());
            }
        }
        states = next;
    }
    delivered.sort_unstable();
    (delivered, counts)
}

/// range → seeded shuffle → map → filter → shard → map → filter → batches of 3.
struct Rounds {
    len: u64,
    seed: u64,
    remainder: Remainder,
}

impl Ranked for Rounds {
    type Ds = sluice_runtime::stage::Boxed<Vec<u64>>;
    fn rank(&self, n: u64, i: u64) -> Self::Ds {
        range(0..self.len)
            .shuffle(8, self.seed)
            .reshuffle_each_epoch(true)
            .map(|x| x * 3)
            .filter(|x| x % 7 != 0)
            .shard_with(n, i, self.remainder)
            .unwrap()
            .map(|x| x + 1)
            .filter(|x| x % 5 != 2)
            .chunks(3, false)
            .boxed()
    }
}

impl Rounds {
    /// The epoch's elements, once each.
    fn epoch(&self) -> Vec<u64> {
        let mut all: Vec<u64> = (0..self.len)
            .map(|x| x * 3)
            .filter(|x| x % 7 != 0)
            .map(|x| x + 1)
            .filter(|x| x % 5 != 2)
            .collect();
        all.sort_unstable();
        all
    }
}

fn phases() -> impl Strategy<Value = Vec<(u64, Vec<u16>)>> {
    prop::collection::vec((1u64..=8, prop::collection::vec(0u16..=1000, 8)), 2..=3)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn rounds_keep_deliver_the_epoch_once(len in 0u64..400, seed in any::<u64>(), phases in phases()) {
        let p = Rounds { len, seed, remainder: Remainder::Keep };
        let (delivered, _) = run_phases(&p, &phases);
        prop_assert_eq!(delivered, p.epoch());
    }

    #[test]
    fn rounds_drop_deliver_at_most_once_with_equal_counts(len in 0u64..400, seed in any::<u64>(), phases in phases()) {
        // Without the filter after the shard, so that equal counts are visible.
        struct Plain(Rounds);
        impl Ranked for Plain {
            type Ds = sluice_runtime::stage::Boxed<Vec<u64>>;
            fn rank(&self, n: u64, i: u64) -> Self::Ds {
                range(0..self.0.len).shuffle(8, self.0.seed).shard_with(n, i, Remainder::Drop).unwrap().chunks(1, false).boxed()
            }
        }
        let p = Plain(Rounds { len, seed, remainder: Remainder::Drop });
        let (delivered, counts) = run_phases(&p, &phases);
        let mut once = delivered.clone();
        once.dedup();
        prop_assert_eq!(&once, &delivered, "no element twice");
        let m = phases.last().unwrap().0;
        prop_assert!(delivered.len() as u64 + m > len, "{} of {} delivered", delivered.len(), len);
        prop_assert!(counts.iter().all(|&c| c == counts[0]), "{:?}", counts);
    }

    #[test]
    fn rounds_pad_deliver_every_element(len in 1u64..400, seed in any::<u64>(), phases in phases()) {
        let p = Rounds { len, seed, remainder: Remainder::Pad };
        let (mut delivered, _) = run_phases(&p, &phases);
        delivered.dedup();
        prop_assert_eq!(delivered, p.epoch());
    }
}

/// Record `j` of file `i` of [`dataset`](super::global_shuffle::dataset) (`"i/j"`) as
/// the number `1000 i + j`.
fn number(record: &[u8]) -> u64 {
    let (file, j) = std::str::from_utf8(record).unwrap().split_once('/').unwrap();
    1000 * file.parse::<u64>().unwrap() + j.parse::<u64>().unwrap()
}

/// A global shuffle sharded in blocks → parse → filter → batches of 4.
struct Blocks {
    files: Vec<PathBuf>,
    seed: u64,
    drop: bool,
    window: usize,
}

impl Blocks {
    fn source(&self) -> GlobalShuffle {
        global_shuffle(&self.files, self.seed).unwrap().window(self.window)
    }

    fn epoch(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self
            .source()
            .stream_in(&ctx().with_epoch(EPOCH))
            .unwrap()
            .map(|r| number(&r.unwrap()))
            .filter(|x| x % 3 != 1)
            .collect();
        all.sort_unstable();
        all
    }
}

impl Ranked for Blocks {
    type Ds = sluice_runtime::stage::Boxed<Vec<u64>>;
    fn rank(&self, n: u64, i: u64) -> Self::Ds {
        self.source()
            .shard(n, i, self.drop)
            .unwrap()
            .map(|r| number(&r))
            .filter(|x| x % 3 != 1)
            .chunks(4, false)
            .boxed()
    }
}

fn blocks_files() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let files = super::global_shuffle::dataset(dir.path(), &[37, 0, 58, 11], 0);
    (dir, files)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn blocks_deliver_the_epoch_once(seed in any::<u64>(), window in 1usize..40, phases in phases()) {
        let (_dir, files) = blocks_files();
        let p = Blocks { files, seed, drop: false, window };
        let (delivered, _) = run_phases(&p, &phases);
        prop_assert_eq!(delivered, p.epoch());
    }

    #[test]
    fn blocks_with_drop_deliver_at_most_once(seed in any::<u64>(), phases in phases()) {
        let (_dir, files) = blocks_files();
        let p = Blocks { files, seed, drop: true, window: 16 };
        let (delivered, _) = run_phases(&p, &phases);
        let mut once = delivered.clone();
        once.dedup();
        prop_assert_eq!(&once, &delivered);
        prop_assert!(delivered.iter().all(|x| p.epoch().binary_search(x).is_ok()));
    }
}

#[test]
fn the_next_epoch_is_a_fresh_runs() {
    let p = Rounds { len: 200, seed: 5, remainder: Remainder::Keep };
    let states: Vec<PipelineState> = (0..3)
        .map(|i| {
            let ds = p.rank(3, i);
            let mut pass = ds.stream_from(&ctx().with_epoch(EPOCH), 0).unwrap();
            pass.by_ref().take(4).for_each(drop);
            PipelineState {
                pipeline: "p".into(),
                fingerprint: fp(3, i).unwrap(),
                epoch: EPOCH,
                position: 4,
                stages: Vec::new(),
                redeal: Vec::new(),
            }
            .with_stage_positions(&ds)
        })
        .collect();
    let new = PipelineState::reshard(&states, 2, fp).unwrap();
    for (j, s) in new.iter().enumerate() {
        let ds = p.rank(2, j as u64);
        let rest: Vec<Vec<u64>> = s.resume(&ds, &ctx()).unwrap().map(|b| b.unwrap()).collect();
        assert!(!rest.is_empty());
        let run_ctx = s.ctx(&ctx());
        let next: Vec<Vec<u64>> =
            ds.stream_in(&run_ctx.with_epoch(EPOCH + 1)).unwrap().map(|b| b.unwrap()).collect();
        let fresh: Vec<Vec<u64>> = p
            .rank(2, j as u64)
            .stream_in(&ctx().with_epoch(EPOCH + 1))
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        assert_eq!(next, fresh, "rank {j}");
    }
}

#[test]
fn states_that_do_not_belong_together_are_refused_with_the_reason() {
    let p = Rounds { len: 100, seed: 1, remainder: Remainder::Keep };
    let state = |n: u64, i: u64, epoch: u64| {
        let ds = p.rank(n, i);
        let pass = ds.stream_from(&ctx().with_epoch(epoch), 0).unwrap();
        let s = PipelineState {
            pipeline: "p".into(),
            fingerprint: fp(n, i).unwrap(),
            epoch,
            position: 0,
            stages: Vec::new(),
            redeal: Vec::new(),
        }
        .with_stage_positions(&ds);
        drop(pass);
        s
    };
    let why = |states: &[PipelineState]| match PipelineState::reshard(states, 2, fp) {
        Err(Error::Invalid(why)) => why,
        other => panic!("{other:?}"),
    };
    let (a, b, c) = (state(3, 0, 1), state(3, 1, 1), state(3, 2, 1));
    assert!(why(&[a.clone(), c.clone()]).contains("no state of rank 1 of 3"));
    assert!(why(&[a.clone(), b.clone(), b.clone(), c.clone()]).contains("two states of rank 1 of 3"));
    assert!(
        why(&[a.clone(), b.clone(), state(3, 2, 2)]).contains("state 2 is in epoch 2, state 0 in epoch 1")
    );
    assert!(why(&[a.clone(), b.clone(), state(4, 2, 1)]).contains("state 2 is of shard 2 of 4"));
    let mut other = c.clone();
    other.pipeline = "q".into();
    assert!(why(&[a.clone(), b.clone(), other]).contains("state 2 is of pipeline `q`"));
    let mut moved = c.clone();
    moved.fingerprint ^= 1;
    assert!(
        why(&[a.clone(), b.clone(), moved])
            .contains("the state of rank 2 of 3 does not match the pipeline now")
    );
    let mut unsharded = c.clone();
    unsharded.stages.clear();
    assert!(why(&[a.clone(), b.clone(), unsharded]).contains("state 2 records no shard position"));
    assert!(why(&[]).contains("no states"));
    // A state holds at most u16::MAX - 1 layers before the next.
    let deep = |s: &PipelineState| PipelineState {
        redeal: vec![Layer { deal: Deal::Rounds(Remainder::Keep), taken: vec![0] }; usize::from(u16::MAX)],
        ..s.clone()
    };
    assert!(why(&[deep(&a), deep(&b), deep(&c)]).contains("a state holds at most 65535 of at most"));
    assert!(PipelineState::reshard(&[a.clone(), b.clone(), c.clone()], 0, fp).is_err());
    // A redeal of blocks is refused by a stage that deals rounds.
    let mut blocks = PipelineState::reshard(&[a, b, c], 2, fp).unwrap().remove(0);
    blocks.redeal[0].deal = Deal::Blocks { drop: false };
    let e = blocks.resume(&p.rank(2, 0), &ctx()).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("deals in blocks") && e.contains("deals in rounds"), "{e}");
}
