//! [`ObjectWriter`]: a `Write` into an object, as a multipart upload of
//! `SLUICE_STORAGE_CHUNK`-sized parts (at least 5 MiB, S3's smallest part) with at most
//! `SLUICE_STORAGE_IN_FLIGHT` parts uploading at once, so memory stays bounded. The object
//! appears only when [`ObjectWriter::finish`] completes the upload (atomically, on every
//! store); a writer dropped unfinished (an error, an interrupted export) aborts it, and
//! nothing is left that looks complete.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use object_store::{ObjectStoreExt, WriteMultipart};

use super::reader::{STORAGE_CHUNK_BYTES, STORAGE_IN_FLIGHT};
use super::rt;
use super::store::{Object, env_num, to_io};

/// See the module doc.
#[derive(Debug)]
pub struct ObjectWriter {
    url: String,
    upload: Option<WriteMultipart>,
    in_flight: usize,
}

impl ObjectWriter {
    /// Starts a multipart upload to `url` (its store retries the parts' requests).
    pub fn create(url: &Path) -> io::Result<ObjectWriter> {
        let object = Object::locate_for_write(url)?;
        let upload =
            rt::block_on(object.store.put_multipart(&object.key)).map_err(|e| to_io(&object.url, e))?;
        let chunk = env_num("SLUICE_STORAGE_CHUNK").map_or(STORAGE_CHUNK_BYTES, |n| n as usize);
        let in_flight = env_num("SLUICE_STORAGE_IN_FLIGHT").map_or(STORAGE_IN_FLIGHT, |n| n as usize);
        Ok(ObjectWriter {
            url: object.url,
            upload: Some(WriteMultipart::new_with_chunk_size(upload, chunk.max(5 << 20))),
            in_flight: in_flight.max(1),
        })
    }

    /// Uploads what is buffered and completes the upload: the object appears now, whole.
    pub fn finish(mut self) -> io::Result<()> {
        let upload = self.upload.take().expect("finished once");
        rt::block_on(upload.finish()).map(drop).map_err(|e| to_io(&self.url, e))
    }
}

impl Write for ObjectWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let url = &self.url;
        let upload =
            self.upload.as_mut().ok_or_else(|| io::Error::other(format!("written after finish ({url})")))?;
        // Parts start uploading from `write` (tasks of the storage runtime): bound them.
        rt::block_on(upload.wait_for_capacity(self.in_flight)).map_err(|e| to_io(url, e))?;
        let _enter = rt::runtime().enter();
        upload.write(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        if let Some(upload) = self.upload.take() {
            // Unfinished: abort, so no part of it ever shows as an object.
            let _ = rt::block_on(upload.abort());
        }
    }
}

/// Where a shard is written: a local file or an object's multipart upload, each behind a
/// 1 MiB buffer.
#[derive(Debug)]
pub enum Sink {
    /// A local file.
    File(BufWriter<File>),
    /// An object (see [`ObjectWriter`]).
    Object(BufWriter<ObjectWriter>),
}

impl Sink {
    /// Creates the local file or starts the upload of the object at `path`.
    pub fn create(path: &Path) -> io::Result<Sink> {
        if super::is_url(path) {
            Ok(Sink::Object(BufWriter::with_capacity(1 << 20, ObjectWriter::create(path)?)))
        } else {
            Ok(Sink::File(BufWriter::with_capacity(1 << 20, File::create(super::local_path(path))?)))
        }
    }

    /// Flushes and completes it: a file is synced, an object appears whole.
    pub fn finish(self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all(),
            Sink::Object(o) => o.into_inner().map_err(io::IntoInnerError::into_error)?.finish(),
        }
    }
}

impl Write for Sink {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Object(o) => o.write(buf),
        }
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sink::File(f) => f.write_all(buf),
            Sink::Object(o) => o.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Object(o) => o.flush(),
        }
    }
}

/// A file written under a temporary name, `NAME.partial`, and renamed to its own when
/// [`finish`](PartialFile::finish)ed, so that a failed or interrupted write (a full disk)
/// never leaves a file that looks whole; dropped unfinished, it removes the partial
/// file. An object's URL is written as a multipart upload under its own name instead,
/// which appears whole when completed and is aborted when dropped. `sluice run --output
/// --format parquet|webdataset` writes its shards with it (TFRecord shards, with their
/// index, through `tfrecord::ShardWriter`).
#[derive(Debug)]
pub struct PartialFile {
    sink: Option<Sink>,
    partial: PathBuf,
    path: PathBuf,
}

impl PartialFile {
    /// Creates `PATH.partial` (or starts the upload of the object `PATH`).
    pub fn create(path: &Path) -> io::Result<PartialFile> {
        let partial = if super::is_url(path) {
            path.to_path_buf()
        } else {
            let mut partial = path.as_os_str().to_owned();
            partial.push(".partial");
            PathBuf::from(partial)
        };
        let sink = Sink::create(&partial)?;
        Ok(PartialFile { sink: Some(sink), partial, path: path.to_path_buf() })
    }

    /// The file's own name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Completes the file (synced) and renames it into place, replacing a file of that
    /// name; an object's upload completes.
    pub fn finish(mut self) -> io::Result<()> {
        let Some(sink) = self.sink.take() else { return Ok(()) };
        let remote = super::is_url(&self.path);
        let done = sink.finish().and_then(|()| {
            if remote {
                Ok(())
            } else {
                std::fs::rename(super::local_path(&self.partial), super::local_path(&self.path))
            }
        });
        if done.is_err() && !remote {
            let _ = std::fs::remove_file(super::local_path(&self.partial));
        }
        done
    }
}

impl Write for PartialFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.sink {
            Some(s) => s.write(buf),
            None => Err(io::Error::other("write after finish")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sink.as_mut().map_or(Ok(()), Sink::flush)
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        // An object's upload aborts as its writer drops; a file's partial copy goes.
        if self.sink.take().is_some() && !super::is_url(&self.path) {
            let _ = std::fs::remove_file(super::local_path(&self.partial));
        }
    }
}
