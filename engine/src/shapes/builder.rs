//! [`Item`] as [`Batchable`]: the [`ItemBuilder`] of a batch, one runtime column builder
//! per field, chosen by how the field is held, and a batch's rows read back.

use sluice_compiler::ir::types::DType;
use sluice_runtime::column::{
    self, Batchable, ColumnBuilder, ColumnError, ColumnErrorKind, PadLen, PadShape, Tensor,
};
use sluice_runtime::stage::RecordBatch;

use super::padding::{Pad, Padding};
use crate::num::Num;
use crate::value::{Columns, Data, Item, Kind, Names, Row, Value};

/// A number dtype a column holds: its buffer in and out of [`Data`].
pub(super) trait Elem: column::Scalar + Default {
    fn take(d: Data) -> Option<Vec<Self>>;
    fn wrap(v: Vec<Self>) -> Data;
    fn of(n: Num) -> Self;
}

macro_rules! elem {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl Elem for $t {
            fn take(d: Data) -> Option<Vec<$t>> {
                match d {
                    Data::$v(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<$t>) -> Data {
                Data::$v(v)
            }
            fn of(n: Num) -> $t {
                match n.cast(DType::$v) {
                    Ok(Num::$v(x)) => x,
                    _ => <$t>::default(),
                }
            }
        }
    )*};
}
elem!(bool => Bool, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// A value of another dtype than its column's: the plan's types make it a bug.
pub(super) fn dtype_error(index: usize, shape: Vec<usize>) -> ColumnError {
    ColumnError::new(index, ColumnErrorKind::ShapeMismatch { expected: Vec::new(), found: shape })
}

/// One field's column builder.
pub(super) trait Field: Send {
    /// Appends row `index`'s value.
    fn push(&mut self, index: usize, v: Value) -> Result<(), ColumnError>;
    /// The column (the batch's dimension first).
    fn finish(self: Box<Self>) -> Value;
}

/// A scalar's column (`Dense<T, T>`).
pub(super) struct Scalars<B>(B);

impl<T: Elem, B> Field for Scalars<B>
where
    B: ColumnBuilder<Item = T, Columns = column::Dense<T, T>> + Send,
{
    fn push(&mut self, index: usize, v: Value) -> Result<(), ColumnError> {
        let x = match T::take(v.data) {
            Some(x) if x.len() == 1 => x[0],
            _ => return Err(dtype_error(index, v.shape)),
        };
        self.0.push(x)
    }
    fn finish(self: Box<Self>) -> Value {
        let (shape, data) = self.0.finish().into_parts();
        Value { data: T::wrap(data), shape, kind: Kind::Tensor }
    }
}

/// A tensor's column, plain (`TensorBuilder`) or padded (`PaddedTensorBuilder`).
pub(super) struct Tensors<B>(B);

impl<T: Elem, B> Field for Tensors<B>
where
    B: ColumnBuilder<Item = Tensor<T>, Columns = column::Dense<T, Tensor<T>>> + Send,
{
    fn push(&mut self, index: usize, v: Value) -> Result<(), ColumnError> {
        let Value { data, shape, .. } = v;
        let Some(data) = T::take(data) else { return Err(dtype_error(index, shape)) };
        let t = Tensor::new(shape, data).map_err(|_| dtype_error(index, Vec::new()))?;
        self.0.push(t)
    }
    fn finish(self: Box<Self>) -> Value {
        let (shape, data) = self.0.finish().into_parts();
        Value { data: T::wrap(data), shape, kind: Kind::Tensor }
    }
}

/// A list's column: padded (`PaddedVecBuilder`), marked [`Kind::List`].
pub(super) struct Lists<T: Elem>(column::PaddedVecBuilder<T>);

impl<T: Elem> Field for Lists<T> {
    fn push(&mut self, index: usize, v: Value) -> Result<(), ColumnError> {
        let Some(data) = T::take(v.data) else { return Err(dtype_error(index, v.shape)) };
        self.0.push(data)
    }
    fn finish(self: Box<Self>) -> Value {
        let (shape, data) = self.0.finish().into_parts();
        Value { data: T::wrap(data), shape, kind: Kind::List }
    }
}

/// Byte strings' or strings' column: the values as they come (`Ragged<u8>`, `Text`).
pub(super) struct Strings(Data, usize);

impl Field for Strings {
    fn push(&mut self, index: usize, v: Value) -> Result<(), ColumnError> {
        if v.data.len() != 1 || !self.0.extend(v.data) {
            return Err(dtype_error(index, v.shape));
        }
        self.1 += 1;
        Ok(())
    }
    fn finish(self: Box<Self>) -> Value {
        Value { data: self.0, shape: vec![self.1], kind: Kind::Tensor }
    }
}

/// The builder of field `v`'s column (`v` its first row's value), plain or with `pad`.
pub(super) fn field(v: &Value, pad: Option<&Pad>, n: usize) -> Box<dyn Field> {
    macro_rules! by {
        ($t:ty) => {
            match (v.kind, pad) {
                (Kind::Scalar, _) => Box::new(Scalars(<$t as Batchable>::builder(n))),
                (Kind::List, Some(Pad::Len { len, multiple, value })) => {
                    let pad = PadLen { len: *len, value: <$t>::of(*value), multiple: *multiple };
                    Box::new(Lists::<$t>(<Vec<$t> as Batchable>::padded_builder(n, &pad)))
                }
                (Kind::List, _) => {
                    let pad = PadLen::longest(<$t>::default());
                    Box::new(Lists::<$t>(<Vec<$t> as Batchable>::padded_builder(n, &pad)))
                }
                (Kind::Tensor, Some(Pad::Shape { shape, value })) => {
                    let pad = PadShape { shape: shape.clone(), value: <$t>::of(*value) };
                    Box::new(Tensors(<Tensor<$t> as Batchable>::padded_builder(n, &pad)))
                }
                (Kind::Tensor, _) => Box::new(Tensors(<Tensor<$t> as Batchable>::builder(n))),
            }
        };
    }
    match &v.data {
        Data::Bool(_) => by!(bool),
        Data::U8(_) => by!(u8),
        Data::I32(_) => by!(i32),
        Data::U32(_) => by!(u32),
        Data::I64(_) => by!(i64),
        Data::U64(_) => by!(u64),
        Data::F32(_) => by!(f32),
        Data::F64(_) => by!(f64),
        d @ (Data::Bytes(_) | Data::Str(_)) => Box::new(Strings(d.empty_like(n), 0)),
    }
}

/// What a builder has been given so far.
pub(super) enum Built {
    /// Nothing yet.
    Empty,
    /// Rows: one column builder per field.
    Rows(Names, Vec<Box<dyn Field>>),
    /// Serialized records.
    Records(Vec<sluice_runtime::stage::Record>),
    /// Other elements (batches): a batch of them.
    Items(Vec<Item>),
}

/// Builds one batch of [`Item`]s (`Batchable::Builder` and `PaddedBuilder`).
pub struct ItemBuilder {
    pub(super) capacity: usize,
    pub(super) padding: Option<Padding>,
    pub(super) rows: usize,
    pub(super) built: Built,
}

impl std::fmt::Debug for ItemBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemBuilder").field("rows", &self.rows).finish_non_exhaustive()
    }
}

impl ColumnBuilder for ItemBuilder {
    type Item = Item;
    type Columns = Item;

    fn push(&mut self, x: Item) -> Result<(), ColumnError> {
        let index = self.rows;
        match (&mut self.built, x) {
            (Built::Empty, Item::Row(r)) => {
                let pads = self.padding.as_ref().map(|p| &p.0);
                let mut fields: Vec<Box<dyn Field>> = r
                    .values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| field(v, pads.and_then(|p| p.get(i)), self.capacity))
                    .collect();
                for ((f, v), name) in fields.iter_mut().zip(r.values).zip(r.names.iter()) {
                    f.push(index, v).map_err(|e| e.in_field(name))?;
                }
                self.built = Built::Rows(r.names, fields);
            }
            (Built::Rows(names, fields), Item::Row(r)) => {
                for ((f, v), name) in fields.iter_mut().zip(r.values).zip(names.iter()) {
                    f.push(index, v).map_err(|e| e.in_field(name))?;
                }
            }
            (Built::Empty, Item::Record(r)) => self.built = Built::Records(vec![r]),
            (Built::Records(v), Item::Record(r)) => v.push(r),
            (Built::Empty, x) => self.built = Built::Items(vec![x]),
            (Built::Items(v), x) => v.push(x),
            (_, x) => {
                let found = vec![sluice_runtime::abi::Rows::rows(&x) as usize];
                return Err(ColumnError::new(
                    index,
                    ColumnErrorKind::ShapeMismatch { expected: Vec::new(), found },
                ));
            }
        }
        self.rows += 1;
        Ok(())
    }

    fn finish(self) -> Item {
        match self.built {
            Built::Empty => Item::Items(Vec::new()),
            Built::Rows(names, fields) => Item::Batch(Columns {
                names,
                columns: fields.into_iter().map(|f| f.finish()).collect(),
                rows: self.rows,
            }),
            Built::Records(r) => Item::Records(RecordBatch::from(r)),
            Built::Items(v) => Item::Items(v),
        }
    }
}

/// Row `i` of a columnar batch: each column's `i`-th slice, held as its field was (a
/// padded list's column gives lists).
pub(crate) fn batch_row(b: &Columns, i: usize) -> Row {
    let values = b
        .columns
        .iter()
        .map(|c| {
            let shape = c.shape.get(1..).unwrap_or_default().to_vec();
            let per: usize = shape.iter().product();
            let kind = match c.kind {
                _ if shape.is_empty() => Kind::Scalar,
                Kind::List => Kind::List,
                _ => Kind::Tensor,
            };
            Value { data: c.data.slice(i * per, per), shape, kind }
        })
        .collect();
    Row { names: b.names.clone(), values }
}

impl column::Columns for Item {
    type Row = Item;

    fn num_rows(&self) -> Result<usize, ColumnError> {
        Ok(match self {
            Item::Batch(b) => b.rows,
            Item::Records(b) => b.len(),
            Item::Items(v) => v.len(),
            Item::Record(_) | Item::Row(_) => 1,
        })
    }

    fn row(&self, i: usize) -> Item {
        match self {
            Item::Batch(b) => Item::Row(batch_row(b, i)),
            Item::Records(b) => <RecordBatch as column::Columns>::row(b, i).into(),
            Item::Items(v) => v[i].clone(),
            x @ (Item::Record(_) | Item::Row(_)) => x.clone(),
        }
    }
}

impl From<sluice_runtime::stage::Record> for Item {
    fn from(r: sluice_runtime::stage::Record) -> Item {
        Item::Record(r)
    }
}

impl Batchable for Item {
    type Columns = Item;
    type Builder = ItemBuilder;
    type Padding = Padding;
    type Padded = Item;
    type PaddedBuilder = ItemBuilder;

    fn builder(capacity: usize) -> ItemBuilder {
        ItemBuilder { capacity, padding: None, rows: 0, built: Built::Empty }
    }

    fn padded_builder(capacity: usize, padding: &Padding) -> ItemBuilder {
        ItemBuilder { capacity, padding: Some(padding.clone()), rows: 0, built: Built::Empty }
    }
}
