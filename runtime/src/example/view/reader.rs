//! The protobuf wire format as the walker reads it: the wire types, [`WireError`] and the
//! bounds-checked [`Reader`] every walk goes through.

use std::fmt;

/// Protobuf wire types.
pub(super) const VARINT: u8 = 0;
pub(super) const I64: u8 = 1;
pub(super) const LEN: u8 = 2;
pub(super) const SGROUP: u8 = 3;
pub(super) const EGROUP: u8 = 4;
pub(super) const I32: u8 = 5;

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
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bytes {}..{}", self.pos, self.end())
    }
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// A reader over `record[pos..end]`, if that is a range of `record`.
    pub(super) fn range(record: &'a [u8], pos: usize, end: usize) -> Option<Self> {
        record.get(..end).filter(|_| pos <= end).map(|buf| Reader { buf, pos })
    }

    /// Offset of the end of the message.
    #[inline]
    pub(super) fn end(&self) -> usize {
        self.buf.len()
    }

    /// Bytes left.
    #[inline]
    pub(super) fn left(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    #[inline]
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(super) fn err(&self, kind: WireErrorKind) -> WireError {
        WireError { offset: self.pos, kind }
    }

    /// The unread bytes.
    #[inline]
    pub(super) fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    #[inline]
    pub(super) fn varint(&mut self) -> Result<u64, WireError> {
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
    pub(super) fn varint_slow(&mut self, rest: &[u8]) -> Result<u64, WireError> {
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
    pub(super) fn key(&mut self) -> Result<(u32, u8), WireError> {
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
    pub(super) fn sub(&mut self) -> Result<Reader<'a>, WireError> {
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
    pub(super) fn fixed32(&mut self) -> Result<[u8; 4], WireError> {
        match self.rest().first_chunk::<4>() {
            Some(b) => {
                self.pos += 4;
                Ok(*b)
            }
            None => Err(self.err(WireErrorKind::Truncated)),
        }
    }

    #[inline]
    pub(super) fn advance(&mut self, n: usize) -> Result<(), WireError> {
        if n > self.left() {
            return Err(self.err(WireErrorKind::Truncated));
        }
        self.pos += n;
        Ok(())
    }

    /// Skips a field whose key was just read, as prost's `skip_field` does with
    /// `depth` recursion budget left.
    pub(super) fn skip(&mut self, field: u32, wire_type: u8, depth: u32) -> Result<(), WireError> {
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
    pub(super) fn expect_sub(&mut self, field: u32, wire_type: u8) -> Result<Reader<'a>, WireError> {
        if wire_type != LEN {
            return Err(self.err(WireErrorKind::BadWireType { field, wire_type }));
        }
        self.sub()
    }
}
