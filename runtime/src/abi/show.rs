//! What `sluice show` prints of an element: one line of JSON, an object with one key per
//! field. Every element type a generated pipeline yields implements [`Show`]: the code
//! generator writes the impl of each record and batch struct field by field, choosing
//! the function below by how the field is held ([`scalar`], [`list`], [`tensor`],
//! [`bytes`], [`text`]; a batch's columns through their own [`Show`] impls).
//!
//! The format:
//!
//! - a number, list or tensor: `{"dtype":"f32","shape":[2,3],"values":[...]}`, the values
//!   flat in row-major order, `shape` `[]` for a scalar and `[len]` for a list; a batch's
//!   column has the batch's dimension first;
//! - a byte string: `{"dtype":"bytes","base64":"..."}` (standard alphabet, padded); a
//!   batch's column of them: `"base64":["...", ...]`;
//! - a string (`str`): a JSON string, `"..."` (UTF-8 as it is; `"`, `\\` and the
//!   control characters below U+0020 escaped, so any JSON reader gives the same string
//!   back); a batch's column of them: an array of strings, `["...", ...]`;
//! - a serialized record (`tfrecords(files)` alone): `{"record":{"dtype":"bytes",
//!   "base64":"..."},"origin":"path: record N"}` (`origin` is `null` when unknown); a
//!   batch of them: `base64` and `origin` are lists;
//! - a path: `{"path":"..."}`; a file read whole (`read_file`): `{"contents":{"dtype":
//!   "bytes","base64":"..."},"path":"...","label":{"dtype":"i64",...}}`; a batch of whole
//!   elements: a JSON array of them.
//!
//! Floats print as the shortest decimal that reads back as the same value of their own
//! type (`0.1` for the `f32` nearest 0.1, not the `0.10000000149011612` of its `f64`
//! widening), with an exponent below 1e-4 and from 1e16 (`1e-5`, `1.5e20`); integral
//! floats keep a `.0`. NaN and the infinities, which JSON cannot hold, are the strings
//! `"NaN"`, `"Infinity"` and `"-Infinity"` (as `sluice cat` prints them).

use std::fmt::Write as _;
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::column::{Dense, Ragged, Scalar, Tensor, Text};
use crate::stage::{FileContents, Origin, Record, RecordBatch};

/// JSON text being written, one element at a time.
///
/// Objects are written with [`begin_object`](Json::begin_object), then for each member
/// [`key`](Json::key) and its value, then [`end_object`](Json::end_object): the commas
/// come by themselves.
#[derive(Debug, Default)]
pub struct Json {
    text: String,
    /// Whether the next key or array item follows another (and so needs a comma).
    after: bool,
}

impl Json {
    /// An empty text.
    pub fn new() -> Json {
        Json::default()
    }

    /// The text written so far.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Empties the text, keeping its allocation.
    pub fn clear(&mut self) {
        self.text.clear();
        self.after = false;
    }

    /// Opens an object.
    pub fn begin_object(&mut self) {
        self.text.push('{');
        self.after = false;
    }

    /// The key of the object's next member; its value follows.
    pub fn key(&mut self, key: &str) {
        self.comma();
        write_str(&mut self.text, key);
        self.text.push(':');
    }

    /// Closes an object.
    pub fn end_object(&mut self) {
        self.text.push('}');
        self.after = true;
    }

    /// Opens an array; each item is written after [`item`](Json::item).
    pub fn begin_array(&mut self) {
        self.text.push('[');
        self.after = false;
    }

    /// Starts the array's next item.
    pub fn item(&mut self) {
        self.comma();
    }

    /// Closes an array.
    pub fn end_array(&mut self) {
        self.text.push(']');
        self.after = true;
    }

    /// A string value.
    pub fn string(&mut self, s: &str) {
        write_str(&mut self.text, s);
        self.after = true;
    }

    /// `null`.
    pub fn null(&mut self) {
        self.text.push_str("null");
        self.after = true;
    }

    /// A raw JSON value, written as it is.
    fn raw(&mut self, json: &str) {
        self.text.push_str(json);
        self.after = true;
    }

    fn comma(&mut self) {
        if self.after {
            self.text.push(',');
        }
        self.after = false;
    }
}

/// An element as `sluice show` prints it.
pub trait Show {
    /// Writes the element as one JSON value (no newline).
    fn show(&self, out: &mut Json);
}

/// A number of a field: its dtype's name in the `.pipe` language and its JSON text.
pub trait Num: Scalar {
    /// `f32`, `i64`, ….
    const NAME: &'static str;
    /// Appends the value as JSON.
    fn write(self, out: &mut String);
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const NAME: &'static str = stringify!($t);
            fn write(self, out: &mut String) {
                let _ = write!(out, "{self}");
            }
        }
    )*};
}
int_num!(u8, u16, u32, u64, i8, i16, i32, i64);

impl Num for bool {
    const NAME: &'static str = "bool";
    fn write(self, out: &mut String) {
        out.push_str(if self { "true" } else { "false" });
    }
}

/// Floats as the shortest decimal of their own type that reads back as them (Rust's
/// `{:?}`: exponents below 1e-4 and from 1e16), non-finite ones as strings.
macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const NAME: &'static str = stringify!($t);
            fn write(self, out: &mut String) {
                if self.is_nan() {
                    out.push_str("\"NaN\"");
                } else if self.is_infinite() {
                    out.push_str(if self > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
                } else {
                    let _ = write!(out, "{self:?}");
                }
            }
        }
    )*};
}
float_num!(f32, f64);

/// `{"dtype":…,"shape":…,"values":[…]}`: numbers of any shape, flat in row-major order
/// (what the engine, whose values are typed buffers with a shape, prints them through).
pub fn numbers<T: Num>(out: &mut Json, shape: &[usize], values: &[T]) {
    out.begin_object();
    out.key("dtype");
    out.string(T::NAME);
    out.key("shape");
    let mut text = String::from("[");
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        let _ = write!(text, "{d}");
    }
    text.push_str("],\"values\":[");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        v.write(&mut text);
    }
    text.push(']');
    out.raw(&text);
    out.end_object();
}

/// A scalar field (`shape` `[]`).
pub fn scalar<T: Num>(out: &mut Json, value: &T) {
    numbers(out, &[], std::slice::from_ref(value));
}

/// A variable-length list field (`shape` `[len]`).
pub fn list<T: Num>(out: &mut Json, values: &[T]) {
    numbers(out, &[values.len()], values);
}

/// A tensor field.
pub fn tensor<T: Num>(out: &mut Json, value: &Tensor<T>) {
    numbers(out, value.shape(), value.as_slice());
}

/// A byte-string field.
pub fn bytes(out: &mut Json, value: &[u8]) {
    out.begin_object();
    out.key("dtype");
    out.string("bytes");
    out.key("base64");
    out.string(&STANDARD.encode(value));
    out.end_object();
}

/// A string field: a JSON string.
pub fn text(out: &mut Json, value: &str) {
    out.string(value);
}

/// A byte-string column: `"base64"` is a list, one string per row.
pub fn bytes_rows<'a>(out: &mut Json, rows: impl Iterator<Item = &'a [u8]>) {
    out.begin_object();
    out.key("dtype");
    out.string("bytes");
    out.key("base64");
    out.begin_array();
    for row in rows {
        out.item();
        out.string(&STANDARD.encode(row));
    }
    out.end_array();
    out.end_object();
}

/// A batch's column of numbers: its shape has the batch's dimension first.
impl<T: Num, R> Show for Dense<T, R> {
    fn show(&self, out: &mut Json) {
        numbers(out, self.shape(), self.as_slice());
    }
}

/// A batch's column of byte strings.
impl Show for Ragged<u8> {
    fn show(&self, out: &mut Json) {
        bytes_rows(out, (0..self.len()).map(|i| self.row_values(i)));
    }
}

/// A string (a `str` field): a JSON string.
impl Show for String {
    fn show(&self, out: &mut Json) {
        text(out, self);
    }
}

/// A batch's column of strings: an array of JSON strings.
impl Show for Text {
    fn show(&self, out: &mut Json) {
        out.begin_array();
        for row in self.iter() {
            out.item();
            out.string(row);
        }
        out.end_array();
    }
}

fn origin(out: &mut Json, o: Origin) {
    if o.is_known() { out.string(&o.to_string()) } else { out.null() }
}

/// `{"record":{"dtype":"bytes","base64":…},"origin":"path: record N"}`.
impl Show for Record {
    fn show(&self, out: &mut Json) {
        out.begin_object();
        out.key("record");
        bytes(out, self.as_bytes());
        out.key("origin");
        origin(out, self.origin());
        out.end_object();
    }
}

/// A serialized record without its origin.
impl Show for Vec<u8> {
    fn show(&self, out: &mut Json) {
        out.begin_object();
        out.key("record");
        bytes(out, self);
        out.end_object();
    }
}

/// The records as a column (`base64` a list) and their origins as a list.
impl Show for RecordBatch {
    fn show(&self, out: &mut Json) {
        out.begin_object();
        out.key("record");
        bytes_rows(out, self.iter());
        out.key("origin");
        out.begin_array();
        for i in 0..self.len() {
            out.item();
            origin(out, self.origin(i));
        }
        out.end_array();
        out.end_object();
    }
}

/// `{"path":"…"}` (not UTF-8: lossily).
impl Show for PathBuf {
    fn show(&self, out: &mut Json) {
        out.begin_object();
        out.key("path");
        out.string(&self.to_string_lossy());
        out.end_object();
    }
}

/// `{"contents":…,"path":"…","label":…}`, fields as a record's.
impl Show for FileContents {
    fn show(&self, out: &mut Json) {
        out.begin_object();
        out.key("contents");
        bytes(out, &self.contents);
        out.key("path");
        text(out, &self.path);
        out.key("label");
        scalar(out, &self.label);
        out.end_object();
    }
}

/// A batch of whole elements: a JSON array of them.
impl<T: Show> Show for Vec<T> {
    fn show(&self, out: &mut Json) {
        out.begin_array();
        for x in self {
            out.item();
            x.show(out);
        }
        out.end_array();
    }
}

/// Appends `s` as a JSON string.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::{Batchable, ColumnBuilder};
    use crate::stage::FileId;

    fn f32_text(v: f32) -> String {
        let mut s = String::new();
        v.write(&mut s);
        s
    }

    fn shown(x: &impl Show) -> String {
        let mut out = Json::new();
        x.show(&mut out);
        out.as_str().to_string()
    }

    #[test]
    fn floats_print_as_their_own_shortest_decimal() {
        let cases: [(f32, &str); 10] = [
            (0.1, "0.1"),
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (1.0 / 3.0, "0.33333334"),
            (16777216.0, "16777216.0"),
            (1e-5, "1e-5"),
            (1.5e20, "1.5e20"),
            (f32::MAX, "3.4028235e38"),
            (f32::MIN_POSITIVE, "1.1754944e-38"),
            (1e-45, "1e-45"),
        ];
        for (v, text) in cases {
            assert_eq!(f32_text(v), text);
        }
        let mut s = String::new();
        0.1f64.write(&mut s);
        assert_eq!(s, "0.1");
        for (v, text) in
            [(f32::NAN, "\"NaN\""), (f32::INFINITY, "\"Infinity\""), (f32::NEG_INFINITY, "\"-Infinity\"")]
        {
            assert_eq!(f32_text(v), text);
        }
    }

    #[test]
    fn floats_read_back_as_the_same_f32() {
        // Every bit pattern's neighbourhood over the exponent range, by a stride.
        let mut bits = 1u32;
        while bits < 0x7f80_0000 {
            let v = f32::from_bits(bits);
            let text = f32_text(v);
            assert_eq!(text.parse::<f32>().unwrap().to_bits(), bits, "{text}");
            assert_eq!((text.parse::<f64>().unwrap() as f32).to_bits(), bits, "{text} through f64");
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(json.is_number(), "{text}");
            bits += 0x1357;
        }
    }

    #[test]
    fn fields_and_columns_have_dtype_shape_and_values() {
        let mut out = Json::new();
        out.begin_object();
        out.key("x");
        scalar(&mut out, &7i64);
        out.key("l");
        list(&mut out, &[1u8, 2]);
        out.key("t");
        tensor(&mut out, &Tensor::new(vec![2, 1], vec![0.5f32, -2.0]).unwrap());
        out.key("b");
        bytes(&mut out, b"\x00\xffab");
        out.key("q");
        scalar(&mut out, &true);
        out.end_object();
        assert_eq!(
            out.as_str(),
            r#"{"x":{"dtype":"i64","shape":[],"values":[7]},"l":{"dtype":"u8","shape":[2],"values":[1,2]},"t":{"dtype":"f32","shape":[2,1],"values":[0.5,-2.0]},"b":{"dtype":"bytes","base64":"AP9hYg=="},"q":{"dtype":"bool","shape":[],"values":[true]}}"#
        );

        let mut b = <[f32; 2] as Batchable>::builder(2);
        b.push([1.0, 2.0]).unwrap();
        b.push([3.0, f32::NAN]).unwrap();
        assert_eq!(shown(&b.finish()), r#"{"dtype":"f32","shape":[2,2],"values":[1.0,2.0,3.0,"NaN"]}"#);
        let mut b = <Vec<u8> as Batchable>::builder(2);
        b.push(b"ab".to_vec()).unwrap();
        b.push(Vec::new()).unwrap();
        assert_eq!(shown(&b.finish()), r#"{"dtype":"bytes","base64":["YWI=",""]}"#);
    }

    #[test]
    fn records_paths_and_batches_of_elements() {
        let file = FileId::of(std::path::Path::new("dir/a \"q\".tfrecord"));
        let r = Record::new(b"hi".to_vec(), Origin::new(file, 3));
        assert_eq!(
            shown(&r),
            r#"{"record":{"dtype":"bytes","base64":"aGk="},"origin":"dir/a \"q\".tfrecord: record 3"}"#
        );
        assert_eq!(
            shown(&Record::from(b"hi".to_vec())),
            r#"{"record":{"dtype":"bytes","base64":"aGk="},"origin":null}"#
        );
        assert_eq!(shown(&b"hi".to_vec()), r#"{"record":{"dtype":"bytes","base64":"aGk="}}"#);
        let batch = RecordBatch::from(vec![r.clone(), Record::from(b"x".to_vec())]);
        assert_eq!(
            shown(&batch),
            r#"{"record":{"dtype":"bytes","base64":["aGk=","eA=="]},"origin":["dir/a \"q\".tfrecord: record 3",null]}"#
        );
        let file = FileContents { contents: b"hi".to_vec(), path: "d/é.jpg".into(), label: 2 };
        assert_eq!(
            shown(&file),
            r#"{"contents":{"dtype":"bytes","base64":"aGk="},"path":"d/é.jpg","label":{"dtype":"i64","shape":[],"values":[2]}}"#
        );
        let paths = vec![PathBuf::from("a\nb"), PathBuf::from("c")];
        assert_eq!(shown(&paths), r#"[{"path":"a\nb"},{"path":"c"}]"#);
        assert_eq!(shown(&Vec::<PathBuf>::new()), "[]");
        for text in [shown(&batch), shown(&paths), shown(&r)] {
            serde_json::from_str::<serde_json::Value>(&text).unwrap();
        }
    }

    #[test]
    fn str_fields_and_columns_are_json_strings_that_read_back() {
        let tricky = "é \n \" \\ \u{1} \u{1f} \u{7f} \u{2028} 日本 🦀";
        let mut out = Json::new();
        out.begin_object();
        out.key("s");
        text(&mut out, tricky);
        out.key("e");
        "".to_string().show(&mut out);
        out.end_object();
        assert_eq!(
            out.as_str(),
            "{\"s\":\"é \\n \\\" \\\\ \\u0001 \\u001f \u{7f} \u{2028} 日本 🦀\",\"e\":\"\"}"
        );
        let json: serde_json::Value = serde_json::from_str(out.as_str()).unwrap();
        assert_eq!(json["s"], tricky);
        assert_eq!(json["e"], "");

        let rows = ["é", "\n", "\"", "\u{1}", ""];
        let mut b = <String as Batchable>::builder(rows.len());
        for r in rows {
            b.push(r.to_string()).unwrap();
        }
        let column = shown(&b.finish());
        assert_eq!(column, r#"["é","\n","\"","\u0001",""]"#);
        let json: serde_json::Value = serde_json::from_str(&column).unwrap();
        assert_eq!(json, serde_json::json!(rows));
        assert_eq!(shown(&<String as Batchable>::builder(0).finish()), "[]");
    }

    #[test]
    fn strings_escape_quotes_and_control_characters() {
        let mut s = String::new();
        write_str(&mut s, "a\"\\\u{1}\té");
        assert_eq!(s, r#""a\"\\\u0001\té""#);
    }
}
