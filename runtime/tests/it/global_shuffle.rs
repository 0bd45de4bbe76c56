//! `global_shuffle`: every record of every file exactly once per epoch, a new order per
//! epoch and per seed, the same order for the same seed and epoch whatever the window and
//! threads, exact suffixes and slices of positions, corrupt records under each policy,
//! missing and stale indexes, files cut short mid-pass, memory-mapped and `pread` reads
//! alike, and statistics.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sluice_runtime::stage::{Ctx, Dataset, GlobalShuffle, RuntimeOptions, global_shuffle};
use sluice_runtime::tfrecord::{self, CoalesceOptions, Compression, CorruptPolicy, index_path, write_index};
use sluice_runtime::{CorruptKind, Error};

/// Writes indexed files of `lens[i]` records each; record `j` of file `i` is
/// `"i/j"` padded to `size` bytes.
pub fn dataset(dir: &Path, lens: &[usize], size: usize) -> Vec<PathBuf> {
    lens.iter()
        .enumerate()
        .map(|(i, &n)| {
            let path = dir.join(format!("part-{i:03}.tfrecord"));
            let mut w = tfrecord::create(&path, Compression::None).unwrap();
            for j in 0..n {
                w.write_record(&payload(i, j, size)).unwrap();
            }
            w.finish().unwrap();
            write_index(&path).unwrap();
            path
        })
        .collect()
}

fn payload(file: usize, record: usize, size: usize) -> Vec<u8> {
    let mut p = format!("{file}/{record}").into_bytes();
    p.resize(size.max(p.len()), b'.');
    p
}

fn name(record: &[u8]) -> String {
    String::from_utf8_lossy(record).trim_end_matches('.').to_string()
}

fn pass(ds: &GlobalShuffle, epoch: u64) -> Vec<String> {
    let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(epoch);
    ds.stream_in(&ctx).unwrap().map(|r| name(&r.unwrap())).collect()
}

/// The names of epoch `epoch`'s records as the stage's permutation and numbering say.
fn permuted(ds: &GlobalShuffle, epoch: u64) -> Vec<String> {
    let perm = ds.permutation(epoch);
    (0..ds.len())
        .map(|p| {
            let (f, k) = ds.locate(perm.get(p)).unwrap();
            format!("{f}/{k}")
        })
        .collect()
}

fn all_names(lens: &[usize]) -> BTreeSet<String> {
    lens.iter().enumerate().flat_map(|(i, &n)| (0..n).map(move |j| format!("{i}/{j}"))).collect()
}

fn assert_each_once(order: &[String], lens: &[usize]) {
    let set: BTreeSet<String> = order.iter().cloned().collect();
    assert_eq!(set.len(), order.len(), "a record was repeated");
    assert_eq!(set, all_names(lens));
}

#[test]
fn every_record_once_per_epoch_in_a_new_order() {
    let dir = tempfile::tempdir().unwrap();
    let lens = [300, 0, 1, 257, 0, 90];
    let ds = global_shuffle(dataset(dir.path(), &lens, 40), 7).unwrap().window(64).num_parallel(1);
    assert_eq!(ds.len(), 648);
    let orders: Vec<Vec<String>> = (0..3).map(|e| pass(&ds, e)).collect();
    for o in &orders {
        assert_each_once(o, &lens);
    }
    assert_ne!(orders[0], orders[1]);
    assert_ne!(orders[1], orders[2]);
    assert_eq!(orders[1], pass(&ds, 1), "the same seed and epoch repeat the order");
    // Not file order, nor file order within a window.
    let sequential: Vec<String> =
        lens.iter().enumerate().flat_map(|(i, &n)| (0..n).map(move |j| format!("{i}/{j}"))).collect();
    assert_ne!(orders[0], sequential);
    let first_window: BTreeSet<&str> = orders[0][..64].iter().map(|s| s.split('/').next().unwrap()).collect();
    assert!(first_window.len() >= 3, "the first 64 records come from several files: {first_window:?}");
}

#[test]
fn the_order_is_the_stage_permutation_mapped_to_records() {
    let dir = tempfile::tempdir().unwrap();
    let lens = [5, 0, 9, 3];
    let ds = global_shuffle(dataset(dir.path(), &lens, 8), 3).unwrap();
    assert_eq!(pass(&ds, 2), permuted(&ds, 2));
}

#[test]
fn seeds_change_the_order() {
    let dir = tempfile::tempdir().unwrap();
    let lens = [200, 100];
    let paths = dataset(dir.path(), &lens, 16);
    let a = pass(&global_shuffle(&paths, 1).unwrap(), 0);
    let b = pass(&global_shuffle(&paths, 2).unwrap(), 0);
    assert_each_once(&b, &lens);
    assert_ne!(a, b);
}

#[test]
fn the_order_does_not_depend_on_window_threads_or_coalescing() {
    let dir = tempfile::tempdir().unwrap();
    let lens = [400, 3, 0, 611];
    let paths = dataset(dir.path(), &lens, 100);
    let reference = pass(&global_shuffle(&paths, 11).unwrap().window(1).num_parallel(1), 4);
    assert_each_once(&reference, &lens);
    let no_coalescing = CoalesceOptions { max_gap: 0, max_span: 1, verify_crc: true, map: false };
    let all_coalesced =
        CoalesceOptions { max_gap: u64::MAX, max_span: u64::MAX, verify_crc: false, map: false };
    for window in [1, 2, 7, 64, 1000, 5000] {
        for threads in [1, 2, 3, 8] {
            let pread = CoalesceOptions { map: false, ..CoalesceOptions::default() };
            for read in [CoalesceOptions::default(), pread, no_coalescing, all_coalesced] {
                let ds =
                    global_shuffle(&paths, 11).unwrap().window(window).num_parallel(threads).coalesce(read);
                assert_eq!(pass(&ds, 4), reference, "window {window}, {threads} threads, {read:?}");
            }
        }
    }
    // The automatic window and parallelism too.
    assert_eq!(pass(&global_shuffle(&paths, 11).unwrap(), 4), reference);
}

#[test]
fn a_single_file_and_tiny_datasets() {
    let dir = tempfile::tempdir().unwrap();
    for lens in [vec![1], vec![2], vec![3], vec![1000], vec![0], vec![0, 0], vec![]] {
        let sub = dir.path().join(format!("{lens:?}"));
        std::fs::create_dir(&sub).unwrap();
        let ds = global_shuffle(dataset(&sub, &lens, 10), 5).unwrap();
        for epoch in 0..3 {
            assert_each_once(&pass(&ds, epoch), &lens);
        }
    }
}

#[test]
fn without_reshuffling_every_epoch_repeats_epoch_zero() {
    let dir = tempfile::tempdir().unwrap();
    let ds = global_shuffle(dataset(dir.path(), &[100, 50], 10), 9).unwrap().reshuffle_each_epoch(false);
    assert_eq!(pass(&ds, 0), pass(&ds, 5));
}

#[test]
fn starting_at_a_position_gives_exactly_the_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let lens = [123, 77, 0, 200];
    let paths = dataset(dir.path(), &lens, 20);
    let full = pass(&global_shuffle(&paths, 4).unwrap(), 1);
    for p in [0u64, 1, 63, 64, 65, 250, 399, 400, 401, 10_000] {
        for threads in [1, 2] {
            let ds = global_shuffle(&paths, 4).unwrap().window(64).num_parallel(threads).starting_at(p);
            let suffix = pass(&ds, 1);
            assert_eq!(suffix, full[(p as usize).min(full.len())..], "from {p}, {threads} threads");
        }
    }
    // Disjoint position ranges are disjoint exact slices that together make the epoch.
    let mut joined = Vec::new();
    for r in [0..37, 37..200, 200..201, 201..400, 400..u64::MAX] {
        let slice = pass(&global_shuffle(&paths, 4).unwrap().window(50).positions(r.clone()), 1);
        assert_eq!(slice, full[(r.start as usize).min(400)..(r.end.min(400) as usize)]);
        joined.extend(slice);
    }
    assert_eq!(joined, full);
    // A reversed range is empty, not an error.
    let (from, to) = (300, 100);
    assert!(pass(&global_shuffle(&paths, 4).unwrap().positions(from..to), 1).is_empty());
}

#[test]
fn a_file_without_an_index_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let paths = dataset(dir.path(), &[3, 3], 10);
    std::fs::remove_file(index_path(&paths[1])).unwrap();
    match global_shuffle(&paths, 1).unwrap_err() {
        Error::Index { path, reason } => {
            assert_eq!(path, index_path(&paths[1]));
            assert!(reason.contains("sluice index") && reason.contains("part-001.tfrecord"), "{reason}");
        }
        e => panic!("unexpected {e}"),
    }
}

#[test]
fn a_file_changed_after_the_stage_was_made_fails_the_next_pass() {
    let dir = tempfile::tempdir().unwrap();
    let paths = dataset(dir.path(), &[30, 30], 10);
    let ds = global_shuffle(&paths, 1).unwrap();
    assert_eq!(pass(&ds, 0).len(), 60);
    let mut w = std::fs::OpenOptions::new().append(true).open(&paths[0]).unwrap();
    std::io::Write::write_all(&mut w, b"more").unwrap();
    match ds.iter(&Ctx::new(&RuntimeOptions::default())) {
        Err(Error::Index { path, reason }) => {
            assert_eq!(path, index_path(&paths[0]));
            assert!(reason.contains("stale index"), "{reason}");
        }
        other => panic!("unexpected {:?}", other.map(|_| ())),
    }
}

#[test]
fn mapped_and_pread_reads_deliver_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let lens = [500, 0, 37, 900];
    let paths = dataset(dir.path(), &lens, 300);
    let bytes = |map: bool, threads: usize| {
        let read = CoalesceOptions { map, ..CoalesceOptions::default() };
        let ds = global_shuffle(&paths, 5).unwrap().window(100).num_parallel(threads).coalesce(read);
        let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(2);
        ds.stream_in(&ctx).unwrap().map(|r| r.unwrap().into_bytes()).collect::<Vec<_>>()
    };
    let mapped = bytes(true, 1);
    assert_eq!(mapped.len(), 1437);
    for (i, r) in mapped.iter().enumerate() {
        let (f, k) = name(r).split_once('/').map(|(f, k)| (f.parse().unwrap(), k.parse().unwrap())).unwrap();
        assert_eq!(r, &payload(f, k, 300), "record {i}");
    }
    assert_eq!(bytes(false, 1), mapped);
    assert_eq!(bytes(true, 2), mapped);
    assert_eq!(bytes(false, 3), mapped);
}

#[test]
fn a_file_cut_short_mid_pass_fails_it_naming_the_file() {
    for (threads, map) in [(1, true), (1, false), (2, true), (2, false)] {
        let dir = tempfile::tempdir().unwrap();
        // 2 files × 3000 records of 200 bytes: 158 pages each, 94 windows of 64.
        let paths = dataset(dir.path(), &[3000, 3000], 200);
        let read = CoalesceOptions { map, ..CoalesceOptions::default() };
        let ds = global_shuffle(&paths, 3).unwrap().window(64).num_parallel(threads).coalesce(read);
        let mut stream = ds.stream().unwrap();
        for _ in 0..10 {
            stream.next().unwrap().unwrap();
        }
        // Cut file 1 to a quarter under the pass: what is left of the pass touches pages
        // past its new end (a plain load from a memory map of them raises SIGBUS).
        let len = std::fs::metadata(&paths[1]).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&paths[1]).unwrap().set_len(len / 4).unwrap();
        let err = stream.find_map(Result::err).expect("an error before the pass ends");
        match err {
            Error::Index { path, reason } => {
                assert_eq!(path, index_path(&paths[1]), "{threads} threads, map {map}");
                assert!(reason.contains("stale index"), "{reason}");
                assert!(reason.contains(&paths[1].display().to_string()), "{reason}");
            }
            e => panic!("{threads} threads, map {map}: unexpected {e}"),
        }
        assert!(stream.next().is_none(), "the pass ends at its error");
    }
}

/// A dataset of 3 files × 200 records of 50 bytes (extent 66) with record 100 of file 1
/// damaged in its payload (outside the fingerprinted first and last 4 KiB).
fn damaged(dir: &Path) -> Vec<PathBuf> {
    let paths = dataset(dir, &[200, 200, 200], 50);
    let mut bytes = std::fs::read(&paths[1]).unwrap();
    bytes[100 * 66 + 30] ^= 0x40;
    std::fs::write(&paths[1], &bytes).unwrap();
    paths
}

#[test]
fn a_corrupt_record_fails_the_pass_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let paths = damaged(dir.path());
    for (threads, map) in [(1, true), (2, true), (1, false), (2, false)] {
        let read = CoalesceOptions { map, ..CoalesceOptions::default() };
        let ds = global_shuffle(&paths, 8).unwrap().window(32).num_parallel(threads).coalesce(read);
        let mut delivered = 0u64;
        let mut err = None;
        for r in ds.stream().unwrap() {
            match r {
                Ok(_) => delivered += 1,
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        match err {
            Some(Error::Corrupt {
                path,
                record: 100,
                offset: 6600,
                kind: CorruptKind::DataCrc { .. },
                ..
            }) => {
                assert_eq!(path, paths[1]);
            }
            e => panic!("unexpected {e:?}"),
        }
        // Everything before it in the permutation is delivered first.
        let bad = permuted(&ds, 0).iter().position(|s| s == "1/100").unwrap();
        assert_eq!(delivered, bad as u64);
    }
}

#[test]
fn skip_drops_the_corrupt_record_and_skip_file_the_rest_of_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let paths = damaged(dir.path());
    for threads in [1, 2] {
        let ds = global_shuffle(&paths, 8).unwrap().window(32).num_parallel(threads);
        let order = permuted(&ds, 0);
        let bad = order.iter().position(|s| s == "1/100").unwrap();

        let ds = ds.on_corrupt(CorruptPolicy::Skip);
        let ctx = Ctx::new(&RuntimeOptions::default());
        let got: Vec<String> = ds.stream_in(&ctx).unwrap().map(|r| name(&r.unwrap())).collect();
        let want: Vec<String> = order.iter().filter(|s| *s != "1/100").cloned().collect();
        assert_eq!(got, want);
        let stats = ctx.reader_stats();
        assert_eq!((stats.records, stats.skipped_records), (599, 1));
        assert_eq!((stats.events[0].record, stats.events[0].offset), (100, 6600));
        assert_eq!(stats.events[0].path, paths[1]);

        let ds = global_shuffle(&paths, 8).unwrap().window(32).num_parallel(threads);
        let ds = ds.on_corrupt(CorruptPolicy::SkipFile);
        let ctx = Ctx::new(&RuntimeOptions::default());
        let got: Vec<String> = ds.stream_in(&ctx).unwrap().map(|r| name(&r.unwrap())).collect();
        let want: Vec<String> = order
            .iter()
            .enumerate()
            .filter(|(p, s)| !(s.starts_with("1/") && *p >= bad))
            .map(|(_, s)| s.clone())
            .collect();
        assert_eq!(got, want);
        let stats = ctx.reader_stats();
        assert_eq!(stats.records + stats.skipped_records, 600);
        assert!(stats.events[0].rest_of_file);
    }
}

#[test]
fn statistics_count_the_records_and_name_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    let ds = global_shuffle(dataset(dir.path(), &[100, 28], 30), 1).unwrap().num_parallel(2).window(16);
    let mut s = ds.stream().unwrap();
    assert_eq!(s.by_ref().count(), 128);
    let report = s.report();
    let st = report.stages.iter().find(|st| st.name == "global_shuffle").unwrap();
    assert_eq!((st.elements, st.bytes, st.parallelism), (128, 128 * 30, 2));
    assert_eq!(s.reader_stats().records, 128);
}

#[test]
fn dropping_a_pass_early_stops_its_readers() {
    let dir = tempfile::tempdir().unwrap();
    let ds = global_shuffle(dataset(dir.path(), &[5000, 5000], 100), 1).unwrap().num_parallel(4).window(10);
    for _ in 0..20 {
        let mut s = ds.stream().unwrap();
        assert!(s.next().unwrap().is_ok());
        drop(s); // must not hang
    }
}

#[test]
fn shards_are_blocks_of_the_permutation_that_partition_each_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let lens = [13, 0, 29, 6];
    let paths = dataset(dir.path(), &lens, 8);
    let total: usize = lens.iter().sum();
    for n in [1u64, 2, 3, 5, 48, 60] {
        for drop in [false, true] {
            let mut all = Vec::new();
            for i in 0..n {
                let ds = global_shuffle(&paths, 4).unwrap().shard(n, i, drop).unwrap();
                let mine = pass(&ds, 1);
                let want = total as u64 / n + u64::from(!drop && i < total as u64 % n);
                assert_eq!(mine.len() as u64, want, "{n} shards, drop {drop}, shard {i}");
                all.extend(mine);
            }
            // In order, the blocks are the epoch's permutation (or its first n·⌊N/n⌋).
            let whole = pass(&global_shuffle(&paths, 4).unwrap(), 1);
            let kept = if drop { total - total % n as usize } else { total };
            assert_eq!(all, whole[..kept], "{n} shards, drop {drop}");
        }
    }
    assert!(global_shuffle(&paths, 4).unwrap().shard(3, 3, false).is_err());
}
