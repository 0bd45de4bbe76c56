//! `sluice bench`: throughput measurements that later issues extend.
//!
//! `sluice bench read` reads TFRecord files from the page cache (read once first) and
//! reports, in one process on the same bytes: the raw `read(2)` rate, the CRC32C-only rate
//! over bytes already in memory, and the TFRecord reader's rate (both checksums
//! verified) on one thread and on several threads (one file per thread at a time). Each
//! figure is the median of `--repeat` runs.
//!
//! The paths may be objects or URL prefixes (`s3://bucket/data/`): then every pass streams
//! the objects through ranged GETs (there is no page cache to warm; the first pass is
//! still left out), and "read(2)" is the plain `storage::open` read of the bytes.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::{Args, Subcommand};
use sluice_runtime::storage;
use sluice_runtime::tfrecord::{self, ReaderOptions};

use super::Failure;
use super::files::expand_dirs;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// TFRecord reader throughput against read(2) and CRC32C alone.
    Read(ReadArgs),
    /// One of the tf.data peer pipelines, built with the runtime API, for one epoch.
    Pipeline(super::pipelines::PipelineArgs),
    /// The global shuffle against sequential reading of the same files, and indexing.
    Shuffle(super::shuffle_bench::ShuffleArgs),
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Threads of the parallel measurement (default: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// TFRecord files or objects, or directories or URL prefixes of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode, Failure> {
    match cmd {
        BenchCommand::Read(args) => read(args),
        BenchCommand::Pipeline(args) => super::pipelines::run(args),
        BenchCommand::Shuffle(args) => super::shuffle_bench::run(args),
    }
}

const CHUNK: usize = 1 << 20;

/// One timed pass: records delivered and seconds taken.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pass {
    pub(super) records: u64,
    pub(super) seconds: f64,
}

/// The files of a benchmark (directories expanded), its thread count (`0`: one per
/// core) and the files' total size in bytes.
pub(super) fn bench_files(paths: &[PathBuf], threads: usize) -> Result<(Vec<PathBuf>, usize, u64), Failure> {
    let files = expand_dirs(paths)?;
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let mut file_bytes = 0u64;
    for f in &files {
        file_bytes += storage::size(f).map_err(|e| {
            // An object store's error names the URL already; a local one does not.
            Failure::Usage(if storage::is_url(f) { e.to_string() } else { format!("{}: {e}", f.display()) })
        })?;
    }
    Ok((files, threads, file_bytes))
}

fn read(args: ReadArgs) -> Result<ExitCode, Failure> {
    let (files, threads, file_bytes) = bench_files(&args.paths, args.threads)?;
    let repeat = args.repeat.max(1);
    // Warm the page cache, and measure plain read(2) while at it (the first pass does not count).
    raw_read(&files)?;
    let raw = median(repeat, || raw_read(&files))?;
    let crc = median(repeat, || crc_only(&files))?;
    let seq = median(repeat, || reader_pass(&files, 1))?;
    let par = median(repeat, || reader_pass(&files, threads))?;
    let gbps = |p: Pass| file_bytes as f64 / p.seconds / 1e9;
    let rps = |p: Pass| p.records as f64 / p.seconds;
    if args.json {
        let v = serde_json::json!({
            "files": files.len(),
            "file_bytes": file_bytes,
            "records": seq.records,
            "threads": threads,
            "raw_read_gb_per_s": gbps(raw),
            "crc32c_only_gb_per_s": gbps(crc),
            "read_seq": { "records_per_s": rps(seq), "gb_per_s": gbps(seq), "seconds": seq.seconds },
            "read_par": { "records_per_s": rps(par), "gb_per_s": gbps(par), "seconds": par.seconds },
        });
        outln!("{v}");
    } else {
        outln!("{} files, {} records, {:.1} MB", files.len(), seq.records, file_bytes as f64 / 1e6);
        outln!("  read(2) from page cache      {:>8.2} GB/s", gbps(raw));
        outln!("  crc32c only (in memory)      {:>8.2} GB/s", gbps(crc));
        outln!("  reader, 1 thread             {:>8.2} GB/s  {:>12.0} records/s", gbps(seq), rps(seq));
        outln!(
            "  reader, {threads} threads            {:>8.2} GB/s  {:>12.0} records/s",
            gbps(par),
            rps(par)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The median by time of `repeat` passes of `f`.
pub(super) fn median(repeat: usize, mut f: impl FnMut() -> Result<Pass, Failure>) -> Result<Pass, Failure> {
    let mut passes = (0..repeat).map(|_| f()).collect::<Result<Vec<_>, _>>()?;
    passes.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    Ok(passes[passes.len() / 2])
}

fn io_failure(path: &PathBuf, e: std::io::Error) -> Failure {
    Failure::Data(sluice_runtime::Error::io(path, e).into())
}

fn raw_read(files: &[PathBuf]) -> Result<Pass, Failure> {
    let mut buf = vec![0u8; CHUNK];
    let start = Instant::now();
    for path in files {
        let (mut f, _) = storage::open(path).map_err(|e| io_failure(path, e))?;
        while f.read(&mut buf).map_err(|e| io_failure(path, e))? > 0 {}
    }
    Ok(Pass { records: 0, seconds: start.elapsed().as_secs_f64() })
}

fn crc_only(files: &[PathBuf]) -> Result<Pass, Failure> {
    let mut buf = vec![0u8; 8 * CHUNK];
    let mut seconds = 0.0;
    let mut sink = 0u32;
    for path in files {
        let (mut f, _) = storage::open(path).map_err(|e| io_failure(path, e))?;
        loop {
            let n = f.read(&mut buf).map_err(|e| io_failure(path, e))?;
            if n == 0 {
                break;
            }
            let t = Instant::now();
            sink ^= crc32c::crc32c(&buf[..n]);
            seconds += t.elapsed().as_secs_f64();
        }
    }
    std::hint::black_box(sink);
    Ok(Pass { records: 0, seconds })
}

/// The streaming reader over `files` on `threads` threads (one file per thread at a
/// time), payloads lent: every record counted, its length summed.
pub(super) fn reader_pass(files: &[PathBuf], threads: usize) -> Result<Pass, Failure> {
    let opts = ReaderOptions::default();
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let records = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(files.len()))
            .map(|_| {
                s.spawn(|| -> Result<u64, sluice_runtime::Error> {
                    let mut records = 0u64;
                    let mut sink = 0u64;
                    while let Some(path) = files.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let mut r = tfrecord::open(path, &opts)?;
                        while let Some(rec) = r.next_record()? {
                            records += 1;
                            sink = sink.wrapping_add(rec.len() as u64);
                        }
                    }
                    std::hint::black_box(sink);
                    Ok(records)
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().expect("bench threads do not panic")).sum::<Result<u64, _>>()
    })?;
    Ok(Pass { records, seconds: start.elapsed().as_secs_f64() })
}
