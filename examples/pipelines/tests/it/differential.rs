//! Differential tests: each compiled example pipeline (`examples/bench/*.pipe` and the
//! corpus's `eval`) yields exactly the elements of the same pipeline built by hand with the
//! runtime API, and of a direct computation over the records (read with the TFRecord reader,
//! decoded with prost), on 1, 2 and 4 cores.
//!
//! Pipelines whose interleave is non-deterministic are compared as multisets of rows (each
//! row: its label and its feature's values as bits, so floats compare bit for bit); the
//! others in order, batch for batch. Then the error paths of generated pipelines: a corrupt
//! record, a glob that matches nothing, a missing or malformed feature.
//!
//! The datasets are small (`sluice::synth`, in a temporary directory), so the tests are
//! fast in debug builds; nothing here depends on timing.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use prost::Message;
use sluice::example::parse::{Columns, DType, ExampleParser, FeatureSpec, ParseSpec};
use sluice::example::view::{ExampleView, FeatureView};
use sluice::example::{Example, Feature};
use sluice::runtime::BoxError;
use sluice::runtime::image::decode_resize_normalize;
use sluice::runtime::stage::{Buffer, Dataset, Parallelism, Record, RuntimeOptions, files, tfrecords};
use sluice::synth::{GenOptions, Kind, RecordMaker};
use sluice::tfrecord::{Compression, ReaderOptions};
use sluice_examples::{augment, corpus, image_raw, jpeg, parse_tabular, read, shuffle_tabular};

/// The thread counts every pipeline runs with.
const CORES: [usize; 3] = [1, 2, 4];

/// The normalization of `jpeg.pipe` (ImageNet's).
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

fn options(cores: usize) -> RuntimeOptions {
    RuntimeOptions { cores: Some(cores), memory_budget: Some(64 << 20) }
}

// ---- data ----

/// A synthetic dataset in a temporary directory.
struct Data {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
    records: u64,
    shards: u32,
}

impl Data {
    /// `records` records of `kind` in `shards` files.
    fn new(kind: Kind, records: u64, shards: u32) -> Data {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let opts = GenOptions {
            kind,
            records,
            shards,
            out: dir.path().to_path_buf(),
            seed: 3,
            compression: Compression::None,
            threads: 1,
        };
        let summary = sluice::synth::generate(&opts, &|_| {}).expect("synthetic data");
        Data { dir, files: summary.files, records, shards }
    }

    /// The glob of its files.
    fn glob(&self) -> String {
        format!("{}/*.tfrecord", self.dir.path().display())
    }

    /// Every record, file by file, each file in order: read with the TFRecord reader.
    fn records(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for path in &self.files {
            let mut reader = sluice::tfrecord::open(path, &ReaderOptions::default()).expect("open");
            while let Some(r) = reader.next_owned().expect("a valid record") {
                out.push(r);
            }
        }
        assert_eq!(out.len() as u64, self.records);
        out
    }

    /// The shard holding the record at `index` of [`records`](Data::records).
    fn shard_of(&self, index: usize) -> u32 {
        (0..self.shards)
            .find(|&k| sluice::synth::shard_range(self.records, self.shards, k).contains(&(index as u64)))
            .expect("an index within the dataset")
    }
}

/// `Params::from_args` pairs.
fn args(set: &[(&str, &str)]) -> Vec<(String, String)> {
    set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Every element of one pass with `cores` cores; a failure names the pipeline.
fn collect<D: Dataset>(what: &str, ds: &D, cores: usize) -> Vec<D::Item> {
    ds.stream_with(&options(cores))
        .and_then(|s| s.collect::<sluice::Result<Vec<_>>>())
        .unwrap_or_else(|e| panic!("{what} on {cores} cores failed: {e}"))
}

// ---- the direct computation: records decoded with prost ----

fn example(record: &[u8]) -> Example {
    Example::decode_record(record).expect("a tf.train.Example")
}

fn floats(e: &Example, name: &str) -> Vec<f32> {
    e.feature(name).and_then(Feature::as_floats).expect("a float feature").to_vec()
}

fn int64(e: &Example, name: &str) -> i64 {
    match e.feature(name).and_then(Feature::as_int64s) {
        Some([v]) => *v,
        other => panic!("feature `{name}`: expected one int64, found {other:?}"),
    }
}

fn bytes(e: &Example, name: &str) -> Vec<u8> {
    match e.feature(name).and_then(Feature::as_bytes) {
        Some([v]) => v.clone(),
        _ => panic!("feature `{name}`: expected one bytes value"),
    }
}

// ---- rows ----

/// One row of a batch, comparable bit for bit: its label and its feature's values as bits.
type Row = (i64, Vec<u32>);

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// The rows of a batch: `values` holds the same number of values for each label.
fn rows(values: &[f32], labels: &[i64]) -> Vec<Row> {
    if labels.is_empty() {
        assert!(values.is_empty(), "values without labels");
        return Vec::new();
    }
    assert_eq!(values.len() % labels.len(), 0, "{} values for {} labels", values.len(), labels.len());
    let per = values.len() / labels.len();
    values.chunks_exact(per).zip(labels).map(|(v, l)| (*l, bits(v))).collect()
}

/// Asserts that `actual` holds the rows of `expected` (sorted), in any order; a mismatch is
/// described by its first differing row and value, not printed whole.
fn assert_same_rows(what: &str, mut actual: Vec<Row>, expected: &[Row]) {
    actual.sort_unstable();
    assert_eq!(actual.len(), expected.len(), "{what}: number of rows");
    let Some(i) = (0..actual.len()).find(|&i| actual[i] != expected[i]) else { return };
    let ((la, va), (le, ve)) = (&actual[i], &expected[i]);
    let j = (0..va.len().min(ve.len())).find(|&j| va[j] != ve[j]);
    panic!(
        "{what}: sorted row {i} differs: label {la} vs {le} expected, {} vs {} values; first \
         differing value {j:?}: {:?} vs {:?} expected",
        va.len(),
        ve.len(),
        j.map(|j| f32::from_bits(va[j])),
        j.map(|j| f32::from_bits(ve[j])),
    );
}

/// Asserts that a batch stream of `total` rows was cut into batches of `size`, the last one
/// possibly shorter.
fn assert_batch_sizes(what: &str, sizes: &[usize], size: usize, total: usize) {
    let expected: Vec<usize> = (0..total.div_ceil(size)).map(|i| size.min(total - i * size)).collect();
    assert_eq!(sizes, expected, "{what}: batch sizes");
}

// ---- hand-built pipelines (the runtime API, as `src/cli/pipelines.rs` builds them) ----

/// `read.pipe`: every record, interleaving four files, non-deterministic order.
fn hand_read(glob: &str) -> impl Dataset<Item = Record> {
    tfrecords(files(glob).expect("files"), ReaderOptions::default(), 4)
        .num_parallel(Parallelism::Auto)
        .deterministic(false)
}

/// The parser of the tabular schema `{x: f32[16], label: i64}`.
fn tabular_parser() -> Arc<ExampleParser> {
    let spec = ParseSpec::new([
        FeatureSpec::fixed("x", DType::F32, [16]),
        FeatureSpec::fixed("label", DType::I64, []),
    ]);
    Arc::new(ExampleParser::new(spec).expect("a valid spec"))
}

/// Parses a chunk of records into columns.
fn parse_chunk(parser: &ExampleParser, records: &[Record]) -> Result<Columns, BoxError> {
    let mut cols = parser.columns();
    for (i, record) in records.iter().enumerate() {
        parser.parse_into(record, &mut cols).map_err(|e| format!("record {i} of the batch: {e}"))?;
    }
    Ok(cols)
}

/// `parse_tabular.pipe` (`shuffle`: `shuffle_tabular.pipe`, `shuffle(100000, seed: 1)` first).
fn hand_tabular(glob: &str, shuffle: bool) -> impl Dataset<Item = Columns> {
    let parser = tabular_parser();
    // Both variants must have one type: a shuffle buffer of 1 is the identity.
    let buffer = if shuffle { 100_000 } else { 1 };
    hand_read(glob)
        .shuffle(buffer, 1)
        .chunks(1024, false)
        .try_map(move |records: Vec<Record>| parse_chunk(&parser, &records))
        .num_parallel(Parallelism::Auto)
        .named("parse")
        .prefetch(Buffer::Auto)
}

/// The columns `x` and `label` of tabular columns.
fn tabular_columns(cols: &Columns) -> (&[f32], &[i64]) {
    let x = cols.column(0).and_then(|c| c.as_f32()).expect("x");
    let label = cols.column(1).and_then(|c| c.as_i64()).expect("label");
    (x, label)
}

/// The single `image` bytes value and `label` of a record.
fn image_and_label(record: &[u8]) -> Result<(&[u8], i64), BoxError> {
    let view = ExampleView::new(record);
    let image = match view.get("image")? {
        Some(FeatureView::Bytes(b)) if b.len() == 1 => b.iter().next().ok_or("feature `image`: no value")?,
        _ => return Err("feature `image`: expected one bytes value".into()),
    };
    let label = match view.get("label")? {
        Some(FeatureView::Int64s(v)) if v.len() == 1 => v.iter().next().ok_or("feature `label`: no value")?,
        _ => return Err("feature `label`: expected one int64 value".into()),
    };
    Ok((image, label))
}

/// A batch of images (`n` rows of HWC floats) and their labels.
type ImageBatch = (Vec<f32>, Vec<i64>);

/// Images of `per` floats a record, each written into its slot of the batch by `fill`.
fn image_batch(
    records: &[Record],
    per: usize,
    fill: impl Fn(&[u8], &mut [f32]) -> Result<(), BoxError>,
) -> Result<ImageBatch, BoxError> {
    let mut image = vec![0.0; records.len() * per];
    let mut label = Vec::with_capacity(records.len());
    for (record, slot) in records.iter().zip(image.chunks_exact_mut(per)) {
        let (bytes, l) = image_and_label(record)?;
        fill(bytes, slot)?;
        label.push(l);
    }
    Ok((image, label))
}

/// `image_raw.pipe`: raw 64×64×3 bytes → `f32 / 255`, batches of 256.
fn hand_image_raw(glob: &str) -> impl Dataset<Item = ImageBatch> {
    hand_read(glob)
        .chunks(256, false)
        .try_map(|records: Vec<Record>| {
            image_batch(&records, 64 * 64 * 3, |bytes, out| {
                if bytes.len() != out.len() {
                    return Err(format!("{} image bytes, expected {}", bytes.len(), out.len()).into());
                }
                for (o, b) in out.iter_mut().zip(bytes) {
                    *o = f32::from(*b) / 255.0;
                }
                Ok(())
            })
        })
        .num_parallel(Parallelism::Auto)
        .named("decode")
        .prefetch(1)
}

/// `jpeg.pipe`: decode → bilinear 112×112 → `(x / 255 - mean) / std`, fused, batches of 128.
fn hand_jpeg(glob: &str) -> impl Dataset<Item = ImageBatch> {
    hand_read(glob)
        .chunks(128, false)
        .try_map(|records: Vec<Record>| {
            image_batch(&records, 112 * 112 * 3, |bytes, out| {
                decode_resize_normalize(bytes, 112, 112, MEAN, STD, out).map_err(Into::into)
            })
        })
        .num_parallel(Parallelism::Auto)
        .named("decode")
        .prefetch(1)
}

/// The corpus's `eval`: sequential read, `take(limit)`, parse, `x * 2 + 1`, batches of 512
/// (the last one partial).
fn hand_eval(glob: &str, limit: u64) -> impl Dataset<Item = (Vec<f32>, Vec<i64>)> {
    let parser = tabular_parser();
    tfrecords(files(glob).expect("files"), ReaderOptions::default(), 1)
        .take(limit)
        .chunks(512, false)
        .try_map(move |records: Vec<Record>| -> Result<_, BoxError> {
            let cols = parse_chunk(&parser, &records)?;
            let (x, label) = tabular_columns(&cols);
            Ok((x.iter().map(|v| v * 2.0 + 1.0).collect(), label.to_vec()))
        })
}

// ---- read ----

#[test]
fn read_yields_every_record_like_the_hand_built_read() {
    let data = Data::new(Kind::Tabular, 20_000, 4);
    let mut expected = data.records();
    // Each file is read in order, whatever the interleaving: a record's position in its
    // file, by content.
    let position: HashMap<Vec<u8>, usize> =
        expected.iter().cloned().enumerate().map(|(i, r)| (r, i)).collect();
    expected.sort_unstable();
    let params = read::Params::from_args(&args(&[("files", &data.glob())])).expect("params");
    let generated = read::dataset(&params).expect("dataset");
    let hand = hand_read(&data.glob());
    for cores in CORES {
        let got = collect("read", &generated, cores);
        let mut last = vec![None::<usize>; data.shards as usize];
        for r in &got {
            let i = position[&r[..]];
            let k = data.shard_of(i) as usize;
            assert!(last[k] < Some(i), "read on {cores} cores: file {k} out of order at record {i}");
            last[k] = Some(i);
        }
        let mut got = got;
        got.sort_unstable();
        assert!(got == expected, "read on {cores} cores: not the records of the files");
        let mut by_hand = collect("hand-built read", &hand, cores);
        by_hand.sort_unstable();
        assert!(by_hand == got, "read on {cores} cores: not the hand-built read's records");
    }
}

// ---- parse_tabular, shuffle_tabular ----

/// Every record of a tabular dataset as a row, sorted.
fn tabular_rows(data: &Data) -> Vec<Row> {
    let mut rows: Vec<Row> = data
        .records()
        .iter()
        .map(|r| {
            let e = example(r);
            (int64(&e, "label"), bits(&floats(&e, "x")))
        })
        .collect();
    rows.sort_unstable();
    rows
}

/// The rows of a generated tabular batch stream, in stream order, and the batch sizes.
macro_rules! generated_tabular {
    ($what:expr, $ds:expr, $cores:expr) => {{
        let mut rows_ = Vec::new();
        let mut sizes = Vec::new();
        for b in collect($what, $ds, $cores) {
            let n = b.label.shape()[0];
            assert_eq!(b.x.shape(), [n, 16], "{}: shape of x", $what);
            assert_eq!(b.label.shape(), [n], "{}: shape of label", $what);
            rows_.extend(rows(b.x.as_slice(), b.label.as_slice()));
            sizes.push(n);
        }
        (rows_, sizes)
    }};
}

/// The rows of a hand-built tabular stream and its batch sizes.
fn hand_tabular_rows(ds: &impl Dataset<Item = Columns>, cores: usize) -> (Vec<Row>, Vec<usize>) {
    let mut out = Vec::new();
    let mut sizes = Vec::new();
    for cols in collect("hand-built tabular", ds, cores) {
        let (x, label) = tabular_columns(&cols);
        out.extend(rows(x, label));
        sizes.push(cols.rows());
    }
    (out, sizes)
}

#[test]
fn parse_tabular_matches_the_hand_built_pipeline() {
    let data = Data::new(Kind::Tabular, 20_000, 4);
    let expected = tabular_rows(&data);
    let params = parse_tabular::Params::from_args(&args(&[("files", &data.glob())])).expect("params");
    let generated = parse_tabular::dataset(&params).expect("dataset");
    let hand = hand_tabular(&data.glob(), false);
    for cores in CORES {
        let what = format!("parse_tabular on {cores} cores");
        let (got, sizes) = generated_tabular!(&what, &generated, cores);
        assert_batch_sizes(&what, &sizes, 1024, 20_000);
        assert_same_rows(&what, got, &expected);
        let (by_hand, hand_sizes) = hand_tabular_rows(&hand, cores);
        assert_eq!(hand_sizes, sizes, "{what}: batch sizes of the hand-built pipeline");
        assert_same_rows(&format!("hand-built {what}"), by_hand, &expected);
    }
}

#[test]
fn shuffle_tabular_matches_the_hand_built_pipeline_and_shuffles() {
    let data = Data::new(Kind::Tabular, 20_000, 4);
    let expected = tabular_rows(&data);
    // Each row's position in file order (x is 16 random normals: unique per record).
    let position: HashMap<Vec<u32>, usize> =
        data.records().iter().enumerate().map(|(i, r)| (bits(&floats(&example(r), "x")), i)).collect();
    assert_eq!(position.len(), 20_000, "the rows are distinct");
    let params = shuffle_tabular::Params::from_args(&args(&[("files", &data.glob())])).expect("params");
    let generated = shuffle_tabular::dataset(&params).expect("dataset");
    let hand = hand_tabular(&data.glob(), true);
    for cores in CORES {
        let what = format!("shuffle_tabular on {cores} cores");
        let (got, sizes) = generated_tabular!(&what, &generated, cores);
        assert_batch_sizes(&what, &sizes, 1024, 20_000);
        // Shuffled: in a random order about half of the neighbours ascend; read in file
        // order, or interleaved from four files, far more do (3 in 4 for the interleave).
        let order: Vec<usize> = got.iter().map(|(_, x)| position[x]).collect();
        let ascents = order.windows(2).filter(|w| w[0] < w[1]).count() as f64 / (order.len() - 1) as f64;
        assert!((0.45..0.55).contains(&ascents), "{what}: not shuffled: {ascents:.3} of neighbours ascend");
        // The first batch draws from the whole buffer, not just the first records read.
        let first_shards: BTreeSet<u32> = order[..1024].iter().map(|&i| data.shard_of(i)).collect();
        assert_eq!(first_shards.len(), 4, "{what}: the first batch holds records of every file");
        let max_first = order[..1024].iter().max().copied().unwrap_or(0);
        assert!(max_first > 15_000, "{what}: the first batch reaches into every file");
        assert_same_rows(&what, got, &expected);
        let (by_hand, hand_sizes) = hand_tabular_rows(&hand, cores);
        assert_eq!(hand_sizes, sizes, "{what}: batch sizes of the hand-built pipeline");
        assert_same_rows(&format!("hand-built {what}"), by_hand, &expected);
    }
}

// ---- image_raw ----

#[test]
fn image_raw_is_bytes_over_255_bit_exactly() {
    let data = Data::new(Kind::Image, 600, 4);
    let mut expected: Vec<Row> = data
        .records()
        .iter()
        .map(|r| {
            let e = example(r);
            let image: Vec<f32> = bytes(&e, "image").iter().map(|&b| f32::from(b) / 255.0).collect();
            assert_eq!(image.len(), 64 * 64 * 3);
            (int64(&e, "label"), bits(&image))
        })
        .collect();
    expected.sort_unstable();
    let params = image_raw::Params::from_args(&args(&[("files", &data.glob())])).expect("params");
    let generated = image_raw::dataset(&params).expect("dataset");
    let hand = hand_image_raw(&data.glob());
    for cores in CORES {
        let what = format!("image_raw on {cores} cores");
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        for b in collect(&what, &generated, cores) {
            let n = b.label.shape()[0];
            assert_eq!(b.image.shape(), [n, 64, 64, 3], "{what}: shape of image");
            got.extend(rows(b.image.as_slice(), b.label.as_slice()));
            sizes.push(n);
        }
        assert_batch_sizes(&what, &sizes, 256, 600);
        assert_same_rows(&what, got, &expected);
        let mut by_hand = Vec::new();
        for (image, label) in collect("hand-built image_raw", &hand, cores) {
            by_hand.extend(rows(&image, &label));
        }
        assert_same_rows(&format!("hand-built {what}"), by_hand, &expected);
    }
}

// ---- jpeg ----

#[test]
fn jpeg_matches_the_fused_decode_resize_normalize_bit_exactly() {
    let data = Data::new(Kind::Jpeg, 160, 4);
    let mut expected: Vec<Row> = data
        .records()
        .iter()
        .map(|r| {
            let e = example(r);
            let mut image = vec![0.0; 112 * 112 * 3];
            decode_resize_normalize(&bytes(&e, "image"), 112, 112, MEAN, STD, &mut image).expect("decode");
            (int64(&e, "label"), bits(&image))
        })
        .collect();
    expected.sort_unstable();
    let params = jpeg::Params::from_args(&args(&[("files", &data.glob())])).expect("params");
    let generated = jpeg::dataset(&params).expect("dataset");
    let hand = hand_jpeg(&data.glob());
    for cores in CORES {
        let what = format!("jpeg on {cores} cores");
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        for b in collect(&what, &generated, cores) {
            let n = b.label.shape()[0];
            assert_eq!(b.image.shape(), [n, 112, 112, 3], "{what}: shape of image");
            got.extend(rows(b.image.as_slice(), b.label.as_slice()));
            sizes.push(n);
        }
        assert_batch_sizes(&what, &sizes, 128, 160);
        assert_same_rows(&what, got, &expected);
        let mut by_hand = Vec::new();
        for (image, label) in collect("hand-built jpeg", &hand, cores) {
            by_hand.extend(rows(&image, &label));
        }
        assert_same_rows(&format!("hand-built {what}"), by_hand, &expected);
    }
}

// ---- the corpus's eval: in order ----

#[test]
fn eval_matches_the_hand_built_pipeline_in_order() {
    let data = Data::new(Kind::Tabular, 20_000, 4);
    let records = data.records();
    let glob = data.glob();
    // 7000 crosses a file boundary (5000 records a file), the default (10 000) ends on
    // one, 25 000 is past the end, 0 takes nothing.
    let limits = [(7000u64, Some("7000")), (10_000, None), (25_000, Some("25000")), (0, Some("0"))];
    for (limit, arg) in limits {
        let mut set = vec![("files", glob.as_str())];
        set.extend(arg.map(|v| ("limit", v)));
        let kept = (limit as usize).min(records.len());
        let params = corpus::eval::Params::from_args(&args(&set)).expect("params");
        assert_eq!(params.limit, limit);
        let generated = corpus::eval::dataset(&params).expect("dataset");
        let hand = hand_eval(&glob, limit);
        // Directly: the first `limit` records in file order, `x * 2 + 1`, 512 a batch.
        let direct: Vec<Row> = records[..kept]
            .iter()
            .map(|r| {
                let e = example(r);
                let x: Vec<f32> = floats(&e, "x").iter().map(|v| v * 2.0 + 1.0).collect();
                (int64(&e, "label"), bits(&x))
            })
            .collect();
        for cores in CORES {
            let what = format!("eval(limit {limit}) on {cores} cores");
            let got = collect(&what, &generated, cores);
            let by_hand = collect("hand-built eval", &hand, cores);
            assert_eq!(got.len(), kept.div_ceil(512), "{what}: number of batches");
            assert_eq!(by_hand.len(), got.len(), "{what}: number of batches of the hand-built");
            let mut all = Vec::new();
            for (i, (b, (x, label))) in got.iter().zip(&by_hand).enumerate() {
                let n = b.label.shape()[0];
                assert_eq!(n, 512.min(kept - 512 * i), "{what}: size of batch {i}");
                assert_eq!(b.x.shape(), [n, 16], "{what}: shape of x in batch {i}");
                assert_eq!(b.label.as_slice(), &label[..], "{what}: labels of batch {i}");
                assert!(
                    bits(b.x.as_slice()) == bits(x),
                    "{what}: x of batch {i} differs from the hand-built"
                );
                all.extend(rows(b.x.as_slice(), b.label.as_slice()));
            }
            assert_eq!(all.len(), direct.len(), "{what}: number of rows");
            if let Some(i) = (0..all.len()).find(|&i| all[i] != direct[i]) {
                panic!("{what}: row {i} differs from the records' x * 2 + 1 in file order");
            }
        }
    }
}

// ---- augment: deterministic whatever the thread count ----

/// A batch of `augment`, as bits.
#[derive(PartialEq)]
struct AugmentBatch {
    shape: Vec<usize>,
    image: Vec<u32>,
    label: Vec<u32>,
    weight: Vec<u32>,
}

fn run_augment(glob: &str, seed: &str, cores: usize) -> Vec<AugmentBatch> {
    let params = augment::Params::from_args(&args(&[("files", glob), ("seed", seed)])).expect("params");
    let ds = augment::dataset(&params).expect("dataset");
    collect("augment", &ds, cores)
        .into_iter()
        .map(|b| AugmentBatch {
            shape: b.image.shape().to_vec(),
            image: bits(b.image.as_slice()),
            label: bits(b.label.as_slice()),
            weight: bits(b.weight.as_slice()),
        })
        .collect()
}

/// The index of the first batch where two runs differ, and how.
fn first_difference(a: &[AugmentBatch], b: &[AugmentBatch]) -> Option<String> {
    if a.len() != b.len() {
        return Some(format!("{} batches vs {}", a.len(), b.len()));
    }
    let i = (0..a.len()).find(|&i| a[i] != b[i])?;
    let field = if a[i].shape != b[i].shape {
        "shape"
    } else if a[i].label != b[i].label {
        "label"
    } else if a[i].weight != b[i].weight {
        "weight"
    } else {
        "image"
    };
    Some(format!("batch {i} differs in {field}"))
}

#[test]
fn augment_is_deterministic_across_thread_counts() {
    let data = Data::new(Kind::Jpeg, 150, 3);
    let mut labels: Vec<i64> = data.records().iter().map(|r| int64(&example(r), "label")).collect();
    labels.sort_unstable();
    let reference = run_augment(&data.glob(), "7", 1);
    // 150 records, none filtered out (weight defaults to 1 → 1 * 2 - 1), 32 a batch.
    let sizes: Vec<usize> = reference.iter().map(|b| b.shape[0]).collect();
    assert_batch_sizes("augment", &sizes, 32, 150);
    let mut got_labels = Vec::new();
    for b in &reference {
        let n = b.shape[0];
        assert_eq!(b.shape, [n, 3, 32, 32], "augment: image shape (CHW)");
        assert_eq!(b.label.len(), n * 10);
        for one_hot in b.label.chunks_exact(10) {
            let ones: Vec<usize> = (0..10).filter(|&c| one_hot[c] == 1f32.to_bits()).collect();
            let zeros = one_hot.iter().filter(|&&v| v == 0f32.to_bits()).count();
            assert!(ones.len() == 1 && zeros == 9, "augment: label not one-hot: {one_hot:?}");
            got_labels.push(ones[0] as i64);
        }
        assert!(b.weight.iter().all(|&w| w == 1f32.to_bits()), "augment: weight is not 1 * 2 - 1");
        assert!(b.image.iter().all(|&v| f32::from_bits(v).is_finite()), "augment: non-finite pixels");
    }
    got_labels.sort_unstable();
    assert_eq!(got_labels, labels, "augment: the labels of the records");
    for cores in [1, 2, 4, 4] {
        let again = run_augment(&data.glob(), "7", cores);
        if let Some(d) = first_difference(&again, &reference) {
            panic!("augment on {cores} cores differs from 1 core: {d}");
        }
    }
    // Another seed: another shuffle and other crops and flips.
    let other = run_augment(&data.glob(), "8", 2);
    assert!(other[0].image != reference[0].image, "augment: the seed changes nothing");
}

// ---- error paths ----

/// The first error a generated pipeline reports, from `dataset()`, from starting the
/// stream or from a pull; `None` when the pass succeeds.
fn error_of<P, D: Dataset>(
    from_args: impl Fn(&[(String, String)]) -> Result<P, String>,
    dataset: impl Fn(&P) -> sluice::Result<D>,
    set: &[(&str, &str)],
    cores: usize,
) -> Option<String> {
    let params = from_args(&args(set)).expect("params");
    let ds = match dataset(&params) {
        Ok(ds) => ds,
        Err(e) => return Some(e.to_string()),
    };
    let stream = match ds.stream_with(&options(cores)) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    stream.filter_map(Result::err).map(|e| e.to_string()).next()
}

/// The byte offset and payload length of record `index` of an uncompressed TFRecord file.
fn record_extent(file: &[u8], index: usize) -> (usize, usize) {
    let mut offset = 0;
    let len = |offset: usize| {
        let b: [u8; 8] = file[offset..offset + 8].try_into().expect("8 bytes");
        u64::from_le_bytes(b) as usize
    };
    for _ in 0..index {
        offset += 12 + len(offset) + 4;
    }
    (offset, len(offset))
}

/// Asserts that a generated pipeline over `set` fails, on every thread count, with an error
/// whose message contains every one of `needles`.
fn assert_error<P, D: Dataset>(
    name: &str,
    from_args: impl Fn(&[(String, String)]) -> Result<P, String> + Copy,
    dataset: impl Fn(&P) -> sluice::Result<D> + Copy,
    set: &[(&str, &str)],
    needles: &[&str],
) {
    for cores in CORES {
        let e = error_of(from_args, dataset, set, cores)
            .unwrap_or_else(|| panic!("{name} on {cores} cores over {set:?}: no error"));
        for needle in needles {
            assert!(
                e.contains(needle),
                "{name} on {cores} cores over {set:?}: the error does not say `{needle}`: {e}"
            );
        }
    }
}

#[test]
fn a_corrupt_record_is_an_error_naming_the_file_and_record() {
    let data = Data::new(Kind::Tabular, 4000, 4);
    let path = &data.files[2];
    let mut file = std::fs::read(path).expect("read");
    let (offset, len) = record_extent(&file, 123);
    file[offset + 12 + len / 2] ^= 0x5a;
    std::fs::write(path, file).expect("write");
    let glob = data.glob();
    let set = [("files", glob.as_str())];
    let needles = [&*path.display().to_string(), "corrupt record 123 "];
    assert_error("read", read::Params::from_args, read::dataset, &set, &needles);
    assert_error("parse_tabular", parse_tabular::Params::from_args, parse_tabular::dataset, &set, &needles);
    let (from_args, dataset) = (shuffle_tabular::Params::from_args, shuffle_tabular::dataset);
    assert_error("shuffle_tabular", from_args, dataset, &set, &needles);
    assert_error("eval", corpus::eval::Params::from_args, corpus::eval::dataset, &set, &needles);
}

/// Asserts that a generated pipeline refuses a glob that matches nothing at `dataset()`,
/// with a message naming the glob.
fn assert_no_files<P, D: Dataset>(
    name: &str,
    from_args: impl Fn(&[(String, String)]) -> Result<P, String>,
    dataset: impl Fn(&P) -> sluice::Result<D>,
    glob: &str,
) {
    let params = from_args(&args(&[("files", glob)])).expect("params");
    match dataset(&params) {
        Ok(_) => panic!("{name}: dataset() accepts a glob matching nothing"),
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("no files match") && e.contains(glob), "{name}: an unclear error: {e}");
        }
    }
}

#[test]
fn a_glob_matching_no_file_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let glob = format!("{}/nothing-*.tfrecord", dir.path().display());
    assert_no_files("read", read::Params::from_args, read::dataset, &glob);
    assert_no_files("parse_tabular", parse_tabular::Params::from_args, parse_tabular::dataset, &glob);
    assert_no_files("shuffle_tabular", shuffle_tabular::Params::from_args, shuffle_tabular::dataset, &glob);
    assert_no_files("image_raw", image_raw::Params::from_args, image_raw::dataset, &glob);
    assert_no_files("jpeg", jpeg::Params::from_args, jpeg::dataset, &glob);
    assert_no_files("augment", augment::Params::from_args, augment::dataset, &glob);
    assert_no_files("eval", corpus::eval::Params::from_args, corpus::eval::dataset, &glob);
}

/// Writes `records` as a TFRecord file `name` in `dir`; returns its path.
fn write_file(dir: &Path, name: &str, records: impl IntoIterator<Item = Example>) -> String {
    let path = dir.join(name);
    let mut w = sluice::tfrecord::create(&path, Compression::None).expect("create");
    for e in records {
        w.write_record(&e.encode_to_vec()).expect("write");
    }
    w.finish().expect("finish");
    path.display().to_string()
}

/// Records `0..n` of `kind`, with `edit` applied to record 37.
fn records_with(kind: Kind, n: u64, edit: impl Fn(&mut Example)) -> Vec<Example> {
    let mut maker = RecordMaker::new(kind, 3);
    (0..n)
        .map(|id| {
            let mut e = maker.example(id);
            if id == 37 {
                edit(&mut e);
            }
            e
        })
        .collect()
}

/// An edit that removes the feature `name`.
fn remove(name: &'static str) -> impl Fn(&mut Example) {
    move |e| {
        e.features.as_mut().expect("features").feature.remove(name);
    }
}

#[test]
fn a_missing_or_malformed_feature_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let no_label =
        write_file(dir.path(), "no-label.tfrecord", records_with(Kind::Tabular, 100, remove("label")));
    let short_x = write_file(
        dir.path(),
        "short-x.tfrecord",
        records_with(Kind::Tabular, 100, |e| {
            let x = Feature::floats(vec![0.5; 15]);
            e.features.as_mut().expect("features").feature.insert("x".into(), x);
        }),
    );
    let no_image =
        write_file(dir.path(), "no-image.tfrecord", records_with(Kind::Image, 40, remove("image")));
    let no_jpeg = write_file(dir.path(), "no-jpeg.tfrecord", records_with(Kind::Jpeg, 40, remove("image")));
    // Record 37's raw image is 100 bytes, not 64 × 64 × 3 (decoded straight into the
    // batch column: the same `reshape` error as the statements one by one).
    let short_image = write_file(
        dir.path(),
        "short-image.tfrecord",
        records_with(Kind::Image, 40, |e| {
            let image = Feature::bytes(vec![vec![7u8; 100]]);
            e.features.as_mut().expect("features").feature.insert("image".into(), image);
        }),
    );
    let (label, x, image) = (["`label`"], ["`x`"], ["`image`"]);
    let set = |glob| [("files", glob)];

    let (tab_args, tab_ds) = (parse_tabular::Params::from_args, parse_tabular::dataset);
    let (shuf_args, shuf_ds) = (shuffle_tabular::Params::from_args, shuffle_tabular::dataset);
    let (eval_args, eval_ds) = (corpus::eval::Params::from_args, corpus::eval::dataset);
    assert_error("parse_tabular", tab_args, tab_ds, &set(&*no_label), &label);
    // Where the fused reader filled the batch, the error names the file and the record.
    assert_error("parse_tabular", tab_args, tab_ds, &set(&*no_label), &["no-label.tfrecord: record "]);
    assert_error(
        "image_raw",
        image_raw::Params::from_args,
        image_raw::dataset,
        &set(&*no_image),
        &["no-image.tfrecord: record "],
    );
    assert_error("shuffle_tabular", shuf_args, shuf_ds, &set(&*no_label), &label);
    assert_error("eval", eval_args, eval_ds, &set(&*no_label), &label);
    assert_error("parse_tabular", tab_args, tab_ds, &set(&*short_x), &x);
    assert_error("eval", eval_args, eval_ds, &set(&*short_x), &x);
    assert_error("image_raw", image_raw::Params::from_args, image_raw::dataset, &set(&*no_image), &image);
    assert_error(
        "image_raw",
        image_raw::Params::from_args,
        image_raw::dataset,
        &set(&*short_image),
        &["short-image.tfrecord: record 37", "reshape: 100 values do not fit the shape [64, 64, 3]"],
    );
    assert_error("jpeg", jpeg::Params::from_args, jpeg::dataset, &set(&*no_jpeg), &image);
    assert_error("augment", augment::Params::from_args, augment::dataset, &set(&*no_jpeg), &image);
}
