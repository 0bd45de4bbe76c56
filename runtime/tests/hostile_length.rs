//! A compressed file whose first record declares a huge length (within the 1 GiB limit)
//! but holds a few hundred bytes: the reader grows its buffer only as bytes arrive, so
//! it fails as truncated without allocating the declared length. Alone in its test
//! binary so the process's peak RSS is this test's.

use std::io::Write;

use sluice_runtime::CorruptKind;
use sluice_runtime::tfrecord::{ReaderOptions, encode_header, open};

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_huge_declared_length_in_a_small_gzip_file_allocates_little() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.tfrecord.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&encode_header((1 << 30) - 1)).unwrap();
    gz.write_all(&[7u8; 300]).unwrap();
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let before = peak_rss_kib();
    let mut reader = open(&path, &ReaderOptions::default()).unwrap();
    let err = reader.next_record().expect_err("truncated");
    let after = peak_rss_kib();
    match &err {
        sluice_runtime::Error::Corrupt { kind: CorruptKind::Truncated { needed, available }, .. } => {
            assert_eq!(*needed, (1 << 30) - 1 + 16);
            assert_eq!(*available, 12 + 300);
        }
        other => panic!("expected a truncated record, got {other}"),
    }
    eprintln!("peak RSS {before} KiB before, {after} KiB after");
    assert!(after - before < 32 * 1024, "reading 312 bytes raised the peak RSS by {} KiB", after - before);
}
