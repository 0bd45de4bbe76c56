//! How records are held in files and parsed into fields: the formats of the readers
//! ([`Interleave`]: TFRecord, text lines, CSV rows) and of the parse a map starts with.

use super::options::{Compression, CorruptPolicy};
use super::plan::{ArgValue, Plan};

/// How the files of an [`Interleave`] hold their records.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordFormat {
    /// TFRecord files: each record one serialized message.
    TfRecord,
    /// Text: each line one record (`text_lines`).
    Lines,
    /// CSV (RFC 4180): each row one record, its schema columns picked out (`csv`).
    Csv(CsvFormat),
    /// Parquet: each row one record holding the columns read (`parquet`).
    Parquet(ParquetFormat),
    /// WebDataset tar shards: each sample one record holding the fields read
    /// (`webdataset`; `tests` stay empty).
    WebDataset(ParquetFormat),
}

/// The options of a `parquet` source.
#[derive(Debug, Clone, PartialEq)]
pub struct ParquetFormat {
    /// The columns read (the projection), each a schema field: the schema's, less those
    /// `prune_fields` found unused. The parse reads the same, in the same order.
    pub columns: Vec<super::element::FieldType>,
    /// The schema fields with a default (a null in them takes it).
    pub defaults: Vec<String>,
    /// The conjuncts of the filter right after the reader that row-group statistics can
    /// decide (`skip_row_groups` sets them): a row group none of whose rows can pass is
    /// not read.
    pub tests: Vec<ColumnTest>,
    /// A `shard` moved into the reader (`push_shard_down`): it reads only the row groups
    /// whose index in the global list (every file's row groups, file after file in the
    /// order of the paths) is `index` modulo `num_shards`. Always `None` for `webdataset`.
    pub shard: Option<RowGroupShard>,
}

/// `shard(num_shards, index)` taken into a `parquet` reader: this worker's row groups.
#[derive(Debug, Clone, PartialEq)]
pub struct RowGroupShard {
    /// Workers.
    pub num_shards: ArgValue,
    /// This worker, from 0.
    pub index: ArgValue,
    /// The `shard` stage it was written as (W0210 names it).
    pub span: crate::span::Span,
}

impl std::fmt::Display for RowGroupShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "row_groups(num_shards: {}, index: {})", self.num_shards, self.index)
    }
}

/// `column OP constant`, a conjunct of a filter on a Parquet column.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnTest {
    /// The column.
    pub column: String,
    /// `<`, `<=`, `>`, `>=` or `==`.
    pub op: super::expr::BinaryOp,
    /// The constant.
    pub value: TestValue,
}

/// A [`ColumnTest`]'s constant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TestValue {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
}

impl std::fmt::Display for ColumnTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::expr::BinaryOp as B;
        let op = match self.op {
            B::Lt => "<",
            B::Le => "<=",
            B::Gt => ">",
            B::Ge => ">=",
            _ => "==",
        };
        match self.value {
            TestValue::Int(i) => write!(f, "{} {op} {i}", self.column),
            TestValue::Float(x) => write!(f, "{} {op} {x:?}", self.column),
        }
    }
}

/// The options of a `csv` source.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvFormat {
    /// The first row of each file names the columns.
    pub header: bool,
    /// The field separator.
    pub delimiter: u8,
    /// The schema's fields, in order: the columns each row is read into.
    pub columns: Vec<String>,
}

impl RecordFormat {
    /// Its name in `explain` (`reader=...`).
    pub fn name(&self) -> String {
        match self {
            RecordFormat::TfRecord => "tfrecord".into(),
            RecordFormat::Lines => "text_lines".into(),
            RecordFormat::Csv(c) => {
                format!("csv(header: {}, delimiter: {:?})", c.header, char::from(c.delimiter))
            }
            RecordFormat::Parquet(p) => {
                let names: Vec<&str> = p.columns.iter().map(|c| c.name.as_str()).collect();
                let tests: Vec<String> = p.tests.iter().map(ToString::to_string).collect();
                let mut text = format!("parquet(columns: [{}]", names.join(", "));
                if let Some(s) = &p.shard {
                    text += &format!(", shard: {s}");
                }
                if !tests.is_empty() {
                    text += &format!(", skip_row_groups: [{}]", tests.join(", "));
                }
                text + ")"
            }
            RecordFormat::WebDataset(w) => {
                let names: Vec<&str> = w.columns.iter().map(|c| c.name.as_str()).collect();
                format!("webdataset(fields: [{}])", names.join(", "))
            }
        }
    }
}

/// How a map's [`MapOp::Parse`](super::plan::MapOp::Parse) reads a record into fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseFormat {
    /// A serialized `tf.train.Example` (`parse_example`).
    Example,
    /// A line of text into `line: str` (after `text_lines`).
    Line,
    /// A CSV row into the schema's columns (after `csv`).
    Csv,
    /// A table row into the columns the reader read, in its order (after `parquet`).
    Table,
    /// A serialized `tf.train.SequenceExample` (`parse_sequence_example`): the schema's
    /// context features and its `sequence` feature lists.
    SequenceExample,
}

/// Reads the records of each input file (`interleave` with a `tfrecord` reader, or
/// `tfrecords`; a `tfrecord` right after `files` reads them one after another; the
/// lines of `text_lines` and the rows of `csv` the same way).
#[derive(Debug, Clone, PartialEq)]
pub struct Interleave {
    /// The file paths.
    pub input: Box<Plan>,
    /// How the files hold their records.
    pub format: RecordFormat,
    /// Files read at once.
    pub cycle_length: ArgValue,
    /// Records taken from a file before moving to the next.
    pub block_length: ArgValue,
    /// Worker threads.
    pub parallel: ArgValue,
    /// Keep the order.
    pub deterministic: bool,
    /// Whole-file compression.
    pub compression: Compression,
    /// What to do with a corrupt record.
    pub on_corrupt: CorruptPolicy,
    /// Verify payload checksums.
    pub verify_crc: bool,
}
