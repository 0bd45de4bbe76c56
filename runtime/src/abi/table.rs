//! One row of a table file (a Parquet row, a WebDataset sample) as a
//! [`Record`](crate::stage::Record): how the reader writes it and how a parse
//! (`parse_parquet`: generated code, or the engine) reads it back; and the columns a
//! reader reads ([`TableColumn`]).
//!
//! The reader has already checked each column against the schema and converted its
//! values to the field's type, so the encoding holds plain little-endian values:
//!
//! ```text
//! u32 row group (0 for a WebDataset sample) | per column, in the reader's column order:
//!     u32 n | n values of the field's type, little-endian
//!           | (str, bytes: n bytes of the one value)
//!     u32::MAX (NULL): a null, which takes the schema default
//!     u32::MAX - 1 (ERROR) | u32 len | len bytes: why the reader could not make the value
//! ```
//!
//! [`RowReader`] walks the columns in that order, each read once; every length is
//! checked against what is left, so a record that is not such a row (or is cut short)
//! is an error, never a panic.

use crate::column::Tensor;

/// The `n` of a null value.
pub const NULL: u32 = u32::MAX;
/// The `n` of a value the reader could not make: a `u32` length and the message follow
/// (a WebDataset sample without a declared member, a `cls` that is no integer), so that
/// the parse fails on it, and `on_error: skip` counts it, as on any bad value.
pub const ERROR: u32 = u32::MAX - 1;

/// A number held in a row: its little-endian bytes.
pub trait RowValue: crate::column::IntoBuffer + Copy + 'static {
    /// Bytes per value.
    const SIZE: usize;
    /// The type's name, for errors.
    const NAME: &'static str;
    /// The value of `b` (`SIZE` bytes).
    fn from_le(b: &[u8]) -> Self;
    /// Appends the value's bytes.
    fn put_le(self, out: &mut Vec<u8>);
}

macro_rules! row_value {
    ($($t:ty),*) => {$(
        impl RowValue for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            const NAME: &'static str = stringify!($t);
            #[inline]
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            #[inline]
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
row_value!(u8, i32, u32, i64, u64, f32, f64);

impl RowValue for bool {
    const SIZE: usize = 1;
    const NAME: &'static str = "bool";
    #[inline]
    fn from_le(b: &[u8]) -> Self {
        b[0] != 0
    }
    #[inline]
    fn put_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

/// The value type of a schema field read from a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// `bool`.
    Bool,
    /// `u8`.
    U8,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `str`: UTF-8 text.
    Str,
    /// `bytes`.
    Bytes,
}

/// How many values a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnShape {
    /// One.
    Scalar,
    /// Any number (`T[]`).
    List,
    /// Exactly this many (`T[a, b]`: `a × b`).
    Fixed(usize),
}

/// A column the reader reads: the schema field's name, type and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumn {
    /// The field's (and column's) name.
    pub name: String,
    /// Its value type.
    pub dtype: ColumnType,
    /// Its shape.
    pub shape: ColumnShape,
    /// Whether the schema gives it a default (a null takes it instead of failing).
    pub has_default: bool,
}

impl ColumnType {
    /// The type's name in a schema.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Bool => "bool",
            ColumnType::U8 => "u8",
            ColumnType::I32 => "i32",
            ColumnType::U32 => "u32",
            ColumnType::I64 => "i64",
            ColumnType::U64 => "u64",
            ColumnType::F32 => "f32",
            ColumnType::F64 => "f64",
            ColumnType::Str => "str",
            ColumnType::Bytes => "bytes",
        }
    }
}

/// Reads the columns of one row in order (see the [module](self)). Errors name the
/// column and the row group; the stage adds the file and the row.
#[derive(Debug)]
pub struct RowReader<'a> {
    rest: &'a [u8],
    group: u32,
}

impl<'a> RowReader<'a> {
    /// The reader of `row`, at its first column.
    pub fn new(row: &'a [u8]) -> Result<RowReader<'a>, String> {
        let mut r = RowReader { rest: row, group: 0 };
        r.group = r.u32().ok_or("not a row of a table file (shorter than its header)")?;
        Ok(r)
    }

    /// The row group the row is in.
    pub fn row_group(&self) -> u32 {
        self.group
    }

    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.rest.split_first_chunk::<4>()?;
        self.rest = rest;
        Some(u32::from_le_bytes(*head))
    }

    fn error(&self, name: &str, message: impl std::fmt::Display) -> String {
        format!("column `{name}` (row group {}): {message}", self.group)
    }

    /// The next column's bytes and value count (`None`: null).
    fn next_column(&mut self, name: &str, size: usize) -> Result<Option<(&'a [u8], usize)>, String> {
        let n = self.u32().ok_or_else(|| self.error(name, "the row ends before this column"))?;
        if n == NULL {
            return Ok(None);
        }
        if n == ERROR {
            let len = self.u32().ok_or_else(|| self.error(name, "the row ends inside an error"))? as usize;
            let message =
                self.rest.get(..len).ok_or_else(|| self.error(name, "the row ends inside an error"))?;
            return Err(format!("column `{name}`: {}", String::from_utf8_lossy(message)));
        }
        let n = n as usize;
        let len = n.checked_mul(size).filter(|&l| l <= self.rest.len());
        let Some(len) = len else {
            return Err(self.error(name, format!("the row ends inside the column's {n} values")));
        };
        let (body, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(Some((body, n)))
    }

    fn values<T: RowValue>(body: &[u8]) -> impl Iterator<Item = T> + '_ {
        body.chunks_exact(T::SIZE).map(T::from_le)
    }

    /// The next column as one value: a null takes `default`.
    pub fn scalar<T: RowValue>(&mut self, name: &str, default: Option<T>) -> Result<T, String> {
        match self.next_column(name, T::SIZE)? {
            None => default.ok_or_else(|| self.error(name, "null, and the schema gives no default")),
            Some((body, 1)) => Ok(T::from_le(body)),
            Some((_, n)) => Err(self.error(name, format!("{n} values where the schema has one {}", T::NAME))),
        }
    }

    /// The next column as a list of any length (`T[]`): a null takes `default` (or is
    /// an error without one).
    pub fn list<T: RowValue>(&mut self, name: &str, default: Option<&[T]>) -> Result<Vec<T>, String> {
        match self.next_column(name, T::SIZE)? {
            None => match default {
                Some(d) => Ok(d.to_vec()),
                None => Err(self.error(name, "null, and the schema gives no default")),
            },
            Some((body, _)) => Ok(Self::values(body).collect()),
        }
    }

    /// The next column as a tensor of `dims` (`T[a, b]`): exactly their product of
    /// values, or a null and a default of that many.
    pub fn tensor<T: RowValue>(
        &mut self,
        name: &str,
        dims: &[usize],
        default: Option<&[T]>,
    ) -> Result<Tensor<T>, String> {
        let want: usize = dims.iter().product();
        let values: Vec<T> = match self.next_column(name, T::SIZE)? {
            None => match default {
                Some(d) if d.len() == want => d.to_vec(),
                Some(d) if d.len() == 1 => vec![d[0]; want],
                Some(d) => {
                    return Err(
                        self.error(name, format!("null, and the default has {} values, not {want}", d.len()))
                    );
                }
                None => return Err(self.error(name, "null, and the schema gives no default")),
            },
            Some((_, n)) if n != want => {
                return Err(self.error(name, format!("{n} values, expected {want} (shape {dims:?})")));
            }
            Some((body, _)) => Self::values(body).collect(),
        };
        Tensor::new(dims.to_vec(), values).map_err(|e| self.error(name, e))
    }

    /// The next column as one byte string.
    pub fn bytes(&mut self, name: &str, default: Option<&[u8]>) -> Result<Vec<u8>, String> {
        match self.next_column(name, 1)? {
            None => default
                .map(<[u8]>::to_vec)
                .ok_or_else(|| self.error(name, "null, and the schema gives no default")),
            Some((body, _)) => Ok(body.to_vec()),
        }
    }

    /// The next column as one string (checked to be UTF-8).
    pub fn text(&mut self, name: &str, default: Option<&str>) -> Result<String, String> {
        match self.next_column(name, 1)? {
            None => default
                .map(str::to_owned)
                .ok_or_else(|| self.error(name, "null, and the schema gives no default")),
            Some((body, _)) => match std::str::from_utf8(body) {
                Ok(s) => Ok(s.to_owned()),
                Err(e) => Err(self.error(name, format!("not UTF-8 (byte {})", e.valid_up_to()))),
            },
        }
    }
}

/// Writes rows in the encoding [`RowReader`] reads.
#[derive(Debug, Default)]
pub struct RowWriter {
    out: Vec<u8>,
}

impl RowWriter {
    /// A row of row group `group`.
    pub fn new(group: u32, capacity: usize) -> RowWriter {
        let mut out = Vec::with_capacity(capacity + 4);
        out.extend_from_slice(&group.to_le_bytes());
        RowWriter { out }
    }

    /// A null column.
    pub fn null(&mut self) {
        self.out.extend_from_slice(&NULL.to_le_bytes());
    }

    /// A column the reader could not make, and why (the parse fails with `message`).
    pub fn error(&mut self, message: &str) {
        let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
        self.out.extend_from_slice(&ERROR.to_le_bytes());
        self.out.extend_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(&message.as_bytes()[..len as usize]);
    }

    /// A column of `values`; `Err` when there are too many for one row (2^32 - 1).
    pub fn values<T: RowValue>(&mut self, values: impl ExactSizeIterator<Item = T>) -> Result<(), String> {
        let n = u32::try_from(values.len())
            .ok()
            .filter(|&n| n < ERROR)
            .ok_or("more than 2^32 - 3 values in one row")?;
        self.out.extend_from_slice(&n.to_le_bytes());
        self.out.reserve(values.len() * T::SIZE);
        for v in values {
            v.put_le(&mut self.out);
        }
        Ok(())
    }

    /// A column of one value given as its little-endian bytes (a `RowValue`'s `put_le`
    /// form: the Parquet reader's plain columns).
    pub fn raw_scalar(&mut self, value: &[u8]) {
        self.out.extend_from_slice(&1u32.to_le_bytes());
        self.out.extend_from_slice(value);
    }

    /// A column of `n` values given as their little-endian bytes (`n` × the type's
    /// size: a `.npy` array's values).
    pub fn raw_values(&mut self, n: usize, le_bytes: &[u8]) -> Result<(), String> {
        let n = u32::try_from(n).ok().filter(|&n| n < ERROR).ok_or("more than 2^32 - 3 values in one row")?;
        self.out.extend_from_slice(&n.to_le_bytes());
        self.out.extend_from_slice(le_bytes);
        Ok(())
    }

    /// A column holding one byte string (or string).
    pub fn bytes(&mut self, b: &[u8]) -> Result<(), String> {
        let n = u32::try_from(b.len()).ok().filter(|&n| n < ERROR).ok_or("a value longer than 4 GiB")?;
        self.out.extend_from_slice(&n.to_le_bytes());
        self.out.extend_from_slice(b);
        Ok(())
    }

    /// The row's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Vec<u8> {
        let mut w = RowWriter::new(3, 0);
        w.values([1.5f32].into_iter()).unwrap();
        w.null();
        w.values([1i64, 2, 3].into_iter()).unwrap();
        w.bytes(b"caf\xc3\xa9").unwrap();
        w.values([1u8, 2, 3, 4].into_iter()).unwrap();
        w.finish()
    }

    #[test]
    fn a_row_reads_back_column_by_column() {
        let bytes = row();
        let mut r = RowReader::new(&bytes).unwrap();
        assert_eq!(r.row_group(), 3);
        assert_eq!(r.scalar::<f32>("x", None).unwrap(), 1.5);
        assert_eq!(r.scalar::<i64>("y", Some(-1)).unwrap(), -1);
        assert_eq!(r.list::<i64>("z", None).unwrap(), vec![1, 2, 3]);
        assert_eq!(r.text("s", None).unwrap(), "café");
        let t = r.tensor::<u8>("t", &[2, 2], None).unwrap();
        assert_eq!(t.shape(), &[2, 2]);
    }

    #[test]
    fn nulls_without_defaults_and_wrong_counts_name_the_column_and_group() {
        let bytes = row();
        let mut r = RowReader::new(&bytes).unwrap();
        assert_eq!(r.list::<f32>("x", None).map(|v| v.len()).unwrap(), 1, "a list of one value is a list");
        assert_eq!(
            r.scalar::<i64>("y", None).unwrap_err(),
            "column `y` (row group 3): null, and the schema gives no default"
        );
        assert_eq!(
            r.scalar::<i64>("z", None).unwrap_err(),
            "column `z` (row group 3): 3 values where the schema has one i64"
        );
        r.bytes("s", None).unwrap();
        assert_eq!(
            r.tensor::<u8>("t", &[3], None).unwrap_err(),
            "column `t` (row group 3): 4 values, expected 3 (shape [3])"
        );
    }

    #[test]
    fn a_record_that_is_not_a_row_is_an_error() {
        assert!(RowReader::new(b"ab").is_err());
        let mut cut = row();
        cut.truncate(10);
        let mut r = RowReader::new(&cut).unwrap();
        assert!(r.scalar::<f32>("x", None).unwrap_err().contains("ends inside"));
        let mut huge = 0u32.to_le_bytes().to_vec();
        huge.extend_from_slice(&(u32::MAX - 1).to_le_bytes());
        let mut r = RowReader::new(&huge).unwrap();
        assert!(r.list::<f64>("x", None).is_err());
        assert!(r.text("s", None).is_err());
    }
}
