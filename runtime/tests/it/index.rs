//! TFRecord indexes and random access: round trips, stale indexes (appended, truncated,
//! rewritten), damaged index bytes (a property test over mutations), hostile counts,
//! compressed and corrupt files at build time, and positioned, coalesced reads.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_runtime::tfrecord::{
    self, CoalesceOptions, Compression, Index, IndexedFile, RecordRequest, build_index, index_path,
    read_records, write_index,
};
use sluice_runtime::{CorruptKind, Error};

/// Record `i` of a test file: its number and some bytes, `len(i)` long in all.
fn record(i: usize, len: usize) -> Vec<u8> {
    let mut r = format!("record {i}:").into_bytes();
    r.resize(len.max(r.len()), (i % 251) as u8);
    r
}

fn write_file(path: &Path, recs: &[Vec<u8>], compression: Compression) {
    let mut w = tfrecord::create(path, compression).unwrap();
    for r in recs {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap();
}

fn records(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| record(i, 10 + i * 37 % 300)).collect()
}

fn indexed(dir: &Path, name: &str, recs: &[Vec<u8>]) -> PathBuf {
    let path = dir.join(name);
    write_file(&path, recs, Compression::None);
    write_index(&path).unwrap();
    path
}

fn index_error(e: Error) -> (PathBuf, String) {
    match e {
        Error::Index { path, reason } => (path, reason),
        other => panic!("expected an index error, got {other}"),
    }
}

#[test]
fn round_trip_reads_every_record_by_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(500);
    let path = indexed(dir.path(), "a.tfrecord", &recs);
    let idx_path = index_path(&path);
    assert_eq!(idx_path, dir.path().join("a.tfrecord.idx"));
    let file_len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(std::fs::metadata(&idx_path).unwrap().len(), 44 + 8 * 500, "8 bytes a record");

    let loaded = Index::load(&path).unwrap();
    assert_eq!(loaded, build_index(&path).unwrap());
    assert_eq!((loaded.len(), loaded.file_len()), (500, file_len));
    let f = IndexedFile::open(&path).unwrap();
    for k in [0u64, 1, 250, 499] {
        assert_eq!(f.read_record(k, true).unwrap(), recs[k as usize]);
    }
    assert!(matches!(f.read_record(500, true), Err(Error::Invalid(m)) if m.contains("no record 500")));
}

#[test]
fn empty_and_single_record_files_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    for (name, recs) in [("empty", vec![]), ("one", vec![b"x".to_vec()]), ("blank", vec![vec![]])] {
        let path = indexed(dir.path(), name, &recs);
        let f = IndexedFile::open(&path).unwrap();
        assert_eq!(f.len(), recs.len() as u64);
        for (k, r) in recs.iter().enumerate() {
            assert_eq!(&f.read_record(k as u64, true).unwrap(), r);
        }
    }
}

#[test]
fn a_missing_index_says_to_run_sluice_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.tfrecord");
    write_file(&path, &records(3), Compression::None);
    let (p, why) = index_error(IndexedFile::open(&path).unwrap_err());
    assert_eq!(p, index_path(&path));
    assert!(why.contains("no index") && why.contains("sluice index"), "{why}");
}

#[test]
fn stale_indexes_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(200);
    let check_stale = |path: &Path, want: &str| {
        let (p, why) = index_error(IndexedFile::open(path).unwrap_err());
        assert_eq!(p, index_path(path));
        assert!(why.starts_with("stale index") && why.contains(want) && why.contains("rerun"), "{why}");
    };

    // Appended to.
    let a = indexed(dir.path(), "appended", &recs);
    let mut more = recs.clone();
    more.push(b"one more".to_vec());
    let keep = std::fs::read(index_path(&a)).unwrap();
    write_file(&a, &more, Compression::None);
    std::fs::write(index_path(&a), &keep).unwrap();
    check_stale(&a, "bytes but the file has");

    // Truncated.
    let t = indexed(dir.path(), "truncated", &recs);
    let bytes = std::fs::read(&t).unwrap();
    std::fs::write(&t, &bytes[..bytes.len() - 100]).unwrap();
    check_stale(&t, "bytes but the file has");

    // Rewritten with other records of the same lengths: the first bytes differ.
    let r = indexed(dir.path(), "rewritten", &recs);
    let other: Vec<Vec<u8>> = recs.iter().map(|x| x.iter().map(|b| b ^ 0x55).collect()).collect();
    write_file(&r, &other, Compression::None);
    check_stale(&r, "first or last 4 KiB");
}

#[test]
fn a_rewrite_the_fingerprint_misses_is_caught_by_the_record_checks() {
    // Same length, same first and last 4 KiB, but two middle records swapped for ones
    // of other lengths (same total): their framing moved.
    let dir = tempfile::tempdir().unwrap();
    let mut recs: Vec<Vec<u8>> = (0..400).map(|i| record(i, 100)).collect();
    let path = indexed(dir.path(), "a", &recs);
    recs[200] = record(200, 60);
    recs[201] = record(201, 140);
    write_file(&path, &recs, Compression::None);
    let f = IndexedFile::open(&path).expect("the fingerprint cannot see the middle");
    assert_eq!(f.read_record(199, true).unwrap(), recs[199]);
    match f.read_record(200, true).unwrap_err() {
        Error::Corrupt {
            path: p,
            record: 200,
            offset,
            kind: CorruptKind::IndexMismatch { indexed, declared },
            ..
        } => {
            assert_eq!(p, path);
            assert_eq!(offset, 200 * 116);
            assert_eq!((indexed, declared), (100, 60));
        }
        e => panic!("unexpected {e}"),
    }
    // Record 201 now starts 40 bytes early: its indexed offset is inside its payload.
    assert!(matches!(f.read_record(201, true), Err(Error::Corrupt { record: 201, .. })));
    assert_eq!(f.read_record(202, true).unwrap(), recs[202]);
}

#[test]
fn a_damaged_payload_is_corrupt_with_file_record_and_offset() {
    // 300 records of 66 bytes: record 150 lies outside the fingerprinted head and tail.
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Vec<u8>> = (0..300).map(|i| record(i, 50)).collect();
    let path = indexed(dir.path(), "a", &recs);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[150 * 66 + 20] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let f = IndexedFile::open(&path).unwrap();
    match f.read_record(150, true).unwrap_err() {
        Error::Corrupt { path: p, record: 150, offset: 9900, kind: CorruptKind::DataCrc { .. }, .. } => {
            assert_eq!(p, path);
        }
        e => panic!("unexpected {e}"),
    }
    assert_eq!(f.read_record(150, false).unwrap().len(), 50, "payload checksum off");
    assert_eq!(f.read_record(151, true).unwrap(), recs[151]);
}

#[test]
fn damaged_index_files_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = indexed(dir.path(), "a", &records(20));
    let good = std::fs::read(index_path(&path)).unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[..good.len() - 1].to_vec(), "index is"),
        (good[..10].to_vec(), "truncated index"),
        (Vec::new(), "truncated index"),
        (
            {
                let mut b = good.clone();
                b[0] = b'X';
                b
            },
            "bad magic",
        ),
        (
            {
                let mut b = good.clone();
                b[8] = 2;
                b
            },
            "index version 2",
        ),
        (
            {
                let mut b = good.clone();
                b[50] ^= 4;
                b
            },
            "index checksum mismatch",
        ),
        (
            {
                let mut b = good.clone();
                b.push(0);
                b
            },
            "index is",
        ),
    ];
    for (bytes, want) in cases {
        std::fs::write(index_path(&path), &bytes).unwrap();
        let (p, why) = index_error(Index::load(&path).unwrap_err());
        assert_eq!(p, index_path(&path));
        assert!(why.contains(want), "{why} (want {want})");
    }
}

#[test]
fn a_hostile_count_is_rejected_before_reading_the_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = indexed(dir.path(), "a", &records(20));
    let mut b = std::fs::read(index_path(&path)).unwrap();
    b[24..32].copy_from_slice(&(u64::MAX / 8).to_le_bytes());
    std::fs::write(index_path(&path), &b).unwrap();
    let (_, why) = index_error(Index::load(&path).unwrap_err());
    assert!(why.contains("more than a file of"), "{why}");
}

#[test]
fn compressed_files_cannot_be_indexed() {
    let dir = tempfile::tempdir().unwrap();
    for c in [Compression::Gzip, Compression::Zlib] {
        let path = dir.path().join(format!("a.tfrecord{}", c.extension()));
        write_file(&path, &records(5), c);
        match build_index(&path).unwrap_err() {
            Error::Invalid(m) => assert!(m.contains("compressed") && m.contains("a.tfrecord"), "{m}"),
            e => panic!("unexpected {e}"),
        }
        assert!(!index_path(&path).exists());
    }
}

#[test]
fn a_corrupt_record_fails_the_build_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Vec<u8>> = (0..10).map(|i| record(i, 50)).collect();
    let path = dir.path().join("a");
    write_file(&path, &recs, Compression::None);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[7 * 66 + 30] ^= 0x80;
    std::fs::write(&path, &bytes).unwrap();
    match write_index(&path).unwrap_err() {
        Error::Corrupt { path: p, record: 7, offset: 462, kind: CorruptKind::DataCrc { .. }, .. } => {
            assert_eq!(p, path);
        }
        e => panic!("unexpected {e}"),
    }
    assert!(!index_path(&path).exists(), "no index is written for a corrupt file");
}

#[test]
fn batched_reads_return_every_requested_record_in_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let a = records(300);
    let b: Vec<Vec<u8>> = (0..50).map(|i| record(1000 + i, 5000)).collect();
    let files = vec![
        IndexedFile::open(indexed(dir.path(), "a", &a)).unwrap(),
        IndexedFile::open(indexed(dir.path(), "b", &b)).unwrap(),
    ];
    // A scattered, unsorted set of requests, with a duplicate.
    let wanted: Vec<(u32, u64)> =
        vec![(1, 40), (0, 7), (0, 299), (0, 8), (1, 0), (0, 150), (1, 41), (0, 7), (0, 0), (1, 49)];
    for opts in [
        CoalesceOptions::default(),
        CoalesceOptions { map: false, ..CoalesceOptions::default() },
        CoalesceOptions { max_gap: 0, max_span: 1, verify_crc: true, map: false },
        CoalesceOptions { max_gap: u64::MAX, max_span: u64::MAX, verify_crc: true, map: false },
    ] {
        let mut reqs: Vec<RecordRequest> = wanted
            .iter()
            .enumerate()
            .map(|(slot, &(file, record))| RecordRequest { file, record, slot: slot as u32 })
            .collect();
        let mut out: Vec<Option<Result<Vec<u8>, CorruptKind>>> = vec![None; wanted.len()];
        let mut scratch = Vec::new();
        let reads = read_records(&files, &mut reqs, &opts, &mut scratch, &mut out).unwrap();
        for (slot, &(file, record)) in wanted.iter().enumerate() {
            let want = if file == 0 { &a[record as usize] } else { &b[record as usize] };
            assert_eq!(out[slot].as_ref().unwrap().as_ref().unwrap(), want, "slot {slot}");
        }
        let expect_reads = match opts.max_span {
            _ if opts.map => 0, // every record copied from a memory map: no read
            1 => 9,             // one per distinct record (the duplicate shares its read)
            u64::MAX => 2,      // one per file
            _ => reads,
        };
        assert_eq!(reads, expect_reads, "{opts:?}");
        assert!(reads <= 9);
    }
}

#[test]
fn batched_reads_report_corrupt_records_in_their_slot_and_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Vec<u8>> = (0..300).map(|i| record(i, 50)).collect();
    let path = indexed(dir.path(), "a", &recs);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[150 * 66 + 2] ^= 1; // record 150's length field
    std::fs::write(&path, &bytes).unwrap();
    let files = vec![IndexedFile::open(&path).unwrap()];
    let reqs: Vec<RecordRequest> =
        (140..160).map(|k| RecordRequest { file: 0, record: k, slot: (k - 140) as u32 }).collect();
    for map in [true, false] {
        let mut reqs = reqs.clone();
        let mut out = vec![None; 20];
        let opts = CoalesceOptions { map, ..CoalesceOptions::default() };
        read_records(&files, &mut reqs, &opts, &mut Vec::new(), &mut out).unwrap();
        for (i, o) in out.iter().enumerate() {
            let k = 140 + i;
            match o.as_ref().unwrap() {
                Err(CorruptKind::LengthCrc { .. }) if k == 150 => {}
                Ok(v) if k != 150 => assert_eq!(v, &recs[k]),
                other => panic!("record {k}, map {map}: {other:?}"),
            }
        }
    }
}

#[test]
fn reading_a_file_cut_short_after_opening_is_a_stale_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = indexed(dir.path(), "a", &records(100));
    let f = IndexedFile::open(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let (_, why) = index_error(f.check_len().unwrap_err());
    assert!(why.contains("stale index"), "{why}");
    let (_, why) = index_error(f.read_record(99, true).unwrap_err());
    assert!(why.contains("shorter than its index says"), "{why}");
}

#[test]
fn a_file_cut_short_under_its_memory_map_is_a_stale_index_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    // 3000 records of 200 bytes (extent 216): 158 pages.
    let recs: Vec<Vec<u8>> = (0..3000).map(|i| record(i, 200)).collect();
    for map in [true, false] {
        let path = indexed(dir.path(), &format!("cut-{map}"), &recs);
        let files = vec![IndexedFile::open(&path).unwrap()];
        let opts = CoalesceOptions { map, ..CoalesceOptions::default() };
        let read = |records: std::ops::Range<u64>| {
            let mut reqs: Vec<RecordRequest> = records
                .clone()
                .map(|k| RecordRequest { file: 0, record: k, slot: (k - records.start) as u32 })
                .collect();
            let mut out = vec![None; reqs.len()];
            read_records(&files, &mut reqs, &opts, &mut Vec::new(), &mut out).map(|_| out)
        };
        // Read (and map) the whole file, then cut it to a quarter: records past the cut
        // lie on pages that are gone (a load from them would raise SIGBUS), and the one
        // the cut splits on a page that holds zeros after the cut.
        let out = read(0..3000).unwrap();
        assert_eq!(out[2999].as_ref().unwrap().as_ref().unwrap(), &recs[2999]);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 4).unwrap();
        // Records before the cut still read.
        let out = read(0..10).unwrap();
        assert_eq!(out[9].as_ref().unwrap().as_ref().unwrap(), &recs[9], "map {map}");
        for range in [2990..3000, 740..760, 0..3000] {
            let (p, why) = index_error(read(range.clone()).unwrap_err());
            assert_eq!(p, index_path(&path), "map {map}, {range:?}");
            assert!(why.contains("stale index"), "map {map}, {range:?}: {why}");
            assert!(why.contains(&path.display().to_string()), "{why}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any change to an index file's bytes is rejected or yields the very same index:
    /// loading never panics and never accepts wrong offsets.
    #[test]
    fn mutated_indexes_are_rejected_or_identical(
        n in 0usize..12,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
        grow in prop::collection::vec(any::<u8>(), 0..3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = indexed(dir.path(), "a", &records(n));
        let good = std::fs::read(index_path(&path)).unwrap();
        let expected = Index::load(&path).unwrap();
        let mut bytes = good.clone();
        for (at, x) in &edits {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len()));
        }
        bytes.extend_from_slice(&grow);
        std::fs::write(index_path(&path), &bytes).unwrap();
        match Index::load(&path) {
            Ok(idx) => prop_assert_eq!(idx, expected),
            Err(Error::Index { .. }) => prop_assert_ne!(bytes, good),
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }
}
