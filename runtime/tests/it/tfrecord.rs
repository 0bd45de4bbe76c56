//! TFRecord reader and writer: round trips, every corruption policy, hostile mutations.

use std::io::Cursor;

use proptest::prelude::*;
use sluice_runtime::tfrecord::{
    self, Compression, CorruptPolicy, HEADER_LEN, ReaderOptions, RecordReader, RecordWriter, encode_header,
};
use sluice_runtime::{CorruptKind, Error};

fn write(records: &[Vec<u8>], compression: Compression) -> Vec<u8> {
    let mut w = RecordWriter::new(Vec::new(), "mem", compression);
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap()
}

fn opts(policy: CorruptPolicy) -> ReaderOptions {
    ReaderOptions { on_corrupt: policy, ..ReaderOptions::default() }
}

/// The records read, the error that ended the stream if any, and the reader.
type Outcome<'a> = (Vec<Vec<u8>>, Option<Error>, RecordReader<Cursor<&'a [u8]>>);

/// Reads a whole uncompressed stream; returns the records and the first error.
fn read(bytes: &[u8], o: ReaderOptions) -> Outcome<'_> {
    let mut r = RecordReader::new(Cursor::new(bytes), "mem.tfrecord", o);
    let mut out = Vec::new();
    loop {
        match r.next_owned() {
            Ok(Some(rec)) => out.push(rec),
            Ok(None) => return (out, None, r),
            Err(e) => return (out, Some(e), r),
        }
    }
}

/// Reads a file written to disk, through `tfrecord::open` (compression detection).
fn read_file(bytes: &[u8], name: &str, o: &ReaderOptions) -> (Vec<Vec<u8>>, Option<Error>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let mut r = tfrecord::open(&path, o).unwrap();
    let mut out = Vec::new();
    loop {
        match r.next_owned() {
            Ok(Some(rec)) => out.push(rec),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

fn records(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| (0..(i * 37 % 300)).map(|j| (i * 31 + j * 7) as u8).collect()).collect()
}

/// Offsets of each record in an uncompressed stream.
fn offsets(records: &[Vec<u8>]) -> Vec<usize> {
    let mut at = 0;
    records
        .iter()
        .map(|r| {
            let o = at;
            at += HEADER_LEN + r.len() + 4;
            o
        })
        .collect()
}

fn corrupt_at(e: &Error) -> (u64, u64, CorruptKind) {
    match e {
        Error::Corrupt { record, offset, kind, path, .. } => {
            assert!(path.to_string_lossy().contains("mem"), "error names the file: {e}");
            (*record, *offset, kind.clone())
        }
        other => panic!("expected a corrupt-record error, got {other}"),
    }
}

proptest! {
    // 256 cases by default; `PROPTEST_CASES=N` runs more.

    #[test]
    fn round_trip(
        recs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..2000), 0..40),
        compression in prop::sample::select(vec![Compression::None, Compression::Gzip, Compression::Zlib]),
        buffer_size in prop::sample::select(vec![16usize, 100, 4096, 1 << 20]),
    ) {
        let bytes = write(&recs, compression);
        let o = ReaderOptions { compression, buffer_size, ..ReaderOptions::default() };
        let name = format!("f.tfrecord{}", compression.extension());
        let (got, err, ) = read_file(&bytes, &name, &ReaderOptions { compression: Compression::Auto, ..o.clone() });
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(&got, &recs);
        // Explicit compression on a name that says nothing.
        let (got, err) = read_file(&bytes, "plain-name", &o);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(&got, &recs);
        // Sniffed compression on a name that says nothing.
        let (got, err) = read_file(&bytes, "sniffed", &ReaderOptions { compression: Compression::Auto, ..o });
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(got, recs);
    }

    /// Whatever is done to a file, `skip` never panics or hangs, delivers only records
    /// that were written, in order, and delivers every record none of whose bytes changed.
    #[test]
    fn skip_survives_mutation(
        n in 1usize..30,
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..6),
        cut in prop::option::of(any::<prop::sample::Index>()),
        buffer_size in prop::sample::select(vec![16usize, 64, 1 << 20]),
    ) {
        let recs = records(n);
        let mut bytes = write(&recs, Compression::None);
        let starts = offsets(&recs);
        let mut touched = vec![false; bytes.len()];
        let mut cut_on_boundary = false;
        for (i, x) in &flips {
            let i = i.index(bytes.len());
            bytes[i] ^= x;
            touched[i] = true;
        }
        if let Some(c) = cut {
            let c = c.index(bytes.len());
            // A file cut between two records is a valid, shorter file.
            cut_on_boundary = starts.contains(&c);
            bytes.truncate(c);
            touched[c..].iter_mut().for_each(|t| *t = true);
        }
        let o = ReaderOptions { on_corrupt: CorruptPolicy::Skip, buffer_size, ..ReaderOptions::default() };
        let (got, err, r) = read(&bytes, o);
        prop_assert!(err.is_none());
        let intact: Vec<&Vec<u8>> = recs.iter().zip(&starts)
            .filter(|(rec, s)| !touched[**s..**s + HEADER_LEN + rec.len() + 4].iter().any(|t| *t))
            .map(|(rec, _)| rec)
            .collect();
        // Delivered records are a subsequence of the written ones that contains every intact one.
        let mut it = recs.iter();
        for g in &got {
            prop_assert!(it.any(|r| r == g), "delivered a record that was never written");
        }
        let mut it = got.iter();
        for want in intact {
            prop_assert!(it.any(|g| g == want), "lost an intact record");
        }
        if got.len() < recs.len() {
            prop_assert!(r.stats().skipped_records >= 1 || cut_on_boundary, "records lost without a count");
        }
    }
}

#[test]
fn empty_stream_and_zero_length_records() {
    let (got, err, _) = read(&[], ReaderOptions::default());
    assert!(got.is_empty() && err.is_none());
    let recs = vec![vec![], vec![1, 2, 3], vec![], vec![]];
    let bytes = write(&recs, Compression::None);
    let (got, err, r) = read(&bytes, ReaderOptions::default());
    assert!(err.is_none());
    assert_eq!(got, recs);
    assert_eq!(r.stats().records, 4);
    for c in [Compression::Gzip, Compression::Zlib] {
        let name = format!("e.tfrecord{}", c.extension());
        let (got, err) = read_file(&write(&[], c), &name, &ReaderOptions::default());
        assert!(got.is_empty() && err.is_none(), "{c}");
    }
}

#[test]
fn data_crc_mismatch_under_each_policy() {
    let recs = records(6);
    let starts = offsets(&recs);
    let mut bytes = write(&recs, Compression::None);
    bytes[starts[2] + HEADER_LEN + 5] ^= 0x40;

    let (got, err, _) = read(&bytes, opts(CorruptPolicy::Fail));
    assert_eq!(got, recs[..2]);
    let err = err.expect("an error");
    let (record, offset, kind) = corrupt_at(&err);
    assert_eq!((record, offset), (2, starts[2] as u64));
    assert!(matches!(kind, CorruptKind::DataCrc { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("mem.tfrecord")
            && msg.contains("record 2")
            && msg.contains(&format!("offset {}", starts[2])),
        "{msg}"
    );

    let (got, err, r) = read(&bytes, opts(CorruptPolicy::Skip));
    assert!(err.is_none());
    assert_eq!(got, [&recs[..2], &recs[3..]].concat());
    let s = r.stats();
    assert_eq!((s.records, s.skipped_records), (5, 1));
    assert_eq!(s.skipped_bytes as usize, HEADER_LEN + recs[2].len() + 4);
    assert_eq!(s.events[0].offset, starts[2] as u64);

    let (got, err, r) = read(&bytes, opts(CorruptPolicy::SkipFile));
    assert!(err.is_none());
    assert_eq!(got, recs[..2]);
    assert!(r.stats().events[0].rest_of_file);

    // With checksums off, a payload flip goes unnoticed (the length is still checked).
    let (got, err, _) = read(&bytes, ReaderOptions { verify_crc: false, ..ReaderOptions::default() });
    assert!(err.is_none());
    assert_eq!(got.len(), 6);
}

#[test]
fn length_crc_mismatch_resynchronises() {
    let recs = records(8);
    let starts = offsets(&recs);
    let mut bytes = write(&recs, Compression::None);
    bytes[starts[3] + 1] ^= 0x01;
    let (got, err, _) = read(&bytes, opts(CorruptPolicy::Fail));
    assert_eq!(got, recs[..3]);
    let (record, offset, kind) = corrupt_at(&err.unwrap());
    assert_eq!((record, offset), (3, starts[3] as u64));
    assert!(matches!(kind, CorruptKind::LengthCrc { .. }), "{kind}");

    let (got, err, r) = read(&bytes, ReaderOptions { buffer_size: 32, ..opts(CorruptPolicy::Skip) });
    assert!(err.is_none());
    assert_eq!(got, [&recs[..3], &recs[4..]].concat());
    assert_eq!(r.stats().skipped_bytes as usize, starts[4] - starts[3]);
}

#[test]
fn garbage_between_records_and_at_the_start() {
    let recs = records(5);
    let mut bytes = b"not a tfrecord at all".to_vec();
    let body = write(&recs, Compression::None);
    let starts = offsets(&recs);
    bytes.extend_from_slice(&body[..starts[2]]);
    bytes.extend_from_slice(&[0xAB; 1000]);
    bytes.extend_from_slice(&body[starts[2]..]);
    let (got, err, r) = read(&bytes, opts(CorruptPolicy::Skip));
    assert!(err.is_none());
    assert_eq!(got, recs);
    assert_eq!(r.stats().skipped_records, 2);
    assert_eq!(r.stats().skipped_bytes, 21 + 1000);
    // The record index counts a skipped region as one record.
    assert_eq!(r.stats().events[1].record, 3);
}

#[test]
fn truncation_anywhere_is_reported() {
    let recs = records(4);
    let bytes = write(&recs, Compression::None);
    let starts = offsets(&recs);
    for cut in [starts[3] + 5, starts[3] + HEADER_LEN, starts[3] + HEADER_LEN + 3, bytes.len() - 1] {
        let (got, err, _) = read(&bytes[..cut], opts(CorruptPolicy::Fail));
        assert_eq!(got, recs[..3], "cut at {cut}");
        let (record, offset, kind) = corrupt_at(&err.unwrap());
        assert_eq!((record, offset), (3, starts[3] as u64));
        assert!(matches!(kind, CorruptKind::Truncated { .. }), "{kind}");
        let (got, err, r) = read(&bytes[..cut], opts(CorruptPolicy::Skip));
        assert!(err.is_none());
        assert_eq!(got, recs[..3]);
        assert_eq!(r.stats().skipped_bytes as usize, cut - starts[3]);
    }
    // On disk, truncation is detected from the file size, before reading the payload.
    let (got, err) = read_file(&bytes[..starts[2] + 20], "cut.tfrecord", &ReaderOptions::default());
    assert_eq!(got, recs[..2]);
    let e = err.unwrap();
    assert!(e.to_string().contains("truncated"), "{e}");
}

#[test]
fn a_huge_declared_length_allocates_nothing() {
    // A header that validates but declares 2^60 bytes: rejected by the limit, not by
    // trying to read an exabyte.
    let mut bytes = encode_header(1 << 60).to_vec();
    bytes.extend_from_slice(&write(&records(2), Compression::None));
    let (got, err, _) = read(&bytes, opts(CorruptPolicy::Fail));
    assert!(got.is_empty());
    let (_, _, kind) = corrupt_at(&err.unwrap());
    assert!(matches!(kind, CorruptKind::TooLarge { .. }), "{kind}");
    let (got, err, _) = read(&bytes, opts(CorruptPolicy::Skip));
    assert!(err.is_none());
    assert_eq!(got, records(2));
    // Within the limit but past the end of the file: truncated, found from the file size.
    let mut bytes = encode_header(1 << 29).to_vec();
    bytes.extend_from_slice(&[0; 100]);
    let (_, err) = read_file(&bytes, "big.tfrecord", &ReaderOptions::default());
    assert!(
        matches!(corrupt_at_file(&err.unwrap()), CorruptKind::Truncated { needed, available: 112 } if needed == (1 << 29) + 16)
    );
}

fn corrupt_at_file(e: &Error) -> CorruptKind {
    match e {
        Error::Corrupt { kind, .. } => kind.clone(),
        other => panic!("expected a corrupt-record error, got {other}"),
    }
}

#[test]
fn damaged_compressed_streams() {
    let recs = records(200);
    for c in [Compression::Gzip, Compression::Zlib] {
        let bytes = write(&recs, c);
        let name = format!("d.tfrecord{}", c.extension());
        // Cut short.
        let (got, err) = read_file(&bytes[..bytes.len() / 2], &name, &ReaderOptions::default());
        let err = err.unwrap_or_else(|| panic!("{c}: truncated stream accepted"));
        assert!(err.is_corrupt(), "{c}: {err}");
        assert!(err.to_string().contains("decompressed stream"), "{err}");
        assert!(got.len() < recs.len() && recs.starts_with(&got));
        // Damaged in the middle: an error, or with `skip`, the rest of the file is dropped.
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        bad[mid..mid + 8].copy_from_slice(&[0xff; 8]);
        let (got, err) = read_file(&bad, &name, &ReaderOptions::default());
        assert!(err.is_some_and(|e| e.is_corrupt()), "{c}");
        assert!(recs.starts_with(&got));
        let (got, err) = read_file(&bad, &name, &opts(CorruptPolicy::Skip));
        assert!(err.is_none(), "{c}");
        assert!(recs.starts_with(&got) && got.len() < recs.len());
        // Not compressed at all although the name says so.
        let (_, err) = read_file(&write(&recs, Compression::None), &name, &ReaderOptions::default());
        assert!(err.is_some_and(|e| e.is_corrupt()), "{c}");
    }
}

#[test]
fn concatenated_gzip_members_read_as_one_stream() {
    let a = records(3);
    let b = records(5);
    let mut bytes = write(&a, Compression::Gzip);
    bytes.extend(write(&b, Compression::Gzip));
    let (got, err) = read_file(&bytes, "cat.tfrecord.gz", &ReaderOptions::default());
    assert!(err.is_none());
    assert_eq!(got, [a, b].concat());
}

#[test]
fn missing_file_names_the_path() {
    let err = tfrecord::open("/no/such/dir/x.tfrecord", &ReaderOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }));
    assert!(err.to_string().starts_with("/no/such/dir/x.tfrecord: "), "{err}");
}

#[test]
fn records_larger_than_the_buffer() {
    let recs = vec![vec![7u8; 3 << 20], vec![1, 2], vec![9u8; 5 << 20], vec![]];
    let bytes = write(&recs, Compression::None);
    let (got, err, _) = read(&bytes, ReaderOptions { buffer_size: 4096, ..ReaderOptions::default() });
    assert!(err.is_none());
    assert_eq!(got, recs);
}
