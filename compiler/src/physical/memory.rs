//! The figures of each stage: worker threads, the elements it may hold at once, and an
//! upper bound on the bytes they take (exact for fixed-shape numeric fields, else resting
//! on the stated assumptions, which `explain` prints).

use super::amount::Amount;
use super::defaults::*;
use super::{Figures, Options};
use crate::ir::decls::ParamDecl;
use crate::ir::plan::{
    ArgValue, Element, FieldType, Interleave, Plan, PrefetchDepth, RecordFormat, Remainder, Shuffle,
    ShuffleBuffer,
};
use crate::ir::types::{DType, Dim, Shape, Value};

/// What planning one pipeline gathers: the assumptions its bound rests on, and the rows
/// of the elements at the current stage.
pub(super) struct Cx<'a> {
    pub(super) assumptions: Vec<&'static str>,
    pub(super) options: Options,
    pub(super) params: &'a [ParamDecl],
    /// Rows in one element at the current stage (the product of the batch sizes below).
    pub(super) rows: Amount,
    /// The files the readers keep open at once (each with a read buffer; from an object
    /// store, each with `OBJECT_READ_AHEAD_BYTES` of ranged GETs).
    pub(super) open_files: u64,
    /// The largest batch any stage makes, in bytes (0: no batches): the idle batch
    /// buffers kept for recycling are at most `RECYCLE_KEEP` of them ([`Cx::recycled`]).
    pub(super) largest_batch: Amount,
}

impl Cx<'_> {
    /// Threads of an argument: a fixed count, or `auto` up to the assumed cores. The
    /// runtime starts at most `THREADS_PER_CORE` per core of a fixed count: one above
    /// that many of the cores assumed says so (`64(<=4/core)`); the figures count it all.
    pub(super) fn threads(&self, v: &ArgValue) -> (String, u64) {
        match v {
            ArgValue::Const(Value::Int(n)) if *n >= 1 => {
                let n = *n as u64;
                let shown = if n > self.options.cores.saturating_mul(THREADS_PER_CORE) {
                    format!("{n}(<={THREADS_PER_CORE}/core)")
                } else {
                    n.to_string()
                };
                (shown, n)
            }
            ArgValue::Auto => (format!("auto(<={})", self.options.cores), self.options.cores),
            ArgValue::Param(p) => (format!("${p}(<={})", self.options.cores), self.options.cores),
            _ => ("1".into(), 1),
        }
    }

    /// A count argument: a constant, a parameter (at its default, or `fallback` without
    /// one: its expression computes the bound again with its value), or `fallback`.
    pub(super) fn count(&mut self, v: &ArgValue, fallback: u64, what: &'static str) -> Amount {
        match v {
            ArgValue::Const(Value::Int(n)) if *n >= 0 => Amount::of(*n as u64),
            ArgValue::Const(Value::UInt(n)) => Amount::of(*n),
            ArgValue::Param(p) => {
                match self.params.iter().find(|q| &q.name == p).and_then(|q| q.default.as_ref()) {
                    Some(Value::Int(n)) if *n >= 0 => {
                        self.assumptions.push("parameters at their defaults");
                        Amount::param(p, *n as u64)
                    }
                    Some(Value::UInt(n)) => {
                        self.assumptions.push("parameters at their defaults");
                        Amount::param(p, *n)
                    }
                    _ => {
                        self.assumptions.push(what);
                        Amount::param(p, fallback)
                    }
                }
            }
            _ => {
                self.assumptions.push(what);
                Amount::of(fallback)
            }
        }
    }

    /// The files an interleave reads at once: a constant, a parameter's default, or
    /// `auto` (the cores, at most the files: at most the cores assumed).
    fn cycle(&mut self, v: &ArgValue) -> Amount {
        if *v == ArgValue::Auto {
            self.assumptions.push("an `auto` cycle of at most the cores assumed");
            return Amount::of(self.options.cores);
        }
        self.count(v, 1, "parameters at their defaults' scale (cycle length 1)")
    }

    /// A `ReadBatchesExec`: each reader thread holds the batch it fills, and the
    /// hand-over queue two finished batches per thread, of at most
    /// `READ_BATCHES_HANDOVER_BYTES_PER_THREAD` bytes per thread in all (but always one
    /// batch); `per_batch` bounds one batch.
    pub(super) fn read_batches(&mut self, il: &Interleave, per_batch: &Amount) -> Figures {
        let (threads, workers) = self.threads(&il.parallel);
        let cycle = self.cycle(&il.cycle_length);
        let workers = cycle.max(1).min(workers);
        let queued = workers.saturating_mul(READ_BATCHES_HANDOVER_PER_THREAD);
        let queued_bytes = queued
            .saturating_mul(per_batch)
            .min(workers.saturating_mul(READ_BATCHES_HANDOVER_BYTES_PER_THREAD).max(per_batch));
        self.open_files = self.open_files.saturating_add(workers.value());
        self.largest_batch = self.largest_batch.max(per_batch);
        Figures {
            threads,
            held: workers.saturating_add(&queued).value(),
            bytes: workers
                .saturating_mul(per_batch)
                .saturating_add(queued_bytes)
                .saturating_add(workers.saturating_mul(READ_BUFFER_BYTES)),
        }
    }

    /// The idle batch buffers the runtime keeps for recycling (`column::recycle`): at
    /// most `RECYCLE_KEEP` buffers, each of at most twice the largest batch (a buffer
    /// that grows doubles), and `RECYCLE_KEEP_BYTES` in all; none without batches big
    /// enough to be kept.
    pub(super) fn recycled(&self) -> Amount {
        let kept = self.largest_batch.saturating_mul(2 * RECYCLE_KEEP).min(RECYCLE_KEEP_BYTES);
        self.largest_batch.saturating_mul(2u64).if_below(RECYCLE_MIN_BYTES, 0u64, kept)
    }

    /// A map of this stage's elements: one on the consumer's thread holds the element
    /// it computes; a parallel one a window of micro-batches, each as many elements as
    /// fit `MAP_MICRO_BATCH_BYTES` (at least one, at most `MAP_MICRO_BATCH`).
    fn map(&mut self, parallel: &ArgValue, e: Amount) -> Figures {
        let (threads, workers) = self.threads(parallel);
        let per = if workers <= 1 {
            Amount::of(1)
        } else {
            Amount::of(MAP_MICRO_BATCH_BYTES).div(e.max(1u64)).clamp(1, MAP_MICRO_BATCH)
        };
        let held = per.saturating_mul(window(parallel, workers));
        Figures { threads, held: held.value(), bytes: held.saturating_mul(e) }
    }

    /// The figures of logical node `n` run as its own stage (the rows of its elements
    /// tracked from the source up: call it on every node, source first).
    pub(super) fn stage(&mut self, n: &Plan) -> Figures {
        let element = n.output();
        // The rows of this stage's elements: batches multiply, unbatch divides.
        match n {
            Plan::Batch(b) => {
                let size = self.count(&b.size, 1024, "a batch size of 1024 when set without a default");
                self.rows = self.rows.saturating_mul(size.max(1u64));
            }
            Plan::MapBatch(m) => {
                let size = self.count(&m.size, 1024, "a batch size of 1024 when set without a default");
                self.rows = self.rows.saturating_mul(size.max(1u64));
            }
            Plan::Unbatch(_) => self.rows = Amount::of(1),
            Plan::BucketByLength(b) => {
                let largest = b.spec.batch_sizes.iter().copied().max().unwrap_or(1);
                self.rows = self.rows.saturating_mul(largest.max(1));
            }
            Plan::Window(w) => {
                let size = self.count(&w.size, 1024, "a window size of 1024 when set without a default");
                self.rows = self.rows.saturating_mul(size.max(1u64));
            }
            _ => {}
        }
        let rows = self.rows.clone();
        let elem = |cx: &mut Cx<'_>| rows.saturating_mul(cx.element_bytes(&element));
        if matches!(element, Element::Batch(_)) {
            let batch = elem(self);
            self.largest_batch = self.largest_batch.max(batch);
        }
        let none = || Figures { threads: "1".into(), held: 0, bytes: Amount::of(0) };
        match n {
            Plan::Files(_) | Plan::Range(_) => none(),
            // One file at a time, read whole: its element is the one held.
            Plan::ReadFile(_) => Figures { threads: "1".into(), held: 1, bytes: elem(self) },
            Plan::SampleFrom(_) => {
                self.assumptions.push("the memory of the mixed pipelines on top (see their own plans)");
                none()
            }
            Plan::Zip(_) | Plan::Concatenate(_) => {
                self.assumptions.push("the memory of the combined pipelines on top (see their own plans)");
                none()
            }
            Plan::Enumerate(_) | Plan::TakeWhile(_) => none(),
            // One input element at a time; its inner chain's figures are added to these
            // by the lowering (`physical::lower`), which plans that chain.
            Plan::FlatMap(f) => {
                let outer = self.element_bytes(&f.input.output());
                Figures { threads: "1".into(), held: 1, bytes: Amount::of(outer) }
            }
            // `slices` copies the rows of its element out at once (about the sliced
            // fields' size, one element); `range` holds nothing, or with `keep` one copy
            // of the kept fields (cloned into each element it yields).
            Plan::InnerSource(s) => match &s.kind {
                crate::ir::flat_map::InnerKind::Range { keep, .. } if keep.is_empty() => none(),
                crate::ir::flat_map::InnerKind::Range { .. } => {
                    Figures { threads: "1".into(), held: 1, bytes: Amount::of(self.element_bytes(&s.output)) }
                }
                crate::ir::flat_map::InnerKind::Slices { .. } => {
                    let rows = self.element_bytes(&s.outer);
                    Figures { threads: "1".into(), held: 1, bytes: Amount::of(rows) }
                }
            },
            Plan::Interleave(i) => {
                let (threads, workers) = self.threads(&i.parallel);
                let cycle = self.cycle(&i.cycle_length);
                let per_slot = if workers > 1 { INTERLEAVE_BUFFER_PER_SLOT } else { 1 };
                let held = cycle.saturating_mul(per_slot);
                // A Parquet file holds one row group's column chunks (those read) while its
                // rows are decoded, fetched whole (no read-ahead of a stream).
                let per_file = if matches!(i.format, crate::ir::plan::RecordFormat::Parquet(_)) {
                    self.assumptions.push("Parquet row groups of at most 64 MiB in the columns read");
                    PARQUET_ROW_GROUP_BYTES
                } else {
                    self.open_files = self.open_files.saturating_add(cycle.value());
                    READ_BUFFER_BYTES
                };
                let bytes = held.saturating_mul(elem(self)).saturating_add(cycle.saturating_mul(per_file));
                Figures { threads, held: held.value(), bytes }
            }
            Plan::Map(m) => {
                let e = elem(self);
                self.map(&m.parallel, e)
            }
            Plan::MapFilter(m) => {
                let e = elem(self);
                self.map(&m.parallel, e)
            }
            // Workers write mapped elements straight into batch columns: the window holds
            // whole batches.
            Plan::MapBatch(m) => {
                let e = elem(self);
                self.map(&m.parallel, e)
            }
            Plan::ShuffleRepeat(s) => {
                let held = self.count(
                    &s.buffer,
                    10_000,
                    "a shuffle buffer of 10000 elements when set without a default",
                );
                Figures { threads: "1".into(), held: held.value(), bytes: held.saturating_mul(elem(self)) }
            }
            Plan::Filter(_) | Plan::Rust(_) | Plan::Select(_) => none(),
            // The open rows of the first-fit window.
            Plan::Pack(p) => {
                let window = p.spec.window;
                Figures { threads: "1".into(), held: window, bytes: elem(self).saturating_mul(window) }
            }
            Plan::Shuffle(s @ Shuffle { buffer: ShuffleBuffer::Global, .. })
                if let Plan::Interleave(Interleave { format: RecordFormat::Parquet(p), .. }) = &*s.input =>
            {
                // One window of rows, gathered on the consumer's thread, and the row group
                // being decoded; the reader below it does not run.
                let window = match &s.window {
                    Some(w) => self.count(
                        w,
                        PARQUET_SHUFFLE_WINDOW,
                        "a shuffle window of 65536 rows when set by a parameter",
                    ),
                    None => Amount::of(PARQUET_SHUFFLE_WINDOW),
                };
                self.assumptions.push("Parquet row groups of at most 64 MiB in the columns read");
                let row = self.element_bytes(&Element::Fields(p.columns.clone()));
                let bytes = window.saturating_mul(row).saturating_add(PARQUET_ROW_GROUP_BYTES);
                Figures { threads: "1".into(), held: window.value(), bytes }
            }
            Plan::Shuffle(Shuffle { buffer: ShuffleBuffer::Global, window, .. }) => {
                // Reader threads hold two windows of about 8 MiB of records each (or of
                // `window` records); the reader below it does not run.
                let (threads, workers) = self.threads(&ArgValue::Auto);
                let held = workers.saturating_mul(2);
                let per_window = match window {
                    Some(w) => {
                        let w = self.count(
                            w,
                            65_536,
                            "a shuffle window of 65536 records when set by a parameter",
                        );
                        w.saturating_mul(self.element_bytes(&Element::Record))
                    }
                    None => Amount::of(GLOBAL_SHUFFLE_WINDOW_BYTES),
                };
                Figures { threads, held, bytes: per_window.saturating_mul(held) }
            }
            Plan::Shuffle(Shuffle { buffer: ShuffleBuffer::Elements(buffer), .. }) => {
                let held =
                    self.count(buffer, 10_000, "a shuffle buffer of 10000 elements when set by a parameter");
                Figures { threads: "1".into(), held: held.value(), bytes: held.saturating_mul(elem(self)) }
            }
            Plan::Batch(b) => {
                // The staging vector of one batch's elements and the batch built from it.
                let size = self.count(&b.size, 1024, "a batch size of 1024 when set without a default");
                let bytes = elem(self).saturating_mul(2u64);
                Figures { threads: "1".into(), held: size.value(), bytes }
            }
            Plan::Unbatch(_) => none(),
            // The buckets hold at most `Σ (batch_sizes[i] - 1)` elements between batches,
            // plus the largest batch's elements and the batch built from them (as
            // `batch`'s staging and columns): rows of the input's size each.
            Plan::BucketByLength(b) => {
                let largest = b.spec.batch_sizes.iter().copied().max().unwrap_or(1).max(1);
                let waiting =
                    b.spec.batch_sizes.iter().map(|s| s.saturating_sub(1)).fold(0u64, u64::saturating_add);
                let row = elem(self).div(largest);
                let held = waiting.saturating_add(largest);
                let bytes = row.saturating_mul(waiting.saturating_add(largest.saturating_mul(2)));
                Figures { threads: "1".into(), held, bytes }
            }
            // The span of one window, `(size - 1) × stride + 1` input elements (those
            // between windows when `shift` is beyond it are dropped, not held), and the
            // window built from them.
            Plan::Window(w) => {
                let size = self.count(&w.size, 1024, "a window size of 1024 when set without a default");
                let stride = self.count(&w.stride, 1, "a window stride of 1 when set without a default");
                let held = size.saturating_sub(1u64).saturating_mul(stride).saturating_add(1u64);
                let window = elem(self);
                let row = window.div(size.max(1u64));
                Figures {
                    threads: "1".into(),
                    held: held.value(),
                    bytes: held.saturating_mul(row).saturating_add(window),
                }
            }
            // The device feed's thread converts and moves batches ahead of the training
            // loop: up to `DEVICE_FEED_AHEAD`, 2 whatever their size, and a third or later
            // only while those queued hold under `DEVICE_FEED_AHEAD_BYTES`.
            Plan::DeviceTail(_) => {
                let batch = elem(self);
                let held = match batch.value() {
                    0 => Amount::of(DEVICE_FEED_AHEAD),
                    _ => Amount::of(DEVICE_FEED_AHEAD_BYTES).div_ceil(&batch).clamp(2, DEVICE_FEED_AHEAD),
                };
                Figures { threads: "1".into(), held: held.value(), bytes: held.saturating_mul(batch) }
            }
            Plan::Prefetch(p) => {
                let held = match &p.buffer {
                    PrefetchDepth::Elements(v) => {
                        self.count(v, 2, "a prefetch depth of 2 when set by a parameter").max(1u64)
                    }
                    PrefetchDepth::Auto => Amount::of(PREFETCH_AUTO_DEPTH),
                };
                Figures { threads: "1".into(), held: held.value(), bytes: held.saturating_mul(elem(self)) }
            }
            Plan::Cache(c) if c.file.is_none() => {
                self.assumptions
                    .push("an in-memory cache of at most 1024 elements (it holds the whole dataset)");
                Figures { threads: "1".into(), held: 1024, bytes: elem(self).saturating_mul(1024u64) }
            }
            // `remainder: drop` holds back this worker's element of a round; `pad` keeps
            // the elements before the worker's first position, at most `num_shards - 1`.
            Plan::Shard(p) if p.remainder != Remainder::Keep => {
                let held = match p.remainder {
                    Remainder::Pad => self
                        .count(
                            &p.num_shards,
                            8,
                            "at most 8 workers for a padded shard's parameter without a default",
                        )
                        .saturating_sub(1u64),
                    _ => Amount::of(1),
                };
                Figures { threads: "1".into(), held: held.value(), bytes: held.saturating_mul(elem(self)) }
            }
            Plan::Repeat(_) | Plan::Take(_) | Plan::Skip(_) | Plan::Shard(_) | Plan::Cache(_) => none(),
        }
    }

    /// An upper bound on one element's size in bytes.
    pub(super) fn element_bytes(&mut self, e: &Element) -> u64 {
        match e {
            Element::Path => 256,
            Element::Record => {
                self.assumptions.push("records of at most 64 KiB");
                ASSUMED_RECORD_BYTES
            }
            Element::Fields(fields) => {
                fields.iter().map(|f| self.field_bytes(f)).fold(0u64, u64::saturating_add)
            }
            Element::Batch(inner) => self.element_bytes(inner),
        }
    }

    fn field_bytes(&mut self, f: &FieldType) -> u64 {
        let Some(t) = &f.ty else { return 0 };
        let values = match &t.shape {
            Shape::Var => {
                self.assumptions.push("variable-length fields of at most 1024 values");
                ASSUMED_DIM
            }
            Shape::Dims(dims) => dims.iter().fold(1u64, |n, d| {
                n.saturating_mul(match d {
                    Dim::Fixed(k) => *k,
                    Dim::Named(_) => {
                        self.assumptions.push("named dimensions (decoded image sides) of at most 1024");
                        ASSUMED_DIM
                    }
                })
            }),
        };
        let per_value = match t.dtype {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::Bf16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
            DType::Bytes | DType::Str => {
                self.assumptions.push("byte strings of at most 64 KiB");
                ASSUMED_BYTES_VALUE
            }
        };
        values.saturating_mul(per_value)
    }
}

/// Elements a parallel map holds in flight, as the runtime sizes its window: one per
/// worker plus one finished result (`auto`), or two per worker (a fixed count).
fn window(parallel: &ArgValue, workers: u64) -> u64 {
    match parallel {
        _ if workers <= 1 => 1,
        ArgValue::Auto => workers + 1,
        _ => 2 * workers,
    }
}
