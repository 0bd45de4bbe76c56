//! The streaming TFRecord writer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::input::Output;
use super::{Compression, encode_header, masked_crc};
use crate::error::{Error, Result};

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
