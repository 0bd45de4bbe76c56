//! A map's statements over one element ([`MapRows`]): parse a record, then each
//! assignment, then the map's output fields in order. Two paths give the same values:
//!
//! - row by row: each statement's value a [`Value`] of the row (a batch's rows then
//!   gathered into columns, padded where lists differ);
//! - straight into a batch's columns ([`Column`]), when a batch of records is mapped and
//!   every output field has a fixed size and nothing draws random numbers, as the
//!   generated `map_batch` does (`codegen/maps.rs::direct_columns_body`): a field's last
//!   statement appends its values to the column as it computes them (the fused JPEG pass,
//!   an elementwise expression computed in place: `vector::append`), any other field's
//!   value is appended once.
//!
//! Runs of statements the code generator fuses (`sluice_compiler::ir::fusion`) are fused
//! here too: `decode_jpeg` → `resize` → `scale` → `normalize` is one pass of the runtime.

use std::sync::Arc;

use sluice_compiler::ir::expr::Expr;
use sluice_compiler::ir::fusion::{self, JpegRun};
use sluice_compiler::ir::op::Op;
use sluice_compiler::ir::plan::{FieldType, MapOp};
use sluice_compiler::ir::types::{DType, Dim, Shape};
use sluice_compiler::physical::MapFn;
use sluice_runtime::BoxError;
use sluice_runtime::abi;
use sluice_runtime::abi::ops;
use sluice_runtime::stage::Origin;

use crate::build::{invalid, names_of, select};
use crate::eval::Eval;
use crate::params::Params;
use crate::parse::ExampleParser;
use crate::value::{Columns, Data, Item, Kind, Names, Row, Value};

type R<T> = Result<T, sluice_runtime::Error>;
use crate::build::Schema;

/// One step of a map: statement `at` of its assignments, or the fused JPEG run starting
/// there; `into`: the output column it writes straight into, when the map has columns.
#[derive(Debug, Clone, Copy)]
struct Step {
    at: usize,
    jpeg: bool,
    into: Option<usize>,
}

impl Step {
    fn len(&self) -> usize {
        if self.jpeg { JpegRun::LEN } else { 1 }
    }
}

/// An output field's batch column: its values a row, their dtype and the row's shape.
#[derive(Debug, Clone)]
struct Column {
    name: String,
    dtype: DType,
    dims: Vec<usize>,
    per: usize,
}

/// The fixed dimensions of `f`'s type, when it is a number of fixed size.
fn fixed(f: &FieldType) -> Option<Column> {
    let ty = f.ty.as_ref()?;
    // The columns the plan says are filled by rows (`explain`'s `rows=split`).
    if !sluice_compiler::ir::fusion::fixed_column(ty) {
        return None;
    }
    let Shape::Dims(dims) = &ty.shape else { return None };
    let dims = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => Some(*n as usize),
            Dim::Named(_) => None,
        })
        .collect::<Option<Vec<usize>>>()?;
    Some(Column { name: f.name.clone(), dtype: ty.dtype, per: dims.iter().product(), dims })
}

/// The buffers of one batch's columns as they are filled, and which a row's statements
/// wrote themselves.
struct Sink<'a> {
    data: &'a mut [Data],
    written: &'a mut [bool],
}

/// The value a field written straight into its column keeps in the row (nothing reads it).
fn written() -> Value {
    Value::scalar(Data::Bool(Vec::new()))
}

/// Appends one row's `v` to `column` (`abi::ops::put`'s check and message).
fn put(data: &mut Data, v: Value, c: &Column) -> Result<(), BoxError> {
    let n = v.data.len();
    if n != c.per {
        return Err(
            format!("field `{}`: {n} values, but its batch column holds {} per row", c.name, c.per).into()
        );
    }
    if !data.extend(v.data) {
        return Err(format!("field `{}`: values of another dtype than its column's", c.name).into());
    }
    Ok(())
}

/// A map's operations over one element: parse a record, then each assignment, then the
/// fields of the map's output in order.
pub(crate) struct MapRows {
    parser: Option<ExampleParser>,
    /// `parse_line` / `parse_csv` of a text record (`sources.rs`).
    text: Option<crate::sources::TextParser>,
    /// Its elements are files read whole: an error names the file (`sources::from_file`).
    from_file: bool,
    ops: Vec<MapOp>,
    /// The fields after each assignment.
    after: Vec<Names>,
    /// The assignments in the order they run, fused runs as one step.
    steps: Vec<Step>,
    /// The output's batch columns, when a batch of records is mapped straight into them.
    columns: Option<Vec<Column>>,
    /// The output's fields.
    pub(crate) names: Names,
    params: Arc<Params>,
    /// The id of the first random operation of each assignment (`ops::Draws`).
    ids: Vec<u64>,
    /// Whether an operation draws random numbers (the map's elements are numbered).
    pub(crate) random: bool,
}

impl MapRows {
    pub(crate) fn new(f: &MapFn, params: &Arc<Params>, schema: &Arc<Schema>) -> R<MapRows> {
        let mut parser = None;
        let mut text = None;
        let mut element = f.input.clone();
        let mut ops = Vec::new();
        let mut after = Vec::new();
        let mut ids = Vec::new();
        for op in &f.ops {
            element = op.apply(&element);
            match op {
                MapOp::Parse {
                    format: sluice_compiler::ir::formats::ParseFormat::SequenceExample,
                    fields,
                } => parser = Some(ExampleParser::sequence(fields, schema).map_err(invalid)?),
                MapOp::Parse {
                    format:
                        sluice_compiler::ir::formats::ParseFormat::Line
                        | sluice_compiler::ir::formats::ParseFormat::Csv
                        | sluice_compiler::ir::formats::ParseFormat::Table,
                    ..
                } => text = crate::sources::TextParser::of(op, schema).map_err(invalid)?,
                MapOp::Parse { fields, .. } => {
                    parser = Some(ExampleParser::new(fields, schema).map_err(invalid)?)
                }
                MapOp::Assign { value, .. } => {
                    ops.push(op.clone());
                    after.push(names_of(element.fields()));
                    ids.push(crate::ops::take_ids(crate::ops::random_ops(value)));
                    let none = Row { names: Arc::from([]), values: Vec::new() };
                    crate::ops::preload(value, &Eval { row: &none, params })?;
                }
            }
        }
        let random = crate::ops::random(f);
        let names = names_of(f.output.fields());
        let from_file = crate::sources::from_file();
        // As the generated map + batch: columns when every output field has a fixed size
        // and nothing is random.
        let columns = match f.output.fields() {
            fields if !random && !fields.is_empty() => fields.iter().map(fixed).collect::<Option<Vec<_>>>(),
            _ => None,
        };
        let steps = steps(&ops, columns.as_deref().unwrap_or(&[]));
        Ok(MapRows {
            parser,
            text,
            from_file,
            ops,
            after,
            steps,
            columns,
            names,
            params: params.clone(),
            ids,
            random,
        })
    }

    /// The map of one element: a record or a row gives a row, a batch (of records or of
    /// rows) a batch, row by row.
    pub(crate) fn apply(&self, x: Item) -> Result<Item, BoxError> {
        self.apply_at(x, 0, 0)
    }

    /// [`apply`](Self::apply) of the element `index` of epoch `epoch` (where its random
    /// operations draw; row `i` of a batch draws as element `(index << 20) | i`).
    pub(crate) fn apply_at(&self, x: Item, epoch: u64, index: u64) -> Result<Item, BoxError> {
        let at = |i: usize| (index << 20) | i as u64;
        match x {
            Item::Batch(b) => {
                let rows = b
                    .into_rows()
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| self.row_at(Item::Row(r), epoch, at(i)))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Item::Batch(Columns::from_rows(self.names.clone(), rows)?))
            }
            Item::Records(b) => {
                // `parse_example` alone: the records straight into the batch's columns.
                if let (Some(p), true) = (&self.parser, self.ops.is_empty())
                    && let Some(columns) = p.parse_batch(&b)?
                {
                    let parsed = Item::Batch(columns);
                    return if p.names() == &self.names { Ok(parsed) } else { select(parsed, &self.names) };
                }
                if let Some(columns) = &self.columns {
                    #[cfg(test)]
                    let rows_only = tests::ROWS_ONLY.load(std::sync::atomic::Ordering::Relaxed);
                    #[cfg(not(test))]
                    let rows_only = false;
                    if !rows_only {
                        return self.straight_into_columns(&b, columns);
                    }
                }
                let mut rows = Vec::with_capacity(b.len());
                for i in 0..b.len() {
                    let r = b.record(i).ok_or("a record past the batch's end")?;
                    rows.push(self.row_at(Item::Record(r), epoch, at(i))?);
                }
                Ok(Item::Batch(Columns::from_rows(self.names.clone(), rows)?))
            }
            // A batch of batches: each inner batch mapped (codegen's `map_each_fn`), its
            // random operations drawing as element `(index << 20) | i`.
            Item::Items(v) => crate::shapes::each_of_batch_at(v, |i, x| self.apply_at(x, epoch, at(i))),
            x => self.row_at(x, epoch, index).map(Item::Row),
        }
    }

    /// A batch of records mapped straight into the output's `columns` (nothing random),
    /// its rows split across the pipeline's pool when the budget allows
    /// ([`columns_of_rows`](crate::value::columns_of_rows)).
    fn straight_into_columns(
        &self,
        b: &sluice_runtime::stage::RecordBatch,
        columns: &[Column],
    ) -> Result<Item, BoxError> {
        let n = b.len();
        let data = crate::value::columns_of_rows(n, true, |rows, room| {
            self.rows_into_columns(b, rows, room, columns)
        })?;
        let columns = columns
            .iter()
            .zip(data)
            .map(|(c, data)| {
                let mut shape = Vec::with_capacity(c.dims.len() + 1);
                shape.push(n);
                shape.extend(&c.dims);
                Value { data, shape, kind: Kind::Tensor }
            })
            .collect();
        Ok(Item::Batch(Columns { names: self.names.clone(), columns, rows: n }))
    }

    /// Records `rows` of `b` mapped into `columns` of their own (room for `room` rows).
    fn rows_into_columns(
        &self,
        b: &sluice_runtime::stage::RecordBatch,
        rows: std::ops::Range<usize>,
        room: usize,
        columns: &[Column],
    ) -> Result<Vec<Data>, BoxError> {
        let mut data = columns
            .iter()
            .map(|c| Data::column(c.dtype, room * c.per))
            .collect::<Result<Vec<Data>, String>>()?;
        let mut wrote = vec![false; columns.len()];
        for i in rows {
            let origin = b.origin(i);
            wrote.iter_mut().for_each(|w| *w = false);
            let sink = Sink { data: &mut data, written: &mut wrote };
            let mut row = match &self.parser {
                // The record parsed where the batch holds it.
                Some(p) => {
                    let bytes = b.get(i).ok_or("a record past the batch's end")?;
                    let row = p.parse(bytes).map_err(|e| abi::located(origin, e))?;
                    self.steps_of(row, Some(origin), 0, 0, Some(sink))?
                }
                None => {
                    let r = b.record(i).ok_or("a record past the batch's end")?;
                    self.row_into(Item::Record(r), 0, 0, Some(sink))?
                }
            };
            for (j, c) in columns.iter().enumerate() {
                if wrote[j] {
                    continue;
                }
                let at = row
                    .names
                    .iter()
                    .position(|n| *n == c.name)
                    .ok_or_else(|| format!("no field `{}`", c.name))?;
                let v = std::mem::replace(&mut row.values[at], written());
                put(&mut data[j], v, c).map_err(|e| abi::located(origin, e))?;
            }
        }
        Ok(data)
    }

    pub(crate) fn row(&self, x: Item) -> Result<Row, BoxError> {
        self.row_at(x, 0, 0)
    }

    /// One element's row; its random operations draw as element `index` of `epoch`.
    pub(crate) fn row_at(&self, x: Item, epoch: u64, index: u64) -> Result<Row, BoxError> {
        self.row_into(x, epoch, index, None)
    }

    /// [`row_at`](Self::row_at), the steps that write a column writing into `sink`'s
    /// buffers when there is one (their fields are then left [`written`] in the row).
    fn row_into(&self, x: Item, epoch: u64, index: u64, sink: Option<Sink<'_>>) -> Result<Row, BoxError> {
        let (row, origin) = match (x, &self.parser) {
            (Item::Record(r), Some(p)) => {
                (p.parse(r.as_bytes()).map_err(|e| abi::located(r.origin(), e))?, Some(r.origin()))
            }
            (Item::Record(r), None) if self.text.is_some() => {
                let t = self.text.as_ref().ok_or("a text parser")?;
                (t.parse(&r)?, Some(r.origin()))
            }
            (Item::Row(r), None) => (r, None),
            (Item::Record(_), None) => return Err("a map of a record without `parse_example`".into()),
            (_, Some(_)) => return Err("`parse_example` of an element that is not a record".into()),
            (Item::Batch(_) | Item::Records(_) | Item::Items(_), None) => {
                return Err("a map over a batch of batches".into());
            }
        };
        self.steps_of(row, origin, epoch, index, sink)
    }

    /// The map's statements over `row`, read from `origin` (errors name it), then its
    /// output fields; the steps that write a column write into `sink`'s buffers when
    /// there is one.
    fn steps_of(
        &self,
        mut row: Row,
        origin: Option<Origin>,
        epoch: u64,
        index: u64,
        mut sink: Option<Sink<'_>>,
    ) -> Result<Row, BoxError> {
        // A file read whole names the file (the generated map's `located_file`).
        let file = if self.from_file { crate::sources::file_of(&row) } else { None };
        let located = |e: BoxError| match (&origin, &file) {
            (Some(o), _) => abi::located(*o, e),
            (None, Some(path)) => abi::located_file(path, e),
            (None, None) => e,
        };
        for step in &self.steps {
            let (last, names) = (step.at + step.len() - 1, &self.after[step.at + step.len() - 1]);
            let MapOp::Assign { target, value, ty, .. } = &self.ops[last] else { continue };
            if !step.jpeg
                && let Some(v) = in_place(&mut row, target, value)
            {
                let v = v.map_err(located)?;
                let i = row.names.iter().position(|n| n == target).ok_or("a field in place")?;
                row.values[i] = v;
                row.names = names.clone();
                continue;
            }
            let eval = Eval { row: &row, params: &self.params };
            let into = match (&mut sink, step.into) {
                (Some(s), Some(j)) => Some((&mut s.data[j], &mut s.written[j])),
                _ => None,
            };
            let v = if step.jpeg {
                let run = fusion::jpeg_run(&self.ops[step.at..]).ok_or("a fused JPEG run")?;
                jpeg(&eval, &run, into).map_err(located)?
            } else if let Some((data, wrote)) = into
                && crate::vector::append(&eval, value, ty.dtype, data)
            {
                *wrote = true;
                written()
            } else {
                let draws = crate::ops::Draws { epoch, index, next: self.ids[last] };
                let (v, _) = crate::ops::with_draws(draws, || eval.value(value, ty));
                v.map_err(located)?
            };
            match row.names.iter().position(|n| n == target) {
                Some(i) => row.values[i] = v,
                None => row.values.push(v),
            }
            row.names = names.clone();
        }
        if row.names != self.names {
            let Item::Row(row) = select(Item::Row(row), &self.names)? else { unreachable!("a row") };
            return Ok(row);
        }
        Ok(row)
    }
}

/// `t = reshape(t, dims)` of a number field, and `t = decode_raw(t, u8)` of a byte
/// string, on the buffer field `t` holds (moved, not copied): the value and error of
/// `Eval::value`. `None` for any other statement.
fn in_place(row: &mut Row, target: &str, value: &Expr) -> Option<Result<Value, BoxError>> {
    let i = row.names.iter().position(|n| n == target)?;
    let of_target = |x: &Expr| x.field() == Some(target);
    match value.op()? {
        Op::Reshape { x, dims } if of_target(x) => {
            if matches!(row.values[i].data, Data::Bytes(_) | Data::Str(_)) {
                return None;
            }
            let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let size = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
            let n = row.values[i].data.len();
            if size != n {
                return Some(Err(format!("reshape: {n} values do not fit the shape {shape:?}").into()));
            }
            let data = std::mem::replace(&mut row.values[i].data, Data::Bool(Vec::new()));
            Some(Ok(Value { data, shape, kind: Kind::Tensor }))
        }
        Op::DecodeRaw { bytes, dtype: DType::U8 } if of_target(bytes) => match &mut row.values[i].data {
            Data::Bytes(b) if b.len() == 1 => {
                let v = b.pop()?;
                let n = v.len();
                Some(Ok(Value { data: Data::U8(v), shape: vec![n], kind: Kind::List }))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The steps of assignments `ops`: fused runs found, and each step that may write an
/// output column of `columns` straight into it (the last statements of its field).
fn steps(ops: &[MapOp], columns: &[Column]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut k = 0;
    while k < ops.len() {
        let jpeg = fusion::jpeg_run(&ops[k..]).is_some();
        let len = if jpeg { JpegRun::LEN } else { 1 };
        let into = match &ops[k] {
            MapOp::Assign { target, .. } if fusion::untouched(&ops[k + len..], target) => {
                columns.iter().position(|c| &c.name == target)
            }
            _ => None,
        };
        steps.push(Step { at: k, jpeg, into });
        k += len;
    }
    steps
}

/// The fused JPEG run: its pixels appended to `into`'s column (marked written), or a new
/// `f32[h, w, 3]` value.
fn jpeg(ev: &Eval<'_>, run: &JpegRun<'_>, into: Option<(&mut Data, &mut bool)>) -> Result<Value, BoxError> {
    let (h, w) = (ev.count(run.h)?, ev.count(run.w)?);
    let (mean, std) = (ev.floats(run.mean)?, ev.floats(run.std)?);
    let limit = run.max_pixels.map(|n| n as usize);
    ev.with_bytes(run.bytes, |bytes| match into {
        Some((Data::F32(column), wrote)) => {
            ops::decode_resize_normalize_extend(bytes, limit, h, w, &mean, &std, column)?;
            *wrote = true;
            Ok(written())
        }
        _ => {
            let mut v = vec![0f32; h * w * 3];
            match limit {
                None => ops::decode_resize_normalize_into(bytes, h, w, &mean, &std, &mut v)?,
                Some(n) => ops::decode_resize_normalize_limited_into(bytes, n, h, w, &mean, &std, &mut v)?,
            }
            Ok(Value { data: Data::F32(v), shape: vec![h, w, 3], kind: Kind::Tensor })
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use sluice_runtime::abi::export::{self, Features};
    use sluice_runtime::abi::show::{Json, Show};
    use sluice_runtime::stage::Dataset;
    use sluice_runtime::tfrecord::{self, Compression};

    use crate::vector::tests::{SCALAR_ONLY, VECTORED};

    /// Map batches of records row by row, never straight into columns.
    pub(crate) static ROWS_ONLY: AtomicBool = AtomicBool::new(false);

    /// A `str` or `bytes` field assigned to another is copied as it is (it failed as "`k` is
    /// not a number" in the engine, while the generated code clones it).
    #[test]
    fn a_string_field_copies_as_it_is() {
        let csv = std::env::temp_dir().join(format!("sluice-engine-map-copy-{}.csv", std::process::id()));
        std::fs::write(&csv, "k,v\na,1\n../é,2\n").unwrap();
        let c = sluice_compiler::compile(
            "pipeline q(files: glob) { schema { k: str, v: i64 } csv(files); map { key = k; w = v * 2; } select(key, w); }",
        );
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let p = &c.pipelines[0];
        crate::check(p).unwrap();
        let set = [("files".to_string(), csv.display().to_string())];
        let ds = crate::dataset(p, &crate::params(p, &set).unwrap()).unwrap();
        let shown: Vec<String> = ds
            .stream()
            .unwrap()
            .map(|x| {
                let mut json = Json::new();
                x.unwrap().show(&mut json);
                json.as_str().to_string()
            })
            .collect();
        let _ = std::fs::remove_file(&csv);
        assert_eq!(
            shown,
            [
                r#"{"key":"a","w":{"dtype":"i64","shape":[],"values":[2]}}"#,
                r#"{"key":"../é","w":{"dtype":"i64","shape":[],"values":[4]}}"#
            ]
        );
    }

    const SOURCE: &str = r#"
        pipeline p(files: glob) {
            schema { image: bytes, label: i64, x: f32[4] }
            tfrecords(files);
            map {
                parse_example();
                image = decode_raw(image, u8);
                image = reshape(image, [2, 3]);
                a = cast(image, f32) / 255.0 - 0.5;
                b = -(cast(label, f64) * 2.5);
                c = scale(x, 0.5) + 1.0;
                d = 3.0 / x;
                e = x * x;
                image = cast(image, f32);
            }
            batch(3);
        }
    "#;

    /// Every element of `p` over `files` shown (an error ends the list), straight into
    /// columns or row by row, node by node or value by value.
    fn shown(files: &str, rows_only: bool, scalar_only: bool) -> Vec<String> {
        let c = sluice_compiler::compile(SOURCE);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let p = &c.pipelines[0];
        crate::check(p).unwrap();
        ROWS_ONLY.store(rows_only, Ordering::Relaxed);
        SCALAR_ONLY.store(scalar_only, Ordering::Relaxed);
        let set = [("files".to_string(), files.to_string())];
        let ds = crate::dataset(p, &crate::params(p, &set).unwrap()).unwrap();
        let mut out = Vec::new();
        for x in ds.stream().unwrap() {
            match x {
                Ok(x) => {
                    let mut json = Json::new();
                    x.show(&mut json);
                    out.push(json.as_str().to_string());
                }
                Err(e) => {
                    out.push(format!("error: {e}"));
                    break;
                }
            }
        }
        ROWS_ONLY.store(false, Ordering::Relaxed);
        SCALAR_ONLY.store(false, Ordering::Relaxed);
        out
    }

    /// Writes `n` records to `path`; record `bad` has 5 image bytes (reshape fails).
    fn write(path: &std::path::Path, n: i64, bad: Option<i64>) {
        let mut w = tfrecord::create(path, Compression::None).unwrap();
        for i in 0..n {
            let mut f = Features::new();
            let bytes: Vec<u8> =
                (0..if Some(i) == bad { 5 } else { 6 }).map(|k| (i * 40 + k * 7) as u8).collect();
            export::bytes(&mut f, "image", &bytes);
            export::scalar(&mut f, "label", &i);
            export::list(&mut f, "x", &[i as f32 + 0.5, -1.0, 0.0, i as f32 * 0.1]);
            let mut record = Vec::new();
            export::finish(f, &mut record);
            w.write_record(&record).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn records_mapped_straight_into_columns_are_the_rows_values() {
        let dir = std::env::temp_dir().join(format!("sluice-engine-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (good, bad) = (dir.join("good.tfrecord"), dir.join("bad.tfrecord"));
        write(&good, 8, None);
        write(&bad, 8, Some(4));
        for path in [&good, &bad] {
            let files = path.to_str().unwrap();
            let before = VECTORED.load(Ordering::Relaxed);
            let direct = shown(files, false, false);
            assert!(VECTORED.load(Ordering::Relaxed) > before, "the values were computed into the columns");
            assert_eq!(direct, shown(files, true, false), "{files}: row by row");
            assert_eq!(direct, shown(files, true, true), "{files}: value by value");
            if path == &bad {
                assert_eq!(direct.len(), 2, "{direct:?}");
                assert!(direct[1].contains("record 4") && direct[1].contains("reshape"), "{direct:?}");
            } else {
                assert_eq!(direct.len(), 3, "{direct:?}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
