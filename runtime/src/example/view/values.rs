//! The values of a feature's list: numeric lists packed or not, byte strings, counted when
//! a [`FeatureView`](super::FeatureView) is made and iterated in place.

use std::fmt;

use super::LIST_DEPTH;
use super::feature::Lists;
use super::reader::{I32, LEN, Reader, VARINT, WireError, WireErrorKind};
use crate::column::Append;

/// A numeric list's element encoding.
pub(super) trait Wire {
    type Value: Copy;
    /// The wire type of one unpacked value.
    const WIRE_TYPE: u8;
    fn read(r: &mut Reader<'_>) -> Result<Self::Value, WireError>;
}

#[derive(Clone)]
pub(super) struct F32Wire;

impl Wire for F32Wire {
    type Value = f32;
    const WIRE_TYPE: u8 = I32;
    #[inline]
    fn read(r: &mut Reader<'_>) -> Result<f32, WireError> {
        r.fixed32().map(f32::from_le_bytes)
    }
}

#[derive(Clone)]
pub(super) struct I64Wire;

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
pub(super) fn count_values<'a, W: Wire>(
    mut list: Reader<'a>,
) -> Result<(usize, Option<Reader<'a>>), WireError> {
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
pub(super) fn count_bytes(mut list: Reader<'_>) -> Result<usize, WireError> {
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
pub(super) struct Values<'a> {
    pub(super) lists: Lists<'a>,
    pub(super) len: usize,
    /// When the winning run is a single list message: for numbers, its packed chunk if
    /// that is all it holds; for bytes, the list message itself. Reading then skips
    /// the walk down from the entry.
    pub(super) fast: Option<Reader<'a>>,
}

impl<'a> Values<'a> {
    /// The list messages to read.
    pub(super) fn lists(&self) -> Lists<'a> {
        self.lists
    }
}

/// The values of a `float_list`.
#[derive(Debug, Clone, Copy)]
pub struct Floats<'a>(pub(super) Values<'a>);

/// The values of an `int64_list`.
#[derive(Debug, Clone, Copy)]
pub struct Int64s<'a>(pub(super) Values<'a>);

/// The values of a `bytes_list`.
#[derive(Debug, Clone, Copy)]
pub struct BytesValues<'a>(pub(super) Values<'a>);

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
    pub fn extend_into(&self, out: &mut impl Append<f32>) {
        fn packed(out: &mut impl Append<f32>, bytes: &[u8]) {
            let (words, _) = bytes.as_chunks::<4>();
            out.extend_iter(words.iter().map(|w| f32::from_le_bytes(*w)));
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
    pub fn extend_into(&self, out: &mut impl Append<i64>) {
        fn packed(out: &mut impl Append<i64>, mut p: Reader<'_>) -> Result<(), WireError> {
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
pub(super) fn next_value<'a, W: Wire>(
    list: &mut Reader<'a>,
    packed: &mut Option<Reader<'a>>,
) -> Option<W::Value> {
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
pub(super) struct NumIter<'a, W> {
    pub(super) lists: Lists<'a>,
    pub(super) list: Option<Reader<'a>>,
    pub(super) packed: Option<Reader<'a>>,
    pub(super) _wire: std::marker::PhantomData<W>,
}

impl<'a, W: Wire> NumIter<'a, W> {
    pub(super) fn new(values: Values<'a>) -> Self {
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
    pub(super) fn next(&mut self) -> Option<W::Value> {
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
pub struct FloatIter<'a>(pub(super) NumIter<'a, F32Wire>);

/// Iterator over the values of an `int64_list`.
#[derive(Clone)]
pub struct Int64Iter<'a>(pub(super) NumIter<'a, I64Wire>);

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
    pub(super) lists: Lists<'a>,
    pub(super) list: Option<Reader<'a>>,
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
