//! Random access to the records of indexed TFRecord files: record `k` read with one
//! positioned read (`pread`), and many records of many files read in offset order with
//! nearby ones coalesced into one read.
//!
//! Every record read this way is checked as the streaming reader checks it: the length
//! checksum always, then that the declared length fills the indexed extent exactly (else
//! the file changed since it was indexed: [`CorruptKind::IndexMismatch`]), then the
//! payload checksum unless `verify_crc` is off. Errors name the file, the record and its
//! offset. A data file shorter than its index says is a stale index ([`Error::Index`]).
//!
//! Positioned reads take `&self`, so one [`IndexedFile`] serves any number of threads.
//!
//! An object in a store (`s3://…`) is read the same way, each positioned read (a record,
//! or a window's coalesced span) one ranged GET, retried and resumed as streamed reads
//! are (`storage::reader::fetch`); its index is the object `URL.idx` beside it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::storage::{self, Object, ReadOptions};

use super::index::{Index, index_path};
use super::{FOOTER_LEN, HEADER_LEN, decode_header, masked_crc};
use crate::error::{CorruptKind, Error, Result};

/// A TFRecord file open for random access through its index.
#[derive(Debug)]
pub struct IndexedFile {
    path: PathBuf,
    file: Backing,
    index: Index,
}

/// What an indexed file's bytes are read from.
#[derive(Debug)]
enum Backing {
    File(File),
    Object(Arc<Object>),
}

impl IndexedFile {
    /// Opens `path` and loads its index from [`index_path`]`(path)`, checked against the
    /// file ([`Index::load_for`]): a missing, damaged or stale index is an
    /// [`Error::Index`] saying to run `sluice index`.
    pub fn open(path: impl AsRef<Path>) -> Result<IndexedFile> {
        let path = path.as_ref();
        if storage::is_url(path) {
            let object = Arc::new(Object::head(path).map_err(|e| Error::io(path, e))?);
            let index = Index::load_for_object(&object, path, &index_path(path))?;
            return Ok(IndexedFile { path: path.to_path_buf(), file: Backing::Object(object), index });
        }
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let index = Index::load_for(&file, path, &index_path(path))?;
        Ok(IndexedFile { path: path.to_path_buf(), file: Backing::File(file), index })
    }

    /// Opens `path` with an index already in hand (built or loaded by the caller),
    /// checking that it describes the file.
    pub fn with_index(path: impl AsRef<Path>, index: Index) -> Result<IndexedFile> {
        let path = path.as_ref();
        if storage::is_url(path) {
            let object = Arc::new(Object::head(path).map_err(|e| Error::io(path, e))?);
            index.check_matches_object(&object, path, &index_path(path))?;
            return Ok(IndexedFile { path: path.to_path_buf(), file: Backing::Object(object), index });
        }
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        index.check_matches(&file, path, &index_path(path))?;
        Ok(IndexedFile { path: path.to_path_buf(), file: Backing::File(file), index })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Records in the file.
    pub fn len(&self) -> u64 {
        self.index.len()
    }

    /// True when the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Checks that the file still has the length its index describes (one `fstat`): a
    /// cheap test, before a pass, that it was not appended to or truncated meanwhile.
    pub fn check_len(&self) -> Result<()> {
        let len = match &self.file {
            Backing::File(f) => f.metadata().map_err(|e| Error::io(&self.path, e))?.len(),
            Backing::Object(_) => Object::head(&self.path).map_err(|e| Error::io(&self.path, e))?.size,
        };
        if len != self.index.file_len() {
            return Err(self.stale(format!(
                "the file has {len} bytes but its index describes {}",
                self.index.file_len()
            )));
        }
        Ok(())
    }

    /// Reads record `k`'s payload into a new vector, with one positioned read.
    pub fn read_record(&self, k: u64, verify_crc: bool) -> Result<Vec<u8>> {
        let (offset, extent) = self.index.extent(k).ok_or_else(|| {
            Error::Invalid(format!("{}: no record {k} (the file has {})", self.path.display(), self.len()))
        })?;
        let mut buf = vec![0u8; extent as usize];
        self.read_at(&mut buf, offset)?;
        check_record(&buf, verify_crc).map(<[u8]>::to_vec).map_err(|kind| self.corrupt(k, kind))
    }

    /// The corrupt-record error for record `k`.
    pub fn corrupt(&self, k: u64, kind: CorruptKind) -> Error {
        let offset = self.index.offsets().get(k as usize).copied().unwrap_or(0);
        Error::Corrupt { path: self.path.clone(), record: k, offset, in_decompressed: false, kind }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let read = match &self.file {
            Backing::File(f) => f.read_exact_at(buf, offset),
            Backing::Object(o) => read_object_at(o, buf, offset),
        };
        read.map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.stale("the file is shorter than its index says".to_string())
            } else {
                Error::io(&self.path, e)
            }
        })
    }

    fn stale(&self, what: String) -> Error {
        Error::Index {
            path: index_path(&self.path),
            reason: format!(
                "stale index: {what}; {} changed since it was indexed (rerun `sluice index {}`)",
                self.path.display(),
                self.path.display()
            ),
        }
    }
}

/// `buf.len()` bytes of `object` from `offset`: one ranged GET, retried and resumed.
fn read_object_at(object: &Arc<Object>, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let end = offset + buf.len() as u64;
    if end > object.size {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let retry = ReadOptions::from_env().retry;
    let bytes = storage::rt::block_on(storage::reader::fetch(object.clone(), offset..end, retry))?;
    buf.copy_from_slice(&bytes);
    Ok(())
}

/// Validates one whole record (`header | payload | footer`, exactly its indexed extent)
/// and returns its payload.
#[inline]
pub fn check_record(rec: &[u8], verify_crc: bool) -> Result<&[u8], CorruptKind> {
    let header: &[u8; HEADER_LEN] = rec[..HEADER_LEN].try_into().expect("an extent holds a header");
    let declared =
        decode_header(header).map_err(|(stored, computed)| CorruptKind::LengthCrc { stored, computed })?;
    let indexed = (rec.len() - HEADER_LEN - FOOTER_LEN) as u64;
    if declared != indexed {
        return Err(CorruptKind::IndexMismatch { indexed, declared });
    }
    let payload = &rec[HEADER_LEN..rec.len() - FOOTER_LEN];
    if verify_crc {
        let stored = u32::from_le_bytes(rec[rec.len() - FOOTER_LEN..].try_into().expect("4 bytes"));
        let computed = masked_crc(payload);
        if stored != computed {
            return Err(CorruptKind::DataCrc { stored, computed });
        }
    }
    Ok(payload)
}

/// One record wanted by [`read_records`]: file `file` of the slice of files, record
/// `record` of that file, delivered to output slot `slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordRequest {
    /// Index of the file in the `files` slice.
    pub file: u32,
    /// Index of the record in its file.
    pub record: u64,
    /// Where the payload goes in the output.
    pub slot: u32,
}

/// How [`read_records`] groups reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoalesceOptions {
    /// Two records of one file are read with one `pread` when at most this many unwanted
    /// bytes lie between them (default 4 KiB: from the page cache, copying that much costs
    /// about what another system call does; `sluice bench shuffle --max-gap` measures it).
    pub max_gap: u64,
    /// The longest coalesced read (default 1 MiB); a single record longer than this is
    /// read on its own.
    pub max_span: u64,
    /// Verify each payload's checksum (default true; the length checksum always is).
    pub verify_crc: bool,
}

impl Default for CoalesceOptions {
    fn default() -> Self {
        CoalesceOptions { max_gap: 4 << 10, max_span: 1 << 20, verify_crc: true }
    }
}

/// Reads the records `requests` names from `files`: sorts the requests by (file, record),
/// reads runs of nearby records with one positioned read each into `scratch` (grown to
/// the longest run), validates each record, and stores its payload (or why it is
/// corrupt) in `out[slot]`. An I/O error, or a request for a record that does not exist,
/// ends the batch with an error; a corrupt record does not (the caller applies its
/// policy). Returns the number of reads issued.
pub fn read_records(
    files: &[IndexedFile],
    requests: &mut [RecordRequest],
    opts: &CoalesceOptions,
    scratch: &mut Vec<u8>,
    out: &mut [Option<Result<Vec<u8>, CorruptKind>>],
) -> Result<u64> {
    requests.sort_unstable();
    let slots = out.len();
    let mut reads = 0;
    let mut i = 0;
    while i < requests.len() {
        let first = requests[i];
        let file = files.get(first.file as usize).ok_or_else(|| {
            Error::Invalid(format!("record request names file {} of {}", first.file, files.len()))
        })?;
        let extent_of = |r: &RecordRequest| {
            file.index.extent(r.record).ok_or_else(|| {
                Error::Invalid(format!(
                    "{}: no record {} (the file has {})",
                    file.path.display(),
                    r.record,
                    file.len()
                ))
            })
        };
        let (start, first_len) = extent_of(&first)?;
        let mut end = start + first_len;
        let mut j = i + 1;
        while let Some(next) = requests.get(j) {
            if next.file != first.file {
                break;
            }
            let (at, len) = extent_of(next)?;
            // A repeated record (at < end: distinct records do not overlap) joins the run
            // and is read once.
            let far = at > end.saturating_add(opts.max_gap) || at + len - start > opts.max_span;
            if at >= end && far {
                break;
            }
            end = end.max(at + len);
            j += 1;
        }
        let span = (end - start) as usize;
        let max_span = usize::try_from(opts.max_span).unwrap_or(usize::MAX);
        if scratch.len() / 4 > max_span && span <= max_span {
            // Shrink after an unusually long record.
            *scratch = vec![0; span];
        }
        if scratch.len() < span {
            scratch.resize(span, 0);
        }
        file.read_at(&mut scratch[..span], start)?;
        reads += 1;
        for r in &requests[i..j] {
            let (at, len) = extent_of(r)?;
            let rel = (at - start) as usize;
            let rec = &scratch[rel..rel + len as usize];
            let slot = out
                .get_mut(r.slot as usize)
                .ok_or_else(|| Error::Invalid(format!("record request for slot {} of {slots}", r.slot)))?;
            *slot = Some(check_record(rec, opts.verify_crc).map(<[u8]>::to_vec));
        }
        i = j;
    }
    Ok(reads)
}
