//! A physical plan as a chain of the runtime's stages over [`Item`]s: each exec node, source
//! first, becomes the runtime stage the code generator would print for it
//! (`compiler/src/codegen/stages.rs`), with a dynamic function where generated code has a
//! monomorphized one, boxed between nodes ([`Boxed`]: one virtual call per element per
//! stage). [`refusal`] says which nodes the engine runs; the rest are refused when the
//! dataset is built, before anything runs.

use std::sync::Arc;

use sluice_compiler::Pipeline;
use sluice_compiler::ir::decls::FieldDecl;
use sluice_compiler::ir::plan::{ArgValue, Element, FieldType, MapOp, PrefetchDepth};
use sluice_compiler::physical::{self, Exec, MapFn, ReaderMap, Remainder};
use sluice_runtime::abi;
use sluice_runtime::stage::{
    Boxed, Buffer, Dataset, Indexed, Parallelism, Record, RecordBatch, auto_cycle, concatenate, files,
    range_step, sample_from, skippable, tfrecord_batches, zip, zip_batches,
};
use sluice_runtime::tfrecord::{Compression, CorruptPolicy, ReaderOptions};
use sluice_runtime::{BoxError, Error};

use crate::eval::{self, Eval};
use crate::map::MapRows;
use crate::params::Params;
use crate::parse::ExampleParser;
use crate::value::{Columns, Data, Item, Names, Row, Value};

/// Why the engine does not run this node yet (what to name), or `None` when it does;
/// `schema` is the pipeline's (what its `parse_example` reads).
pub fn refusal(e: &Exec, schema: &[FieldDecl]) -> Option<String> {
    let map_fn = |f: &MapFn| {
        f.ops.iter().find_map(|op| match op {
            MapOp::Parse { format: sluice_compiler::ir::formats::ParseFormat::Example, fields } => {
                ExampleParser::new(fields, schema).err()
            }
            MapOp::Parse { format: sluice_compiler::ir::formats::ParseFormat::SequenceExample, fields } => {
                ExampleParser::sequence(fields, schema).err()
            }
            MapOp::Parse {
                format:
                    sluice_compiler::ir::formats::ParseFormat::Line
                    | sluice_compiler::ir::formats::ParseFormat::Csv
                    | sluice_compiler::ir::formats::ParseFormat::Table,
                ..
            } => crate::sources::TextParser::of(op, schema).err(),
            MapOp::Assign { value, .. } => eval::check(value).err(),
        })
    };
    // Lists batch padded to the longest, as the generated map + batch pads them.
    let fields_batchable = |fields: &[FieldType]| crate::shapes::refusal(fields);
    match e {
        // Sources and combinators (`sources.rs`).
        Exec::Interleave { .. } | Exec::ReadFile { .. } | Exec::GlobalShuffle { .. } => None,
        Exec::ReadColumns { .. } => None,
        Exec::ShuffleRepeat { .. } => None,
        Exec::Files { .. } | Exec::Range(_) | Exec::Repeat(_) | Exec::Take(_) | Exec::Skip(_) => None,
        Exec::Shuffle { .. } | Exec::Prefetch(_) | Exec::Enumerate { .. } | Exec::Shard { .. } => None,
        Exec::Cache { file: None, .. } => None,
        Exec::Cache { input: Element::Fields(_) | Element::Record, file: Some(_) } => None,
        Exec::Select { .. } => None,
        Exec::Filter { conditions, .. } => conditions.iter().find_map(|c| eval::check(c).err()),
        Exec::Map { f, filter, .. } => {
            map_fn(f).or_else(|| filter.iter().flatten().find_map(|c| eval::check(c).err()))
        }
        Exec::ChunkedMap { f, .. } => map_fn(f).or_else(|| fields_batchable(f.output.fields())),
        Exec::MapBatch { f, batched: false, .. } => map_fn(f).or_else(|| match f.input {
            Element::Record => fields_batchable(f.output.fields()),
            _ => crate::shapes::refusal(f.output.fields()),
        }),
        Exec::Batch { input: Element::Fields(f), .. } => crate::shapes::refusal(f),
        Exec::Batch { .. } | Exec::Unbatch | Exec::ShuffleBatches { .. } => None,
        Exec::Window { from, .. } | Exec::BucketByLength { from, .. } => crate::shapes::refusal(from),
        Exec::UnbatchFields { from, .. } => crate::shapes::refusal(from),
        Exec::Pack { from, spec } => crate::shapes::pack_refusal(from, spec),
        Exec::TakeWhile { conditions, .. } => conditions.iter().find_map(|c| eval::check(c).err()),
        Exec::ReadBatches { maps, .. } => maps.iter().find_map(|m| match m {
            ReaderMap::MapBatch(f) | ReaderMap::Map(f) => {
                map_fn(f).or_else(|| fields_batchable(f.output.fields()))
            }
        }),
        Exec::Rust { .. } => Some("Rust code in a stage (`pipeline!`)".into()),
        // The pipelines taken are checked with the pipeline (`check_in`).
        Exec::Zip(_) | Exec::Concatenate(_) | Exec::SampleFrom(_) => None,
        Exec::InnerSource(_) => None,
        Exec::FlatMap { inner, .. } => inner.iter().find_map(|n| match &n.exec {
            Exec::Zip(_) | Exec::Concatenate(_) | Exec::SampleFrom(_) => {
                Some(format!("`{}` inside a flat_map", n.exec.name()))
            }
            e => refusal(e, schema),
        }),
        other => Some(format!("`{}`", other.name())),
    }
}

/// Serialized records gathered into one [`RecordBatch`] (`batch` of records).
fn records_batch(rows: Vec<Item>) -> Result<Item, BoxError> {
    let records = rows
        .into_iter()
        .map(|x| match x {
            Item::Record(r) => Ok(r),
            _ => Err("a batch of records of an element that is not one"),
        })
        .collect::<Result<Vec<Record>, _>>()?;
    Ok(Item::Records(RecordBatch::from(records)))
}

/// A dataset of the engine's elements.
pub type Ds = Boxed<Item>;

type R<T> = Result<T, Error>;

pub(crate) fn invalid(e: impl std::fmt::Display) -> Error {
    Error::Invalid(e.to_string())
}

fn usize_arg(p: &Params, v: &ArgValue) -> R<usize> {
    p.u64(v).map(|n| n as usize).map_err(invalid)
}

fn parallel(p: &Params, v: &ArgValue) -> R<Parallelism> {
    match v {
        ArgValue::Auto => Ok(Parallelism::Auto),
        v => Ok(Parallelism::Fixed(usize_arg(p, v)?)),
    }
}

fn seed(p: &Params, v: &Option<ArgValue>) -> R<u64> {
    match v {
        Some(v) => p.u64(v).map_err(invalid),
        None => Ok(abi::fresh_seed()),
    }
}

fn reader(r: &physical::ReaderOptions) -> ReaderOptions {
    ReaderOptions {
        compression: match r.compression {
            physical::Compression::Auto => Compression::Auto,
            physical::Compression::None => Compression::None,
            physical::Compression::Gzip => Compression::Gzip,
            physical::Compression::Zlib => Compression::Zlib,
        },
        verify_crc: r.verify_crc,
        on_corrupt: match r.on_corrupt {
            physical::CorruptPolicy::Fail => CorruptPolicy::Fail,
            physical::CorruptPolicy::Skip => CorruptPolicy::Skip,
            physical::CorruptPolicy::SkipFile => CorruptPolicy::SkipFile,
        },
        ..Default::default()
    }
}

pub(crate) fn names_of(fields: &[FieldType]) -> Names {
    Arc::from(fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>())
}

/// What the chain holds between nodes: files (before the reader), or elements.
enum Chain {
    Paths(Paths),
    Items(Ds),
}

/// The file paths between `files()` and the reader (a file-level `shard`, `take`, … over
/// them, as the generated code runs them).
pub(crate) type Paths = Boxed<std::path::PathBuf>;

/// Builds the stages of `stages` with `params`; the nodes are known to run
/// ([`refusal`]). `all`: the file's pipelines (what `zip`, `concatenate` and
/// `sample_from` take).
pub(crate) fn chain(
    stages: &[physical::ExecNode],
    params: &Arc<Params>,
    schema: &Arc<Schema>,
    all: &[Pipeline],
) -> R<Ds> {
    // The pipeline's random operations are numbered from 0, in stage order.
    let _ids = crate::ops::Ids::fresh();
    let outer = crate::sources::reset_file();
    let ds = chain_on(stages, None, params, schema, all);
    crate::sources::restore_file(outer);
    match ds? {
        Some(Chain::Items(ds)) => Ok(ds),
        Some(Chain::Paths(_)) => Err(invalid("the engine yields elements, not paths: add a reader")),
        None => Err(invalid("an empty plan")),
    }
}

/// The stages of `stages` built over `ds` (a source's stages over none).
fn chain_on(
    stages: &[physical::ExecNode],
    mut ds: Option<Chain>,
    params: &Arc<Params>,
    schema: &Arc<Schema>,
    all: &[Pipeline],
) -> R<Option<Chain>> {
    for node in stages {
        let built = stage(&node.exec, ds, params, schema, all);
        crate::sources::track_file(&node.exec);
        ds = Some(built?);
    }
    Ok(ds)
}

/// The dataset of the pipeline `name` of `all` that a combining stage takes, with its
/// parameters (`--set NAME.PARAM=VALUE`), its elements as `output` (fields in its order).
fn input(name: &str, output: &Element, p: &Params, all: &[Pipeline]) -> R<Ds> {
    let pipeline = all
        .iter()
        .find(|x| x.name() == name)
        .ok_or_else(|| invalid(format!("no pipeline `{name}` to take")))?;
    let params = p.input(name).ok_or_else(|| invalid(format!("no parameters of pipeline `{name}`")))?;
    let ds = crate::dataset_in(all, pipeline, params)?;
    let names = match output {
        Element::Fields(f) => names_of(f),
        Element::Batch(inner) if matches!(**inner, Element::Fields(_)) => names_of(inner.fields()),
        _ => return Ok(ds),
    };
    Ok(ds
        .try_map(move |x: Item| if item_names(&x) == Some(&names) { Ok(x) } else { select(x, &names) })
        .boxed())
}

/// The fields of a row or a batch.
fn item_names(x: &Item) -> Option<&Names> {
    match x {
        Item::Row(r) => Some(&r.names),
        Item::Batch(b) => Some(&b.names),
        _ => None,
    }
}

/// `zip`'s element of a pair: the fields (or columns) of `a`, then those of `b`.
fn merged(a: Item, b: Item) -> Result<Item, BoxError> {
    let names = |a: &Names, b: &Names| -> Names { a.iter().chain(b.iter()).cloned().collect() };
    Ok(match (a, b) {
        (Item::Row(mut a), Item::Row(b)) => {
            a.values.extend(b.values);
            Item::Row(Row { names: names(&a.names, &b.names), values: a.values })
        }
        (Item::Batch(mut a), Item::Batch(mut b)) => {
            let mut columns = std::mem::take(&mut a.columns);
            columns.extend(std::mem::take(&mut b.columns));
            Item::Batch(Columns { names: names(&a.names, &b.names), columns, rows: a.rows })
        }
        _ => return Err("a zip of elements without fields".into()),
    })
}

/// `flat_map`: each element's inner chain, built anew over the source made of it (the
/// inner chain's random operations numbered where the generated code numbers them:
/// after the outer stages before it).
fn flat_map(ds: Ds, inner: &[physical::ExecNode], p: &Arc<Params>, schema: &Arc<Schema>) -> R<Ds> {
    let (Some(physical::ExecNode { exec: Exec::InnerSource(source), .. }), rest) =
        (inner.first(), inner.get(1..).unwrap_or_default())
    else {
        return Err(invalid("a flat_map without its inner source"));
    };
    // Built once over no elements: the ids its random operations take.
    let first = crate::ops::take_ids(0);
    let none: Ds = sluice_runtime::stage::from_vec(Vec::<Item>::new()).boxed();
    chain_on(rest, Some(Chain::Items(none)), p, schema, &[])?;
    let (source, rest, p, schema) = (source.clone(), rest.to_vec(), p.clone(), schema.clone());
    let f = move |x: Item| -> Result<Ds, BoxError> {
        let Item::Row(row) = x else { return Err("a flat_map of an element without fields".into()) };
        let from = crate::sources::inner_source(&source, row, &p)?;
        let _ids = crate::ops::Ids::starting(first);
        let outer = crate::sources::reset_file();
        let ds = chain_on(&rest, Some(Chain::Items(from)), &p, &schema, &[]);
        crate::sources::restore_file(outer);
        match ds? {
            Some(Chain::Items(ds)) => Ok(ds),
            _ => Err("a flat_map's inner chain of no elements".into()),
        }
    };
    Ok(sluice_runtime::stage::flat_map(ds, f).boxed())
}

/// Stage `e` over the file paths `paths` (not a reader): a file-level `shard`, `take`,
/// `skip`, `repeat`, `shuffle` or `prefetch` gives paths.
fn paths_stage(e: &Exec, paths: Paths, p: &Arc<Params>) -> R<Chain> {
    let paths = match e {
        Exec::Take(n) => paths.take(p.u64(n).map_err(invalid)?).boxed(),
        Exec::Skip(n) => paths.skip(p.u64(n).map_err(invalid)?).boxed(),
        Exec::Repeat(count) => {
            paths.repeat(count.as_ref().map(|c| p.u64(c)).transpose().map_err(invalid)?).boxed()
        }
        Exec::Shuffle { buffer, seed: s, reshuffle_each_epoch } => paths
            .shuffle(usize_arg(p, buffer)?, seed(p, s)?)
            .reshuffle_each_epoch(*reshuffle_each_epoch)
            .boxed(),
        Exec::Shard { num_shards, index, remainder } => {
            let (n, i) = (p.u64(num_shards).map_err(invalid)?, p.u64(index).map_err(invalid)?);
            match remainder {
                Remainder::Keep => paths.shard(n, i)?.boxed(),
                Remainder::Drop => paths.shard_with(n, i, sluice_runtime::stage::Remainder::Drop)?.boxed(),
                Remainder::Pad => paths.shard_with(n, i, sluice_runtime::stage::Remainder::Pad)?.boxed(),
            }
        }
        Exec::Prefetch(PrefetchDepth::Auto) => paths.prefetch(Buffer::Auto).boxed(),
        Exec::Prefetch(PrefetchDepth::Elements(n)) => paths.prefetch(usize_arg(p, n)?).boxed(),
        other => return Err(invalid(format!("`{}` of file paths", other.name()))),
    };
    Ok(Chain::Paths(paths))
}

/// The declarations a map's parser reads.
pub(crate) type Schema = Vec<FieldDecl>;

fn items(ds: Option<Chain>) -> R<Ds> {
    match ds {
        Some(Chain::Items(ds)) => Ok(ds),
        _ => Err(invalid("a stage of elements without an input")),
    }
}

fn stage(e: &Exec, ds: Option<Chain>, p: &Arc<Params>, schema: &Arc<Schema>, all: &[Pipeline]) -> R<Chain> {
    let reads = matches!(
        e,
        Exec::Interleave { .. }
            | Exec::ReadBatches { .. }
            | Exec::ReadColumns { .. }
            | Exec::ReadFile { .. }
            | Exec::GlobalShuffle { .. }
    );
    let ds = match ds {
        Some(Chain::Paths(paths)) if !reads => return paths_stage(e, paths, p),
        ds => ds,
    };
    Ok(Chain::Items(match e {
        Exec::Zip(z) => {
            let batched = matches!(z.output, Element::Batch(_));
            let mut out: Option<Ds> = None;
            for (name, element) in z.inputs.iter().zip(&z.elements) {
                let d = input(name, element, p, all)?;
                out = Some(match out {
                    None => d,
                    Some(a) if batched => zip_batches(a, d).try_map(|(a, b)| merged(a, b)).boxed(),
                    Some(a) => zip(a, d).try_map(|(a, b)| merged(a, b)).boxed(),
                });
            }
            out.ok_or_else(|| invalid("a zip of no pipelines"))?
        }
        Exec::Concatenate(c) => {
            let mut out: Option<Ds> = None;
            for name in &c.inputs {
                let d = input(name, &c.output, p, all)?;
                out = Some(match out {
                    None => d,
                    Some(a) => concatenate(a, d).boxed(),
                });
            }
            out.ok_or_else(|| invalid("a concatenation of no pipelines"))?
        }
        Exec::SampleFrom(s) => {
            let inputs =
                s.inputs.iter().map(|name| input(name, &s.output, p, all)).collect::<R<Vec<Ds>>>()?;
            sample_from(inputs, s.weights.clone(), seed(p, &s.seed)?)?
                .stop_on_empty_dataset(s.stop_on_empty)
                .boxed()
        }
        Exec::FlatMap { inner, .. } => flat_map(items(ds)?, inner, p, schema)?,
        Exec::Files { pattern, shuffle_seed } => {
            let pattern = p.text(pattern).map_err(invalid)?;
            let mut f = files(&pattern)?;
            if let Some(s) = shuffle_seed {
                f = f.shuffled(p.u64(s).map_err(invalid)?);
            }
            return Ok(Chain::Paths(f.boxed()));
        }
        Exec::Range(r) => {
            let (start, end, step) = (
                p.i64(&r.start).map_err(invalid)?,
                p.i64(&r.end).map_err(invalid)?,
                p.i64(&r.step).map_err(invalid)?,
            );
            let names: Names = Arc::from(["value".to_string()]);
            range_step(start, end, step)
                .map(move |v: i64| {
                    Item::Row(Row { names: names.clone(), values: vec![Value::scalar(Data::I64(vec![v]))] })
                })
                .named("range")
                .boxed()
        }
        Exec::Interleave { format, reader: r, cycle, block, parallel: par, deterministic } => {
            let Some(Chain::Paths(paths)) = ds else { return Err(invalid("a reader without files")) };
            let cycle = match cycle {
                ArgValue::Auto => auto_cycle(&paths)?,
                c => usize_arg(p, c)?,
            };
            let (block, par) = (usize_arg(p, block)?, parallel(p, par)?);
            crate::sources::interleave(p, paths, format, r, cycle, block, par, *deterministic)?
        }
        Exec::ReadColumns { format, size, drop_remainder, .. } => {
            let Some(Chain::Paths(paths)) = ds else { return Err(invalid("a reader without files")) };
            crate::sources::read_columns(p, paths, format, usize_arg(p, size)?, *drop_remainder)?
        }
        Exec::ReadFile { labels, on_error } => {
            let Some(Chain::Paths(paths)) = ds else { return Err(invalid("`read_file` without files")) };
            crate::sources::read_file(paths, *labels == physical::Labels::Dir, *on_error)
        }
        Exec::GlobalShuffle { reader: r, table, window, seed: s, reshuffle_each_epoch, shard } => {
            let Some(Chain::Paths(paths)) = ds else {
                return Err(invalid("`shuffle(global)` without files"));
            };
            let shard = crate::sources::global_shard(p, shard)?;
            let window = window.as_ref().map(|w| p.u64(w)).transpose().map_err(invalid)?;
            let read = (r, table.as_ref(), window);
            crate::sources::global(p, paths, read, seed(p, s)?, *reshuffle_each_epoch, shard)?
        }
        Exec::ShuffleRepeat { buffer, seed: s, count } => {
            let count = count.as_ref().map(|c| p.u64(c)).transpose().map_err(invalid)?;
            items(ds)?
                .shuffle(usize_arg(p, buffer)?, seed(p, s)?)
                .reshuffle_each_epoch(true)
                .repeat(count)
                .boxed()
        }
        Exec::ReadBatches { reader: r, cycle, parallel: par, size, drop_remainder, maps } => {
            let Some(Chain::Paths(paths)) = ds else { return Err(invalid("a reader without files")) };
            let cycle = match cycle {
                ArgValue::Auto => auto_cycle(&paths)?,
                c => usize_arg(p, c)?,
            };
            let maps = maps
                .iter()
                .map(|m| match m {
                    ReaderMap::MapBatch(f) | ReaderMap::Map(f) => MapRows::new(f, p, schema),
                })
                .collect::<R<Vec<_>>>()?;
            tfrecord_batches(paths, reader(r), cycle, usize_arg(p, size)?, *drop_remainder)
                .num_parallel(parallel(p, par)?)
                .map_batches(move |b: RecordBatch| -> Result<Item, BoxError> {
                    maps.iter().try_fold(Item::Records(b), |x, m| m.apply(x))
                })
                .boxed()
        }
        Exec::Batch { input: Element::Record, size, drop_remainder, .. } => items(ds)?
            .chunks(usize_arg(p, size)?, *drop_remainder)
            .try_map(records_batch)
            .named("batch")
            .boxed(),
        Exec::Map { f, parallel: par, deterministic, filter } => {
            let m = Arc::new(MapRows::new(f, p, schema)?);
            let filter = filter.clone().map(Arc::new);
            let ds = items(ds)?;
            let (par, det) = (parallel(p, par)?, *deterministic);
            let (skip, pp, random) = (f.skip_errors, p.clone(), m.random);
            let plain = !skip && filter.is_none();
            // The element `index` of `epoch` mapped (and kept or not by the fused filter).
            let one = move |x: Item, epoch: u64, index: u64| -> Result<Option<Item>, BoxError> {
                let y = match m.apply_at(x, epoch, index) {
                    Ok(y) => y,
                    Err(e) if skip => return Err(skippable(e)),
                    Err(e) => return Err(e),
                };
                if let (Some(c), Item::Row(row)) = (&filter, &y)
                    && !(Eval { row, params: &pp }).holds(c)?
                {
                    return Ok(None);
                }
                Ok(Some(y))
            };
            let kept = |y: Option<Item>| y.ok_or_else(|| BoxError::from("an element the map dropped"));
            // As the generated code: a map that draws random numbers numbers its elements.
            match (random, plain) {
                (false, true) => ds
                    .try_map(move |x: Item| one(x, 0, 0).and_then(kept))
                    .num_parallel(par)
                    .deterministic(det)
                    .named("map")
                    .boxed(),
                (false, false) => ds
                    .try_map_skipping(move |x: Item| one(x, 0, 0))
                    .num_parallel(par)
                    .deterministic(det)
                    .named("map")
                    .somes()
                    .boxed(),
                (true, true) => ds
                    .enumerate()
                    .try_map(move |x: Indexed<Item>| one(x.value, x.epoch, x.index).and_then(kept))
                    .num_parallel(par)
                    .deterministic(det)
                    .named("map")
                    .boxed(),
                (true, false) => ds
                    .enumerate()
                    .try_map_skipping(move |x: Indexed<Item>| one(x.value, x.epoch, x.index))
                    .num_parallel(par)
                    .deterministic(det)
                    .named("map")
                    .somes()
                    .boxed(),
            }
        }
        Exec::ChunkedMap { size, drop_remainder, f, parallel: par, deterministic } => {
            let m = Arc::new(MapRows::new(f, p, schema)?);
            let skip = f.skip_errors;
            items(ds)?
                .chunks(usize_arg(p, size)?, *drop_remainder)
                .try_map_skipping(move |rows: Vec<Item>| {
                    let mut out = Vec::with_capacity(rows.len());
                    for (i, x) in rows.into_iter().enumerate() {
                        match m.row_at(x, 0, i as u64) {
                            Ok(r) => out.push(r),
                            Err(e) if skip => return Err(skippable(e)),
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(Some(Item::Batch(Columns::from_rows(m.names.clone(), out)?)))
                })
                .num_parallel(parallel(p, par)?)
                .deterministic(*deterministic)
                .named("map")
                .somes()
                .boxed()
        }
        Exec::MapBatch { f, size, drop_remainder, parallel: par, deterministic, .. } => {
            // As the generated code: the elements gathered first (records into a
            // `RecordBatch`), then the map's workers make each batch's columns row by row.
            let m = Arc::new(MapRows::new(f, p, schema)?);
            let chunks = items(ds)?.chunks(usize_arg(p, size)?, *drop_remainder);
            let (par, det) = (parallel(p, par)?, *deterministic);
            // Each way below is the map stage of `par` workers.
            macro_rules! workers {
                ($stage:expr) => {
                    $stage.num_parallel(par).deterministic(det).named("map_batch").boxed()
                };
            }
            if matches!(f.input, Element::Record) && m.random {
                workers!(
                    chunks
                        .try_map(records_batch)
                        .enumerate()
                        .try_map(move |x: Indexed<Item>| m.apply_at(x.value, x.epoch, x.index))
                )
            } else if matches!(f.input, Element::Record) {
                workers!(chunks.try_map(records_batch).try_map(move |x: Item| m.apply(x)))
            } else if !matches!(f.output, Element::Fields(_)) && m.random {
                // A map over batches before a second `batch`: each batch mapped, element `i`
                // of the gathered batch `index` drawing as element `(index << 20) | i`.
                workers!(chunks.enumerate().try_map(move |x: Indexed<Vec<Item>>| {
                    let at = |i: usize| (x.index << 20) | i as u64;
                    crate::shapes::each_of_batch_at(x.value, |i, b| m.apply_at(b, x.epoch, at(i)))
                }))
            } else if !matches!(f.output, Element::Fields(_)) {
                workers!(
                    chunks.try_map(move |rows: Vec<Item>| crate::shapes::each_of_batch(rows, |x| m.apply(x)))
                )
            } else if m.random {
                // Elements mapped as the batch gathers them: row `i` of batch `index` draws as
                // element `(index << 20) | i`, as the generated `map_batch` numbers them.
                workers!(chunks.enumerate().try_map(move |x: Indexed<Vec<Item>>| {
                    let next = std::cell::Cell::new(0u64);
                    crate::shapes::rows_batch(x.value, |row| {
                        let i = next.replace(next.get() + 1);
                        m.row_at(row, x.epoch, (x.index << 20) | i)
                    })
                }))
            } else {
                workers!(chunks.try_map(move |rows: Vec<Item>| crate::shapes::rows_batch(rows, |x| m.row(x))))
            }
        }
        Exec::Batch { input, size, drop_remainder, padded, pad_to_multiple, padding_values } => {
            crate::shapes::batch(
                items(ds)?,
                input,
                size,
                *drop_remainder,
                padded.as_ref(),
                pad_to_multiple.as_ref(),
                padding_values,
                p,
            )?
        }
        Exec::Filter { conditions, .. } => {
            let (c, pp) = (Arc::new(conditions.clone()), p.clone());
            items(ds)?
                .try_filter(move |x: &Item| match x {
                    Item::Row(row) => Eval { row, params: &pp }.holds(&c),
                    _ => Err("a filter of an element without fields".into()),
                })
                .boxed()
        }
        Exec::Select { to, depth, .. } => {
            let (names, depth) = (names_of(to), *depth);
            items(ds)?.try_map(move |x: Item| crate::shapes::select_in(x, &names, depth)).boxed()
        }
        Exec::Shuffle { buffer, seed: s, reshuffle_each_epoch } => items(ds)?
            .shuffle(usize_arg(p, buffer)?, seed(p, s)?)
            .reshuffle_each_epoch(*reshuffle_each_epoch)
            .boxed(),
        Exec::Repeat(count) => {
            let count = count.as_ref().map(|c| p.u64(c)).transpose().map_err(invalid)?;
            items(ds)?.repeat(count).boxed()
        }
        Exec::Take(n) => items(ds)?.take(p.u64(n).map_err(invalid)?).boxed(),
        Exec::Skip(n) => items(ds)?.skip(p.u64(n).map_err(invalid)?).boxed(),
        Exec::Shard { num_shards, index, remainder } => {
            let (n, i) = (p.u64(num_shards).map_err(invalid)?, p.u64(index).map_err(invalid)?);
            let ds = items(ds)?;
            match remainder {
                Remainder::Keep => ds.shard(n, i)?.boxed(),
                Remainder::Drop => ds.shard_with(n, i, sluice_runtime::stage::Remainder::Drop)?.boxed(),
                Remainder::Pad => ds.shard_with(n, i, sluice_runtime::stage::Remainder::Pad)?.boxed(),
            }
        }
        Exec::Cache { file: None, .. } => items(ds)?.cache().boxed(),
        Exec::Cache { input, file: Some(path) } => {
            crate::cache::cache_file(items(ds)?, input, &p.text(path).map_err(invalid)?).map_err(invalid)?
        }
        Exec::Prefetch(PrefetchDepth::Auto) => items(ds)?.prefetch(Buffer::Auto).boxed(),
        Exec::Prefetch(PrefetchDepth::Elements(n)) => items(ds)?.prefetch(usize_arg(p, n)?).boxed(),
        Exec::Enumerate { to, start, .. } => {
            let start = p.i64(start).map_err(invalid)?;
            let names = names_of(to);
            items(ds)?
                .enumerate()
                .try_map(move |x: Indexed<Item>| -> Result<Item, BoxError> {
                    let Item::Row(mut row) = x.value else { return Err("`enumerate` of a batch".into()) };
                    row.values.push(Value::scalar(Data::I64(vec![start.wrapping_add(x.index as i64)])));
                    row.names = names.clone();
                    Ok(Item::Row(row))
                })
                .named("enumerate")
                .boxed()
        }
        Exec::Window { size, shift, stride, drop_remainder, .. } => {
            crate::shapes::window(items(ds)?, size, shift, stride, *drop_remainder, p)?
        }
        Exec::BucketByLength { from, spec } => crate::shapes::bucket(items(ds)?, from, spec)?,
        Exec::Unbatch => crate::shapes::unbatch(items(ds)?),
        Exec::UnbatchFields { from, to } => crate::shapes::unbatch_fields(items(ds)?, from, to)?,
        Exec::TakeWhile { conditions, .. } => crate::shapes::taking_while(items(ds)?, conditions, p),
        Exec::ShuffleBatches { buffer, seed: s, reshuffle_each_epoch, size, drop_remainder } => {
            crate::shapes::shuffle_records(
                items(ds)?,
                usize_arg(p, buffer)?,
                seed(p, s)?,
                *reshuffle_each_epoch,
                usize_arg(p, size)?,
                *drop_remainder,
            )
        }
        Exec::Pack { from, spec } => crate::shapes::pack_rows(items(ds)?, from, spec)?,
        other => return Err(invalid(format!("the engine does not run `{}`", other.name()))),
    }))
}

/// Keeps the fields (or columns) `names`, in that order.
pub(crate) fn select(x: Item, names: &Names) -> Result<Item, BoxError> {
    let pick = |have: &Names, mut values: Vec<Value>| -> Result<Vec<Value>, BoxError> {
        let mut out = Vec::with_capacity(names.len());
        for n in names.iter() {
            let i = have.iter().position(|h| h == n).ok_or_else(|| format!("no field `{n}`"))?;
            out.push(std::mem::replace(&mut values[i], Value::scalar(Data::Bool(Vec::new()))));
        }
        Ok(out)
    };
    Ok(match x {
        Item::Row(r) => Item::Row(Row { values: pick(&r.names, r.values)?, names: names.clone() }),
        Item::Batch(mut b) => {
            let columns = pick(&b.names, std::mem::take(&mut b.columns))?;
            Item::Batch(Columns { columns, names: names.clone(), rows: b.rows })
        }
        Item::Record(_) | Item::Records(_) => return Err("`select` of records".into()),
        Item::Items(_) => return Err("`select` of a batch of batches".into()),
    })
}
