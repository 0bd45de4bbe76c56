//! `cache`: the first complete pass is kept, in memory or in a file, and later passes
//! replay it instead of recomputing the input.
//!
//! The file cache is a TFRecord file (so it is CRC-checked) of elements encoded with
//! [`CacheCodec`]. It is written beside its final name and renamed into place only when a
//! pass completes, so an interrupted pass never leaves a truncated cache that a later run
//! would trust; a complete cache file from an earlier run is reused only when it was
//! made by the same pipeline: its first record is a header holding the fingerprint the
//! cache was built with ([`CacheFile::fingerprint`]: a compiled pipeline's plan,
//! parameters and files), and a file whose header is missing or different is rebuilt.
//! An entry that does not decode exactly (bytes missing or left over) is an error naming
//! the file and the record.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Ctx, DataIter, Dataset};
use crate::error::{CorruptKind, Error, Result};
use crate::tfrecord::{self, Compression, FileReader, ReaderOptions, RecordWriter};

/// Encoding of elements for the file cache.
pub trait CacheCodec: Sized {
    /// Appends the encoding of `self`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Decodes a value from the front of `bytes`, advancing it.
    fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String>;
}

fn take<'a>(bytes: &mut &'a [u8], n: usize) -> std::result::Result<&'a [u8], String> {
    if bytes.len() < n {
        return Err(format!("cache entry ends early: needed {n} more bytes, {} left", bytes.len()));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

macro_rules! codec_num {
    ($($t:ty),*) => {$(
        impl CacheCodec for $t {
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String> {
                let b = take(bytes, size_of::<$t>())?;
                Ok(<$t>::from_le_bytes(b.try_into().expect("exact length")))
            }
        }
    )*};
}
codec_num!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

impl CacheCodec for bool {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String> {
        Ok(take(bytes, 1)?[0] != 0)
    }
}

impl<T: CacheCodec> CacheCodec for Vec<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        (self.len() as u64).encode(out);
        for x in self {
            x.encode(out);
        }
    }
    fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String> {
        let n = u64::decode(bytes)?;
        // Every element takes at least one byte: a corrupt length cannot allocate more
        // than the entry holds.
        let mut v = Vec::with_capacity((n as usize).min(bytes.len()));
        for _ in 0..n {
            v.push(T::decode(bytes)?);
        }
        Ok(v)
    }
}

impl<T: CacheCodec + crate::column::Scalar> CacheCodec for crate::column::Tensor<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        let shape: Vec<u64> = self.shape().iter().map(|&d| d as u64).collect();
        shape.encode(out);
        (self.as_slice().len() as u64).encode(out);
        for x in self.as_slice() {
            x.encode(out);
        }
    }
    fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String> {
        let shape: Vec<u64> = Vec::decode(bytes)?;
        let data: Vec<T> = Vec::decode(bytes)?;
        let shape = shape
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        crate::column::Tensor::new(shape, data).map_err(|e| e.to_string())
    }
}

impl CacheCodec for String {
    fn encode(&self, out: &mut Vec<u8>) {
        (self.len() as u64).encode(out);
        out.extend_from_slice(self.as_bytes());
    }
    fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String> {
        let n = u64::decode(bytes)?;
        let b = take(bytes, usize::try_from(n).map_err(|_| "string length overflows".to_string())?)?;
        String::from_utf8(b.to_vec())
            .map_err(|e| format!("cache entry: a string is not UTF-8: {}", e.utf8_error()))
    }
}

macro_rules! codec_tuple {
    ($($n:ident),+) => {
        impl<$($n: CacheCodec),+> CacheCodec for ($($n,)+) {
            #[allow(non_snake_case)]
            fn encode(&self, out: &mut Vec<u8>) {
                let ($($n,)+) = self;
                $($n.encode(out);)+
            }
            fn decode(bytes: &mut &[u8]) -> std::result::Result<Self, String> {
                Ok(($($n::decode(bytes)?,)+))
            }
        }
    };
}
codec_tuple!(A);
codec_tuple!(A, B);
codec_tuple!(A, B, C);
codec_tuple!(A, B, C, D);

/// The shared slot holding a completed pass.
type Slot<T> = Arc<Mutex<Option<Arc<[T]>>>>;

/// `cache()`: the first complete pass kept in memory.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct CacheMemory<D: Dataset> {
    input: D,
    slot: Slot<D::Item>,
}

impl<D: Dataset> CacheMemory<D> {
    pub(crate) fn new(input: D) -> Self {
        CacheMemory { input, slot: Arc::new(Mutex::new(None)) }
    }
}

impl<D: Dataset> Dataset for CacheMemory<D>
where
    D::Item: Clone + Sync,
{
    type Item = D::Item;
    type Iter = CacheMemoryIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        let cached = self.slot.lock().expect("cache lock").clone();
        let mode = match cached {
            Some(items) => MemoryMode::Replay { items, pos: 0 },
            None => MemoryMode::Record { input: self.input.iter(ctx)?, kept: Vec::new() },
        };
        Ok(CacheMemoryIter { mode, slot: self.slot.clone() })
    }
}

#[derive(Debug)]
enum MemoryMode<I: DataIter> {
    Record { input: I, kept: Vec<I::Item> },
    Replay { items: Arc<[I::Item]>, pos: usize },
    Done,
}

/// One pass of [`CacheMemory`].
#[derive(Debug)]
pub struct CacheMemoryIter<I: DataIter> {
    mode: MemoryMode<I>,
    slot: Slot<I::Item>,
}

impl<I: DataIter> DataIter for CacheMemoryIter<I>
where
    I::Item: Clone + Sync,
{
    type Item = I::Item;

    fn next(&mut self) -> Result<Option<I::Item>> {
        match &mut self.mode {
            MemoryMode::Done => Ok(None),
            MemoryMode::Replay { items, pos } => {
                let x = items.get(*pos).cloned();
                *pos += 1;
                Ok(x)
            }
            MemoryMode::Record { input, kept } => match input.next()? {
                Some(x) => {
                    kept.push(x.clone());
                    Ok(Some(x))
                }
                None => {
                    if let MemoryMode::Record { kept, .. } =
                        std::mem::replace(&mut self.mode, MemoryMode::Done)
                    {
                        *self.slot.lock().expect("cache lock") = Some(kept.into());
                    }
                    Ok(None)
                }
            },
        }
    }
}

/// `cache_file(path)`: the first complete pass kept in a file.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct CacheFile<D> {
    input: D,
    path: PathBuf,
    fingerprint: u64,
}

impl<D: Dataset> CacheFile<D> {
    pub(crate) fn new(input: D, path: &Path) -> Self {
        CacheFile { input, path: path.to_path_buf(), fingerprint: 0 }
    }

    /// The fingerprint of what the cache holds (a compiled pipeline's: its plan, its
    /// parameters and the files it reads). A cache file written with another fingerprint
    /// (another pipeline, changed parameters or files), or by a version of Sluice that
    /// wrote none, is stale: the next pass rebuilds it.
    pub fn fingerprint(mut self, fingerprint: u64) -> Self {
        self.fingerprint = fingerprint;
        self
    }
}

/// The first record of a cache file: this magic, then the fingerprint (little-endian).
const HEADER_MAGIC: &[u8; 12] = b"SLUICE-CACHE";

fn header(fingerprint: u64) -> Vec<u8> {
    let mut h = HEADER_MAGIC.to_vec();
    h.extend_from_slice(&fingerprint.to_le_bytes());
    h
}

/// Opens the cache file at `path` for replay when its header holds `fingerprint`;
/// `None` when it is stale (another fingerprint, or no header).
fn open_fresh(path: &Path, fingerprint: u64) -> Result<Option<FileReader>> {
    let opts = ReaderOptions { compression: Compression::None, ..ReaderOptions::default() };
    let mut reader = tfrecord::open(path, &opts)?;
    let fresh = matches!(reader.next_record()?, Some(h) if h == header(fingerprint).as_slice());
    Ok(fresh.then_some(reader))
}

impl<D: Dataset> Dataset for CacheFile<D>
where
    D::Item: CacheCodec,
{
    type Item = D::Item;
    type Iter = CacheFileIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        let fresh = if self.path.is_file() { open_fresh(&self.path, self.fingerprint)? } else { None };
        let mode = match fresh {
            Some(reader) => FileMode::Replay { reader },
            None => {
                remove_stale_partials(&self.path);
                let tmp = temp_path(&self.path);
                let mut writer = tfrecord::create(&tmp, Compression::None)?;
                writer.write_record(&header(self.fingerprint))?;
                FileMode::Record { input: self.input.iter(ctx)?, writer, tmp, path: self.path.clone() }
            }
        };
        Ok(CacheFileIter { mode, scratch: Vec::new() })
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".partial-{}", std::process::id()));
    path.with_file_name(name)
}

/// Removes the partial caches of `path` that processes which no longer run left behind
/// (interrupted before their pass ended: a signal does not unwind). Another live
/// process's partial is its own, left alone. Where liveness cannot be told (no `/proc`),
/// nothing is removed. Best effort: a partial that cannot be removed is only clutter.
fn remove_stale_partials(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!("{name}.partial-");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) =
            file.to_str().and_then(|f| f.strip_prefix(&prefix)).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[derive(Debug)]
enum FileMode<I> {
    Record { input: I, writer: RecordWriter<BufWriter<File>>, tmp: PathBuf, path: PathBuf },
    Replay { reader: FileReader },
    Done,
}

/// One pass of [`CacheFile`].
#[derive(Debug)]
pub struct CacheFileIter<I> {
    mode: FileMode<I>,
    scratch: Vec<u8>,
}

impl<I: DataIter> DataIter for CacheFileIter<I>
where
    I::Item: CacheCodec,
{
    type Item = I::Item;

    fn next(&mut self) -> Result<Option<I::Item>> {
        match &mut self.mode {
            FileMode::Done => Ok(None),
            FileMode::Replay { reader } => {
                let Some(mut bytes) = reader.next_record()? else { return Ok(None) };
                let len = bytes.len();
                let decoded = I::Item::decode(&mut bytes).and_then(|x| match bytes.len() {
                    0 => Ok(x),
                    n => Err(format!("{n} bytes left over after the entry")),
                });
                decoded.map(Some).map_err(|reason| {
                    reader.corrupt_previous(CorruptKind::Decode { message: "cache entry", reason }, len)
                })
            }
            FileMode::Record { input, writer, .. } => match input.next()? {
                Some(x) => {
                    self.scratch.clear();
                    x.encode(&mut self.scratch);
                    writer.write_record(&self.scratch)?;
                    Ok(Some(x))
                }
                None => {
                    if let FileMode::Record { writer, tmp, path, .. } =
                        std::mem::replace(&mut self.mode, FileMode::Done)
                    {
                        writer.finish()?;
                        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
                    }
                    Ok(None)
                }
            },
        }
    }
}

impl<I> Drop for CacheFileIter<I> {
    fn drop(&mut self) {
        // An interrupted first pass leaves no cache behind.
        if let FileMode::Record { tmp, .. } = &self.mode {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::from_vec;

    fn round_trip<T: CacheCodec + PartialEq + std::fmt::Debug>(x: &T) {
        let mut out = Vec::new();
        x.encode(&mut out);
        let mut bytes = &out[..];
        assert_eq!(&T::decode(&mut bytes).unwrap(), x);
        assert!(bytes.is_empty(), "{} bytes left over", bytes.len());
    }

    #[test]
    fn strings_round_trip_length_prefixed() {
        for s in ["", "a", "é \n \" \u{1} 日本 🦀"] {
            round_trip(&s.to_string());
        }
        round_trip(&(String::from("x"), 7i64, vec![String::from("é"), String::new()]));
        let mut out = Vec::new();
        "é".to_string().encode(&mut out);
        assert_eq!(out, [2, 0, 0, 0, 0, 0, 0, 0, 0xc3, 0xa9]);
    }

    #[test]
    fn a_string_that_is_not_utf8_or_cut_short_is_an_error() {
        let mut entry = 2u64.to_le_bytes().to_vec();
        entry.extend([0xc3, 0x28]);
        let e = String::decode(&mut &entry[..]).unwrap_err();
        assert!(e.contains("not UTF-8"), "{e}");
        let e = String::decode(&mut &entry[..9]).unwrap_err();
        assert!(e.contains("ends early"), "{e}");
    }

    #[test]
    fn a_file_cache_replays_strings_and_names_a_corrupt_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.cache");
        let items = vec![String::from("é"), String::new(), String::from("a\nb")];
        let collect = |ds: &CacheFile<_>| -> Result<Vec<String>> { ds.stream()?.collect() };
        assert_eq!(collect(&from_vec(items.clone()).cache_file(&path)).unwrap(), items);
        assert_eq!(collect(&from_vec(Vec::new()).cache_file(&path)).unwrap(), items, "replayed");

        // A cache whose second entry is framed correctly but is not UTF-8.
        let mut w = tfrecord::create(&path, Compression::None).unwrap();
        w.write_record(&header(0)).unwrap();
        let mut good = Vec::new();
        items[0].encode(&mut good);
        w.write_record(&good).unwrap();
        let mut bad = 1u64.to_le_bytes().to_vec();
        bad.push(0xff);
        w.write_record(&bad).unwrap();
        w.finish().unwrap();
        let mut s = from_vec(Vec::<String>::new()).cache_file(&path).stream().unwrap();
        assert_eq!(s.next().unwrap().unwrap(), "é");
        let e = s.next().unwrap().unwrap_err();
        let text = e.to_string();
        assert!(e.is_corrupt() && text.contains("s.cache") && text.contains("record 2"), "{text}");
        assert!(text.contains("not UTF-8"), "{text}");
    }
}
