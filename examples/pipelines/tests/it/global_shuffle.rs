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
