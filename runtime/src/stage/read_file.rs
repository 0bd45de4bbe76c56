//! `read_file`: every path of its input read whole, one element per file (tf.data's
//! `list_files` followed by `tf.io.read_file`), with on request the label Keras'
//! `image_dataset_from_directory` gives a file: the index of its folder's name among the
//! sorted names of every folder of the input's files.
//!
//! # Labels
//!
//! With [`ReadFileOptions::labels`], a file's label is the index of its parent folder's
//! name (the last component of the folder it is in: `cat` for `root/cat/1.jpg`) among
//! the distinct folder names of **all** the paths the input yields, sorted (by code
//! point, as Python's `sorted` does): `root/*/*.jpg` over `root/a`, `root/b`, `root/c`
//! labels the files of `a` 0, of `b` 1 and of `c` 2. The table is computed at the start
//! of every pass by streaming the input once (its paths only, no file read) before
//! reading; so the input must yield the same paths on every stream of one epoch, which
//! every deterministic pipeline does. It is the table of the input `read_files` is given:
//! a `shard` before `read_file` changes the labels only where a class has no file at all
//! in a shard (the classes after it then shift down). Unlike Keras, a class folder with no
//! file in it gets no label (Keras lists the folders, not the files). Without labels
//! the input is streamed once and every label is 0.
//!
//! # Errors
//!
//! A path that is not UTF-8 is always an error naming it (lossily): a `path` field holds
//! the path exactly. A file that cannot be read (missing, deleted since it was listed,
//! unreadable, a folder) is an [`Error::Io`] naming it under [`CorruptPolicy::Fail`];
//! under `Skip` or `SkipFile` (the same, for whole files) it is skipped and counted where
//! the TFRecord readers count what they skip (the pipeline's
//! [`ReaderStats`](crate::tfrecord::ReaderStats): one skipped record and one skipped
//! file, with a [`CorruptKind::Unreadable`] event naming it), so `sluice run` reports it.
//! The files read count there as records delivered, with their bytes.
//!
//! # Origin
//!
//! [`FileContents::origin`] is the file ([`Origin::file`], named by its path alone): the
//! generated code names it in the errors of the maps over `read_file`'s elements
//! ([`located`](crate::abi::located)), as it names a TFRecord record or a line of text.
//!
//! # Resume
//!
//! [`iter_from`](Dataset::iter_from) reads none of the files it skips: under `fail`
//! every element is one input path, so it skips as many paths with the input's own
//! `iter_from`; under `skip` it pulls the paths and opens each (without reading it) to
//! tell which ones the pass would have delivered. The label table is still that of the
//! whole input.

use std::collections::BTreeSet;
use std::fs::File;
use std::mem::size_of;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::{Ctx, DataIter, Dataset, Element, FileId, Origin, StageStats};
use crate::error::{CorruptKind, Error, Result};
use crate::tfrecord::{CorruptPolicy, ReaderStats, SkipEvent};

/// One file read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct FileContents {
    /// The file's bytes.
    pub contents: Vec<u8>,
    /// The path as the input gave it.
    pub path: String,
    /// The index of the file's folder among the input's sorted folder names, with
    /// [`ReadFileOptions::labels`]; 0 without.
    pub label: i64,
}

impl FileContents {
    /// Where the element came from: its file (named `path`), to prefix a later stage's
    /// error with.
    pub fn origin(&self) -> Origin {
        Origin::file(FileId::of(Path::new(&self.path)))
    }
}

impl Element for FileContents {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.contents.len() + self.path.len()
    }
}

/// How `read_file` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadFileOptions {
    /// Label each file by its folder (see the [module docs](self)).
    pub labels: bool,
    /// What a file that cannot be read does: `Fail` (the default) ends the pass with an
    /// error naming it; `Skip` and `SkipFile` skip it, counted.
    pub on_error: CorruptPolicy,
}

/// Each path of `input` read whole, in order (see the [module docs](self)).
pub fn read_files<D: Dataset<Item = PathBuf>>(input: D, options: ReadFileOptions) -> ReadFiles<D> {
    ReadFiles { input, options, stats: Arc::new(StageStats::new("read_file")) }
}

/// See [`read_files`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct ReadFiles<D> {
    input: D,
    options: ReadFileOptions,
    stats: Arc<StageStats>,
}

/// The path as UTF-8, or an error naming it.
fn utf8(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| {
        Error::Invalid(format!("read_file: the path `{}` is not UTF-8", path.to_string_lossy()))
    })
}

/// The name of the folder `path` is in: its class.
fn folder(path: &Path) -> Result<&str> {
    let name = path.parent().and_then(Path::file_name);
    let name = name.ok_or_else(|| {
        Error::Invalid(format!(
            "read_file: `{}` is in no folder whose name could be its label \
             (labels come from class folders: root/CLASS/FILE)",
            path.display()
        ))
    })?;
    // The whole path is UTF-8, so is any of its components.
    Ok(name.to_str().unwrap_or_default())
}

impl<D: Dataset<Item = PathBuf>> ReadFiles<D> {
    /// The sorted folder names of every path of one stream of the input.
    fn classes(&self, ctx: &Ctx) -> Result<Vec<String>> {
        let mut names = BTreeSet::new();
        let mut paths = self.input.iter(&ctx.nested())?;
        while let Some(path) = paths.next()? {
            utf8(&path)?;
            let name = folder(&path)?;
            if !names.contains(name) {
                names.insert(name.to_string());
            }
        }
        Ok(names.into_iter().collect())
    }
}

impl<D: Dataset<Item = PathBuf>> Dataset for ReadFiles<D> {
    type Item = FileContents;
    type Iter = ReadFilesIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        let classes = if self.options.labels { Some(self.classes(ctx)?) } else { None };
        let fail = self.options.on_error == CorruptPolicy::Fail;
        // Under `fail` every element is one path: the input skips them itself.
        let input = if fail { self.input.iter_from(ctx, skip)? } else { self.input.iter(ctx)? };
        let mut iter = ReadFilesIter {
            input,
            classes,
            fail,
            stats: self.stats.clone(),
            ctx: ctx.clone(),
            io: ReaderStats::default(),
        };
        if !fail {
            iter.skip(skip)?;
        }
        Ok(iter)
    }
}

/// One pass of [`ReadFiles`].
#[derive(Debug)]
pub struct ReadFilesIter<I> {
    input: I,
    /// The sorted folder names, with labels.
    classes: Option<Vec<String>>,
    fail: bool,
    stats: Arc<StageStats>,
    ctx: Ctx,
    /// Files delivered and skipped since the last flush into the pipeline's counts.
    io: ReaderStats,
}

impl<I: DataIter<Item = PathBuf>> ReadFilesIter<I> {
    /// The next input path, timed as input wait; `None` at the end.
    fn next_path(&mut self) -> Result<Option<PathBuf>> {
        let start = Instant::now();
        let path = self.input.next();
        self.stats.add_wait_input(start.elapsed());
        path
    }

    /// The label of `path`.
    fn label(&self, path: &Path) -> Result<i64> {
        let Some(classes) = &self.classes else { return Ok(0) };
        let name = folder(path)?;
        match classes.binary_search_by(|c| c.as_str().cmp(name)) {
            Ok(i) => Ok(i as i64),
            Err(_) => Err(Error::Invalid(format!(
                "read_file: the folder `{name}` of `{}` was not among the input's folders when \
                 the labels were computed (the input must yield the same paths on every stream)",
                path.display()
            ))),
        }
    }

    /// Counts an unreadable file skipped.
    fn note_skip(&mut self, path: PathBuf, e: &std::io::Error) {
        self.io.note_skip(SkipEvent {
            path,
            record: 0,
            offset: 0,
            kind: CorruptKind::Unreadable(e.to_string()),
            bytes: 0,
            rest_of_file: true,
        });
    }

    /// Passes `n` elements under `skip`: pulls paths, opening each (reading none) to tell
    /// whether the pass would have delivered it.
    fn skip(&mut self, n: u64) -> Result<()> {
        let mut passed = 0;
        while passed < n {
            let Some(path) = self.next_path()? else { break };
            utf8(&path)?;
            self.label(&path)?;
            match openable(&path) {
                Ok(()) => passed += 1,
                Err(e) => self.note_skip(path, &e),
            }
        }
        Ok(())
    }

    fn read_next(&mut self) -> Result<Option<FileContents>> {
        loop {
            let Some(path) = self.next_path()? else { return Ok(None) };
            let name = utf8(&path)?.to_string();
            let label = self.label(&path)?;
            let start = Instant::now();
            let read = crate::storage::read(&path);
            self.stats.add_busy(start.elapsed());
            match read {
                Ok(contents) => {
                    self.io.records += 1;
                    self.io.bytes += contents.len() as u64;
                    let x = FileContents { contents, path: name, label };
                    self.stats.produced(x.byte_size());
                    return Ok(Some(x));
                }
                Err(e) if self.fail => return Err(Error::io(path, e)),
                Err(e) => self.note_skip(path, &e),
            }
        }
    }
}

/// Whether `path` opens as a file that can be read (what a resumed pass checks of the
/// files it skips under `skip`).
fn openable(path: &Path) -> std::io::Result<()> {
    if crate::storage::is_url(path) {
        return crate::storage::Object::head(path).map(drop);
    }
    let file = File::open(path)?;
    if file.metadata()?.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::IsADirectory, "Is a directory"));
    }
    Ok(())
}

impl<I: DataIter<Item = PathBuf>> DataIter for ReadFilesIter<I> {
    type Item = FileContents;

    fn next(&mut self) -> Result<Option<FileContents>> {
        let next = self.read_next();
        if !matches!(next, Ok(Some(_))) {
            self.flush();
        }
        next
    }
}

impl<I> ReadFilesIter<I> {
    /// Adds the counts so far to the pipeline's (at the end of the pass, on an error, and
    /// when the iterator is dropped before its end).
    fn flush(&mut self) {
        if self.io != ReaderStats::default() {
            self.ctx.add_reader_stats(&std::mem::take(&mut self.io));
        }
    }
}

impl<I> Drop for ReadFilesIter<I> {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Files, RuntimeOptions, files};

    /// `root/a/{1,2}.jpg`, `root/b/3.jpg`, `root/c/{4,5}.jpg`, each holding its own name.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (class, file) in [("c", "4"), ("a", "1"), ("b", "3"), ("c", "5"), ("a", "2")] {
            let folder = dir.path().join(class);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join(format!("{file}.jpg")), format!("{class}{file}")).unwrap();
        }
        dir
    }

    fn pattern(dir: &tempfile::TempDir) -> String {
        format!("{}/*/*.jpg", dir.path().display())
    }

    fn labelled(on_error: CorruptPolicy) -> ReadFileOptions {
        ReadFileOptions { labels: true, on_error }
    }

    fn read<D: Dataset<Item = PathBuf>>(
        ds: &ReadFiles<D>,
        ctx: &Ctx,
        skip: u64,
    ) -> Result<Vec<FileContents>> {
        let mut iter = ds.iter_from(ctx, skip)?;
        let mut out = Vec::new();
        while let Some(x) = iter.next()? {
            out.push(x);
        }
        Ok(out)
    }

    fn summary(xs: &[FileContents]) -> Vec<(String, i64)> {
        xs.iter().map(|x| (String::from_utf8(x.contents.clone()).unwrap(), x.label)).collect()
    }

    fn ctx() -> Ctx {
        Ctx::new(&RuntimeOptions::default())
    }

    #[test]
    fn files_are_read_whole_and_labelled_by_their_sorted_folders() {
        let dir = tree();
        let ds = read_files(files(&pattern(&dir)).unwrap(), labelled(CorruptPolicy::Fail));
        let got = read(&ds, &ctx(), 0).unwrap();
        let want = [("a1", 0), ("a2", 0), ("b3", 1), ("c4", 2), ("c5", 2)];
        assert_eq!(summary(&got), want.map(|(s, l)| (s.to_string(), l)));
        assert_eq!(got[2].path, format!("{}/b/3.jpg", dir.path().display()));
        assert_eq!(got[2].origin().to_string(), got[2].path);
        assert_eq!(got[0].byte_size(), size_of::<FileContents>() + 2 + got[0].path.len());

        // In any order, and from a part of the tree: the table is the input's.
        let shuffled = files(&pattern(&dir)).unwrap().shuffled(7);
        let got = read(&read_files(shuffled, labelled(CorruptPolicy::Fail)), &ctx(), 0).unwrap();
        let mut got = summary(&got);
        got.sort();
        assert_eq!(got, want.map(|(s, l)| (s.to_string(), l)));
        let part = format!("{}/[bc]/*.jpg", dir.path().display());
        let got = read(&read_files(files(&part).unwrap(), labelled(CorruptPolicy::Fail)), &ctx(), 0).unwrap();
        assert_eq!(summary(&got), [("b3", 0), ("c4", 1), ("c5", 1)].map(|(s, l)| (s.to_string(), l)));

        // Without labels every label is 0.
        let plain = read_files(files(&pattern(&dir)).unwrap(), ReadFileOptions::default());
        assert!(read(&plain, &ctx(), 0).unwrap().iter().all(|x| x.label == 0));
    }

    #[test]
    fn a_missing_file_fails_naming_it_or_is_skipped_and_counted() {
        let dir = tree();
        let list = files(&pattern(&dir)).unwrap();
        let gone = dir.path().join("b/3.jpg");
        std::fs::remove_file(&gone).unwrap();

        let ds = read_files(list.clone(), labelled(CorruptPolicy::Fail));
        let e = read(&ds, &ctx(), 0).unwrap_err();
        assert!(matches!(&e, Error::Io { path, .. } if *path == gone), "{e}");
        assert!(e.to_string().contains("b/3.jpg"), "{e}");

        for policy in [CorruptPolicy::Skip, CorruptPolicy::SkipFile] {
            let ctx = ctx();
            let got = read(&read_files(list.clone(), labelled(policy)), &ctx, 0).unwrap();
            // The table was made from the listing: `b` keeps its place.
            assert_eq!(
                summary(&got),
                [("a1", 0), ("a2", 0), ("c4", 2), ("c5", 2)].map(|(s, l)| (s.to_string(), l))
            );
            let io = ctx.reader_stats();
            assert_eq!((io.records, io.bytes, io.skipped_records, io.skipped_files), (4, 8, 1, 1));
            assert_eq!(io.events[0].path, gone);
            assert!(matches!(io.events[0].kind, CorruptKind::Unreadable(_)), "{:?}", io.events[0]);
        }
    }

    #[test]
    fn a_resumed_pass_reads_none_of_the_files_it_skips() {
        let dir = tree();
        let list = files(&pattern(&dir)).unwrap();
        let all = read(&read_files(list.clone(), labelled(CorruptPolicy::Fail)), &ctx(), 0).unwrap();
        // The first two files become folders, which no read can read (unlike a file
        // without read permission, also for root): `iter_from` under `fail` must not
        // touch them.
        for f in ["a/1.jpg", "a/2.jpg"] {
            let p = dir.path().join(f);
            std::fs::remove_file(&p).unwrap();
            std::fs::create_dir(&p).unwrap();
        }
        let ds = read_files(list.clone(), labelled(CorruptPolicy::Fail));
        let ctx = ctx();
        let got = read(&ds, &ctx, 2).unwrap();
        assert_eq!(got, all[2..]);
        assert_eq!(ctx.reader_stats().records, 3, "only the files after the skip were read");

        // Under `skip`, a skipped pass opens the files to count the ones it would have
        // delivered: the two folders are not among them.
        let ds = read_files(list, labelled(CorruptPolicy::Skip));
        let ctx = super::tests::ctx();
        let got = read(&ds, &ctx, 1).unwrap();
        assert_eq!(got, all[3..]);
        let io = ctx.reader_stats();
        assert_eq!((io.records, io.skipped_files), (2, 2));
    }

    #[cfg(unix)]
    #[test]
    fn a_path_that_is_not_utf8_is_an_error_naming_it() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let dir = tree();
        let bad = dir.path().join("a").join(OsStr::from_bytes(b"caf\xe9.jpg"));
        std::fs::write(&bad, b"x").unwrap();
        for labels in [false, true] {
            for on_error in [CorruptPolicy::Fail, CorruptPolicy::Skip] {
                let ds = read_files(Files::from_paths([bad.clone()]), ReadFileOptions { labels, on_error });
                let e = read(&ds, &ctx(), 0).unwrap_err();
                assert!(e.to_string().contains("caf\u{fffd}.jpg` is not UTF-8"), "{e}");
            }
        }
    }

    #[test]
    fn labels_need_a_folder() {
        let ds = read_files(Files::from_paths([PathBuf::from("x.jpg")]), labelled(CorruptPolicy::Fail));
        let e = read(&ds, &ctx(), 0).unwrap_err();
        assert!(e.to_string().contains("`x.jpg` is in no folder"), "{e}");
    }
}
