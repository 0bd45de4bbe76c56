//! `map(on_error: skip)` through generated pipelines (`tests/pipes/on_error.pipe`) on
//! TFRecords written here, some of whose JPEGs are corrupt, records malformed or labels
//! zero (a division by zero): the good elements in order, the count of the others in the
//! map's statistics, the same output for any thread count, and resume.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use sluice::example::feature::Kind;
use sluice::example::{BytesList, Example, Feature, Features, Int64List};
use sluice::runtime::column::Columns;
use sluice::runtime::stage::{Ctx, Dataset};
use sluice::tfrecord::{Compression, create};
use sluice_examples::corpus::{chunks, decoded, jpegs, kept, strict_parse};

/// A 4×4 JPEG of one grey level.
fn jpeg(level: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let pixels = vec![level; 4 * 4 * 3];
    jpeg_encoder::Encoder::new(&mut out, 90).encode(&pixels, 4, 4, jpeg_encoder::ColorType::Rgb).unwrap();
    out
}

/// What record `i` is: a good one, a corrupt JPEG, a label of the wrong type, or a zero
/// label (`decoded`'s `100 / label` fails).
fn kind(i: i64) -> &'static str {
    match i % 7 {
        2 => "bad_jpeg",
        4 => "bad_example",
        _ if i == 10 => "zero",
        _ => "good",
    }
}

fn record(i: i64) -> Vec<u8> {
    let bytes = |b: Vec<u8>| Feature { kind: Some(Kind::BytesList(BytesList { value: vec![b] })) };
    let mut f = BTreeMap::new();
    let image = if kind(i) == "bad_jpeg" { b"\xff\xd8 not a jpeg".to_vec() } else { jpeg((i * 6) as u8) };
    f.insert("image".to_string(), bytes(image));
    let label = match kind(i) {
        "bad_example" => bytes(b"not an int".to_vec()),
        "zero" => Feature { kind: Some(Kind::Int64List(Int64List { value: vec![0] })) },
        _ => Feature { kind: Some(Kind::Int64List(Int64List { value: vec![i] })) },
    };
    f.insert("label".to_string(), label);
    Example { features: Some(Features { feature: f }) }.encode_to_vec()
}

/// Two shards of 20 records: 0..20 and 20..40.
fn write(dir: &Path) -> String {
    for (k, range) in [(0, 0..20), (1, 20..40)] {
        let mut w = create(dir.join(format!("data-{k}.tfrecord")), Compression::None).unwrap();
        for i in range {
            w.write_record(&record(i)).unwrap();
        }
        w.finish().unwrap();
    }
    format!("{}/data-*.tfrecord", dir.display())
}

/// The labels of the records whose JPEG decodes and whose example parses (record 10's
/// is 0).
fn decodable() -> Vec<i64> {
    (0..40)
        .filter(|&i| matches!(kind(i), "good" | "zero"))
        .map(|i| if kind(i) == "zero" { 0 } else { i })
        .collect()
}

fn map_stage(ctx: &Ctx, name: &str) -> sluice::runtime::stage::StageReport {
    ctx.report().stages.into_iter().find(|s| s.name == name).unwrap()
}

#[test]
fn skipped_elements_are_dropped_before_the_batch_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path());
    let want = decodable();
    for par in [1, 4] {
        let p = jpegs::Params { files: files.clone(), par, size: 4 };
        let ctx = Ctx::new(&Default::default());
        let batches: Vec<_> =
            jpegs::dataset(&p).unwrap().stream_in(&ctx).unwrap().map(|b| b.unwrap()).collect();
        let labels: Vec<i64> = batches.iter().flat_map(|b| b.label.as_slice().to_vec()).collect();
        assert_eq!(labels, want, "parallel: {par}");
        // Every batch but the last is full: the skipping map is not fused with the batch.
        let sizes: Vec<usize> = batches.iter().map(|b| b.label.num_rows().unwrap()).collect();
        assert!(sizes[..sizes.len() - 1].iter().all(|&n| n == 4), "{sizes:?}");
        let map = map_stage(&ctx, "map");
        assert_eq!(map.skipped_errors, 40 - want.len() as u64, "parallel: {par}");
        assert_eq!(map.first_skipped.len(), 3);
        if par == 1 {
            // The first failures, each naming its file and record.
            assert!(map.first_skipped[0].contains("data-0.tfrecord: record 2"), "{:?}", map.first_skipped);
            assert!(map.first_skipped[1].contains("data-0.tfrecord: record 4"), "{:?}", map.first_skipped);
        }
    }
}

#[test]
fn a_resumed_pass_is_the_rest_of_the_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path());
    for par in [1, 4] {
        let p = decoded::Params { files: files.clone(), par };
        let ctx = Ctx::new(&Default::default());
        let full: Vec<i64> = decoded::dataset(&p)
            .unwrap()
            .stream_in(&ctx)
            .unwrap()
            .map(|r| r.map_err(|e| e.to_string()).unwrap().label)
            .collect();
        // Records 0 and 10 (label 0) fail `100 / label` too.
        let want: Vec<i64> = decodable().into_iter().filter(|&l| l != 0).map(|l| 100 / l).collect();
        assert_eq!(full, want);
        assert_eq!(map_stage(&ctx, "map").skipped_errors, 40 - want.len() as u64);
        for k in [1, 5, 11, want.len() as u64] {
            let state = decoded::state(&p, 0, k).unwrap();
            let rest: Vec<i64> = decoded::dataset(&p)
                .unwrap()
                .stream_from(&Ctx::new(&Default::default()), state.position)
                .unwrap()
                .map(|r| r.unwrap().label)
                .collect();
            assert_eq!(rest, full[k as usize..], "parallel: {par}, from {k}");
        }
    }
    // The batches too: resumed after 3 batches.
    let p = jpegs::Params { files, par: 2, size: 4 };
    let rest: Vec<i64> = jpegs::dataset(&p)
        .unwrap()
        .stream_from(&Ctx::new(&Default::default()), 3)
        .unwrap()
        .flat_map(|b| b.unwrap().label.as_slice().to_vec())
        .collect();
    assert_eq!(rest, decodable()[12..]);
}

#[test]
fn a_fused_filter_a_map_over_batches_and_a_strict_map() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path());
    // Map + filter: the map's failures skipped, the filter applied to the rest.
    let got: Vec<i64> = kept::dataset(&kept::Params { files: files.clone() })
        .unwrap()
        .stream()
        .unwrap()
        .map(|r| r.unwrap().label)
        .collect();
    assert_eq!(got, decodable().into_iter().filter(|&i| i >= 2).collect::<Vec<_>>());

    // A map over batches of 4 records: a batch holding a malformed example is dropped
    // whole (records 4, 11, 18, 25, 32 and 39 spoil 6 of the 10 batches).
    let ctx = Ctx::new(&Default::default());
    let batches: Vec<Vec<i64>> = chunks::dataset(&chunks::Params { files: files.clone() })
        .unwrap()
        .stream_in(&ctx)
        .unwrap()
        .map(|b| b.unwrap().label.as_slice().to_vec())
        .collect();
    let firsts: Vec<i64> = batches.iter().map(|b| b[0]).collect();
    assert_eq!(firsts, [0, 12, 20, 28]);
    assert_eq!(map_stage(&ctx, "map").skipped_errors, 6);

    // A `fail` parse then a `skip` decode: the malformed example fails the pass.
    let err = strict_parse::dataset(&strict_parse::Params { files })
        .unwrap()
        .stream()
        .unwrap()
        .find_map(|r| r.err())
        .expect("the parse fails")
        .to_string();
    assert!(err.contains("record 4"), "{err}");
}
