//! The corpus's elastic pipelines, compiled, resumed on another number of ranks: over
//! random N and M in 1..=8 and random stops, N ranks stop in epoch 1, their states are
//! redealt to M (the generated `reshard`, and the engine's, which must agree), and the M
//! ranks finish the epoch. What the N delivered before and the M after is the epoch, each
//! record once (`remainder: drop`: none twice, and only what a deal in rounds or blocks
//! leaves to none missing; `pad`: every record). Epoch 2 of each new rank is a fresh
//! M-rank run's.
//!
//! The pipelines: `shard_drop` and `shard_pad` (`examples/pipelines/pipes/shard.pipe`: a
//! record-level `shard` over the files' interleave) and `global_sharded`
//! (`tests/pipes/global_shuffle.pipe`: the blocks of a global permutation).

use std::path::Path;

use proptest::prelude::*;
use sluice::runtime::Result;
use sluice::runtime::stage::{Boxed, Ctx, Dataset, PipelineState, RuntimeOptions};
use sluice::synth::{GenOptions, Kind};
use sluice::tfrecord::{Compression, write_index};
use sluice_examples::corpus::global_sharded;
use sluice_examples::sharding::{shard_drop, shard_pad};

const INTERRUPTED: u64 = 1;

/// 211 indexed records in 3 files: no count of ranks above 1 divides it.
fn data() -> &'static str {
    static DATA: std::sync::OnceLock<(tempfile::TempDir, String)> = std::sync::OnceLock::new();
    let (_, glob) = DATA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let opts = GenOptions {
            kind: Kind::Tabular,
            records: 211,
            shards: 3,
            out: dir.path().to_path_buf(),
            seed: 9,
            compression: Compression::None,
            threads: 1,
        };
        for f in &sluice::synth::generate(&opts, &|_| {}).unwrap().files {
            write_index(f).unwrap();
        }
        let glob = format!("{}/*.tfrecord", dir.path().display());
        (dir, glob)
    });
    glob
}

/// How the records a pipeline's ranks deliver add up over an epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Remainder {
    /// No record twice; of the rest dealt in rounds to M ranks, up to M − 1 to none.
    RoundsDrop,
    /// Every record (the padding repeats some).
    Pad,
    /// No record twice; a deal in blocks leaves up to N − 1 to none, its rest up to M − 1.
    BlocksDrop,
}

/// One of the corpus's elastic pipelines, as ranks of a job of `n`.
trait Case {
    type Ds: Dataset;
    const NAME: &'static str;
    const PIPE: &'static str;
    const REMAINDER: Remainder;
    fn dataset(n: u32, i: u32) -> Self::Ds;
    fn id(item: &<Self::Ds as Dataset>::Item) -> i64;
    fn state(n: u32, i: u32, epoch: u64, position: u64) -> PipelineState;
    fn reshard(m: u32, states: &[PipelineState]) -> Result<Vec<PipelineState>>;
    fn check(n: u32, i: u32, state: &PipelineState) -> Result<()>;
}

macro_rules! case {
    ($ty:ident, $module:ident, $pipe:literal, $remainder:expr, $params:expr) => {
        struct $ty;
        impl Case for $ty {
            type Ds = Boxed<$module::Item>;
            const NAME: &'static str = stringify!($module);
            const PIPE: &'static str = $pipe;
            const REMAINDER: Remainder = $remainder;
            fn dataset(n: u32, i: u32) -> Self::Ds {
                $module::dataset(&$params(n, i)).unwrap().boxed()
            }
            fn id(item: &<Self::Ds as Dataset>::Item) -> i64 {
                item.id
            }
            fn state(n: u32, i: u32, epoch: u64, position: u64) -> PipelineState {
                $module::state(&$params(n, i), epoch, position).unwrap()
            }
            fn reshard(m: u32, states: &[PipelineState]) -> Result<Vec<PipelineState>> {
                $module::reshard(&$params(m, 0), states)
            }
            fn check(n: u32, i: u32, state: &PipelineState) -> Result<()> {
                $module::check_state(&$params(n, i), state)
            }
        }
    };
}

case!(Drop, shard_drop, "examples/pipelines/pipes/shard.pipe", Remainder::RoundsDrop, |workers, worker| {
    shard_drop::Params { files: data().into(), workers, worker }
});
case!(Pad, shard_pad, "examples/pipelines/pipes/shard.pipe", Remainder::Pad, |workers, worker| {
    shard_pad::Params { files: data().into(), workers, worker }
});
case!(Blocks, global_sharded, "tests/pipes/global_shuffle.pipe", Remainder::BlocksDrop, |workers, worker| {
    global_sharded::Params { files: data().into(), workers, worker, seed: 5 }
});

fn ctx(epoch: u64) -> Ctx {
    Ctx::new(&RuntimeOptions::default()).with_epoch(epoch)
}

/// The engine's reshard of `states` for M ranks of `C`'s pipeline.
fn engine_reshard<C: Case>(m: u32, states: &[PipelineState]) -> Vec<PipelineState> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = std::fs::read_to_string(root.join(C::PIPE)).unwrap();
    let all = sluice_compiler::compile(&source).pipelines;
    let p = all.iter().find(|p| p.name() == C::NAME).unwrap();
    let set = [("files".to_string(), data().to_string()), ("workers".into(), m.to_string())];
    let params = sluice_engine::params_in(&all, p, &set).unwrap();
    sluice_engine::resume::reshard(p, &all, &params, states).unwrap()
}

/// N ranks stop at `stops` (per mille of their pass) in epoch 1; M ranks go on from their
/// redealt states. Checks what they deliver, and that epoch 2 is a fresh M-rank run's.
fn stop_and_redeal<C: Case>(n: u32, m: u32, stops: &[u16]) -> std::result::Result<(), TestCaseError> {
    let (mut before, mut states) = (Vec::new(), Vec::new());
    for i in 0..n {
        let ds = C::dataset(n, i);
        let len = ds.stream_in(&ctx(INTERRUPTED)).unwrap().count();
        let stop = len * usize::from(stops[i as usize]) / 1000;
        let mut pass = ds.stream_in(&ctx(INTERRUPTED)).unwrap();
        before.extend(pass.by_ref().take(stop).map(|r| C::id(&r.unwrap())));
        let state = C::state(n, i, INTERRUPTED, stop as u64).with_stage_positions(&ds);
        states.push(PipelineState::from_bytes(&state.to_bytes(), "state").unwrap());
    }
    let redealt = C::reshard(m, &states).unwrap();
    prop_assert_eq!(&redealt, &engine_reshard::<C>(m, &states), "the backends' reshards differ");
    let mut after = Vec::new();
    for (i, state) in redealt.iter().enumerate() {
        let i = i as u32;
        C::check(m, i, state).unwrap();
        let ds = C::dataset(m, i);
        let rest = state.resume(&ds, &ctx(0)).unwrap();
        after.extend(rest.map(|r| C::id(&r.unwrap())));
        // The next epoch: a fresh run's, from the same dataset that was redealt.
        let next: Vec<i64> =
            ds.stream_in(&ctx(INTERRUPTED + 1)).unwrap().map(|r| C::id(&r.unwrap())).collect();
        let fresh: Vec<i64> =
            C::dataset(m, i).stream_in(&ctx(INTERRUPTED + 1)).unwrap().map(|r| C::id(&r.unwrap())).collect();
        prop_assert_eq!(next, fresh, "rank {} of {}: epoch 2 is not a fresh run's", i, m);
    }
    let mut ids: Vec<i64> = before.into_iter().chain(after).collect();
    ids.sort_unstable();
    let total = ids.len();
    ids.dedup();
    let (n, m) = (i64::from(n), i64::from(m));
    match C::REMAINDER {
        Remainder::RoundsDrop | Remainder::BlocksDrop => {
            prop_assert_eq!(ids.len(), total, "a record twice");
            let missing = 211 - total as i64;
            let most = if C::REMAINDER == Remainder::BlocksDrop { n - 1 + m - 1 } else { m - 1 };
            prop_assert!(
                (0..=most).contains(&missing),
                "{} records missing of 211 (N {}, M {})",
                missing,
                n,
                m
            );
        }
        Remainder::Pad => prop_assert_eq!(ids, (0..211).collect::<Vec<_>>()),
    }
    Ok(())
}

fn ranks_and_stops() -> impl Strategy<Value = (u32, u32, Vec<u16>)> {
    (1u32..=8, 1u32..=8, prop::collection::vec(0u16..=1000, 8))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn shard_drop_redeals_each_record_once((n, m, stops) in ranks_and_stops()) {
        stop_and_redeal::<Drop>(n, m, &stops)?;
    }

    #[test]
    fn shard_pad_redeals_every_record((n, m, stops) in ranks_and_stops()) {
        stop_and_redeal::<Pad>(n, m, &stops)?;
    }

    #[test]
    fn global_sharded_redeals_each_record_once((n, m, stops) in ranks_and_stops()) {
        stop_and_redeal::<Blocks>(n, m, &stops)?;
    }
}

/// Every pipeline of the corpus and the examples with a `shard` that is not elastic
/// refuses a reshard, naming the stage that prevents it (its `explain` line), in the
/// engine and in the generated code alike (the same `elastic:` text).
#[test]
fn every_pipeline_that_is_not_elastic_refuses_naming_its_stage() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["tests/pipes", "examples/pipelines/pipes", "bench", "examples/digits", "examples/dist"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "pipe") {
                files.push(path);
            }
        }
    }
    let (mut refused, mut elastic) = (0, 0);
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let compiled = sluice_compiler::compile(&source);
        let code = compiled.generate().map(|g| g.to_pretty_string()).unwrap_or_default();
        let Ok(all) = compiled.into_result() else { continue };
        for p in &all {
            let r = p.physical.resumption();
            let line = format!("{}", r.elastic);
            if r.is_elastic() {
                elastic += 1;
                continue;
            }
            if !line.starts_with("no:") {
                continue; // no shard: nothing to redeal
            }
            // A value for each parameter without a default (the refusal comes first).
            use sluice_compiler::ir::types::ParamType as T;
            let set: Vec<(String, String)> = (p.decls.params.iter().filter(|d| d.default.is_none()))
                .map(|d| {
                    let v = match d.ty {
                        T::Glob | T::Path | T::Str => "x",
                        T::Bool => "false",
                        T::Size => "1 MiB",
                        _ => "1",
                    };
                    (d.name.clone(), v.to_string())
                })
                .collect();
            let params = sluice_engine::params_in(&all, p, &set).unwrap();
            let e = sluice_engine::resume::reshard(p, &all, &params, &[]).unwrap_err().to_string();
            let at = format!("{}: {}", path.display(), p.name());
            assert!(
                e.contains(&format!("cannot resume on another number of ranks: elastic: {line}")),
                "{at}: {e}"
            );
            // The stage is named (an exec of the plan), or the reason is the whole
            // pipeline's position.
            assert!(line.contains("Exec") || line.contains("resume: blocked"), "{at}: {line}");
            assert!(
                code.contains(&format!("elastic: {line}")),
                "{at}: the generated reshard does not say `{line}`"
            );
            refused += 1;
        }
    }
    assert!(refused >= 4 && elastic >= 5, "{refused} refused, {elastic} elastic");
}
