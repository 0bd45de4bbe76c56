//! The shards `sluice run --output DIR` writes: one pass of a pipeline's elements, each
//! element one record of a shard, in one of three formats ([`Format`]):
//!
//! - `tfrecord` (the default): a `tf.train.Example` per element (a serialized record as
//!   it is), through [`tfrecord::ShardWriter`]: `.tfrecord` with its `.idx` sidecar, or
//!   `.tfrecord.gz`;
//! - `parquet` (feature `parquet`): a row per element, a column per field, row groups of
//!   at most `row_group` rows (and about 64 MiB), compressed as asked ([`parquet`]);
//! - `webdataset`: a sample per element, a tar member `KEY.FIELD` per field
//!   ([`webdataset`]), the tar gzip'ed or not.
//!
//! Every shard is written as `NAME.partial` and renamed when complete (an object: a
//! multipart upload that appears whole when completed), so a failed export never leaves
//! a file that looks whole.

use std::path::{Path, PathBuf};

use crate::abi::export::{Features, ToExample};
use crate::error::{Error, Result};
use crate::tfrecord::{self, Compression, ShardWriter};

#[cfg(feature = "parquet")]
pub mod parquet;
pub mod webdataset;

/// What `--output` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// TFRecord shards of `tf.train.Example`s: `None` or `Gzip`.
    TfRecord(Compression),
    /// Parquet files.
    Parquet { compression: ParquetCompression, row_group: usize },
    /// WebDataset tar shards, gzip'ed or not.
    WebDataset { gzip: bool },
}

/// The compressions a Parquet file's pages are written with (`--compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParquetCompression {
    None,
    Snappy,
    Zstd,
    Gzip,
    Lz4,
}

/// Rows per Parquet row group unless `--row-group` says otherwise.
pub const DEFAULT_ROW_GROUP: usize = 65_536;

impl Format {
    /// The format `--format NAME [--compression C] [--row-group N]` asks for, or what is
    /// wrong with the flags.
    pub fn parse(
        name: &str,
        compression: Option<&str>,
        row_group: Option<usize>,
    ) -> std::result::Result<Format, String> {
        let refuse = |c: &str, allowed: &str| {
            Err(format!("`--compression {c}` with `--format {name}`: expected {allowed}"))
        };
        if row_group.is_some() && name != "parquet" {
            return Err(format!("`--row-group` is for `--format parquet`, not `{name}`"));
        }
        match name {
            "tfrecord" => match compression.unwrap_or("none") {
                "none" => Ok(Format::TfRecord(Compression::None)),
                "gzip" => Ok(Format::TfRecord(Compression::Gzip)),
                c => refuse(c, "`none` or `gzip`"),
            },
            "parquet" => {
                let compression = match compression.unwrap_or("snappy") {
                    "none" => ParquetCompression::None,
                    "snappy" => ParquetCompression::Snappy,
                    "zstd" => ParquetCompression::Zstd,
                    "gzip" => ParquetCompression::Gzip,
                    "lz4" => ParquetCompression::Lz4,
                    c => return refuse(c, "`none`, `snappy`, `zstd`, `gzip` or `lz4`"),
                };
                match row_group.unwrap_or(DEFAULT_ROW_GROUP) {
                    0 => Err("`--row-group 0`: expected a positive number of rows".into()),
                    row_group => Ok(Format::Parquet { compression, row_group }),
                }
            }
            "webdataset" => match compression.unwrap_or("none") {
                "none" => Ok(Format::WebDataset { gzip: false }),
                "gzip" => Ok(Format::WebDataset { gzip: true }),
                c => refuse(c, "`none` or `gzip`"),
            },
            other => Err(format!("`--format {other}`: expected `tfrecord`, `parquet` or `webdataset`")),
        }
    }

    /// The file name's ending: `.tfrecord`, `.tfrecord.gz`, `.parquet`, `.tar`, `.tar.gz`.
    pub fn extension(&self) -> &'static str {
        match self {
            Format::TfRecord(Compression::Gzip) => ".tfrecord.gz",
            Format::TfRecord(_) => ".tfrecord",
            Format::Parquet { .. } => ".parquet",
            Format::WebDataset { gzip: false } => ".tar",
            Format::WebDataset { gzip: true } => ".tar.gz",
        }
    }

    /// The format's name, as `--format` takes it.
    pub fn name(&self) -> &'static str {
        match self {
            Format::TfRecord(_) => "tfrecord",
            Format::Parquet { .. } => "parquet",
            Format::WebDataset { .. } => "webdataset",
        }
    }
}

/// Why an element was not written.
#[derive(Debug)]
pub enum WriteError {
    /// The element is no record (a batch, a path, a serialized record where fields are
    /// needed): what it is.
    NotRecord(&'static str),
    /// A data or write error.
    Failed(Error),
}

impl From<Error> for WriteError {
    fn from(e: Error) -> Self {
        WriteError::Failed(e)
    }
}

/// One shard being written (see the [module](self)).
#[derive(Debug)]
pub struct OutputShard {
    kind: Kind,
    records: u64,
    path: PathBuf,
}

#[derive(Debug)]
enum Kind {
    /// The writer, a buffer for the serialized record, and whether the shard gets an index
    /// (uncompressed).
    TfRecord(Box<ShardWriter>, Vec<u8>, bool),
    #[cfg(feature = "parquet")]
    Parquet(Box<parquet::ParquetShard>),
    WebDataset(webdataset::TarShard),
}

/// Starts the shard `path` in `format`.
pub fn create(path: &Path, format: Format) -> Result<OutputShard> {
    let kind = match format {
        Format::TfRecord(c) => {
            Kind::TfRecord(Box::new(tfrecord::create_shard(path, c)?), Vec::new(), c == Compression::None)
        }
        #[cfg(feature = "parquet")]
        Format::Parquet { compression, row_group } => {
            Kind::Parquet(Box::new(parquet::ParquetShard::create(path, compression, row_group)?))
        }
        #[cfg(not(feature = "parquet"))]
        Format::Parquet { .. } => {
            return Err(Error::Invalid(
                "`--format parquet`: this runner was built without sluice's `parquet` feature".into(),
            ));
        }
        Format::WebDataset { gzip } => Kind::WebDataset(webdataset::TarShard::create(path, gzip)?),
    };
    Ok(OutputShard { kind, records: 0, path: path.to_path_buf() })
}

impl OutputShard {
    /// Writes `element`, the pass's element number `index` (which names it in errors and
    /// keys a WebDataset sample that has no `__key__`).
    pub fn write(&mut self, element: &dyn ToExample, index: u64) -> std::result::Result<(), WriteError> {
        match &mut self.kind {
            Kind::TfRecord(w, buf, _) => {
                buf.clear();
                element.to_example(buf).map_err(WriteError::NotRecord)?;
                w.write_record(buf)?;
            }
            #[cfg(feature = "parquet")]
            Kind::Parquet(w) => w.write(fields(element)?, index)?,
            Kind::WebDataset(w) => w.write(fields(element)?, index)?,
        }
        self.records += 1;
        Ok(())
    }

    /// Elements written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The shard's own name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Completes the shard and renames it into place (an uncompressed TFRecord shard
    /// together with its index).
    pub fn finish(self) -> Result<()> {
        match self.kind {
            Kind::TfRecord(w, _, true) => w.finish_indexed().map(drop),
            Kind::TfRecord(w, _, false) => w.finish(),
            #[cfg(feature = "parquet")]
            Kind::Parquet(w) => w.finish(),
            Kind::WebDataset(w) => w.finish(),
        }
    }
}

fn fields(element: &dyn ToExample) -> std::result::Result<Features, WriteError> {
    let mut f = Features::new();
    element.fields(&mut f).map_err(WriteError::NotRecord)?;
    Ok(f)
}
