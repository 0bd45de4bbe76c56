//! `sluice bench pipeline`: the pipelines of the tf.data peer benchmark
//! (`shared/bench/tfdata_bench.py`), built by hand with the runtime API, each computing
//! what its tf.data counterpart computes. The same protocol as the peer: read every file
//! once (page cache), warm up on a separate pass, then time one full epoch; peak RSS is
//! the process's whole life.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use sluice_runtime::Result;
use sluice_runtime::stage::{Dataset, StatsReport, files};

use super::Failure;

#[derive(Debug, Args)]
pub struct PipelineArgs {
    /// read, parse_tabular, shuffle_tabular, image_raw or jpeg.
    name: String,
    /// Directory of `*.tfrecord` shards (made by `sluice gen`).
    data: PathBuf,
    /// Batches (or records, for `read`) pulled before timing.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// What one timed epoch gave.
struct Epoch {
    records: u64,
    seconds: f64,
    report: StatsReport,
}

/// Pulls every element of a pass, counting records with `count`.
fn run_epoch<D: Dataset>(ds: &D, warmup: usize, count: impl Fn(&D::Item) -> u64) -> Result<Epoch> {
    for x in ds.stream()?.take(warmup) {
        x?;
    }
    let mut stream = ds.stream()?;
    let start = Instant::now();
    let mut records = 0;
    for x in stream.by_ref() {
        records += count(&x?);
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Epoch { records, seconds, report: stream.report() })
}

pub fn run(args: PipelineArgs) -> Result<ExitCode, Failure> {
    let pattern = format!("{}/*.tfrecord*", args.data.display());
    let file_list = files(&pattern).map_err(|e| Failure::Usage(e.to_string()))?;
    let mut file_bytes = 0u64;
    for f in file_list.paths() {
        file_bytes += warm(f).map_err(|e| Failure::Data(e.into()))?;
    }
    let cpu0 = cpu_seconds();
    let epoch = match args.name.as_str() {
        "read" => run_epoch(&build::read(file_list), args.warmup * 1024, |_| 1)?,
        other => {
            return Err(Failure::Usage(format!(
                "unknown pipeline `{other}` (expected read, parse_tabular, shuffle_tabular, image_raw or jpeg)"
            )));
        }
    };
    let cpu = cpu_seconds() - cpu0;
    let peak_rss_mb = peak_rss_bytes() as f64 / (1 << 20) as f64;
    let rps = epoch.records as f64 / epoch.seconds;
    if args.json {
        let stages: Vec<_> = epoch
            .report
            .stages
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name, "elements": s.elements, "bytes": s.bytes, "parallelism": s.parallelism,
                    "busy_s": s.busy.as_secs_f64(), "wait_input_s": s.wait_input.as_secs_f64(),
                    "wait_output_s": s.wait_output.as_secs_f64(),
                })
            })
            .collect();
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
        println!("{v}");
    } else {
        println!(
            "{}: {} records in {:.2} s: {:.0} records/s, {:.1} MB/s, peak RSS {:.0} MB, CPU {:.2} cores",
            args.name,
            epoch.records,
            epoch.seconds,
            rps,
            file_bytes as f64 / 1e6 / epoch.seconds,
            peak_rss_mb,
            cpu / epoch.seconds
        );
        println!("{}", epoch.report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads a file once so the timed epoch reads from the page cache; returns its size.
fn warm(path: &std::path::Path) -> std::io::Result<u64> {
    let mut f = std::fs::File::open(path)?;
    std::io::copy(&mut f, &mut std::io::sink())
}

/// Peak resident set size of this process (VmHWM), in bytes.
pub fn peak_rss_bytes() -> u64 {
    proc_status_kib("VmHWM:") * 1024
}

fn proc_status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
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
    use sluice_runtime::stage::{Dataset, Files, Parallelism, tfrecords};
    use sluice_runtime::tfrecord::ReaderOptions;

    /// `read`: `interleave(TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE,
    /// deterministic=False)`: every record, checksums verified.
    pub fn read(files: Files) -> impl Dataset<Item = Vec<u8>> {
        tfrecords(files, ReaderOptions::default(), 4).num_parallel(Parallelism::Auto).deterministic(false)
    }
}
