//! The record index of a TFRecord file: where each record starts, so that record `k` can
//! be read without reading the records before it (the global shuffle's random access).
//!
//! # Where it lives
//!
//! The index of `DIR/NAME` is the sidecar file `DIR/NAME.idx` ([`index_path`]): the data
//! file's whole name with `.idx` appended (`train-00000-of-00016.tfrecord` →
//! `train-00000-of-00016.tfrecord.idx`). `sluice index FILE...` writes it ([`write_index`]);
//! it is written beside the data as `NAME.idx.tmp-PID` and renamed into place, so an
//! index file is either complete or absent. The data may be an object (`s3://…`): its
//! index is then an object beside it, uploaded whole. When `SLUICE_INDEX_DIR` is set (a
//! local directory or a URL prefix; for a bucket one cannot write to) every index is
//! `$SLUICE_INDEX_DIR/NAME.idx` instead, for writing and for reading alike
//! ([`index_path_in`]; `sluice index --index-dir` names it per command).
//!
//! # Format (version 1, little-endian)
//!
//! ```text
//! offset  bytes  field
//!      0      8  magic "SLUICEIX"
//!      8      4  version = 1
//!     12      4  reserved = 0
//!     16      8  length of the data file in bytes
//!     24      8  N, the number of records
//!     32      4  crc32c of the data file's first min(4096, length) bytes
//!     36      4  crc32c of the data file's last min(4096, length) bytes
//!     40     8N  the byte offset of each record's header, in file order
//! 40 + 8N     4  crc32c of bytes [0, 40 + 8N) of the index
//! ```
//!
//! An index file is `44 + 8·N` bytes, and a loaded [`Index`] holds `8·N` bytes (one `u64`
//! per record) plus a few words. Record `k`'s extent runs from its offset to the next
//! record's (the last one's to the end of the file), so lengths are not stored: a
//! record's payload is its extent less 16 bytes of framing.
//!
//! # What is checked, and when
//!
//! - **Building** scans the file with the streaming reader with both checksums verified
//!   and the `fail` policy: a corrupt record fails the build with an error naming the
//!   file, the record and its offset; an index never skips a record silently. A GZIP or
//!   ZLIB file is refused (a compressed stream has no random access).
//! - **Loading** ([`Index::load`]) rejects, as [`Error::Index`] naming the index file and
//!   why: a wrong magic, version or reserved field; a size that does not match the
//!   declared count; a count above `length / 16` (a record is at least 16 bytes of
//!   framing; checked before anything is allocated, so a hostile count allocates
//!   nothing); a bad trailing checksum; offsets that are not a valid framing of a file of
//!   that length (first offset 0, each extent at least 16 bytes and at most
//!   [`MAX_EXTENT`], the last extent ending at the file's end). Then it compares the
//!   recorded length and the head and tail checksums with the data file: a mismatch is a
//!   stale index, an error telling the user to rerun `sluice index`. A stale index is
//!   never used, and never silently ignored either.
//! - **Reading** a record by its index (see [`IndexedFile`](super::IndexedFile)) checks
//!   that its header's length checksum holds, that the declared length fills exactly the
//!   indexed extent, and (unless turned off) the payload checksum. So a file rewritten in
//!   the middle with the same length and the same first and last 4 KiB is caught at the
//!   first record whose framing moved ([`CorruptKind::IndexMismatch`] or a checksum
//!   error, naming file, record and offset); records whose framing did not move are
//!   still exactly where the index says.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{CorruptPolicy, FOOTER_LEN, HEADER_LEN, ReaderOptions};
use crate::error::{Error, Result};
use crate::storage;

/// The first eight bytes of every index file.
pub const MAGIC: &[u8; 8] = b"SLUICEIX";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Bytes before the offsets.
const HEAD_LEN: usize = 40;
/// Bytes of the trailing checksum.
const TRAILER_LEN: usize = 4;
/// Bytes of the data file's head and tail that the fingerprint covers.
pub const FINGERPRINT_LEN: u64 = 4096;
/// Smallest extent of a record: header and footer around an empty payload.
const MIN_EXTENT: u64 = (HEADER_LEN + FOOTER_LEN) as u64;
/// Largest extent an index may declare: the reader's default `max_record_len` (1 GiB)
/// plus framing. A longer record could not have been indexed by [`build_index`].
pub const MAX_EXTENT: u64 = (1 << 30) + MIN_EXTENT;

/// The environment variable naming a directory (local, or a URL prefix) that holds the
/// indexes instead of the data's own directory: for data in a bucket one cannot write to.
pub const INDEX_DIR_ENV: &str = "SLUICE_INDEX_DIR";

/// The index file of the TFRecord file `data`: its name with `.idx` appended, beside it,
/// or in the directory [`INDEX_DIR_ENV`] names when it is set ([`index_path_in`]).
pub fn index_path(data: impl AsRef<Path>) -> PathBuf {
    let dir = std::env::var_os(INDEX_DIR_ENV).filter(|d| !d.is_empty()).map(PathBuf::from);
    index_path_in(data, dir.as_deref())
}

/// The index file of `data` in the directory `dir` (a local directory or a URL prefix):
/// `dir/NAME.idx` for the data's file name `NAME`; beside the data when `dir` is `None`.
/// Data files of one name in two directories need two index directories.
pub fn index_path_in(data: impl AsRef<Path>, dir: Option<&Path>) -> PathBuf {
    let data = data.as_ref();
    let mut name = match dir {
        None => data.as_os_str().to_owned(),
        Some(dir) => {
            let file = data.to_str().and_then(|s| s.rsplit('/').next()).map(std::ffi::OsString::from);
            let file = file.or_else(|| data.file_name().map(ToOwned::to_owned)).unwrap_or_default();
            storage::join(dir, &file.to_string_lossy()).into_os_string()
        }
    };
    name.push(".idx");
    PathBuf::from(name)
}

/// The record offsets of one TFRecord file, with what identifies the file they describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    file_len: u64,
    head_crc: u32,
    tail_crc: u32,
    offsets: Vec<u64>,
}

impl Index {
    /// Records in the file.
    pub fn len(&self) -> u64 {
        self.offsets.len() as u64
    }

    /// True when the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The length in bytes of the data file this index describes.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The offsets of the records' headers, in file order.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// Hints the processor to fetch record `k`'s index entry into cache (for random
    /// lookups a few records ahead); does nothing for a record that does not exist.
    #[inline]
    pub fn prefetch(&self, k: u64) {
        if let Some(at) = usize::try_from(k).ok().and_then(|k| self.offsets.get(k)) {
            super::mapped::prefetch(std::ptr::from_ref(at).cast());
        }
    }

    /// Record `k`'s byte offset and extent (header, payload and footer), if it exists.
    #[inline]
    pub fn extent(&self, k: u64) -> Option<(u64, u64)> {
        let k = usize::try_from(k).ok()?;
        let start = *self.offsets.get(k)?;
        let end = self.offsets.get(k + 1).copied().unwrap_or(self.file_len);
        Some((start, end - start))
    }

    /// Bytes of the index file: `44 + 8 · len()`.
    pub fn encoded_len(&self) -> u64 {
        (HEAD_LEN + TRAILER_LEN) as u64 + 8 * self.len()
    }

    /// The index in its file format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len() as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.file_len.to_le_bytes());
        out.extend_from_slice(&self.len().to_le_bytes());
        out.extend_from_slice(&self.head_crc.to_le_bytes());
        out.extend_from_slice(&self.tail_crc.to_le_bytes());
        for o in &self.offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and validates an index file's bytes (`path` names it in errors). This
    /// checks the format and that the offsets frame a file of the recorded length, not
    /// that the data file still has that content: [`Index::load`] does that too.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Index> {
        let head = check_head(bytes, bytes.len() as u64, path)?;
        let body_end = bytes.len() - TRAILER_LEN;
        let stored = u32::from_le_bytes(bytes[body_end..].try_into().expect("4 bytes"));
        let computed = crc32c::crc32c(&bytes[..body_end]);
        if stored != computed {
            return Err(bad(
                path,
                format!(
                    "index checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): \
                     the index is damaged; rerun `sluice index` on its data file"
                ),
            ));
        }
        let offsets: Vec<u64> = bytes[HEAD_LEN..body_end]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let index =
            Index { file_len: head.file_len, head_crc: head.head_crc, tail_crc: head.tail_crc, offsets };
        index.check_framing(path)?;
        Ok(index)
    }

    /// Loads the index of the TFRecord file or object `data` from [`index_path`]`(data)`
    /// and checks it against `data`. A missing index, a damaged one or a stale one is an
    /// [`Error::Index`] naming the index file and saying to run `sluice index`.
    pub fn load(data: impl AsRef<Path>) -> Result<Index> {
        let data = data.as_ref();
        Index::load_at(data, &index_path(data))
    }

    /// Loads the index at `index` (a local file or an object, beside `data` or elsewhere)
    /// and checks it against the file or object `data`.
    pub fn load_at(data: &Path, index: &Path) -> Result<Index> {
        if storage::is_url(data) {
            let object = Arc::new(storage::Object::head(data).map_err(|e| Error::io(data, e))?);
            return Index::load_for_object(&object, data, index);
        }
        let file = File::open(data).map_err(|e| Error::io(data, e))?;
        Index::load_for(&file, data, index)
    }

    /// Loads the index at `index` and checks it against the open data file `file`
    /// (named `data` in errors).
    pub fn load_for(file: &File, data: &Path, index: &Path) -> Result<Index> {
        let idx = Index::from_bytes(&read_index_bytes(data, index)?, index)?;
        idx.check_matches(file, data, index)?;
        Ok(idx)
    }

    /// Loads the index at `index` (an object, or a local file) and checks it against
    /// `object` (what a `HEAD` of `data` said): the counterpart of [`Index::load_for`].
    pub fn load_for_object(object: &Arc<storage::Object>, data: &Path, index: &Path) -> Result<Index> {
        let idx = Index::from_bytes(&read_index_bytes(data, index)?, index)?;
        idx.check_matches_object(object, data, index)?;
        Ok(idx)
    }

    /// [`Index::check_matches`] for an object: its length and the checksums of its first
    /// and last 4 KiB (two ranged GETs).
    pub fn check_matches_object(
        &self,
        object: &Arc<storage::Object>,
        data: &Path,
        index: &Path,
    ) -> Result<()> {
        self.check_fingerprint("object", object.size, data, index, || object_fingerprint(object, object.size))
    }

    /// Checks that the open data file `file` is the one this index was built from: same
    /// length, same first and last 4 KiB. A mismatch is a stale index.
    pub fn check_matches(&self, file: &File, data: &Path, index: &Path) -> Result<()> {
        let len = file.metadata().map_err(|e| Error::io(data, e))?.len();
        self.check_fingerprint("file", len, data, index, || fingerprint(file, len))
    }

    /// The data's length `len` and then its first and last 4 KiB's checksums (computed by
    /// `head_tail` only when the length matches) against the index's: a mismatch is a
    /// stale index naming `what` the data is.
    fn check_fingerprint(
        &self,
        what: &str,
        len: u64,
        data: &Path,
        index: &Path,
        head_tail: impl FnOnce() -> std::io::Result<(u32, u32)>,
    ) -> Result<()> {
        let stale = |why: String| {
            bad(
                index,
                format!(
                    "stale index: {why}; {} changed since it was indexed (rerun `sluice index {}`)",
                    data.display(),
                    data.display()
                ),
            )
        };
        if len != self.file_len {
            return Err(stale(format!("it describes {} bytes but the {what} has {len}", self.file_len)));
        }
        let (head, tail) = head_tail().map_err(|e| Error::io(data, e))?;
        if head != self.head_crc || tail != self.tail_crc {
            return Err(stale(format!("the checksum of the {what}'s first or last 4 KiB differs")));
        }
        Ok(())
    }

    /// Checks that the offsets frame a file of `file_len` bytes.
    fn check_framing(&self, path: &Path) -> Result<()> {
        let Some(&first) = self.offsets.first() else {
            return match self.file_len {
                0 => Ok(()),
                n => Err(bad(path, format!("no records listed for a file of {n} bytes"))),
            };
        };
        if first != 0 {
            return Err(bad(path, format!("the first record is at offset {first}, not 0")));
        }
        for (k, &start) in self.offsets.iter().enumerate() {
            let end = self.offsets.get(k + 1).copied().unwrap_or(self.file_len);
            match end.checked_sub(start) {
                Some(extent) if (MIN_EXTENT..=MAX_EXTENT).contains(&extent) => {}
                _ => {
                    return Err(bad(
                        path,
                        format!(
                            "record {k} at offset {start} would end at {end}, not a valid record \
                             extent (16 bytes to 1 GiB); rerun `sluice index`"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The validated fixed part of an index file.
struct Head {
    file_len: u64,
    head_crc: u32,
    tail_crc: u32,
}

/// Checks the first `HEAD_LEN` bytes of an index file of `size` bytes.
fn check_head(bytes: &[u8], size: u64, path: &Path) -> Result<Head> {
    if bytes.len() < HEAD_LEN || size < (HEAD_LEN + TRAILER_LEN) as u64 {
        return Err(bad(path, format!("truncated index ({size} bytes); rerun `sluice index`")));
    }
    if &bytes[..8] != MAGIC {
        return Err(bad(path, "not a sluice index (bad magic)".to_string()));
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    let version = u32_at(8);
    if version != VERSION {
        return Err(bad(path, format!("index version {version}, expected {VERSION}; rerun `sluice index`")));
    }
    if u32_at(12) != 0 {
        return Err(bad(path, "reserved header field is not zero".to_string()));
    }
    let file_len = u64_at(16);
    let count = u64_at(24);
    if count > file_len / MIN_EXTENT {
        return Err(bad(
            path,
            format!("declares {count} records, more than a file of {file_len} bytes can hold"),
        ));
    }
    let expected = (HEAD_LEN + TRAILER_LEN) as u64 + 8 * count;
    if size != expected {
        return Err(bad(
            path,
            format!("index is {size} bytes but {count} records need {expected}; rerun `sluice index`"),
        ));
    }
    Ok(Head { file_len, head_crc: u32_at(32), tail_crc: u32_at(36) })
}

fn bad(path: &Path, reason: String) -> Error {
    Error::Index { path: path.to_path_buf(), reason }
}

/// The bytes of the index file or object `index` of `data`, its fixed part checked before
/// the rest is read. Missing, it is an [`Error::Index`] saying to run `sluice index`.
fn read_index_bytes(data: &Path, index: &Path) -> Result<Vec<u8>> {
    let missing =
        || bad(index, format!("no index for {} (run `sluice index {}`)", data.display(), data.display()));
    if storage::is_url(index) {
        let bytes = match storage::read(index) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
            Err(e) => return Err(Error::io(index, e)),
        };
        let n = bytes.len().min(HEAD_LEN);
        check_head(&bytes[..n], bytes.len() as u64, index)?;
        return Ok(bytes);
    }
    // An index is a regular file, as data files are: opening a FIFO would wait for a
    // writer forever, and a device has no size. Checked before opening it, and again on
    // what was opened.
    let regular = |m: &std::fs::Metadata| {
        if m.is_file() {
            Ok(())
        } else {
            Err(bad(index, "not a regular file (an index is a file `sluice index` writes)".to_string()))
        }
    };
    match std::fs::metadata(index) {
        Ok(m) => regular(&m)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
        Err(e) => return Err(Error::io(index, e)),
    }
    let mut f = File::open(index).map_err(|e| Error::io(index, e))?;
    let meta = f.metadata().map_err(|e| Error::io(index, e))?;
    regular(&meta)?;
    let size = meta.len();
    // Validate the fixed part before allocating for the offsets: the declared count must
    // match the index's size and fit in the data file.
    let mut head = [0u8; HEAD_LEN];
    let n = read_up_to(&mut f, &mut head).map_err(|e| Error::io(index, e))?;
    check_head(&head[..n], size, index)?;
    let mut bytes = Vec::with_capacity(size as usize);
    bytes.extend_from_slice(&head);
    std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| Error::io(index, e))?;
    if bytes.len() as u64 != size {
        return Err(bad(index, "the index changed while it was read".to_string()));
    }
    Ok(bytes)
}

/// Reads into `buf` until it is full or the stream ends; the bytes read.
fn read_up_to(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match std::io::Read::read(f, &mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// [`fingerprint`] of an object of `len` bytes: two ranged GETs, in flight together.
fn object_fingerprint(object: &Arc<storage::Object>, len: u64) -> std::io::Result<(u32, u32)> {
    let n = FINGERPRINT_LEN.min(len);
    if n == 0 {
        return Ok((crc32c::crc32c(&[]), crc32c::crc32c(&[])));
    }
    let retry = storage::store::Retry::from_env();
    let parts = storage::reader::fetch_ranges(object, &[0..n, len - n..len], retry)?;
    Ok((crc32c::crc32c(&parts[0]), crc32c::crc32c(&parts[1])))
}

/// The crc32c of the first and of the last `min(FINGERPRINT_LEN, len)` bytes of `file`.
fn fingerprint(file: &File, len: u64) -> std::io::Result<(u32, u32)> {
    let n = FINGERPRINT_LEN.min(len) as usize;
    let mut buf = vec![0u8; n];
    file.read_exact_at(&mut buf, 0)?;
    let head = crc32c::crc32c(&buf);
    file.read_exact_at(&mut buf, len - n as u64)?;
    Ok((head, crc32c::crc32c(&buf)))
}

/// Builds the index of the uncompressed TFRecord file `path` by reading it through, with
/// both checksums verified. A corrupt record is an error naming the file, the record and
/// its offset; a GZIP or ZLIB file is an [`Error::Invalid`].
pub fn build_index(path: impl AsRef<Path>) -> Result<Index> {
    let path = path.as_ref();
    let opts =
        ReaderOptions { verify_crc: true, on_corrupt: CorruptPolicy::Fail, ..ReaderOptions::default() };
    let (mut reader, file_len) = super::open_with_size(path, &opts)?;
    if reader.is_compressed() {
        return Err(Error::Invalid(format!(
            "{}: a compressed TFRecord file cannot be indexed for random access \
             (write it uncompressed to shuffle it globally)",
            path.display()
        )));
    }
    let mut offsets = Vec::new();
    loop {
        let at = reader.offset();
        if reader.next_record()?.is_none() {
            break;
        }
        offsets.push(at);
    }
    // Fingerprint the file as it was read: its length must not have moved meanwhile.
    if storage::is_url(path) {
        // An object: the same checks over ranged GETs.
        let object = storage::Object::head(path).map_err(|e| Error::io(path, e))?;
        if object.size != file_len || reader.offset() != file_len {
            return Err(Error::Invalid(format!(
                "{}: the object changed while it was indexed",
                path.display()
            )));
        }
        let (head_crc, tail_crc) =
            object_fingerprint(&Arc::new(object), file_len).map_err(|e| Error::io(path, e))?;
        return Ok(Index { file_len, head_crc, tail_crc, offsets });
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len != file_len || reader.offset() != file_len {
        return Err(Error::Invalid(format!("{}: the file changed while it was indexed", path.display())));
    }
    let (head_crc, tail_crc) = fingerprint(&file, len).map_err(|e| Error::io(path, e))?;
    Ok(Index { file_len, head_crc, tail_crc, offsets })
}

/// Builds the index of `path` and writes it to [`index_path`]`(path)` (into a temporary
/// file renamed into place). Returns the index and where it was written.
pub fn write_index(path: impl AsRef<Path>) -> Result<(Index, PathBuf)> {
    let path = path.as_ref();
    write_index_to(path, index_path(path))
}

/// Builds the index of `path` and writes it to `dest` (a local file, written to a
/// temporary file renamed into place, or an object, one upload): complete or absent.
pub fn write_index_to(path: impl AsRef<Path>, dest: PathBuf) -> Result<(Index, PathBuf)> {
    let path = path.as_ref();
    let index = build_index(path)?;
    if storage::is_url(&dest) {
        // Beside the object: one upload, which appears whole or not at all.
        let mut w = storage::ObjectWriter::create(&dest).map_err(|e| Error::io(&dest, e))?;
        w.write_all(&index.to_bytes()).and_then(|()| w.finish()).map_err(|e| Error::io(&dest, e))?;
        return Ok((index, dest));
    }
    let mut tmp = dest.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(&index.to_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &dest)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(&dest, e));
    }
    Ok((index, dest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(file_len: u64, offsets: Vec<u64>) -> Index {
        Index { file_len, head_crc: 1, tail_crc: 2, offsets }
    }

    /// An index that is a FIFO (or any non-regular file) is refused at once, naming it:
    /// opening it would wait for a writer forever.
    #[test]
    fn an_index_that_is_not_a_regular_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a.tfrecord");
        std::fs::write(&data, b"").unwrap();
        let status = std::process::Command::new("mkfifo").arg(index_path(&data)).status().expect("mkfifo");
        assert!(status.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let d = data.clone();
        std::thread::spawn(move || tx.send(Index::load(&d).map(|_| ()).map_err(|e| e.to_string())));
        let got = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("load returns, without waiting");
        let err = got.expect_err("a FIFO is no index");
        assert!(err.contains("a.tfrecord.idx") && err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn index_path_appends_idx() {
        assert_eq!(index_path_in("d/a.tfrecord", None), PathBuf::from("d/a.tfrecord.idx"));
        assert_eq!(index_path_in("noext", None), PathBuf::from("noext.idx"));
    }

    #[test]
    fn an_index_dir_holds_the_index_by_the_data_file_name() {
        let at = |data: &str, dir: &str| index_path_in(data, Some(Path::new(dir)));
        assert_eq!(at("d/a.tfrecord", "/idx"), PathBuf::from("/idx/a.tfrecord.idx"));
        assert_eq!(at("s3://b/p/a.tfrecord", "/idx"), PathBuf::from("/idx/a.tfrecord.idx"));
        assert_eq!(at("s3://b/p/a.tfrecord", "s3://c/idx/"), PathBuf::from("s3://c/idx/a.tfrecord.idx"));
        assert_eq!(at("/data/a.tfrecord", "gs://c"), PathBuf::from("gs://c/a.tfrecord.idx"));
    }

    #[test]
    fn bytes_round_trip_and_size() {
        let p = Path::new("x.idx");
        for idx in [index(0, vec![]), index(16, vec![0]), index(100, vec![0, 20, 36])] {
            let b = idx.to_bytes();
            assert_eq!(b.len() as u64, idx.encoded_len());
            assert_eq!(b.len(), 44 + 8 * idx.offsets.len());
            assert_eq!(Index::from_bytes(&b, p).unwrap(), idx);
        }
    }

    #[test]
    fn extents() {
        let idx = index(100, vec![0, 20, 36]);
        assert_eq!(idx.extent(0), Some((0, 20)));
        assert_eq!(idx.extent(2), Some((36, 64)));
        assert_eq!(idx.extent(3), None);
        assert_eq!(idx.extent(u64::MAX), None);
    }

    #[test]
    fn bad_framing_is_rejected_with_a_reason() {
        let p = Path::new("x.idx");
        let cases = [
            (index(10, vec![]), "no records listed"),
            (index(40, vec![4, 20]), "first record is at offset 4"),
            (index(60, vec![0, 20, 20]), "record 1 at offset 20 would end at 20"),
            (index(60, vec![0, 20, 16]), "record 1 at offset 20 would end at 16"),
            (index(40, vec![0, 30]), "record 1 at offset 30 would end at 40"),
            (index(40, vec![0, 8]), "record 0 at offset 0 would end at 8"),
            (index(1 << 40, vec![0]), "would end at 1099511627776"),
        ];
        for (idx, why) in cases {
            let err = Index::from_bytes(&idx.to_bytes(), p).unwrap_err().to_string();
            assert!(err.starts_with("x.idx: ") && err.contains(why), "{err} (want {why})");
        }
    }

    #[test]
    fn hostile_count_is_rejected_before_allocating() {
        let mut b = index(32, vec![0, 16]).to_bytes();
        b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = Index::from_bytes(&b, Path::new("x.idx")).unwrap_err().to_string();
        assert!(err.contains("more than a file of 32 bytes can hold"), "{err}");
        // A count that fits the data file but not the index's size.
        b[24..32].copy_from_slice(&2u64.to_le_bytes());
        b.truncate(50);
        let err = Index::from_bytes(&b, Path::new("x.idx")).unwrap_err().to_string();
        assert!(err.contains("index is 50 bytes but 2 records need 60"), "{err}");
    }
}
