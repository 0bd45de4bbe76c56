//! `shuffle(global)` compiled (`tests/pipes/global_shuffle.pipe`): over indexed files,
//! every record exactly once per epoch, in an order that differs between epochs and is the
//! same on every run; a pass resumed at a position is the rest of the same pass; a file
//! without an index is an error that names it and says to run `sluice index`.

use std::collections::BTreeSet;

use sluice::runtime::stage::{Ctx, Dataset, RuntimeOptions};
use sluice::synth::{GenOptions, Kind};
use sluice::tfrecord::{Compression, write_index};
use sluice_examples::corpus::global_tabular;

fn data(index: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = GenOptions {
        kind: Kind::Tabular,
        records: 1000,
        shards: 3,
        out: dir.path().to_path_buf(),
        seed: 2,
        compression: Compression::None,
        threads: 1,
    };
    let summary = sluice::synth::generate(&opts, &|_| {}).unwrap();
    if index {
        for f in &summary.files {
            write_index(f).unwrap();
        }
    }
    dir
}

fn params(dir: &tempfile::TempDir) -> global_tabular::Params {
    global_tabular::Params { files: format!("{}/*.tfrecord", dir.path().display()), batch_size: 64, seed: 5 }
}

/// The ids of one pass from `skip` batches on, in order.
fn ids(p: &global_tabular::Params, epoch: u64, skip: u64) -> Vec<i64> {
    let ds = global_tabular::dataset(p).unwrap();
    let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(epoch);
    let mut out = Vec::new();
    for batch in ds.stream_from(&ctx, skip).unwrap() {
        out.extend(batch.unwrap().id.as_slice().iter().copied());
    }
    out
}

#[test]
fn every_record_once_per_epoch_in_a_new_order() {
    let dir = data(true);
    let p = params(&dir);
    let (e0, e1) = (ids(&p, 0, 0), ids(&p, 1, 0));
    for e in [&e0, &e1] {
        assert_eq!(e.len(), 1000);
        assert_eq!(e.iter().copied().collect::<BTreeSet<_>>(), (0..1000).collect());
    }
    assert_ne!(e0, e1, "a new permutation each epoch");
    assert_ne!(e0, (0..1000).collect::<Vec<_>>(), "shuffled");
    // Not a local shuffle: records from the end of the dataset come early.
    assert!(e0[..100].iter().any(|&i| i >= 900), "{:?}", &e0[..100]);
    assert_eq!(e0, ids(&p, 0, 0), "the same order on every run");
    // A resumed pass is the rest of the same pass.
    assert_eq!(ids(&p, 1, 7), e1[7 * 64..]);
    assert_eq!(global_tabular::RESUME_BLOCKER, None);
}

#[test]
fn a_file_without_an_index_is_a_clear_error() {
    let dir = data(false);
    let err = match global_tabular::dataset(&params(&dir)) {
        Ok(_) => panic!("built without indexes"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains(".tfrecord") && err.contains("sluice index"), "{err}");
}

#[test]
fn sharded_after_a_global_shuffle_workers_partition_each_epoch_equally() {
    use sluice_examples::corpus::global_sharded;
    let dir = data(true);
    for workers in [1u32, 2, 3, 4, 7] {
        for epoch in 0..2 {
            let mut all = Vec::new();
            for worker in 0..workers {
                let p = global_sharded::Params {
                    files: format!("{}/*.tfrecord", dir.path().display()),
                    workers,
                    worker,
                    seed: 5,
                };
                let ds = global_sharded::dataset(&p).unwrap();
                let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(epoch);
                let mine: Vec<i64> = ds.stream_in(&ctx).unwrap().map(|r| r.unwrap().id).collect();
                assert_eq!(mine.len(), 1000 / workers as usize, "{workers} workers: equal counts");
                all.extend(mine);
            }
            let distinct: BTreeSet<i64> = all.iter().copied().collect();
            assert_eq!(distinct.len(), all.len(), "{workers} workers, epoch {epoch}: a record twice");
            assert_eq!(all.len(), 1000 - 1000 % workers as usize);
        }
    }
}

#[test]
fn three_workers_states_reshard_to_two_alike_in_both_backends() {
    use sluice::runtime::stage::PipelineState;
    use sluice_examples::corpus::global_sharded;
    let dir = data(true);
    let files = format!("{}/*.tfrecord", dir.path().display());
    let params =
        |workers: u32, worker: u32| global_sharded::Params { files: files.clone(), workers, worker, seed: 5 };
    // Three workers stop at different positions of epoch 1, each saving its state with
    // its stage positions (the shard's count).
    let (mut before, mut states) = (Vec::new(), Vec::new());
    for (worker, stop) in [(0u32, 11usize), (1, 0), (2, 333)] {
        let p = params(3, worker);
        let ds = global_sharded::dataset(&p).unwrap();
        let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(1);
        let mut pass = ds.stream_in(&ctx).unwrap();
        before.extend(pass.by_ref().take(stop).map(|r| r.unwrap().id));
        let state = global_sharded::state(&p, 1, stop as u64).unwrap().with_stage_positions(&ds);
        states.push(PipelineState::from_bytes(&state.to_bytes(), "state").unwrap());
    }
    // The generated `reshard` and the engine's give the same two states.
    let new = global_sharded::reshard(&params(2, 0), &states).unwrap();
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/pipes/global_shuffle.pipe"),
    )
    .unwrap();
    let all = sluice_compiler::compile(&source).pipelines;
    let p = all.iter().find(|p| p.name() == "global_sharded").unwrap();
    let set = [("files".to_string(), files.clone()), ("workers".into(), "2".into())];
    let eparams = sluice_engine::params_in(&all, p, &set).unwrap();
    assert_eq!(sluice_engine::resume::reshard(p, &all, &eparams, &states).unwrap(), new);
    // The two go on with what the three had not taken, each record once: of the 1000,
    // the three's blocks (333 each) left one to none (1000 mod 3), and of the 655 the three
    // had not taken (322 of the first block, the whole second) the two drop one (655 mod 2).
    let mut after = Vec::new();
    for (worker, state) in new.iter().enumerate() {
        let p = params(2, worker as u32);
        global_sharded::check_state(&p, state).unwrap();
        let ds = global_sharded::dataset(&p).unwrap();
        let rest = state.resume(&ds, &Ctx::new(&RuntimeOptions::default())).unwrap();
        after.extend(rest.map(|r| r.unwrap().id));
    }
    let mut ids: Vec<i64> = before.iter().chain(&after).copied().collect();
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total, "a record twice");
    assert_eq!(total, 1000 - 1 - 1);
    // A pipeline without a shard says why it cannot.
    let e = global_tabular::reshard(
        &global_tabular::Params { files: files.clone(), batch_size: 64, seed: 5 },
        &states,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("cannot resume on another number of ranks: elastic: n/a (no shard)"),
        "{e}"
    );
    // One that is not elastic names the stage that prevents it.
    use sluice_examples::corpus::file_shards;
    let e = file_shards::reshard(&file_shards::Params { files, workers: 2, worker: 0 }, &states).unwrap_err();
    assert!(e.to_string().contains("elastic: no: ShardExec deals whole files"), "{e}");
}
