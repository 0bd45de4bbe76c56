//! What generated code calls on the records of the text sources
//! ([`crate::text`]): a line as text or bytes, and a CSV row's columns parsed into the
//! schema's types ([`FromCsv`]). Every error names the file and line of the record
//! (`path:LINE: ...`), so generated code does not wrap them with
//! [`located`](super::located).
//!
//! Values follow TensorFlow's `CsvDataset` where it has a rule: numbers may have ASCII
//! whitespace around them (its `safe_strto32`/`safe_strtof` skip it), text may not (it is
//! kept as is); an empty field takes the column's default, or is an error when it has
//! none, whatever the type (an empty string too).

use std::num::IntErrorKind;

use crate::error::BoxError;
use crate::stage::{Origin, Record, Unit};

/// The columns of a CSV row record, in schema order: `(csv column from 0, value)`.
/// Stops at the end of the record, or where it is not a CSV row's encoding.
pub fn csv_columns(record: &[u8]) -> CsvColumns<'_> {
    CsvColumns { rest: record }
}

/// Column `i` (schema order) of a CSV row record: `(csv column from 0, value)`, or `None`
/// when the record has fewer columns.
pub fn csv_column(record: &[u8], i: usize) -> Option<(u32, &[u8])> {
    csv_columns(record).nth(i)
}

/// See [`csv_columns`].
#[derive(Debug, Clone)]
pub struct CsvColumns<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for CsvColumns<'a> {
    type Item = (u32, &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<(u32, &'a [u8])> {
        let (head, rest) = self.rest.split_first_chunk::<8>()?;
        let column = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) as usize;
        if rest.len() < len {
            self.rest = &[];
            return None;
        }
        let (value, rest) = rest.split_at(len);
        self.rest = rest;
        Some((column, value))
    }
}

/// A CSV field's text as a value of a schema type. The error says what was expected
/// (`` `abc` is not an i64 ``); [`csv_value`] adds where.
pub trait FromCsv: Sized {
    /// Parses a field's text (unquoted, unescaped, never empty: an empty field takes
    /// the column's default before this is called).
    fn from_csv(text: &[u8]) -> Result<Self, String>;
}

/// `text` for a message: as UTF-8 (invalid bytes replaced), cut after 40 characters.
fn shown(text: &[u8]) -> String {
    const MAX: usize = 40;
    let s = String::from_utf8_lossy(text);
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.into_owned(),
    }
}

macro_rules! from_csv_int {
    ($($t:ty => $what:literal),* $(,)?) => {$(
        /// Decimal, with an optional sign (`-`, or `+`) and ASCII whitespace around.
        impl FromCsv for $t {
            fn from_csv(text: &[u8]) -> Result<Self, String> {
                match std::str::from_utf8(text.trim_ascii()).map(str::parse::<$t>) {
                    Ok(Ok(v)) => Ok(v),
                    Ok(Err(e)) if matches!(e.kind(), IntErrorKind::PosOverflow | IntErrorKind::NegOverflow) => {
                        Err(format!("`{}` is not {} (out of range)", shown(text), $what))
                    }
                    _ => Err(format!("`{}` is not {}", shown(text), $what)),
                }
            }
        }
    )*};
}

from_csv_int!(i32 => "an i32", u32 => "a u32", i64 => "an i64", u64 => "a u64");

macro_rules! from_csv_float {
    ($($t:ty => $what:literal),* $(,)?) => {$(
        /// Decimal or scientific notation (`1.5`, `-2e-3`, `.5`), `inf`, `infinity` and
        /// `nan` in any case, with an optional sign and ASCII whitespace around; rounded
        /// correctly to the type (no detour through `f64` for `f32`). Not hexadecimal,
        /// which TensorFlow's parser also takes.
        impl FromCsv for $t {
            fn from_csv(text: &[u8]) -> Result<Self, String> {
                match std::str::from_utf8(text.trim_ascii()).map(str::parse::<$t>) {
                    Ok(Ok(v)) => Ok(v),
                    _ => Err(format!("`{}` is not {}", shown(text), $what)),
                }
            }
        }
    )*};
}

from_csv_float!(f32 => "an f32", f64 => "an f64");

/// `true` or `false` in any case, or `1` or `0`, with ASCII whitespace around
/// (TensorFlow's `CsvDataset` has no boolean columns).
impl FromCsv for bool {
    fn from_csv(text: &[u8]) -> Result<Self, String> {
        match text.trim_ascii() {
            t if t.eq_ignore_ascii_case(b"true") || t == b"1" => Ok(true),
            t if t.eq_ignore_ascii_case(b"false") || t == b"0" => Ok(false),
            _ => Err(format!("`{}` is not a bool (true, false, 1 or 0)", shown(text))),
        }
    }
}

/// The text as is (no trimming), checked as UTF-8.
impl FromCsv for String {
    fn from_csv(text: &[u8]) -> Result<Self, String> {
        match std::str::from_utf8(text) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(not_utf8(text, e.valid_up_to())),
        }
    }
}

/// The bytes as is.
impl FromCsv for Vec<u8> {
    fn from_csv(text: &[u8]) -> Result<Self, String> {
        Ok(text.to_vec())
    }
}

/// `not UTF-8 (byte 0xff at character N)`, for `text` valid up to byte `valid`.
fn not_utf8(text: &[u8], valid: usize) -> String {
    format!("not UTF-8 (byte {:#04x} at character {})", text[valid], character(text, valid))
}

/// The character (from 1) that byte `at` of `text` starts, `text[..at]` being UTF-8.
fn character(text: &[u8], at: usize) -> usize {
    std::str::from_utf8(&text[..at]).map_or(at, |s| s.chars().count()) + 1
}

/// Column `i` (schema order) of a CSV row record as a `T`: an empty value is `default`,
/// or an error without one. Errors name where:
/// `path:LINE: column C (`name`): `abc` is not an i64` (C: the CSV column, from 1).
pub fn csv_value<T: FromCsv>(
    record: &Record,
    i: usize,
    name: &str,
    default: Option<T>,
) -> Result<T, BoxError> {
    csv_field(record, i, name, default).map_err(|e| record.origin().name_in(e).into())
}

/// [`csv_value`] on the row's bytes alone, for generated code (whose stage prefixes the
/// record's `path:LINE: `): `column C (`name`): `abc` is not an i64`.
pub fn csv_field<T: FromCsv>(row: &[u8], i: usize, name: &str, default: Option<T>) -> Result<T, String> {
    let Some((c, text)) = csv_column(row, i) else {
        return Err(format!("column `{name}`: the record has no column {} (not a row of a CSV file)", i + 1));
    };
    let column = u64::from(c) + 1;
    if text.is_empty() {
        return default.ok_or_else(|| format!("column {column} (`{name}`): empty, and it has no default"));
    }
    T::from_csv(text).map_err(|e| format!("column {column} (`{name}`): {e}"))
}

/// A line record as text: `path:LINE:COL: not UTF-8 (byte 0xff)` where it is not UTF-8
/// (COL: the character, from 1).
pub fn line_str(record: &Record) -> Result<String, BoxError> {
    match std::str::from_utf8(record) {
        Ok(s) => Ok(s.to_owned()),
        Err(e) => {
            let at = e.valid_up_to();
            let message = format!("not UTF-8 (byte {:#04x})", record[at]);
            Err(at_column(record.origin(), character(record, at), message).into())
        }
    }
}

/// [`line_str`] on the line's bytes alone, for generated code (whose stage prefixes the
/// record's `path:LINE: `): `character C: not UTF-8 (byte 0xff)`.
pub fn line_text(line: &[u8]) -> Result<String, String> {
    match std::str::from_utf8(line) {
        Ok(s) => Ok(s.to_owned()),
        Err(e) => {
            let at = e.valid_up_to();
            Err(format!("character {}: not UTF-8 (byte {:#04x})", character(line, at), line[at]))
        }
    }
}

/// A line record's bytes.
pub fn line_bytes(record: &Record) -> Vec<u8> {
    record.to_vec()
}

/// `message` at character `column` of a record: `path:LINE:COL: ` for a line.
fn at_column(origin: Origin, column: usize, message: String) -> String {
    if origin.is_known() && origin.unit == Unit::Line {
        format!("{origin}:{column}: {message}")
    } else {
        origin.name_in(format!("character {column}: {message}"))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::stage::FileId;
    use crate::text::testing::{read, write};
    use crate::text::{CsvOptions, csv_file};

    fn ok<T: FromCsv>(text: &str) -> T {
        T::from_csv(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn err<T: FromCsv + std::fmt::Debug>(text: &[u8]) -> String {
        T::from_csv(text).unwrap_err()
    }

    #[test]
    fn integers() {
        assert_eq!(ok::<i32>("-2147483648"), i32::MIN);
        assert_eq!(ok::<i32>(" +17\t"), 17, "a sign and whitespace around, as TensorFlow");
        assert_eq!(ok::<i64>("9223372036854775807"), i64::MAX);
        assert_eq!(ok::<u32>("4294967295"), u32::MAX);
        assert_eq!(ok::<u64>("007"), 7);
        assert_eq!(err::<i64>(b"abc"), "`abc` is not an i64");
        assert_eq!(err::<i32>(b"1.0"), "`1.0` is not an i32");
        assert_eq!(err::<i32>(b"1 2"), "`1 2` is not an i32");
        assert_eq!(err::<i32>(b"2147483648"), "`2147483648` is not an i32 (out of range)");
        assert_eq!(err::<u32>(b"-1"), "`-1` is not a u32");
        assert_eq!(err::<u64>(b"18446744073709551616"), "`18446744073709551616` is not a u64 (out of range)");
        assert_eq!(err::<i64>(b"\xff"), "`\u{fffd}` is not an i64");
        assert_eq!(err::<i64>(&[b'x'; 50]), format!("`{}…` is not an i64", "x".repeat(40)));
    }

    #[test]
    fn floats() {
        assert_eq!(ok::<f64>(" 1.5e3 "), 1500.0);
        assert_eq!(ok::<f64>("-.25"), -0.25);
        assert_eq!(ok::<f32>("0.1"), 0.1f32, "rounded once, to f32");
        assert_eq!(ok::<f32>("16777217"), 16777216.0);
        assert!(ok::<f64>("nan").is_nan() && ok::<f32>("NaN").is_nan());
        assert_eq!(ok::<f64>("-inf"), f64::NEG_INFINITY);
        assert_eq!(ok::<f32>("Infinity"), f32::INFINITY);
        assert_eq!(err::<f32>(b"1,5"), "`1,5` is not an f32");
        assert_eq!(err::<f64>(b"0x1p3"), "`0x1p3` is not an f64");
    }

    #[test]
    fn bools_strings_and_bytes() {
        assert!(ok::<bool>("TRUE") && ok::<bool>(" 1") && !ok::<bool>("false") && !ok::<bool>("0"));
        assert_eq!(err::<bool>(b"yes"), "`yes` is not a bool (true, false, 1 or 0)");
        assert_eq!(ok::<String>(" a b "), " a b ", "text is not trimmed");
        assert_eq!(err::<String>(b"ab\xffc"), "not UTF-8 (byte 0xff at character 3)");
        assert_eq!(err::<String>(b"\xc3\xa9\x00\xc2"), "not UTF-8 (byte 0xc2 at character 3)");
        assert_eq!(ok::<Vec<u8>>("\"q"), b"\"q");
        assert_eq!(Vec::<u8>::from_csv(b"\xff").unwrap(), [0xff]);
    }

    #[test]
    fn columns_decode_and_stop_at_bad_encoding() {
        let mut rec = Vec::new();
        for (c, v) in [(2u32, &b"xy"[..]), (0, b"")] {
            rec.extend_from_slice(&c.to_le_bytes());
            rec.extend_from_slice(&(v.len() as u32).to_le_bytes());
            rec.extend_from_slice(v);
        }
        assert_eq!(csv_columns(&rec).collect::<Vec<_>>(), [(2, &b"xy"[..]), (0, &b""[..])]);
        assert_eq!(csv_column(&rec, 1), Some((0, &b""[..])));
        assert_eq!(csv_column(&rec, 2), None);
        assert_eq!(csv_columns(&rec[..9]).count(), 0, "a cut record");
        assert_eq!(csv_columns(b"").count(), 0);
    }

    #[test]
    fn values_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "v.csv", b"id,age,name\n1,,\"\"\n2,abc,\"B\"\n");
        let columns = ["name", "age"].iter().map(|c| c.to_string()).collect();
        let records =
            read(&csv_file(&path, CsvOptions { header: true, columns, ..CsvOptions::default() }), 0).unwrap();
        let p = path.display();
        // Empty values take the default, or fail without one.
        assert_eq!(csv_value::<i64>(&records[0], 1, "age", Some(-1)).unwrap(), -1);
        assert_eq!(csv_value::<String>(&records[0], 0, "name", Some("?".into())).unwrap(), "?");
        assert_eq!(
            csv_value::<i64>(&records[0], 1, "age", None).unwrap_err().to_string(),
            format!("{p}:2: column 2 (`age`): empty, and it has no default")
        );
        assert_eq!(
            csv_value::<String>(&records[0], 0, "name", None).unwrap_err().to_string(),
            format!("{p}:2: column 3 (`name`): empty, and it has no default")
        );
        assert_eq!(csv_value::<String>(&records[1], 0, "name", None).unwrap(), "B");
        assert_eq!(
            csv_value::<i64>(&records[1], 1, "age", Some(0)).unwrap_err().to_string(),
            format!("{p}:3: column 2 (`age`): `abc` is not an i64")
        );
        assert_eq!(
            csv_value::<i64>(&records[1], 2, "x", None).unwrap_err().to_string(),
            format!("{p}:3: column `x`: the record has no column 3 (not a row of a CSV file)")
        );
        let unknown = Record::from(b"\x00\x00\x00\x00\x01\x00\x00\x00z".to_vec());
        assert_eq!(
            csv_value::<i32>(&unknown, 0, "n", None).unwrap_err().to_string(),
            "column 1 (`n`): `z` is not an i32"
        );
    }

    #[test]
    fn lines_as_text() {
        let file = FileId::of(Path::new("/data/l.txt"));
        let good = Record::new("héllo".into(), Origin::line(file, 4));
        assert_eq!(line_str(&good).unwrap(), "héllo");
        assert_eq!(line_bytes(&good), "héllo".as_bytes());
        let bad = Record::new(b"h\xc3\xa9l\xfflo".to_vec(), Origin::line(file, 4));
        assert_eq!(line_str(&bad).unwrap_err().to_string(), "/data/l.txt:5:4: not UTF-8 (byte 0xff)");
        assert_eq!(line_bytes(&bad), b"h\xc3\xa9l\xfflo");
        let made = Record::from(b"\xfe".to_vec());
        assert_eq!(line_str(&made).unwrap_err().to_string(), "character 1: not UTF-8 (byte 0xfe)");
    }
}
