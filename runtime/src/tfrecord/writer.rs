//! The streaming TFRecord writer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::index::{Index, build_index, index_path, write_index_to};
use super::input::Output;
use super::{Compression, encode_header, masked_crc};
use crate::error::{Error, Result};
use crate::storage::{self, Sink};

/// Writes records to a stream, framing each with its length, payload and checksums.
/// Call [`finish`](RecordWriter::finish) to complete a compressed stream and flush.
#[derive(Debug)]
pub struct RecordWriter<W: Write> {
    out: Output<W>,
    path: PathBuf,
    records: u64,
}

impl<W: Write> std::fmt::Debug for Output<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Output::Plain(_) => "Plain",
            Output::Gzip(_) => "Gzip",
            Output::Zlib(_) => "Zlib",
        })
    }
}

/// Creates (or truncates) a TFRecord file. `Auto` compression follows the file name:
/// `.gz` is GZIP, `.zlib` is ZLIB, anything else is uncompressed.
pub fn create(path: impl AsRef<Path>, compression: Compression) -> Result<RecordWriter<BufWriter<File>>> {
    let path = path.as_ref();
    let compression = match compression {
        Compression::Auto => Compression::from_path(path).unwrap_or(Compression::None),
        c => c,
    };
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    Ok(RecordWriter::new(BufWriter::with_capacity(1 << 20, file), path, compression))
}

impl<W: Write> RecordWriter<W> {
    /// A writer over `inner`; `path` names it in errors. `Auto` means uncompressed.
    pub fn new(inner: W, path: impl Into<PathBuf>, compression: Compression) -> Self {
        RecordWriter { out: Output::new(inner, compression), path: path.into(), records: 0 }
    }

    /// Appends one record.
    pub fn write_record(&mut self, data: &[u8]) -> Result<()> {
        let out = &mut self.out;
        let header = encode_header(data.len() as u64);
        let footer = masked_crc(data).to_le_bytes();
        let r =
            out.write_all(&header).and_then(|()| out.write_all(data)).and_then(|()| out.write_all(&footer));
        r.map_err(|e| Error::io(&self.path, e))?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Completes the compressed stream, flushes, and returns the inner writer.
    pub fn finish(self) -> Result<W> {
        let mut inner = self.out.finish().map_err(|e| Error::io(&self.path, e))?;
        inner.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(inner)
    }
}

/// A TFRecord file written under a temporary name, `NAME.partial`, and renamed to its
/// own when [`finish`](ShardWriter::finish)ed, so a failed or interrupted write (a full
/// disk) never leaves a file that looks whole. Dropped unfinished, it removes the
/// partial file. `sluice gen` and `sluice run --output` write their shards with it.
#[derive(Debug)]
pub struct ShardWriter {
    writer: Option<RecordWriter<Sink>>,
    partial: PathBuf,
    path: PathBuf,
}

/// Creates `PATH.partial` for the shard `path` (see [`ShardWriter`]).
///
/// An object's URL (`s3://bucket/dir/part-0.tfrecord`) is written as a multipart upload
/// under its own name instead: completing the upload makes it appear whole, atomically,
/// and an unfinished one is aborted, leaving nothing.
pub fn create_shard(path: impl Into<PathBuf>, compression: Compression) -> Result<ShardWriter> {
    let path = path.into();
    let partial = if storage::is_url(&path) {
        path.clone()
    } else {
        let mut partial = path.clone().into_os_string();
        partial.push(".partial");
        PathBuf::from(partial)
    };
    let compression = match compression {
        Compression::Auto => Compression::from_path(&partial).unwrap_or(Compression::None),
        c => c,
    };
    let sink = Sink::create(&partial).map_err(|e| Error::io(&partial, e))?;
    Ok(ShardWriter { writer: Some(RecordWriter::new(sink, &partial, compression)), partial, path })
}

impl ShardWriter {
    /// Appends one record.
    pub fn write_record(&mut self, data: &[u8]) -> Result<()> {
        match &mut self.writer {
            Some(w) => w.write_record(data),
            None => Ok(()),
        }
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.writer.as_ref().map_or(0, RecordWriter::records)
    }

    /// The shard's own name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Completes the file and renames it into place (replacing a file of that name).
    pub fn finish(mut self) -> Result<()> {
        let Some(w) = self.writer.take() else { return Ok(()) };
        let remote = storage::is_url(&self.path);
        let done = w
            .finish()
            .and_then(|sink| sink.finish().map_err(|e| Error::io(&self.partial, e)))
            .and_then(|()| {
                if remote {
                    Ok(())
                } else {
                    std::fs::rename(&self.partial, &self.path).map_err(|e| Error::io(&self.path, e))
                }
            });
        if done.is_err() && !remote {
            let _ = std::fs::remove_file(&self.partial);
        }
        done
    }
}

impl ShardWriter {
    /// Completes the shard and writes its index ([`index_path`] of it) with it: an
    /// uncompressed shard is replaced together with its index or not at all, so a shard
    /// and an index of two different writes never stand side by side (a stale index is an
    /// error to every reader that opens it). Returns the index.
    ///
    /// A local shard: the partial file is finished and synced, its index built from it and
    /// written to `INDEX.tmp-PID` (synced); only then is the old index removed, the shard
    /// renamed into place and the index renamed after it. A failure before the renames
    /// leaves the old shard and its old index as they were; one between them leaves a
    /// shard without an index (the old one if the shard's rename failed, else the new
    /// one), which readers that need one report and `sluice index` rebuilds. An object:
    /// its old index is deleted before the upload completes, then the new index is
    /// uploaded from the completed object; a failure leaves a shard without an index.
    ///
    /// **Invariant:** at every instant, an index beside a shard describes that shard.
    pub fn finish_indexed(mut self) -> Result<Index> {
        let Some(w) = self.writer.take() else { return build_index(&self.path) };
        let index_at = index_path(&self.path);
        if storage::is_url(&self.path) {
            storage::remove(&index_at).map_err(|e| Error::io(&index_at, e))?;
            w.finish()?.finish().map_err(|e| Error::io(&self.path, e))?;
            let (index, _) = write_index_to(&self.path, index_at)?;
            return Ok(index);
        }
        let mut tmp = index_at.clone().into_os_string();
        tmp.push(format!(".tmp-{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let done = self.replace_indexed(w, &index_at, &tmp);
        let _ = std::fs::remove_file(&self.partial);
        let _ = std::fs::remove_file(&tmp);
        done
    }

    /// The steps of [`finish_indexed`](Self::finish_indexed) for a local shard; the
    /// caller removes what is left of the partial files.
    fn replace_indexed(&self, w: RecordWriter<Sink>, index_at: &Path, tmp: &Path) -> Result<Index> {
        w.finish()?.finish().map_err(|e| Error::io(&self.partial, e))?;
        let index = build_index(&self.partial)?;
        let written = File::create(tmp).and_then(|mut f| {
            f.write_all(&index.to_bytes())?;
            f.sync_all()
        });
        written.map_err(|e| Error::io(index_at, e))?;
        storage::remove(index_at).map_err(|e| Error::io(index_at, e))?;
        std::fs::rename(&self.partial, &self.path).map_err(|e| Error::io(&self.path, e))?;
        std::fs::rename(tmp, index_at).map_err(|e| Error::io(index_at, e))?;
        // The renames themselves last once the folder is synced (best effort: some file
        // systems cannot sync a folder).
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(index)
    }
}

impl Drop for ShardWriter {
    fn drop(&mut self) {
        // An object's upload aborts as its writer drops; a file's partial copy goes.
        if self.writer.take().is_some() && !storage::is_url(&self.path) {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}
