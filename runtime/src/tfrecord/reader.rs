//! The streaming TFRecord reader.
//!
//! The reader owns one buffer of `buffer_size` bytes (grown only to fit a larger record)
//! and hands out each payload as a slice into it, so reading costs one `read` per buffer
//! and two CRC32C passes per record, with no allocation per record.

use crate::storage::Source;
use std::io::{self, BufReader, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::input::{Input, open_input};
use super::{Compression, FOOTER_LEN, HEADER_LEN, decode_header, masked_crc};
use crate::error::{CorruptKind, Error, Result};

/// What the reader does on a corrupt record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorruptPolicy {
    /// Return an error naming the file, record and offset; the reader then ends.
    #[default]
    Fail,
    /// Skip the bad record, resynchronise at the next offset where a whole record
    /// validates, and count what was skipped in [`ReaderStats`].
    Skip,
    /// Abandon the rest of this file (counted in [`ReaderStats`]), so a multi-file
    /// source goes on with the next file.
    SkipFile,
}

impl FromStr for CorruptPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fail" => Ok(CorruptPolicy::Fail),
            "skip" => Ok(CorruptPolicy::Skip),
            "skip_file" | "skip-file" => Ok(CorruptPolicy::SkipFile),
            _ => Err(format!("unknown corrupt-record policy `{s}` (expected fail, skip or skip_file)")),
        }
    }
}

/// How to read TFRecord files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Whole-stream compression; `Auto` by default.
    pub compression: Compression,
    /// Verify the payload checksum of every record (default true). The length checksum is
    /// always verified: it costs 8 bytes of CRC per record and is what keeps the framing
    /// safe.
    pub verify_crc: bool,
    /// What to do on a corrupt record.
    pub on_corrupt: CorruptPolicy,
    /// Bytes read from the file at a time (default 1 MiB).
    pub buffer_size: usize,
    /// Largest payload accepted; a longer declared length is corrupt (default 1 GiB).
    pub max_record_len: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            compression: Compression::Auto,
            verify_crc: true,
            on_corrupt: CorruptPolicy::Fail,
            buffer_size: crate::defaults::READ_BUFFER_BYTES,
            max_record_len: 1 << 30,
        }
    }
}

/// One corrupt region skipped under the `skip` or `skip_file` policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipEvent {
    /// The file.
    pub path: PathBuf,
    /// Index of the corrupt record in its file.
    pub record: u64,
    /// Byte offset where the corrupt region starts.
    pub offset: u64,
    /// Why the record was rejected.
    pub kind: CorruptKind,
    /// Bytes skipped (for `skip_file` and damaged compressed streams: the bytes that were
    /// still to be read in the decompressed stream are unknown, and not counted).
    pub bytes: u64,
    /// True when the rest of the file was abandoned.
    pub rest_of_file: bool,
}

/// What a reader has delivered and skipped so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReaderStats {
    /// Records delivered.
    pub records: u64,
    /// Payload bytes delivered.
    pub bytes: u64,
    /// Corrupt regions skipped.
    pub skipped_records: u64,
    /// Bytes in skipped regions.
    pub skipped_bytes: u64,
    /// Files whose rest was skipped (`skip_file`, or a damaged compressed stream).
    pub skipped_files: u64,
    /// Parquet row groups not read: their statistics showed the filter after the reader
    /// passes none of their rows.
    pub pruned_row_groups: u64,
    /// The first [`ReaderStats::MAX_EVENTS`] skip events, in order.
    pub events: Vec<SkipEvent>,
}

impl ReaderStats {
    /// How many skip events are kept in detail; further ones are only counted.
    pub const MAX_EVENTS: usize = 32;

    /// Adds another reader's statistics to these.
    pub fn merge(&mut self, other: &ReaderStats) {
        self.records += other.records;
        self.bytes += other.bytes;
        self.skipped_records += other.skipped_records;
        self.skipped_bytes += other.skipped_bytes;
        self.skipped_files += other.skipped_files;
        self.pruned_row_groups += other.pruned_row_groups;
        let room = Self::MAX_EVENTS.saturating_sub(self.events.len());
        self.events.extend(other.events.iter().take(room).cloned());
    }

    /// Counts one skipped region, keeping its details while there is room.
    pub fn note_skip(&mut self, event: SkipEvent) {
        self.skipped_records += 1;
        self.skipped_bytes += event.bytes;
        self.skipped_files += u64::from(event.rest_of_file);
        if self.events.len() < Self::MAX_EVENTS {
            self.events.push(event);
        }
    }
}

/// What went wrong while trying to read one record.
enum Fault {
    Io(io::Error),
    /// Corrupt data; `Some(n)` when the bad record's extent (`n` bytes) is known, so a
    /// skip can jump over it instead of scanning.
    Corrupt(CorruptKind, Option<u64>),
}

/// A streaming reader of the records of one TFRecord stream.
///
/// `next_record` lends each payload as a slice valid until the next call.
#[derive(Debug)]
pub struct RecordReader<R> {
    input: R,
    path: PathBuf,
    opts: ReaderOptions,
    compressed: bool,
    /// Total stream length when known (uncompressed files), to detect truncation
    /// without reading.
    size: Option<u64>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Stream offset of `buf[start]`.
    offset: u64,
    /// Index of the next record.
    record: u64,
    eof: bool,
    done: bool,
    stats: ReaderStats,
}

/// A reader over a file on disk or an object in a store.
pub type FileReader = RecordReader<Input<BufReader<Source>>>;

/// Opens a TFRecord file for reading.
pub fn open(path: impl AsRef<Path>, opts: &ReaderOptions) -> Result<FileReader> {
    open_with_size(path, opts).map(|(r, _)| r)
}

/// Opens a TFRecord file for reading and also returns its size on disk in bytes (0 for a
/// pipe or another file that is not a regular one: its records are read to its end).
pub fn open_with_size(path: impl AsRef<Path>, opts: &ReaderOptions) -> Result<(FileReader, u64)> {
    let path = path.as_ref();
    let (input, compression, size) = open_input(path, opts.compression).map_err(|e| Error::io(path, e))?;
    let compressed = compression != Compression::None;
    let mut reader = RecordReader::new(input, path, opts.clone());
    reader.compressed = compressed;
    // Only an uncompressed regular file's size bounds its records.
    reader.size = size.filter(|_| !compressed);
    Ok((reader, size.unwrap_or(0)))
}

impl<R: Read> RecordReader<R> {
    /// An I/O error of an object read mid-stream (a permanent store failure: 403, the
    /// object replaced) also names the record being read; a local file's is left as the
    /// operating system said it.
    fn locate_io(&self, e: io::Error) -> io::Error {
        if !crate::storage::is_url(&self.path) {
            return e;
        }
        io::Error::new(
            e.kind(),
            format!("{e}, while reading record {} at byte offset {}", self.record, self.offset),
        )
    }

    /// A reader over an uncompressed stream; `path` names it in errors.
    pub fn new(input: R, path: impl Into<PathBuf>, opts: ReaderOptions) -> Self {
        let buffer_size = opts.buffer_size.max(HEADER_LEN + FOOTER_LEN);
        RecordReader {
            input,
            path: path.into(),
            opts: ReaderOptions { buffer_size, ..opts },
            compressed: false,
            size: None,
            buf: vec![0; buffer_size],
            start: 0,
            end: 0,
            offset: 0,
            record: 0,
            eof: false,
            done: false,
            stats: ReaderStats::default(),
        }
    }

    /// The next record's payload, `Ok(None)` at the end of the stream.
    ///
    /// After an error (policy `fail`, or an I/O error) the reader is finished and returns
    /// `Ok(None)`.
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<&[u8]>> {
        Ok(self.next_range()?.map(|r| &self.buf[r]))
    }

    /// Reads the next record with its index in the stream (records skipped under a
    /// skipping policy count: the index is the record's place in the file).
    pub fn next_indexed(&mut self) -> Result<Option<(u64, &[u8])>> {
        match self.next_range()? {
            Some(r) => Ok(Some((self.record - 1, &self.buf[r]))),
            None => Ok(None),
        }
    }

    /// Reads the next record into an owned vector (a convenience that allocates).
    pub fn next_owned(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.next_record()?.map(<[u8]>::to_vec))
    }

    /// The name this reader reports in errors.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stream offset of the next record (in the decompressed stream if compressed).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Index of the next record in this stream.
    pub fn record_index(&self) -> u64 {
        self.record
    }

    /// True when offsets count bytes of a decompressed stream.
    pub fn is_compressed(&self) -> bool {
        self.compressed
    }

    /// What has been delivered and skipped so far.
    pub fn stats(&self) -> &ReaderStats {
        &self.stats
    }

    /// A corrupt-record error at the current position.
    pub fn corrupt(&self, kind: CorruptKind) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            record: self.record,
            offset: self.offset,
            in_decompressed: self.compressed,
            kind,
        }
    }

    /// Like [`corrupt`](Self::corrupt), for the record just returned by `next_record`
    /// (whose payload turned out not to decode).
    pub fn corrupt_previous(&self, kind: CorruptKind, payload_len: usize) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            record: self.record.saturating_sub(1),
            offset: self.offset - (HEADER_LEN + payload_len + FOOTER_LEN) as u64,
            in_decompressed: self.compressed,
            kind,
        }
    }

    fn next_range(&mut self) -> Result<Option<Range<usize>>> {
        loop {
            if self.done {
                return Ok(None);
            }
            match self.try_record() {
                Ok(Some(r)) => return Ok(Some(r)),
                Ok(None) => {
                    self.done = true;
                    return Ok(None);
                }
                Err(Fault::Io(e)) => {
                    self.done = true;
                    return Err(Error::io(&self.path, self.locate_io(e)));
                }
                Err(Fault::Corrupt(kind, extent)) => match self.opts.on_corrupt {
                    CorruptPolicy::Fail => {
                        self.done = true;
                        return Err(self.corrupt(kind));
                    }
                    CorruptPolicy::SkipFile => {
                        self.skip_rest(kind);
                        return Ok(None);
                    }
                    CorruptPolicy::Skip => {
                        if matches!(kind, CorruptKind::Compression(_)) {
                            // A damaged deflate stream cannot be resynchronised.
                            self.skip_rest(kind);
                            return Ok(None);
                        }
                        self.skip(kind, extent)?;
                    }
                },
            }
        }
    }

    /// Tries to read one record at the current position.
    #[inline]
    fn try_record(&mut self) -> Result<Option<Range<usize>>, Fault> {
        if !self.fill(HEADER_LEN)? {
            if self.end == self.start {
                return Ok(None);
            }
            let available = (self.end - self.start) as u64;
            return Err(Fault::Corrupt(
                CorruptKind::Truncated { needed: HEADER_LEN as u64, available },
                None,
            ));
        }
        let len = self.check_header()?;
        let total = HEADER_LEN as u64 + len + FOOTER_LEN as u64;
        if let Some(size) = self.size
            && self.offset + total > size
        {
            let available = size.saturating_sub(self.offset);
            return Err(Fault::Corrupt(CorruptKind::Truncated { needed: total, available }, None));
        }
        let total_us = total as usize;
        if !self.fill(total_us)? {
            let available = (self.end - self.start) as u64;
            return Err(Fault::Corrupt(CorruptKind::Truncated { needed: total, available }, None));
        }
        let data = self.start + HEADER_LEN..self.start + HEADER_LEN + len as usize;
        if self.opts.verify_crc {
            let stored =
                u32::from_le_bytes(self.buf[data.end..data.end + FOOTER_LEN].try_into().expect("4 bytes"));
            let computed = masked_crc(&self.buf[data.clone()]);
            if stored != computed {
                return Err(Fault::Corrupt(CorruptKind::DataCrc { stored, computed }, Some(total)));
            }
        }
        self.consume(total_us);
        self.record += 1;
        self.stats.records += 1;
        self.stats.bytes += len;
        Ok(Some(data))
    }

    /// Validates the header at `buf[start..]` (which must hold `HEADER_LEN` bytes) and
    /// returns the payload length.
    #[inline]
    fn check_header(&self) -> Result<u64, Fault> {
        let h: &[u8; HEADER_LEN] =
            self.buf[self.start..self.start + HEADER_LEN].try_into().expect("12 bytes");
        let len = decode_header(h).map_err(|(stored, computed)| {
            Fault::Corrupt(CorruptKind::LengthCrc { stored, computed }, None)
        })?;
        if len > self.opts.max_record_len {
            let limit = self.opts.max_record_len;
            return Err(Fault::Corrupt(CorruptKind::TooLarge { length: len, limit }, None));
        }
        Ok(len)
    }

    /// Checks the payload at `data` (in `buf`, followed by its footer) against the stored
    /// checksum: `Err((stored, computed))` on a mismatch.
    #[inline]
    fn check_data(&self, data: &Range<usize>) -> Result<(), (u32, u32)> {
        let stored =
            u32::from_le_bytes(self.buf[data.end..data.end + FOOTER_LEN].try_into().expect("4 bytes"));
        let computed = masked_crc(&self.buf[data.clone()]);
        if stored == computed { Ok(()) } else { Err((stored, computed)) }
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Skips the corrupt record at the current position: over its known extent, or by
    /// scanning forward byte by byte for the next offset where a whole record validates
    /// (header checksum, length within limits and, when verifying, payload checksum).
    fn skip(&mut self, kind: CorruptKind, extent: Option<u64>) -> Result<()> {
        let from = self.offset;
        let record = self.record;
        let outcome = match extent {
            Some(n) => {
                self.consume(n as usize);
                Ok(())
            }
            None => self.resync(),
        };
        // The corrupt region is counted whatever happens next.
        let event = SkipEvent {
            path: self.path.clone(),
            record,
            offset: from,
            kind,
            bytes: self.offset - from,
            rest_of_file: false,
        };
        self.note_skip(event);
        self.record += 1;
        match outcome {
            Ok(()) => Ok(()),
            Err(Fault::Io(e)) => {
                self.done = true;
                Err(Error::io(&self.path, e))
            }
            Err(Fault::Corrupt(inner, _)) => {
                // The compressed stream broke while scanning: give up on the file.
                self.skip_rest(inner);
                Ok(())
            }
        }
    }

    fn resync(&mut self) -> Result<(), Fault> {
        self.consume(1);
        loop {
            if !self.fill(HEADER_LEN)? {
                let rest = self.end - self.start;
                self.consume(rest);
                return Ok(());
            }
            if let Ok(len) = self.check_header() {
                let total = HEADER_LEN as u64 + len + FOOTER_LEN as u64;
                let fits = self.size.is_none_or(|size| self.offset + total <= size);
                if fits && self.fill(total as usize)? {
                    let data = self.start + HEADER_LEN..self.start + HEADER_LEN + len as usize;
                    if !self.opts.verify_crc || self.check_data(&data).is_ok() {
                        return Ok(());
                    }
                }
            }
            self.consume(1);
        }
    }

    fn skip_rest(&mut self, kind: CorruptKind) {
        let bytes = match self.size {
            Some(size) => size.saturating_sub(self.offset),
            None => (self.end - self.start) as u64,
        };
        let event = SkipEvent {
            path: self.path.clone(),
            record: self.record,
            offset: self.offset,
            kind,
            bytes,
            rest_of_file: true,
        };
        self.note_skip(event);
        self.done = true;
    }

    fn note_skip(&mut self, event: SkipEvent) {
        self.stats.note_skip(event);
    }

    /// Makes `need` bytes available at `buf[start..]`; false if the stream ends first.
    #[inline]
    fn fill(&mut self, need: usize) -> Result<bool, Fault> {
        while self.end - self.start < need {
            if self.eof {
                return Ok(false);
            }
            self.make_room(need);
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.classify(e)),
            }
        }
        Ok(true)
    }

    /// Moves the unread bytes to the front and grows or shrinks the buffer so that
    /// `need` bytes fit with room to read.
    #[cold]
    fn make_room(&mut self, need: usize) {
        let live = self.end - self.start;
        let base = self.opts.buffer_size;
        if self.buf.len() > 4 * base && need <= base && live <= base {
            // Shrink after an unusually large record.
            let mut small = vec![0; base];
            small[..live].copy_from_slice(&self.buf[self.start..self.end]);
            self.buf = small;
            self.start = 0;
            self.end = live;
            return;
        }
        if self.start > 0 && (self.buf.len() - self.start < need || self.end == self.buf.len()) {
            self.buf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = live;
        }
        if self.buf.len() < need {
            // Grow to fit the record, with a quarter buffer of slack so the next read is
            // not tiny. Where the input's size is unknown (compressed, or not a regular
            // file), a declared length is not yet backed by bytes: grow by doubling as
            // they arrive, so a hostile length costs at most twice what the stream holds.
            let target = match self.size {
                Some(_) => need,
                None => need.min(self.buf.len().saturating_mul(2).max(base)),
            };
            self.buf.resize(target + base / 4, 0);
        }
    }

    fn classify(&self, e: io::Error) -> Fault {
        let stream_error = matches!(
            e.kind(),
            io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput | io::ErrorKind::UnexpectedEof
        );
        if self.compressed && stream_error {
            Fault::Corrupt(CorruptKind::Compression(e.to_string()), None)
        } else {
            Fault::Io(e)
        }
    }
}
