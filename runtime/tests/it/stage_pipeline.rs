//! Whole pipelines: parallel interleave → parallel map → shuffle → batch over TFRecord
//! files made in the test. Every record is delivered exactly once per epoch for any
//! thread count, and with `deterministic = true` the output does not depend on the
//! thread counts at all.

use proptest::prelude::*;
use sluice_runtime::column::Dense;
use sluice_runtime::stage::{Dataset, Files, Parallelism, tfrecords};
use sluice_runtime::tfrecord::{self, Compression, ReaderOptions};

/// Writes `sizes.len()` files; file `f` holds `sizes[f]` records whose payload is the
/// record's global id as 8 bytes.
fn write_files(dir: &std::path::Path, sizes: &[usize]) -> (Files, u64) {
    let mut id = 0u64;
    let mut paths = Vec::new();
    for (f, n) in sizes.iter().enumerate() {
        let p = dir.join(format!("f{f:03}.tfrecord"));
        let mut w = tfrecord::create(&p, Compression::None).unwrap();
        for _ in 0..*n {
            w.write_record(&id.to_le_bytes()).unwrap();
            id += 1;
        }
        w.finish().unwrap();
        paths.push(p);
    }
    (Files::from_paths(paths), id)
}

struct Shape {
    cycle: usize,
    read_threads: usize,
    map_threads: usize,
    shuffle: usize,
    batch: usize,
    deterministic: bool,
    epochs: u64,
}

fn pipeline(files: Files, s: &Shape) -> impl Dataset<Item = Dense<u64>> {
    tfrecords(files, ReaderOptions::default(), s.cycle)
        .num_parallel(Parallelism::Fixed(s.read_threads))
        .deterministic(s.deterministic)
        .try_map(|r: sluice_runtime::stage::Record| {
            Vec::from(r).try_into().map(u64::from_le_bytes).map_err(|_| "record is not 8 bytes")
        })
        .num_parallel(Parallelism::Fixed(s.map_threads))
        .deterministic(s.deterministic)
        .shuffle(s.shuffle, 42)
        .repeat(Some(s.epochs))
        .batch(s.batch, false)
}

fn run(files: &Files, s: &Shape) -> Vec<Vec<u64>> {
    pipeline(files.clone(), s).stream().unwrap().map(|b| b.unwrap().into_vec()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_record_once_per_epoch_and_thread_count_never_matters(
        sizes in prop::collection::vec(0usize..60, 1..7),
        cycle in 1usize..5,
        read_threads in 1usize..5,
        map_threads in 1usize..5,
        shuffle in 1usize..200,
        batch in 1usize..50,
        epochs in 1u64..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (files, total) = write_files(dir.path(), &sizes);
        for deterministic in [true, false] {
            let s = Shape { cycle, read_threads, map_threads, shuffle, batch, deterministic, epochs };
            let batches = run(&files, &s);
            // Every batch is full except the last.
            for b in batches.iter().rev().skip(1) {
                prop_assert_eq!(b.len(), batch);
            }
            let all: Vec<u64> = batches.concat();
            prop_assert_eq!(all.len() as u64, total * epochs);
            // The shuffle is inside the repeat: each epoch on its own holds every id once.
            for epoch in all.chunks(total.max(1) as usize) {
                let mut ids = epoch.to_vec();
                ids.sort_unstable();
                prop_assert_eq!(ids, (0..total).collect::<Vec<_>>());
            }
            if deterministic {
                // One thread everywhere gives the very same sequence.
                let one = Shape { read_threads: 1, map_threads: 1, ..s };
                prop_assert_eq!(run(&files, &one), batches);
            }
        }
    }
}

#[test]
fn runs_are_reproducible_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = write_files(dir.path(), &[500, 300, 0, 700]);
    let s = Shape {
        cycle: 3,
        read_threads: 3,
        map_threads: 2,
        shuffle: 256,
        batch: 64,
        deterministic: true,
        epochs: 2,
    };
    let a = run(&files, &s);
    assert_eq!(a, run(&files, &s));
    let epoch1: Vec<u64> = a.concat()[..1500].to_vec();
    let epoch2: Vec<u64> = a.concat()[1500..].to_vec();
    assert_ne!(epoch1, epoch2, "each epoch is shuffled anew");
}
