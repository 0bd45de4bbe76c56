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

mod sequence;
pub use sequence::{ListEntries, ListEntry, SequenceView, Steps};

/// Protobuf wire types.
const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const SGROUP: u8 = 3;
const EGROUP: u8 = 4;
const I32: u8 = 5;

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

/// Why a record is not a well-formed `tf.train.Example`, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireError {
    /// Byte offset in the record where the problem was found.
    pub offset: usize,
    /// What is wrong.
    pub kind: WireErrorKind,
}

/// What makes a record malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireErrorKind {
    /// A length, varint or fixed-width value runs past the end of its message.
    Truncated,
    /// A varint is longer than 10 bytes or overflows 64 bits.
    BadVarint,
    /// A field key is out of range, has field number 0 or wire type 6 or 7.
    BadKey,
    /// A known field arrives with a wire type it cannot have.
    BadWireType {
        /// The field number.
        field: u32,
        /// The wire type found.
        wire_type: u8,
    },
    /// An end-group marker does not close the open group.
    UnmatchedEndGroup,
    /// Groups nest deeper than protobuf's recursion limit.
    TooDeep,
    /// A feature name is not valid UTF-8.
    BadUtf8,
    /// A packed float list's length is not a multiple of 4.
    PackedLength,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WireErrorKind::Truncated => f.write_str("field runs past the end of its message")?,
            WireErrorKind::BadVarint => f.write_str("invalid varint")?,
            WireErrorKind::BadKey => f.write_str("invalid field key")?,
            WireErrorKind::BadWireType { field, wire_type } => {
                write!(f, "field {field} has invalid wire type {wire_type}")?
            }
            WireErrorKind::UnmatchedEndGroup => f.write_str("unexpected end-group tag")?,
            WireErrorKind::TooDeep => f.write_str("groups nest too deep")?,
            WireErrorKind::BadUtf8 => f.write_str("feature name is not valid UTF-8")?,
            WireErrorKind::PackedLength => f.write_str("packed float list length is not a multiple of 4")?,
        }
        write!(f, " at byte {}", self.offset)
    }
}

impl std::error::Error for WireError {}

/// A bounded cursor over `buf[pos..]`, where `buf` is the record up to the end of the
/// message being read (so offsets stay those of the record). Every read checks against
/// `buf.len()`.
#[derive(Clone, Copy)]
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bytes {}..{}", self.pos, self.end())
    }
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// A reader over `record[pos..end]`, if that is a range of `record`.
    fn range(record: &'a [u8], pos: usize, end: usize) -> Option<Self> {
        record.get(..end).filter(|_| pos <= end).map(|buf| Reader { buf, pos })
    }

    /// Offset of the end of the message.
    #[inline]
    fn end(&self) -> usize {
        self.buf.len()
    }

    /// Bytes left.
    #[inline]
    fn left(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    #[inline]
    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    fn err(&self, kind: WireErrorKind) -> WireError {
        WireError { offset: self.pos, kind }
    }

    /// The unread bytes.
    #[inline]
    fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, WireError> {
        let rest = self.rest();
        match rest.first() {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.varint_slow(rest),
        }
    }

    #[cold]
    fn varint_slow(&mut self, rest: &[u8]) -> Result<u64, WireError> {
        let mut value = 0u64;
        for (i, &b) in rest.iter().take(10).enumerate() {
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                if i == 9 && b >= 2 {
                    return Err(self.err(WireErrorKind::BadVarint));
                }
                self.pos += i + 1;
                return Ok(value);
            }
        }
        Err(self.err(if rest.len() < 10 { WireErrorKind::Truncated } else { WireErrorKind::BadVarint }))
    }

    /// A field key: (field number, wire type).
    #[inline]
    fn key(&mut self) -> Result<(u32, u8), WireError> {
        let at = self.pos;
        let key = self.varint()?;
        let wire_type = (key & 7) as u8;
        if key > u64::from(u32::MAX) || key >> 3 == 0 || wire_type > 5 {
            return Err(WireError { offset: at, kind: WireErrorKind::BadKey });
        }
        Ok(((key >> 3) as u32, wire_type))
    }

    /// The body of a length-delimited field, as its own reader.
    #[inline]
    fn sub(&mut self) -> Result<Reader<'a>, WireError> {
        let len = self.varint()?;
        if len > self.left() as u64 {
            return Err(self.err(WireErrorKind::Truncated));
        }
        let start = self.pos;
        self.pos += len as usize;
        match self.buf.get(..self.pos) {
            Some(buf) => Ok(Reader { buf, pos: start }),
            None => Err(self.err(WireErrorKind::Truncated)),
        }
    }

    #[inline]
    fn fixed32(&mut self) -> Result<[u8; 4], WireError> {
        match self.rest().first_chunk::<4>() {
            Some(b) => {
                self.pos += 4;
                Ok(*b)
            }
            None => Err(self.err(WireErrorKind::Truncated)),
        }
    }

    #[inline]
    fn advance(&mut self, n: usize) -> Result<(), WireError> {
        if n > self.left() {
            return Err(self.err(WireErrorKind::Truncated));
        }
        self.pos += n;
        Ok(())
    }

    /// Skips a field whose key was just read, as prost's `skip_field` does with
    /// `depth` recursion budget left.
    fn skip(&mut self, field: u32, wire_type: u8, depth: u32) -> Result<(), WireError> {
        if depth == 0 {
            return Err(self.err(WireErrorKind::TooDeep));
        }
        match wire_type {
            VARINT => self.varint().map(drop),
            I64 => self.advance(8),
            LEN => self.sub().map(drop),
            I32 => self.advance(4),
            SGROUP => loop {
                let at = self.pos;
                let (inner, inner_type) = self.key()?;
                if inner_type == EGROUP {
                    if inner != field {
                        return Err(WireError { offset: at, kind: WireErrorKind::UnmatchedEndGroup });
                    }
                    return Ok(());
                }
                self.skip(inner, inner_type, depth - 1)?;
            },
            _ => Err(self.err(WireErrorKind::UnmatchedEndGroup)),
        }
    }

    /// The body of a known length-delimited field whose key was just read.
    #[inline]
    fn expect_sub(&mut self, field: u32, wire_type: u8) -> Result<Reader<'a>, WireError> {
        if wire_type != LEN {
            return Err(self.err(WireErrorKind::BadWireType { field, wire_type }));
        }
        self.sub()
    }
}

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

/// A feature's values, borrowed from the record. Values were checked when the view was
/// made, so reading them cannot fail.
#[derive(Debug, Clone, Copy)]
pub enum FeatureView<'a> {
    /// A `Feature` with no kind set (no values of any type).
    None,
    /// A `float_list`.
    Floats(Floats<'a>),
    /// An `int64_list`.
    Int64s(Int64s<'a>),
    /// A `bytes_list`.
    Bytes(BytesValues<'a>),
}

impl<'a> FeatureView<'a> {
    /// Walks an entry body (or just its single `value` field, when the entry scan found
    /// exactly one): finds the winning kind and the run of its lists, checking every
    /// list on the way (prost rejects a malformed list even if a later kind replaces
    /// it).
    #[inline]
    fn from_entry(entry: Reader<'a>, single_value: Option<Reader<'a>>) -> Result<Self, WireError> {
        let mut scan = KindScan { kind: 0, count: 0, lists: 0, fast: None, start: None };
        if let Some(value) = single_value {
            scan.value_chunk(value, Reader { buf: entry.buf, pos: entry.end() })?;
        } else {
            let mut r = entry;
            while !r.at_end() {
                let (field, wire_type) = r.key()?;
                match field {
                    1 => drop(r.expect_sub(field, wire_type)?),
                    2 => {
                        let value = r.expect_sub(field, wire_type)?;
                        scan.value_chunk(value, r)?;
                    }
                    _ => r.skip(field, wire_type, ENTRY_DEPTH)?,
                }
            }
        }
        let fast = if scan.lists == 1 { scan.fast } else { None };
        Ok(match scan.start {
            None => FeatureView::None,
            Some(lists) => {
                let values = Values { lists, len: scan.count, fast };
                match scan.kind {
                    FLOAT_LIST => FeatureView::Floats(Floats(values)),
                    INT64_LIST => FeatureView::Int64s(Int64s(values)),
                    _ => FeatureView::Bytes(BytesValues(values)),
                }
            }
        })
    }

    /// Number of values (0 for [`FeatureView::None`]).
    pub fn len(&self) -> usize {
        match self {
            FeatureView::None => 0,
            FeatureView::Floats(v) => v.len(),
            FeatureView::Int64s(v) => v.len(),
            FeatureView::Bytes(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The state of [`FeatureView::from_entry`]'s walk over the kind fields of a feature.
struct KindScan<'a> {
    /// The winning kind so far (a field number of the oneof; 0 for none).
    kind: u32,
    /// Its values so far.
    count: usize,
    /// Its list messages so far.
    lists: usize,
    /// The fast path of the last list (see [`Values::fast`]).
    fast: Option<Reader<'a>>,
    /// Where its run starts.
    start: Option<Lists<'a>>,
}

impl<'a> KindScan<'a> {
    /// Walks one `value` chunk; `after` is the rest of the entry after it.
    #[inline]
    fn value_chunk(&mut self, mut value: Reader<'a>, after: Reader<'a>) -> Result<(), WireError> {
        while !value.at_end() {
            let at = value.pos;
            let (field, wire_type) = value.key()?;
            if !(BYTES_LIST..=INT64_LIST).contains(&field) {
                value.skip(field, wire_type, FEATURE_DEPTH)?;
                continue;
            }
            let list = value.expect_sub(field, wire_type)?;
            let (n, fast) = match field {
                FLOAT_LIST => count_values::<F32Wire>(list)?,
                INT64_LIST => count_values::<I64Wire>(list)?,
                _ => (count_bytes(list)?, Some(list)),
            };
            if field == self.kind {
                self.count += n;
                self.lists += 1;
            } else {
                self.kind = field;
                self.count = n;
                self.lists = 1;
                self.start =
                    Some(Lists { kind: field, chunk: Reader { buf: value.buf, pos: at }, entry: after });
            }
            self.fast = fast;
        }
        Ok(())
    }
}

/// The list messages of one feature's winning kind, in order: from the first kind field
/// of the winning run to the end of the entry, across merged `value` chunks.
#[derive(Clone, Copy)]
struct Lists<'a> {
    kind: u32,
    /// The rest of the current `value` chunk.
    chunk: Reader<'a>,
    /// The rest of the entry after the current `value` chunk.
    entry: Reader<'a>,
}

impl fmt::Debug for Lists<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lists").field("kind", &self.kind).field("at", &self.chunk.pos).finish()
    }
}

impl<'a> Lists<'a> {
    /// The same lists, all read.
    fn exhausted(self) -> Self {
        Lists {
            kind: self.kind,
            chunk: Reader { pos: self.chunk.end(), ..self.chunk },
            entry: Reader { pos: self.entry.end(), ..self.entry },
        }
    }
}

impl<'a> Iterator for Lists<'a> {
    type Item = Reader<'a>;

    /// The bytes were checked by [`FeatureView::from_entry`], so a read error cannot
    /// happen here; if it did, iteration would simply stop.
    fn next(&mut self) -> Option<Reader<'a>> {
        loop {
            while !self.chunk.at_end() {
                let (field, wire_type) = self.chunk.key().ok()?;
                if field == self.kind && wire_type == LEN {
                    return self.chunk.sub().ok();
                }
                self.chunk.skip(field, wire_type, FEATURE_DEPTH).ok()?;
            }
            if self.entry.at_end() {
                return None;
            }
            let (field, wire_type) = self.entry.key().ok()?;
            if field == 2 && wire_type == LEN {
                self.chunk = self.entry.sub().ok()?;
            } else {
                self.entry.skip(field, wire_type, ENTRY_DEPTH).ok()?;
            }
        }
    }
}

/// A numeric list's element encoding.
trait Wire {
    type Value: Copy;
    /// The wire type of one unpacked value.
    const WIRE_TYPE: u8;
    fn read(r: &mut Reader<'_>) -> Result<Self::Value, WireError>;
}

#[derive(Clone)]
struct F32Wire;

impl Wire for F32Wire {
    type Value = f32;
    const WIRE_TYPE: u8 = I32;
    #[inline]
    fn read(r: &mut Reader<'_>) -> Result<f32, WireError> {
        r.fixed32().map(f32::from_le_bytes)
    }
}

#[derive(Clone)]
struct I64Wire;

impl Wire for I64Wire {
    type Value = i64;
    const WIRE_TYPE: u8 = VARINT;
    #[inline]
    fn read(r: &mut Reader<'_>) -> Result<i64, WireError> {
        r.varint().map(|v| v as i64)
    }
}

/// Checks a numeric list message and counts its values; also returns its packed chunk
/// when that is all the list holds.
fn count_values<'a, W: Wire>(mut list: Reader<'a>) -> Result<(usize, Option<Reader<'a>>), WireError> {
    let mut n = 0;
    let mut fields = 0;
    let mut last_packed = None;
    while !list.at_end() {
        fields += 1;
        let (field, wire_type) = list.key()?;
        if field != 1 {
            list.skip(field, wire_type, LIST_DEPTH)?;
        } else if wire_type == LEN {
            let mut packed = list.sub()?;
            last_packed = Some(packed);
            if W::WIRE_TYPE == I32 {
                if packed.rest().len() % 4 != 0 {
                    return Err(packed.err(WireErrorKind::PackedLength));
                }
                n += packed.rest().len() / 4;
            } else {
                while !packed.at_end() {
                    packed.varint()?;
                    n += 1;
                }
            }
        } else if wire_type == W::WIRE_TYPE {
            W::read(&mut list)?;
            n += 1;
        } else {
            return Err(list.err(WireErrorKind::BadWireType { field, wire_type }));
        }
    }
    Ok((n, if fields == 1 { last_packed } else { None }))
}

/// Checks a `BytesList` message and counts its values.
fn count_bytes(mut list: Reader<'_>) -> Result<usize, WireError> {
    let mut n = 0;
    while !list.at_end() {
        let (field, wire_type) = list.key()?;
        if field == 1 {
            list.expect_sub(field, wire_type)?;
            n += 1;
        } else {
            list.skip(field, wire_type, LIST_DEPTH)?;
        }
    }
    Ok(n)
}

/// The values of one list kind of a feature.
#[derive(Debug, Clone, Copy)]
struct Values<'a> {
    lists: Lists<'a>,
    len: usize,
    /// When the winning run is a single list message: for numbers, its packed chunk if
    /// that is all it holds; for bytes, the list message itself. Reading then skips
    /// the walk down from the entry.
    fast: Option<Reader<'a>>,
}

impl<'a> Values<'a> {
    /// The list messages to read.
    fn lists(&self) -> Lists<'a> {
        self.lists
    }
}

/// The values of a `float_list`.
#[derive(Debug, Clone, Copy)]
pub struct Floats<'a>(Values<'a>);

/// The values of an `int64_list`.
#[derive(Debug, Clone, Copy)]
pub struct Int64s<'a>(Values<'a>);

/// The values of a `bytes_list`.
#[derive(Debug, Clone, Copy)]
pub struct BytesValues<'a>(Values<'a>);

impl<'a> Floats<'a> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// The values in order.
    pub fn iter(&self) -> FloatIter<'a> {
        FloatIter(NumIter::new(self.0))
    }

    /// Appends the values to `out` (packed chunks are copied in bulk).
    #[inline]
    pub fn extend_into(&self, out: &mut Vec<f32>) {
        fn packed(out: &mut Vec<f32>, bytes: &[u8]) {
            let (words, _) = bytes.as_chunks::<4>();
            out.extend(words.iter().map(|w| f32::from_le_bytes(*w)));
        }
        if let Some(fast) = self.0.fast {
            return packed(out, fast.rest());
        }
        out.reserve(self.0.len);
        for mut list in self.0.lists() {
            while !list.at_end() {
                let Ok((field, wire_type)) = list.key() else { return };
                let ok = match (field, wire_type) {
                    (1, LEN) => list.sub().map(|p| packed(out, p.rest())),
                    (1, I32) => list.fixed32().map(|w| out.push(f32::from_le_bytes(w))),
                    _ => list.skip(field, wire_type, LIST_DEPTH),
                };
                if ok.is_err() {
                    return;
                }
            }
        }
    }

    /// Writes the values into the front of `out` and returns how many were written
    /// (`min(len, out.len())`).
    pub fn copy_to_slice(&self, out: &mut [f32]) -> usize {
        out.iter_mut().zip(self.iter()).map(|(o, v)| *o = v).count()
    }
}

impl<'a> Int64s<'a> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// The values in order.
    pub fn iter(&self) -> Int64Iter<'a> {
        Int64Iter(NumIter::new(self.0))
    }

    /// Appends the values to `out`.
    #[inline]
    pub fn extend_into(&self, out: &mut Vec<i64>) {
        fn packed(out: &mut Vec<i64>, mut p: Reader<'_>) -> Result<(), WireError> {
            while !p.at_end() {
                out.push(p.varint()? as i64);
            }
            Ok(())
        }
        out.reserve(self.0.len);
        if let Some(fast) = self.0.fast {
            // Checked when the view was made, so this cannot fail.
            let _ = packed(out, fast);
            return;
        }
        for mut list in self.0.lists() {
            while !list.at_end() {
                let Ok((field, wire_type)) = list.key() else { return };
                let ok = match (field, wire_type) {
                    (1, LEN) => list.sub().and_then(|p| packed(out, p)),
                    (1, VARINT) => list.varint().map(|v| out.push(v as i64)),
                    _ => list.skip(field, wire_type, LIST_DEPTH),
                };
                if ok.is_err() {
                    return;
                }
            }
        }
    }

    /// Writes the values into the front of `out` and returns how many were written
    /// (`min(len, out.len())`).
    pub fn copy_to_slice(&self, out: &mut [i64]) -> usize {
        out.iter_mut().zip(self.iter()).map(|(o, v)| *o = v).count()
    }
}

impl<'a> BytesValues<'a> {
    /// Number of byte strings.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True when there are no byte strings.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// The byte strings in order, borrowed from the record.
    pub fn iter(&self) -> BytesIter<'a> {
        match self.0.fast {
            Some(list) => BytesIter { lists: self.0.lists.exhausted(), list: Some(list) },
            None => BytesIter { lists: self.0.lists, list: None },
        }
    }
}

/// Reads the next value of a list message: from the open packed chunk, else from the
/// next `value` field (opening a packed chunk if it is one). `None` at the end.
fn next_value<'a, W: Wire>(list: &mut Reader<'a>, packed: &mut Option<Reader<'a>>) -> Option<W::Value> {
    loop {
        if let Some(p) = packed {
            if !p.at_end() {
                return W::read(p).ok();
            }
            *packed = None;
        }
        if list.at_end() {
            return None;
        }
        let (field, wire_type) = list.key().ok()?;
        match (field, wire_type) {
            (1, LEN) => *packed = Some(list.sub().ok()?),
            (1, w) if w == W::WIRE_TYPE => return W::read(list).ok(),
            _ => list.skip(field, wire_type, LIST_DEPTH).ok()?,
        }
    }
}

/// Iterator state over the values of a numeric list's chunks.
#[derive(Clone)]
struct NumIter<'a, W> {
    lists: Lists<'a>,
    list: Option<Reader<'a>>,
    packed: Option<Reader<'a>>,
    _wire: std::marker::PhantomData<W>,
}

impl<'a, W: Wire> NumIter<'a, W> {
    fn new(values: Values<'a>) -> Self {
        let lists = values.lists;
        match values.fast {
            Some(packed) => NumIter {
                lists: lists.exhausted(),
                list: Some(lists.exhausted().chunk),
                packed: Some(packed),
                _wire: std::marker::PhantomData,
            },
            None => NumIter { lists, list: None, packed: None, _wire: std::marker::PhantomData },
        }
    }

    #[inline]
    fn next(&mut self) -> Option<W::Value> {
        loop {
            if let Some(list) = &mut self.list
                && let Some(v) = next_value::<W>(list, &mut self.packed)
            {
                return Some(v);
            }
            self.list = Some(self.lists.next()?);
            self.packed = None;
        }
    }
}

/// Iterator over the values of a `float_list`.
#[derive(Clone)]
pub struct FloatIter<'a>(NumIter<'a, F32Wire>);

/// Iterator over the values of an `int64_list`.
#[derive(Clone)]
pub struct Int64Iter<'a>(NumIter<'a, I64Wire>);

impl fmt::Debug for FloatIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FloatIter").field("lists", &self.0.lists).finish_non_exhaustive()
    }
}

impl fmt::Debug for Int64Iter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Int64Iter").field("lists", &self.0.lists).finish_non_exhaustive()
    }
}

impl Iterator for FloatIter<'_> {
    type Item = f32;
    fn next(&mut self) -> Option<f32> {
        self.0.next()
    }
}

impl Iterator for Int64Iter<'_> {
    type Item = i64;
    fn next(&mut self) -> Option<i64> {
        self.0.next()
    }
}

/// Iterator over the byte strings of a `bytes_list`.
#[derive(Clone)]
pub struct BytesIter<'a> {
    lists: Lists<'a>,
    list: Option<Reader<'a>>,
}

impl fmt::Debug for BytesIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BytesIter").field("lists", &self.lists).finish_non_exhaustive()
    }
}

impl<'a> Iterator for BytesIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if let Some(list) = &mut self.list {
                while !list.at_end() {
                    let (field, wire_type) = list.key().ok()?;
                    if field == 1 && wire_type == LEN {
                        return list.sub().ok().map(|v| v.rest());
                    }
                    list.skip(field, wire_type, LIST_DEPTH).ok()?;
                }
            }
            self.list = Some(self.lists.next()?);
        }
    }
}
