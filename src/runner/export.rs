//! The runner's `--output DIR` (`sluice run FILE.pipe --output DIR [--format F]`): one
//! pass of the pipeline written as shards of its elements, each element one record
//! (`sluice_runtime::output`: a `tf.train.Example`, a Parquet row or a WebDataset sample,
//! from the element's `abi::export::ToExample` impl), dealt to the shards round-robin so
//! their sizes differ by at most one.
//!
//! Shard `k` of `n` is `DIR/NAME-0000k-of-0000n.EXT` (`.tfrecord`, `.tfrecord.gz`,
//! `.parquet`, `.tar`, `.tar.gz`), written as `….partial` and renamed when complete: a
//! failed or interrupted export leaves no file that looks whole. Uncompressed TFRecord
//! shards get their `.idx` sidecar (`sluice index`), written with the shard
//! (`ShardWriter::finish_indexed`): a shard and its index are replaced together or not
//! at all, so an export that fails (a full disk) never leaves an old index beside a new
//! shard. Shards are finished one after the other: a failed export may leave the first
//! shards of the new pass beside the rest of the old one, each with its own index (or
//! none). Then one summary line on stdout (a JSON object with `--json`).
//!
//! Exit status: 2 when the pipeline yields batches (or other elements without fields),
//! 1 on a data error or a write error (naming the file); partial files are removed.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;
use sluice_runtime::abi::export::{self, ToExample};
use sluice_runtime::output::{self, Format, OutputShard, WriteError};
use sluice_runtime::stage::{Ctx, Dataset};

use super::{FAILED, RunArgs, USAGE};

/// Where and how `--output` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The directory of the shards (created if missing).
    pub dir: PathBuf,
    /// How many shards (at least 1).
    pub shards: u32,
    /// The format (`--format`, `--compression`, `--row-group`).
    pub format: Format,
}

impl Export {
    /// Shard `k`'s path for pipeline `name`.
    pub fn shard_path(&self, name: &str, k: u32) -> PathBuf {
        let n = self.shards;
        let file = format!("{name}-{k:05}-of-{n:05}{}", self.format.extension());
        sluice_runtime::storage::join(&self.dir, &file)
    }
}

/// Writes one pass of the dataset `build` makes of `params` as `to` says; gives the exit
/// status.
pub(super) fn export<P, D>(
    params: &P,
    build: impl FnOnce(&P) -> sluice_runtime::Result<D>,
    args: &RunArgs,
    to: &Export,
    name: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8
where
    D: Dataset,
    D::Item: ToExample,
{
    let written = write_shards(params, build, args, to, name);
    let counts = match written {
        Ok(c) => c,
        Err(WriteError::NotRecord(what)) if what == export::SERIALIZED => {
            let _ = writeln!(
                err,
                "error: pipeline `{name}` yields serialized records: `--format {}` writes typed fields; \
                 parse the records first (`map {{ parse_example(); }}`), or write them as they are with \
                 `--format tfrecord`",
                to.format.name()
            );
            return USAGE;
        }
        Err(WriteError::NotRecord(what)) => {
            let _ = writeln!(
                err,
                "error: pipeline `{name}` yields {what}, not records: `--output` writes one record per element; \
                 remove `batch` (and what follows it) to export the records"
            );
            return USAGE;
        }
        Err(WriteError::Failed(e)) => {
            let _ = writeln!(err, "error: pipeline `{name}`: {e}");
            return FAILED;
        }
    };
    let records: u64 = counts.iter().map(|c| c.0).sum();
    let bytes: u64 = counts.iter().map(|c| c.1).sum();
    let per_shard: Vec<u64> = counts.iter().map(|c| c.0).collect();
    let (min, max) = (per_shard.iter().min().copied(), per_shard.iter().max().copied());
    let report = if args.json {
        let files: Vec<String> =
            (0..to.shards).map(|k| to.shard_path(name, k).display().to_string()).collect();
        json!({
            "pipeline": name, "records": records, "shards": to.shards, "bytes": bytes,
            "records_per_shard": per_shard, "files": files, "engine": args.engine,
            "format": to.format.name(),
        })
        .to_string()
    } else {
        let spread = if min == max {
            format!("{} records each", min.unwrap_or(0))
        } else {
            format!("{}-{} records each", min.unwrap_or(0), max.unwrap_or(0))
        };
        format!(
            "{name}: wrote {records} records in {} {} shards ({spread}, {bytes} bytes) to {}, engine {}",
            to.shards,
            to.format.name(),
            to.dir.display(),
            args.engine
        )
    };
    match writeln!(out, "{report}").and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: cannot write the report: {e}");
            FAILED
        }
    }
}

/// Writes the shards; gives each one's records and bytes. Unfinished shards are
/// dropped, which removes their partial files.
fn write_shards<P, D>(
    params: &P,
    build: impl FnOnce(&P) -> sluice_runtime::Result<D>,
    args: &RunArgs,
    to: &Export,
    name: &str,
) -> Result<Vec<(u64, u64)>, WriteError>
where
    D: Dataset,
    D::Item: ToExample,
{
    let ds = build(params)?;
    // An object-store directory (`s3://bucket/out`) has nothing to make: each shard is a
    // multipart upload that appears whole when finished.
    if !sluice_runtime::storage::is_url(&to.dir) {
        std::fs::create_dir_all(&to.dir).map_err(|e| sluice_runtime::Error::io(&to.dir, e))?;
    }
    let mut shards: Vec<OutputShard> = (0..to.shards)
        .map(|k| output::create(&to.shard_path(name, k), to.format))
        .collect::<sluice_runtime::Result<_>>()?;
    let ctx = Ctx::new(&args.options());
    for (i, item) in ds.stream_in(&ctx)?.enumerate() {
        let n = shards.len();
        shards[i % n].write(&item?, i as u64)?;
    }
    let mut counts = Vec::with_capacity(shards.len());
    for shard in shards {
        let (records, path) = (shard.records(), shard.path().to_path_buf());
        shard.finish()?;
        let bytes = sluice_runtime::storage::size(&path).map_err(|e| sluice_runtime::Error::io(&path, e))?;
        counts.push((records, bytes));
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use sluice_runtime::stage::range;
    use sluice_runtime::tfrecord::{self, Compression};

    use super::*;

    fn export_test(dir: &std::path::Path, len: u64, fail: bool, batched: bool) -> (u8, String, String) {
        let build = move |_: &()| {
            Ok(range(0..len).try_map(move |i| {
                if fail && i == 5 { Err(format!("record {i} is bad")) } else { Ok(i.to_le_bytes().to_vec()) }
            }))
        };
        let to = Export { dir: dir.to_path_buf(), shards: 3, format: Format::TfRecord(Compression::None) };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let args = RunArgs::default();
        let code = if batched {
            let build = move |p: &()| build(p).map(|d| d.chunks(2, false));
            export(&(), build, &args, &to, "t", &mut out, &mut err)
        } else {
            export(&(), build, &args, &to, "t", &mut out, &mut err)
        };
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    }

    fn files(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn deals_records_round_robin_with_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let (code, out, err) = export_test(dir.path(), 10, false, false);
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(out.starts_with("t: wrote 10 records in 3 tfrecord shards (3-4 records each, "), "{out}");
        let names = files(dir.path());
        assert_eq!(
            names,
            [
                "t-00000-of-00003.tfrecord",
                "t-00000-of-00003.tfrecord.idx",
                "t-00001-of-00003.tfrecord",
                "t-00001-of-00003.tfrecord.idx",
                "t-00002-of-00003.tfrecord",
                "t-00002-of-00003.tfrecord.idx"
            ]
        );
        let index = tfrecord::Index::load(dir.path().join("t-00001-of-00003.tfrecord")).unwrap();
        assert_eq!(index.len(), 3, "records 1, 4, 7");
    }

    #[test]
    fn a_data_error_or_a_batch_leaves_no_files() {
        let dir = tempfile::tempdir().unwrap();
        let (code, _, err) = export_test(dir.path(), 10, true, false);
        assert_eq!((code, err.as_str()), (1, "error: pipeline `t`: stage `map`: record 5 is bad\n"));
        assert!(files(dir.path()).is_empty(), "{:?}", files(dir.path()));
        let (code, _, err) = export_test(dir.path(), 10, false, true);
        assert_eq!(code, 2);
        assert!(err.contains("yields a batch, not records") && err.contains("remove `batch`"), "{err}");
        assert!(files(dir.path()).is_empty(), "{:?}", files(dir.path()));
    }

    /// A shard replaced by an export that then cannot write its index (a full disk;
    /// here the index's temporary file cannot be created) must not stand beside the old
    /// index: each shard keeps an index that describes it, or none. Before, the new shard
    /// replaced the old one and the stale index stayed.
    #[test]
    fn a_failed_index_write_never_leaves_an_old_index_beside_a_new_shard() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(export_test(dir.path(), 10, false, false).0, 0);
        let shard = dir.path().join("t-00001-of-00003.tfrecord");
        let blocked = dir.path().join(format!("t-00001-of-00003.tfrecord.idx.tmp-{}", std::process::id()));
        std::fs::create_dir_all(blocked.join("x")).unwrap();

        let (code, out, err) = export_test(dir.path(), 7, false, false);
        assert_eq!((code, out.as_str()), (1, ""));
        assert!(
            err.starts_with("error: pipeline `t`: ") && err.contains("t-00001-of-00003.tfrecord.idx"),
            "{err}"
        );
        std::fs::remove_dir_all(&blocked).unwrap();
        for k in 0..3 {
            let shard = dir.path().join(format!("t-0000{k}-of-00003.tfrecord"));
            if tfrecord::index_path(&shard).exists() {
                let index = tfrecord::Index::load(&shard).unwrap_or_else(|e| panic!("shard {k}: {e}"));
                let mut reader = tfrecord::open(&shard, &Default::default()).unwrap();
                let mut records = 0;
                while reader.next_record().unwrap().is_some() {
                    records += 1;
                }
                assert_eq!(index.len(), records, "shard {k}");
            }
        }
        assert_eq!(tfrecord::Index::load(&shard).unwrap().len(), 3, "the old shard 1, with its old index");
        assert!(
            files(dir.path()).iter().all(|f| !f.contains(".partial") && !f.contains(".tmp-")),
            "{:?}",
            files(dir.path())
        );
    }

    #[test]
    fn a_write_error_is_exit_1_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let (code, out, err) = export_test(&file, 4, false, false);
        assert_eq!((code, out.as_str()), (1, ""));
        assert!(err.starts_with("error: pipeline `t`: ") && err.contains("not-a-dir"), "{err}");
    }
}
