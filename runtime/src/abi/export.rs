//! What `sluice run --output DIR` writes of an element: one `tf.train.Example` (or, for a
//! serialized record, its bytes as they are). Every element type a generated pipeline
//! yields implements [`ToExample`]: the code generator writes the impl of each record
//! struct field by field with the functions below ([`scalar`], [`list`], [`tensor`],
//! [`bytes`], [`text`]); batches, paths and other elements without fields refuse.
//!
//! The convention (the README's): one feature per field, named as the field.
//!
//! - integers and `bool` (`u8` … `i64`): `int64_list` (`u64` above `i64::MAX` wraps, as
//!   TensorFlow's own casts do); floats: `float_list` (`f64` narrowed to `f32`: an
//!   Example holds no doubles);
//! - a byte string, or a string (`str`, its UTF-8 bytes): `bytes_list` with one value;
//! - a scalar: one value; a tensor: its values flattened in row-major order, plus an
//!   `int64_list` feature `NAME.shape` with its dimensions; a variable-length list: its
//!   values, plus `NAME.shape` `[len]`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::show::Num;
use crate::column::Tensor;
use crate::example::{Example, Feature};
use crate::stage::{FileContents, Record, RecordBatch};

/// An element as `sluice run --output` writes it.
pub trait ToExample {
    /// Appends the serialized record to `out`, or says why this element cannot be one
    /// (the error names what the element is, e.g. "a batch").
    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str>;
}

/// The features of one record being built.
pub type Features = BTreeMap<String, Feature>;

/// A number that an Example holds: as `int64_list` or `float_list`.
pub trait ExampleNum: Num {
    /// The feature of these values.
    fn feature(values: &[Self]) -> Feature;
}

macro_rules! int_feature {
    ($($t:ty),*) => {$(
        impl ExampleNum for $t {
            fn feature(values: &[Self]) -> Feature {
                Feature::int64s(values.iter().map(|&v| i64::from(v)).collect::<Vec<_>>())
            }
        }
    )*};
}
int_feature!(u8, u16, u32, i8, i16, i32, i64);

/// Above `i64::MAX` wraps around, as TensorFlow's `tf.cast(..., tf.int64)` does.
impl ExampleNum for u64 {
    fn feature(values: &[Self]) -> Feature {
        Feature::int64s(values.iter().map(|&v| v as i64).collect::<Vec<_>>())
    }
}

impl ExampleNum for bool {
    fn feature(values: &[Self]) -> Feature {
        Feature::int64s(values.iter().map(|&v| i64::from(v)).collect::<Vec<_>>())
    }
}

impl ExampleNum for f32 {
    fn feature(values: &[Self]) -> Feature {
        Feature::floats(values)
    }
}

impl ExampleNum for f64 {
    fn feature(values: &[Self]) -> Feature {
        Feature::floats(values.iter().map(|&v| v as f32).collect::<Vec<_>>())
    }
}

fn shape(out: &mut Features, name: &str, dims: &[usize]) {
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    out.insert(format!("{name}.shape"), Feature::int64s(dims));
}

/// A scalar field: one value.
pub fn scalar<T: ExampleNum>(out: &mut Features, name: &str, value: &T) {
    out.insert(name.to_string(), T::feature(std::slice::from_ref(value)));
}

/// A variable-length list field: its values, and `NAME.shape` `[len]`.
pub fn list<T: ExampleNum>(out: &mut Features, name: &str, values: &[T]) {
    out.insert(name.to_string(), T::feature(values));
    shape(out, name, &[values.len()]);
}

/// A tensor field: its values in row-major order, and `NAME.shape`.
pub fn tensor<T: ExampleNum>(out: &mut Features, name: &str, value: &Tensor<T>) {
    out.insert(name.to_string(), T::feature(value.as_slice()));
    shape(out, name, value.shape());
}

/// A byte-string field: `bytes_list` with one value.
pub fn bytes(out: &mut Features, name: &str, value: &[u8]) {
    out.insert(name.to_string(), Feature::bytes([value.to_vec()]));
}

/// A string field (`str`): `bytes_list` with one value, its UTF-8 bytes (as TensorFlow
/// holds a `tf.string`).
pub fn text(out: &mut Features, name: &str, value: &str) {
    out.insert(name.to_string(), Feature::bytes([value.as_bytes().to_vec()]));
}

/// Serializes the record of `features` to `out` (for generated impls).
pub fn finish(features: Features, out: &mut Vec<u8>) {
    out.extend_from_slice(
        &Example { features: Some(crate::example::Features { feature: features }) }.encode_record(),
    );
}

/// What a batch refuses with.
pub const BATCH: &str = "a batch";

/// A serialized record: written as it is.
impl ToExample for Record {
    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        out.extend_from_slice(self.as_bytes());
        Ok(())
    }
}

/// A serialized record without its origin: written as it is.
impl ToExample for Vec<u8> {
    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        out.extend_from_slice(self);
        Ok(())
    }
}

impl ToExample for RecordBatch {
    fn to_example(&self, _: &mut Vec<u8>) -> Result<(), &'static str> {
        Err(BATCH)
    }
}

/// A file read whole: features `contents` (bytes), `path` (a string) and `label`.
impl ToExample for FileContents {
    fn to_example(&self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        let mut f = Features::new();
        bytes(&mut f, "contents", &self.contents);
        text(&mut f, "path", &self.path);
        scalar(&mut f, "label", &self.label);
        finish(f, out);
        Ok(())
    }
}

/// A string alone is no record (a `str` field is written by [`text`]).
impl ToExample for String {
    fn to_example(&self, _: &mut Vec<u8>) -> Result<(), &'static str> {
        Err("a string")
    }
}

impl ToExample for PathBuf {
    fn to_example(&self, _: &mut Vec<u8>) -> Result<(), &'static str> {
        Err("a file path")
    }
}

impl<T: ToExample> ToExample for Vec<T> {
    fn to_example(&self, _: &mut Vec<u8>) -> Result<(), &'static str> {
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
