//! `sluice bench pipeline`: the pipelines of the tf.data peer benchmark
//! (`bench/tfdata_bench.py`), built by hand with the runtime API, each computing
//! what its tf.data counterpart computes. The same protocol as the peer: read every file
//! once (page cache), warm up on a separate pass, then time one full epoch; peak RSS is
//! the process's whole life. The data directory may be a URL prefix
//! (`s3://bucket/data`): the objects are then streamed by ranged GETs in every pass, with
//! nothing to warm.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use sluice::__private::runner::{self, peak_rss_bytes};
use sluice_runtime::Result;
use sluice_runtime::stage::{Dataset, RuntimeOptions, StatsReport, files};

use super::Failure;

#[derive(Debug, Args)]
pub struct PipelineArgs {
    /// read, parse_tabular, shuffle_tabular, map_per_record, image_raw, jpeg; or memory (the bounded-memory
    /// check: interleave → parse → shuffle(10000) → batch(64) over image records).
    name: String,
    /// Directory of `*.tfrecord` shards (made by `sluice gen`), or a URL prefix of them.
    data: PathBuf,
    /// Batches (or records, for `read`) pulled before timing.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// RAM (MiB) that AUTOTUNE may spend on buffers (`RuntimeOptions::memory_budget`).
    #[arg(long, default_value_t = 32)]
    memory_budget_mb: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Also write the first batch's features (`PATH`, f32 little-endian: `x` or `image`)
    /// and labels (`PATH.labels`, i64 little-endian), to compare with tf.data's output.
    #[arg(long)]
    dump: Option<PathBuf>,
}

/// A batch whose features and labels can be dumped for comparison with tf.data.
trait Dump {
    fn features(&self) -> &[f32];
    fn labels(&self) -> &[i64];
}

impl Dump for sluice_runtime::example::parse::Columns {
    fn features(&self) -> &[f32] {
        self.column(0).and_then(|c| c.as_f32()).unwrap_or_default()
    }
    fn labels(&self) -> &[i64] {
        self.column(1).and_then(|c| c.as_i64()).unwrap_or_default()
    }
}

impl Dump for build::ImageBatch {
    fn features(&self) -> &[f32] {
        &self.image
    }
    fn labels(&self) -> &[i64] {
        &self.label
    }
}

/// Writes the first batch of a fresh pass to `path` and `path.labels`.
fn dump<D: Dataset>(ds: &D, options: &RuntimeOptions, path: &std::path::Path) -> Result<(), Failure>
where
    D::Item: Dump,
{
    let first = ds.stream_with(options)?.next().transpose()?;
    let Some(batch) = first else { return Err(Failure::Usage("the pipeline produced no batch".into())) };
    let features: Vec<u8> = batch.features().iter().flat_map(|v| v.to_le_bytes()).collect();
    let labels: Vec<u8> = batch.labels().iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut labels_path = path.as_os_str().to_owned();
    labels_path.push(".labels");
    std::fs::write(path, features).map_err(|e| Failure::Data(sluice_runtime::Error::io(path, e).into()))?;
    std::fs::write(&labels_path, labels)
        .map_err(|e| Failure::Data(sluice_runtime::Error::io(&labels_path, e).into()))
}

/// What one timed epoch gave.
struct Epoch {
    records: u64,
    seconds: f64,
    report: StatsReport,
}

/// Pulls every element of a pass, counting records with `count`.
fn run_epoch<D: Dataset>(
    ds: &D,
    options: &RuntimeOptions,
    warmup: usize,
    count: impl Fn(&D::Item) -> u64,
) -> Result<Epoch> {
    for x in ds.stream_with(options)?.take(warmup) {
        x?;
    }
    let mut stream = ds.stream_with(options)?;
    let start = Instant::now();
    let mut records = 0;
    for x in stream.by_ref() {
        records += count(&x?);
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Epoch { records, seconds, report: stream.report() })
}

pub fn run(args: PipelineArgs) -> Result<ExitCode, Failure> {
    let dir = args.data.to_string_lossy();
    let pattern = format!("{}/*.tfrecord*", dir.trim_end_matches('/'));
    let file_list = files(&pattern).map_err(|e| Failure::Usage(e.to_string()))?;
    let mut file_bytes = 0u64;
    for f in file_list.paths() {
        file_bytes += warm(f).map_err(|e| Failure::Data(e.into()))?;
    }
    let options = RuntimeOptions { memory_budget: Some(args.memory_budget_mb << 20), cores: None };
    if let Some(path) = &args.dump {
        match args.name.as_str() {
            "parse_tabular" => dump(&build::parse_tabular(file_list.clone(), false)?, &options, path)?,
            "image_raw" => dump(&build::image_raw(file_list.clone()), &options, path)?,
            "jpeg" => dump(&build::jpeg(file_list.clone()), &options, path)?,
            other => {
                return Err(Failure::Usage(format!(
                    "--dump works for parse_tabular, image_raw and jpeg, not `{other}`"
                )));
            }
        }
    }
    let cpu0 = cpu_seconds();
    let epoch = match args.name.as_str() {
        "read" => run_epoch(&build::read(file_list), &options, args.warmup * 1024, |_| 1)?,
        "parse_tabular" => {
            run_epoch(&build::parse_tabular(file_list, false)?, &options, args.warmup, |b| b.rows() as u64)?
        }
        "shuffle_tabular" => {
            run_epoch(&build::parse_tabular(file_list, true)?, &options, args.warmup, |b| b.rows() as u64)?
        }
        "map_per_record" => {
            run_epoch(&build::map_per_record(file_list)?, &options, args.warmup * 1024, |b| b.rows() as u64)?
        }
        "image_raw" => run_epoch(&build::image_raw(file_list), &options, args.warmup, |b| b.shape[0] as u64)?,
        "jpeg" => run_epoch(&build::jpeg(file_list), &options, args.warmup, |b| b.shape[0] as u64)?,
        "memory" => run_epoch(&build::memory(file_list), &options, args.warmup, |b| b.0.len() as u64)?,
        other => {
            return Err(Failure::Usage(format!(
                "unknown pipeline `{other}` (expected read, parse_tabular, shuffle_tabular, map_per_record, image_raw or jpeg)"
            )));
        }
    };
    let cpu = cpu_seconds() - cpu0;
    let peak_rss_mb = peak_rss_bytes() as f64 / f64::from(1u32 << 20);
    let rps = epoch.records as f64 / epoch.seconds;
    if args.json {
        let stages = runner::stages_json(&epoch.report);
        let v = serde_json::json!({
            "pipeline": args.name,
            "records": epoch.records,
            "wall_s": epoch.seconds,
            "records_per_s": rps,
            "mb_per_s": file_bytes as f64 / 1e6 / epoch.seconds,
            "peak_rss_mb": peak_rss_mb,
            "cpu_util": cpu / epoch.seconds,
            "stages": stages,
            "bottleneck": epoch.report.bottleneck().map(|b| b.name.clone()),
        });
        outln!("{v}");
    } else {
        outln!(
            "{}: {} records in {:.2} s: {:.0} records/s, {:.1} MB/s, peak RSS {:.0} MB, CPU {:.2} cores",
            args.name,
            epoch.records,
            epoch.seconds,
            rps,
            file_bytes as f64 / 1e6 / epoch.seconds,
            peak_rss_mb,
            cpu / epoch.seconds
        );
        outln!("{}", epoch.report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads a file once so the timed epoch reads from the page cache; returns its size. An
/// object is not read (nothing caches it): its size comes from a `HEAD`.
fn warm(path: &std::path::Path) -> std::io::Result<u64> {
    if sluice_runtime::storage::is_url(path) {
        return sluice_runtime::storage::size(path);
    }
    let mut f = std::fs::File::open(path)?;
    std::io::copy(&mut f, &mut std::io::sink())
}

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// The pipelines.
mod build {
    use std::sync::Arc;

    use sluice_runtime::column::{BufferPool, Dense, PooledVec, Ragged};

    /// Idle batch buffers an image pipeline keeps for reuse: what is in flight at once
    /// (the map's window, the prefetch queue, the consumer's batch).
    const POOLED_BATCHES: usize = 6;
    use sluice_runtime::example::parse::{Columns, DType, ExampleParser, FeatureSpec, ParseSpec};
    use sluice_runtime::example::view::{ExampleView, FeatureView};
    use sluice_runtime::image::decode_resize_normalize;
    use sluice_runtime::stage::{Buffer, Dataset, Element, Files, Parallelism, Record, tfrecords};
    use sluice_runtime::tfrecord::ReaderOptions;
    use sluice_runtime::{BoxError, Result};

    /// `read`: `interleave(TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE,
    /// deterministic=False)`: every record, checksums verified.
    pub fn read(files: Files) -> impl Dataset<Item = Record> {
        tfrecords(files, ReaderOptions::default(), 4).num_parallel(Parallelism::Auto).deterministic(false)
    }

    /// `map_per_record`: `read.map(parse_single_example({x: [16] f32, label: [] i64}),
    /// AUTOTUNE)`: one record per element, through the parallel map's hand-over.
    pub fn map_per_record(files: Files) -> Result<impl Dataset<Item = Columns>> {
        let spec = ParseSpec::new([
            FeatureSpec::fixed("x", DType::F32, [16]),
            FeatureSpec::fixed("label", DType::I64, []),
        ]);
        let parser =
            Arc::new(ExampleParser::new(spec).map_err(|e| sluice_runtime::Error::Invalid(e.to_string()))?);
        Ok(read(files)
            .try_map(move |record: Record| -> std::result::Result<Columns, BoxError> {
                let mut cols = parser.columns();
                parser.parse_into(&record, &mut cols).map_err(|e| record.origin().name_in(e))?;
                Ok(cols)
            })
            .num_parallel(Parallelism::Auto)
            .named("parse"))
    }

    /// `parse_tabular`: `read.batch(1024).map(parse_example({x: [16] f32, label: [] i64}),
    /// AUTOTUNE).prefetch(AUTOTUNE)`; with `shuffle`, `shuffle_tabular`:
    /// `read.shuffle(100000, seed=1)` before the batch.
    pub fn parse_tabular(files: Files, shuffle: bool) -> Result<impl Dataset<Item = Columns>> {
        let spec = ParseSpec::new([
            FeatureSpec::fixed("x", DType::F32, [16]),
            FeatureSpec::fixed("label", DType::I64, []),
        ]);
        let parser =
            Arc::new(ExampleParser::new(spec).map_err(|e| sluice_runtime::Error::Invalid(e.to_string()))?);
        let parse = move |records: Vec<Record>| -> std::result::Result<Columns, BoxError> {
            let mut cols = parser.columns();
            for record in &records {
                parser.parse_into(record, &mut cols).map_err(|e| record.origin().name_in(e))?;
            }
            Ok(cols)
        };
        // Both variants must have one type: a shuffle buffer of 1 is the identity.
        let buffer = if shuffle { 100_000 } else { 1 };
        Ok(read(files)
            .shuffle(buffer, 1)
            .chunks(1024, false)
            .try_map(parse)
            .num_parallel(Parallelism::Auto)
            .named("parse")
            .prefetch(Buffer::Auto))
    }

    /// A batch of images: one contiguous `[n, h, w, c]` float buffer (from a pool, so
    /// batch memory is reused rather than reallocated) and the labels.
    #[derive(Debug)]
    pub struct ImageBatch {
        /// `[n, h, w, c]`.
        pub shape: [usize; 4],
        /// The pixels, HWC per image.
        pub image: PooledVec<f32>,
        /// The labels.
        pub label: Vec<i64>,
    }

    impl Element for ImageBatch {
        fn byte_size(&self) -> usize {
            size_of::<Self>() + self.image.byte_size() + self.label.len() * 8
        }
    }

    /// The single `image` bytes value and `label` of a record.
    fn image_and_label(record: &[u8]) -> std::result::Result<(&[u8], i64), BoxError> {
        let view = ExampleView::new(record);
        let image = match view.get("image")? {
            Some(FeatureView::Bytes(b)) if b.len() == 1 => {
                b.iter().next().ok_or("feature `image`: no value")?
            }
            _ => return Err("feature `image`: expected one bytes value".into()),
        };
        let label = match view.get("label")? {
            Some(FeatureView::Int64s(v)) if v.len() == 1 => {
                v.iter().next().ok_or("feature `label`: no value")?
            }
            _ => return Err("feature `label`: expected one int64 value".into()),
        };
        Ok((image, label))
    }

    /// Turns a batch of records into an [`ImageBatch`] of `h × w × 3` images, writing
    /// each with `fill(record image bytes, output slot)`. (The buffer is zeroed once by
    /// the allocator; `image_raw` uses [`image_batch_extend`], which writes it only once.)
    fn image_batch(
        pool: &BufferPool<f32>,
        records: &[Record],
        (h, w): (usize, usize),
        fill: impl Fn(&[u8], &mut [f32]) -> std::result::Result<(), BoxError>,
    ) -> std::result::Result<ImageBatch, BoxError> {
        let n = records.len();
        let per = h * w * 3;
        let mut image = pool.take(n * per);
        image.resize(n * per, 0.0);
        let mut label = Vec::with_capacity(n);
        for (i, slot) in image.chunks_exact_mut(per).enumerate() {
            let origin = records[i].origin();
            let (bytes, l) = image_and_label(&records[i]).map_err(|e| origin.name_in(e))?;
            fill(bytes, slot).map_err(|e| origin.name_in(e))?;
            label.push(l);
        }
        Ok(ImageBatch { shape: [n, h, w, 3], image, label })
    }

    /// Like [`image_batch`] for a per-pixel conversion of raw bytes: appends each image's
    /// pixels, so the batch buffer is written once, never zero-filled first.
    fn image_batch_extend(
        pool: &BufferPool<f32>,
        records: &[Record],
        (h, w): (usize, usize),
    ) -> std::result::Result<ImageBatch, BoxError> {
        let n = records.len();
        let per = h * w * 3;
        let mut image = pool.take(n * per);
        let mut label = Vec::with_capacity(n);
        for record in records {
            let (bytes, l) = image_and_label(record).map_err(|e| record.origin().name_in(e))?;
            if bytes.len() != per {
                let e = format!("feature `image` has {} bytes, expected {per}", bytes.len());
                return Err(record.origin().name_in(e).into());
            }
            let slot = &mut image.spare_capacity_mut()[..per];
            for (o, b) in slot.iter_mut().zip(bytes) {
                o.write(f32::from(*b) * (1.0 / 255.0));
            }
            let len = image.len();
            // SAFETY: `bytes.len() == per` (checked above), so the loop initialised all
            // `per` floats after `len`, within the capacity reserved for the batch.
            unsafe { image.set_len(len + per) };
            label.push(l);
        }
        Ok(ImageBatch { shape: [n, h, w, 3], image, label })
    }

    /// `image_raw`: `read.map(parse_single_example → decode_raw uint8 → reshape
    /// [64,64,3] → cast float32 / 255).batch(256).prefetch`, with the per-record work done
    /// straight into the batch buffer (map+batch fusion).
    pub fn image_raw(files: Files) -> impl Dataset<Item = ImageBatch> {
        let pool = BufferPool::new(POOLED_BATCHES);
        read(files)
            .chunks(256, false)
            .try_map(move |records: Vec<Record>| image_batch_extend(&pool, &records, (64, 64)))
            .num_parallel(Parallelism::Auto)
            .named("decode")
            // A batch is 12.5 MB, and the parallel map already keeps a finished one ahead.
            .prefetch(1)
    }

    /// `memory`: the bounded-memory check of the test suite: interleave → parse (label and
    /// image bytes of each record) → shuffle(10 000) → batch(64). Its peak RSS is bounded by
    /// the shuffle buffer and the stages' queues, whatever the size of the data.
    pub fn memory(files: Files) -> impl Dataset<Item = (Dense<i64>, Ragged<u8>)> {
        read(files)
            .try_map(|record: Record| {
                let (image, label) = image_and_label(&record).map_err(|e| record.origin().name_in(e))?;
                Ok::<_, BoxError>((label, image.to_vec()))
            })
            .num_parallel(Parallelism::Auto)
            .named("parse")
            .shuffle(10_000, 7)
            .batch(64, false)
    }

    /// `jpeg`: `read.map(parse_single_example → decode_jpeg(channels=3) →
    /// resize [112,112] bilinear → (x/255 - mean) / std, AUTOTUNE).batch(128).prefetch`.
    pub fn jpeg(files: Files) -> impl Dataset<Item = ImageBatch> {
        const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
        const STD: [f32; 3] = [0.229, 0.224, 0.225];
        let pool = BufferPool::new(POOLED_BATCHES);
        read(files)
            .chunks(128, false)
            .try_map(move |records: Vec<Record>| {
                image_batch(&pool, &records, (112, 112), |bytes, out| {
                    decode_resize_normalize(bytes, 112, 112, MEAN, STD, out).map_err(Into::into)
                })
            })
            .num_parallel(Parallelism::Auto)
            .named("decode")
            // A batch is 19 MB, and the parallel map already keeps a finished one ahead:
            // a deeper queue would only hold memory.
            .prefetch(1)
    }
}
