//! Text sources: the lines of a text file (tf.data's `TextLineDataset`) and the rows of a
//! CSV file (`tf.data.experimental.CsvDataset`, RFC 4180), each as [`Record`]s whose
//! [`Origin`] is a line (`path:LINE` in errors), read through a buffer, never whole.
//!
//! - [`lines_file`]: one record per line, its terminator (`\n`, and a `\r` before it)
//!   removed; raw bytes, no UTF-8 check (generated code checks it with
//!   `abi::text::line_text`, the stage adding `path:LINE`; `line_str` on a whole record).
//! - [`csv_file`]: one record per data row, holding the schema's columns in schema
//!   order, each as `u32 LE csv column (from 0) | u32 LE length | the unquoted bytes`;
//!   `abi::text::csv_columns` and `abi::text::csv_field` (generated code; `csv_value` on a
//!   whole record) read it back.
//!
//! Both decompress GZIP and ZLIB files with the TFRecord reader's layer; `Auto` decides
//! by the file name (`.gz`, `.zlib`), else by the GZIP magic `1f 8b`, else reads the
//! file as is ([`detect_text_compression`](crate::tfrecord::detect_text_compression)).
//! [`OpenLines`] and [`OpenCsv`] open each path of a file list for an interleave.
//!
//! [`tokenize`]: Hugging Face tokenizers (`tokenizer.json`) for the `tokenize` operation.
//!
//! [`Record`]: crate::stage::Record
//! [`Origin`]: crate::stage::Origin

mod csv;
mod lines;
pub mod tokenize;

use crate::storage::Source;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use csv::{CsvFile, CsvIter, OpenCsv, csv_file};
pub use lines::{LinesFile, LinesIter, OpenLines, lines_file};

use crate::error::{Error, Result};
use crate::tfrecord::{self, Compression, Input};

/// How to read a text file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextOptions {
    /// Whole-file compression; `Auto` (the default) decides by the name, else by the
    /// GZIP magic.
    pub compression: Compression,
}

/// How to read a CSV file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// Whole-file compression; `Auto` (the default) decides by the name, else by the
    /// GZIP magic.
    pub compression: Compression,
    /// Whether the first row names the columns. With a header, each schema column is
    /// found by name and every row must have as many fields as the header; without
    /// one, schema column `i` is CSV column `i` and a row needs at least as many fields
    /// as the schema has columns.
    pub header: bool,
    /// The byte between fields: an ASCII character other than `"`, `\r` and `\n`
    /// (`,` by default).
    pub delimiter: u8,
    /// The schema's field names, in schema order.
    pub columns: Arc<[String]>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            compression: Compression::Auto,
            header: false,
            delimiter: b',',
            columns: Arc::from(Vec::new()),
        }
    }
}

/// The buffer a text reader reads through.
const BUFFER: usize = 64 * 1024;

/// A text file being read: the decompressed bytes through a buffer, and the path that
/// names the file in errors.
struct TextInput {
    reader: BufReader<Input<BufReader<Source>>>,
    path: PathBuf,
    compressed: bool,
}

impl std::fmt::Debug for TextInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextInput").field("path", &self.path).field("compressed", &self.compressed).finish()
    }
}

impl TextInput {
    fn open(path: &Path, compression: Compression) -> Result<TextInput> {
        let (input, resolved, _) =
            tfrecord::open_input_sniffed(path, compression, tfrecord::detect_text_compression)
                .map_err(|e| Error::io(path, e))?;
        Ok(TextInput {
            // Reads of the outer buffer's size bypass the inner one (plain files), and the
            // decompressors read through the inner one.
            reader: BufReader::with_capacity(BUFFER, input),
            path: path.to_path_buf(),
            compressed: resolved != Compression::None,
        })
    }
}

/// A read error at `line` (from 1) of `path`: a damaged compressed stream is bad data at
/// that line, anything else the operating system's error.
fn read_error(path: &Path, compressed: bool, line: u64, e: io::Error) -> Error {
    let stream_error = matches!(
        e.kind(),
        io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput | io::ErrorKind::UnexpectedEof
    );
    if compressed && stream_error {
        Error::Text {
            path: path.to_path_buf(),
            line,
            column: None,
            message: format!("damaged compressed stream: {e}"),
        }
    } else {
        Error::io(path, e)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Writing test files, plain or compressed.

    use std::io::Write;
    use std::path::{Path, PathBuf};

    use flate2::write::{GzEncoder, ZlibEncoder};

    use crate::stage::{Ctx, DataIter, Dataset, Record};

    /// Writes `bytes` to `dir/name`, compressed as the name says (`.gz`, `.zlib`).
    pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        let level = flate2::Compression::default();
        let data = if name.ends_with(".gz") {
            let mut e = GzEncoder::new(Vec::new(), level);
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        } else if name.ends_with(".zlib") {
            let mut e = ZlibEncoder::new(Vec::new(), level);
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        } else {
            bytes.to_vec()
        };
        std::fs::write(&path, data).unwrap();
        path
    }

    /// Every record of one pass started after `skip` records, or the first error.
    pub fn read<D: Dataset<Item = Record>>(ds: &D, skip: u64) -> crate::Result<Vec<Record>> {
        let ctx = Ctx::new(&Default::default());
        let mut it = ds.iter_from(&ctx, skip)?;
        let mut out = Vec::new();
        while let Some(r) = it.next()? {
            out.push(r);
        }
        Ok(out)
    }
}
