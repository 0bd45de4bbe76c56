//! `sluice index FILE...`: writes the record index (`FILE.idx`) of each uncompressed
//! TFRecord file, which random access and `global_shuffle` need; `--check` verifies
//! existing indexes against their files instead.
//!
//! Arguments are files, directories (their `*.tfrecord` files) or quoted glob patterns.
//! Each file is read through with both checksums verified: a corrupt record stops the
//! command (exit 1) with an error naming the file, the record and its offset, and no index
//! is written for that file. A missing file is a usage error (exit 2).
//!
//! Files may be objects (`s3://bucket/data/`, a URL prefix, stands for its `*.tfrecord`
//! objects): each index is then written beside its object, or in `--index-dir` (a local
//! directory or a URL prefix; default `$SLUICE_INDEX_DIR`, where the runtime looks too).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use sluice_runtime::Error;
use sluice_runtime::storage;
use sluice_runtime::tfrecord::{Index, build_index, index_path, index_path_in, write_index_to};

use super::Failure;
use super::files::{expand_dirs, expand_globs};

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Verify each file's existing index (format, checksum, and every offset against a
    /// fresh scan of the file) instead of writing it; exit 1 on the first that fails.
    #[arg(long)]
    check: bool,
    /// Where the indexes are (written, or checked): a local directory or a URL prefix,
    /// `DIR/NAME.idx` for each file `NAME`. Default: `$SLUICE_INDEX_DIR` if set, else
    /// beside each file. (Global shuffles read `$SLUICE_INDEX_DIR` too.)
    #[arg(long, value_name = "DIR")]
    index_dir: Option<PathBuf>,
    /// TFRecord files, directories of them, or quoted glob patterns.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

pub fn run(args: IndexArgs) -> Result<ExitCode, Failure> {
    let files = expand_dirs(&expand_globs(&args.files)?)?;
    if let Some(dir) = args.index_dir.as_deref().filter(|d| !storage::is_url(d) && !args.check) {
        std::fs::create_dir_all(dir).map_err(|e| Failure::Usage(format!("{}: {e}", dir.display())))?;
    }
    let where_ = |path: &PathBuf| match &args.index_dir {
        Some(dir) => index_path_in(path, Some(dir)),
        None => index_path(path),
    };
    for path in &files {
        if args.check {
            let at = where_(path);
            let index = check(path, &at)?;
            outln!("{}: {} records, {} ok", path.display(), index.len(), at.display());
        } else {
            let (index, written) = write_index_to(path, where_(path))?;
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

/// Loads `path`'s index from `at` (format, checksum, fingerprint) and compares its
/// offsets with a fresh scan of the file.
fn check(path: &PathBuf, at: &Path) -> Result<Index, Failure> {
    let stored = Index::load_at(path, at)?;
    let fresh = build_index(path)?;
    if stored.offsets() != fresh.offsets() {
        let k = stored.offsets().iter().zip(fresh.offsets()).take_while(|(a, b)| a == b).count();
        return Err(Error::Index {
            path: at.to_path_buf(),
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
