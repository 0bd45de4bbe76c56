//! The rows of a CSV file as records: `tf.data.experimental.CsvDataset`, RFC 4180.
//!
//! The parser is a byte state machine over the reader's buffer, so a row is parsed as it
//! streams in and the position (line and character) of every byte is known for errors.
//! What it accepts:
//!
//! - Fields are separated by the delimiter; a row ends at `\n`, `\r\n` or a lone `\r`
//!   (as TensorFlow's `CsvDataset`), or at the end of the file.
//! - A field that starts with `"` is quoted: it holds anything (delimiters, line breaks)
//!   up to the closing `"`, and `""` inside stands for one `"`; the closing quote must
//!   be followed by the delimiter, a line end or the end of the file.
//! - A `"` inside an unquoted field is an error, and so is a quoted field still open at
//!   the end of the file.
//! - Wholly empty lines are skipped (TensorFlow reads one as a row of one empty field,
//!   which fails any schema of more than one column); they still count for line numbers.
//!   A line of `""` is a row of one empty field.
//!
//! Each data row becomes one record whose origin is the row's first line; its bytes hold
//! the schema's columns in schema order, each `u32 LE csv column | u32 LE length |
//! bytes` (unquoted, unescaped). With a header (the first row), each schema column is
//! the header's column of that name (the first one, should two share it) and every row
//! must have as many fields as the header; without one, schema column `i` is CSV column
//! `i` and a row needs at least as many fields as the schema has columns (more are
//! ignored, as with `CsvDataset`'s `select_cols`). A file with a header and nothing else,
//! or an empty file, has no rows.

use std::io::{self, BufRead};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{CsvOptions, TextInput, read_error};
use crate::error::{Error, Result};
use crate::stage::{Ctx, DataIter, Dataset, FileId, InterleaveFn, Origin, Record};
use crate::tfrecord::ReaderStats;

/// The data rows of one CSV file, one [`Record`] per row holding the columns
/// `options.columns` names (see the [module](self) for the format and the rules).
pub fn csv_file(path: impl AsRef<Path>, options: CsvOptions) -> CsvFile {
    CsvFile { path: path.as_ref().to_path_buf(), options: Arc::new(options) }
}

/// See [`csv_file`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct CsvFile {
    path: PathBuf,
    options: Arc<CsvOptions>,
}

impl Dataset for CsvFile {
    type Item = Record;
    type Iter = CsvIter;

    fn iter(&self, ctx: &Ctx) -> Result<CsvIter> {
        let d = self.options.delimiter;
        if !d.is_ascii() || matches!(d, b'"' | b'\r' | b'\n') {
            return Err(Error::Invalid(format!(
                "csv: the delimiter must be an ASCII character other than a quote or a line break, got `{}`",
                d.escape_ascii()
            )));
        }
        let n = u32::try_from(self.options.columns.len())
            .map_err(|_| Error::Invalid("csv: more than 2^32 columns".into()))?;
        let input = TextInput::open(&self.path, self.options.compression)?;
        Ok(CsvIter {
            input: Some(input),
            path: self.path.clone(),
            file: FileId::of(&self.path),
            options: self.options.clone(),
            select: (!self.options.header).then(|| (0..n).collect()),
            expect: Expect::AtLeast(n as usize),
            pos: Pos::default(),
            data: Vec::new(),
            ends: Vec::new(),
            stats: ReaderStats::default(),
            ctx: ctx.clone(),
        })
    }

    /// Skips `skip` rows by parsing them, making no records.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<CsvIter> {
        let mut it = self.iter(ctx)?;
        for _ in 0..skip {
            if it.data_row()?.is_none() {
                break;
            }
        }
        Ok(it)
    }
}

/// How many fields a row must have.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// As many as the header.
    Exactly(usize),
    /// At least as many as the schema has columns (no header).
    AtLeast(usize),
}

/// Where the parser is: the line and character of the next byte.
#[derive(Debug, Clone, Copy, Default)]
struct Pos {
    /// The line, from 0.
    line: u64,
    /// Characters before the next byte on its line.
    col: u64,
    /// Whether the last byte was `\r` (so a `\n` now ends no further line).
    prev_cr: bool,
}

impl Pos {
    /// Moves past `b`, returning the line and column (both from 1) it was at.
    #[inline]
    fn step(&mut self, b: u8) -> (u64, u64) {
        let at = (self.line + 1, self.col + 1);
        match b {
            b'\n' => {
                self.line += u64::from(!self.prev_cr);
                self.col = 0;
            }
            b'\r' => {
                self.line += 1;
                self.col = 0;
            }
            // A UTF-8 continuation byte: the same character.
            0x80..=0xbf => {}
            _ => self.col += 1,
        }
        self.prev_cr = b == b'\r';
        at
    }
}

/// Where the parser is within a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a row: line ends here are empty lines (or the `\n` of a CRLF).
    Between,
    /// At the start of a field.
    FieldStart,
    /// In an unquoted field.
    Unquoted,
    /// In a quoted field.
    Quoted,
    /// Right after a quote in a quoted field: its end, or the first of `""`.
    AfterQuote,
}

/// One pass of [`CsvFile`]. Its position is the next row.
#[derive(Debug)]
pub struct CsvIter {
    input: Option<TextInput>,
    path: PathBuf,
    file: FileId,
    options: Arc<CsvOptions>,
    /// The CSV column of each schema column; `None` until the header is read.
    select: Option<Vec<u32>>,
    expect: Expect,
    pos: Pos,
    /// The fields of the row being read, end to end, unquoted.
    data: Vec<u8>,
    /// Where each field of the row ends in `data`.
    ends: Vec<usize>,
    stats: ReaderStats,
    ctx: Ctx,
}

fn text_error(path: &Path, line: u64, column: Option<u64>, message: impl Into<String>) -> Error {
    Error::Text { path: path.to_path_buf(), line, column, message: message.into() }
}

/// Field `i` of a row parsed into `data` and `ends`.
fn field<'a>(data: &'a [u8], ends: &[usize], i: usize) -> &'a [u8] {
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &data[start..ends[i]]
}

impl CsvIter {
    /// Parses the next row into `data` and `ends`: its first line (from 1), or `None` at
    /// the end of the file.
    fn parse_row(&mut self) -> Result<Option<u64>> {
        let delim = self.options.delimiter;
        let Some(input) = self.input.as_mut() else { return Ok(None) };
        self.data.clear();
        self.ends.clear();
        let mut state = State::Between;
        let mut row_line = 0;
        let mut quote_at = (0, 0);
        loop {
            let buf = match input.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(&self.path, input.compressed, self.pos.line + 1, e)),
            };
            if buf.is_empty() {
                return match state {
                    State::Between => Ok(None),
                    State::Quoted => Err(text_error(
                        &self.path,
                        quote_at.0,
                        Some(quote_at.1),
                        "a quoted field is not closed by the end of the file",
                    )),
                    State::FieldStart | State::Unquoted | State::AfterQuote => {
                        self.ends.push(self.data.len());
                        Ok(Some(row_line))
                    }
                };
            }
            let mut used = 0;
            let mut row_done = false;
            for &b in buf {
                used += 1;
                let (line, col) = self.pos.step(b);
                let line_end = b == b'\n' || b == b'\r';
                match state {
                    State::Between | State::FieldStart => {
                        if state == State::Between {
                            if line_end {
                                continue;
                            }
                            row_line = line;
                        }
                        if b == b'"' {
                            state = State::Quoted;
                            quote_at = (line, col);
                        } else if b == delim {
                            self.ends.push(self.data.len());
                            state = State::FieldStart;
                        } else if line_end {
                            self.ends.push(self.data.len());
                            row_done = true;
                            break;
                        } else {
                            self.data.push(b);
                            state = State::Unquoted;
                        }
                    }
                    State::Unquoted => {
                        if b == delim {
                            self.ends.push(self.data.len());
                            state = State::FieldStart;
                        } else if line_end {
                            self.ends.push(self.data.len());
                            row_done = true;
                            break;
                        } else if b == b'"' {
                            return Err(text_error(
                                &self.path,
                                line,
                                Some(col),
                                "a quote inside an unquoted field (quote the whole field and write the quote as `\"\"`)",
                            ));
                        } else {
                            self.data.push(b);
                        }
                    }
                    State::Quoted => {
                        if b == b'"' {
                            state = State::AfterQuote;
                        } else {
                            self.data.push(b);
                        }
                    }
                    State::AfterQuote => {
                        if b == b'"' {
                            self.data.push(b'"');
                            state = State::Quoted;
                        } else if b == delim {
                            self.ends.push(self.data.len());
                            state = State::FieldStart;
                        } else if line_end {
                            self.ends.push(self.data.len());
                            row_done = true;
                            break;
                        } else {
                            return Err(text_error(
                                &self.path,
                                line,
                                Some(col),
                                format!(
                                    "`{}` after a closing quote, where the delimiter or a line end must be \
                                     (a quote inside a quoted field is written `\"\"`)",
                                    b.escape_ascii()
                                ),
                            ));
                        }
                    }
                }
            }
            input.reader.consume(used);
            if row_done {
                return Ok(Some(row_line));
            }
        }
    }

    /// Reads the header row at `line`: finds each schema column by name.
    fn read_header(&mut self, line: u64) -> Result<()> {
        let names: Vec<&[u8]> = (0..self.ends.len()).map(|i| field(&self.data, &self.ends, i)).collect();
        let mut select = Vec::with_capacity(self.options.columns.len());
        let mut missing = Vec::new();
        for c in self.options.columns.iter() {
            match names.iter().position(|n| *n == c.as_bytes()) {
                // At most as many fields as bytes in a buffer that fit in memory; a
                // header of 2^32 fields is not a header.
                Some(i) => {
                    select.push(u32::try_from(i).map_err(|_| {
                        text_error(&self.path, line, None, "a header of more than 2^32 columns")
                    })?)
                }
                None => missing.push(format!("`{c}`")),
            }
        }
        if !missing.is_empty() {
            const SHOWN: usize = 32;
            let mut has: Vec<String> =
                names.iter().take(SHOWN).map(|n| String::from_utf8_lossy(n).into_owned()).collect();
            if names.len() > SHOWN {
                has.push(format!("… {} more", names.len() - SHOWN));
            }
            let s = if missing.len() == 1 { "" } else { "s" };
            return Err(text_error(
                &self.path,
                line,
                None,
                format!("the header has no column{s} {} (it has: {})", missing.join(", "), has.join(", ")),
            ));
        }
        self.expect = Expect::Exactly(names.len());
        self.select = Some(select);
        Ok(())
    }

    /// Parses up to the next data row (past the header, when there is one) and checks
    /// its field count: its first line (from 1), or `None` at the end. An error or the
    /// end finishes the pass.
    fn data_row(&mut self) -> Result<Option<u64>> {
        let row = self.data_row_unfinished();
        if !matches!(row, Ok(Some(_))) {
            self.finish();
        }
        row
    }

    fn data_row_unfinished(&mut self) -> Result<Option<u64>> {
        loop {
            let Some(line) = self.parse_row()? else { return Ok(None) };
            if self.select.is_none() {
                self.read_header(line)?;
                continue;
            }
            let n = self.ends.len();
            let (ok, want) = match self.expect {
                Expect::Exactly(m) => (n == m, m.to_string()),
                Expect::AtLeast(m) => (n >= m, format!("at least {m}")),
            };
            if !ok {
                let fields = if n == 1 { "field" } else { "fields" };
                return Err(text_error(&self.path, line, None, format!("{n} {fields}, expected {want}")));
            }
            return Ok(Some(line));
        }
    }

    /// The record of the row just parsed, from `line`.
    fn encode(&self, line: u64) -> Result<Record> {
        let select = self.select.as_deref().unwrap_or_default();
        let field = |c: u32| field(&self.data, &self.ends, c as usize);
        let len = select.iter().map(|&c| 8 + field(c).len()).sum();
        let mut out = Vec::with_capacity(len);
        for &c in select {
            let value = field(c);
            let n = u32::try_from(value.len()).map_err(|_| {
                text_error(&self.path, line, None, format!("field {} is longer than 4 GiB", c + 1))
            })?;
            out.extend_from_slice(&c.to_le_bytes());
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(value);
        }
        Ok(Record::new(out, Origin::line(self.file, line - 1)))
    }

    fn finish(&mut self) {
        if self.input.take().is_some() {
            self.ctx.add_reader_stats(&self.stats);
        }
    }
}

impl DataIter for CsvIter {
    type Item = Record;

    fn next(&mut self) -> Result<Option<Record>> {
        let Some(line) = self.data_row()? else { return Ok(None) };
        let record = self.encode(line).inspect_err(|_| self.finish())?;
        self.stats.records += 1;
        self.stats.bytes += record.len() as u64;
        Ok(Some(record))
    }
}

impl Drop for CsvIter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Opens each path as a CSV file with shared [`CsvOptions`]: the interleave's function
/// for `csv` (`files.interleave(OpenCsv::new(o), c, b)`).
#[derive(Debug, Clone)]
pub struct OpenCsv {
    options: Arc<CsvOptions>,
}

impl OpenCsv {
    /// Opens files with `options`.
    pub fn new(options: CsvOptions) -> Self {
        OpenCsv { options: Arc::new(options) }
    }

    /// The options.
    pub fn options(&self) -> &CsvOptions {
        &self.options
    }
}

impl InterleaveFn<PathBuf> for OpenCsv {
    type Output = CsvFile;

    fn open(&self, path: PathBuf) -> CsvFile {
        CsvFile { path, options: self.options.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::text::csv_columns;
    use crate::stage::Files;
    use crate::text::testing::{read, write};

    /// A row as (csv column, text) pairs.
    type Row = Vec<(u32, String)>;

    fn options(header: bool, columns: &[&str]) -> CsvOptions {
        CsvOptions {
            header,
            columns: columns.iter().map(|c| c.to_string()).collect(),
            ..CsvOptions::default()
        }
    }

    fn rows_of(records: &[Record]) -> Vec<Row> {
        records
            .iter()
            .map(|r| csv_columns(r).map(|(c, v)| (c, String::from_utf8(v.to_vec()).unwrap())).collect())
            .collect()
    }

    /// The rows of `text` as a file `t.csv`, and their first lines.
    fn parse(text: &str, options: CsvOptions) -> Result<(Vec<Row>, Vec<u64>)> {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "t.csv", text.as_bytes());
        let records = read(&csv_file(&path, options), 0)?;
        let lines = records.iter().map(|r| r.origin().line_number().unwrap()).collect();
        Ok((rows_of(&records), lines))
    }

    /// The error of reading `text` as a file `t.csv`, with the path shown as `t.csv`.
    fn error(text: &str, options: CsvOptions) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "t.csv", text.as_bytes());
        let err = read(&csv_file(&path, options), 0).unwrap_err();
        assert!(err.is_corrupt(), "{err}");
        err.to_string().replace(&path.display().to_string(), "t.csv")
    }

    fn row(fields: &[(u32, &str)]) -> Row {
        fields.iter().map(|&(c, v)| (c, v.to_string())).collect()
    }

    #[test]
    fn quoted_fields_unescape() {
        let (rows, lines) =
            parse("a,\"b,c\",\"d\"\"e\"\n\"\",x,\"\"\"\"\n", options(false, &["p", "q", "r"])).unwrap();
        assert_eq!(rows, [row(&[(0, "a"), (1, "b,c"), (2, "d\"e")]), row(&[(0, ""), (1, "x"), (2, "\"")])]);
        assert_eq!(lines, [1, 2]);
    }

    #[test]
    fn line_breaks_inside_quotes_count_for_the_next_row() {
        let text = "1,\"two\nlines\"\r\n2,\"three\r\nmore\nlines\"\n3,x";
        let (rows, lines) = parse(text, options(false, &["n", "s"])).unwrap();
        assert_eq!(
            rows,
            [
                row(&[(0, "1"), (1, "two\nlines")]),
                row(&[(0, "2"), (1, "three\r\nmore\nlines")]),
                row(&[(0, "3"), (1, "x")]),
            ]
        );
        assert_eq!(lines, [1, 3, 6]);
    }

    #[test]
    fn line_ends_and_empty_lines() {
        let cols = options(false, &["a", "b"]);
        let (rows, lines) = parse("\n1,2\r\n\r\n\n3,4\r5,6\n\n", cols.clone()).unwrap();
        assert_eq!(
            rows,
            [row(&[(0, "1"), (1, "2")]), row(&[(0, "3"), (1, "4")]), row(&[(0, "5"), (1, "6")])]
        );
        assert_eq!(lines, [2, 5, 6], "empty lines are skipped but counted; a lone CR ends a line");
        assert_eq!(parse("", cols.clone()).unwrap().0, Vec::<Row>::new(), "an empty file");
        assert_eq!(parse("\n\n", cols.clone()).unwrap().0, Vec::<Row>::new());
        // Empty fields, at the end of a line and of the file.
        let (rows, _) = parse("1,\n,\n3,", cols).unwrap();
        assert_eq!(rows, [row(&[(0, "1"), (1, "")]), row(&[(0, ""), (1, "")]), row(&[(0, "3"), (1, "")])]);
        // A line of `""` is a row of one empty field.
        assert_eq!(parse("\"\"\n", options(false, &["a"])).unwrap().0, [row(&[(0, "")])]);
    }

    #[test]
    fn other_delimiters() {
        let semi = CsvOptions { delimiter: b';', ..options(false, &["a", "b"]) };
        assert_eq!(parse("1,5;\"x;y\"\n", semi).unwrap().0, [row(&[(0, "1,5"), (1, "x;y")])]);
        let tab = CsvOptions { delimiter: b'\t', ..options(false, &["a", "b"]) };
        assert_eq!(parse("1\t 2\n", tab).unwrap().0, [row(&[(0, "1"), (1, " 2")])]);
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "t.csv", b"a");
        for d in [b'"', b'\n', 0xe9] {
            let bad = CsvOptions { delimiter: d, ..options(false, &["a"]) };
            let err = read(&csv_file(&path, bad), 0).unwrap_err();
            assert!(matches!(err, Error::Invalid(_)) && err.to_string().contains("delimiter"), "{err}");
        }
    }

    #[test]
    fn a_header_maps_columns_by_name() {
        let text = "b,a,c\n1,2,3\n4,\"5\",6\n";
        let (rows, lines) = parse(text, options(true, &["c", "a"])).unwrap();
        assert_eq!(rows, [row(&[(2, "3"), (1, "2")]), row(&[(2, "6"), (1, "5")])]);
        assert_eq!(lines, [2, 3]);
        // The header is a row like any other: quoted, after empty lines.
        let (rows, lines) = parse("\n\"a\",\"b\nc\"\n1,2\n", options(true, &["b\nc"])).unwrap();
        assert_eq!((rows, lines), (vec![row(&[(1, "2")])], vec![4]));
        assert_eq!(parse("a,b\n", options(true, &["a"])).unwrap().0, Vec::<Row>::new(), "a header alone");
        assert_eq!(parse("", options(true, &["a"])).unwrap().0, Vec::<Row>::new(), "an empty file");
    }

    #[test]
    fn a_missing_header_column_is_an_error() {
        assert_eq!(
            error("a,b,c\n1,2,3\n", options(true, &["a", "x"])),
            "t.csv:1: the header has no column `x` (it has: a, b, c)"
        );
        assert_eq!(
            error("\na,b\n", options(true, &["y", "a", "x"])),
            "t.csv:2: the header has no columns `y`, `x` (it has: a, b)"
        );
    }

    #[test]
    fn field_counts_are_checked() {
        let text = "a,b,c,d\n1,2,3,4\n1,2,3\n";
        assert_eq!(error(text, options(true, &["a"])), "t.csv:3: 3 fields, expected 4");
        assert_eq!(error("a,b\n1,2,3\n", options(true, &["a"])), "t.csv:2: 3 fields, expected 2");
        // Without a header, a row needs the schema's columns; more are ignored.
        let cols = options(false, &["a", "b"]);
        assert_eq!(parse("1,2,3\n", cols.clone()).unwrap().0, [row(&[(0, "1"), (1, "2")])]);
        assert_eq!(error("1,2\n\n3\n", cols), "t.csv:3: 1 field, expected at least 2");
    }

    #[test]
    fn bad_quotes_name_line_and_column() {
        let cols = options(false, &["a", "b"]);
        assert_eq!(
            error("x,y\nab,c\"d\n", cols.clone()),
            "t.csv:2:5: a quote inside an unquoted field (quote the whole field and write the quote as `\"\"`)"
        );
        // Columns count characters, not bytes.
        assert!(error("é,ü\"\n", cols.clone()).starts_with("t.csv:1:4: a quote inside"));
        assert_eq!(
            error("x,\"multi\nline\"z\n", cols.clone()),
            "t.csv:2:6: `z` after a closing quote, where the delimiter or a line end must be \
             (a quote inside a quoted field is written `\"\"`)"
        );
        assert_eq!(
            error("1,2\n3,\"open\n4,5\n", cols.clone()),
            "t.csv:2:3: a quoted field is not closed by the end of the file"
        );
        assert_eq!(error("\"", cols), "t.csv:1:1: a quoted field is not closed by the end of the file");
    }

    #[test]
    fn rows_cross_the_buffer() {
        let big = "q".repeat(3 * super::super::BUFFER);
        let text = format!("\"{big}\",\"a\"\"b\"\n{big},2\n");
        let (rows, lines) = parse(&text, options(false, &["x", "y"])).unwrap();
        assert_eq!(rows, [row(&[(0, &big), (1, "a\"b")]), row(&[(0, &big), (1, "2")])]);
        assert_eq!(lines, [1, 2]);
    }

    #[test]
    fn compressed_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["t.csv.gz", "t.csv.zlib"] {
            let path = write(dir.path(), name, b"a,b\n1,2\n");
            let records = read(&csv_file(&path, options(true, &["b"])), 0).unwrap();
            assert_eq!(rows_of(&records), [row(&[(1, "2")])], "{name}");
        }
    }

    #[test]
    fn resumes_where_a_full_pass_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "r.csv", b"n,s\n1,\"a\nb\"\n\n2,c\n3,\"\"\n4,d");
        let ds = csv_file(&path, options(true, &["s", "n"]));
        let full = read(&ds, 0).unwrap();
        assert_eq!(full.len(), 4);
        for k in 0..=5u64 {
            let tail = read(&ds, k).unwrap();
            let rest = &full[(k as usize).min(full.len())..];
            assert_eq!(tail, rest, "skip {k}");
            let origins: Vec<_> = tail.iter().map(|r| r.origin()).collect();
            assert_eq!(origins, rest.iter().map(|r| r.origin()).collect::<Vec<_>>(), "skip {k}");
        }
        // Over files, through the interleave.
        let paths: Vec<_> = (0..3)
            .map(|f| {
                let text: String =
                    std::iter::once("v\n".to_string()).chain((0..4).map(|i| format!("{f}{i}\n"))).collect();
                write(dir.path(), &format!("{f}.csv"), text.as_bytes())
            })
            .collect();
        let make = || Files::from_paths(paths.clone()).interleave(OpenCsv::new(options(true, &["v"])), 2, 1);
        let all = read(&make(), 0).unwrap();
        assert_eq!(rows_of(&all[..3]), [row(&[(0, "00")]), row(&[(0, "10")]), row(&[(0, "01")])]);
        for k in [0, 5, 12] {
            assert_eq!(read(&make(), k).unwrap(), all[k as usize..], "skip {k}");
            assert_eq!(read(&make().num_parallel(3), k).unwrap(), all[k as usize..], "parallel skip {k}");
        }
    }

    #[test]
    fn reader_stats_count_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "s.csv", b"a\n1\n22\n");
        let ds = csv_file(&path, options(true, &["a"]));
        let mut stream = ds.stream().unwrap();
        assert_eq!(stream.by_ref().count(), 2);
        let stats = stream.reader_stats();
        assert_eq!((stats.records, stats.bytes), (2, 8 + 1 + 8 + 2));
    }
}
