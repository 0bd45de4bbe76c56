//! The exec nodes of the physical plan: one per stage as it runs, holding every physical
//! choice (which stages run fused into which, reader options as typed values, whether a
//! map's input already comes in batches). The code generator prints each as the
//! runtime stage it names, and nothing else: it makes no choice of its own.

use crate::ir::expr::Expr;
use crate::ir::kernel::Kernel;
pub use crate::ir::options::{Compression, CorruptPolicy, Labels, Remainder};
use crate::ir::plan::{
    ArgValue, Concatenate, Element, FieldType, MapOp, PrefetchDepth, RustKind, SampleFrom, Zip,
};
use crate::ir::types::Value;

/// How a TFRecord reader opens and checks its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Whole-file compression.
    pub compression: Compression,
    /// What a corrupt record does.
    pub on_corrupt: CorruptPolicy,
    /// Verify payload checksums.
    pub verify_crc: bool,
}

/// A map function's input, operations and output, as the code generator writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct MapFn {
    /// What it takes.
    pub input: Element,
    /// Its operations, in order.
    pub ops: Vec<MapOp>,
    /// What it makes (for a map + batch: one row of the batch).
    pub output: Element,
    /// `on_error: skip`: an element it fails on is dropped and counted (for a map over
    /// batches, the whole batch: the map's element). Never on a map + batch's row
    /// function or a map in the reader threads (the physical plan keeps them apart).
    pub skip_errors: bool,
}

impl MapFn {
    /// Whether it draws random numbers (its elements need their epoch and index).
    pub fn is_random(&self) -> bool {
        self.ops.iter().any(MapOp::is_random)
    }

    /// Whether, run on a batch of records (as a map over such batches, or as the row
    /// function of a map + batch), it fills fixed-size columns row range by row range
    /// ([`fills_columns_by_rows`](crate::ir::fusion::fills_columns_by_rows)).
    pub fn fills_columns_by_rows(&self) -> bool {
        let (input, output) = match (&self.input, &self.output) {
            (Element::Batch(i), Element::Batch(o)) => (&**i, &**o),
            (i, o) => (i, o),
        };
        crate::ir::fusion::fills_columns_by_rows(input, &self.ops, output)
    }
}

/// One stage of the physical plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Exec {
    /// The paths matching a glob, optionally shuffled each epoch.
    Files {
        /// The glob.
        pattern: ArgValue,
        /// Shuffle the list each epoch with this seed.
        shuffle_seed: Option<ArgValue>,
    },
    /// `range(start, end, step)`: the values as elements with one field `value: i64`.
    Range(crate::ir::plan::Range),
    /// Each input path's whole file as one element (`read_file`).
    ReadFile {
        /// Label each file by its folder (`dir`) or not.
        labels: Labels,
        /// What a missing or unreadable file does.
        on_error: CorruptPolicy,
    },
    /// Mixes other pipelines of the file (their own plans run beneath it).
    SampleFrom(SampleFrom),
    /// Reads the records of the input files, `cycle` at a time.
    Interleave {
        /// How the files hold their records (TFRecord, lines, CSV rows).
        format: crate::ir::plan::RecordFormat,
        /// Reader options (for text, only the compression applies).
        reader: ReaderOptions,
        /// Files read at once.
        cycle: ArgValue,
        /// Records taken from a file before moving to the next.
        block: ArgValue,
        /// Reader threads.
        parallel: ArgValue,
        /// Keep the order.
        deterministic: bool,
    },
    /// `shuffle(global)` in place of the reader under it: every record of the indexed
    /// files, in a seeded permutation per epoch, read through the files' indexes; or
    /// every row of Parquet files, gathered a window of positions at a time.
    GlobalShuffle {
        /// Reader options (only the corrupt-record policy applies, to TFRecord).
        reader: ReaderOptions,
        /// The columns of a `parquet` reader, whose rows are shuffled (`None`: TFRecord
        /// records through the files' indexes).
        table: Option<crate::ir::formats::ParquetFormat>,
        /// The positions read together (`None`: the default: about 8 MiB of records, or
        /// `PARQUET_SHUFFLE_WINDOW` rows, each window one pass over the row groups).
        window: Option<ArgValue>,
        /// The permutation's seed.
        seed: Option<ArgValue>,
        /// A new permutation each epoch.
        reshuffle_each_epoch: bool,
        /// A `shard` (keep or drop) right after it, fused: each worker reads only its
        /// block of the permutation. `(num_shards, index, drop)`.
        shard: Option<(ArgValue, ArgValue, bool)>,
    },
    /// A non-deterministic TFRecord interleave straight into batches of its records: each
    /// reader thread fills its own batch and runs the maps that follow on it in place
    /// (the first may be a fused map + batch), handing over whole batches.
    ReadBatches {
        /// Reader options.
        reader: ReaderOptions,
        /// Files read at once.
        cycle: ArgValue,
        /// Reader threads.
        parallel: ArgValue,
        /// Records per batch.
        size: ArgValue,
        /// Drop a last, partial batch.
        drop_remainder: bool,
        /// The maps run in the reader threads, in order (none draws random numbers).
        maps: Vec<ReaderMap>,
    },
    /// `parquet(files)` straight into `batch(n)` of its columns, every one a number or a
    /// fixed-size list of them with no default: the files read one after another, each
    /// Arrow array copied into its batch column (`parquet_columns`), no row in between.
    ReadColumns {
        /// The columns read.
        format: crate::ir::formats::ParquetFormat,
        /// Rows per batch.
        size: ArgValue,
        /// Drop a last, partial batch.
        drop_remainder: bool,
        /// The batch's row (the reader's columns, as the parse would make them).
        output: Element,
    },
    /// A per-element map (with the filter fused into it, if any).
    Map {
        /// The function.
        f: MapFn,
        /// Worker threads.
        parallel: ArgValue,
        /// Keep the order.
        deterministic: bool,
        /// A fused filter's predicate parts, tested on the mapped element.
        filter: Option<Vec<Expr>>,
    },
    /// `batch` of serialized records and the map over each batch, as one stage: the map's
    /// workers gather each batch's records, not the thread that pulls them.
    ChunkedMap {
        /// Records per batch.
        size: ArgValue,
        /// Drop a last, partial batch.
        drop_remainder: bool,
        /// The map over a batch of records.
        f: MapFn,
        /// Worker threads.
        parallel: ArgValue,
        /// Keep the order.
        deterministic: bool,
    },
    /// A fused map + batch: workers write mapped elements straight into batch columns.
    MapBatch {
        /// The function (its output is one row).
        f: MapFn,
        /// Elements per batch.
        size: ArgValue,
        /// Drop a last, partial batch.
        drop_remainder: bool,
        /// Worker threads.
        parallel: ArgValue,
        /// Keep the order.
        deterministic: bool,
        /// Its input already comes in batches (a `ReadBatches` made them).
        batched: bool,
    },
    /// Keeps the elements whose predicate holds.
    Filter {
        /// The elements.
        input: Element,
        /// The predicate's parts, all of which must hold.
        conditions: Vec<Expr>,
    },
    /// Rust code in `map` or `filter` (`pipeline!`).
    Rust {
        /// The elements (records with fields).
        input: Element,
        /// A map or a filter.
        kind: RustKind,
        /// The code as written.
        code: String,
        /// Its tokens' index in the pipeline's table of Rust code.
        code_index: usize,
    },
    /// Keeps some fields.
    Select {
        /// The fields in.
        from: Vec<FieldType>,
        /// The fields out, in order.
        to: Vec<FieldType>,
        /// How deep in batches the fields are: 0 for records, 1 for batches of them
        /// (after `batch`, `window`, `bucket_by_length`), 2 for batches of batches, …
        depth: usize,
    },
    /// `pack`: token sequences into fixed-length rows (the runtime's `pack`).
    Pack {
        /// The fields in.
        from: Vec<FieldType>,
        /// Length, fields, window, overflow.
        spec: crate::ir::pack::PackSpec,
    },
    /// `bucket_by_length`: padded batches by length bucket (the runtime's
    /// `bucket_by_length`).
    BucketByLength {
        /// The fields in (each batch's rows).
        from: Vec<FieldType>,
        /// Length, boundaries, batch sizes, padding, remainder.
        spec: crate::ir::bucket::BucketSpec,
    },
    /// A shuffle buffer.
    Shuffle {
        /// Buffer size in elements.
        buffer: ArgValue,
        /// Seed.
        seed: Option<ArgValue>,
        /// New order each epoch.
        reshuffle_each_epoch: bool,
    },
    /// A shuffle buffer of serialized records straight into batches of them, over the
    /// batches of a `ReadBatchesExec` (the runtime's `shuffle_batches`): the order of
    /// `shuffle` then `batch`, the records held end to end in one slab.
    ShuffleBatches {
        /// Buffer size in records.
        buffer: ArgValue,
        /// Seed.
        seed: Option<ArgValue>,
        /// New order each epoch.
        reshuffle_each_epoch: bool,
        /// Records per batch.
        size: ArgValue,
        /// Drop a last, partial batch.
        drop_remainder: bool,
    },
    /// A shuffle buffer refilled across epochs.
    ShuffleRepeat {
        /// Buffer size in elements.
        buffer: ArgValue,
        /// Seed.
        seed: Option<ArgValue>,
        /// Epochs (`None`: forever).
        count: Option<ArgValue>,
    },
    /// Columnar batches (padded or not), or chunks of elements without fields.
    Batch {
        /// The elements batched.
        input: Element,
        /// Elements per batch.
        size: ArgValue,
        /// Drop a last, partial batch.
        drop_remainder: bool,
        /// For `padded_batch`: pad to this length (`None`: to the longest).
        padded: Option<Option<ArgValue>>,
        /// For `padded_batch(pad_to_multiple: k)`: the longest rounded up to a multiple of `k`.
        pad_to_multiple: Option<ArgValue>,
        /// For `padded_batch(padding_values: ...)`: what each padded field pads with.
        padding_values: crate::ir::bucket::PaddingValues,
    },
    /// Batches back to their rows.
    Unbatch,
    /// Records whose fields are lists or tensors, each split along its first dimension
    /// into that many records (`unbatch` of fields; the runtime's `unbatch_fields`).
    UnbatchFields {
        /// The fields in.
        from: Vec<FieldType>,
        /// The fields out: each without its leading dimension.
        to: Vec<FieldType>,
    },
    /// Passes again (`None`: forever).
    Repeat(Option<ArgValue>),
    /// The first elements.
    Take(ArgValue),
    /// All but the first elements.
    Skip(ArgValue),
    /// One worker's share.
    Shard {
        /// Workers.
        num_shards: ArgValue,
        /// This worker.
        index: ArgValue,
        /// How the last round is dealt.
        remainder: Remainder,
    },
    /// Caches the first pass (in memory, or in a file).
    Cache {
        /// The elements cached.
        input: Element,
        /// The file (`None`: memory).
        file: Option<ArgValue>,
    },
    /// A producer thread and a bounded queue (`auto`: depth chosen at run time).
    Prefetch(PrefetchDepth),
    /// Adds `index: i64`, the position in the pass plus `start` (`enumerate`).
    Enumerate {
        /// The fields in.
        from: Vec<FieldType>,
        /// The fields out (`index` last).
        to: Vec<FieldType>,
        /// The first index.
        start: ArgValue,
    },
    /// The elements while the predicate holds; the pass ends at the first that fails.
    TakeWhile {
        /// The elements.
        input: Element,
        /// The predicate's parts, all of which must hold.
        conditions: Vec<Expr>,
    },
    /// Merges the fields of other pipelines' elements, position by position (their own
    /// plans run beneath it).
    Zip(Zip),
    /// Yields other pipelines one after another (their own plans run beneath it).
    Concatenate(Concatenate),
    /// For each element (fields `from`), the inner chain's stages, run to the end before
    /// the next element: its first stage an [`Exec::InnerSource`].
    FlatMap {
        /// The input's fields.
        from: Vec<FieldType>,
        /// The inner chain, source first.
        inner: Vec<super::ExecNode>,
    },
    /// The source of a `flat_map`'s inner chain, made from the element `x`.
    InnerSource(crate::ir::flat_map::InnerSource),
    /// Windows of the input, each a columnar batch (`window`; the runtime's `window`).
    Window {
        /// The fields batched.
        from: Vec<FieldType>,
        /// Elements per window.
        size: ArgValue,
        /// Elements from one window's first to the next one's.
        shift: ArgValue,
        /// Elements between two rows of a window.
        stride: ArgValue,
        /// Only full windows.
        drop_remainder: bool,
    },
}

/// A map run in the reader threads of a [`Exec::ReadBatches`].
#[derive(Debug, Clone, PartialEq)]
pub enum ReaderMap {
    /// The map of a fused map + batch, on the batch of records.
    MapBatch(MapFn),
    /// A map over the batches.
    Map(MapFn),
}

/// The tail of a `device cuda` pipeline: kernels on the batches' columns, fed by the
/// runtime's device feed (its CPU twin where there is no GPU).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceTailExec {
    /// The batches the CPU makes.
    pub input: Element,
    /// The operations moved to the device, in order (what the CPU twin runs).
    pub ops: Vec<MapOp>,
    /// One kernel per column they change.
    pub kernels: Vec<Kernel>,
    /// What comes out.
    pub output: Element,
}

impl Exec {
    /// The node's name in `explain` (`InterleaveExec`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Exec::Files { .. } => "FilesExec",
            Exec::Range(_) => "RangeExec",
            Exec::ReadFile { .. } => "ReadFileExec",
            Exec::SampleFrom(_) => "SampleFromExec",
            Exec::Interleave { .. } => "InterleaveExec",
            Exec::GlobalShuffle { .. } => "GlobalShuffleExec",
            Exec::ReadBatches { .. } => "ReadBatchesExec",
            Exec::ReadColumns { .. } => "ReadColumnsExec",
            Exec::Map { filter: None, .. } => "MapExec",
            Exec::Map { filter: Some(_), .. } => "MapFilterExec",
            Exec::ChunkedMap { .. } => "ChunkedMapExec",
            Exec::MapBatch { .. } => "MapBatchExec",
            Exec::Filter { .. } => "FilterExec",
            Exec::Rust { kind: RustKind::Map, .. } => "RustMapExec",
            Exec::Rust { kind: RustKind::Filter, .. } => "RustFilterExec",
            Exec::Select { .. } => "SelectExec",
            Exec::Pack { .. } => "PackExec",
            Exec::BucketByLength { .. } => "BucketByLengthExec",
            Exec::Shuffle { .. } => "ShuffleExec",
            Exec::ShuffleRepeat { .. } => "ShuffleRepeatExec",
            Exec::ShuffleBatches { .. } => "ShuffleBatchesExec",
            Exec::Batch { padded: Some(_), .. } => "PaddedBatchExec",
            Exec::Batch { .. } => "BatchExec",
            Exec::Unbatch => "UnbatchExec",
            Exec::UnbatchFields { .. } => "UnbatchFieldsExec",
            Exec::Repeat(_) => "RepeatExec",
            Exec::Take(_) => "TakeExec",
            Exec::Skip(_) => "SkipExec",
            Exec::Shard { .. } => "ShardExec",
            Exec::Cache { .. } => "CacheExec",
            Exec::Prefetch(_) => "PrefetchExec",
            Exec::Enumerate { .. } => "EnumerateExec",
            Exec::TakeWhile { .. } => "TakeWhileExec",
            Exec::Zip(_) => "ZipExec",
            Exec::Concatenate(_) => "ConcatenateExec",
            Exec::FlatMap { .. } => "FlatMapExec",
            Exec::InnerSource(_) => "InnerSourceExec",
            Exec::Window { .. } => "WindowExec",
        }
    }

    /// Whether the map of batches of records it runs fills fixed-size columns row range by
    /// row range, whatever its threads ([`MapFn::fills_columns_by_rows`]): the first map
    /// in a `ReadBatchesExec`'s readers, a `ChunkedMapExec`'s, a map + batch's of records
    /// (gathered into a batch, then mapped), or a `MapExec` over batches of records.
    pub fn fills_columns_by_rows(&self) -> bool {
        let over_records = |f: &MapFn| f.input == Element::Batch(Box::new(Element::Record));
        match self {
            Exec::ReadBatches { maps, .. } => match maps.first() {
                Some(ReaderMap::MapBatch(f)) => f.fills_columns_by_rows(),
                Some(ReaderMap::Map(f)) => over_records(f) && f.fills_columns_by_rows(),
                None => false,
            },
            Exec::MapBatch { f, .. } => f.fills_columns_by_rows(),
            Exec::ChunkedMap { f, .. } => f.fills_columns_by_rows(),
            Exec::Map { f, filter: None, .. } => over_records(f) && f.fills_columns_by_rows(),
            _ => false,
        }
    }

    /// Whether its batches' rows may be split across the pipeline's pool: it
    /// [fills columns by rows](Self::fills_columns_by_rows) on threads of its own (the
    /// readers of a `ReadBatchesExec`, the workers of a parallel map), which is where the
    /// runtime lets a batch's rows take the CPU budget's spare threads.
    pub fn splits_rows(&self) -> bool {
        let threads = match self {
            Exec::ReadBatches { .. } => return self.fills_columns_by_rows(),
            Exec::MapBatch { parallel, .. }
            | Exec::ChunkedMap { parallel, .. }
            | Exec::Map { parallel, .. } => parallel,
            _ => return false,
        };
        let one = matches!(threads, ArgValue::Const(Value::Int(1) | Value::UInt(1)));
        !one && self.fills_columns_by_rows()
    }

    /// What the node does beyond its name, for `explain`: the fused parts and the
    /// choices that are not threads or memory, and `rows=split` when its batches' rows
    /// may be split across the pool (empty when there is nothing to say).
    pub fn detail(&self) -> String {
        let own = self.own_detail();
        match (self.splits_rows(), own.is_empty()) {
            (false, _) => own,
            (true, true) => "rows=split".into(),
            (true, false) => format!("{own}, rows=split"),
        }
    }

    fn own_detail(&self) -> String {
        use crate::ir::{formats::ParquetFormat, plan::RecordFormat};
        let fns = |f: &MapFn| f.ops.iter().map(MapOp::name).collect::<Vec<_>>().join(", ");
        match self {
            Exec::GlobalShuffle { table: Some(_), window, shard, .. } => {
                let w = window
                    .as_ref()
                    .map_or(super::defaults::PARQUET_SHUFFLE_WINDOW.to_string(), ToString::to_string);
                let shard = if shard.is_some() { ", shard=block of the permutation" } else { "" };
                format!("window={w} rows, reads the row groups up to ⌈N/{w}⌉ times an epoch{shard}")
            }
            Exec::GlobalShuffle { shard: Some(_), .. } => "shard=block of the permutation".into(),
            Exec::Interleave {
                format: RecordFormat::Parquet(ParquetFormat { shard: Some(s), .. }), ..
            } => {
                format!("shard={s}")
            }
            Exec::ReadColumns { format, .. } => {
                format!("reader={}, arrays into batch columns", RecordFormat::Parquet(format.clone()).name())
            }
            Exec::ReadBatches { maps, .. } if !maps.is_empty() => {
                let parts: Vec<String> = maps
                    .iter()
                    .map(|m| match m {
                        ReaderMap::MapBatch(f) => format!("map_batch({})", fns(f)),
                        ReaderMap::Map(f) => format!("map({})", fns(f)),
                    })
                    .collect();
                format!("in_readers=[{}]", parts.join(", "))
            }
            Exec::ChunkedMap { f, .. } if f.skip_errors => format!("fns=[{}], on_error=skip", fns(f)),
            Exec::ChunkedMap { f, .. } => format!("fns=[{}]", fns(f)),
            Exec::Map { f, .. } if f.skip_errors => "on_error=skip".into(),
            Exec::MapBatch { batched: true, .. } => "input=batches of the reader".into(),
            Exec::ShuffleBatches { .. } => "input=batches of the reader, records in one slab".into(),
            Exec::FlatMap { inner, .. } => {
                let names: Vec<&str> = inner.iter().map(|n| n.exec.name()).collect();
                format!("per_element=[{}]", names.join(", "))
            }
            _ => String::new(),
        }
    }
}
