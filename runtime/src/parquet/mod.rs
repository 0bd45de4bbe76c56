//! Parquet files as rows: the `parquet(files)` source (feature `parquet`).
//!
//! Each file is read with the `parquet` crate's Arrow reader, one row group at a time
//! (so the memory in flight is one row group's projected column chunks and one batch of
//! rows), reading only the columns the pipeline uses ([`ParquetOptions::columns`], the
//! projection). When a file is opened its Arrow schema is checked against the columns'
//! types before any row is read: a column that is missing, or whose values do not convert
//! to the field's type without loss, is an error naming the file and the column.
//!
//! Each row becomes one [`Record`] in the encoding of [`abi::table`](crate::abi::table),
//! its values already of the fields' types; its [`Origin`] is the row's index in the file
//! (`path: record N`), and the row group is in the record for errors.
//!
//! Conversions (value types; a list column's items convert the same way):
//!
//! | Arrow | schema |
//! |---|---|
//! | `bool` | `bool` |
//! | `int8`, `int16`, `int32` | `i32`, `i64` |
//! | `uint8` | `u8`, `i32`, `u32`, `i64`, `u64` |
//! | `uint16` | `i32`, `u32`, `i64`, `u64` |
//! | `uint32` | `u32`, `i64`, `u64` |
//! | `int64` / `uint64` | `i64` / `u64` |
//! | `float` | `f32`, `f64` |
//! | `double` | `f64` |
//! | `utf8`, `large_utf8`, `utf8_view`, dictionary of one of them | `str`, `bytes` |
//! | `binary`, `large_binary`, `binary_view`, `fixed_size_binary` | `bytes` |
//!
//! Shapes: a scalar field reads a column of values; `T[]` a `list`, `large_list` or
//! `fixed_size_list` column; `T[a, b]` a list column whose every row holds `a × b` values
//! (checked per row) or a `fixed_size_list` of exactly `a × b`. A null value takes the
//! schema default (else the parse fails, naming column, row group and row); a null
//! inside a list is an error.

mod chunks;
mod columns;
mod convert;
mod prune;
mod shard;
mod shuffle;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::parquet::arrow::ProjectionMask;
use ::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use arrow_array::{ArrayRef, RecordBatch};

use self::chunks::Chunks;
pub use self::columns::{ParquetColumns, ParquetColumnsIter, TableColumns, parquet_columns, reads_columnar};
pub use self::prune::{Bound, Cmp, RowGroupTest};
use self::shard::Footer;
pub use self::shard::{ParquetPart, ParquetParts, ParquetPartsIter, RowGroupShard, parquet_parts};
pub use self::shuffle::{ParquetShuffle, ParquetShuffleIter, parquet_global_shuffle};
use crate::abi::table::RowWriter;
pub use crate::abi::table::{ColumnShape, ColumnType, TableColumn};
use crate::error::{Error, Result};
use crate::stage::{Ctx, DataIter, Dataset, FileId, InterleaveFn, Origin, Record};
use crate::tfrecord::ReaderStats;

/// How to read Parquet files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetOptions {
    /// The columns read, in the order each row holds them: the projection.
    pub columns: Arc<[TableColumn]>,
    /// Rows decoded at a time (the Arrow batch size).
    pub batch_rows: usize,
    /// The tests of the filter after the reader that can skip whole row groups by their
    /// statistics (all must hold for a row to pass).
    pub tests: Arc<[RowGroupTest]>,
    /// Only this worker's row groups, by their index in the global list of the files' row
    /// groups, decided before the tests skip any ([`RowGroupShard`]). The row path then
    /// takes its files from [`parquet_parts`].
    pub shard: Option<RowGroupShard>,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            columns: Arc::from(Vec::new()),
            batch_rows: 1024,
            tests: Arc::from(Vec::new()),
            shard: None,
        }
    }
}

/// The rows of one Parquet file (see the [module](self)); with a
/// [`shard`](ParquetOptions::shard), its row groups are the global list.
pub fn parquet_file(path: impl AsRef<Path>, options: ParquetOptions) -> ParquetFile {
    ParquetFile {
        path: path.as_ref().to_path_buf(),
        options: Arc::new(options),
        first_group: Some(0),
        footer: None,
    }
}

/// See [`parquet_file`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct ParquetFile {
    path: PathBuf,
    options: Arc<ParquetOptions>,
    /// The global index of its first row group (`None`: not known, which a sharded reader
    /// refuses).
    first_group: Option<u64>,
    /// Its footer, when [`parquet_parts`] has read it.
    footer: Option<Footer>,
}

fn table_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Table { path: path.to_path_buf(), message: message.to_string() }
}

impl ParquetFile {
    /// Opens the file, reads its footer and checks the columns: the reader at row `skip`,
    /// or, with `picked`, of only those rows: (row group in the file, its rows, sorted),
    /// the groups in order (the global shuffle's gather; no test nor shard applies).
    fn open(&self, ctx: &Ctx, skip: u64, picked: Option<Vec<(usize, Vec<u64>)>>) -> Result<ParquetIter> {
        let path = &self.path;
        let Footer { input, meta } = match &self.footer {
            Some(f) => f.clone(),
            None => Footer::read(path)?,
        };
        let first_group = match (self.options.shard, self.first_group) {
            (Some(_), None) => {
                return Err(table_error(
                    path,
                    "a reader sharded by row groups takes its files from `parquet_parts` (the row groups \
                     before each file decide its share)",
                ));
            }
            (_, first) => first.unwrap_or(0),
        };
        let arrow = meta.schema().clone();
        let mut roots = Vec::with_capacity(self.options.columns.len());
        for c in self.options.columns.iter() {
            let Some((i, field)) = arrow.fields().find(&c.name) else {
                let names: Vec<&str> = arrow.fields().iter().map(|f| f.name().as_str()).collect();
                return Err(table_error(
                    path,
                    format!("no column `{}` (the file has: {})", c.name, names.join(", ")),
                ));
            };
            c.check(field.data_type()).map_err(|m| table_error(path, format!("column `{}`: {m}", c.name)))?;
            roots.push(i);
        }
        let mask = ProjectionMask::roots(meta.parquet_schema(), roots);
        let schema = meta.parquet_schema();
        // The leaf holding a top-level column's values (a list's items: their null count
        // also counts null and, as some writers count them, empty lists).
        let leaf = |name: &str| {
            schema.columns().iter().position(|c| c.path().parts().first().is_some_and(|p| p == name))
        };
        let signed = |name: &str| {
            arrow.field_with_name(name).is_ok_and(|f| {
                use arrow_schema::DataType as D;
                matches!(f.data_type(), D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::Float32 | D::Float64)
            })
        };
        // The row groups read (this shard's, less those no row of which can pass the
        // filter after the reader), each with its rows and the file's index of its first
        // row. The shard is decided first, on the global index, so that the shards
        // partition the row groups whatever the statistics say.
        let (mut groups, mut pruned, mut first) = (Vec::new(), 0u64, 0u64);
        let (only, picks): (Vec<usize>, Vec<Vec<u64>>) = picked.unwrap_or_default().into_iter().unzip();
        for (g, rg) in meta.metadata().row_groups().iter().enumerate() {
            let rows = u64::try_from(rg.num_rows()).unwrap_or(0);
            if !picks.is_empty() {
                if only.contains(&g) {
                    groups.push(Group { index: g, rows, first });
                }
            } else if self.options.shard.is_some_and(|s| !s.reads(first_group + g as u64)) {
                // Another shard's.
            } else if prune::skippable(rg, &self.options.tests, &self.options.columns, &leaf, &signed) {
                pruned += 1;
            } else {
                groups.push(Group { index: g, rows, first });
            }
            first += rows;
        }
        if groups.len() != picks.len() && !picks.is_empty() {
            return Err(table_error(path, format!("the row groups {only:?} are not all in the file")));
        }
        // The row group holding the `skip`th row read, and the rows of it to pass over.
        let (mut group, mut within) = (0, skip);
        while group < groups.len() && within >= groups[group].rows {
            within -= groups[group].rows;
            group += 1;
        }
        let row = groups.get(group).map_or(first, |g| g.first + within);
        let stats = ReaderStats { pruned_row_groups: pruned, ..ReaderStats::default() };
        Ok(ParquetIter {
            path: path.clone(),
            file: FileId::of(path),
            input,
            meta,
            mask,
            groups,
            group,
            skip_in_group: within,
            picks,
            in_group: 0,
            row,
            reader: None,
            arrays: Vec::new(),
            plain: Vec::new(),
            rows_in_batch: 0,
            next_in_batch: 0,
            options: self.options.clone(),
            stats,
            ctx: ctx.clone(),
            done: false,
        })
    }
}

impl Dataset for ParquetFile {
    type Item = Record;
    type Iter = ParquetIter;

    fn iter(&self, ctx: &Ctx) -> Result<ParquetIter> {
        self.open(ctx, 0, None)
    }

    /// Skips whole row groups by their row counts in the footer, then rows within one by
    /// a row selection: no skipped row is decoded.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<ParquetIter> {
        self.open(ctx, skip, None)
    }
}

/// A row group a pass reads.
#[derive(Debug, Clone, Copy)]
struct Group {
    /// Its index in the file.
    index: usize,
    /// Its rows.
    rows: u64,
    /// The file's index of its first row.
    first: u64,
}

/// A pass over one Parquet file's rows.
pub struct ParquetIter {
    path: PathBuf,
    file: FileId,
    input: Chunks,
    meta: ArrowReaderMetadata,
    mask: ProjectionMask,
    /// The row groups read.
    groups: Vec<Group>,
    /// The index in `groups` of the row group read next (or being read, with `reader`).
    group: usize,
    /// Rows of `group` to pass over before the first one read (a resumed pass).
    skip_in_group: u64,
    /// Per group of `groups`, the only rows read in it, sorted (empty: every row).
    picks: Vec<Vec<u64>>,
    /// Rows of `group` given so far.
    in_group: usize,
    /// The index in the file of the next row.
    row: u64,
    reader: Option<ParquetRecordBatchReader>,
    /// The arrays of the batch being read, one per column read, and its rows.
    arrays: Vec<ArrayRef>,
    /// Per column of the batch: its values as bytes and the size of one, where the column
    /// is a scalar of the array's own type without nulls (each row's value is then copied
    /// as it is, with no conversion); `None` for the others.
    plain: Vec<Option<(arrow_buffer::Buffer, usize)>>,
    rows_in_batch: usize,
    next_in_batch: usize,
    options: Arc<ParquetOptions>,
    stats: ReaderStats,
    ctx: Ctx,
    done: bool,
}

impl std::fmt::Debug for ParquetIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetIter")
            .field("path", &self.path)
            .field("group", &self.group)
            .field("row", &self.row)
            .finish()
    }
}

impl ParquetIter {
    /// The reader of the row group `self.group`.
    fn open_group(&mut self) -> Result<ParquetRecordBatchReader> {
        let Group { index: g, rows: total, first } = self.groups[self.group];
        // A pass that resumes inside this group starts at its row already.
        self.row = self.row.max(first);
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(self.input.clone(), self.meta.clone())
                .with_projection(self.mask.clone())
                .with_batch_size(self.options.batch_rows.max(1))
                .with_row_groups(vec![g]);
        self.in_group = 0;
        let skip = std::mem::take(&mut self.skip_in_group);
        if let Some(picks) = self.picks.get(self.group) {
            builder = builder.with_row_selection(shuffle::selection(picks, total));
        } else if skip > 0 {
            let (skip, rest) = (usize::try_from(skip).unwrap_or(usize::MAX), total - skip);
            let rest = usize::try_from(rest).unwrap_or(usize::MAX);
            builder = builder.with_row_selection(RowSelection::from(vec![
                RowSelector::skip(skip),
                RowSelector::select(rest),
            ]));
        }
        builder.build().map_err(|e| table_error(&self.path, format!("row group {g}: {e}")))
    }

    /// The next batch of rows, or `None` at the end of the file.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if self.reader.is_none() {
                if self.group >= self.groups.len() {
                    return Ok(None);
                }
                self.reader = Some(self.open_group()?);
            }
            let g = self.groups[self.group].index;
            match self.reader.as_mut().and_then(Iterator::next) {
                Some(Ok(b)) if b.num_rows() == 0 => continue,
                Some(Ok(b)) => return Ok(Some(b)),
                Some(Err(e)) => return Err(table_error(&self.path, format!("row group {g}: {e}"))),
                None => {
                    self.reader = None;
                    self.group += 1;
                }
            }
        }
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.reader = None;
            self.arrays.clear();
            self.plain.clear();
            self.ctx.add_reader_stats(&self.stats);
        }
    }

    fn next_row(&mut self) -> Result<Option<Record>> {
        if self.done {
            return Ok(None);
        }
        loop {
            if self.next_in_batch < self.rows_in_batch {
                break;
            }
            self.arrays.clear();
            self.plain.clear();
            let Some(b) = self.next_batch()? else { return Ok(None) };
            // The batch's arrays in the columns' order, looked up once per batch.
            for c in self.options.columns.iter() {
                let array = b.column_by_name(&c.name).ok_or_else(|| {
                    let g = self.groups[self.group].index;
                    table_error(&self.path, format!("row group {g}: the reader gave no column `{}`", c.name))
                })?;
                self.plain.push(convert::plain(c, array.as_ref()));
                self.arrays.push(array.clone());
            }
            (self.rows_in_batch, self.next_in_batch) = (b.num_rows(), 0);
        }
        let i = self.next_in_batch;
        if let Some(p) = self.picks.get(self.group) {
            self.row = self.groups[self.group].first + p.get(self.in_group).copied().unwrap_or(u64::MAX);
        }
        self.in_group += 1;
        let group = u32::try_from(self.groups[self.group].index).unwrap_or(u32::MAX);
        let mut w = RowWriter::new(group, 16 * self.options.columns.len());
        for ((c, array), plain) in self.options.columns.iter().zip(&self.arrays).zip(&self.plain) {
            if let Some((values, size)) = plain {
                w.raw_scalar(&values.as_slice()[i * size..(i + 1) * size]);
                continue;
            }
            convert::write(c, array.as_ref(), i, &mut w).map_err(|m| {
                table_error(
                    &self.path,
                    format!("row group {group}, row {}: column `{}`: {m}", self.row, c.name),
                )
            })?;
        }
        self.next_in_batch += 1;
        let record = Record::new(w.finish(), Origin::new(self.file, self.row));
        self.row += 1;
        self.stats.records += 1;
        self.stats.bytes += record.len() as u64;
        Ok(Some(record))
    }
}

impl DataIter for ParquetIter {
    type Item = Record;

    fn next(&mut self) -> Result<Option<Record>> {
        match self.next_row() {
            Ok(Some(r)) => Ok(Some(r)),
            other => {
                self.finish();
                other
            }
        }
    }
}

impl Drop for ParquetIter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Opens each path as a Parquet file with shared [`ParquetOptions`]: the interleave's
/// function for `parquet` (`files.interleave(OpenParquet::new(o), c, b)`).
#[derive(Debug, Clone)]
pub struct OpenParquet {
    options: Arc<ParquetOptions>,
}

impl OpenParquet {
    /// Opens files with `options`.
    pub fn new(options: ParquetOptions) -> Self {
        OpenParquet { options: Arc::new(options) }
    }
}

impl InterleaveFn<PathBuf> for OpenParquet {
    type Output = ParquetFile;

    fn open(&self, path: PathBuf) -> ParquetFile {
        ParquetFile { path, options: self.options.clone(), first_group: None, footer: None }
    }
}

/// A sharded reader's files ([`parquet_parts`]), each with its footer and the global
/// index of its first row group.
impl InterleaveFn<ParquetPart> for OpenParquet {
    type Output = ParquetFile;

    fn open(&self, part: ParquetPart) -> ParquetFile {
        ParquetFile {
            path: part.path,
            options: self.options.clone(),
            first_group: Some(part.first_group),
            footer: Some(part.footer),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ::parquet::arrow::ArrowWriter;
    use ::parquet::basic::Compression;
    use ::parquet::file::properties::WriterProperties;
    use arrow_array::builder::{ListBuilder, StringDictionaryBuilder};
    use arrow_array::types::Int8Type;
    use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray};

    use super::*;
    use crate::abi::table::RowReader;
    use crate::text::testing::read;

    fn column(name: &str, dtype: ColumnType, shape: ColumnShape) -> TableColumn {
        TableColumn { name: name.into(), dtype, shape, has_default: name == "x" || name == "v" }
    }

    /// A table of `rows` rows: `id: int32`, `x: double` (null every 5th), `v: list<int32>`
    /// (`id % 3` values), `s: dictionary<int8, utf8>`; row groups of 7 rows.
    fn table(dir: &Path, name: &str, rows: i32, compression: Compression) -> PathBuf {
        let ids: Vec<i32> = (0..rows).collect();
        let x: Float64Array = ids.iter().map(|&i| (i % 5 != 0).then(|| f64::from(i) * 0.1 + 1e-12)).collect();
        let mut v = ListBuilder::new(arrow_array::builder::Int32Builder::new());
        let mut s = StringDictionaryBuilder::<Int8Type>::new();
        for &i in &ids {
            for k in 0..i % 3 {
                v.values().append_value(i * 10 + k);
            }
            v.append(true);
            s.append_value(["a", "bé", "c"][(i % 3) as usize]);
        }
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(Int32Array::from(ids))),
            ("x", Arc::new(x)),
            ("v", Arc::new(v.finish())),
            ("s", Arc::new(s.finish())),
            ("unused", Arc::new(StringArray::from(vec!["z"; rows as usize]))),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let path = dir.join(name);
        let props = WriterProperties::builder()
            .set_compression(compression)
            .set_max_row_group_row_count(Some(7))
            .build();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    fn options() -> ParquetOptions {
        ParquetOptions {
            columns: Arc::from(vec![
                column("s", ColumnType::Str, ColumnShape::Scalar),
                column("id", ColumnType::I64, ColumnShape::Scalar),
                column("x", ColumnType::F64, ColumnShape::Scalar),
                column("v", ColumnType::I32, ColumnShape::List),
            ]),
            batch_rows: 4,
            tests: Arc::from(Vec::new()),
            shard: None,
        }
    }

    type Row = (String, i64, f64, Vec<i32>, u32);

    fn rows(records: &[Record]) -> Vec<Row> {
        records
            .iter()
            .map(|r| {
                let mut row = RowReader::new(r).unwrap();
                let s = row.text("s", None).unwrap();
                let id = row.scalar::<i64>("id", None).unwrap();
                let x = row.scalar::<f64>("x", Some(-1.0)).unwrap();
                let v = row.list::<i32>("v", None).unwrap();
                (s, id, x, v, row.row_group())
            })
            .collect()
    }

    #[test]
    fn rows_read_back_converted_with_nulls_lists_and_dictionaries_in_every_compression() {
        let dir = tempfile::tempdir().unwrap();
        for (k, c) in [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::ZSTD(Default::default()),
            Compression::GZIP(Default::default()),
            Compression::LZ4_RAW,
        ]
        .into_iter()
        .enumerate()
        {
            let path = table(dir.path(), &format!("t{k}.parquet"), 20, c);
            let records = read(&parquet_file(&path, options()), 0).unwrap();
            let got = rows(&records);
            assert_eq!(got.len(), 20, "{c:?}");
            for (i, (s, id, x, v, g)) in got.iter().enumerate() {
                let i32i = i as i32;
                assert_eq!(*id, i as i64);
                assert_eq!(s, ["a", "bé", "c"][i % 3]);
                let want = if i % 5 == 0 { -1.0 } else { f64::from(i32i) * 0.1 + 1e-12 };
                assert_eq!(x.to_bits(), want.to_bits(), "doubles are exact");
                assert_eq!(*v, (0..i32i % 3).map(|k| i32i * 10 + k).collect::<Vec<_>>());
                assert_eq!(*g as usize, i / 7, "row group");
                assert_eq!(records[i].origin().index, i as u64);
            }
        }
    }

    #[test]
    fn a_resumed_pass_starts_at_its_row_across_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        let path = table(dir.path(), "r.parquet", 20, Compression::SNAPPY);
        let all = rows(&read(&parquet_file(&path, options()), 0).unwrap());
        for skip in [0, 1, 6, 7, 8, 19, 20, 25] {
            let got = rows(&read(&parquet_file(&path, options()), skip).unwrap());
            assert_eq!(got, all[(skip as usize).min(20)..], "skip {skip}");
        }
    }

    #[test]
    fn row_groups_the_filter_empties_are_not_read_and_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = table(dir.path(), "p.parquet", 20, Compression::SNAPPY);
        let test = |op, value| RowGroupTest { column: "id".into(), op, value };
        let with = |tests: Vec<RowGroupTest>| ParquetOptions { tests: Arc::from(tests), ..options() };
        let ctx = Ctx::new(&Default::default());
        let ids = |o: ParquetOptions, skip: u64| -> (Vec<i64>, Vec<u64>) {
            let mut it = parquet_file(&path, o).iter_from(&ctx, skip).unwrap();
            let mut out = (Vec::new(), Vec::new());
            while let Some(r) = it.next().unwrap() {
                out.1.push(r.origin().index);
                out.0.push(rows(&[r])[0].1);
            }
            out
        };
        // Row groups of 7 ids: 0-6, 7-13, 14-19.
        let (got, origins) = ids(with(vec![test(Cmp::Ge, Bound::Int(15))]), 0);
        assert_eq!(got, (14..20).collect::<Vec<_>>(), "the last group whole: the filter drops 14");
        assert_eq!(origins, (14..20).collect::<Vec<u64>>(), "rows keep their index in the file");
        assert_eq!(ctx.reader_stats().pruned_row_groups, 2);
        assert_eq!(ids(with(vec![test(Cmp::Ge, Bound::Int(15))]), 2).0, (16..20).collect::<Vec<_>>());
        assert_eq!(
            ids(with(vec![test(Cmp::Lt, Bound::Float(6.5)), test(Cmp::Gt, Bound::Int(-1))]), 0).0,
            (0..7).collect::<Vec<_>>()
        );
        assert_eq!(ids(with(vec![test(Cmp::Eq, Bound::Int(10))]), 0).0, (7..14).collect::<Vec<_>>());
        assert!(ids(with(vec![test(Cmp::Gt, Bound::Int(100))]), 0).0.is_empty());
        // `score` has nulls in every group: never tested; `id` read with no default is
        // null-free, `x` has nulls but a default.
        let on_score = RowGroupTest { column: "x".into(), op: Cmp::Gt, value: Bound::Int(1000) };
        assert_eq!(ids(with(vec![on_score]), 0).0.len(), 20);
    }

    fn error(path: &Path, options: ParquetOptions) -> String {
        read(&parquet_file(path, options), 0)
            .unwrap_err()
            .to_string()
            .replace(&path.display().to_string(), "FILE")
    }

    #[test]
    fn a_schema_the_file_does_not_match_is_an_error_naming_file_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = table(dir.path(), "m.parquet", 3, Compression::SNAPPY);
        let with = |c: TableColumn| ParquetOptions {
            columns: Arc::from(vec![c]),
            batch_rows: 4,
            tests: Arc::from(Vec::new()),
            shard: None,
        };
        assert_eq!(
            error(&path, with(column("y", ColumnType::F32, ColumnShape::Scalar))),
            "FILE: no column `y` (the file has: id, x, v, s, unused)"
        );
        assert_eq!(
            error(&path, with(column("x", ColumnType::F32, ColumnShape::Scalar))),
            "FILE: column `x`: the file holds double, which is not f32 (declare it `f64`)"
        );
        assert!(
            error(&path, with(column("v", ColumnType::I32, ColumnShape::Scalar)))
                .starts_with("FILE: column `v`: the file holds list<int32>, which is not i32")
        );
        assert!(
            error(&path, with(column("v", ColumnType::U8, ColumnShape::List)))
                .contains("its items do not convert")
        );
        assert!(error(&path, with(column("id", ColumnType::I32, ColumnShape::List))).contains("not i32[]"));
    }

    #[test]
    fn damaged_files_are_errors_naming_the_file_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        let path = table(dir.path(), "d.parquet", 20, Compression::UNCOMPRESSED);
        let good = std::fs::read(&path).unwrap();
        // A cut footer, a file of garbage, an empty file.
        for (name, bytes) in
            [("cut", good[..good.len() - 3].to_vec()), ("junk", vec![7u8; 100]), ("empty", vec![])]
        {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            let e = error(&p, options());
            assert!(e.starts_with("FILE: not a readable Parquet file"), "{name}: {e}");
        }
        // Every byte of the data pages flipped in turn: an error or rows, never a panic.
        let mut errors = 0;
        for at in (4..good.len() / 2).step_by(7) {
            let mut bad = good.clone();
            bad[at] ^= 0x5a;
            let p = dir.path().join("flip");
            std::fs::write(&p, &bad).unwrap();
            match read(&parquet_file(&p, options()), 0) {
                Ok(records) => {
                    for r in &records {
                        let mut row = RowReader::new(r).unwrap();
                        let _ = row.text("s", None);
                    }
                }
                Err(e) => {
                    errors += 1;
                    assert!(e.to_string().starts_with(&p.display().to_string()), "{e}");
                }
            }
        }
        assert!(errors > 0);
    }
}
