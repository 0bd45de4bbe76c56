//! `sluice gen`: deterministic synthetic datasets, with a progress bar.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use sluice_runtime::synth::{self, GenOptions, Kind};
use sluice_runtime::tfrecord::Compression;

use super::Failure;

#[derive(Debug, Args)]
pub struct GenArgs {
    /// Dataset: tabular (x: 16 floats), image (64×64×3 raw u8) or jpeg (128×128×3 JPEG).
    #[arg(value_parser = parse_kind)]
    kind: Kind,
    /// Total number of records.
    #[arg(long)]
    records: u64,
    /// Number of files; record ids are split contiguously across them.
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Seed of every random draw: the same seed gives byte-identical files.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Compression of the files: none, gzip or zlib.
    #[arg(long, default_value = "none", value_parser = parse_compression)]
    compression: Compression,
    /// Writer threads (default: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

fn parse_kind(s: &str) -> Result<Kind, String> {
    s.parse()
}

fn parse_compression(s: &str) -> Result<Compression, String> {
    match s.parse()? {
        Compression::Auto => Err("gen needs an explicit compression: none, gzip or zlib".into()),
        c => Ok(c),
    }
}

pub fn run(args: GenArgs) -> Result<ExitCode, Failure> {
    if args.shards == 0 {
        return Err(Failure::Usage("--shards must be at least 1".into()));
    }
    let opts = GenOptions {
        kind: args.kind,
        records: args.records,
        shards: args.shards,
        out: args.out,
        seed: args.seed,
        compression: args.compression,
        threads: args.threads,
    };
    let bar = ProgressBar::new(opts.records);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {human_pos}/{human_len} records ({per_sec}, {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(format!("writing {}", opts.kind.name()));
    let start = Instant::now();
    let summary = synth::generate(&opts, &|n| bar.inc(n))?;
    bar.finish_and_clear();
    sayln!(
        "wrote {} records in {} files ({:.1} MB) to {} in {:.1} s",
        summary.records,
        summary.files.len(),
        summary.bytes as f64 / 1e6,
        opts.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
