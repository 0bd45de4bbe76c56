//! The lines of a text file as records: tf.data's `TextLineDataset`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{TextInput, TextOptions, read_error};
use crate::error::Result;
use crate::stage::{Ctx, DataIter, Dataset, FileId, InterleaveFn, Origin, Record};
use crate::tfrecord::ReaderStats;

/// The lines of one text file, one [`Record`] per line with the terminator removed, as
/// TensorFlow's `TextLineDataset` reads them: a line ends at `\n`, and a `\r` right
/// before it is removed too (CRLF files); a last line without a terminator is still a
/// line (a `\r` ending it removed, and then nothing left means no line); an empty file
/// gives nothing, and empty lines are empty records. The bytes are the file's, not
/// checked as UTF-8. Each record's origin is its line, `path:LINE` in errors.
pub fn lines_file(path: impl AsRef<Path>, options: TextOptions) -> LinesFile {
    LinesFile { path: path.as_ref().to_path_buf(), options }
}

/// See [`lines_file`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct LinesFile {
    path: PathBuf,
    options: TextOptions,
}

impl Dataset for LinesFile {
    type Item = Record;
    type Iter = LinesIter;

    fn iter(&self, ctx: &Ctx) -> Result<LinesIter> {
        let input = TextInput::open(&self.path, self.options.compression)?;
        Ok(LinesIter {
            input: Some(input),
            file: FileId::of(&self.path),
            line: 0,
            scratch: Vec::new(),
            stats: ReaderStats::default(),
            ctx: ctx.clone(),
        })
    }

    /// Skips `skip` lines by reading them into one buffer, making no records.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<LinesIter> {
        let mut it = self.iter(ctx)?;
        for _ in 0..skip {
            if !it.read_line()? {
                break;
            }
        }
        Ok(it)
    }
}

/// One pass of [`LinesFile`]. Its position is the next line's number.
#[derive(Debug)]
pub struct LinesIter {
    input: Option<TextInput>,
    file: FileId,
    /// The next line's number, counted from 0.
    line: u64,
    /// The line being read, terminator removed.
    scratch: Vec<u8>,
    stats: ReaderStats,
    ctx: Ctx,
}

/// A line buffer grown past this is handed to its record rather than kept.
const KEEP_SCRATCH: usize = 1 << 20;

impl LinesIter {
    /// Reads the next line into `scratch`; false at the end of the file. An error ends
    /// the pass.
    fn read_line(&mut self) -> Result<bool> {
        let Some(input) = self.input.as_mut() else { return Ok(false) };
        self.scratch.clear();
        let n = match input.reader.read_until(b'\n', &mut self.scratch) {
            Ok(n) => n,
            Err(e) => {
                let err = read_error(&input.path, input.compressed, self.line + 1, e);
                self.finish();
                return Err(err);
            }
        };
        let terminated = self.scratch.last() == Some(&b'\n');
        if terminated {
            self.scratch.pop();
        }
        if self.scratch.last() == Some(&b'\r') {
            self.scratch.pop();
        }
        // TensorFlow's `ReadLine` at the end of a file: what is left after removing a
        // final `\r` is a line unless it is empty.
        if n == 0 || (!terminated && self.scratch.is_empty()) {
            self.finish();
            return Ok(false);
        }
        self.line += 1;
        Ok(true)
    }

    fn finish(&mut self) {
        if self.input.take().is_some() {
            self.ctx.add_reader_stats(&self.stats);
        }
    }
}

impl DataIter for LinesIter {
    type Item = Record;

    #[inline]
    fn next(&mut self) -> Result<Option<Record>> {
        if !self.read_line()? {
            return Ok(None);
        }
        let bytes = if self.scratch.capacity() > KEEP_SCRATCH {
            std::mem::take(&mut self.scratch)
        } else {
            self.scratch.clone()
        };
        self.stats.records += 1;
        self.stats.bytes += bytes.len() as u64;
        Ok(Some(Record::new(bytes, Origin::line(self.file, self.line - 1))))
    }
}

impl Drop for LinesIter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Opens each path as a text file of lines with shared [`TextOptions`]: the
/// interleave's function for `text_lines` (`files.interleave(OpenLines::new(o), c, b)`).
#[derive(Debug, Clone)]
pub struct OpenLines {
    options: Arc<TextOptions>,
}

impl OpenLines {
    /// Opens files with `options`.
    pub fn new(options: TextOptions) -> Self {
        OpenLines { options: Arc::new(options) }
    }

    /// The options.
    pub fn options(&self) -> &TextOptions {
        &self.options
    }
}

impl InterleaveFn<PathBuf> for OpenLines {
    type Output = LinesFile;

    fn open(&self, path: PathBuf) -> LinesFile {
        lines_file(path, (*self.options).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Files, Unit};
    use crate::text::testing::{read, write};
    use crate::tfrecord::Compression;

    fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "a.txt", bytes);
        let records = read(&lines_file(&path, TextOptions::default()), 0).unwrap();
        records.into_iter().map(Record::into_bytes).collect()
    }

    fn strs(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn lines_end_like_tensorflow() {
        assert_eq!(lines(b"a\nbc\n"), strs(&["a", "bc"]), "LF");
        assert_eq!(lines(b"a\r\nbc\r\n"), strs(&["a", "bc"]), "CRLF");
        assert_eq!(lines(b"a\nbc"), strs(&["a", "bc"]), "no final newline");
        assert_eq!(lines(b"a\n\n\nb\n"), strs(&["a", "", "", "b"]), "empty lines are kept");
        assert_eq!(lines(b"\n"), strs(&[""]));
        assert_eq!(lines(b""), Vec::<Vec<u8>>::new(), "an empty file");
        assert_eq!(lines(b"a\rb\r\n"), strs(&["a\rb"]), "a lone CR is data");
        assert_eq!(lines(b"a\nb\r"), strs(&["a", "b"]), "a final CR is removed");
        assert_eq!(lines(b"a\n\r"), strs(&["a"]), "and then nothing is no line");
        assert_eq!(lines(b"\xff\xfe\n"), vec![vec![0xff, 0xfe]], "raw bytes");
    }

    #[test]
    fn long_lines_cross_the_buffer() {
        let long = "x".repeat(3 * super::super::BUFFER + 7);
        let big = "y".repeat(KEEP_SCRATCH + 1);
        let text = format!("{long}\nshort\n{big}\nlast");
        assert_eq!(lines(text.as_bytes()), strs(&[&long, "short", &big, "last"]));
    }

    #[test]
    fn origins_are_lines_from_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "o.txt", b"a\n\nc\n");
        let records = read(&lines_file(&path, TextOptions::default()), 0).unwrap();
        let origins: Vec<_> = records.iter().map(|r| r.origin()).collect();
        assert!(origins.iter().all(|o| o.unit == Unit::Line && o.file == FileId::of(&path)));
        assert_eq!(origins.iter().map(|o| o.index).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(records[2].origin().name_in("bad"), format!("{}:3: bad", path.display()));
    }

    #[test]
    fn compressed_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"one\r\ntwo\nthree";
        for name in ["a.txt.gz", "a.txt.zlib"] {
            let path = write(dir.path(), name, text);
            let got = read(&lines_file(&path, TextOptions::default()), 0).unwrap();
            assert_eq!(got, strs(&["one", "two", "three"]), "{name} by its name");
        }
        // A GZIP file with another name is sniffed; ZLIB needs saying.
        let gz = write(dir.path(), "b.gz", text);
        let plain_name = dir.path().join("b.txt");
        std::fs::rename(&gz, &plain_name).unwrap();
        assert_eq!(read(&lines_file(&plain_name, TextOptions::default()), 0).unwrap().len(), 3);
        let zl = write(dir.path(), "c.zlib", text);
        let zl_name = dir.path().join("c.txt");
        std::fs::rename(&zl, &zl_name).unwrap();
        let zlib = TextOptions { compression: Compression::Zlib };
        assert_eq!(read(&lines_file(&zl_name, zlib), 0).unwrap(), strs(&["one", "two", "three"]));
        // Plain text is read as is, whatever it starts with.
        let x = write(dir.path(), "x.txt", b"x\x9c\n");
        assert_eq!(read(&lines_file(&x, TextOptions::default()), 0).unwrap(), vec![b"x\x9c".to_vec()]);
    }

    #[test]
    fn a_damaged_stream_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "d.txt.gz", &b"line\n".repeat(10_000));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(bytes.len() / 2);
        std::fs::write(&path, bytes).unwrap();
        let err = read(&lines_file(&path, TextOptions::default()), 0).unwrap_err();
        let msg = err.to_string();
        assert!(err.is_corrupt(), "{msg}");
        assert!(msg.starts_with(&format!("{}:", path.display())), "{msg}");
        assert!(msg.contains("damaged compressed stream"), "{msg}");
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.txt");
        let err = read(&lines_file(&path, TextOptions::default()), 0).unwrap_err();
        assert!(err.to_string().contains("missing.txt"), "{err}");
    }

    #[test]
    fn resumes_where_a_full_pass_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "r.txt", b"a\nb\r\n\nd\ne");
        let ds = lines_file(&path, TextOptions::default());
        let full = read(&ds, 0).unwrap();
        for k in 0..=full.len() as u64 + 1 {
            let tail = read(&ds, k).unwrap();
            assert_eq!(tail, full[(k as usize).min(full.len())..], "skip {k}");
            let origins: Vec<_> = tail.iter().map(|r| r.origin()).collect();
            let want: Vec<_> = full[(k as usize).min(full.len())..].iter().map(|r| r.origin()).collect();
            assert_eq!(origins, want, "skip {k}");
        }
    }

    #[test]
    fn interleaves_and_resumes_over_files() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<_> = (0..3)
            .map(|f| {
                let text: String = (0..5 + f).map(|i| format!("f{f}l{i}\n")).collect();
                write(dir.path(), &format!("{f}.txt"), text.as_bytes())
            })
            .collect();
        let make =
            || Files::from_paths(paths.clone()).interleave(OpenLines::new(TextOptions::default()), 2, 2);
        let ds = make();
        let full = read(&ds, 0).unwrap();
        assert_eq!(full.len(), 5 + 6 + 7);
        assert_eq!(&full[..4], strs(&["f0l0", "f0l1", "f1l0", "f1l1"]));
        let parallel = make().num_parallel(2);
        assert_eq!(read(&parallel, 0).unwrap(), full, "parallel and deterministic");
        for k in [1, 7, 17, 18] {
            assert_eq!(read(&ds, k).unwrap(), full[k as usize..], "skip {k}");
            assert_eq!(read(&parallel, k).unwrap(), full[k as usize..], "parallel skip {k}");
        }
    }
}
