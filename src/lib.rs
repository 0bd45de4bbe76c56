//! Sluice: a declarative input-pipeline compiler for ML training.
//!
//! This facade re-exports the runtime (TFRecord and `tf.train.Example` I/O, stages and
//! the executor), `include_pipelines!` (the code `build.rs` generated from `.pipe` files)
//! and the `pipeline!` macro (pipelines written inline or read from a `.pipe` file at
//! compile time). The `sluice` command-line tool (`src/main.rs`) is built from this package too, and so is the runner
//! its `sluice run` command links generated pipelines with (`__private::runner`).
//!
//! With the `torch` feature, `sluice::torch` is the runtime's tch integration: a
//! generated batch as tensors (`TensorBatch`), each batch split across devices ahead of
//! the loop (`device_batches`), and the data-parallel `Trainer`.

/// The C ABI of the per-pipeline libraries the Python package loads (`sluice.Pipeline`),
/// and [`python_module!`] that writes it.
#[doc(hidden)]
pub mod python;
/// Reached as `__private::runner`; public only because a re-export must be.
#[doc(hidden)]
pub mod runner;

pub use sluice_macros::pipeline;
pub use sluice_runtime as runtime;
#[cfg(feature = "torch")]
pub use sluice_runtime::torch;
pub use sluice_runtime::{CorruptKind, Error, Result, dist, example, rng, synth, tfrecord};

/// Includes the Rust that `sluice_compiler::build::compile` generated (in `build.rs`)
/// from `NAME.pipe`: one module per pipeline of the file.
#[macro_export]
macro_rules! include_pipelines {
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/sluice/", $name, ".rs"));
    };
}

/// The codegen ABI: the only paths generated code names (`::sluice::__private::*`).
///
/// Generated code depends on the runtime through this module alone, so the runtime can
/// reorganise its public modules without breaking compiled pipelines.
#[doc(hidden)]
pub mod __private {
    pub use crate::runner;
    /// The global allocator of generated runner binaries (`sluice run`).
    pub use mimalloc::MiMalloc;
    pub use sluice_runtime::abi::ops::{Array, Cast, Flip};
    pub use sluice_runtime::abi::parse::{ExampleView, ParseError};
    pub use sluice_runtime::abi::{self, FromParam, Rows, located, ops, param, parse};
    /// Called first by generated runner binaries: 4 KiB pages, not huge ones.
    pub use sluice_runtime::column::recycle::small_pages;
    pub use sluice_runtime::column::{
        AnyColumn, Append, Batchable, ColumnBuilder, ColumnError, Columns, Dense, IntoAnyColumn,
        NamedColumns, PadLen, PadShape, Ragged, Tensor, Text, check_rows,
    };
    pub use sluice_runtime::example;
    pub use sluice_runtime::rng::Philox;
    // A batch's rows split across the pipeline's pool (`map_rows_*` of generated code).
    pub use sluice_runtime::stage::rows;
    pub use sluice_runtime::stage::{
        Buffer, CacheCodec, Dataset, Element, FileContents, Files, GlobalShuffle, Indexed, OpenTfRecord,
        Parallelism, PipelineState, ReadFileOptions, ReadFiles, Record, RecordBatch, Remainder,
        RuntimeOptions, auto_cycle, available_cores, files, fingerprint, from_vec, global_shuffle,
        range_step, read_files, sample_from, shuffle_batches, skippable, tfrecord_batches, tfrecords,
    };
    // The combining stages (`zip`, `concatenate`, `take_while`).
    pub use sluice_runtime::stage::{BucketOptions, bucket_by_length};
    pub use sluice_runtime::stage::{Overflow, PackOptions, PackedRow, pack};
    pub use sluice_runtime::stage::{concatenate, take_while, zip, zip_batches};
    // `flat_map` and the helpers of its `slices` source.
    pub use sluice_runtime::stage::{flat_map, slice_len, tensor_len, tensor_rows};
    // `unbatch` of fields: each record split into its rows.
    pub use sluice_runtime::stage::{row_count, unbatch_fields};
    pub use sluice_runtime::text::{CsvOptions, OpenCsv, OpenLines, TextOptions, csv_file, lines_file};
    // `parquet(files)`: in the runners of pipelines that read Parquet (feature `parquet`);
    // a `shard` moved into the reader is a `RowGroupShard`, its files from `parquet_parts`.
    #[cfg(feature = "parquet")]
    pub use sluice_runtime::parquet::{
        Bound, Cmp, OpenParquet, ParquetOptions, RowGroupShard, RowGroupTest, TableColumns, parquet_columns,
        parquet_global_shuffle, parquet_parts,
    };
    // The columns of table rows (`parquet`, `webdataset`) and the `webdataset` source.
    pub use sluice_runtime::abi::table::{ColumnShape, ColumnType, TableColumn};
    pub use sluice_runtime::tfrecord;
    pub use sluice_runtime::tfrecord::{Compression, CorruptPolicy, ReaderOptions};
    pub use sluice_runtime::webdataset::{OpenWebDataset, WebDatasetOptions};
    pub use sluice_runtime::{BoxError, Error, Result};
}
