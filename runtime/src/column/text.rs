//! [`Text`] columns for `String` fields (the `str` type of a pipeline): the strings'
//! UTF-8 bytes end to end plus offsets, batched as ragged bytes.
//!
//! A padded batch of strings is the same column: strings are not padded (as a `bytes`
//! field in a `padded_batch` is not), so `String`'s padding is `()`.

use std::mem::size_of;

use super::{Batchable, ColumnBuilder, ColumnError, Columns, Element, Ragged, RaggedBuilder};
use crate::error::{Error, Result};

/// A column of `n` strings: their UTF-8 bytes end to end, and `n + 1` offsets into them
/// (row `i` is `values[offsets[i]..offsets[i + 1]]`), a [`Ragged<u8>`] whose every row
/// is valid UTF-8.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    bytes: Ragged<u8>,
}

impl Text {
    /// A column from its bytes and offsets. Errors unless the offsets start at 0, never
    /// decrease and end at `values.len()`, and every row is valid UTF-8.
    pub fn new(values: Vec<u8>, offsets: Vec<i64>) -> Result<Self> {
        let bytes = Ragged::new(values, offsets)?;
        for i in 0..bytes.len() {
            if let Err(e) = std::str::from_utf8(bytes.row_values(i)) {
                return Err(Error::Invalid(format!("text column: row {i} is not UTF-8: {e}")));
            }
        }
        Ok(Text { bytes })
    }

    /// The bytes of every row, end to end.
    pub fn values(&self) -> &[u8] {
        self.bytes.values()
    }

    /// The `n + 1` offsets.
    pub fn offsets(&self) -> &[i64] {
        self.bytes.offsets()
    }

    /// The bytes and the offsets, without copying.
    pub fn into_parts(self) -> (Vec<u8>, Vec<i64>) {
        self.bytes.into_parts()
    }

    /// The column as ragged bytes, without copying.
    pub fn into_ragged(self) -> Ragged<u8> {
        self.bytes
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Row `i` (`i < len()`, or this panics like slice indexing).
    pub fn row_str(&self, i: usize) -> &str {
        std::str::from_utf8(self.bytes.row_values(i)).expect("every row of a text column is UTF-8")
    }

    /// The rows in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.row_str(i))
    }
}

impl Element for Text {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() - size_of::<Ragged<u8>>() + self.bytes.byte_size()
    }
}

impl Columns for Text {
    type Row = String;

    fn num_rows(&self) -> Result<usize, ColumnError> {
        Ok(self.len())
    }

    #[inline]
    fn row(&self, i: usize) -> String {
        self.row_str(i).to_string()
    }
}

/// Builds a [`Text`] column.
#[derive(Debug)]
pub struct TextBuilder {
    bytes: RaggedBuilder<u8>,
}

impl ColumnBuilder for TextBuilder {
    type Item = String;
    type Columns = Text;

    #[inline]
    fn push(&mut self, x: String) -> Result<(), ColumnError> {
        self.bytes.push(x.into_bytes())
    }

    fn finish(self) -> Text {
        // Every row pushed was a whole `String`: each is UTF-8.
        Text { bytes: self.bytes.finish() }
    }
}

/// A `str` field: a plain batch and a padded one are both a [`Text`] column.
impl Batchable for String {
    type Columns = Text;
    type Builder = TextBuilder;
    type Padding = ();
    type Padded = Text;
    type PaddedBuilder = TextBuilder;

    fn builder(capacity: usize) -> TextBuilder {
        TextBuilder { bytes: <Vec<u8> as Batchable>::builder(capacity) }
    }

    fn padded_builder(capacity: usize, _: &()) -> TextBuilder {
        Self::builder(capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Dataset, from_vec};

    fn strings() -> Vec<String> {
        ["héllo", "", "a\n\"b\"", "\u{1}", "日本語"].map(String::from).to_vec()
    }

    #[test]
    fn batches_as_ragged_bytes_and_rows_come_back() {
        let mut b = String::builder(5);
        for s in strings() {
            b.push(s).unwrap();
        }
        let col = b.finish();
        assert_eq!(col.len(), 5);
        assert_eq!(col.num_rows(), Ok(5));
        assert_eq!(col.values(), strings().concat().as_bytes());
        assert_eq!(col.offsets(), [0, 6, 6, 11, 12, 21]);
        let (values, offsets) = col.clone().into_parts();
        assert_eq!(values, strings().concat().into_bytes());
        assert_eq!(offsets, vec![0, 6, 6, 11, 12, 21]);
        assert_eq!((0..5).map(|i| col.row(i)).collect::<Vec<_>>(), strings());
        assert_eq!(col.iter().collect::<Vec<_>>(), strings());
        assert_eq!(Text::new(values, offsets).unwrap(), col);
        assert!(col.byte_size() >= 21 + 6 * 8);
    }

    #[test]
    fn new_checks_offsets_and_utf8() {
        assert!(Text::new(b"ab".to_vec(), vec![0, 1, 2]).is_ok());
        assert!(Text::new(b"ab".to_vec(), vec![0, 3]).is_err());
        let e = Text::new("é".as_bytes().to_vec(), vec![0, 1, 2]).unwrap_err();
        assert!(e.to_string().contains("row 0 is not UTF-8"), "{e}");
    }

    #[test]
    fn batch_and_unbatch_round_trip() {
        let ds = from_vec(strings()).batch(2, false).unbatch();
        let got: Vec<String> = ds.stream().unwrap().map(|x| x.unwrap()).collect();
        assert_eq!(got, strings());
        let padded = from_vec(strings()).padded_batch(3, false, ());
        let batches: Vec<Text> = padded.stream().unwrap().map(|x| x.unwrap()).collect();
        assert_eq!(batches.iter().map(Text::len).collect::<Vec<_>>(), [3, 2]);
        assert_eq!(batches[1].row(1), "日本語");
    }
}
