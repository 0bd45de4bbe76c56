//! `sluice bench shuffle`: the global shuffle against sequential reading of the same
//! files, and the cost of `sluice index`.
//!
//! The files are read once to warm the page cache and indexed (timed: records/s and GB/s
//! of `sluice index`, and the index's bytes per record). Then, each the median of
//! `--repeat` passes, every record delivered as an owned `Record` and its length summed:
//! the sequential reader on one thread (payloads lent, no allocation), the sequential
//! TFRecord source stage on one thread (one `Vec` per record, as the shuffle delivers),
//! and `global_shuffle` on one thread and on `--threads` threads, and on one thread with
//! its memory maps off (every record by `pread`, as objects in a store are read). Ratios
//! are the shuffle's records/s over the sequential stage's.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use sluice_runtime::stage::{Dataset, Files, GlobalShuffle, global_shuffle, tfrecords};
use sluice_runtime::tfrecord::{CoalesceOptions, ReaderOptions, write_index};

use super::Failure;
use super::bench::{Pass, bench_files, median, reader_pass};

#[derive(Debug, Args)]
pub struct ShuffleArgs {
    /// Reader threads of the parallel measurement (default: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Permutation positions read together (default: about 8 MiB of records).
    #[arg(long)]
    window: Option<usize>,
    /// Largest gap, in bytes, between two records read with one pread (default 4 KiB).
    #[arg(long)]
    max_gap: Option<u64>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// TFRecord files, or directories of them (uncompressed).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

pub fn run(args: ShuffleArgs) -> Result<ExitCode, Failure> {
    let (files, threads, file_bytes) = bench_files(&args.paths, args.threads)?;
    let repeat = args.repeat.max(1);
    // Warm the page cache (this pass does not count), then time the indexing.
    reader_pass(&files, 1)?;
    let t = Instant::now();
    let mut index_bytes = 0;
    for f in &files {
        index_bytes += write_index(f)?.0.encoded_len();
    }
    let index = Pass { records: 0, seconds: t.elapsed().as_secs_f64() };
    let reader = median(repeat, || reader_pass(&files, 1))?;
    let stage = median(repeat, || sequential_stage(&files))?;
    let make = |n: usize, map: bool| -> Result<GlobalShuffle, Failure> {
        let mut ds = global_shuffle(&files, 1)?.num_parallel(n);
        if let Some(w) = args.window {
            ds = ds.window(w);
        }
        let max_gap = args.max_gap.unwrap_or(CoalesceOptions::default().max_gap);
        Ok(ds.coalesce(CoalesceOptions { max_gap, map, ..CoalesceOptions::default() }))
    };
    let one = make(1, true)?;
    let par = make(threads, true)?;
    let pread = make(1, false)?;
    let mut epoch = 0;
    let shuffle1 = median(repeat, || {
        epoch += 1;
        shuffle_pass(&one, epoch)
    })?;
    let shuffle_n = median(repeat, || {
        epoch += 1;
        shuffle_pass(&par, epoch)
    })?;
    let shuffle_pread = median(repeat, || {
        epoch += 1;
        shuffle_pass(&pread, epoch)
    })?;
    let records = reader.records;
    let gbps = |p: Pass| file_bytes as f64 / p.seconds / 1e9;
    let rps = |p: Pass| records as f64 / p.seconds;
    if args.json {
        let m = |p: Pass| serde_json::json!({ "records_per_s": rps(p), "gb_per_s": gbps(p), "seconds": p.seconds });
        let v = serde_json::json!({
            "files": files.len(),
            "file_bytes": file_bytes,
            "records": records,
            "threads": threads,
            "index": { "records_per_s": rps(index), "gb_per_s": gbps(index), "seconds": index.seconds,
                       "bytes": index_bytes, "bytes_per_record": index_bytes as f64 / records.max(1) as f64 },
            "reader_seq": m(reader),
            "stage_seq": m(stage),
            "global_shuffle_1": m(shuffle1),
            "global_shuffle_n": m(shuffle_n),
            "global_shuffle_1_pread": m(shuffle_pread),
            "ratio_1_thread": rps(shuffle1) / rps(stage),
            "ratio_n_threads": rps(shuffle_n) / rps(stage),
            "ratio_1_thread_pread": rps(shuffle_pread) / rps(stage),
        });
        outln!("{v}");
    } else {
        outln!("{} files, {} records, {:.1} MB", files.len(), records, file_bytes as f64 / 1e6);
        let row = |name: &str, p: Pass| -> Result<(), Failure> {
            outln!("  {name:<36} {:>8.2} GB/s  {:>12.0} records/s", gbps(p), rps(p));
            Ok(())
        };
        row("sluice index (write)", index)?;
        outln!(
            "  index size                           {:.2} bytes/record",
            index_bytes as f64 / records.max(1) as f64
        );
        row("sequential reader, 1 thread", reader)?;
        row("sequential source stage, 1 thread", stage)?;
        row("global shuffle, 1 thread", shuffle1)?;
        row(&format!("global shuffle, {threads} threads"), shuffle_n)?;
        row("global shuffle, 1 thread, pread", shuffle_pread)?;
        outln!(
            "  global shuffle / sequential stage     {:.2}x (1 thread)  {:.2}x ({threads} threads)  {:.2}x (1 thread, pread)",
            rps(shuffle1) / rps(stage),
            rps(shuffle_n) / rps(stage),
            rps(shuffle_pread) / rps(stage)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn drain(
    stream: impl Iterator<Item = sluice_runtime::Result<sluice_runtime::stage::Record>>,
    start: Instant,
) -> Result<Pass, Failure> {
    let (mut records, mut sink) = (0u64, 0u64);
    for r in stream {
        records += 1;
        sink = sink.wrapping_add(r?.len() as u64);
    }
    std::hint::black_box(sink);
    Ok(Pass { records, seconds: start.elapsed().as_secs_f64() })
}

fn sequential_stage(files: &[PathBuf]) -> Result<Pass, Failure> {
    let start = Instant::now();
    let ds = tfrecords(Files::from_paths(files.iter().cloned()), ReaderOptions::default(), 1).num_parallel(1);
    drain(ds.stream()?, start)
}

fn shuffle_pass(ds: &GlobalShuffle, epoch: u64) -> Result<Pass, Failure> {
    let start = Instant::now();
    let ctx = sluice_runtime::stage::Ctx::new(&Default::default()).with_epoch(epoch);
    drain(ds.stream_in(&ctx)?, start)
}
