//! `sluice index FILE...`: writes the record index (`FILE.idx`) of each uncompressed
//! TFRecord file, which random access and `global_shuffle` need; `--check` verifies
//! existing indexes against their files instead.
//!
//! Arguments are files, directories (their `*.tfrecord` files) or quoted glob patterns.
//! Each file is read through with both checksums verified: a corrupt record stops the
//! command (exit 1) with an error naming the file, the record and its offset, and no index
//! is written for that file. A missing file is a usage error (exit 2).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sluice_runtime::Error;
use sluice_runtime::tfrecord::{Index, build_index, index_path, write_index};

use super::Failure;
use super::files::{expand_dirs, expand_globs};

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Verify each file's existing index (format, checksum, and every offset against a
    /// fresh scan of the file) instead of writing it; exit 1 on the first that fails.
    #[arg(long)]
    check: bool,
    /// TFRecord files, directories of them, or quoted glob patterns.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run(args: IndexArgs) -> Result<ExitCode, Failure> {
    let files = expand_dirs(&expand_globs(&args.files)?)?;
    for path in &files {
        if args.check {
            let index = check(path)?;
            outln!("{}: {} records, {} ok", path.display(), index.len(), index_path(path).display());
        } else {
            let (index, written) = write_index(path)?;
            outln!(
                "{}: {} records, index {} ({} bytes)",
                path.display(),
                index.len(),
                written.display(),
                index.encoded_len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads `path`'s index (format, checksum, fingerprint) and compares its offsets with a
/// fresh scan of the file.
fn check(path: &PathBuf) -> Result<Index, Failure> {
    let stored = Index::load(path)?;
    let fresh = build_index(path)?;
    if stored.offsets() != fresh.offsets() {
        let k = stored.offsets().iter().zip(fresh.offsets()).take_while(|(a, b)| a == b).count();
        return Err(Error::Index {
            path: index_path(path),
            reason: format!(
                "the index does not match {}'s records from record {k} on (rerun `sluice index {}`)",
                path.display(),
                path.display()
            ),
        }
        .into());
    }
    Ok(stored)
}
