//! What the Parquet reader reads its byte ranges from: a local file, or an object in a
//! store by ranged GETs (the footer, then each column chunk), never the whole object.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use ::parquet::errors::ParquetError;
use ::parquet::file::reader::{ChunkReader, Length};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::storage::reader::fetch_ranges;
use crate::storage::store::Retry;
use crate::storage::{self, Object};

/// A Parquet file's bytes, by range.
#[derive(Debug, Clone)]
pub(super) enum Chunks {
    /// A local file and its size.
    File(Arc<File>, u64),
    /// An object in a store.
    Object(Arc<Object>),
}

impl Chunks {
    pub(super) fn open(path: &Path) -> Result<Chunks> {
        if storage::is_url(path) {
            let object = Object::head(path).map_err(|e| Error::io(path, e))?;
            return Ok(Chunks::Object(Arc::new(object)));
        }
        let file = File::open(storage::local_path(path)).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Chunks::File(Arc::new(file), len))
    }

    fn fetch(object: &Arc<Object>, range: Range<u64>) -> io::Result<Bytes> {
        let mut got = fetch_ranges(object, std::slice::from_ref(&range), Retry::from_env())?;
        got.pop().ok_or_else(|| io::Error::other("no bytes fetched"))
    }
}

impl Length for Chunks {
    fn len(&self) -> u64 {
        match self {
            Chunks::File(_, len) => *len,
            Chunks::Object(o) => o.size,
        }
    }
}

/// A reader from an offset to the end: positioned reads of the file (handles share no
/// offset), or an object fetched a block at a time.
pub(super) enum ChunkRead {
    File { file: Arc<File>, pos: u64 },
    Object { object: Arc<Object>, pos: u64, block: Bytes },
}

/// The bytes an object reader fetches at once.
const BLOCK: u64 = 1 << 20;

impl Read for ChunkRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ChunkRead::File { file, pos } => {
                let n = file.read_at(buf, *pos)?;
                *pos += n as u64;
                Ok(n)
            }
            ChunkRead::Object { object, pos, block } => {
                if block.is_empty() {
                    let end = (*pos + BLOCK).min(object.size);
                    if *pos >= end {
                        return Ok(0);
                    }
                    *block = Chunks::fetch(object, *pos..end)?;
                    *pos = end;
                }
                let n = buf.len().min(block.len());
                buf[..n].copy_from_slice(&block[..n]);
                *block = block.slice(n..);
                Ok(n)
            }
        }
    }
}

impl ChunkReader for Chunks {
    type T = io::BufReader<ChunkRead>;

    fn get_read(&self, start: u64) -> ::parquet::errors::Result<Self::T> {
        Ok(io::BufReader::with_capacity(
            64 << 10,
            match self {
                Chunks::File(f, _) => ChunkRead::File { file: f.clone(), pos: start },
                Chunks::Object(o) => ChunkRead::Object { object: o.clone(), pos: start, block: Bytes::new() },
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> ::parquet::errors::Result<Bytes> {
        let end = start.checked_add(length as u64).filter(|&e| e <= self.len()).ok_or_else(|| {
            ParquetError::EOF(format!(
                "{length} bytes at {start}, past the end of the file ({} bytes)",
                self.len()
            ))
        })?;
        match self {
            Chunks::File(f, _) => {
                let mut buf = vec![0; length];
                f.read_exact_at(&mut buf, start)?;
                Ok(Bytes::from(buf))
            }
            Chunks::Object(o) => Ok(Self::fetch(o, start..end)?),
        }
    }
}
