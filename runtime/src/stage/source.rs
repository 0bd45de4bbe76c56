//! Sources: in-memory vectors and ranges (tests, small data), file lists from globs, and
//! the records of one TFRecord file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Ctx, DataIter, Dataset, Element, FileId, Origin, Record};
use crate::error::{Error, Result};
use crate::rng::Philox;
use crate::tfrecord::{self, FileReader, ReaderOptions};

/// The elements of a vector, cloned out on each pass.
pub fn from_vec<T: Element + Clone + Sync>(items: Vec<T>) -> FromVec<T> {
    FromVec { items: items.into() }
}

/// See [`from_vec`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct FromVec<T> {
    items: Arc<[T]>,
}

impl<T: Element + Clone + Sync> Dataset for FromVec<T> {
    type Item = T;
    type Iter = FromVecIter<T>;
    fn iter(&self, _: &Ctx) -> Result<Self::Iter> {
        Ok(FromVecIter { items: self.items.clone(), pos: 0 })
    }
}

/// One pass of [`FromVec`].
#[derive(Debug)]
pub struct FromVecIter<T> {
    items: Arc<[T]>,
    pos: usize,
}

impl<T: Element + Clone + Sync> DataIter for FromVecIter<T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Result<Option<T>> {
        let x = self.items.get(self.pos).cloned();
        self.pos += usize::from(x.is_some());
        Ok(x)
    }
}

/// The integers `start..end`.
pub fn range(r: std::ops::Range<u64>) -> Range {
    Range { start: r.start, end: r.end }
}

/// See [`range`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone, Copy)]
pub struct Range {
    start: u64,
    end: u64,
}

impl Dataset for Range {
    type Item = u64;
    type Iter = RangeIter;
    fn iter(&self, _: &Ctx) -> Result<RangeIter> {
        Ok(RangeIter { next: self.start, end: self.end })
    }
}

/// One pass of [`Range`].
#[derive(Debug)]
pub struct RangeIter {
    next: u64,
    end: u64,
}

impl DataIter for RangeIter {
    type Item = u64;
    #[inline]
    fn next(&mut self) -> Result<Option<u64>> {
        if self.next >= self.end {
            return Ok(None);
        }
        self.next += 1;
        Ok(Some(self.next - 1))
    }
}

/// `start`, `start + step`, … up to `end` (excluded; down to it when `step` is negative):
/// Python's and tf.data's `range(start, end, step)`, as `i64`s. A `step` of 0 is an
/// error when iterated. A resumed pass computes where it starts, pulling nothing.
pub fn range_step(start: i64, end: i64, step: i64) -> Steps {
    Steps { start, end, step }
}

/// See [`range_step`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    start: i64,
    end: i64,
    step: i64,
}

impl Steps {
    /// How many values the range holds.
    pub fn len(&self) -> u64 {
        let (start, end, step) = (i128::from(self.start), i128::from(self.end), i128::from(self.step));
        let n = match step {
            0 => 0,
            s if s > 0 => (end - start + s - 1).div_euclid(s),
            s => (start - end - s - 1).div_euclid(-s),
        };
        n.max(0) as u64
    }

    /// Whether the range holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Dataset for Steps {
    type Item = i64;
    type Iter = StepsIter;

    fn iter(&self, ctx: &Ctx) -> Result<StepsIter> {
        self.iter_from(ctx, 0)
    }

    fn iter_from(&self, _: &Ctx, skip: u64) -> Result<StepsIter> {
        if self.step == 0 {
            return Err(Error::Invalid("range: the step must not be 0".into()));
        }
        Ok(StepsIter { start: self.start, step: self.step, next: skip.min(self.len()), len: self.len() })
    }
}

/// One pass of [`Steps`].
#[derive(Debug)]
pub struct StepsIter {
    start: i64,
    step: i64,
    next: u64,
    len: u64,
}

impl DataIter for StepsIter {
    type Item = i64;
    #[inline]
    fn next(&mut self) -> Result<Option<i64>> {
        if self.next >= self.len {
            return Ok(None);
        }
        // In range: every value below `len` lies between start and end.
        let v = i128::from(self.start) + i128::from(self.next) * i128::from(self.step);
        self.next += 1;
        Ok(Some(v as i64))
    }
}

/// The files matching a glob pattern, sorted; an error names the pattern when it is
/// invalid or matches nothing. Record indexes (`*.idx`, written by `sluice index` beside
/// their files) are never matched, so `data/*` still means the data files.
///
/// What a match is decides what happens to it, and nothing is dropped unsaid:
/// - a regular file (or a link to one) is data;
/// - a folder is not a file to read: `data/*` over files and class folders means the
///   files (a pattern that matches only folders matches no files, and says so);
/// - a match whose kind cannot be told (a dangling symbolic link, a link loop, an entry
///   that cannot be inspected) is kept: reading it fails naming it, or, under a reader's
///   skip policy (`read_file(on_error: skip)`), skips it counted and named;
/// - anything else (a device, a FIFO, a socket) is an error naming it: data is read
///   from regular files, and reading a FIFO could wait forever.
///
/// A URL (`s3://bucket/dir/part-*.tfrecord`, `gs://…`, `https://…`) is expanded by
/// listing its store ([`storage::glob::expand`](crate::storage::glob::expand)) with the
/// same semantics and order; `file://` URLs are local paths.
pub fn files(pattern: &str) -> Result<Files> {
    if crate::storage::is_url(Path::new(pattern)) {
        let paths = crate::storage::glob::expand(Path::new(pattern)).map_err(|e| Error::io(pattern, e))?;
        if paths.is_empty() {
            return Err(Error::Invalid(format!("no files match `{pattern}`")));
        }
        return Ok(Files { paths: paths.into(), shuffle_seed: None });
    }
    let local = crate::storage::local_path(Path::new(pattern));
    let pattern = local.to_str().unwrap_or(pattern);
    let entries =
        glob::glob(pattern).map_err(|e| Error::Invalid(format!("bad file pattern `{pattern}`: {e}")))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path =
            entry.map_err(|e| Error::io(e.path().to_path_buf(), std::io::Error::other(e.to_string())))?;
        if path.extension().is_some_and(|e| e == "idx") {
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => paths.push(path),
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::Invalid(format!(
                    "`{pattern}` matches {}, which is not a regular file (data is read from regular files)",
                    path.display()
                )));
            }
            // Its reader says what is wrong with it, naming it.
            Err(_) => paths.push(path),
        }
    }
    if paths.is_empty() {
        return Err(Error::Invalid(format!("no files match `{pattern}`")));
    }
    paths.sort();
    Ok(Files { paths: paths.into(), shuffle_seed: None })
}

/// A list of files, in sorted order or shuffled per epoch.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct Files {
    paths: Arc<[PathBuf]>,
    shuffle_seed: Option<u64>,
}

const FILES_TAG: u64 = 0x4649_4c45 << 32; // "FILE"

impl Files {
    /// An explicit list of files, in the given order.
    pub fn from_paths(paths: impl IntoIterator<Item = PathBuf>) -> Self {
        Files { paths: paths.into_iter().collect(), shuffle_seed: None }
    }

    /// Shuffles the list each epoch with Philox keyed by (seed, epoch).
    pub fn shuffled(mut self, seed: u64) -> Self {
        self.shuffle_seed = Some(seed);
        self
    }

    /// The files, in their base order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl Dataset for Files {
    type Item = PathBuf;
    type Iter = FromVecIter<PathBuf>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        let items = match self.shuffle_seed {
            None => self.paths.clone(),
            Some(seed) => {
                // Fisher–Yates with draws in a fixed order.
                let mut v = self.paths.to_vec();
                let mut rng = Philox::new(seed, FILES_TAG ^ ctx.epoch());
                for i in (1..v.len()).rev() {
                    let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                    v.swap(i, j);
                }
                v.into()
            }
        };
        Ok(FromVecIter { items, pos: 0 })
    }
}

/// The records of one TFRecord file, as owned [`Record`]s.
pub fn tfrecord_file(path: impl AsRef<Path>, options: ReaderOptions) -> TfRecordFile {
    TfRecordFile { path: path.as_ref().to_path_buf(), options: Arc::new(options) }
}

/// See [`tfrecord_file`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct TfRecordFile {
    path: PathBuf,
    options: Arc<ReaderOptions>,
}

impl Dataset for TfRecordFile {
    type Item = Record;
    type Iter = TfRecordIter;

    fn iter(&self, ctx: &Ctx) -> Result<TfRecordIter> {
        let reader = tfrecord::open(&self.path, &self.options)?;
        Ok(TfRecordIter { reader: Some(reader), file: FileId::of(&self.path), ctx: ctx.clone() })
    }
}

/// One pass of [`TfRecordFile`]. Its position is the reader's (record index, offset).
#[derive(Debug)]
pub struct TfRecordIter {
    reader: Option<FileReader>,
    file: FileId,
    ctx: Ctx,
}

impl TfRecordIter {
    fn finish(&mut self) {
        if let Some(r) = self.reader.take() {
            self.ctx.add_reader_stats(r.stats());
        }
    }
}

impl DataIter for TfRecordIter {
    type Item = Record;

    #[inline]
    fn next(&mut self) -> Result<Option<Record>> {
        let Some(reader) = self.reader.as_mut() else { return Ok(None) };
        match reader.next_indexed() {
            Ok(Some((index, r))) => Ok(Some(Record::new(r.to_vec(), Origin::new(self.file, index)))),
            Ok(None) => {
                self.finish();
                Ok(None)
            }
            Err(e) => {
                self.finish();
                Err(e)
            }
        }
    }
}

impl Drop for TfRecordIter {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(start: i64, end: i64, step: i64) -> Vec<i64> {
        range_step(start, end, step).stream().unwrap().map(|r| r.unwrap()).collect()
    }

    #[test]
    fn ranges_step_like_python() {
        assert_eq!(all(0, 5, 1), [0, 1, 2, 3, 4]);
        assert_eq!(all(2, 11, 3), [2, 5, 8]);
        assert_eq!(all(5, 0, -2), [5, 3, 1]);
        assert_eq!(all(3, 3, 1), Vec::<i64>::new());
        assert_eq!(all(5, 0, 1), Vec::<i64>::new());
        assert_eq!(all(i64::MAX - 2, i64::MAX, 1), [i64::MAX - 2, i64::MAX - 1]);
        assert_eq!(all(i64::MIN + 1, i64::MIN, -1), [i64::MIN + 1]);
        assert_eq!(range_step(0, 10, 3).len(), 4);
        let ctx = Ctx::new(&Default::default());
        let mut it = range_step(2, 11, 3).iter_from(&ctx, 2).unwrap();
        assert_eq!((it.next().unwrap(), it.next().unwrap()), (Some(8), None));
        assert!(range_step(0, 1, 0).stream().is_err(), "a step of 0");
    }
}
