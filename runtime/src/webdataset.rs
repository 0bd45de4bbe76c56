//! WebDataset tar shards as rows: the `webdataset(files)` source.
//!
//! A shard is a POSIX tar (plain or gzip'ed, from disk or an object store, read as a
//! stream) whose members are grouped into samples as the `webdataset` package groups them:
//! consecutive members whose names share the part before the first `.` of the file name
//! (the key, with its directories: `train/000123`) are one sample, and the rest of each name
//! (`jpg`, `cls`, `seg.png`, lower-cased) names its field (`seg.png` is the field
//! `seg_png`). Members that are not regular files, names without a `.`, and the metadata
//! members `__…__` are passed over. `__key__` is the key.
//!
//! Each sample becomes one [`Record`] in the row encoding of [`abi::table`](crate::abi::table),
//! holding the [`WebDatasetOptions::columns`] in order: `bytes` the member's bytes, `str` its
//! text (UTF-8), a number its text parsed (`cls` holding `3\n` is 3, as `webdataset` reads
//! it) or a one-value NumPy `.npy` array. A list (`T[]`) or tensor (`T[a, b]`) field is a
//! `.npy` array of the field's type ([`npy`]), of one dimension or of the tensor's number
//! of values in C order; such a field `x` is the member `x` or `x.npy` (as
//! `--format webdataset` writes it, and `webdataset`'s `TarWriter` writes a NumPy array).
//! A sample without a declared member takes the schema default; without one, or with
//! a value that does not convert, its column holds an error naming the key, which fails the
//! parse (the stage adds the shard and sample index), or is counted under `on_error: skip`.
//! A tar cut short, or damaged, is an error naming the shard and the last key read.
//!
//! The tar is read on a thread of its own per open shard, a few samples ahead (the
//! `tar` crate's entries borrow their archive), so memory is bounded by those samples.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use crate::abi::table::{ColumnShape, ColumnType, RowWriter, TableColumn};
use crate::error::{Error, Result};
use crate::npy;
use crate::stage::{Ctx, DataIter, Dataset, FileId, InterleaveFn, Origin, Record};
use crate::tfrecord::{self, Compression, ReaderStats};

/// How to read WebDataset shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebDatasetOptions {
    /// The fields of each sample, in the order each row holds them.
    pub columns: Arc<[TableColumn]>,
    /// Whole-file compression; `Auto` decides by the name (`.gz`), else the GZIP magic.
    pub compression: Compression,
}

impl Default for WebDatasetOptions {
    fn default() -> Self {
        WebDatasetOptions { columns: Arc::from(Vec::new()), compression: Compression::Auto }
    }
}

/// The samples of one shard (see the [module](self)).
pub fn webdataset_file(path: impl AsRef<Path>, options: WebDatasetOptions) -> WebDatasetFile {
    WebDatasetFile { path: path.as_ref().to_path_buf(), options: Arc::new(options) }
}

/// See [`webdataset_file`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct WebDatasetFile {
    path: PathBuf,
    options: Arc<WebDatasetOptions>,
}

/// Samples read ahead of the consumer, per open shard.
const AHEAD: usize = 4;

impl Dataset for WebDatasetFile {
    type Item = Record;
    type Iter = WebDatasetIter;

    fn iter(&self, ctx: &Ctx) -> Result<WebDatasetIter> {
        let (input, _, _) = tfrecord::open_input_sniffed(
            &self.path,
            self.options.compression,
            tfrecord::detect_text_compression,
        )
        .map_err(|e| Error::io(&self.path, e))?;
        let (tx, rx) = sync_channel(AHEAD);
        let (path, options) = (self.path.clone(), self.options.clone());
        std::thread::Builder::new()
            .name("sluice-webdataset".into())
            .spawn(move || read_shard(input, &path, &options, &tx))
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(WebDatasetIter {
            rx: Some(rx),
            file: FileId::of(&self.path),
            index: 0,
            stats: ReaderStats::default(),
            ctx: ctx.clone(),
        })
    }
}

/// A pass over one shard's samples.
#[derive(Debug)]
pub struct WebDatasetIter {
    rx: Option<Receiver<Result<Vec<u8>>>>,
    file: FileId,
    index: u64,
    stats: ReaderStats,
    ctx: Ctx,
}

impl WebDatasetIter {
    fn finish(&mut self) {
        if self.rx.take().is_some() {
            self.ctx.add_reader_stats(&self.stats);
        }
    }
}

impl DataIter for WebDatasetIter {
    type Item = Record;

    fn next(&mut self) -> Result<Option<Record>> {
        let Some(rx) = &self.rx else { return Ok(None) };
        match rx.recv() {
            Ok(Ok(row)) => {
                let record = Record::new(row, Origin::new(self.file, self.index));
                self.index += 1;
                self.stats.records += 1;
                self.stats.bytes += record.len() as u64;
                Ok(Some(record))
            }
            Ok(Err(e)) => {
                self.finish();
                Err(e)
            }
            // The reader finished the shard.
            Err(_) => {
                self.finish();
                Ok(None)
            }
        }
    }
}

impl Drop for WebDatasetIter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The key and field of a member's name (`None`: not part of a sample).
fn key_and_field(name: &str) -> Option<(&str, String)> {
    let file = name.rsplit('/').next().unwrap_or(name);
    if file.starts_with("__") && file.ends_with("__") {
        return None;
    }
    let dot = file.find('.')?;
    let key_len = name.len() - file.len() + dot;
    Some((&name[..key_len], file[dot + 1..].to_lowercase().replace('.', "_")))
}

/// One sample being gathered: its key and its members (field, bytes).
struct Sample {
    key: String,
    members: Vec<(String, Vec<u8>)>,
}

/// Reads a shard's members into samples and sends each as a row (or the error that ends
/// the shard); stops when the consumer hangs up.
fn read_shard(input: impl Read, path: &Path, options: &WebDatasetOptions, tx: &SyncSender<Result<Vec<u8>>>) {
    let shard_error = |last: Option<&str>, what: String| {
        let at = last.map_or("before the first sample".to_string(), |k| format!("after sample `{k}`"));
        Error::Table { path: path.to_path_buf(), message: format!("{at}: {what}") }
    };
    let mut archive = tar::Archive::new(input);
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => {
            let _ = tx.send(Err(shard_error(None, format!("not a readable tar: {e}"))));
            return;
        }
    };
    let mut current: Option<Sample> = None;
    let mut last_key: Option<String> = None;
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                let _ = tx.send(Err(shard_error(last_key.as_deref(), format!("damaged or cut short: {e}"))));
                return;
            }
        };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some((key, field)) = key_and_field(&name) else { continue };
        let (key, field) = (key.to_string(), field);
        let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0).min(64 << 20));
        let size = entry.size();
        let read = entry.read_to_end(&mut bytes);
        if read.is_err() || bytes.len() as u64 != size {
            let why = read.err().map_or(String::new(), |e| format!(": {e}"));
            let message =
                format!("sample `{key}`: member `{name}` cut short ({} of {size} bytes){why}", bytes.len());
            let _ = tx.send(Err(Error::Table { path: path.to_path_buf(), message }));
            return;
        }
        if current.as_ref().is_some_and(|s| s.key != key) {
            let done = current.take().expect("a sample");
            if tx.send(Ok(row(&done, options))).is_err() {
                return;
            }
        }
        let sample = current.get_or_insert_with(|| Sample { key: key.clone(), members: Vec::new() });
        if sample.members.iter().any(|(f, _)| *f == field) {
            let _ =
                tx.send(Err(shard_error(Some(&key), format!("sample `{key}` has two `{field}` members"))));
            return;
        }
        sample.members.push((field, bytes));
        last_key = Some(key);
    }
    if let Some(done) = current {
        let _ = tx.send(Ok(row(&done, options)));
    }
}

/// The row of a sample: each column's value, a null where the member is missing and the
/// schema has a default, an error where it is missing without one or does not convert.
fn row(s: &Sample, options: &WebDatasetOptions) -> Vec<u8> {
    let mut w = RowWriter::new(0, s.members.iter().map(|(_, b)| b.len() + 8).sum::<usize>() + 16);
    for c in options.columns.iter() {
        if c.name == "__key__" {
            put(&mut w, c, s.key.as_bytes(), &s.key);
            continue;
        }
        // A list or tensor field `x` is also the member `x.npy` (field `x_npy`), as
        // `--format webdataset` writes it.
        let npy = (c.shape != ColumnShape::Scalar).then(|| format!("{}_npy", c.name));
        let member = s.members.iter().find(|(f, _)| *f == c.name || Some(f) == npy.as_ref());
        match member {
            Some((_, bytes)) => put(&mut w, c, bytes, &s.key),
            None if c.has_default => w.null(),
            None => {
                let have: Vec<&str> = s.members.iter().map(|(f, _)| f.as_str()).collect();
                let wanted = match &npy {
                    Some(_) => format!("`{0}` or `{0}.npy`", c.name),
                    None => format!("`{}`", c.name),
                };
                w.error(&format!("sample `{}` has no {wanted} member (it has: {})", s.key, have.join(", ")));
            }
        }
    }
    w.finish()
}

/// Writes a member's bytes as column `c`'s value.
fn put(w: &mut RowWriter, c: &TableColumn, bytes: &[u8], key: &str) {
    let fail = |w: &mut RowWriter, why: String| w.error(&format!("sample `{key}`: {why}"));
    let numeric = !matches!(c.dtype, ColumnType::Str | ColumnType::Bytes);
    if c.shape != ColumnShape::Scalar || (numeric && bytes.starts_with(npy::MAGIC)) {
        if let Err(why) = put_array(w, c, bytes) {
            fail(w, format!("`{}`: {why}", c.name));
        }
        return;
    }
    let result = match c.dtype {
        ColumnType::Bytes => w.bytes(bytes),
        ColumnType::Str => match std::str::from_utf8(bytes) {
            Ok(_) => w.bytes(bytes),
            Err(e) => Err(format!("not UTF-8 (byte {})", e.valid_up_to())),
        },
        t => {
            let text = String::from_utf8_lossy(bytes);
            let text = text.trim();
            macro_rules! number {
                ($t:ty) => {
                    match text.parse::<$t>() {
                        Ok(v) => w.values(std::iter::once(v)),
                        Err(_) => Err(format!("`{}` is not {}", text.escape_debug(), stringify!($t))),
                    }
                };
            }
            match t {
                ColumnType::Bool => match text {
                    "true" | "1" => w.values(std::iter::once(true)),
                    "false" | "0" => w.values(std::iter::once(false)),
                    _ => Err(format!("`{}` is not a bool", text.escape_debug())),
                },
                ColumnType::U8 => number!(u8),
                ColumnType::I32 => number!(i32),
                ColumnType::U32 => number!(u32),
                ColumnType::I64 => number!(i64),
                ColumnType::U64 => number!(u64),
                ColumnType::F32 => number!(f32),
                ColumnType::F64 => number!(f64),
                ColumnType::Str | ColumnType::Bytes => unreachable!("matched above"),
            }
        }
    };
    if let Err(why) = result {
        fail(w, format!("`{}`: {why}", c.name));
    }
}

/// Writes a `.npy` member as column `c`'s values: an array of the field's type, of one
/// value for a scalar, of one dimension for a list, of the shape's number of values for
/// a tensor (in C order).
fn put_array(w: &mut RowWriter, c: &TableColumn, bytes: &[u8]) -> std::result::Result<(), String> {
    let a = npy::Array::parse(bytes)?;
    if a.dtype != Some(c.dtype) {
        let holds = a.dtype.map_or("values no schema type holds", ColumnType::name);
        return Err(format!(
            "a .npy array of {holds} (`{}`), where the field is {}",
            a.descr,
            c.dtype.name()
        ));
    }
    let (n, shape) = (a.len(), a.shape_text());
    match c.shape {
        ColumnShape::Scalar if n != 1 => {
            Err(format!("a .npy array of shape {shape}, where the field is one value"))
        }
        ColumnShape::List if a.shape.len() > 1 => Err(format!(
            "a .npy array of shape {shape}, where the field is a list (declare its shape: `T[a, b]`)"
        )),
        ColumnShape::Fixed(want) if n != want => {
            Err(format!("a .npy array of shape {shape} ({n} values), where the field has {want}"))
        }
        _ => w.raw_values(n, &a.le_bytes()),
    }
}

/// Opens each path as a WebDataset shard with shared [`WebDatasetOptions`]: the
/// interleave's function for `webdataset`.
#[derive(Debug, Clone)]
pub struct OpenWebDataset {
    options: Arc<WebDatasetOptions>,
}

impl OpenWebDataset {
    /// Opens shards with `options`.
    pub fn new(options: WebDatasetOptions) -> Self {
        OpenWebDataset { options: Arc::new(options) }
    }
}

impl InterleaveFn<PathBuf> for OpenWebDataset {
    type Output = WebDatasetFile;

    fn open(&self, path: PathBuf) -> WebDatasetFile {
        WebDatasetFile { path, options: self.options.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::table::RowReader;
    use crate::text::testing::read;

    fn column(name: &str, dtype: ColumnType, has_default: bool) -> TableColumn {
        TableColumn { name: name.into(), dtype, shape: ColumnShape::Scalar, has_default }
    }

    fn shard(dir: &Path, name: &str, members: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.join(name);
        let mut b = tar::Builder::new(std::fs::File::create(&path).unwrap());
        for (n, bytes) in members {
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, n, *bytes).unwrap();
        }
        b.finish().unwrap();
        path
    }

    fn options() -> WebDatasetOptions {
        WebDatasetOptions {
            columns: Arc::from(vec![
                column("__key__", ColumnType::Str, false),
                column("jpg", ColumnType::Bytes, false),
                column("cls", ColumnType::I64, false),
                column("txt", ColumnType::Str, true),
            ]),
            ..Default::default()
        }
    }

    fn decode(r: &Record) -> Result<(String, Vec<u8>, i64, String), String> {
        let mut row = RowReader::new(r)?;
        Ok((
            row.text("__key__", None)?,
            row.bytes("jpg", None)?,
            row.scalar("cls", None)?,
            row.text("txt", Some("-"))?,
        ))
    }

    #[test]
    fn members_group_into_samples_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = shard(
            dir.path(),
            "s.tar",
            &[
                ("a/000001.jpg", b"\xff\xd8one"),
                ("a/000001.cls", b"3\n"),
                ("a/000001.TXT", "héllo".as_bytes()),
                ("__meta__", b"skipped"),
                ("a/000002.jpg", b"two"),
                ("a/000002.cls", b" 7 "),
                ("a/000002.seg.png", b"ignored: not declared"),
            ],
        );
        let records = read(&webdataset_file(&path, options()), 0).unwrap();
        let got: Vec<_> = records.iter().map(|r| decode(r).unwrap()).collect();
        assert_eq!(
            got,
            vec![
                ("a/000001".into(), b"\xff\xd8one".to_vec(), 3, "héllo".into()),
                ("a/000002".into(), b"two".to_vec(), 7, "-".into()),
            ]
        );
        // Resume after the first sample.
        let rest = read(&webdataset_file(&path, options()), 1).unwrap();
        assert_eq!(decode(&rest[0]).unwrap().0, "a/000002");
        assert_eq!(key_and_field("d/x.seg.PNG"), Some(("d/x", "seg_png".into())));
        assert_eq!(key_and_field("noext"), None);
    }

    #[test]
    fn a_missing_member_or_a_bad_value_fails_the_parse_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = shard(dir.path(), "m.tar", &[("k1.jpg", b"x"), ("k2.jpg", b"y"), ("k2.cls", b"seven")]);
        let records = read(&webdataset_file(&path, options()), 0).unwrap();
        assert_eq!(
            decode(&records[0]).unwrap_err(),
            "column `cls`: sample `k1` has no `cls` member (it has: jpg)"
        );
        assert_eq!(decode(&records[1]).unwrap_err(), "column `cls`: sample `k2`: `cls`: `seven` is not i64");
    }

    #[test]
    fn a_tar_cut_mid_member_is_an_error_naming_the_shard_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let big = vec![7u8; 5000];
        let path = shard(
            dir.path(),
            "c.tar",
            &[("k1.jpg", b"x"), ("k1.cls", b"1"), ("k2.jpg", &big), ("k2.cls", b"2")],
        );
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..3000]).unwrap();
        let e = read(&webdataset_file(&path, options()), 0).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: sample `k2`: member `k2.jpg` cut short", path.display())), "{e}");
        let junk = dir.path().join("junk.tar");
        std::fs::write(&junk, vec![0x41u8; 1024]).unwrap();
        let e = read(&webdataset_file(&junk, options()), 0).unwrap_err().to_string();
        assert!(e.contains("junk.tar"), "{e}");
    }

    #[test]
    fn lists_tensors_and_npy_scalars_are_npy_members() {
        use crate::abi::export::Nums;
        use crate::npy::write;
        let dir = tempfile::tempdir().unwrap();
        let array =
            |name: &str, dtype, shape| TableColumn { name: name.into(), dtype, shape, has_default: false };
        let options = WebDatasetOptions {
            columns: Arc::from(vec![
                array("x", ColumnType::F32, ColumnShape::List),
                array("m", ColumnType::I64, ColumnShape::Fixed(6)),
                array("y", ColumnType::F64, ColumnShape::Scalar),
                array("flags_npy", ColumnType::Bool, ColumnShape::List),
            ]),
            ..Default::default()
        };
        type Row = (Vec<f32>, Vec<i64>, f64, Vec<bool>);
        let decode = |r: &Record| -> Result<Row, String> {
            let mut row = RowReader::new(r)?;
            let x = row.list("x", None)?;
            let m = row.tensor::<i64>("m", &[2, 3], None)?.into_parts().1;
            Ok((x, m, row.scalar("y", None)?, row.list("flags_npy", None)?))
        };
        let (x, m) = (write(&Nums::F32(vec![1.5, -2.0]), &[2]), write(&Nums::I64((0..6).collect()), &[2, 3]));
        let (y, flags) = (write(&Nums::F64(vec![0.25]), &[1]), write(&Nums::Bool(vec![true, false]), &[2]));
        let long = write(&Nums::I64((0..6).collect()), &[6]);
        let (wrong_type, matrix) =
            (write(&Nums::F64(vec![1.0]), &[1]), write(&Nums::F32(vec![0.0; 4]), &[2, 2]));
        // A string array (`<U1`): no type a schema declares.
        let mut strings = crate::npy::MAGIC.to_vec();
        let header = "{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }\n";
        strings.extend_from_slice(&[1, 0, header.len() as u8, 0]);
        strings.extend_from_slice(header.as_bytes());
        strings.extend_from_slice(&[b'a', 0, 0, 0]);
        let path = shard(
            dir.path(),
            "n.tar",
            &[
                // As --format webdataset writes them: `x.npy`, `m.npy`; `y` a one-value array.
                ("k1.x.npy", &x),
                ("k1.m.npy", &m),
                ("k1.y", &y),
                ("k1.flags.npy", &flags),
                // `m` of 6 values in one dimension is the tensor's values in C order; `y` text.
                ("k2.x", &x),
                ("k2.m", &long),
                ("k2.y", b"0.5"),
                ("k2.flags.npy", &flags),
                ("k3.x.npy", &wrong_type),
                ("k4.x.npy", &matrix),
                ("k5.x.npy", &x),
                ("k5.m.npy", &x),
                ("k6.x.npy", &x),
                ("k6.m.npy", &m),
                ("k6.y", &write(&Nums::F64(vec![0.0; 4]), &[2, 2])),
                ("k7.x.npy", b"\x93NUMPY\x01\x00\x08"),
                ("k8.x.npy", &x),
                ("k8.m.npy", &write(&Nums::I64((0..4).collect()), &[4])),
                ("k9.x.npy", &strings),
            ],
        );
        let records = read(&webdataset_file(&path, options), 0).unwrap();
        let got: Vec<_> = records.iter().map(decode).collect();
        let ok = (vec![1.5, -2.0], (0..6).collect::<Vec<i64>>(), 0.25, vec![true, false]);
        assert_eq!(got[0], Ok(ok.clone()));
        assert_eq!(got[1], Ok((ok.0, ok.1, 0.5, ok.3)));
        let errors: Vec<String> = got[2..].iter().map(|r| r.clone().unwrap_err()).collect();
        assert_eq!(
            errors,
            [
                "column `x`: sample `k3`: `x`: a .npy array of f64 (`<f8`), where the field is f32",
                "column `x`: sample `k4`: `x`: a .npy array of shape (2, 2), where the field is a list (declare its shape: `T[a, b]`)",
                "column `m`: sample `k5`: `m`: a .npy array of f32 (`<f4`), where the field is i64",
                "column `y`: sample `k6`: `y`: a .npy array of shape (2, 2), where the field is one value",
                "column `x`: sample `k7`: `x`: a .npy file cut short in its header",
                "column `m`: sample `k8`: `m`: a .npy array of shape (4,) (4 values), where the field has 6",
                "column `x`: sample `k9`: `x`: a .npy array of values no schema type holds (`<U1`), where the field is f32",
            ]
        );
    }
}
