//! Hostile data through both backends: TFRecord files damaged in each way a reader meets
//! (a flipped payload byte, a file cut mid-record, a length field of 2^60 with a valid
//! checksum, a payload that is no `tf.train.Example`, a feature of the wrong type or
//! count, a missing feature, bytes that are no JPEG), under pipelines that parse record
//! by record and a batch at a time, that fail and that skip. The engine must exit as the
//! compiled runner does, with the same message naming the file and record, after the same
//! elements; neither may panic or allocate what a length field claims.

use std::path::{Path, PathBuf};
use std::process::Output;

use sluice::__private::abi::export;

use super::support::{show_files, stderr};

const PIPES: &str = r#"
pipeline rows(files: glob) {
    schema { x: f32[16], label: i64 }
    tfrecords(files);
    map { parse_example(); x = x * 2.0; }
}
pipeline batched(files: glob) {
    schema { x: f32[16], label: i64 }
    tfrecords(files);
    batch(4);
    map(parallel: 2) { parse_example(); }
}
pipeline skipping(files: glob) {
    schema { x: f32[16], label: i64 }
    tfrecords(files);
    map(on_error: skip) { parse_example(); x = x + 1.0; }
    batch(3);
}
pipeline images(files: glob) {
    schema { image: bytes, label: i64 }
    tfrecords(files);
    map { parse_example(); image = decode_jpeg(image, channels: 3); image = resize(image, 8, 8); }
    batch(2);
}
pipeline images_skipping(files: glob) {
    schema { image: bytes, label: i64 }
    tfrecords(files);
    map(on_error: skip) { parse_example(); image = decode_jpeg(image, channels: 3); image = resize(image, 8, 8); }
    batch(2);
}
"#;

/// `f` as a serialized `tf.train.Example`.
fn serialized(f: export::Features) -> Vec<u8> {
    let mut out = Vec::new();
    export::finish(f, &mut out);
    out
}

/// A tabular record: `x` (`n` floats), `label` unless `label` is false.
fn tabular(i: i64, n: usize, label: bool) -> Vec<u8> {
    let mut f = export::Features::new();
    export::list(&mut f, "x", &(0..n).map(|k| i as f32 + k as f32 * 0.5).collect::<Vec<_>>());
    if label {
        export::scalar(&mut f, "label", &i);
    }
    serialized(f)
}

/// A record whose `x` is a list of integers.
fn ints_for_x(i: i64) -> Vec<u8> {
    let mut f = export::Features::new();
    export::list(&mut f, "x", &(0..16).map(|k| k + i).collect::<Vec<i64>>());
    export::scalar(&mut f, "label", &i);
    serialized(f)
}

/// A record with `image` bytes and `label`.
fn image(bytes: &[u8], label: i64) -> Vec<u8> {
    let mut f = export::Features::new();
    export::bytes(&mut f, "image", bytes);
    export::scalar(&mut f, "label", &label);
    serialized(f)
}

/// Writes `records` as the TFRecord file `path`; returns each record's byte offset.
fn write(path: &Path, records: &[Vec<u8>]) -> Vec<usize> {
    let mut w = sluice::tfrecord::create(path, sluice::tfrecord::Compression::None).unwrap();
    for r in records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap();
    let mut offsets = vec![0];
    for r in records {
        offsets.push(offsets.last().unwrap() + 16 + r.len());
    }
    offsets
}

/// The damaged files, each `(name, file, pipelines it is read by)`, under `dir`.
fn damaged(dir: &Path) -> Vec<(&'static str, PathBuf, &'static [&'static str])> {
    const TABULAR: &[&str] = &["rows", "batched", "skipping"];
    const IMAGES: &[&str] = &["images", "images_skipping"];
    let good: Vec<Vec<u8>> = (0..10).map(|i| tabular(i, 16, true)).collect();
    let mut out = Vec::new();
    let mut file = |name: &'static str, records: &[Vec<u8>], pipes: &'static [&'static str]| {
        let path = dir.join(format!("{name}.tfrecord"));
        let offsets = write(&path, records);
        out.push((name, path.clone(), pipes));
        offsets
    };

    // A payload byte flipped in record 5: its checksum fails.
    let offsets = file("flipped", &good, TABULAR);
    let flipped = dir.join("flipped.tfrecord");
    let mut b = std::fs::read(&flipped).unwrap();
    b[offsets[5] + 12 + 7] ^= 0x55;
    std::fs::write(&flipped, b).unwrap();

    // Cut in the middle of record 6.
    let offsets = file("cut", &good, TABULAR);
    let cut = dir.join("cut.tfrecord");
    let b = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &b[..offsets[6] + 20]).unwrap();

    // Record 3's length field says 2^60, with the checksum of that length.
    let offsets = file("huge_length", &good, TABULAR);
    let huge = dir.join("huge_length.tfrecord");
    let mut b = std::fs::read(&huge).unwrap();
    let len = (1u64 << 60).to_le_bytes();
    b[offsets[3]..offsets[3] + 8].copy_from_slice(&len);
    let crc = sluice::tfrecord::mask_crc(crc32c::crc32c(&len));
    b[offsets[3] + 8..offsets[3] + 12].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&huge, b).unwrap();

    let mut records = good.clone();
    records[4] = vec![0x0a, 0x10, 0x01];
    file("not_an_example", &records, TABULAR);

    let mut records = good.clone();
    records[2] = ints_for_x(2);
    file("wrong_type", &records, TABULAR);

    let mut records = good.clone();
    records[7] = tabular(7, 15, true);
    file("wrong_count", &records, TABULAR);

    let mut records = good.clone();
    records[1] = tabular(1, 16, false);
    file("missing_label", &records, TABULAR);

    let mut maker = sluice::synth::RecordMaker::new(sluice::synth::Kind::Jpeg, 0);
    let mut records: Vec<Vec<u8>> = (0..6).map(|i| maker.record(i)).collect();
    records[2] = image(b"\xff\xd8\xff\xe0 not a JPEG after its marker", 2);
    records[4] = image(b"", 4);
    file("bad_jpeg", &records, IMAGES);
    out
}

#[test]
fn the_engine_fails_and_skips_on_hostile_data_as_the_compiled_runner_does() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("hostile.pipe");
    std::fs::write(&pipe, PIPES).unwrap();
    let mut failed = 0;
    for (name, file, pipelines) in damaged(dir.path()) {
        for pipeline in pipelines {
            let key = format!("{pipeline} over {name}");
            let compiled = show_files(dir.path(), &pipe, pipeline, &file, "compiled");
            let interpreted = show_files(dir.path(), &pipe, pipeline, &file, "interpreted");
            for (engine, o) in [("compiled", &compiled), ("interpreted", &interpreted)] {
                let err = stderr(o);
                assert!(!err.contains("panicked"), "{key}, {engine}: {err}");
                assert!(matches!(o.status.code(), Some(0 | 1)), "{key}, {engine}: {:?} {err}", o.status);
                if o.status.code() == Some(1) {
                    assert!(
                        err.contains(file.to_str().unwrap()),
                        "{key}, {engine}: the error names no file: {err}"
                    );
                }
            }
            assert_eq!(
                compiled.status.code(),
                interpreted.status.code(),
                "{key}: compiled: {}\ninterpreted: {}",
                stderr(&compiled),
                stderr(&interpreted)
            );
            if !compiled.status.success() {
                failed += 1;
                let last = |o: &Output| stderr(o).lines().last().unwrap_or_default().to_string();
                assert_eq!(last(&compiled), last(&interpreted), "{key}");
            }
            assert!(compiled.stdout == interpreted.stdout, "{key}: the elements differ");
        }
    }
    // Every damage but the skipped ones fails the pass.
    assert!(failed >= 15, "only {failed} runs failed");
}
