//! A batch's rows split across the pipeline's rayon pool (`runtime/src/stage/rows.rs`):
//! the generated `jpeg` and `image_raw` pipelines make the same batches, bit for bit and
//! in the same order, whether their readers' batches are made on one thread or split
//! across the threads the CPU budget has left over, and the split never takes more
//! threads than the budget.

use sluice::example::Feature;
use sluice::runtime::stage::{Ctx, Dataset, RuntimeOptions};
use sluice::synth::{GenOptions, Kind};
use sluice::tfrecord::Compression;
use sluice_examples::{image_raw, jpeg, parse_tabular};

/// `records` records of `kind` in one file: one reader of the four reads them all, in
/// order, so the batches come in file order whatever the thread count.
fn one_file(kind: Kind, records: u64) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let opts = GenOptions {
        kind,
        records,
        shards: 1,
        out: dir.path().to_path_buf(),
        seed: 11,
        compression: Compression::None,
        threads: 1,
    };
    sluice::synth::generate(&opts, &|_| {}).expect("synthetic data");
    let glob = format!("{}/*.tfrecord", dir.path().display());
    (dir, glob)
}

/// One pass on a budget of `cores` threads: every batch, the batches split, the most
/// threads the budget ever had taken, and its limit.
fn pass<D: Dataset>(ds: &D, cores: usize) -> (Vec<D::Item>, u64, usize) {
    let ctx = Ctx::new(&RuntimeOptions { cores: Some(cores), memory_budget: Some(256 << 20) });
    let items = ds.stream_in(&ctx).and_then(|s| s.collect::<sluice::Result<Vec<_>>>()).expect("a pass");
    let splits = ctx.report().stages.iter().map(|s| s.splits).sum();
    (items, splits, ctx.threads().peak())
}

#[test]
fn jpeg_batches_split_across_the_budgets_spare_threads_are_bit_identical() {
    let (_dir, glob) = one_file(Kind::Jpeg, 700);
    let args = vec![("files".to_string(), glob)];
    let ds = jpeg::dataset(&jpeg::Params::from_args(&args).expect("params")).expect("dataset");
    let (alone, splits, peak) = pass(&ds, 1);
    assert_eq!(splits, 0, "a budget of one thread never splits");
    assert_eq!(peak, 1);
    assert_eq!(alone.iter().map(|b| b.label.shape()[0]).collect::<Vec<_>>(), [128, 128, 128, 128, 128, 60]);
    for cores in [6, 9] {
        let (split, splits, peak) = pass(&ds, cores);
        // Four readers (`cycle: 4`) hold four threads; the full batches take the rest
        // (not the first ones, made while the pass is still being built: the budget
        // grants nothing more until every stage has its first workers).
        assert!(splits >= 2, "{cores} cores: the full batches were split ({splits})");
        assert!(peak <= cores, "{cores} cores: {peak} threads taken at once");
        assert_eq!(split.len(), alone.len());
        for (k, (a, b)) in alone.iter().zip(&split).enumerate() {
            assert_eq!(a.label.as_slice(), b.label.as_slice(), "{cores} cores: labels of batch {k}");
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(a.image.as_slice()) == bits(b.image.as_slice()),
                "{cores} cores: pixels of batch {k}"
            );
        }
    }
}

#[test]
fn image_raw_batches_split_are_bit_identical() {
    let (_dir, glob) = one_file(Kind::Image, 1500);
    let args = vec![("files".to_string(), glob)];
    let ds = image_raw::dataset(&image_raw::Params::from_args(&args).expect("params")).expect("dataset");
    let (alone, splits, _) = pass(&ds, 1);
    assert_eq!(splits, 0);
    let (split, splits, peak) = pass(&ds, 8);
    assert!(splits >= 2, "the full batches were split ({splits})");
    assert!(peak <= 8, "{peak} threads taken at once");
    assert_eq!(split.len(), alone.len());
    for (a, b) in alone.iter().zip(&split) {
        assert_eq!(a.label.as_slice(), b.label.as_slice());
        assert!(a.image.as_slice().iter().zip(b.image.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert_eq!(a.image.shape(), b.image.shape());
    }
}

#[test]
fn parse_example_batches_split_are_bit_identical() {
    // `tfrecords -> batch(1024) -> map { parse_example() }`: the generated parser's rows
    // split across the pool, each part learning its own record layouts.
    let (_dir, glob) = one_file(Kind::Tabular, 9000);
    let args = vec![("files".to_string(), glob)];
    let ds =
        parse_tabular::dataset(&parse_tabular::Params::from_args(&args).expect("params")).expect("dataset");
    let (alone, splits, _) = pass(&ds, 1);
    assert_eq!(splits, 0);
    let (split, splits, peak) = pass(&ds, 7);
    assert!(splits >= 2, "the full batches were split ({splits})");
    assert!(peak <= 7, "{peak} threads taken at once");
    assert_eq!(split.len(), alone.len());
    for (a, b) in alone.iter().zip(&split) {
        assert_eq!(a.label.as_slice(), b.label.as_slice());
        assert_eq!(a.x.shape(), b.x.shape());
        assert!(a.x.as_slice().iter().zip(b.x.as_slice()).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

#[test]
fn a_failing_row_of_a_split_batch_names_its_record() {
    // Record 200 of the one file is cut short: its image has too few bytes for the
    // declared shape. Split or not, the error names that record.
    let (dir, glob) = one_file(Kind::Image, 300);
    let file = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    let mut records = Vec::new();
    let mut reader = sluice::tfrecord::open(&file, &Default::default()).unwrap();
    while let Some(r) = reader.next_owned().unwrap() {
        records.push(r);
    }
    let bad = sluice::example::Example::decode_record(&records[200]).unwrap();
    let label = bad.feature("label").cloned().unwrap();
    let short = [("image".to_string(), Feature::bytes([vec![1u8; 10]])), ("label".to_string(), label)];
    records[200] = sluice::example::Example::from_features(short).encode_record();
    let mut w = sluice::tfrecord::create(&file, Compression::None).unwrap();
    for r in &records {
        w.write_record(r).unwrap();
    }
    w.finish().unwrap();
    let args = vec![("files".to_string(), glob)];
    let ds = image_raw::dataset(&image_raw::Params::from_args(&args).expect("params")).expect("dataset");
    for cores in [1, 8] {
        let ctx = Ctx::new(&RuntimeOptions { cores: Some(cores), memory_budget: Some(256 << 20) });
        let err =
            ds.stream_in(&ctx).and_then(|s| s.collect::<sluice::Result<Vec<_>>>()).unwrap_err().to_string();
        assert!(err.contains("record 200"), "{cores} cores: {err}");
    }
}

/// The engine's batches of `examples/bench/NAME.pipe` over `glob` on a budget of `cores`,
/// and the batches split.
fn engine_pass(name: &str, glob: &str, cores: usize) -> (Vec<sluice_engine::Columns>, u64) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = std::fs::read_to_string(root.join(format!("examples/bench/{name}.pipe"))).unwrap();
    let all = sluice_compiler::compile(&source).pipelines;
    let p = all.iter().find(|p| p.name() == name).unwrap();
    sluice_engine::check_in(&all, p).unwrap();
    let params = sluice_engine::params_in(&all, p, &[("files".to_string(), glob.to_string())]).unwrap();
    let ds = sluice_engine::dataset_in(&all, p, &params).unwrap();
    let ctx = Ctx::new(&RuntimeOptions { cores: Some(cores), memory_budget: Some(256 << 20) });
    let items = ds.stream_in(&ctx).and_then(|s| s.collect::<sluice::Result<Vec<_>>>()).expect("a pass");
    let batches = items
        .into_iter()
        .map(|i| match i {
            sluice_engine::Item::Batch(c) => c,
            other => panic!("not a batch: {other:?}"),
        })
        .collect();
    (batches, ctx.report().stages.iter().map(|s| s.splits).sum())
}

#[test]
fn the_engine_splits_a_batchs_rows_as_the_compiled_runner_does() {
    let (_dir, glob) = one_file(Kind::Jpeg, 700);
    let (alone, splits) = engine_pass("jpeg", &glob, 1);
    assert_eq!(splits, 0);
    let (split, splits) = engine_pass("jpeg", &glob, 8);
    assert!(splits >= 2, "the full batches were split ({splits})");
    assert_eq!(alone.len(), 6);
    for (k, (a, b)) in alone.iter().zip(&split).enumerate() {
        assert_eq!((&a.names, a.rows), (&b.names, b.rows), "batch {k}");
        for (x, y) in a.columns.iter().zip(&b.columns) {
            assert_eq!(x.shape, y.shape, "batch {k}");
            match (&x.data, &y.data) {
                (sluice_engine::Data::F32(x), sluice_engine::Data::F32(y)) => {
                    assert!(x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()), "batch {k}: pixels")
                }
                (x, y) => assert_eq!(x, y, "batch {k}"),
            }
        }
    }
    // And the compiled runner's batches, split, are the engine's.
    let args = vec![("files".to_string(), glob)];
    let ds = jpeg::dataset(&jpeg::Params::from_args(&args).expect("params")).expect("dataset");
    let (compiled, _, _) = pass(&ds, 8);
    for (c, e) in compiled.iter().zip(&split) {
        let sluice_engine::Data::F32(pixels) = &e.columns[0].data else { panic!("f32 pixels") };
        assert!(c.image.as_slice().iter().zip(pixels).all(|(p, q)| p.to_bits() == q.to_bits()));
    }
}

#[test]
fn the_engines_example_parser_splits_a_batchs_rows() {
    let (_dir, glob) = one_file(Kind::Tabular, 9000);
    let (alone, splits) = engine_pass("parse_tabular", &glob, 1);
    assert_eq!(splits, 0);
    let (split, splits) = engine_pass("parse_tabular", &glob, 7);
    assert!(splits >= 2, "the full batches were split ({splits})");
    assert_eq!(alone.len(), 9);
    assert!(alone == split, "the same batches, split or not");
}
