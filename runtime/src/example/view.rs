//! A zero-copy walker over a serialized `tf.train.Example`: it reads the protobuf wire
//! format in place, allocates nothing, and hands out features as borrowed views.
//!
//! # Semantics
//!
//! The walker follows protobuf's merge rules, as prost (and TensorFlow's C++ parser)
//! apply them, so that it sees the same features a full decode would:
//!
//! - Several `features` fields in one `Example`, and several map entries, all count:
//!   [`ExampleView::entries`] yields every map entry in wire order. A later entry with
//!   the same name replaces an earlier one entirely ("last one wins", as for any
//!   protobuf map); [`ExampleView::get`] and the spec-driven parser apply that rule.
//! - Within one map entry, a repeated `key` field keeps the last key (each must be valid
//!   UTF-8), and repeated `value` fields merge, as embedded messages do.
//! - The `kind` oneof of a `Feature`: the last kind field seen decides the kind; list
//!   fields of that same kind that follow one another (with no other kind in between)
//!   concatenate, as protobuf merges repeated occurrences of a message field. A list of
//!   another kind seen earlier is discarded (but must still be well formed).
//! - Numeric lists may be packed, unpacked, or any mix of chunks; all chunks concatenate.
//! - Unknown fields are skipped by wire type at every level (groups included, with
//!   prost's recursion limit of 100), and a known field with the wrong wire type is an
//!   error, as in prost.
//!
//! Every read is bounds-checked: any input either walks or gives a [`WireError`] with
//! the byte offset where the walk stopped; nothing panics.

use std::fmt;

mod feature;
mod reader;
mod sequence;
mod values;
pub use feature::FeatureView;
use reader::{LEN, Reader};
pub use reader::{WireError, WireErrorKind};
pub use sequence::{ListEntries, ListEntry, SequenceView, Steps};
pub use values::{BytesIter, BytesValues, FloatIter, Floats, Int64Iter, Int64s};

/// prost's recursion budget at each level of an `Example` (`DecodeContext`'s limit of
/// 100, less one per nested message), used when skipping (possibly nested) groups.
const EXAMPLE_DEPTH: u32 = 100;
const FEATURES_DEPTH: u32 = 99;
const ENTRY_DEPTH: u32 = 98;
const FEATURE_DEPTH: u32 = 97;
const LIST_DEPTH: u32 = 96;

/// Field numbers of the `kind` oneof of `tf.train.Feature`.
const BYTES_LIST: u32 = 1;
const FLOAT_LIST: u32 = 2;
const INT64_LIST: u32 = 3;

/// A serialized `tf.train.Example`, walked lazily.
#[derive(Debug, Clone, Copy)]
pub struct ExampleView<'a> {
    bytes: &'a [u8],
}

impl<'a> ExampleView<'a> {
    /// A view of `bytes`; nothing is read until the view is walked.
    pub fn new(bytes: &'a [u8]) -> Self {
        ExampleView { bytes }
    }

    /// Every map entry of the example's features, in wire order, without looking into
    /// the feature values (only the entry's name and framing are checked). After an
    /// error the iterator ends.
    pub fn entries(&self) -> Entries<'a> {
        Entries { outer: Reader::new(self.bytes), inner: None, done: false }
    }

    /// Every feature, in wire order, with its values checked. Duplicate names appear
    /// as often as they are on the wire; the last one is the one that counts.
    pub fn features(&self) -> Features<'a> {
        Features { entries: self.entries() }
    }

    /// The feature named `name`: the last entry with that name, as protobuf's map
    /// semantics say. The whole record is walked, so a malformed record is an error
    /// even where the malformed part is another feature's framing.
    pub fn get(&self, name: &str) -> Result<Option<FeatureView<'a>>, WireError> {
        let mut found = None;
        for entry in self.entries() {
            let entry = entry?;
            if entry.name() == name {
                found = Some(entry);
            }
        }
        found.map(|e| e.feature()).transpose()
    }
}

/// One map entry of `Features`: a name and its not yet examined feature.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    name: &'a str,
    body: Reader<'a>,
    /// The `value` field's body when the entry has exactly one (the usual case).
    value: Option<Reader<'a>>,
}

impl fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("bytes", &(self.body.pos..self.body.end()))
            .finish()
    }
}

impl<'a> Entry<'a> {
    /// Scans an entry body for its key (the last one; every one must be valid UTF-8).
    #[inline]
    fn scan(body: Reader<'a>) -> Result<Self, WireError> {
        let mut r = body;
        let mut name = "";
        let mut value = None;
        let mut values = 0;
        while !r.at_end() {
            let (field, wire_type) = r.key()?;
            match field {
                1 => {
                    let key = r.expect_sub(field, wire_type)?;
                    name = utf8(key.rest()).ok_or_else(|| key.err(WireErrorKind::BadUtf8))?;
                }
                2 => {
                    value = Some(r.expect_sub(field, wire_type)?);
                    values += 1;
                }
                _ => r.skip(field, wire_type, ENTRY_DEPTH)?,
            }
        }
        Ok(Entry { name, body, value: if values == 1 { value } else { None } })
    }

    /// The feature's name (empty if the entry has no key, as protobuf defaults it).
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The byte range of the entry's body in the record.
    pub fn byte_range(&self) -> std::ops::Range<usize> {
        self.body.pos..self.body.end()
    }

    /// Examines the feature's value: finds its kind and checks and counts its values.
    pub fn feature(&self) -> Result<FeatureView<'a>, WireError> {
        FeatureView::from_entry(self.body, self.value)
    }

    /// The packed values of the usual encoding, without examining anything else: the
    /// entry's single `value` is a `Feature` holding only list field `list_field`
    /// (`2` float_list, `3` int64_list), which holds only one packed `value` field.
    /// `None` for any other encoding (which [`feature`](Entry::feature) handles).
    #[inline]
    pub fn packed(&self, list_field: u32) -> Option<&'a [u8]> {
        // The usual bytes, read straight off the slice: the list's one-byte key and
        // length (the rest of the feature), the packed field's key `0x0A` and length
        // (the rest of the list). Anything else, a longer encoding of the same keys
        // included, is left to the general path.
        let rest = self.value?.rest();
        let (&key, rest) = rest.split_first()?;
        if u32::from(key) != (list_field << 3) | u32::from(LEN) {
            return None;
        }
        let rest = whole(rest)?;
        let (&key, rest) = rest.split_first()?;
        if key != (1 << 3) | LEN {
            return None;
        }
        whole(rest)
    }

    /// The byte range in the record of the entry's `value` body, when it has exactly one
    /// `value` field (which the walk of the entries skips without reading it).
    pub(crate) fn value_range(&self) -> Option<std::ops::Range<usize>> {
        self.value.map(|v| v.pos..v.end())
    }

    /// Where the entry lies in its record, to come back to it with [`feature_at`].
    pub(crate) fn loc(&self) -> EntryLoc {
        EntryLoc { body: (self.body.pos, self.body.end()), value: self.value.map(|v| (v.pos, v.end())) }
    }
}

/// `bytes` as a string if they are UTF-8: a check of one word at a time when they are
/// ASCII, as feature names almost always are.
#[inline]
fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// The body of a length-delimited field whose length prefix starts `bytes`, when that
/// body is the whole rest of `bytes` (nothing after it).
#[inline]
fn whole(bytes: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(bytes);
    let len = r.varint().ok()?;
    let body = r.rest();
    (len == body.len() as u64).then_some(body)
}

/// Where an [`Entry`] lies in its record: byte ranges of its body and of its single
/// `value` field, if it has exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryLoc {
    body: (usize, usize),
    value: Option<(usize, usize)>,
}

/// Examines the feature of the entry at `loc` of `record`, as [`Entry::loc`] gave it.
/// Used by the parser to come back to an entry after a walk without keeping borrows
/// across records.
#[inline]
pub(crate) fn feature_at(record: &[u8], loc: EntryLoc) -> Result<FeatureView<'_>, WireError> {
    let reader = |(pos, end): (usize, usize)| {
        Reader::range(record, pos, end).ok_or(WireError { offset: pos, kind: WireErrorKind::Truncated })
    };
    FeatureView::from_entry(reader(loc.body)?, loc.value.map(reader).transpose()?)
}

/// Iterator over the map entries of an example, see [`ExampleView::entries`].
#[derive(Clone)]
pub struct Entries<'a> {
    outer: Reader<'a>,
    inner: Option<Reader<'a>>,
    done: bool,
}

impl fmt::Debug for Entries<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entries").field("pos", &self.outer.pos).field("done", &self.done).finish()
    }
}

impl<'a> Entries<'a> {
    #[inline]
    fn step(&mut self) -> Result<Option<Entry<'a>>, WireError> {
        loop {
            if let Some(inner) = &mut self.inner {
                if !inner.at_end() {
                    let (field, wire_type) = inner.key()?;
                    if field == 1 {
                        return Entry::scan(inner.expect_sub(field, wire_type)?).map(Some);
                    }
                    inner.skip(field, wire_type, FEATURES_DEPTH)?;
                    continue;
                }
                self.inner = None;
            }
            if self.outer.at_end() {
                return Ok(None);
            }
            let (field, wire_type) = self.outer.key()?;
            if field == 1 {
                self.inner = Some(self.outer.expect_sub(field, wire_type)?);
            } else {
                self.outer.skip(field, wire_type, EXAMPLE_DEPTH)?;
            }
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, WireError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

/// Iterator over `(name, feature)` pairs, see [`ExampleView::features`].
#[derive(Debug, Clone)]
pub struct Features<'a> {
    entries: Entries<'a>,
}

impl<'a> Iterator for Features<'a> {
    type Item = Result<(&'a str, FeatureView<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.entries.next()?.and_then(|e| Ok((e.name(), e.feature()?)));
        if item.is_err() {
            self.entries.done = true;
        }
        Some(item)
    }
}
