//! Sources of the engine beyond TFRecords, as `codegen/stages.rs` prints them: the text
//! and CSV readers (`interleave` of `OpenLines` / `OpenCsv`) and their `parse_line` /
//! `parse_csv` (`abi::text`'s `line_text`, `csv_field`), `read_file` (`read_files`, a
//! file's element `{contents, path, label}`), `shuffle(global)` (`global_shuffle`), and
//! whether a stage's elements are a file's read whole (the generated `from_file`: a map's
//! error then names the file).

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_compiler::ir::decls::FieldDecl;
use sluice_compiler::ir::expr::Expr;
use sluice_compiler::ir::flat_map::{InnerKind, InnerSource};
use sluice_compiler::ir::formats::{ParquetFormat, ParseFormat, RecordFormat};
use sluice_compiler::ir::plan::{ArgValue, Element, FieldType, MapOp};
use sluice_compiler::ir::types::{DType, Shape, TensorType};
use sluice_compiler::physical::{self, Exec};
use sluice_runtime::abi;
use sluice_runtime::column::Buffer;
use sluice_runtime::parquet::{
    Bound, Cmp, ColumnShape, ColumnType, OpenParquet, ParquetOptions, RowGroupShard, RowGroupTest,
    TableColumn, TableColumns, parquet_columns, parquet_global_shuffle, parquet_parts,
};
use sluice_runtime::stage::{
    Dataset, FileContents, InterleaveFn, OpenTfRecord, Parallelism, ReadFileOptions, Record, global_shuffle,
    read_files,
};
use sluice_runtime::text::{CsvOptions, OpenCsv, OpenLines, TextOptions};
use sluice_runtime::tfrecord::{Compression, CorruptPolicy, ReaderOptions};
use sluice_runtime::webdataset::{OpenWebDataset, WebDatasetOptions};
use sluice_runtime::{BoxError, Error};

use crate::build::{Ds, Paths};
use crate::eval::Eval;
use crate::num::Num;
use crate::params::Params;
use crate::value::{Data, Item, Kind, Names, Row, Value};

type R<T> = Result<T, Error>;

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::Invalid(e.to_string())
}

/// The runtime's policy for a plan's.
pub(crate) fn policy(p: physical::CorruptPolicy) -> CorruptPolicy {
    match p {
        physical::CorruptPolicy::Fail => CorruptPolicy::Fail,
        physical::CorruptPolicy::Skip => CorruptPolicy::Skip,
        physical::CorruptPolicy::SkipFile => CorruptPolicy::SkipFile,
    }
}

fn compression(c: physical::Compression) -> Compression {
    match c {
        physical::Compression::Auto => Compression::Auto,
        physical::Compression::None => Compression::None,
        physical::Compression::Gzip => Compression::Gzip,
        physical::Compression::Zlib => Compression::Zlib,
    }
}

/// The records of `paths` read `cycle` files at a time in `format`, as the generated
/// `ds.interleave(open_fn, cycle, block)` reads them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn interleave(
    p: &Params,
    paths: Paths,
    format: &RecordFormat,
    r: &physical::ReaderOptions,
    cycle: usize,
    block: usize,
    par: Parallelism,
    det: bool,
) -> R<Ds> {
    fn run<F>(paths: Paths, open: F, cycle: usize, block: usize, par: Parallelism, det: bool) -> Ds
    where
        F: InterleaveFn<PathBuf> + Send + Sync + 'static,
        F::Output: Dataset<Item = Record>,
    {
        paths.interleave(open, cycle, block).num_parallel(par).deterministic(det).map(Item::Record).boxed()
    }
    let c = compression(r.compression);
    Ok(match format {
        RecordFormat::TfRecord => {
            let options = ReaderOptions {
                compression: c,
                verify_crc: r.verify_crc,
                on_corrupt: policy(r.on_corrupt),
                ..Default::default()
            };
            run(paths, OpenTfRecord::new(options), cycle, block, par, det)
        }
        RecordFormat::Lines => {
            run(paths, OpenLines::new(TextOptions { compression: c }), cycle, block, par, det)
        }
        RecordFormat::Csv(csv) => {
            let options = CsvOptions {
                compression: c,
                header: csv.header,
                delimiter: csv.delimiter,
                columns: Arc::from(csv.columns.clone()),
            };
            run(paths, OpenCsv::new(options), cycle, block, par, det)
        }
        RecordFormat::WebDataset(w) => {
            let columns =
                w.columns.iter().map(|f| table_column(f, w.defaults.contains(&f.name))).collect::<Vec<_>>();
            let options = WebDatasetOptions { columns: Arc::from(columns), compression: c };
            run(paths, OpenWebDataset::new(options), cycle, block, par, det)
        }
        RecordFormat::Parquet(f) if f.shard.is_some() => {
            // A reader of row groups of the global list takes its files with the row
            // groups before each.
            let open = OpenParquet::new(parquet_options(p, f)?);
            parquet_parts(paths)
                .interleave(open, cycle, block)
                .num_parallel(par)
                .deterministic(det)
                .map(Item::Record)
                .boxed()
        }
        RecordFormat::Parquet(f) => {
            run(paths, OpenParquet::new(parquet_options(p, f)?), cycle, block, par, det)
        }
    })
}

/// The `ParquetOptions` of a `parquet` reader of `f`'s columns (as the generated ones),
/// with its shard of row groups when a `shard` moved into it (`RowGroupShard::new` holds
/// the index below the count).
fn parquet_options(p: &Params, f: &ParquetFormat) -> R<ParquetOptions> {
    let columns = f.columns.iter().map(|c| table_column(c, f.defaults.contains(&c.name))).collect::<Vec<_>>();
    let tests = f.tests.iter().map(row_group_test).collect::<Vec<_>>();
    let shard = match &f.shard {
        Some(s) => Some(RowGroupShard::new(
            p.u64(&s.num_shards).map_err(invalid)?,
            p.u64(&s.index).map_err(invalid)?,
        )?),
        None => None,
    };
    Ok(ParquetOptions { columns: Arc::from(columns), tests: Arc::from(tests), shard, ..Default::default() })
}

/// `ReadColumnsExec`: the Parquet files of `paths` as batches of `size` rows, each Arrow
/// array into its batch column (the runtime's `parquet_columns`, as the generated code
/// reads them), a column a tensor of the batch (`[rows, dims...]`).
pub(crate) fn read_columns(
    params: &Params,
    paths: Paths,
    p: &ParquetFormat,
    size: usize,
    drop_remainder: bool,
) -> R<Ds> {
    let names: Names = p.columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>().into();
    let dims = p
        .columns
        .iter()
        .map(|c| {
            c.ty.as_ref()
                .and_then(|t| fixed_dims(&t.shape))
                .ok_or_else(|| invalid("a Parquet column of a fixed shape"))
        })
        .collect::<R<Vec<_>>>()?;
    let ds = parquet_columns(paths, parquet_options(params, p)?, size, drop_remainder)?;
    Ok(ds
        .try_map(move |t: TableColumns| -> Result<Item, BoxError> {
            let rows = t.rows;
            let columns = t
                .columns
                .into_iter()
                .zip(&dims)
                .map(|(b, d)| {
                    let data = match b {
                        Buffer::Bool(v) => Data::Bool(v),
                        Buffer::U8(v) => Data::U8(v),
                        Buffer::I32(v) => Data::I32(v),
                        Buffer::U32(v) => Data::U32(v),
                        Buffer::I64(v) => Data::I64(v),
                        Buffer::U64(v) => Data::U64(v),
                        Buffer::F32(v) => Data::F32(v),
                        Buffer::F64(v) => Data::F64(v),
                        other => return Err(BoxError::from(format!("a column of {:?}", other.dtype()))),
                    };
                    let shape = std::iter::once(rows).chain(d.iter().copied()).collect();
                    Ok(Value { data, shape, kind: Kind::Tensor })
                })
                .collect::<Result<Vec<_>, BoxError>>()?;
            Ok(Item::Batch(crate::value::Columns { names: names.clone(), columns, rows }))
        })
        .named("read_columns")
        .boxed())
}

/// The sizes of a shape of fixed dimensions (`None` with a named or a variable size).
fn fixed_dims(shape: &Shape) -> Option<Vec<usize>> {
    match shape {
        Shape::Var => None,
        Shape::Dims(d) => d
            .iter()
            .map(|d| match d {
                sluice_compiler::ir::types::Dim::Fixed(k) => usize::try_from(*k).ok(),
                sluice_compiler::ir::types::Dim::Named(_) => None,
            })
            .collect(),
    }
}

/// The runtime's description of a column a `parquet` reader reads (as the generated
/// `TableColumn`).
fn table_column(f: &FieldType, has_default: bool) -> TableColumn {
    let ty = f.ty.clone().unwrap_or_else(|| TensorType { dtype: DType::U8, shape: Shape::scalar() });
    let dtype = match ty.dtype {
        DType::Bool => ColumnType::Bool,
        DType::U8 => ColumnType::U8,
        DType::I32 => ColumnType::I32,
        DType::U32 => ColumnType::U32,
        DType::I64 => ColumnType::I64,
        DType::U64 => ColumnType::U64,
        DType::F32 | DType::F16 | DType::Bf16 => ColumnType::F32,
        DType::F64 => ColumnType::F64,
        DType::Str => ColumnType::Str,
        DType::Bytes => ColumnType::Bytes,
    };
    let shape = match &ty.shape {
        Shape::Var => ColumnShape::List,
        Shape::Dims(d) if d.is_empty() => ColumnShape::Scalar,
        Shape::Dims(_) => ColumnShape::Fixed(fixed_dims(&ty.shape).map_or(0, |d| d.iter().product())),
    };
    TableColumn { name: f.name.clone(), dtype, shape, has_default }
}

/// A test of the filter after a `parquet` reader (as the generated `RowGroupTest`).
fn row_group_test(t: &sluice_compiler::ir::formats::ColumnTest) -> RowGroupTest {
    use sluice_compiler::ir::expr::BinaryOp as B;
    use sluice_compiler::ir::formats::TestValue;
    let op = match t.op {
        B::Lt => Cmp::Lt,
        B::Le => Cmp::Le,
        B::Gt => Cmp::Gt,
        B::Ge => Cmp::Ge,
        _ => Cmp::Eq,
    };
    let value = match t.value {
        TestValue::Int(i) => Bound::Int(i),
        TestValue::Float(x) => Bound::Float(x),
    };
    RowGroupTest { column: t.column.clone(), op, value }
}

/// `read_file`: each path's whole file, `{contents: bytes, path: str}` and, with labels,
/// `label: i64` (the generated record of `ReadFile::element`).
pub(crate) fn read_file(paths: Paths, labels: bool, on_error: physical::CorruptPolicy) -> Ds {
    let mut names = vec!["contents".to_string(), "path".to_string()];
    if labels {
        names.push("label".into());
    }
    let names: Names = Arc::from(names);
    read_files(paths, ReadFileOptions { labels, on_error: policy(on_error) })
        .map(move |f: FileContents| {
            let mut values =
                vec![Value::scalar(Data::Bytes(vec![f.contents])), Value::scalar(Data::Str(vec![f.path]))];
            if labels {
                values.push(Value::scalar(Data::I64(vec![f.label])));
            }
            Item::Row(Row { names: names.clone(), values })
        })
        .named("read_file")
        .boxed()
}

/// `shuffle(global)`: the records of the indexed files `paths` (the list taken once, now,
/// as the generated code takes it), or the rows of the Parquet files (`table`: their
/// columns), in a permutation per epoch, a `window` of positions read at a time, with the
/// fused shard.
pub(crate) fn global(
    params: &Params,
    paths: Paths,
    (r, table, window): (&physical::ReaderOptions, Option<&ParquetFormat>, Option<u64>),
    seed: u64,
    reshuffle_each_epoch: bool,
    shard: Option<(u64, u64, bool)>,
) -> R<Ds> {
    let paths = paths.stream()?.collect::<Result<Vec<_>, Error>>()?;
    if let Some(t) = table {
        let mut g = parquet_global_shuffle(paths, parquet_options(params, t)?, seed)?
            .reshuffle_each_epoch(reshuffle_each_epoch);
        if let Some(w) = window {
            g = g.window(w);
        }
        if let Some((n, k, drop)) = shard {
            g = g.shard(n, k, drop)?;
        }
        return Ok(g.map(Item::Record).boxed());
    }
    let mut g = global_shuffle(paths, seed)?
        .on_corrupt(policy(r.on_corrupt))
        .reshuffle_each_epoch(reshuffle_each_epoch);
    if let Some(w) = window {
        g = g.window(usize::try_from(w).unwrap_or(usize::MAX));
    }
    if let Some((n, k, drop)) = shard {
        g = g.shard(n, k, drop)?;
    }
    Ok(g.map(Item::Record).boxed())
}

/// The fused shard of a `GlobalShuffleExec` with its values.
pub(crate) fn global_shard(
    p: &Params,
    shard: &Option<(ArgValue, ArgValue, bool)>,
) -> R<Option<(u64, u64, bool)>> {
    shard
        .as_ref()
        .map(|(n, k, drop)| Ok((p.u64(n).map_err(invalid)?, p.u64(k).map_err(invalid)?, *drop)))
        .transpose()
}

thread_local! {
    /// Whether the stage being built takes the elements of a `read_file` (with the file in
    /// their `path` field): [`track_file`] sets it as the chain is built.
    static FROM_FILE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the elements after `e` are `read_file`'s (`codegen/stages.rs`'s `from_file`):
/// call with each node, in order, after building it (a map built before reads whether
/// its input are); returns whether `e`'s input are.
pub(crate) fn track_file(e: &Exec) -> bool {
    let before = FROM_FILE.get();
    let after = match e {
        Exec::ReadFile { .. } => true,
        Exec::Select { to, .. } => before && to.iter().any(|f| f.name == "path"),
        Exec::Filter { .. }
        | Exec::Shuffle { .. }
        | Exec::ShuffleRepeat { .. }
        | Exec::Repeat(_)
        | Exec::Take(_)
        | Exec::Skip(_)
        | Exec::Shard { .. }
        | Exec::Cache { .. }
        | Exec::Prefetch(_)
        | Exec::TakeWhile { .. } => before,
        _ => false,
    };
    FROM_FILE.set(after);
    before
}

/// Whether the map being built takes `read_file`'s elements (see [`track_file`]).
pub(crate) fn from_file() -> bool {
    FROM_FILE.get()
}

/// Starts a chain: no file read whole yet; returns the state of the chain around it
/// (for [`restore_file`] once this one is built).
pub(crate) fn reset_file() -> bool {
    FROM_FILE.replace(false)
}

/// Back to the chain around a nested one (see [`reset_file`]).
pub(crate) fn restore_file(outer: bool) {
    FROM_FILE.set(outer);
}

/// The file of an element of `read_file` (its `path` field).
pub(crate) fn file_of(row: &Row) -> Option<String> {
    match row.get("path").map(|v| &v.data) {
        Some(Data::Str(p)) if p.len() == 1 => Some(p[0].clone()),
        _ => None,
    }
}

/// `parse_line`, `parse_csv` or `parse_parquet` (a `parquet` row or a `webdataset` sample)
/// of a record, as the generated map's first statements.
#[derive(Debug)]
pub(crate) enum TextParser {
    /// A line as `str` (no field when the map does not read it).
    Line(Names),
    /// The schema's columns of a CSV row.
    Csv(Names, Vec<CsvColumn>),
    /// The columns of a table row (`parquet`), in the reader's order.
    Table(Names, Vec<TableField>),
}

/// One column of a table row: the field's type and the schema default.
#[derive(Debug)]
pub(crate) struct TableField {
    name: String,
    ty: TensorType,
    dims: Option<Vec<usize>>,
    default: Option<Data>,
}

/// One schema column of a CSV row.
#[derive(Debug)]
pub(crate) struct CsvColumn {
    index: usize,
    name: String,
    dtype: DType,
    default: Option<Data>,
}

impl TextParser {
    /// The parser of `op` (`None`: not a text parse); `Err` names what the engine does not
    /// parse.
    pub(crate) fn of(op: &MapOp, schema: &[FieldDecl]) -> Result<Option<TextParser>, String> {
        let MapOp::Parse { format, fields } = op else { return Ok(None) };
        let names: Names = Arc::from(fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>());
        match format {
            ParseFormat::Line => Ok(Some(TextParser::Line(names))),
            ParseFormat::Csv => {
                let columns = fields.iter().map(|f| column(f, schema)).collect::<Result<_, _>>()?;
                Ok(Some(TextParser::Csv(names, columns)))
            }
            ParseFormat::Table => {
                let fields = fields.iter().map(|f| table_field(f, schema)).collect::<Result<_, _>>()?;
                Ok(Some(TextParser::Table(names, fields)))
            }
            _ => Ok(None),
        }
    }

    /// The row of record `r`; an error names the record (`abi::located`).
    pub(crate) fn parse(&self, r: &Record) -> Result<Row, BoxError> {
        self.row(r.as_bytes()).map_err(|e| abi::located(r.origin(), e.into()))
    }

    fn row(&self, x: &[u8]) -> Result<Row, String> {
        match self {
            TextParser::Line(names) if names.is_empty() => {
                Ok(Row { names: names.clone(), values: Vec::new() })
            }
            TextParser::Line(names) => Ok(Row {
                names: names.clone(),
                values: vec![Value::scalar(Data::Str(vec![abi::text::line_text(x)?]))],
            }),
            TextParser::Csv(names, columns) => {
                let values =
                    columns.iter().map(|c| c.value(x).map(Value::scalar)).collect::<Result<_, _>>()?;
                Ok(Row { names: names.clone(), values })
            }
            TextParser::Table(names, fields) => {
                let mut r = abi::table::RowReader::new(x)?;
                let values = fields.iter().map(|f| f.value(&mut r)).collect::<Result<_, _>>()?;
                Ok(Row { names: names.clone(), values })
            }
        }
    }
}

/// The column of `f` in a table row: its type, fixed dimensions and schema default.
fn table_field(f: &FieldType, schema: &[FieldDecl]) -> Result<TableField, String> {
    let what = || format!("`parse_parquet` of `{}`", f.name);
    let ty = f.ty.clone().ok_or_else(what)?;
    let decl = schema.iter().find(|d| d.name == f.name).ok_or_else(what)?;
    let default = match &decl.default {
        Some(v) => Some(crate::parse::default_of(v, ty.dtype).map_err(|_| what())?),
        None => None,
    };
    let dims = match &ty.shape {
        Shape::Var => None,
        Shape::Dims(d) if d.is_empty() => None,
        Shape::Dims(_) => Some(fixed_dims(&ty.shape).ok_or_else(what)?),
    };
    Data::with_capacity(ty.dtype, 0).map_err(|_| what())?;
    Ok(TableField { name: f.name.clone(), ty, dims, default })
}

impl TableField {
    /// The next column of `r` as this field's value, as the generated `table_row` reads it.
    fn value(&self, r: &mut abi::table::RowReader<'_>) -> Result<Value, String> {
        let name = self.name.as_str();
        macro_rules! typed {
            ($t:ty, $variant:ident) => {{
                let d: Option<&[$t]> = match &self.default {
                    Some(Data::$variant(v)) => Some(v.as_slice()),
                    _ => None,
                };
                match (&self.ty.shape, &self.dims) {
                    (Shape::Var, _) => {
                        let v = r.list::<$t>(name, d)?;
                        Value { shape: vec![v.len()], data: Data::$variant(v), kind: Kind::List }
                    }
                    (_, Some(dims)) => {
                        let t = r.tensor::<$t>(name, dims, d)?;
                        Value {
                            shape: dims.clone(),
                            data: Data::$variant(t.into_parts().1),
                            kind: Kind::Tensor,
                        }
                    }
                    (_, None) => Value::scalar(Data::$variant(vec![
                        r.scalar::<$t>(name, d.and_then(|d| d.first().copied()))?,
                    ])),
                }
            }};
        }
        Ok(match self.ty.dtype {
            DType::Bool => typed!(bool, Bool),
            DType::U8 => typed!(u8, U8),
            DType::I32 => typed!(i32, I32),
            DType::U32 => typed!(u32, U32),
            DType::I64 => typed!(i64, I64),
            DType::U64 => typed!(u64, U64),
            DType::F32 => typed!(f32, F32),
            DType::F64 => typed!(f64, F64),
            DType::Bytes => {
                let d = match &self.default {
                    Some(Data::Bytes(b)) => b.first().map(Vec::as_slice),
                    _ => None,
                };
                Value::scalar(Data::Bytes(vec![r.bytes(name, d)?]))
            }
            DType::Str => {
                let d = match &self.default {
                    Some(Data::Str(s)) => s.first().map(String::as_str),
                    _ => None,
                };
                Value::scalar(Data::Str(vec![r.text(name, d)?]))
            }
            other => return Err(format!("a table column of {other}")),
        })
    }
}

/// The column of `f`: its index in the schema, dtype and default.
fn column(f: &FieldType, schema: &[FieldDecl]) -> Result<CsvColumn, String> {
    let what = || format!("`parse_csv` of `{}`", f.name);
    let ty = f.ty.as_ref().ok_or_else(what)?;
    if ty.shape != Shape::scalar() || matches!(ty.dtype, DType::U8) {
        return Err(what());
    }
    let index = schema.iter().position(|d| d.name == f.name).ok_or_else(what)?;
    let default = match &schema[index].default {
        Some(v) => Some(crate::parse::default_of(v, ty.dtype).map_err(|_| what())?),
        None => None,
    };
    Data::with_capacity(ty.dtype, 0).map_err(|_| what())?;
    Ok(CsvColumn { index, name: f.name.clone(), dtype: ty.dtype, default })
}

impl CsvColumn {
    /// The value of this column of `row`, as `abi::text::csv_field` reads it.
    fn value(&self, row: &[u8]) -> Result<Data, String> {
        macro_rules! field {
            ($variant:ident) => {{
                let d = match &self.default {
                    Some(Data::$variant(v)) => v.first().cloned(),
                    _ => None,
                };
                Data::$variant(vec![abi::text::csv_field(row, self.index, &self.name, d)?])
            }};
        }
        Ok(match self.dtype {
            DType::Bool => field!(Bool),
            DType::I32 => field!(I32),
            DType::U32 => field!(U32),
            DType::I64 => field!(I64),
            DType::U64 => field!(U64),
            DType::F32 => field!(F32),
            DType::F64 => field!(F64),
            DType::Bytes => field!(Bytes),
            DType::Str => field!(Str),
            other => return Err(format!("a CSV column of {other}")),
        })
    }
}

/// The source of a `flat_map`'s inner chain made from the element `row`
/// (`codegen/flat_map.rs`'s `inner_source`): `range` with bounds computed from its fields,
/// its kept fields cloned into each value, or the rows of its sliced fields (their first
/// dimension; lengths equal: `slice_len`), each with the kept fields.
pub(crate) fn inner_source(s: &InnerSource, row: Row, p: &Params) -> Result<Ds, BoxError> {
    let out: Names = match &s.output {
        Element::Fields(f) => f.iter().map(|f| f.name.clone()).collect(),
        _ => return Err("a flat_map's source of fields".into()),
    };
    let field =
        |name: &str| row.get(name).cloned().ok_or_else(|| BoxError::from(format!("no field `{name}`")));
    match &s.kind {
        InnerKind::Range { start, end, step, keep } => {
            let ev = Eval { row: &row, params: p };
            let bound = |e: &Expr| -> Result<i64, BoxError> {
                match ev.scalar(e, 0, DType::I64)? {
                    Num::I64(v) => Ok(v),
                    _ => Err("a bound".into()),
                }
            };
            let (start, end, step) = (bound(start)?, bound(end)?, bound(step)?);
            let kept = keep.iter().map(|k| field(k)).collect::<Result<Vec<Value>, _>>()?;
            Ok(sluice_runtime::stage::range_step(start, end, step)
                .map(move |v: i64| {
                    let mut values = Vec::with_capacity(1 + kept.len());
                    values.push(Value::scalar(Data::I64(vec![v])));
                    values.extend(kept.iter().cloned());
                    Item::Row(Row { names: out.clone(), values })
                })
                .boxed())
        }
        InnerKind::Slices { fields, keep } => {
            let sliced = fields.iter().map(|f| field(f)).collect::<Result<Vec<Value>, _>>()?;
            let lengths: Vec<(&str, usize)> = fields
                .iter()
                .zip(&sliced)
                .map(|(f, v)| (f.as_str(), v.shape.first().copied().unwrap_or(0)))
                .collect();
            let n = sluice_runtime::stage::slice_len(&lengths)?;
            let kept = keep.iter().map(|k| field(k)).collect::<Result<Vec<Value>, _>>()?;
            let mut rows = Vec::with_capacity(n);
            for i in 0..n {
                let mut values = Vec::with_capacity(sliced.len() + kept.len());
                for v in &sliced {
                    let shape = v.shape[1..].to_vec();
                    let per: usize = shape.iter().product();
                    let kind = if shape.is_empty() { Kind::Scalar } else { Kind::Tensor };
                    values.push(Value { data: v.data.slice(i * per, per), shape, kind });
                }
                values.extend(kept.iter().cloned());
                rows.push(Item::Row(Row { names: out.clone(), values }));
            }
            Ok(sluice_runtime::stage::from_vec(rows).boxed())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use sluice_runtime::abi::show::{Json, Show};
    use sluice_runtime::stage::Dataset;

    /// A new directory of its own for test `name`, with `files` (relative path, bytes).
    fn dir(name: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-engine-sources-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for (f, bytes) in files {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        d
    }

    /// Every element of `pipeline` of `source` over the files `glob` as `sluice show`
    /// prints them, then the error that ended the pass, if one did.
    fn shown(source: &str, pipeline: &str, glob: &Path) -> (Vec<String>, Option<String>) {
        let c = sluice_compiler::compile(source);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let p = c.pipelines.iter().find(|p| p.name() == pipeline).unwrap();
        crate::check(p).unwrap();
        let set = [("files".to_string(), glob.to_string_lossy().into_owned())];
        let ds = crate::dataset(p, &crate::params(p, &set).unwrap()).unwrap();
        let mut out = Vec::new();
        for x in ds.stream().unwrap() {
            match x {
                Ok(x) => {
                    let mut j = Json::new();
                    x.show(&mut j);
                    out.push(j.as_str().to_string());
                }
                Err(e) => return (out, Some(e.to_string())),
            }
        }
        (out, None)
    }

    const CSV: &str = r#"
        pipeline table(files: glob = "x") {
            schema { name: str, age: i64, score: f32 = 0.5, tag: bytes = "none" }
            csv(files, header: true);
        }
        pipeline skipping(files: glob = "x") {
            schema { name: str, age: i64 }
            csv(files, delimiter: ";", header: false, on_error: skip);
        }
    "#;

    #[test]
    fn csv_rows_are_the_schema_columns_with_defaults_and_located_errors() {
        let d = dir("csv", &[("a.csv", b"age,name,tag,score\n7,\"a, b\",,2.25\n8,c,xy,\n")]);
        let (rows, e) = shown(CSV, "table", &d.join("*.csv"));
        assert_eq!(e, None);
        assert_eq!(
            rows,
            [
                r#"{"name":"a, b","age":{"dtype":"i64","shape":[],"values":[7]},"score":{"dtype":"f32","shape":[],"values":[2.25]},"tag":{"dtype":"bytes","base64":"bm9uZQ=="}}"#,
                r#"{"name":"c","age":{"dtype":"i64","shape":[],"values":[8]},"score":{"dtype":"f32","shape":[],"values":[0.5]},"tag":{"dtype":"bytes","base64":"eHk="}}"#,
            ]
        );
        let d = dir("csv-bad", &[("b.csv", b"name,age,score,tag\nz,1,,\ny,old,,\n")]);
        let glob = d.join("*.csv");
        let (rows, e) = shown(CSV, "table", &glob);
        assert_eq!(rows.len(), 1);
        let e = e.expect("`old` is not an i64");
        assert!(e.ends_with("b.csv:3: column 2 (`age`): `old` is not an i64"), "{e}");
        let d = dir("csv-skip", &[("c.csv", b"p;1\nq;x\nr;3\n")]);
        let (rows, e) = shown(CSV, "skipping", &d.join("*.csv"));
        assert_eq!((rows.len(), e), (2, None));
        assert!(rows[1].starts_with(r#"{"name":"r","#), "{rows:?}");
    }

    const TEXT: &str = r#"
        pipeline lines(files: glob = "x") { text_lines(files); }
        pipeline batches(files: glob = "x") { text_lines(files, cycle: 2); batch(2); }
        pipeline files_read(files: glob = "x") { files(files); read_file(labels: dir); }
        pipeline failing(files: glob = "x") {
            files(files);
            read_file(labels: dir);
            map { n = 1 / (label * 0); }
        }
    "#;

    #[test]
    fn lines_are_str_elements_and_bad_utf8_names_its_line() {
        let d = dir("lines", &[("a.txt", b"one\ntwo\n"), ("b.txt", b"x\n\xffy\n")]);
        let (rows, e) = shown(TEXT, "lines", &d.join("a.txt"));
        assert_eq!((rows, e), (vec![r#"{"line":"one"}"#.to_string(), r#"{"line":"two"}"#.to_string()], None));
        let (rows, e) = shown(TEXT, "batches", &d.join("*.txt"));
        assert_eq!(rows, [r#"{"line":["one","x"]}"#]);
        let e = e.expect("not UTF-8");
        assert!(e.ends_with("b.txt:2: character 1: not UTF-8 (byte 0xff)"), "{e}");
    }

    #[test]
    fn read_file_gives_contents_path_and_the_folders_label() {
        let d = dir("read", &[("cat/a.bin", b"\x01\x02"), ("dog/b.bin", b"zz")]);
        let (rows, e) = shown(TEXT, "files_read", &d.join("*/*.bin"));
        assert_eq!(e, None);
        assert_eq!(rows.len(), 2);
        let path = d.join("dog/b.bin");
        assert_eq!(
            rows[1],
            format!(
                r#"{{"contents":{{"dtype":"bytes","base64":"eno="}},"path":"{}","label":{{"dtype":"i64","shape":[],"values":[1]}}}}"#,
                path.display()
            )
        );
        // A map's error names the file (the generated `located_file`).
        let (rows, e) = shown(TEXT, "failing", &d.join("*/*.bin"));
        let e = e.expect("division by zero");
        assert!(rows.is_empty());
        assert!(e.contains(&format!("`map`: {}: ", d.join("cat/a.bin").display())), "{e}");
        assert!(e.contains("division by zero"), "{e}");
    }
}
