//! NumPy `.npy` arrays: [`write`] makes one (the WebDataset writer's list and tensor
//! fields), [`Array::parse`] reads one (the `webdataset(files)` source's list, tensor and
//! `.npy` scalar fields), as `numpy.save` and `numpy.load` do.
//!
//! The format (numpy's `format.py`): the magic `\x93NUMPY`, a major and a minor version
//! byte, the header's length (u16 LE in version 1, u32 LE in versions 2 and 3), then the
//! header, a Python dict literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`
//! padded with spaces and ended by a newline, then the values in C order. Read here:
//! versions 1 to 3, booleans and the numbers a schema can declare (`u8`, `i32`, `u32`,
//! `i64`, `u64`, `f32`, `f64`) in either byte order, C order. Anything else (Fortran order,
//! object or string arrays, a truncated file, bytes after the values) is an error that
//! says what the file holds.

use std::borrow::Cow;

use crate::abi::export::Nums;
use crate::abi::table::ColumnType;

/// The first six bytes of every `.npy` file.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// `values` of `dims` as a `.npy` file (format 1.0, C order, little-endian).
pub fn write(values: &Nums, dims: &[usize]) -> Vec<u8> {
    let descr = match values {
        Nums::U8(_) => "|u1",
        Nums::I8(_) => "|i1",
        Nums::U16(_) => "<u2",
        Nums::I16(_) => "<i2",
        Nums::U32(_) => "<u4",
        Nums::I32(_) => "<i4",
        Nums::U64(_) => "<u8",
        Nums::I64(_) => "<i8",
        Nums::F32(_) => "<f4",
        Nums::F64(_) => "<f8",
        Nums::Bool(_) => "|b1",
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {}, }}", show(dims));
    // Magic (6) + version (2) + length (2) + header, a multiple of 64 ending in '\n'.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + values.len() * 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(b"\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match values {
        Nums::U8(v) => out.extend_from_slice(v),
        Nums::I8(v) => le!(v),
        Nums::U16(v) => le!(v),
        Nums::I16(v) => le!(v),
        Nums::U32(v) => le!(v),
        Nums::I32(v) => le!(v),
        Nums::U64(v) => le!(v),
        Nums::I64(v) => le!(v),
        Nums::F32(v) => le!(v),
        Nums::F64(v) => le!(v),
        Nums::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
    }
    out
}

/// One parsed `.npy` array, borrowing its values from the file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Array<'a> {
    /// The header's `descr`, as written (`<f4`).
    pub descr: String,
    /// Its value type, when a schema can declare it.
    pub dtype: Option<ColumnType>,
    /// The dimensions (`[]` for a 0-d array: one value).
    pub shape: Vec<usize>,
    /// Whether the values are big-endian.
    big_endian: bool,
    /// The values' bytes, C order, in the file's byte order.
    data: &'a [u8],
}

impl<'a> Array<'a> {
    /// The array in `bytes` (a whole `.npy` file); `Err` says what is wrong with it.
    pub fn parse(bytes: &'a [u8]) -> Result<Array<'a>, String> {
        let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or("not a .npy file (no \\x93NUMPY magic)")?;
        let (&[major, _minor], rest) = rest.split_first_chunk::<2>().ok_or(TRUNCATED)?;
        let (len, rest) = match major {
            1 => rest.split_first_chunk::<2>().map(|(l, r)| (usize::from(u16::from_le_bytes(*l)), r)),
            2 | 3 => rest.split_first_chunk::<4>().map(|(l, r)| (u32::from_le_bytes(*l) as usize, r)),
            v => {
                return Err(format!(
                    "a .npy file of format version {v}, which this reader does not know (1 to 3)"
                ));
            }
        }
        .ok_or(TRUNCATED)?;
        if rest.len() < len {
            return Err(TRUNCATED.into());
        }
        let (header, data) = rest.split_at(len);
        let header = std::str::from_utf8(header).map_err(|_| "a .npy header that is not text")?;
        let Header { descr, fortran_order, shape } = Header::parse(header)?;
        if fortran_order && shape.len() > 1 {
            return Err(format!(
                "a .npy array in Fortran order (shape {}): save it in C order",
                show(&shape)
            ));
        }
        let (big_endian, code) = match descr.as_bytes().first() {
            Some(b'>') => (true, &descr[1..]),
            Some(b'<' | b'|' | b'=') => (false, &descr[1..]),
            _ => (false, descr.as_str()),
        };
        let dtype = match code {
            "b1" | "?" => Some(ColumnType::Bool),
            "u1" | "B" => Some(ColumnType::U8),
            "i4" => Some(ColumnType::I32),
            "u4" => Some(ColumnType::U32),
            "i8" => Some(ColumnType::I64),
            "u8" => Some(ColumnType::U64),
            "f4" => Some(ColumnType::F32),
            "f8" => Some(ColumnType::F64),
            _ => None,
        };
        let count =
            shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or("a .npy shape too large")?;
        if let Some(t) = dtype {
            let want = count.checked_mul(size(t)).ok_or("a .npy shape too large")?;
            if data.len() != want {
                return Err(format!(
                    "a .npy array of shape {} holds {want} bytes of values, the file {}",
                    show(&shape),
                    data.len()
                ));
            }
        }
        Ok(Array { descr, dtype, shape, big_endian, data })
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values' little-endian bytes (swapped when the file is big-endian).
    pub fn le_bytes(&self) -> Cow<'a, [u8]> {
        let width = self.dtype.map_or(1, size);
        if !self.big_endian || width == 1 {
            return Cow::Borrowed(self.data);
        }
        let mut out = self.data.to_vec();
        for v in out.chunks_exact_mut(width) {
            v.reverse();
        }
        Cow::Owned(out)
    }

    /// The shape as numpy prints it: `(2, 3)`, `(4,)`, `()`.
    pub fn shape_text(&self) -> String {
        show(&self.shape)
    }
}

const TRUNCATED: &str = "a .npy file cut short in its header";

fn size(t: ColumnType) -> usize {
    match t {
        ColumnType::Bool | ColumnType::U8 | ColumnType::Str | ColumnType::Bytes => 1,
        ColumnType::I32 | ColumnType::U32 | ColumnType::F32 => 4,
        ColumnType::I64 | ColumnType::U64 | ColumnType::F64 => 8,
    }
}

/// A shape as numpy writes and prints it: `(2, 3)`, `(4,)`, `()`.
fn show(shape: &[usize]) -> String {
    match shape {
        [d] => format!("({d},)"),
        d => format!("({})", d.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// The three keys of a header.
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl Header {
    /// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`: a Python dict literal
    /// of string keys whose values are a string, `True`/`False` or a tuple of integers.
    fn parse(text: &str) -> Result<Header, String> {
        let bad =
            || format!("a .npy header that is not a dict of descr, fortran_order and shape: {}", text.trim());
        let mut p = Lexer { s: text.trim() };
        p.eat('{').ok_or_else(bad)?;
        let (mut descr, mut fortran_order, mut shape) = (None, None, None);
        while p.eat('}').is_none() {
            let key = p.string().ok_or_else(bad)?;
            p.eat(':').ok_or_else(bad)?;
            match key {
                "descr" => descr = Some(p.string().ok_or_else(bad)?.to_owned()),
                "fortran_order" => fortran_order = Some(p.boolean().ok_or_else(bad)?),
                "shape" => shape = Some(p.tuple().ok_or_else(bad)?),
                _ => return Err(bad()),
            }
            if p.eat(',').is_none() {
                p.eat('}').ok_or_else(bad)?;
                break;
            }
        }
        if !p.s.is_empty() {
            return Err(bad());
        }
        match (descr, fortran_order, shape) {
            (Some(descr), Some(fortran_order), Some(shape)) => Ok(Header { descr, fortran_order, shape }),
            _ => Err(bad()),
        }
    }
}

/// The tokens of a header, whitespace skipped.
struct Lexer<'a> {
    s: &'a str,
}

impl<'a> Lexer<'a> {
    fn eat(&mut self, c: char) -> Option<()> {
        self.s = self.s.trim_start().strip_prefix(c)?;
        Some(())
    }

    fn string(&mut self) -> Option<&'a str> {
        let s = self.s.trim_start();
        let quote = s.chars().next().filter(|q| *q == '\'' || *q == '"')?;
        let end = s[1..].find(quote)?;
        self.s = &s[end + 2..];
        Some(&s[1..end + 1])
    }

    fn boolean(&mut self) -> Option<bool> {
        let s = self.s.trim_start();
        let (v, rest) =
            if let Some(r) = s.strip_prefix("True") { (true, r) } else { (false, s.strip_prefix("False")?) };
        self.s = rest;
        Some(v)
    }

    /// `()`, `(4,)`, `(2, 3)`: the integers of a tuple (a trailing comma allowed).
    fn tuple(&mut self) -> Option<Vec<usize>> {
        self.eat('(')?;
        let mut dims = Vec::new();
        loop {
            if self.eat(')').is_some() {
                return Some(dims);
            }
            let s = self.s.trim_start();
            let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            // A Python 2 long (`3L`) is written by old numpy versions.
            dims.push(s[..digits].parse().ok()?);
            self.s = s[digits..].strip_prefix('L').unwrap_or(&s[digits..]);
            if self.eat(',').is_none() {
                self.eat(')')?;
                return Some(dims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_aligned_and_hold_dtype_and_shape() {
        let out = write(&Nums::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), &[2, 3]);
        let len = u16::from_le_bytes([out[8], out[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        let header = std::str::from_utf8(&out[10..10 + len]).unwrap();
        assert_eq!(header.trim_end(), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
        assert_eq!(&out[10 + len..10 + len + 4], &1.0f32.to_le_bytes());
        assert_eq!(out.len(), 10 + len + 24);
        let list = write(&Nums::I64(vec![7]), &[1]);
        assert!(std::str::from_utf8(&list[10..74]).unwrap().contains("'shape': (1,)"));
    }

    #[test]
    fn what_write_writes_parses_back() {
        let cases = [
            (Nums::F32(vec![1.5, -2.0, 3.25, 4.0, 5.0, 6.0]), vec![2, 3], ColumnType::F32),
            (Nums::F64(vec![0.1]), vec![1], ColumnType::F64),
            (Nums::U8(vec![0, 255, 7]), vec![3], ColumnType::U8),
            (Nums::I32(vec![-1, 2]), vec![2, 1], ColumnType::I32),
            (Nums::U32(vec![]), vec![0], ColumnType::U32),
            (Nums::I64(vec![i64::MIN, i64::MAX]), vec![2], ColumnType::I64),
            (Nums::U64(vec![u64::MAX]), vec![1, 1, 1], ColumnType::U64),
            (Nums::Bool(vec![true, false]), vec![2], ColumnType::Bool),
        ];
        for (values, dims, dtype) in cases {
            let file = write(&values, &dims);
            let a = Array::parse(&file).unwrap_or_else(|e| panic!("{values:?}: {e}"));
            assert_eq!((a.dtype, &a.shape, a.len()), (Some(dtype), &dims, values.len()));
            // Little-endian already: the values are the file's last bytes, borrowed.
            assert!(matches!(a.le_bytes(), Cow::Borrowed(b) if file.ends_with(b)), "{values:?}");
        }
        let a = write(&Nums::F32(vec![1.5, -2.0]), &[2]);
        let v: Vec<f32> = Array::parse(&a)
            .unwrap()
            .le_bytes()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(v, [1.5, -2.0]);
    }

    fn file(version: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[version, 0]);
        if version == 1 {
            out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    /// Headers as numpy versions wrote them: `np.save` of a 0-d float64 (`()`), format 2.0,
    /// double quotes, a Python 2 long, big-endian values.
    #[test]
    fn headers_of_every_version_and_byte_order_parse() {
        let scalar =
            file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n", &2.5f64.to_le_bytes());
        let a = Array::parse(&scalar).unwrap();
        assert_eq!(
            (a.shape_text(), a.len(), a.le_bytes().as_ref()),
            ("()".into(), 1, &2.5f64.to_le_bytes()[..])
        );
        let v2 = file(2, "{\"descr\": \"|u1\", \"fortran_order\": False, \"shape\": (3L,)}   \n", &[1, 2, 3]);
        assert_eq!(Array::parse(&v2).unwrap().shape, [3]);
        let big = file(
            3,
            "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n",
            &[0, 0, 1, 2, 255, 255, 255, 254],
        );
        let a = Array::parse(&big).unwrap();
        let values: Vec<i32> =
            a.le_bytes().chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(values, [258, -2]);
        // Fortran order is C order for one dimension.
        let f1 = file(1, "{'descr': '<u4', 'fortran_order': True, 'shape': (1,), }\n", &[9, 0, 0, 0]);
        assert_eq!(Array::parse(&f1).unwrap().dtype, Some(ColumnType::U32));
    }

    #[test]
    fn bad_files_are_errors_that_say_what_they_hold() {
        let good = write(&Nums::F32(vec![1.0, 2.0]), &[2]);
        let err = |b: &[u8]| Array::parse(b).unwrap_err();
        assert_eq!(err(b"PK\x03\x04"), "not a .npy file (no \\x93NUMPY magic)");
        assert_eq!(err(&good[..9]), TRUNCATED);
        assert_eq!(err(&good[..40]), TRUNCATED);
        assert_eq!(
            err(&good[..good.len() - 1]),
            "a .npy array of shape (2,) holds 8 bytes of values, the file 7"
        );
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(err(&longer), "a .npy array of shape (2,) holds 8 bytes of values, the file 9");
        let mut v9 = good.clone();
        v9[6] = 9;
        assert_eq!(err(&v9), "a .npy file of format version 9, which this reader does not know (1 to 3)");
        let fortran = file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }\n", &[0; 8]);
        assert_eq!(err(&fortran), "a .npy array in Fortran order (shape (1, 2)): save it in C order");
        let strings = file(1, "{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }\n", &[0; 8]);
        let a = Array::parse(&strings).unwrap();
        assert_eq!((a.dtype, a.descr.as_str()), (None, "<U1"));
        for header in [
            "{'descr': '<f4', 'shape': (2,), }",
            "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
            "[1]",
        ] {
            let e = err(&file(1, header, &[0; 8]));
            assert!(
                e.starts_with("a .npy header that is not a dict of descr, fortran_order and shape"),
                "{header}: {e}"
            );
        }
        // Every prefix of a good file is an error, never a panic.
        for n in 0..good.len() {
            assert!(Array::parse(&good[..n]).is_err(), "{n}");
        }
    }
}
