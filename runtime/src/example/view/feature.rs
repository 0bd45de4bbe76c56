//! A feature's kind and lists: [`FeatureView`], found by protobuf's `kind` oneof merge
//! rules over the kind fields of one map entry.

use std::fmt;

use super::reader::{LEN, Reader, WireError};
use super::values::{BytesValues, F32Wire, Floats, I64Wire, Int64s, Values, count_bytes, count_values};
use super::{BYTES_LIST, ENTRY_DEPTH, FEATURE_DEPTH, FLOAT_LIST, INT64_LIST};

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
    pub(super) fn from_entry(entry: Reader<'a>, single_value: Option<Reader<'a>>) -> Result<Self, WireError> {
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
pub(super) struct KindScan<'a> {
    /// The winning kind so far (a field number of the oneof; 0 for none).
    pub(super) kind: u32,
    /// Its values so far.
    pub(super) count: usize,
    /// Its list messages so far.
    pub(super) lists: usize,
    /// The fast path of the last list (see [`Values::fast`]).
    pub(super) fast: Option<Reader<'a>>,
    /// Where its run starts.
    pub(super) start: Option<Lists<'a>>,
}

impl<'a> KindScan<'a> {
    /// Walks one `value` chunk; `after` is the rest of the entry after it.
    #[inline]
    pub(super) fn value_chunk(&mut self, mut value: Reader<'a>, after: Reader<'a>) -> Result<(), WireError> {
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
pub(super) struct Lists<'a> {
    pub(super) kind: u32,
    /// The rest of the current `value` chunk.
    pub(super) chunk: Reader<'a>,
    /// The rest of the entry after the current `value` chunk.
    pub(super) entry: Reader<'a>,
}

impl fmt::Debug for Lists<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lists").field("kind", &self.kind).field("at", &self.chunk.pos).finish()
    }
}

impl<'a> Lists<'a> {
    /// The same lists, all read.
    pub(super) fn exhausted(self) -> Self {
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
