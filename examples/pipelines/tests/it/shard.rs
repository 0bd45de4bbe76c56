//! `shard(workers, worker, remainder: drop | pad)` compiled (`pipes/shard.pipe`) and run
//! for several worker counts over a dataset of uneven files: every worker gets exactly
//! `floor(N / workers)` records (drop) or `ceil(N / workers)` (pad), and together they
//! partition the pass exactly: each of the first `workers · floor(N / workers)` records
//! once (drop), every record and then the pass's first records again (pad).

use std::collections::BTreeMap;

use sluice::runtime::stage::Dataset;
use sluice::synth::{GenOptions, Kind};
use sluice::tfrecord::Compression;
use sluice_examples::sharding::{shard_drop, shard_pad};

/// 100 records in 3 files (33, 33 and 34 records): no worker count below divides it
/// but 1, 2 and 4.
const RECORDS: u64 = 100;

const WORKERS: [u32; 5] = [1, 2, 3, 4, 7];

fn data() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let opts = GenOptions {
        kind: Kind::Tabular,
        records: RECORDS,
        shards: 3,
        out: dir.path().to_path_buf(),
        seed: 5,
        compression: Compression::None,
        threads: 1,
    };
    sluice::synth::generate(&opts, &|_| {}).expect("synthetic data");
    dir
}

fn args(glob: &str, workers: u32, worker: u32) -> Vec<(String, String)> {
    vec![
        ("files".into(), glob.into()),
        ("workers".into(), workers.to_string()),
        ("worker".into(), worker.to_string()),
    ]
}

/// The ids worker `worker` of `workers` reads in one pass.
fn drop_ids(glob: &str, workers: u32, worker: u32) -> Vec<i64> {
    let params = shard_drop::Params::from_args(&args(glob, workers, worker)).unwrap();
    let ds = shard_drop::dataset(&params).unwrap();
    ds.stream().unwrap().map(|r| r.unwrap().id).collect()
}

fn pad_ids(glob: &str, workers: u32, worker: u32) -> Vec<i64> {
    let params = shard_pad::Params::from_args(&args(glob, workers, worker)).unwrap();
    let ds = shard_pad::dataset(&params).unwrap();
    ds.stream().unwrap().map(|r| r.unwrap().id).collect()
}

fn counts(ids: impl IntoIterator<Item = i64>) -> BTreeMap<i64, usize> {
    let mut m = BTreeMap::new();
    for id in ids {
        *m.entry(id).or_insert(0) += 1;
    }
    m
}

#[test]
fn drop_and_pad_partition_the_pass_exactly() {
    let dir = data();
    let glob = format!("{}/*.tfrecord", dir.path().display());
    // One worker reads the whole pass: every id once, in the interleave's order.
    let pass = drop_ids(&glob, 1, 0);
    assert_eq!(counts(pass.iter().copied()), counts(0..RECORDS as i64), "one worker reads every record");
    assert_eq!(pad_ids(&glob, 1, 0), pass);
    let n = pass.len() as u64;
    for workers in WORKERS {
        let w = u64::from(workers);
        let (floor, ceil) = (n / w, n.div_ceil(w));
        let dropped: Vec<Vec<i64>> = (0..workers).map(|i| drop_ids(&glob, workers, i)).collect();
        let padded: Vec<Vec<i64>> = (0..workers).map(|i| pad_ids(&glob, workers, i)).collect();
        for (i, (d, p)) in dropped.iter().zip(&padded).enumerate() {
            assert_eq!(d.len() as u64, floor, "drop: worker {i} of {workers}");
            assert_eq!(p.len() as u64, ceil, "pad: worker {i} of {workers}");
            // Worker i's records are the pass's positions i, i + w, …; padding wraps around.
            let at = |r: u64| pass[((i as u64 + w * r) % n) as usize];
            assert_eq!(d, &(0..floor).map(at).collect::<Vec<_>>(), "drop: worker {i} of {workers}");
            assert_eq!(p, &(0..ceil).map(at).collect::<Vec<_>>(), "pad: worker {i} of {workers}");
        }
        // Drop: the first `w · floor` records of the pass, each once.
        let first = pass[..(w * floor) as usize].iter().copied();
        assert_eq!(counts(dropped.iter().flatten().copied()), counts(first), "drop, {workers} workers");
        // Pad: every record, and the first `w · ceil - n` records once more.
        let extra = pass[..(w * ceil - n) as usize].iter().copied();
        let all = pass.iter().copied().chain(extra);
        assert_eq!(counts(padded.iter().flatten().copied()), counts(all), "pad, {workers} workers");
    }
}
