//! What a generated pipeline's element becomes for Python (`sluice.Pipeline`): its fields
//! by name, each a [`PyColumn`] that owns the field's buffer, moved out of the element and
//! never copied. The code generator writes the [`ToPython`] impl of every record and batch
//! struct field by field (as it writes `Show`); the elements without fields (serialized
//! records, paths, files read whole, batches of whole elements) cross as the JSON line
//! `sluice show` prints of them ([`PyElement::Json`]).
//!
//! The facade's `python` module hands the numbers to Python as DLPack tensors over these
//! very buffers; byte strings and strings become Python `bytes` and `str` objects (copies,
//! as Python objects must be).

use crate::column::{Buffer, Dense, IntoBuffer, Ragged, Tensor, Text};

use super::show::{Json, Show};

/// One field of an element, owning its values.
#[derive(Debug, Clone, PartialEq)]
pub enum PyColumn {
    /// Numbers: `shape` row-major (`[]` for a record's scalar, the batch's dimension first
    /// for a batch's column).
    Tensor {
        /// The dimensions.
        shape: Vec<usize>,
        /// `shape.iter().product()` values.
        data: Buffer,
    },
    /// Byte strings end to end: row `i` is `values[offsets[i]..offsets[i + 1]]`. `one`:
    /// a record's single value (`bytes`), else a batch's column (a list of them).
    Bytes {
        /// Every row's bytes.
        values: Vec<u8>,
        /// `rows + 1` offsets.
        offsets: Vec<i64>,
        /// A record's field rather than a batch's column.
        one: bool,
    },
    /// UTF-8 strings, laid out as [`PyColumn::Bytes`].
    Text {
        /// Every row's bytes (UTF-8).
        values: Vec<u8>,
        /// `rows + 1` offsets.
        offsets: Vec<i64>,
        /// A record's field rather than a batch's column.
        one: bool,
    },
}

/// An element as it crosses into Python.
#[derive(Debug, Clone, PartialEq)]
pub enum PyElement {
    /// A record or batch struct: its fields in order, by name.
    Fields(Vec<(&'static str, PyColumn)>),
    /// An element without fields: its `sluice show` JSON.
    Json(String),
}

/// An element a generated pipeline yields, as Python receives it.
pub trait ToPython {
    /// The element, its buffers moved out.
    fn to_python(self) -> PyElement;
}

/// A batch's column as a [`PyColumn`].
pub trait IntoPyColumn {
    /// The column, its buffers moved out.
    fn into_py_column(self) -> PyColumn;
}

impl<T: IntoBuffer, R> IntoPyColumn for Dense<T, R> {
    fn into_py_column(self) -> PyColumn {
        let (shape, data) = self.into_parts();
        PyColumn::Tensor { shape, data: T::into_buffer(data) }
    }
}

/// A batch's column of byte strings.
impl IntoPyColumn for Ragged<u8> {
    fn into_py_column(self) -> PyColumn {
        let (values, offsets) = self.into_parts();
        PyColumn::Bytes { values, offsets, one: false }
    }
}

/// A batch's column of strings.
impl IntoPyColumn for Text {
    fn into_py_column(self) -> PyColumn {
        let (values, offsets) = self.into_parts();
        PyColumn::Text { values, offsets, one: false }
    }
}

/// A record's number (shape `[]`).
pub fn scalar<T: IntoBuffer>(value: T) -> PyColumn {
    PyColumn::Tensor { shape: Vec::new(), data: T::into_buffer(vec![value]) }
}

/// A record's variable-length list (shape `[len]`).
pub fn list<T: IntoBuffer>(values: Vec<T>) -> PyColumn {
    PyColumn::Tensor { shape: vec![values.len()], data: T::into_buffer(values) }
}

/// A record's tensor.
pub fn tensor<T: IntoBuffer>(value: Tensor<T>) -> PyColumn {
    let (shape, data) = value.into_parts();
    PyColumn::Tensor { shape, data: T::into_buffer(data) }
}

/// A record's byte string.
pub fn bytes(value: Vec<u8>) -> PyColumn {
    let offsets = vec![0, value.len() as i64];
    PyColumn::Bytes { values: value, offsets, one: true }
}

/// A record's string.
pub fn text(value: String) -> PyColumn {
    let offsets = vec![0, value.len() as i64];
    PyColumn::Text { values: value.into_bytes(), offsets, one: true }
}

/// An element without fields as its `sluice show` JSON.
pub fn json(element: &impl Show) -> PyElement {
    let mut out = Json::new();
    element.show(&mut out);
    PyElement::Json(out.as_str().to_string())
}

macro_rules! as_json {
    ($($t:ty),*) => {$(
        impl ToPython for $t {
            fn to_python(self) -> PyElement {
                json(&self)
            }
        }
    )*};
}
as_json!(
    Vec<u8>,
    String,
    std::path::PathBuf,
    crate::stage::FileContents,
    crate::stage::Record,
    crate::stage::RecordBatch
);

/// A batch of whole elements (a `batch` of elements without fields): a JSON array.
impl<T: Show> ToPython for Vec<T> {
    fn to_python(self) -> PyElement {
        json(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::{Batchable, ColumnBuilder};

    #[test]
    fn columns_move_their_buffers() {
        let mut b = <f32 as Batchable>::builder(2);
        b.push(1.5).unwrap();
        b.push(2.5).unwrap();
        let col = b.finish();
        let ptr = col.as_slice().as_ptr();
        let PyColumn::Tensor { shape, data: Buffer::F32(v) } = col.into_py_column() else { panic!() };
        assert_eq!((shape, v.as_ptr()), (vec![2], ptr));

        let mut t = <String as Batchable>::builder(2);
        t.push("é".into()).unwrap();
        t.push("x".into()).unwrap();
        assert_eq!(
            t.finish().into_py_column(),
            PyColumn::Text { values: "éx".as_bytes().to_vec(), offsets: vec![0, 2, 3], one: false }
        );
        let mut r = <Vec<u8> as Batchable>::builder(2);
        r.push(b"ab".to_vec()).unwrap();
        r.push(Vec::new()).unwrap();
        assert_eq!(
            r.finish().into_py_column(),
            PyColumn::Bytes { values: b"ab".to_vec(), offsets: vec![0, 2, 2], one: false }
        );
    }

    #[test]
    fn record_fields_and_fieldless_elements() {
        assert_eq!(scalar(7i64), PyColumn::Tensor { shape: vec![], data: Buffer::I64(vec![7]) });
        assert_eq!(list(vec![1u8, 2]), PyColumn::Tensor { shape: vec![2], data: Buffer::U8(vec![1, 2]) });
        assert_eq!(
            text("hi".into()),
            PyColumn::Text { values: b"hi".to_vec(), offsets: vec![0, 2], one: true }
        );
        assert_eq!(bytes(vec![0]), PyColumn::Bytes { values: vec![0], offsets: vec![0, 1], one: true });
        assert_eq!(std::path::PathBuf::from("a/b").to_python(), PyElement::Json(r#"{"path":"a/b"}"#.into()));
    }
}
