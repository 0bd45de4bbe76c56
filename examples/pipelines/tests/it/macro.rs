//! `sluice::pipeline!` end to end: an inline pipeline whose `filter` and `map` are Rust (a
//! closure and function paths of this file) runs over a small TFRecord file written here
//! and feeds a consumer; the same pipeline read from a `.pipe` file by the macro yields
//! what `build.rs` compiled from that file.

use prost::Message;
use sluice::example::{Example, Feature};
use sluice::runtime::stage::Dataset;
use sluice::tfrecord::Compression;

sluice::pipeline! {
    // Even labels, weights scaled by ten, small ones only.
    pipeline inline(files: glob) {
        schema { label: i64, weight: f32 = 1.0 }
        tfrecords(files);
        map { parse_example(); }
        filter(|r| r.label % 2 == 0);
        map(scale);
        filter(small);
        map(move |mut r| { r.label += 1000; r });
    }
}

/// A Rust `map`: a record in, a record of the same type out.
fn scale(mut r: inline::Record) -> inline::Record {
    r.weight *= 10.0;
    r
}

/// A Rust `filter` predicate.
fn small(r: &inline::Record) -> bool {
    r.weight < 100.0
}

/// The pipelines of `pipes/tf_fixtures.pipe`, through the macro this time.
mod from_file {
    sluice::pipeline!(file = "pipes/tf_fixtures.pipe");
}

/// Writes records `label = i, weight = i` for `i` in `0..n`; returns the file's path.
fn write(dir: &std::path::Path, n: i64) -> String {
    let path = dir.join("data.tfrecord");
    let mut w = sluice::tfrecord::create(&path, Compression::None).expect("create");
    for i in 0..n {
        let e = Example::from_features([
            ("label".to_string(), Feature::int64s(vec![i])),
            ("weight".to_string(), Feature::floats(vec![i as f32])),
        ]);
        w.write_record(&e.encode_to_vec()).expect("write");
    }
    w.finish().expect("finish");
    path.display().to_string()
}

#[test]
fn an_inline_pipeline_with_rust_code_feeds_a_consumer() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let files = write(dir.path(), 20);
    let params = inline::Params::from_args(&[("files".into(), files)]).expect("params");
    let mut seen = Vec::new();
    // The consumer: a loop over the stream, as a training loop would be.
    for item in inline::dataset(&params).expect("dataset").stream().expect("stream") {
        let r: inline::Item = item.expect("a record");
        seen.push((r.label, r.weight));
    }
    let want: Vec<(i64, f32)> = (0..10).filter(|i| i % 2 == 0).map(|i| (i + 1000, i as f32 * 10.0)).collect();
    assert_eq!(seen, want);
}

#[test]
fn a_pipeline_file_through_the_macro_is_the_build_rs_pipeline() {
    assert_eq!(from_file::tf_unpacked::NAME, sluice_examples::fixtures::tf_unpacked::NAME);
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/tf/unpacked.tfrecord");
    let set = [("files".to_string(), fixture.to_string())];
    let macro_rows: Vec<String> =
        from_file::tf_unpacked::dataset(&from_file::tf_unpacked::Params::from_args(&set).unwrap())
            .unwrap()
            .stream()
            .unwrap()
            .map(|r| format!("{:?}", r.unwrap().z_int))
            .collect();
    let build_rows: Vec<String> = sluice_examples::fixtures::tf_unpacked::dataset(
        &sluice_examples::fixtures::tf_unpacked::Params::from_args(&set).unwrap(),
    )
    .unwrap()
    .stream()
    .unwrap()
    .map(|r| format!("{:?}", r.unwrap().z_int))
    .collect();
    assert!(!macro_rows.is_empty());
    assert_eq!(macro_rows, build_rows);
}
