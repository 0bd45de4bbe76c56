//! `sluice cat`: TFRecord files of `tf.train.Example` as JSON lines.
//!
//! Output streams: each record is written as soon as it is read, and everything before
//! a corrupt record is flushed before the error is reported.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sluice_runtime::example::{Example, SequenceExample, json};
use sluice_runtime::tfrecord::{self, Compression, CorruptPolicy, ReaderOptions, ReaderStats};

use super::Failure;
use super::files::{check_files, expand_globs};

#[derive(Debug, Args)]
pub struct CatArgs {
    /// Decode records as tf.train.SequenceExample instead of tf.train.Example.
    #[arg(long)]
    sequence: bool,
    /// Whole-file compression: auto (from the extension, else sniffed), none, gzip, zlib.
    #[arg(long, default_value = "auto", value_parser = parse_compression)]
    compression: Compression,
    /// What to do with a corrupt record: fail, skip (resynchronise at the next valid
    /// record) or skip_file (go on with the next file).
    #[arg(long, default_value = "fail", value_parser = parse_policy)]
    on_corrupt: CorruptPolicy,
    /// Do not verify payload checksums (length checksums are always verified).
    #[arg(long)]
    no_verify_crc: bool,
    /// TFRecord files to print, in order.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

fn parse_compression(s: &str) -> Result<Compression, String> {
    s.parse()
}

fn parse_policy(s: &str) -> Result<CorruptPolicy, String> {
    s.parse()
}

pub fn run(args: CatArgs) -> Result<ExitCode, Failure> {
    // A quoted pattern (`'s3://bucket/train-*.tfrecord'`) is expanded as `index` does.
    let files = expand_globs(&args.files)?;
    check_files(&files)?;
    let opts = ReaderOptions {
        compression: args.compression,
        verify_crc: !args.no_verify_crc,
        on_corrupt: args.on_corrupt,
        ..ReaderOptions::default()
    };
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut total = ReaderStats::default();
    let mut line = String::new();
    let mut result = Ok(());
    for path in &files {
        result = cat_file(path, &opts, args.sequence, &mut out, &mut line, &mut total);
        if result.is_err() {
            break;
        }
    }
    let flushed = out.flush();
    match (result, flushed) {
        (Err(CatError::Data(e)), _) => return Err(e.into()),
        // A reader that went away (`sluice cat f | head`) ends it quietly; any other
        // write error (a full disk) is a failure.
        (Err(CatError::Write(e)), _) | (Ok(()), Err(e)) => return Err(Failure::write("standard output", e)),
        (Ok(()), Ok(())) => {}
    }
    if total.skipped_records > 0 {
        report_skips(&total)?;
    }
    Ok(ExitCode::SUCCESS)
}

enum CatError {
    /// Standard output could not be written (its reader went away, or the disk is full).
    Write(io::Error),
    /// The data could not be read.
    Data(sluice_runtime::Error),
}

fn cat_file(
    path: &PathBuf,
    opts: &ReaderOptions,
    sequence: bool,
    out: &mut impl Write,
    line: &mut String,
    total: &mut ReaderStats,
) -> Result<(), CatError> {
    let mut reader = tfrecord::open(path, opts).map_err(CatError::Data)?;
    let mut bad_payloads = ReaderStats::default();
    loop {
        let record = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                total.merge(reader.stats());
                return Err(CatError::Data(e));
            }
        };
        line.clear();
        let decoded = if sequence {
            SequenceExample::decode_record(record).map(|ex| json::write_sequence_example(line, &ex))
        } else {
            Example::decode_record(record).map(|ex| json::write_example(line, &ex))
        };
        if let Err(kind) = decoded {
            let len = record.len();
            let err = reader.corrupt_previous(kind, len);
            match opts.on_corrupt {
                CorruptPolicy::Fail => {
                    total.merge(reader.stats());
                    return Err(CatError::Data(err));
                }
                CorruptPolicy::Skip | CorruptPolicy::SkipFile => {
                    note_bad_payload(&mut bad_payloads, err, len, opts.on_corrupt == CorruptPolicy::SkipFile);
                    if opts.on_corrupt == CorruptPolicy::SkipFile {
                        break;
                    }
                    continue;
                }
            }
        }
        line.push('\n');
        if let Err(e) = out.write_all(line.as_bytes()) {
            return Err(CatError::Write(e));
        }
    }
    let mut stats = reader.stats().clone();
    // A payload that framed correctly but did not decode was counted as delivered.
    stats.records -= bad_payloads.skipped_records;
    stats.merge(&bad_payloads);
    stats.events.sort_by_key(|e| e.offset);
    total.merge(&stats);
    Ok(())
}

fn note_bad_payload(stats: &mut ReaderStats, err: sluice_runtime::Error, len: usize, rest_of_file: bool) {
    if let sluice_runtime::Error::Corrupt { path, record, offset, kind, .. } = err {
        stats.skipped_records += 1;
        stats.skipped_bytes += (len + 16) as u64;
        stats.events.push(tfrecord::SkipEvent {
            path,
            record,
            offset,
            kind,
            bytes: (len + 16) as u64,
            rest_of_file,
        });
    }
}

fn report_skips(total: &ReaderStats) -> Result<(), Failure> {
    sayln!(
        "sluice cat: skipped {} corrupt record{} ({} bytes); {} records printed",
        total.skipped_records,
        if total.skipped_records == 1 { "" } else { "s" },
        total.skipped_bytes,
        total.records,
    );
    for e in &total.events {
        let what = if e.rest_of_file { ", rest of file skipped" } else { "" };
        sayln!("  {}: record {} at byte offset {}: {}{what}", e.path.display(), e.record, e.offset, e.kind);
    }
    if total.skipped_records as usize > total.events.len() {
        sayln!("  … and {} more", total.skipped_records as usize - total.events.len());
    }
    Ok(())
}
