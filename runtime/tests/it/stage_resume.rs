//! `Dataset::iter_from`: a pass started after its first `k` elements yields exactly what
//! an uninterrupted pass yields after its `k`th, for every `k`, through the stages that
//! fast-forward without pulling (map, enumerate, batch, chunks, take, skip, prefetch) and
//! those that pull (shuffle, filter, interleave), on one thread and on several.

use sluice_runtime::stage::{Ctx, Dataset, Parallelism, RuntimeOptions, range};

fn pass<D: Dataset>(d: &D, epoch: u64, skip: u64) -> Vec<D::Item> {
    let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(epoch);
    d.stream_from(&ctx, skip).unwrap().collect::<sluice_runtime::Result<Vec<_>>>().unwrap()
}

fn check<D: Dataset>(what: &str, d: &D)
where
    D::Item: PartialEq + std::fmt::Debug,
{
    for epoch in 0..2 {
        let full = pass(d, epoch, 0);
        for k in 0..=full.len() as u64 + 2 {
            let rest = pass(d, epoch, k);
            let want = &full[(k as usize).min(full.len())..];
            assert!(rest == want, "{what}, epoch {epoch}, from {k}: {rest:?} != {want:?}");
        }
    }
}

#[test]
fn every_position_resumes_exactly() {
    // Shuffled, mapped in parallel (ordered), tagged, batched, prefetched.
    let ds = range(0..97)
        .shuffle(16, 7)
        .map(|x| x * 3)
        .num_parallel(Parallelism::Fixed(3))
        .enumerate()
        .map(|e| (e.epoch, e.index, e.value))
        .chunks(5, false)
        .prefetch(2);
    check("shuffle map enumerate chunks prefetch", &ds);
    let ds = range(0..50).skip(3).take(40).filter(|x| x % 3 != 0).map(|x| x + 1).chunks(4, true);
    check("skip take filter map chunks(drop)", &ds);
    let ds = range(0..10).take(0);
    check("empty", &ds);
}

#[test]
fn a_batch_resumes_from_whole_batches() {
    let ds = range(0..23).map(|x| (x, x as f32)).batch(4, false);
    let full = pass(&ds, 0, 0);
    assert_eq!(full.len(), 6);
    for k in 0..8u64 {
        let rest = pass(&ds, 0, k);
        assert_eq!(rest.len(), 6usize.saturating_sub(k as usize), "from {k}");
        for (a, b) in rest.iter().zip(&full[(k as usize).min(6)..]) {
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
        }
    }
}

#[test]
fn a_global_shuffle_resumes_at_its_position_without_reading_before_it() {
    use sluice_runtime::tfrecord::{self, Compression, write_index};
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (i, n) in [40usize, 0, 17, 33].into_iter().enumerate() {
        let path = dir.path().join(format!("part-{i}.tfrecord"));
        let mut w = tfrecord::create(&path, Compression::None).unwrap();
        for j in 0..n {
            w.write_record(format!("{i}/{j}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
        write_index(&path).unwrap();
        paths.push(path);
    }
    let ds = sluice_runtime::stage::global_shuffle(&paths, 11).unwrap().window(8).num_parallel(2);
    check("global shuffle", &ds);
    // Resumed, then mapped and batched: the map skips its input, the shuffle its positions.
    let ds = sluice_runtime::stage::global_shuffle(&paths, 11).unwrap().map(|r| r.len()).chunks(6, false);
    check("global shuffle map chunks", &ds);
}
