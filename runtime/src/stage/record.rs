//! [`Record`]: one serialized record and where it came from, so that an error in any
//! stage after the reader (a malformed `tf.train.Example`, a label out of range, a
//! division by zero) can name the file and the record, on every path: the interleave of
//! readers, the global shuffle, a `batch` of records and the fused reader.
//!
//! The origin is an [`Origin`]: a file number, a [`Unit`] (a record of a TFRecord file or
//! a line of a text file) and an index, 16 bytes and `Copy`. File numbers index a process-wide table of the paths read so far (one entry per
//! distinct path, added when a file is opened), so carrying the origin costs no
//! reference count per record.

use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use super::Element;
use super::cache::CacheCodec;

/// The paths of the files records came from, numbered in the order first seen.
#[derive(Default)]
struct Files {
    ids: HashMap<Arc<Path>, u32>,
    paths: Vec<Arc<Path>>,
}

fn files() -> &'static Mutex<Files> {
    static FILES: OnceLock<Mutex<Files>> = OnceLock::new();
    FILES.get_or_init(Mutex::default)
}

/// A file records come from: its number in the process's table of paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(u32);

impl FileId {
    /// No file: a record made in memory, or read back from a cache.
    pub const NONE: FileId = FileId(u32::MAX);

    /// The number of `path`, added to the table the first time it is seen.
    pub fn of(path: &Path) -> FileId {
        let mut files = files().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = files.ids.get(path) {
            return FileId(id);
        }
        let Ok(id) = u32::try_from(files.paths.len()) else { return FileId::NONE };
        if id == u32::MAX {
            return FileId::NONE;
        }
        let path: Arc<Path> = Arc::from(path);
        files.ids.insert(path.clone(), id);
        files.paths.push(path);
        FileId(id)
    }

    /// The path, unless this is [`FileId::NONE`].
    pub fn path(self) -> Option<Arc<Path>> {
        if self == FileId::NONE {
            return None;
        }
        let files = files().lock().unwrap_or_else(|p| p.into_inner());
        files.paths.get(self.0 as usize).cloned()
    }
}

/// What an [`Origin`]'s index counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Unit {
    /// Records of a TFRecord file: named `path: record N` (N from 0, as `sluice cat`
    /// numbers them).
    #[default]
    Record,
    /// Lines of a text or CSV file: named `path:LINE` (LINE from 1, as editors and
    /// compilers number them).
    Line,
    /// A whole file (`read_file`'s elements): named `path`.
    File,
}

/// Where a record came from: record `index` (counted from 0) of a file, or the line
/// `index + 1` of a text file (the first line of a CSV row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The file.
    pub file: FileId,
    /// What `index` counts.
    pub unit: Unit,
    /// The record's index in the file, or the line's, counted from 0.
    pub index: u64,
}

impl Origin {
    /// An unknown origin.
    pub const UNKNOWN: Origin = Origin { file: FileId::NONE, unit: Unit::Record, index: 0 };

    /// Record `index` of `file`.
    #[inline]
    pub fn new(file: FileId, index: u64) -> Origin {
        Origin { file, unit: Unit::Record, index }
    }

    /// The line of `file` whose number counted from 0 is `line0` (named `path:LINE` with
    /// `LINE = line0 + 1`).
    #[inline]
    pub fn line(file: FileId, line0: u64) -> Origin {
        Origin { file, unit: Unit::Line, index: line0 }
    }

    /// The whole of `file` (an element of `read_file`), named by its path alone.
    #[inline]
    pub fn file(file: FileId) -> Origin {
        Origin { file, unit: Unit::File, index: 0 }
    }

    /// The origin `n` records (or lines) after this one, in the same file.
    #[inline]
    pub fn advanced(self, n: u64) -> Origin {
        Origin { index: self.index + n, ..self }
    }

    /// The 1-based line number, for a line origin of a known file.
    pub fn line_number(&self) -> Option<u64> {
        (self.is_known() && self.unit == Unit::Line).then_some(self.index + 1)
    }

    /// Whether the file is known.
    pub fn is_known(&self) -> bool {
        self.file != FileId::NONE
    }

    /// `error` prefixed with `file: record N: ` (`file:LINE: ` for a line, `file: ` for a
    /// whole file) when the origin is known.
    pub fn name_in(&self, error: impl fmt::Display) -> String {
        if self.is_known() { format!("{self}: {error}") } else { error.to_string() }
    }
}

/// `path: record N`, `path:LINE` for a line, `path` for a whole file, or `a record of
/// unknown origin`.
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.file.path(), self.unit) {
            (Some(p), Unit::Record) => write!(f, "{}: record {}", p.display(), self.index),
            (Some(p), Unit::Line) => write!(f, "{}:{}", p.display(), self.index + 1),
            (Some(p), Unit::File) => write!(f, "{}", p.display()),
            (None, _) => f.write_str("a record of unknown origin"),
        }
    }
}

/// One serialized record (a `tf.train.Example`, or any bytes a TFRecord holds) and its
/// [`Origin`]. It reads as the bytes (`&record[..]`, `record.as_ref()`); records compare,
/// order and hash by their bytes alone.
#[derive(Clone, Default)]
pub struct Record {
    bytes: Vec<u8>,
    origin: Origin,
}

impl Default for Origin {
    fn default() -> Self {
        Origin::UNKNOWN
    }
}

impl Record {
    /// `bytes`, read from `origin`.
    #[inline]
    pub fn new(bytes: Vec<u8>, origin: Origin) -> Record {
        Record { bytes, origin }
    }

    /// Where the record came from.
    #[inline]
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, owned.
    #[inline]
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl Deref for Record {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Record {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// A record made in memory: of unknown origin.
impl From<Vec<u8>> for Record {
    fn from(bytes: Vec<u8>) -> Self {
        Record { bytes, origin: Origin::UNKNOWN }
    }
}

impl From<Record> for Vec<u8> {
    fn from(r: Record) -> Self {
        r.bytes
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for Record {}

impl PartialOrd for Record {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Record {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.bytes.cmp(&other.bytes)
    }
}

impl std::hash::Hash for Record {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes.hash(state);
    }
}

impl PartialEq<Vec<u8>> for Record {
    fn eq(&self, other: &Vec<u8>) -> bool {
        &self.bytes == other
    }
}

impl PartialEq<Record> for Vec<u8> {
    fn eq(&self, other: &Record) -> bool {
        self == &other.bytes
    }
}

impl PartialEq<[u8]> for Record {
    fn eq(&self, other: &[u8]) -> bool {
        self.bytes == other
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.bytes.fmt(f)
    }
}

impl Element for Record {
    const FLAT: bool = false;
    #[inline]
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.bytes.len()
    }
}

/// The bytes only: a record read back from a cache has an unknown origin.
impl CacheCodec for Record {
    fn encode(&self, out: &mut Vec<u8>) {
        self.bytes.encode(out);
    }
    fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String> {
        Vec::<u8>::decode(bytes).map(Record::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_name_the_file_and_record() {
        let a = FileId::of(Path::new("/data/a.tfrecord"));
        assert_eq!(FileId::of(Path::new("/data/a.tfrecord")), a, "one number per path");
        assert_ne!(FileId::of(Path::new("/data/b.tfrecord")), a);
        let r = Record::new(b"xyz".to_vec(), Origin::new(a, 7));
        assert_eq!(&r[..], b"xyz");
        assert_eq!(r.origin().to_string(), "/data/a.tfrecord: record 7");
        assert_eq!(r.origin().name_in("bad"), "/data/a.tfrecord: record 7: bad");
        assert_eq!(Record::from(b"xyz".to_vec()), r, "equal bytes, equal records");
        assert_eq!(Origin::UNKNOWN.name_in("bad"), "bad");
        assert!(size_of::<Origin>() <= 16);
        let t = FileId::of(Path::new("/data/a.csv"));
        let l = Origin::line(t, 6);
        assert_eq!(l.to_string(), "/data/a.csv:7");
        assert_eq!(l.name_in("bad"), "/data/a.csv:7: bad");
        assert_eq!((l.line_number(), Origin::new(t, 6).line_number()), (Some(7), None));
        assert_eq!(l.advanced(2), Origin::line(t, 8));
        assert_ne!(l, Origin::new(t, 6), "a line is not a record");
        let f = Origin::file(FileId::of(Path::new("/data/cat/1.jpg")));
        assert_eq!(f.name_in("bad"), "/data/cat/1.jpg: bad");
        assert_eq!(f.line_number(), None);
    }
}
