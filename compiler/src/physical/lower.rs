//! Lowering the optimized plan to exec nodes: the physical choices, made once.
//!
//! Walking the plan source first, each logical node becomes one exec node, except where
//! several run as one runtime stage:
//!
//! - `shuffle(global)` replaces the reader under it (`GlobalShuffleExec` reads TFRecord
//!   files through their indexes, Parquet rows a window of positions at a time), and
//!   takes a `shard` (keep or drop) right after it as a block of its permutation;
//! - a non-deterministic TFRecord interleave straight into a plain `batch` or a fused
//!   map + batch is one `ReadBatchesExec`: each reader thread fills its own batches and
//!   runs the maps that follow on them in place, up to the first that draws random
//!   numbers (those need every row's position, which the reader threads do not keep). A
//!   `prefetch(auto)` right on top of it is dropped: the reader threads already queue
//!   finished batches ahead of the consumer, and it would only add a hand-over per batch;
//! - a non-deterministic TFRecord interleave, a local `shuffle` of its records and a plain
//!   `batch` of them are a `ReadBatchesExec` (no maps) and a `ShuffleBatchesExec` over its
//!   batches: the records go from the readers' batches into one slab and out into the
//!   shuffled batches, never one allocation or hand-over each;
//! - a `batch` of records and a map over the batches is one `ChunkedMapExec`: the map's
//!   workers gather each batch;
//! - elementwise maps over the batches of a map + batch (what `vectorize_past_batch` moved
//!   there) merge back into it: per row they fuse with the decoding before them
//!   (`decode_jpeg → resize → scale → normalize` in one pass).
//!
//! A `map(on_error: skip)` runs as a stage of its own (`MapExec`, `MapFilterExec`, or
//! the map of a `ChunkedMapExec`, which drops the whole batch it fails on: the map's
//! element), never in the reader threads of a `ReadBatchesExec` nor merged into a map +
//! batch, whose functions fail their whole batch.
//!
//! A `device cuda` pipeline's `DeviceTail` becomes the plan's tail.

use super::exec::{CorruptPolicy, DeviceTailExec, Exec, MapFn, ReaderMap, ReaderOptions, Remainder};
use super::memory::Cx;
use super::{ExecNode, Figures};
use crate::ir::formats::{ParquetFormat, ParseFormat};
use crate::ir::plan::{
    ArgValue, Element, FieldType, Interleave, Map, MapOp, Plan, RecordFormat, ShuffleBuffer,
};

/// One node of the chain, with the elementwise maps over its batches merged into it (for
/// a map + batch).
struct Step<'p> {
    node: &'p Plan,
    /// The `Map` nodes merged into it.
    merged: Vec<&'p Plan>,
}

/// The exec nodes of `plan`, source first, and its device tail.
pub(super) fn lower(plan: &Plan, cx: &mut Cx<'_>) -> (Vec<ExecNode>, Option<(DeviceTailExec, Figures)>) {
    let (host, tail) = match plan {
        Plan::DeviceTail(t) => (&*t.input, Some(t)),
        other => (other, None),
    };
    let chain = steps(host);
    let mut out = Vec::new();
    let mut i = 0;
    while i < chain.len() {
        let n = chain[i].node;
        let next = chain.get(i + 1).map(|s| s.node);
        if let (Plan::Interleave(il), Some(Plan::Shuffle(s))) = (n, next)
            && s.is_global()
            && matches!(il.format, RecordFormat::TfRecord | RecordFormat::Parquet(_))
        {
            let figures = cx.stage(next.expect("matched"));
            let shard = match chain.get(i + 2).map(|s| s.node) {
                Some(Plan::Shard(p)) if p.remainder != Remainder::Pad => {
                    Some((p.num_shards.clone(), p.index.clone(), p.remainder == Remainder::Drop))
                }
                _ => None,
            };
            i += if shard.is_some() { 3 } else { 2 };
            let exec = Exec::GlobalShuffle {
                reader: reader_options(il),
                table: match &il.format {
                    RecordFormat::Parquet(p) => Some(p.clone()),
                    _ => None,
                },
                window: s.window.clone(),
                seed: s.seed.clone(),
                reshuffle_each_epoch: s.reshuffle_each_epoch,
                shard,
            };
            out.push(ExecNode { exec, figures });
            continue;
        }
        if let (Plan::Interleave(il), Some(Plan::Shuffle(s)), Some(Plan::Batch(b))) =
            (n, next, chain.get(i + 2).map(|s| s.node))
            && !il.deterministic
            && il.format == RecordFormat::TfRecord
            && !s.is_global()
            && b.padded.is_none()
        {
            out.extend(shuffle_batches(il, next.expect("matched"), chain[i + 2].node, cx));
            i += 3;
            continue;
        }
        if let (Plan::Interleave(il), Some(next @ Plan::MapBatch(m))) = (n, next)
            && let Some((format, output)) = columnar(il, &chain[i + 1])
        {
            let (read, batch) = (cx.stage(n), cx.stage(next));
            let figures = Figures {
                threads: "1".into(),
                held: read.held.saturating_add(batch.held),
                bytes: read.bytes.saturating_add(&batch.bytes),
            };
            let exec =
                Exec::ReadColumns { format, size: m.size.clone(), drop_remainder: m.drop_remainder, output };
            out.push(ExecNode { exec, figures });
            i += 2;
            continue;
        }
        if let (Plan::Interleave(il), Some(next)) = (n, next)
            && reads_batches(il, next)
        {
            i += read_batches(&chain, i, il, cx, &mut out);
            // Its reader threads already queue finished batches ahead of the consumer: a
            // `prefetch(auto)` right on top would only add a thread and a hand-over per
            // batch (as `insert_prefetch` leaves a parallel stage alone). A prefetch of a
            // set depth stays: the user asked for that many batches.
            if matches!(out.last(), Some(ExecNode { exec: Exec::ReadBatches { .. }, .. }))
                && chain.get(i).is_some_and(|s| is_auto_prefetch(s.node))
            {
                i += 1;
            }
            continue;
        }
        if let (Plan::Batch(b), Some(Plan::Map(m))) = (n, next)
            && b.padded.is_none()
            && m.input.output() == Element::Batch(Box::new(Element::Record))
            && !m.ops.iter().any(MapOp::is_random)
        {
            let (batch, map) = (cx.stage(n), cx.stage(next.expect("matched")));
            let figures = Figures {
                threads: map.threads,
                held: batch.held.saturating_add(map.held),
                bytes: batch.bytes.saturating_add(&map.bytes),
            };
            let exec = Exec::ChunkedMap {
                size: b.size.clone(),
                drop_remainder: b.drop_remainder,
                f: map_fn(m),
                parallel: m.parallel.clone(),
                deterministic: m.deterministic,
            };
            out.push(ExecNode { exec, figures });
            i += 2;
            continue;
        }
        out.push(one(&chain[i], cx));
        i += 1;
    }
    let tail = tail.map(|t| {
        let figures = cx.stage(plan);
        let exec = DeviceTailExec {
            input: t.input.output(),
            ops: t.ops.clone(),
            kernels: t.kernels.clone(),
            output: t.output.clone(),
        };
        (exec, figures)
    });
    (out, tail)
}

/// The `ReadBatchesExec` of a non-deterministic TFRecord interleave (batches of the
/// following `batch`'s size, no maps) and the `ShuffleBatchesExec` of the local `shuffle`
/// and plain `batch` of records after it. The slab holds the buffer's records and up to a
/// quarter more of garbage, in a vector that may have doubled: 5/2 of the shuffle's
/// figure, plus the batch being filled.
fn shuffle_batches(il: &Interleave, shuffle: &Plan, batch: &Plan, cx: &mut Cx<'_>) -> [ExecNode; 2] {
    let (Plan::Shuffle(s), Plan::Batch(b)) = (shuffle, batch) else {
        unreachable!("lower matched a shuffle and a batch")
    };
    let buffer = cx.stage(shuffle);
    let batched = cx.stage(batch);
    let per_batch = batched.bytes.div(2u64);
    let read = ExecNode {
        exec: Exec::ReadBatches {
            reader: reader_options(il),
            cycle: il.cycle_length.clone(),
            parallel: il.parallel.clone(),
            size: b.size.clone(),
            drop_remainder: false,
            maps: Vec::new(),
        },
        figures: cx.read_batches(il, &per_batch),
    };
    let figures = Figures {
        threads: "1".into(),
        held: buffer.held.saturating_add(batched.held),
        bytes: buffer.bytes.div(2u64).saturating_mul(5u64).saturating_add(per_batch),
    };
    let exec = Exec::ShuffleBatches {
        buffer: elements(&s.buffer),
        seed: s.seed.clone(),
        reshuffle_each_epoch: s.reshuffle_each_epoch,
        size: b.size.clone(),
        drop_remainder: b.drop_remainder,
    };
    [read, ExecNode { exec, figures }]
}

/// The columns of a `parquet` reader and the row of the map + batch `step` after it, when
/// the two run as one `ReadColumnsExec`: the files read one after another (a cycle of 1,
/// in order), every row kept (no skipping policy, no row-group test), the map only the
/// parse of the reader's columns, and every column a number or `bool`, one or a
/// fixed-size tensor of them, with no default (the runtime's `reads_columnar`).
fn columnar(il: &Interleave, step: &Step<'_>) -> Option<(ParquetFormat, Element)> {
    use crate::ir::types::Value;
    let RecordFormat::Parquet(p) = &il.format else { return None };
    let one = matches!(il.cycle_length, ArgValue::Const(Value::Int(1) | Value::UInt(1)));
    if !il.deterministic || !one || !p.tests.is_empty() || il.on_corrupt != CorruptPolicy::Fail {
        return None;
    }
    let f = map_batch_fn(step);
    let [MapOp::Parse { format: ParseFormat::Table, fields }] = f.ops.as_slice() else { return None };
    let plain = |c: &FieldType| {
        !p.defaults.contains(&c.name)
            && c.ty.as_ref().is_some_and(|t| t.shape.fixed_len().is_some() && t.dtype.is_native())
    };
    (!f.skip_errors && *fields == p.columns && p.columns.iter().all(plain)).then(|| (p.clone(), f.output))
}

/// Whether `node` is a `prefetch` whose depth AUTOTUNE picks.
fn is_auto_prefetch(node: &Plan) -> bool {
    matches!(node, Plan::Prefetch(p) if p.is_auto())
}

/// Whether an interleave and the `next` node run as one `ReadBatchesExec`: a
/// non-deterministic TFRecord interleave straight into a plain `batch` of its records or
/// a fused map + batch.
fn reads_batches(i: &Interleave, next: &Plan) -> bool {
    !i.deterministic
        && i.format == RecordFormat::TfRecord
        && match next {
            Plan::Batch(b) => b.padded.is_none(),
            Plan::MapBatch(_) => true,
            _ => false,
        }
}

/// The `ReadBatchesExec` of the interleave at `chain[i]` (and a `MapBatchExec` over its
/// batches when the fused map + batch draws random numbers); the steps it took.
fn read_batches(
    chain: &[Step<'_>],
    i: usize,
    il: &Interleave,
    cx: &mut Cx<'_>,
    out: &mut Vec<ExecNode>,
) -> usize {
    let next = &chain[i + 1];
    let batch = cx.stage(next.node);
    let (size, drop_remainder) = match next.node {
        Plan::Batch(b) => (b.size.clone(), b.drop_remainder),
        Plan::MapBatch(m) => (m.size.clone(), m.drop_remainder),
        _ => unreachable!("reads_batches holds"),
    };
    // One batch's bytes: a plain batch's own figure counts it twice (staging + batch), a
    // map + batch's its window of batches; the maps run on it may grow it.
    let mut per_batch = match next.node {
        Plan::Batch(_) => batch.bytes.div(2u64),
        _ => batch.bytes.div(batch.held.max(1)),
    };
    let mut grow = |cx: &mut Cx<'_>, node: &Plan| {
        let f = cx.stage(node);
        per_batch = per_batch.max(f.bytes.div(f.held.max(1)));
    };
    // The maps that follow run in the reader threads, up to the first that draws random
    // numbers: each batch is parsed where it was filled, with no hand-over in between. A
    // random map + batch runs as a stage of its own on the readers' batches.
    let mut maps = Vec::new();
    let mut used = 2;
    let random_map_batch = match next.node {
        Plan::MapBatch(_) => Some(map_batch_fn(next)).filter(MapFn::is_random),
        _ => None,
    };
    if random_map_batch.is_none() {
        if let Plan::MapBatch(_) = next.node {
            next.merged.iter().for_each(|m| grow(cx, m));
            maps.push(ReaderMap::MapBatch(map_batch_fn(next)));
        }
        while let Some(Step { node: node @ Plan::Map(m), .. }) = chain.get(i + used)
            && matches!(m.input.output(), Element::Batch(_))
            && !m.ops.iter().any(MapOp::is_random)
            && !m.skip_errors
        {
            grow(cx, node);
            maps.push(ReaderMap::Map(map_fn(m)));
            used += 1;
        }
    }
    let figures = cx.read_batches(il, &per_batch);
    let exec = Exec::ReadBatches {
        reader: reader_options(il),
        cycle: il.cycle_length.clone(),
        parallel: il.parallel.clone(),
        size: size.clone(),
        drop_remainder,
        maps,
    };
    out.push(ExecNode { exec, figures });
    if let (Some(f), Plan::MapBatch(m)) = (random_map_batch, next.node) {
        let exec = Exec::MapBatch {
            f,
            size,
            drop_remainder,
            parallel: m.parallel.clone(),
            deterministic: m.deterministic,
            batched: true,
        };
        out.push(ExecNode { exec, figures: batch });
    }
    used
}

/// The exec node of one step on its own.
fn one(step: &Step<'_>, cx: &mut Cx<'_>) -> ExecNode {
    let n = step.node;
    let mut figures = cx.stage(n);
    let input = || n.input().map_or(Element::Path, Plan::output);
    let exec = match n {
        Plan::Files(f) => Exec::Files { pattern: f.pattern.clone(), shuffle_seed: f.shuffle_seed.clone() },
        Plan::Range(r) => Exec::Range(r.clone()),
        Plan::SampleFrom(s) => Exec::SampleFrom(s.clone()),
        Plan::ReadFile(r) => Exec::ReadFile {
            labels: r.labels,
            // A file is one element: skipping the rest of it is skipping it.
            on_error: match r.on_error {
                CorruptPolicy::Fail => CorruptPolicy::Fail,
                CorruptPolicy::Skip | CorruptPolicy::SkipFile => CorruptPolicy::Skip,
            },
        },
        Plan::Interleave(il) => Exec::Interleave {
            format: il.format.clone(),
            reader: reader_options(il),
            cycle: il.cycle_length.clone(),
            block: il.block_length.clone(),
            parallel: il.parallel.clone(),
            deterministic: il.deterministic,
        },
        Plan::Map(m) => Exec::Map {
            f: map_fn(m),
            parallel: m.parallel.clone(),
            deterministic: m.deterministic,
            filter: None,
        },
        Plan::MapFilter(m) => Exec::Map {
            f: MapFn {
                input: input(),
                ops: m.ops.clone(),
                output: m.output.clone(),
                skip_errors: m.skip_errors,
            },
            parallel: m.parallel.clone(),
            deterministic: m.deterministic,
            filter: Some(m.conditions.clone()),
        },
        Plan::MapBatch(m) => {
            for merged in &step.merged {
                figures.bytes = figures.bytes.max(cx.stage(merged).bytes);
            }
            Exec::MapBatch {
                f: map_batch_fn(step),
                size: m.size.clone(),
                drop_remainder: m.drop_remainder,
                parallel: m.parallel.clone(),
                deterministic: m.deterministic,
                batched: false,
            }
        }
        Plan::Filter(f) => Exec::Filter { input: input(), conditions: f.conditions.clone() },
        Plan::Rust(r) => {
            Exec::Rust { input: input(), kind: r.kind, code: r.code.clone(), code_index: r.code_index }
        }
        Plan::Pack(p) => Exec::Pack { from: input().fields().to_vec(), spec: p.spec.clone() },
        Plan::BucketByLength(b) => {
            Exec::BucketByLength { from: input().fields().to_vec(), spec: b.spec.clone() }
        }
        Plan::Select(_) => {
            let from = input();
            let (mut depth, mut e) = (0, &from);
            while let Element::Batch(inner) = e {
                depth += 1;
                e = inner;
            }
            Exec::Select { from: from.fields().to_vec(), to: n.output().fields().to_vec(), depth }
        }
        Plan::Shuffle(s) => Exec::Shuffle {
            buffer: elements(&s.buffer),
            seed: s.seed.clone(),
            reshuffle_each_epoch: s.reshuffle_each_epoch,
        },
        Plan::ShuffleRepeat(s) => Exec::ShuffleRepeat {
            buffer: s.buffer.clone(),
            seed: s.seed.clone(),
            count: s.count.times().cloned(),
        },
        Plan::Batch(b) => Exec::Batch {
            input: input(),
            size: b.size.clone(),
            drop_remainder: b.drop_remainder,
            padded: b.padded.clone(),
            pad_to_multiple: b.pad_to_multiple.clone(),
            padding_values: b.padding_values.clone(),
        },
        Plan::Unbatch(_) => match input() {
            Element::Fields(from) => Exec::UnbatchFields { from, to: n.output().fields().to_vec() },
            _ => Exec::Unbatch,
        },
        Plan::Repeat(p) => Exec::Repeat(p.count.times().cloned()),
        Plan::Take(p) => Exec::Take(p.count.clone()),
        Plan::Skip(p) => Exec::Skip(p.count.clone()),
        Plan::Shard(p) => {
            Exec::Shard { num_shards: p.num_shards.clone(), index: p.index.clone(), remainder: p.remainder }
        }
        Plan::Cache(p) => Exec::Cache { input: input(), file: p.file.clone() },
        Plan::Prefetch(p) => Exec::Prefetch(p.buffer.clone()),
        Plan::Enumerate(e) => Exec::Enumerate {
            from: input().fields().to_vec(),
            to: n.output().fields().to_vec(),
            start: e.start.clone(),
        },
        Plan::TakeWhile(t) => Exec::TakeWhile { input: input(), conditions: t.conditions.clone() },
        Plan::Zip(z) => Exec::Zip(z.clone()),
        Plan::Concatenate(c) => Exec::Concatenate(c.clone()),
        Plan::FlatMap(f) => {
            // The inner chain, planned as a pipeline of its own from one row: the rows
            // of the elements above are those of what it yields.
            cx.rows = super::amount::Amount::of(1);
            let (inner, _) = lower(&f.inner, cx);
            for node in &inner {
                figures.held = figures.held.saturating_add(node.figures.held);
                figures.bytes = figures.bytes.saturating_add(&node.figures.bytes);
            }
            Exec::FlatMap { from: input().fields().to_vec(), inner }
        }
        Plan::InnerSource(s) => Exec::InnerSource(s.clone()),
        Plan::Window(w) => Exec::Window {
            from: input().fields().to_vec(),
            size: w.size.clone(),
            shift: w.shift.clone(),
            stride: w.stride.clone(),
            drop_remainder: w.drop_remainder,
        },
        Plan::DeviceTail(_) => unreachable!("a device tail is the plan's top, taken apart before"),
    };
    ExecNode { exec, figures }
}

/// The chain of `plan` (source first), each elementwise map over the batches of a map +
/// batch merged into it.
fn steps(plan: &Plan) -> Vec<Step<'_>> {
    let mut chain = Vec::new();
    let mut node = Some(plan);
    while let Some(n) = node {
        chain.push(n);
        node = n.input();
    }
    let mut out: Vec<Step<'_>> = Vec::new();
    for n in chain.into_iter().rev() {
        if let (Plan::Map(m), Some(prev)) = (n, out.last_mut())
            && matches!(prev.node, Plan::MapBatch(_))
            && m.ops.iter().all(MapOp::is_elementwise)
            && matches!(m.output, Element::Batch(_))
            && !m.skip_errors
        {
            prev.merged.push(n);
            continue;
        }
        out.push(Step { node: n, merged: Vec::new() });
    }
    out
}

fn map_fn(m: &Map) -> MapFn {
    MapFn {
        input: m.input.output(),
        ops: m.ops.clone(),
        output: m.output.clone(),
        skip_errors: m.skip_errors,
    }
}

/// The map of a map + batch step, with the maps merged into it: one row's function.
fn map_batch_fn(step: &Step<'_>) -> MapFn {
    let Plan::MapBatch(m) = step.node else { unreachable!("a map + batch step") };
    let mut f = MapFn {
        input: m.input.output(),
        ops: m.ops.clone(),
        output: m.map_output.clone(),
        skip_errors: false,
    };
    for merged in &step.merged {
        if let Plan::Map(m) = merged {
            f.ops.extend(m.ops.iter().cloned());
            if let Element::Batch(inner) = &m.output {
                f.output = (**inner).clone();
            }
        }
    }
    f
}

/// The reader options of an interleave.
fn reader_options(i: &Interleave) -> ReaderOptions {
    ReaderOptions { compression: i.compression, on_corrupt: i.on_corrupt, verify_crc: i.verify_crc }
}

/// The size of a local shuffle's buffer. A global one is never a shuffle of its own: sema
/// puts it right on the reader of the files (E0314), and the two run as one
/// `GlobalShuffleExec`.
fn elements(buffer: &ShuffleBuffer) -> ArgValue {
    match buffer {
        ShuffleBuffer::Elements(v) => v.clone(),
        ShuffleBuffer::Global => unreachable!("a global shuffle runs as `GlobalShuffleExec`"),
    }
}
