//! What `sluice run --output DIR` writes of an element: its fields, typed ([`Features`]),
//! which the writers turn into one `tf.train.Example` (`--format tfrecord`, the
//! default), one Parquet row (`--format parquet`) or one WebDataset sample (`--format
//! webdataset`); a serialized record is written to TFRecord as it is. Every element type
//! a generated pipeline yields implements [`ToExample`]: the code generator writes the
//! [`ToExample::fields`] of each record struct field by field with the functions below
//! ([`scalar`], [`list`], [`tensor`], [`bytes`], [`text`]); batches, paths and other
//! elements without fields refuse.
//!
//! The `tf.train.Example` convention (the README's): one feature per field, named as the
//! field.
//!
//! - integers and `bool` (`u8` … `i64`): `int64_list` (`u64` above `i64::MAX` wraps, as
//!   TensorFlow's own casts do); floats: `float_list` (`f64` narrowed to `f32`: an
//!   Example holds no doubles);
//! - a byte string, or a string (`str`, its UTF-8 bytes): `bytes_list` with one value;
//! - a scalar: one value; a tensor: its values flattened in row-major order, plus an
//!   `int64_list` feature `NAME.shape` with its dimensions; a variable-length list: its
//!   values, plus `NAME.shape` `[len]`.

use std::path::PathBuf;

use super::show::Num;
use crate::column::Tensor;
use crate::example::{Example, Feature};
use crate::stage::{FileContents, Record, RecordBatch};

/// An element as `sluice run --output` writes it.
pub trait ToExample {
    /// Appends the element's fields to `out`, or says why it has none (the error names
    /// what the element is, e.g. "a batch").
    fn fields(&self, out: &mut Features) -> Result<(), &'static str>;

    /// Appends the element as one serialized `tf.train.Example` to `out` (a serialized
    /// record: its bytes as they are), or says why it cannot be one.
    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        let mut f = Features::new();
        self.fields(&mut f)?;
        finish(f, out);
        Ok(())
    }
}

/// The values of a numeric field, flattened in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub enum Nums {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
}

/// `$body` for the values of `$n` (a `Nums`, or a reference to one) bound to `$v`, the
/// same code for every variant; with `=> Nums`, `$body` makes the values of a `Nums` of
/// the same variant.
macro_rules! each_nums {
    ($n:expr, $v:ident => Nums($body:expr)) => {
        $crate::abi::export::each_nums!(@arms $n, $v, (U8, I8, U16, I16, U32, I32, U64, I64, F32, F64, Bool), Nums($body))
    };
    ($n:expr, $v:ident => $body:expr) => {
        $crate::abi::export::each_nums!(@arms $n, $v, (U8, I8, U16, I16, U32, I32, U64, I64, F32, F64, Bool), $body)
    };
    (@arms $n:expr, $v:ident, ($($t:ident),*), Nums($body:expr)) => {
        match $n { $($crate::abi::export::Nums::$t($v) => $crate::abi::export::Nums::$t($body),)* }
    };
    (@arms $n:expr, $v:ident, ($($t:ident),*), $body:expr) => {
        match $n { $($crate::abi::export::Nums::$t($v) => $body,)* }
    };
}
pub(crate) use each_nums;

impl Nums {
    /// How many values.
    pub fn len(&self) -> usize {
        each_nums!(self, v => v.len())
    }

    /// No values, of the same type.
    pub fn empty_like(&self) -> Nums {
        each_nums!(self, v => Nums(v[..0].to_vec()))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type's name in a `.pipe` schema (`f32`, `bool`, …).
    pub fn dtype(&self) -> &'static str {
        match self {
            Nums::U8(_) => "u8",
            Nums::I8(_) => "i8",
            Nums::U16(_) => "u16",
            Nums::I16(_) => "i16",
            Nums::U32(_) => "u32",
            Nums::I32(_) => "i32",
            Nums::U64(_) => "u64",
            Nums::I64(_) => "i64",
            Nums::F32(_) => "f32",
            Nums::F64(_) => "f64",
            Nums::Bool(_) => "bool",
        }
    }

    /// Value `i` as text (`3`, `0.5`, `true`): how a WebDataset member holds a number.
    pub fn text(&self, i: usize) -> String {
        match self {
            Nums::Bool(v) => u8::from(v[i]).to_string(),
            n => each_nums!(n, v => v[i].to_string()),
        }
    }

    /// The feature of a `tf.train.Example` holding these values (see the [module](self)).
    fn feature(&self) -> Feature {
        fn ints<T: Copy>(v: &[T], f: impl Fn(T) -> i64) -> Feature {
            Feature::int64s(v.iter().map(|&x| f(x)).collect::<Vec<_>>())
        }
        match self {
            Nums::U8(v) => ints(v, i64::from),
            Nums::I8(v) => ints(v, i64::from),
            Nums::U16(v) => ints(v, i64::from),
            Nums::I16(v) => ints(v, i64::from),
            Nums::U32(v) => ints(v, i64::from),
            Nums::I32(v) => ints(v, i64::from),
            // Above `i64::MAX` wraps around, as TensorFlow's `tf.cast(..., tf.int64)` does.
            Nums::U64(v) => ints(v, |x| x as i64),
            Nums::I64(v) => Feature::int64s(v.clone()),
            Nums::F32(v) => Feature::floats(v.clone()),
            Nums::F64(v) => Feature::floats(v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
            Nums::Bool(v) => ints(v, i64::from),
        }
    }
}

/// How a numeric field is shaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One value.
    Scalar,
    /// A variable-length list (`T[]`).
    List,
    /// A tensor of these dimensions (`T[a, b]`).
    Tensor(Vec<usize>),
}

/// The value of one field.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    Nums(Nums, Shape),
    Bytes(Vec<u8>),
    Text(String),
}

impl FieldValue {
    /// The field's type as a `.pipe` schema writes it (`f32[4]`, `i64[]`, `str`).
    pub fn type_name(&self) -> String {
        match self {
            FieldValue::Nums(n, Shape::Scalar) => n.dtype().to_string(),
            FieldValue::Nums(n, Shape::List) => format!("{}[]", n.dtype()),
            FieldValue::Nums(n, Shape::Tensor(d)) => {
                let dims: Vec<String> = d.iter().map(ToString::to_string).collect();
                format!("{}[{}]", n.dtype(), dims.join(", "))
            }
            FieldValue::Bytes(_) => "bytes".into(),
            FieldValue::Text(_) => "str".into(),
        }
    }
}

/// The fields of one record being built, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Features {
    pub fields: Vec<(String, FieldValue)>,
}

impl Features {
    pub fn new() -> Self {
        Features::default()
    }

    fn push(&mut self, name: &str, value: FieldValue) {
        match self.fields.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((name.to_string(), value)),
        }
    }
}

/// A number a record field holds.
pub trait ExampleNum: Num {
    /// These values as [`Nums`].
    fn nums(values: &[Self]) -> Nums;
}

macro_rules! export_num {
    ($($t:ty => $v:ident),*) => {$(
        impl ExampleNum for $t {
            fn nums(values: &[Self]) -> Nums {
                Nums::$v(values.to_vec())
            }
        }
    )*};
}
export_num!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64,
    f32 => F32, f64 => F64, bool => Bool);

/// A scalar field: one value.
pub fn scalar<T: ExampleNum>(out: &mut Features, name: &str, value: &T) {
    out.push(name, FieldValue::Nums(T::nums(std::slice::from_ref(value)), Shape::Scalar));
}

/// A variable-length list field.
pub fn list<T: ExampleNum>(out: &mut Features, name: &str, values: &[T]) {
    out.push(name, FieldValue::Nums(T::nums(values), Shape::List));
}

/// A tensor field: its values in row-major order and its shape.
pub fn tensor<T: ExampleNum>(out: &mut Features, name: &str, value: &Tensor<T>) {
    out.push(name, FieldValue::Nums(T::nums(value.as_slice()), Shape::Tensor(value.shape().to_vec())));
}

/// A byte-string field.
pub fn bytes(out: &mut Features, name: &str, value: &[u8]) {
    out.push(name, FieldValue::Bytes(value.to_vec()));
}

/// A string field (`str`).
pub fn text(out: &mut Features, name: &str, value: &str) {
    out.push(name, FieldValue::Text(value.to_string()));
}

/// Serializes the record of `features` to `out` as a `tf.train.Example` (see the
/// [module](self)).
pub fn finish(features: Features, out: &mut Vec<u8>) {
    let mut feature = std::collections::BTreeMap::new();
    for (name, value) in features.fields {
        let dims = match &value {
            FieldValue::Nums(n, Shape::List) => Some(vec![n.len() as i64]),
            FieldValue::Nums(_, Shape::Tensor(d)) => Some(d.iter().map(|&d| d as i64).collect()),
            _ => None,
        };
        if let Some(dims) = dims {
            feature.insert(format!("{name}.shape"), Feature::int64s(dims));
        }
        let f = match value {
            FieldValue::Nums(n, _) => n.feature(),
            FieldValue::Bytes(b) => Feature::bytes([b]),
            // As TensorFlow holds a `tf.string`: its UTF-8 bytes.
            FieldValue::Text(t) => Feature::bytes([t.into_bytes()]),
        };
        feature.insert(name, f);
    }
    out.extend_from_slice(&Example { features: Some(crate::example::Features { feature }) }.encode_record());
}

/// What a batch refuses with.
pub const BATCH: &str = "a batch";

/// What a serialized record refuses with, as fields: its features are not typed until a
/// `parse` says what they are.
pub const SERIALIZED: &str = "serialized records";

/// A serialized record: written to TFRecord as it is.
impl ToExample for Record {
    fn fields(&self, _: &mut Features) -> Result<(), &'static str> {
        Err(SERIALIZED)
    }

    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        out.extend_from_slice(self.as_bytes());
        Ok(())
    }
}

/// A serialized record without its origin: written to TFRecord as it is.
impl ToExample for Vec<u8> {
    fn fields(&self, _: &mut Features) -> Result<(), &'static str> {
        Err(SERIALIZED)
    }

    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        out.extend_from_slice(self);
        Ok(())
    }
}

impl ToExample for RecordBatch {
    fn fields(&self, _: &mut Features) -> Result<(), &'static str> {
        Err(BATCH)
    }
}

/// A file read whole: fields `contents` (bytes), `path` (a string) and `label`.
impl ToExample for FileContents {
    fn fields(&self, f: &mut Features) -> Result<(), &'static str> {
        bytes(f, "contents", &self.contents);
        text(f, "path", &self.path);
        scalar(f, "label", &self.label);
        Ok(())
    }
}

/// A string alone is no record (a `str` field is written by [`text`]).
impl ToExample for String {
    fn fields(&self, _: &mut Features) -> Result<(), &'static str> {
        Err("a string")
    }
}

impl ToExample for PathBuf {
    fn fields(&self, _: &mut Features) -> Result<(), &'static str> {
        Err("a file path")
    }
}

impl<T: ToExample> ToExample for Vec<T> {
    fn fields(&self, _: &mut Features) -> Result<(), &'static str> {
        Err(BATCH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_become_features_with_shapes() {
        let mut f = Features::new();
        scalar(&mut f, "id", &7u32);
        scalar(&mut f, "w", &0.5f64);
        list(&mut f, "ids", &[1i64, 2, 3]);
        tensor(&mut f, "x", &Tensor::new(vec![2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap());
        bytes(&mut f, "b", b"hi");
        let s = String::from("é\n"); // As a generated impl passes a `String` field.
        text(&mut f, "s", &s);
        let mut out = Vec::new();
        finish(f, &mut out);
        let ex = Example::decode_record(&out).unwrap();
        assert_eq!(ex.feature("id").unwrap().as_int64s(), Some(&[7][..]));
        assert_eq!(ex.feature("w").unwrap().as_floats(), Some(&[0.5][..]));
        assert_eq!(ex.feature("ids.shape").unwrap().as_int64s(), Some(&[3][..]));
        assert_eq!(ex.feature("x").unwrap().as_floats(), Some(&[1.0, 2.0, 3.0, 4.0][..]));
        assert_eq!(ex.feature("x.shape").unwrap().as_int64s(), Some(&[2, 2][..]));
        assert_eq!(ex.feature("b").unwrap().as_bytes(), Some(&[b"hi".to_vec()][..]));
        assert_eq!(ex.feature("s").unwrap().as_bytes(), Some(&["é\n".as_bytes().to_vec()][..]));
        assert!(ex.feature("id.shape").is_none() && ex.feature("s.shape").is_none());
    }

    #[test]
    fn records_pass_through_and_batches_refuse() {
        let mut out = Vec::new();
        vec![1u8, 2].to_example(&mut out).unwrap();
        assert_eq!(out, [1, 2]);
        assert_eq!(vec![vec![1u8]].to_example(&mut out), Err(BATCH));
        assert_eq!(String::from("x").to_example(&mut out), Err("a string"));
    }
}
