//! What an engine element becomes for Python (`sluice.Pipeline(..., engine="interpreted")`):
//! [`ToPython`] for [`Item`], field for field as the generated structs write it
//! (`codegen/types.rs`): a number field's buffer moves into a [`PyColumn::Tensor`] (the
//! facade's `python` module hands it to Python as DLPack, no copy), byte strings and
//! strings become values + offsets, and the elements without fields (serialized records,
//! batches of them) cross as their `sluice show` JSON.
//!
//! A generated struct names its fields with `&'static str` literals; an engine element's
//! names are the plan's, known at run time. They are interned once per distinct name
//! ([`intern`]): a process leaks each field name it ever hands to Python once, not once
//! per element or session.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use sluice_runtime::abi::py::{self, PyColumn, PyElement, ToPython};
use sluice_runtime::column::Buffer;

use crate::value::{Data, Item, Value};

/// `name` as a `&'static str`, leaked once per distinct name in this process.
fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// A field's value as a [`PyColumn`], its buffer moved out. `column`: a batch's column
/// (byte strings and strings as lists), else one record's field.
fn column(value: Value, column: bool) -> PyColumn {
    let Value { data, shape, .. } = value;
    let tensor = |data: Buffer| PyColumn::Tensor { shape, data };
    match data {
        Data::Bool(v) => tensor(Buffer::Bool(v)),
        Data::U8(v) => tensor(Buffer::U8(v)),
        Data::I32(v) => tensor(Buffer::I32(v)),
        Data::U32(v) => tensor(Buffer::U32(v)),
        Data::I64(v) => tensor(Buffer::I64(v)),
        Data::U64(v) => tensor(Buffer::U64(v)),
        Data::F32(v) => tensor(Buffer::F32(v)),
        Data::F64(v) => tensor(Buffer::F64(v)),
        Data::Bytes(v) if !column => py::bytes(v.into_iter().next().unwrap_or_default()),
        Data::Str(v) if !column => py::text(v.into_iter().next().unwrap_or_default()),
        Data::Bytes(v) => {
            let (values, offsets) = joined(v.iter().map(Vec::as_slice));
            PyColumn::Bytes { values, offsets, one: false }
        }
        Data::Str(v) => {
            let (values, offsets) = joined(v.iter().map(String::as_bytes));
            PyColumn::Text { values, offsets, one: false }
        }
    }
}

/// Rows end to end, with their `rows + 1` offsets.
fn joined<'a>(rows: impl Iterator<Item = &'a [u8]>) -> (Vec<u8>, Vec<i64>) {
    let (mut values, mut offsets) = (Vec::new(), vec![0i64]);
    for r in rows {
        values.extend_from_slice(r);
        offsets.push(values.len() as i64);
    }
    (values, offsets)
}

impl ToPython for Item {
    fn to_python(self) -> PyElement {
        let (names, values, batch) = match self {
            Item::Record(r) => return r.to_python(),
            Item::Records(b) => return b.to_python(),
            Item::Items(v) => return v.to_python(),
            Item::Row(r) => (r.names, r.values, false),
            Item::Batch(mut b) => (b.names.clone(), std::mem::take(&mut b.columns), true),
        };
        PyElement::Fields(names.iter().zip(values).map(|(n, v)| (intern(n), column(v, batch))).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::value::{Columns, Kind, Names, Row};

    fn row(v: i64, s: &str) -> Row {
        Row {
            names: Arc::from(["value".to_string(), "x".to_string(), "s".to_string()]),
            values: vec![
                Value::scalar(Data::I64(vec![v])),
                Value { data: Data::F32(vec![0.5, 1.5]), shape: vec![2], kind: Kind::Tensor },
                Value::scalar(Data::Str(vec![s.to_string()])),
            ],
        }
    }

    #[test]
    fn a_row_gives_its_fields_as_the_generated_record_does() {
        let r = row(3, "é");
        let ptr = match &r.values[1].data {
            Data::F32(v) => v.as_ptr(),
            _ => unreachable!(),
        };
        let PyElement::Fields(f) = Item::Row(r).to_python() else { panic!("fields") };
        assert_eq!(f[0], ("value", py::scalar(3i64)));
        let PyColumn::Tensor { shape, data: Buffer::F32(x) } = &f[1].1 else { panic!("{:?}", f[1]) };
        assert_eq!((shape.as_slice(), x.as_ptr()), (&[2][..], ptr), "moved, not copied");
        assert_eq!(f[2], ("s", py::text("é".into())));
    }

    #[test]
    fn a_batch_gives_columns_and_a_list_keeps_its_shape() {
        let names: Names = row(0, "").names;
        let b = Columns::from_rows(names, vec![row(1, "a"), row(2, "bc")]).unwrap();
        let PyElement::Fields(f) = Item::Batch(b).to_python() else { panic!("fields") };
        assert_eq!(f[0].1, PyColumn::Tensor { shape: vec![2], data: Buffer::I64(vec![1, 2]) });
        assert_eq!(
            f[1].1,
            PyColumn::Tensor { shape: vec![2, 2], data: Buffer::F32(vec![0.5, 1.5, 0.5, 1.5]) }
        );
        assert_eq!(f[2].1, PyColumn::Text { values: b"abc".to_vec(), offsets: vec![0, 1, 3], one: false });
        let list = Value { data: Data::U8(vec![7, 8, 9]), shape: vec![3], kind: Kind::List };
        assert_eq!(column(list, false), py::list(vec![7u8, 8, 9]));
        assert!(std::ptr::eq(intern("value"), intern("value")), "one name, interned once");
    }
}
