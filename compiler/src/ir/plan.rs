//! The logical plan: what a pipeline computes, as a chain of nodes (one per stage, the
//! source innermost), each knowing the type of the elements it produces. A plain enum of
//! struct variants; [`Plan::input`] and [`Plan::input_mut`] are the one traversal
//! primitive that display, rewriting and verification are written on.
//!
//! `explain` text (the snapshot oracle): one node per line, `Name: key=value, …`, two-space
//! indent per level, fixed key order, no spans, paths or addresses.

use std::fmt::{self, Write};

pub use super::combine::{Concatenate, Enumerate, TakeWhile, Zip};
pub use super::element::{Element, FieldType};
use super::expr::Expr;
pub use super::formats::{CsvFormat, Interleave, ParquetFormat, ParseFormat, RecordFormat};
use super::kernel::Kernel;
use super::map_op::map_pairs;
pub use super::map_op::{MapOp, apply_ops, select_fields};
pub use super::options::{
    Compression, CorruptPolicy, Labels, OnError, PrefetchDepth, Remainder, RepeatCount, ShuffleBuffer,
};
pub use super::pass::{Cache, Prefetch, Repeat, Shard, Skip, Take};
pub use super::range::Range;
pub use super::read_file::ReadFile;
pub use super::resume::resume_blocker;
use super::types::Value;

/// An argument of a node: a constant, a pipeline parameter (resolved at run time), or
/// `auto` (AUTOTUNE). The words of enumerations are typed values of their own
/// ([`options`](super::options)).
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// Known at compile time.
    Const(Value),
    /// The parameter of this name (its declared type was checked).
    Param(String),
    /// Chosen at run time.
    Auto,
}

impl fmt::Display for ArgValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgValue::Const(v) => write!(f, "{v}"),
            ArgValue::Param(p) => write!(f, "${p}"),
            ArgValue::Auto => f.write_str("auto"),
        }
    }
}

/// Where the data comes from: the files matching a glob.
#[derive(Debug, Clone, PartialEq)]
pub struct Files {
    /// The glob.
    pub pattern: ArgValue,
    /// Shuffle the file list each epoch with this seed.
    pub shuffle_seed: Option<ArgValue>,
}

/// Applies per-field operations.
#[derive(Debug, Clone, PartialEq)]
pub struct Map {
    /// Input.
    pub input: Box<Plan>,
    /// The operations, in order.
    pub ops: Vec<MapOp>,
    /// Worker threads.
    pub parallel: ArgValue,
    /// Keep the order.
    pub deterministic: bool,
    /// `on_error: skip` (tf.data's `ignore_errors`): a failing element is dropped, counted.
    pub skip_errors: bool,
    /// What comes out.
    pub output: Element,
}

/// Keeps the elements for which the predicate holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// Input.
    pub input: Box<Plan>,
    /// The predicate as written (checked to be one `bool` per element).
    pub predicate: String,
    /// The fields the predicate reads.
    pub reads: Vec<String>,
    /// The predicate's parts, all of which must hold (one per fused filter), each a scalar `bool`.
    pub conditions: Vec<Expr>,
}

/// `map(code)` or `filter(code)` with Rust code (a closure or a function path, inside
/// `pipeline!` only). The element type does not change: a Rust `map` takes a record and
/// returns one of the same type. Opaque to the optimizer: the code may read any field,
/// so no rule fuses it or moves anything across it.
#[derive(Debug, Clone, PartialEq)]
pub struct RustStage {
    /// Input.
    pub input: Box<Plan>,
    /// A map or a filter.
    pub kind: RustKind,
    /// The code as written (what `explain` prints).
    pub code: String,
    /// The code's index in the pipeline's table of Rust tokens, which travels beside the
    /// plan (the tokens keep their spans, so a type error in the code points at it).
    pub code_index: usize,
}

/// What a [`RustStage`] does with its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RustKind {
    /// `Fn(Record) -> Record`.
    Map,
    /// `Fn(&Record) -> bool`.
    Filter,
}

/// `map` then `filter`, fused by the physical plan (`physical::fuse`): each worker maps an
/// element and tests it in one pass, so rejected elements never cross a queue.
#[derive(Debug, Clone, PartialEq)]
pub struct MapFilter {
    /// Input.
    pub input: Box<Plan>,
    /// The map's operations, in order.
    pub ops: Vec<MapOp>,
    /// Worker threads.
    pub parallel: ArgValue,
    /// Keep the order.
    pub deterministic: bool,
    /// The map's `on_error: skip` (the predicate's errors still fail).
    pub skip_errors: bool,
    /// What comes out (the map's output; the filter keeps the type).
    pub output: Element,
    /// The predicate, tested on the mapped element.
    pub predicate: String,
    /// The fields the predicate reads.
    pub reads: Vec<String>,
    /// The predicate's parts, all of which must hold.
    pub conditions: Vec<Expr>,
}

/// Mixes the elements of other pipelines of the file, each draw picking an input with
/// probability proportional to its weight (tf.data's `sample_from_datasets`). A source:
/// the inputs are planned (and explained) as pipelines of their own.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleFrom {
    /// The pipelines mixed, by name.
    pub inputs: Vec<String>,
    /// Their weights, one each.
    pub weights: Vec<f64>,
    /// The seed of the draws.
    pub seed: Option<ArgValue>,
    /// End at the first exhausted input (else go on with the others).
    pub stop_on_empty: bool,
    /// The inputs' (common) element type.
    pub output: Element,
}

/// Keeps only the named fields, in this order.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// Input.
    pub input: Box<Plan>,
    /// The fields kept.
    pub fields: Vec<String>,
}

/// Shuffles with a buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct Shuffle {
    /// Input.
    pub input: Box<Plan>,
    /// Buffer size in elements, or `global`.
    pub buffer: ShuffleBuffer,
    /// Seed.
    pub seed: Option<ArgValue>,
    /// New order each epoch.
    pub reshuffle_each_epoch: bool,
    /// A global shuffle's window: the positions of the permutation read together (for
    /// Parquet, the rows gathered in one pass over the row groups; `None`: the default).
    pub window: Option<ArgValue>,
}

impl Shuffle {
    /// `shuffle(global)`: every record of the indexed files in a seeded permutation per
    /// epoch, read through the files' indexes in place of the reader below it.
    pub fn is_global(&self) -> bool {
        self.buffer == ShuffleBuffer::Global
    }
}

/// Groups elements into columnar batches.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Input.
    pub input: Box<Plan>,
    /// Elements per batch.
    pub size: ArgValue,
    /// Drop a last, partial batch.
    pub drop_remainder: bool,
    /// For `padded_batch`: pad variable-length fields (to this length, or to the longest).
    pub padded: Option<Option<ArgValue>>,
    /// For `padded_batch(pad_to_multiple: k)`: the longest rounded up to a multiple of `k`.
    pub pad_to_multiple: Option<ArgValue>,
    /// For `padded_batch(padding_values: ...)`: what each padded field pads with.
    pub padding_values: super::bucket::PaddingValues,
}

/// `shuffle` then `repeat`, fused by the physical plan (`physical::fuse`; tf.data's
/// `ShuffleAndRepeatDataset`):
/// every epoch is shuffled anew, and the buffer is refilled across an epoch boundary
/// instead of draining first, so the first elements of an epoch may come out among the
/// last of the previous one. Each epoch still yields every element exactly once.
#[derive(Debug, Clone, PartialEq)]
pub struct ShuffleRepeat {
    /// Input.
    pub input: Box<Plan>,
    /// Buffer size in elements.
    pub buffer: ArgValue,
    /// Seed.
    pub seed: Option<ArgValue>,
    /// Epochs (`forever` when the `repeat` had no count).
    pub count: RepeatCount,
}

/// `map` then `batch`, fused by the physical plan (`physical::fuse`): the workers write
/// each mapped element straight into its row of the batch's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct MapBatch {
    /// Input.
    pub input: Box<Plan>,
    /// The map's operations, in order.
    pub ops: Vec<MapOp>,
    /// Worker threads.
    pub parallel: ArgValue,
    /// Keep the order.
    pub deterministic: bool,
    /// What the map makes of one element (a batch of these comes out).
    pub map_output: Element,
    /// Elements per batch.
    pub size: ArgValue,
    /// Drop a last, partial batch.
    pub drop_remainder: bool,
}

/// The tail of a `device cuda` pipeline, after its batches are made: operations on batch
/// columns that run on the GPU as one generated kernel per column ([`Kernel`]), copied
/// there by the runtime's device feed, or as their CPU twin (a map over the batches)
/// where there is no GPU. Added by sema on top of a `device cuda` pipeline that yields
/// batches, empty; the physical plan's `lower_device_tail` moves the chains it can run
/// into it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceTail {
    /// The batches, as the CPU makes them.
    pub input: Box<Plan>,
    /// The operations moved here, in order, on batches of the input's rows (the CPU
    /// twin runs them as written).
    pub ops: Vec<MapOp>,
    /// The same operations as kernels, one per column they change.
    pub kernels: Vec<Kernel>,
    /// What comes out: the pipeline's batches, as they were before anything moved.
    pub output: Element,
}

/// A node of the logical plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// `files(...)`.
    Files(Files),
    /// `range(...)`.
    Range(Range),
    /// `sample_from(pipelines..., weights: [...])`: a source mixing other pipelines.
    SampleFrom(SampleFrom),
    /// Reading records from the files.
    Interleave(Interleave),
    /// `read_file(...)`: each file whole, as one element.
    ReadFile(ReadFile),
    /// `map { ... }`.
    Map(Map),
    /// `filter(...)`.
    Filter(Filter),
    /// `select(field, ...)`.
    Select(Select),
    /// `map` or `filter` with Rust code (`pipeline!` only).
    Rust(RustStage),
    /// A map and the filter on it, fused (by `physical::fuse` only).
    MapFilter(MapFilter),
    /// `shuffle(...)`.
    Shuffle(Shuffle),
    /// `batch(...)` / `padded_batch(...)`.
    Batch(Batch),
    /// `unbatch()`.
    Unbatch(Box<Plan>),
    /// `repeat(count)` (`count` absent: forever).
    Repeat(Repeat),
    /// `take(n)`.
    Take(Take),
    /// `skip(n)`.
    Skip(Skip),
    /// `shard(num_shards, index, remainder)` (`remainder` is `keep` unless declared).
    Shard(Shard),
    /// `cache(file?)`.
    Cache(Cache),
    /// `prefetch(buffer)`.
    Prefetch(Prefetch),
    /// `shuffle` + `repeat`, fused (by `physical::fuse` only).
    ShuffleRepeat(ShuffleRepeat),
    /// `map` + `batch`, fused (by `physical::fuse` only).
    MapBatch(MapBatch),
    /// The GPU tail of a `device cuda` pipeline.
    DeviceTail(DeviceTail),
    /// `enumerate(start)`.
    Enumerate(Enumerate),
    /// `take_while(predicate)`.
    TakeWhile(TakeWhile),
    /// `zip(pipelines...)`: a source merging the fields of other pipelines' elements.
    Zip(Zip),
    /// `concatenate(pipelines...)`: a source yielding other pipelines one after another.
    Concatenate(Concatenate),
    /// `pack(length, fields)`: token sequences packed into fixed-length rows.
    Pack(super::pack::Pack),
    /// `bucket_by_length(length, boundaries, batch_sizes)`: batches by length bucket.
    BucketByLength(super::bucket::BucketByLength),
    /// `flat_map { source; stages }`: a chain of stages run on each element.
    FlatMap(super::flat_map::FlatMap),
    /// The source of a `flat_map`'s inner chain, made from one element.
    InnerSource(super::flat_map::InnerSource),
    /// `window(size, shift, stride, drop_remainder)`: each window a columnar batch.
    Window(super::window::Window),
}

/// Levels of indentation `explain` shows; deeper stages line up at the last one.
pub const MAX_INDENT: usize = 32;

/// The indentation of a stage `depth` levels down (at most [`MAX_INDENT`] levels).
pub fn indent(depth: usize) -> String {
    "  ".repeat(depth.min(MAX_INDENT))
}

impl Plan {
    /// The node's input, if it has one.
    pub fn input(&self) -> Option<&Plan> {
        match self {
            Plan::Files(_) | Plan::Range(_) | Plan::SampleFrom(_) => None,
            Plan::Zip(_) | Plan::Concatenate(_) | Plan::InnerSource(_) => None,
            Plan::FlatMap(n) => Some(&n.input),
            Plan::Interleave(n) => Some(&n.input),
            Plan::ReadFile(n) => Some(&n.input),
            Plan::Map(n) => Some(&n.input),
            Plan::Filter(n) => Some(&n.input),
            Plan::Select(n) => Some(&n.input),
            Plan::Rust(n) => Some(&n.input),
            Plan::MapFilter(n) => Some(&n.input),
            Plan::Shuffle(n) => Some(&n.input),
            Plan::Batch(n) => Some(&n.input),
            Plan::ShuffleRepeat(n) => Some(&n.input),
            Plan::MapBatch(n) => Some(&n.input),
            Plan::DeviceTail(n) => Some(&n.input),
            Plan::Enumerate(n) => Some(&n.input),
            Plan::TakeWhile(n) => Some(&n.input),
            Plan::Pack(n) => Some(&n.input),
            Plan::BucketByLength(n) => Some(&n.input),
            Plan::Window(n) => Some(&n.input),
            Plan::Unbatch(i) => Some(i),
            Plan::Repeat(n) => Some(&n.input),
            Plan::Take(n) => Some(&n.input),
            Plan::Skip(n) => Some(&n.input),
            Plan::Shard(n) => Some(&n.input),
            Plan::Cache(n) => Some(&n.input),
            Plan::Prefetch(n) => Some(&n.input),
        }
    }

    /// The node's input, mutably.
    pub fn input_mut(&mut self) -> Option<&mut Plan> {
        match self {
            Plan::Files(_) | Plan::Range(_) | Plan::SampleFrom(_) => None,
            Plan::Zip(_) | Plan::Concatenate(_) | Plan::InnerSource(_) => None,
            Plan::FlatMap(n) => Some(&mut n.input),
            Plan::Interleave(n) => Some(&mut n.input),
            Plan::ReadFile(n) => Some(&mut n.input),
            Plan::Map(n) => Some(&mut n.input),
            Plan::Filter(n) => Some(&mut n.input),
            Plan::Select(n) => Some(&mut n.input),
            Plan::Rust(n) => Some(&mut n.input),
            Plan::MapFilter(n) => Some(&mut n.input),
            Plan::Shuffle(n) => Some(&mut n.input),
            Plan::Batch(n) => Some(&mut n.input),
            Plan::ShuffleRepeat(n) => Some(&mut n.input),
            Plan::MapBatch(n) => Some(&mut n.input),
            Plan::DeviceTail(n) => Some(&mut n.input),
            Plan::Enumerate(n) => Some(&mut n.input),
            Plan::TakeWhile(n) => Some(&mut n.input),
            Plan::Pack(n) => Some(&mut n.input),
            Plan::BucketByLength(n) => Some(&mut n.input),
            Plan::Window(n) => Some(&mut n.input),
            Plan::Unbatch(i) => Some(i),
            Plan::Repeat(n) => Some(&mut n.input),
            Plan::Take(n) => Some(&mut n.input),
            Plan::Skip(n) => Some(&mut n.input),
            Plan::Shard(n) => Some(&mut n.input),
            Plan::Cache(n) => Some(&mut n.input),
            Plan::Prefetch(n) => Some(&mut n.input),
        }
    }

    /// The type of the elements this node produces.
    pub fn output(&self) -> Element {
        // Iteratively, not by recursion: down the chain to the first node whose output is
        // its own, then back up through the nodes that change their input's (a chain is
        // as long as the pipeline, and this runs on every thread's stack).
        let mut above = Vec::new();
        let mut node = self;
        let mut element = loop {
            match node {
                Plan::Files(_) => break Element::Path,
                Plan::Range(_) => break Range::element(),
                Plan::SampleFrom(n) => break n.output.clone(),
                Plan::Zip(n) => break n.output.clone(),
                Plan::Concatenate(n) => break n.output.clone(),
                Plan::Interleave(_) => break Element::Record,
                Plan::ReadFile(n) => break ReadFile::element(n.labels),
                Plan::Map(m) => break m.output.clone(),
                Plan::MapFilter(n) => break n.output.clone(),
                Plan::MapBatch(m) => break Element::Batch(Box::new(m.map_output.clone())),
                Plan::DeviceTail(t) => break t.output.clone(),
                Plan::Pack(p) => break p.spec.element(),
                Plan::FlatMap(n) => break n.inner.output(),
                Plan::InnerSource(n) => break n.output.clone(),
                other => match other.input() {
                    Some(input) => {
                        above.push(other);
                        node = input;
                    }
                    None => break Element::Path,
                },
            }
        };
        for n in above.into_iter().rev() {
            element = match n {
                Plan::Select(s) => select_fields(&element, &s.fields),
                Plan::Batch(_) | Plan::Window(_) => Element::Batch(Box::new(element)),
                Plan::BucketByLength(_) => super::bucket::BucketSpec::element(element),
                Plan::Enumerate(_) => Enumerate::output(element),
                Plan::Unbatch(_) => element.unbatch(),
                _ => element,
            };
        }
        element
    }

    /// `Name: key=value, …` for this node alone.
    pub fn line(&self) -> String {
        let mut s = String::new();
        let kv = |s: &mut String, pairs: &[(&str, String)]| {
            for (i, (k, v)) in pairs.iter().enumerate() {
                let _ = write!(s, "{}{k}={v}", if i == 0 { " " } else { ", " });
            }
        };
        let opt = |v: &Option<ArgValue>| v.as_ref().map_or("none".to_string(), ToString::to_string);
        match self {
            Plan::Files(n) => {
                s.push_str("Files:");
                kv(&mut s, &[("pattern", n.pattern.to_string()), ("shuffle_seed", opt(&n.shuffle_seed))]);
            }
            Plan::Range(n) => {
                s.push_str("Range:");
                kv(
                    &mut s,
                    &[
                        ("start", n.start.to_string()),
                        ("end", n.end.to_string()),
                        ("step", n.step.to_string()),
                    ],
                );
            }
            Plan::ReadFile(n) => {
                s.push_str("ReadFile:");
                kv(&mut s, &[("labels", n.labels.to_string()), ("on_error", n.on_error.to_string())]);
            }
            Plan::Interleave(n) => {
                s.push_str("Interleave:");
                let mut pairs = vec![
                    ("reader", n.format.name()),
                    (
                        "cycle_length",
                        match n.cycle_length {
                            // tf.data's AUTOTUNE cycle, resolved when the pipeline is built.
                            ArgValue::Auto => "auto(min(cores, files))".to_string(),
                            ref c => c.to_string(),
                        },
                    ),
                    ("block_length", n.block_length.to_string()),
                    ("parallel", n.parallel.to_string()),
                    ("deterministic", n.deterministic.to_string()),
                    ("compression", n.compression.to_string()),
                ];
                // Corrupt records and checksums are TFRecord's.
                if n.format == RecordFormat::TfRecord {
                    pairs.push(("on_corrupt", n.on_corrupt.to_string()));
                    pairs.push(("verify_crc", n.verify_crc.to_string()));
                }
                kv(&mut s, &pairs);
            }
            Plan::Map(n) => {
                s.push_str("Map:");
                let mut pairs = map_pairs(&n.ops);
                pairs.push(("parallel", n.parallel.to_string()));
                pairs.push(("deterministic", n.deterministic.to_string()));
                pairs.extend(n.skip_errors.then(|| ("on_error", "skip".into())));
                kv(&mut s, &pairs);
            }
            Plan::MapFilter(n) => {
                s.push_str("MapFilter:");
                let mut pairs = map_pairs(&n.ops);
                pairs.push(("predicate", n.predicate.clone()));
                pairs.push(("parallel", n.parallel.to_string()));
                pairs.push(("deterministic", n.deterministic.to_string()));
                pairs.extend(n.skip_errors.then(|| ("on_error", "skip".into())));
                kv(&mut s, &pairs);
            }
            Plan::SampleFrom(n) => {
                s.push_str("SampleFrom:");
                let weights: Vec<String> = n.weights.iter().map(|w| format!("{w:?}")).collect();
                kv(
                    &mut s,
                    &[
                        ("inputs", format!("[{}]", n.inputs.join(", "))),
                        ("weights", format!("[{}]", weights.join(", "))),
                        ("seed", opt(&n.seed)),
                        ("stop_on_empty", n.stop_on_empty.to_string()),
                    ],
                );
            }
            Plan::Enumerate(_) | Plan::TakeWhile(_) | Plan::Zip(_) | Plan::Concatenate(_) => {
                let (name, pairs) = super::combine::explain(self);
                s.push_str(name);
                kv(&mut s, &pairs);
            }
            Plan::Select(n) => {
                s.push_str("Select:");
                kv(&mut s, &[("fields", format!("[{}]", n.fields.join(", ")))]);
            }
            Plan::Filter(n) => {
                s.push_str("Filter:");
                kv(&mut s, &[("predicate", n.predicate.clone())]);
            }
            Plan::Rust(n) => {
                s.push_str(match n.kind {
                    RustKind::Map => "RustMap:",
                    RustKind::Filter => "RustFilter:",
                });
                kv(&mut s, &[("code", n.code.clone())]);
            }
            Plan::Shuffle(n) => {
                s.push_str("Shuffle:");
                let mut pairs = vec![
                    ("buffer", n.buffer.to_string()),
                    ("seed", opt(&n.seed)),
                    ("reshuffle_each_epoch", n.reshuffle_each_epoch.to_string()),
                ];
                if let Some(w) = &n.window {
                    pairs.push(("window", w.to_string()));
                }
                kv(&mut s, &pairs);
            }
            Plan::Batch(n) => {
                s.push_str(if n.padded.is_some() { "PaddedBatch:" } else { "Batch:" });
                let mut pairs =
                    vec![("size", n.size.to_string()), ("drop_remainder", n.drop_remainder.to_string())];
                if let Some(pad) = &n.padded {
                    pairs.push(("pad_to", pad.as_ref().map_or("longest".to_string(), ToString::to_string)));
                }
                if let Some(k) = &n.pad_to_multiple {
                    pairs.push(("pad_to_multiple", k.to_string()));
                }
                if !n.padding_values.is_empty() {
                    pairs.push(("padding_values", n.padding_values.to_string()));
                }
                kv(&mut s, &pairs);
            }
            Plan::Unbatch(_) => s.push_str("Unbatch:"),
            Plan::Pack(n) => s.push_str(&n.spec.line()),
            Plan::BucketByLength(n) => s.push_str(&n.spec.line()),
            Plan::FlatMap(_) => s.push_str("FlatMap:"),
            Plan::InnerSource(n) => s.push_str(&n.line()),
            Plan::Window(n) => s.push_str(&n.line()),
            Plan::ShuffleRepeat(n) => {
                s.push_str("ShuffleRepeat:");
                kv(
                    &mut s,
                    &[
                        ("buffer", n.buffer.to_string()),
                        ("seed", opt(&n.seed)),
                        ("count", n.count.to_string()),
                    ],
                );
            }
            Plan::MapBatch(n) => {
                s.push_str("MapBatch:");
                let mut pairs = map_pairs(&n.ops);
                pairs.push(("parallel", n.parallel.to_string()));
                pairs.push(("deterministic", n.deterministic.to_string()));
                pairs.push(("size", n.size.to_string()));
                pairs.push(("drop_remainder", n.drop_remainder.to_string()));
                kv(&mut s, &pairs);
            }
            Plan::DeviceTail(n) => {
                s.push_str("DeviceTail:");
                let kernels: Vec<String> = n
                    .kernels
                    .iter()
                    .map(|k| {
                        let ops: Vec<&str> = n
                            .ops
                            .iter()
                            .filter(|op| matches!(op, MapOp::Assign { target, .. } if *target == k.field))
                            .map(MapOp::name)
                            .collect();
                        format!("{}({}: {})", k.name, k.field, ops.join(", "))
                    })
                    .collect();
                kv(&mut s, &[("device", "cuda".into()), ("kernels", format!("[{}]", kernels.join(", ")))]);
            }
            Plan::Repeat(n) => {
                s.push_str("Repeat:");
                kv(&mut s, &[("count", n.count.to_string())]);
            }
            Plan::Take(n) => {
                s.push_str("Take:");
                kv(&mut s, &[("count", n.count.to_string())]);
            }
            Plan::Skip(n) => {
                s.push_str("Skip:");
                kv(&mut s, &[("count", n.count.to_string())]);
            }
            Plan::Shard(n) => {
                s.push_str("Shard:");
                kv(
                    &mut s,
                    &[
                        ("num_shards", n.num_shards.to_string()),
                        ("index", n.index.to_string()),
                        ("remainder", n.remainder.to_string()),
                    ],
                );
            }
            // The file and the buffer only when given.
            Plan::Cache(n) => {
                s.push_str("Cache:");
                kv(&mut s, &n.file.iter().map(|f| ("file", f.to_string())).collect::<Vec<_>>());
            }
            Plan::Prefetch(n) => {
                s.push_str("Prefetch:");
                kv(&mut s, &[("buffer", n.buffer.to_string())]);
            }
        }
        let _ = write!(s, " -> {}", self.output());
        s
    }

    /// The plan as `explain` prints it: the last stage first, each input indented under it
    /// (up to [`MAX_INDENT`] levels: the text of a deep plan grows with its depth, not its
    /// square).
    pub fn explain(&self) -> String {
        let mut out = String::new();
        let mut node = Some(self);
        let mut depth = 0;
        while let Some(n) = node {
            match n {
                // The inner chain between braces under the node.
                Plan::FlatMap(f) => out.push_str(&f.explain_lines(&n.line(), depth)),
                _ => {
                    let _ = writeln!(out, "{}{}", indent(depth), n.line());
                }
            }
            node = n.input();
            depth += 1;
        }
        out
    }
}
