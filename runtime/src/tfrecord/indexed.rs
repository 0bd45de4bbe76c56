//! Random access to the records of indexed TFRecord files: record `k` read with one
//! positioned read (`pread`), and many records of many files read together
//! ([`read_window`]): from a local file's read-only memory map, one `memcpy` a record
//! (guarded against a file truncated under the map: `mapped`), else in offset order with
//! nearby ones coalesced into one `pread`.
//!
//! Every record read this way is checked as the streaming reader checks it: the length
//! checksum always, then that the declared length fills the indexed extent exactly (else
//! the file changed since it was indexed: [`CorruptKind::IndexMismatch`]), then the
//! payload checksum unless `verify_crc` is off. Errors name the file, the record and its
//! offset. A data file shorter than its index says is a stale index ([`Error::Index`]).
//!
//! Positioned reads take `&self`, so one [`IndexedFile`] serves any number of threads.
//! A mapped copy that finds the file cut short (a page past its end), or a corrupt record
//! copied from a map, is checked against the file's length: a shorter file is the same
//! stale-index error a short `pread` gives.
//!
//! An object in a store (`s3://…`) is read the same way, each positioned read (a record,
//! or a window's coalesced span) one ranged GET, retried and resumed as streamed reads
//! are (`storage::reader::fetch`); its index is the object `URL.idx` beside it.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::storage::{self, Object, ReadOptions};

use super::index::{Index, index_path};
use super::mapped::Mapping;
use super::{FOOTER_LEN, HEADER_LEN, decode_header, masked_crc};
use crate::error::{CorruptKind, Error, Result};

/// A TFRecord file open for random access through its index.
#[derive(Debug)]
pub struct IndexedFile {
    path: PathBuf,
    file: Backing,
    index: Index,
    /// The file's memory map, made on the first mapped read (`None`: an object, or a
    /// file that cannot be mapped).
    map: OnceLock<Option<Mapping>>,
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
            return Ok(IndexedFile {
                path: path.to_path_buf(),
                file: Backing::Object(object),
                index,
                map: OnceLock::new(),
            });
        }
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let index = Index::load_for(&file, path, &index_path(path))?;
        Ok(IndexedFile { path: path.to_path_buf(), file: Backing::File(file), index, map: OnceLock::new() })
    }

    /// Opens `path` with an index already in hand (built or loaded by the caller),
    /// checking that it describes the file.
    pub fn with_index(path: impl AsRef<Path>, index: Index) -> Result<IndexedFile> {
        let path = path.as_ref();
        if storage::is_url(path) {
            let object = Arc::new(Object::head(path).map_err(|e| Error::io(path, e))?);
            index.check_matches_object(&object, path, &index_path(path))?;
            return Ok(IndexedFile {
                path: path.to_path_buf(),
                file: Backing::Object(object),
                index,
                map: OnceLock::new(),
            });
        }
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        index.check_matches(&file, path, &index_path(path))?;
        Ok(IndexedFile { path: path.to_path_buf(), file: Backing::File(file), index, map: OnceLock::new() })
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
        let (offset, extent) = self.extent_of(k)?;
        let mut buf = vec![0u8; extent as usize];
        self.read_at(&mut buf, offset)?;
        check_record(&buf, verify_crc).map(<[u8]>::to_vec).map_err(|kind| self.corrupt(k, kind))
    }

    /// Record `k`'s (offset, extent), or an error saying the file has no such record.
    fn extent_of(&self, k: u64) -> Result<(u64, u64)> {
        self.index.extent(k).ok_or_else(|| {
            Error::Invalid(format!("{}: no record {k} (the file has {})", self.path.display(), self.len()))
        })
    }

    /// The corrupt-record error for record `k`.
    pub fn corrupt(&self, k: u64, kind: CorruptKind) -> Error {
        let offset = self.index.offsets().get(k as usize).copied().unwrap_or(0);
        Error::Corrupt { path: self.path.clone(), record: k, offset, in_decompressed: false, kind }
    }

    /// The file's memory map, when it has a usable one (made on first use; never for an
    /// object, nor after a mapped copy faulted).
    fn mapping(&self) -> Option<&Mapping> {
        let Backing::File(f) = &self.file else { return None };
        let map = self.map.get_or_init(|| Mapping::new(f, self.index.file_len())).as_ref()?;
        (!map.faulted()).then_some(map)
    }

    /// The error for a mapped copy that faulted: the stale index when the file is now
    /// shorter than its index says, else an I/O error.
    fn fault(&self) -> Error {
        match self.check_len() {
            Err(e) => e,
            Ok(()) => Error::io(
                &self.path,
                std::io::Error::other("a page of the memory-mapped file could not be read"),
            ),
        }
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
    /// Copy the records of local files out of a read-only memory map of each (default
    /// true); false reads every file with coalesced `pread`s. Objects in a store, and a
    /// file that cannot be mapped, always take `pread`s (ranged GETs for objects).
    pub map: bool,
}

impl Default for CoalesceOptions {
    fn default() -> Self {
        CoalesceOptions { max_gap: 4 << 10, max_span: 1 << 20, verify_crc: true, map: true }
    }
}

/// Where one record of a window landed: its payload's bytes in the window's arena, or why
/// the record is corrupt.
pub type Landed = Result<Range<usize>, CorruptKind>;

/// Reads the records `requests` names from `files` into `arena` (cleared first, then
/// holding each record's whole extent), validates each, and hands `land` each request's
/// slot with where its payload lies in `arena` (or why it is corrupt), once per request.
/// Records of mapped files are copied out of the map in request order, the index entries
/// and records a few requests ahead prefetched (a window's records are scattered: the
/// copies wait on memory, not on instructions); the rest are sorted by (file, record) and
/// read in runs of nearby records with one positioned read each into `scratch` (grown to
/// the longest run). An I/O error, a file found cut short, a request for a record that
/// does not exist, or an error from `land` ends the batch with that error; a corrupt
/// record does not (the caller applies its policy). Returns the number of positioned
/// reads issued (mapped copies are none).
pub fn read_window(
    files: &[IndexedFile],
    requests: &mut [RecordRequest],
    opts: &CoalesceOptions,
    scratch: &mut Vec<u8>,
    arena: &mut Vec<u8>,
    mut land: impl FnMut(u32, Landed) -> Result<()>,
) -> Result<u64> {
    /// How many requests ahead a mapped record is prefetched (its index entry twice as
    /// far ahead). 4 was clearly slower on tabular records; 8, 12, 16 and 32 were within
    /// this machine's noise of each other.
    const AHEAD: usize = 8;
    arena.clear();
    let file_of = |r: &RecordRequest| {
        files
            .get(r.file as usize)
            .ok_or_else(|| Error::Invalid(format!("record request names file {} of {}", r.file, files.len())))
    };
    let maps: Vec<Option<&Mapping>> =
        files.iter().map(|f| if opts.map { f.mapping() } else { None }).collect();
    let map_of = |r: &RecordRequest| maps.get(r.file as usize).copied().flatten();
    let mut unmapped = 0;
    for i in 0..requests.len() {
        if let Some(r) = requests.get(i + 2 * AHEAD)
            && map_of(r).is_some()
        {
            files[r.file as usize].index.prefetch(r.record);
        }
        if let Some(r) = requests.get(i + AHEAD)
            && let (Some(map), Some((at, len))) = (map_of(r), files[r.file as usize].index.extent(r.record))
        {
            map.prefetch(at, len);
        }
        let r = requests[i];
        let file = file_of(&r)?;
        let Some(map) = map_of(&r) else {
            requests.swap(unmapped, i);
            unmapped += 1;
            continue;
        };
        let (at, len) = file.extent_of(r.record)?;
        let start = arena.len();
        arena.resize(start + len as usize, 0);
        map.copy_to(&mut arena[start..], at).map_err(|_| file.fault())?;
        let landed = check_landed(arena, start, opts.verify_crc);
        if landed.is_err() {
            // A corrupt record copied from a map may be a file cut short inside a page.
            file.check_len()?;
        }
        land(r.slot, landed)?;
    }
    let requests = &mut requests[..unmapped];
    requests.sort_unstable();
    let mut reads = 0;
    let mut i = 0;
    while i < requests.len() {
        let first = requests[i];
        let file = file_of(&first)?;
        let (start, first_len) = file.extent_of(first.record)?;
        let mut end = start + first_len;
        let mut j = i + 1;
        while let Some(next) = requests.get(j) {
            if next.file != first.file {
                break;
            }
            let (at, len) = file.extent_of(next.record)?;
            // A repeated record (at < end: distinct records do not overlap) joins the run
            // and is read once.
            let far = at > end.saturating_add(opts.max_gap) || at + len - start > opts.max_span;
            if at >= end && far {
                break;
            }
            end = end.max(at + len);
            j += 1;
        }
        reads += 1;
        if j == i + 1 {
            // A run of one record: read straight into the arena.
            let at = arena.len();
            arena.resize(at + first_len as usize, 0);
            file.read_at(&mut arena[at..], start)?;
            land(first.slot, check_landed(arena, at, opts.verify_crc))?;
            i = j;
            continue;
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
        for r in &requests[i..j] {
            let (at, len) = file.extent_of(r.record)?;
            let rel = (at - start) as usize;
            let from = arena.len();
            arena.extend_from_slice(&scratch[rel..rel + len as usize]);
            land(r.slot, check_landed(arena, from, opts.verify_crc))?;
        }
        i = j;
    }
    Ok(reads)
}

/// Validates the record whose extent is `arena[start..]`: its payload's range in `arena`.
#[inline]
fn check_landed(arena: &[u8], start: usize, verify_crc: bool) -> Landed {
    check_record(&arena[start..], verify_crc)?;
    Ok(start + HEADER_LEN..arena.len() - FOOTER_LEN)
}

/// Reads the records `requests` names from `files` as [`read_window`] does, each payload
/// (or why it is corrupt) stored in `out[slot]` as its own vector. Returns the number of
/// positioned reads issued.
pub fn read_records(
    files: &[IndexedFile],
    requests: &mut [RecordRequest],
    opts: &CoalesceOptions,
    scratch: &mut Vec<u8>,
    out: &mut [Option<Result<Vec<u8>, CorruptKind>>],
) -> Result<u64> {
    let mut arena = Vec::new();
    let slots = out.len();
    let mut landed = vec![None; slots];
    let reads = read_window(files, requests, opts, scratch, &mut arena, |slot, l| {
        let o = landed
            .get_mut(slot as usize)
            .ok_or_else(|| Error::Invalid(format!("record request for slot {slot} of {slots}")))?;
        *o = Some(l);
        Ok(())
    })?;
    for (o, l) in out.iter_mut().zip(landed) {
        if let Some(l) = l {
            *o = Some(l.map(|range| arena[range].to_vec()));
        }
    }
    Ok(reads)
}
