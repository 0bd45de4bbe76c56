//! The engine's dynamic elements: typed buffers with a shape ([`Value`]), records of named
//! values ([`Row`]), columnar batches of them ([`Columns`]), and [`Item`], what flows
//! between the runtime's stages. A field's dtype and shape are fixed by the plan once;
//! each value holds them beside its buffer, so nothing is checked value by value.
//!
//! They implement what the runner needs of an element: [`Element`], [`Rows`], [`Show`]
//! (the same JSON as the generated structs, through the same `abi::show` functions) and
//! [`ToExample`].

use std::sync::Arc;

use sluice_runtime::BoxError;
use sluice_runtime::abi::Rows;
use sluice_runtime::abi::export::{self, ToExample};
use sluice_runtime::abi::show::{self, Json, Show};
use sluice_runtime::column::Tensor;
use sluice_runtime::stage::{Element, Record, RecordBatch};

/// The columns of a batch of `n` rows that `make(rows, room)` makes (columns of rows
/// `rows`, with room for `room` rows): on this thread, or, when `splits` (the map fills
/// fixed-size columns by rows: `ir::fusion::fills_columns_by_rows`, as the plan says) and
/// the pipeline's CPU budget has threads left over, split across its pool (`rows::split`,
/// as generated code splits its `map_rows_*`), each part's columns appended to the
/// first's in row order: the same batch either way; the first error in row order.
pub(crate) fn columns_of_rows(
    n: usize,
    splits: bool,
    make: impl Fn(std::ops::Range<usize>, usize) -> Result<Vec<Data>, BoxError> + Sync,
) -> Result<Vec<Data>, BoxError> {
    let split = if splits { sluice_runtime::stage::rows::split(n) } else { None };
    let Some(split) = split else { return make(0..n, n) };
    let mut parts: Vec<Option<Vec<Data>>> = split.ranges().iter().map(|_| None).collect();
    split.run(parts.iter_mut(), |rows, slot| {
        // The first part has room for the whole batch: the others are appended to it.
        let room = if rows.start == 0 { n } else { rows.len() };
        *slot = Some(make(rows, room)?);
        Ok::<_, BoxError>(())
    })?;
    let mut parts = parts.into_iter().flatten();
    let mut data = parts.next().ok_or("a split batch with no part")?;
    for part in parts {
        for (d, p) in data.iter_mut().zip(part) {
            if !d.extend(p) {
                return Err("the parts of a split batch have columns of different types".into());
            }
        }
    }
    Ok(data)
}

/// Values of one dtype, flat in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// `bool`.
    Bool(Vec<bool>),
    /// `u8`.
    U8(Vec<u8>),
    /// `i32`.
    I32(Vec<i32>),
    /// `u32`.
    U32(Vec<u32>),
    /// `i64`.
    I64(Vec<i64>),
    /// `u64`.
    U64(Vec<u64>),
    /// `f32`.
    F32(Vec<f32>),
    /// `f64`.
    F64(Vec<f64>),
    /// `bytes`: one byte string per value.
    Bytes(Vec<Vec<u8>>),
    /// `str`.
    Str(Vec<String>),
}

/// Calls `$body` with `$v` bound to the numeric buffer of `$data` (`$other` for bytes and
/// strings).
macro_rules! numeric {
    ($data:expr, $v:ident => $body:expr, $other:pat => $else:expr) => {
        match $data {
            Data::Bool($v) => $body,
            Data::U8($v) => $body,
            Data::I32($v) => $body,
            Data::U32($v) => $body,
            Data::I64($v) => $body,
            Data::U64($v) => $body,
            Data::F32($v) => $body,
            Data::F64($v) => $body,
            $other => $else,
        }
    };
}
pub(crate) use numeric;

impl Data {
    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Data::Bytes(v) => v.len(),
            Data::Str(v) => v.len(),
            d => numeric!(d, v => v.len(), _ => 0),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty buffer of the same dtype with room for `n` values.
    pub fn empty_like(&self, n: usize) -> Data {
        match self {
            Data::Bool(_) => Data::Bool(Vec::with_capacity(n)),
            Data::U8(_) => Data::U8(Vec::with_capacity(n)),
            Data::I32(_) => Data::I32(Vec::with_capacity(n)),
            Data::U32(_) => Data::U32(Vec::with_capacity(n)),
            Data::I64(_) => Data::I64(Vec::with_capacity(n)),
            Data::U64(_) => Data::U64(Vec::with_capacity(n)),
            Data::F32(_) => Data::F32(Vec::with_capacity(n)),
            Data::F64(_) => Data::F64(Vec::with_capacity(n)),
            Data::Bytes(_) => Data::Bytes(Vec::with_capacity(n)),
            Data::Str(_) => Data::Str(Vec::with_capacity(n)),
        }
    }

    /// Keeps the first `n` values.
    pub fn truncate(&mut self, n: usize) {
        match self {
            Data::Bytes(v) => v.truncate(n),
            Data::Str(v) => v.truncate(n),
            d => numeric!(d, v => v.truncate(n), _ => {}),
        }
    }

    /// Appends `other`'s values (of the same dtype; `false` when it is another).
    pub fn extend(&mut self, other: Data) -> bool {
        match (self, other) {
            (Data::Bool(a), Data::Bool(b)) => a.extend(b),
            (Data::U8(a), Data::U8(b)) => a.extend(b),
            (Data::I32(a), Data::I32(b)) => a.extend(b),
            (Data::U32(a), Data::U32(b)) => a.extend(b),
            (Data::I64(a), Data::I64(b)) => a.extend(b),
            (Data::U64(a), Data::U64(b)) => a.extend(b),
            (Data::F32(a), Data::F32(b)) => a.extend(b),
            (Data::F64(a), Data::F64(b)) => a.extend(b),
            (Data::Bytes(a), Data::Bytes(b)) => a.extend(b),
            (Data::Str(a), Data::Str(b)) => a.extend(b),
            _ => return false,
        }
        true
    }

    /// No values of `dtype`, room for `n`.
    pub fn with_capacity(dtype: sluice_compiler::ir::types::DType, n: usize) -> Result<Data, String> {
        use sluice_compiler::ir::types::DType;
        Ok(match dtype {
            DType::Bool => Data::Bool(Vec::with_capacity(n)),
            DType::U8 => Data::U8(Vec::with_capacity(n)),
            DType::I32 => Data::I32(Vec::with_capacity(n)),
            DType::U32 => Data::U32(Vec::with_capacity(n)),
            DType::I64 => Data::I64(Vec::with_capacity(n)),
            DType::U64 => Data::U64(Vec::with_capacity(n)),
            DType::F32 => Data::F32(Vec::with_capacity(n)),
            DType::F64 => Data::F64(Vec::with_capacity(n)),
            DType::Bytes => Data::Bytes(Vec::with_capacity(n)),
            DType::Str => Data::Str(Vec::with_capacity(n)),
            other => return Err(format!("values of {other}")),
        })
    }

    /// The empty batch column of `dtype` with room for `n` values that a generated
    /// `map_batch` starts from: a recycled buffer when there is one (`abi::ops::column`).
    pub fn column(dtype: sluice_compiler::ir::types::DType, n: usize) -> Result<Data, String> {
        use sluice_compiler::ir::types::DType;
        use sluice_runtime::abi::ops::column;
        Ok(match dtype {
            DType::Bool => Data::Bool(column(n)),
            DType::U8 => Data::U8(column(n)),
            DType::I32 => Data::I32(column(n)),
            DType::U32 => Data::U32(column(n)),
            DType::I64 => Data::I64(column(n)),
            DType::U64 => Data::U64(column(n)),
            DType::F32 => Data::F32(column(n)),
            DType::F64 => Data::F64(column(n)),
            other => Data::with_capacity(other, n)?,
        })
    }

    /// Values `start..start + len`.
    pub fn slice(&self, start: usize, len: usize) -> Data {
        let r = start..start + len;
        match self {
            Data::Bool(v) => Data::Bool(v[r].to_vec()),
            Data::U8(v) => Data::U8(v[r].to_vec()),
            Data::I32(v) => Data::I32(v[r].to_vec()),
            Data::U32(v) => Data::U32(v[r].to_vec()),
            Data::I64(v) => Data::I64(v[r].to_vec()),
            Data::U64(v) => Data::U64(v[r].to_vec()),
            Data::F32(v) => Data::F32(v[r].to_vec()),
            Data::F64(v) => Data::F64(v[r].to_vec()),
            Data::Bytes(v) => Data::Bytes(v[r].to_vec()),
            Data::Str(v) => Data::Str(v[r].to_vec()),
        }
    }

    /// Bytes the values take, about.
    fn byte_size(&self) -> usize {
        match self {
            Data::Bytes(v) => v.iter().map(|b| b.len() + 24).sum(),
            Data::Str(v) => v.iter().map(|s| s.len() + 24).sum(),
            d => numeric!(d, v => std::mem::size_of_val(v.as_slice()), _ => 0),
        }
    }
}

/// How a field's value is held, which decides how it prints and exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One value (`shape` `[]`).
    Scalar,
    /// A variable-length list (`T[]`, `shape` `[len]`).
    List,
    /// A tensor of fixed or named dimensions.
    Tensor,
}

/// One field's value: its buffer and its shape (a batch column's shape has the batch's
/// dimension first).
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The values, flat.
    pub data: Data,
    /// The dimensions (empty for a scalar).
    pub shape: Vec<usize>,
    /// How the field is held.
    pub kind: Kind,
}

impl Value {
    /// A scalar.
    pub fn scalar(data: Data) -> Value {
        Value { data, shape: Vec::new(), kind: Kind::Scalar }
    }

    /// Writes the value as `sluice show` prints a field of a record (or, with the batch's
    /// dimension first, a batch's column).
    fn show(&self, out: &mut Json, column: bool) {
        match &self.data {
            Data::Bytes(v) if column => show::bytes_rows(out, v.iter().map(Vec::as_slice)),
            Data::Bytes(v) => show::bytes(out, v.first().map_or(&[][..], Vec::as_slice)),
            Data::Str(v) if column => {
                out.begin_array();
                for s in v {
                    out.item();
                    out.string(s);
                }
                out.end_array();
            }
            Data::Str(v) => show::text(out, v.first().map_or("", String::as_str)),
            d => numeric!(d, v => show::numbers(out, &self.shape, v), _ => {}),
        }
    }

    /// Adds the value as a feature of an Example.
    fn export(&self, f: &mut export::Features, name: &str) {
        macro_rules! put {
            ($v:expr) => {
                match self.kind {
                    Kind::Scalar => export::scalar(f, name, &$v[0]),
                    Kind::List => export::list(f, name, $v),
                    Kind::Tensor => {
                        if let Ok(t) = Tensor::new(self.shape.clone(), $v.clone()) {
                            export::tensor(f, name, &t)
                        }
                    }
                }
            };
        }
        match &self.data {
            Data::Bytes(v) => export::bytes(f, name, v.first().map_or(&[][..], Vec::as_slice)),
            Data::Str(v) => export::text(f, name, v.first().map_or("", String::as_str)),
            d => numeric!(d, v => put!(v), _ => {}),
        }
    }
}

/// The names of an element's fields, in order, shared by every element of a stage.
pub type Names = Arc<[String]>;

/// A record: one value per field.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The fields' names.
    pub names: Names,
    /// Their values, in the same order.
    pub values: Vec<Value>,
}

impl Row {
    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.names.iter().position(|n| n == name).map(|i| &self.values[i])
    }
}

/// A columnar batch: one value per field with the batch's dimension first.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    /// The fields' names.
    pub names: Names,
    /// One column per field.
    pub columns: Vec<Value>,
    /// Rows in the batch.
    pub rows: usize,
}

impl Columns {
    /// The rows as one batch, as the generated map + batch builds its rows: lists and
    /// tensors padded to the longest of the batch with 0 (`shapes::padded_columns`; the
    /// plan's fixed shapes need none).
    pub fn from_rows(names: Names, rows: Vec<Row>) -> Result<Columns, String> {
        crate::shapes::padded_columns(names, rows)
    }
}

/// A batch's column buffers go back to the runtime's recycled buffers when it is dropped,
/// as a generated batch's do (`column::recycle`): the next batch's columns
/// ([`Data::column`]) take them with their pages mapped.
impl Drop for Columns {
    fn drop(&mut self) {
        use sluice_runtime::column::recycle::give;
        for c in self.columns.drain(..) {
            match c.data {
                Data::Bool(v) => give(v),
                Data::U8(v) => give(v),
                Data::I32(v) => give(v),
                Data::U32(v) => give(v),
                Data::I64(v) => give(v),
                Data::U64(v) => give(v),
                Data::F32(v) => give(v),
                Data::F64(v) => give(v),
                Data::Bytes(_) | Data::Str(_) => {}
            }
        }
    }
}

impl Columns {
    /// The batch's rows (what a map over a batch runs on, row by row).
    pub fn into_rows(self) -> Vec<Row> {
        let mut rows: Vec<Row> =
            (0..self.rows).map(|_| Row { names: self.names.clone(), values: Vec::new() }).collect();
        for c in &self.columns {
            let shape = c.shape[1..].to_vec();
            let per: usize = shape.iter().product();
            // A padded list's column (`Kind::List`) gives lists back.
            let kind = match c.kind {
                _ if shape.is_empty() => Kind::Scalar,
                Kind::List => Kind::List,
                _ => Kind::Tensor,
            };
            for (r, row) in rows.iter_mut().enumerate() {
                row.values.push(Value { data: c.data.slice(r * per, per), shape: shape.clone(), kind });
            }
        }
        rows
    }
}

/// An element of an engine pipeline.
#[derive(Debug, Clone)]
pub enum Item {
    /// A serialized record and where it was read.
    Record(Record),
    /// A record with fields.
    Row(Row),
    /// A columnar batch of records.
    Batch(Columns),
    /// A batch of serialized records (`batch` of records, a reader's batches).
    Records(RecordBatch),
    /// A batch of other elements (`batch` of batches: the generated `chunks`' `Vec`).
    Items(Vec<Item>),
}

impl Element for Item {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        std::mem::size_of::<Item>()
            + match self {
                Item::Record(r) => r.byte_size(),
                Item::Row(r) => r.values.iter().map(|v| v.data.byte_size()).sum(),
                Item::Batch(b) => b.columns.iter().map(|v| v.data.byte_size()).sum(),
                Item::Records(b) => b.byte_size(),
                Item::Items(v) => v.iter().map(Element::byte_size).sum(),
            }
    }
}

impl Rows for Item {
    fn rows(&self) -> u64 {
        match self {
            Item::Record(_) | Item::Row(_) => 1,
            Item::Batch(b) => b.rows as u64,
            Item::Records(b) => b.len() as u64,
            Item::Items(v) => v.len() as u64,
        }
    }
    fn is_batch(&self) -> bool {
        matches!(self, Item::Batch(_) | Item::Records(_) | Item::Items(_))
    }
}

impl Show for Item {
    fn show(&self, out: &mut Json) {
        let (names, values, column) = match self {
            Item::Record(r) => return r.show(out),
            Item::Records(b) => return b.show(out),
            Item::Items(v) => return v.show(out),
            Item::Row(r) => (&r.names, &r.values, false),
            Item::Batch(b) => (&b.names, &b.columns, true),
        };
        out.begin_object();
        for (name, v) in names.iter().zip(values) {
            out.key(name);
            v.show(out, column);
        }
        out.end_object();
    }
}

impl ToExample for Item {
    fn fields(&self, f: &mut export::Features) -> Result<(), &'static str> {
        match self {
            Item::Record(r) => r.fields(f),
            Item::Batch(_) | Item::Records(_) | Item::Items(_) => Err(export::BATCH),
            Item::Row(r) => {
                for (name, v) in r.names.iter().zip(&r.values) {
                    v.export(f, name);
                }
                Ok(())
            }
        }
    }

    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        match self {
            Item::Record(r) => r.to_example(out),
            _ => {
                let mut f = export::Features::new();
                self.fields(&mut f)?;
                export::finish(f, out);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(x: &Item) -> String {
        let mut out = Json::new();
        x.show(&mut out);
        out.as_str().to_string()
    }

    fn row(v: i64, x: [f32; 2]) -> Row {
        Row {
            names: Arc::from(["value".to_string(), "x".to_string()]),
            values: vec![
                Value::scalar(Data::I64(vec![v])),
                Value { data: Data::F32(x.to_vec()), shape: vec![2], kind: Kind::Tensor },
            ],
        }
    }

    #[test]
    fn rows_and_batches_print_as_the_generated_structs() {
        assert_eq!(
            shown(&Item::Row(row(3, [0.1, 2.0]))),
            r#"{"value":{"dtype":"i64","shape":[],"values":[3]},"x":{"dtype":"f32","shape":[2],"values":[0.1,2.0]}}"#
        );
        let names = row(0, [0.0; 2]).names;
        let b = Columns::from_rows(names, vec![row(1, [1.0, 2.0]), row(2, [3.0, 4.0])]).unwrap();
        assert_eq!(
            shown(&Item::Batch(b)),
            r#"{"value":{"dtype":"i64","shape":[2],"values":[1,2]},"x":{"dtype":"f32","shape":[2,2],"values":[1.0,2.0,3.0,4.0]}}"#
        );
    }

    #[test]
    fn lists_of_different_lengths_batch_padded_to_the_longest() {
        let names: Names = Arc::from(["x".to_string()]);
        let r = |n: usize| Row {
            names: names.clone(),
            values: vec![Value { data: Data::I64(vec![7; n]), shape: vec![n], kind: Kind::List }],
        };
        let b = Columns::from_rows(names.clone(), vec![r(1), r(2)]).unwrap();
        assert_eq!(
            b.columns[0],
            Value { data: Data::I64(vec![7, 0, 7, 7]), shape: vec![2, 2], kind: Kind::List }
        );
    }
}
