//! [`StageKind`]: which stage a signature is, the one thing the lowering and the checks
//! match a stage on (its name is for messages and lookup only).

/// Which stage a [`StageSig`](super::stages::StageSig) is: what the lowering and the checks match on, never the
/// stage's name as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageKind {
    /// `files`.
    Files,
    /// `range`.
    Range,
    /// `tfrecord`.
    Tfrecord,
    /// `tfrecords`.
    Tfrecords,
    /// `text_lines`.
    TextLines,
    /// `csv`.
    Csv,
    /// `parquet`.
    Parquet,
    /// `webdataset`.
    WebDataset,
    /// `read_file`.
    ReadFile,
    /// `interleave`.
    Interleave,
    /// `map`.
    Map,
    /// `filter`.
    Filter,
    /// `select`.
    Select,
    /// `sample_from`.
    SampleFrom,
    /// `zip`.
    Zip,
    /// `concatenate`.
    Concatenate,
    /// `enumerate`.
    Enumerate,
    /// `take_while`.
    TakeWhile,
    /// `flat_map`.
    FlatMap,
    /// `shuffle`.
    Shuffle,
    /// `batch`.
    Batch,
    /// `padded_batch`.
    PaddedBatch,
    /// `unbatch`.
    Unbatch,
    /// `bucket_by_length`.
    BucketByLength,
    /// `pack`.
    Pack,
    /// `window`.
    Window,
    /// `repeat`.
    Repeat,
    /// `take`.
    Take,
    /// `skip`.
    Skip,
    /// `shard`.
    Shard,
    /// `cache`.
    Cache,
    /// `prefetch`.
    Prefetch,
}

impl StageKind {
    /// Whether the stage starts a pipeline (reads files or ranges, or takes other pipelines).
    pub fn is_source(self) -> bool {
        use StageKind::*;
        matches!(
            self,
            Files
                | Tfrecords
                | TextLines
                | Csv
                | Parquet
                | WebDataset
                | Range
                | SampleFrom
                | Zip
                | Concatenate
        )
    }

    /// Whether the stage takes other pipelines by name (`sample_from(a, b, ...)`, `zip`,
    /// `concatenate`).
    pub fn takes_pipelines(self) -> bool {
        matches!(self, StageKind::SampleFrom | StageKind::Zip | StageKind::Concatenate)
    }
}
