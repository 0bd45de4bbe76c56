//! Parquet files as batches of columns: the columnar path of `parquet(files) →
//! batch(n)` when every field is a number (or `bool`) or a fixed-size list of them, with
//! no default (`ReadColumnsExec` in `explain`).
//!
//! The files are read one after the other, in the order of the paths, each one row
//! group at a time with the Arrow reader, as the row path reads them; each Arrow array
//! goes into its batch column whole (sliced where a batch ends inside it), converted to
//! the field's type in one pass over its values, with no row in between. A batch of `n`
//! rows takes rows across row groups and files, as `batch(n)` of the rows would: the
//! same elements as the row path, in the same order. A null is an error naming the file,
//! the row group, the row and the column (the fields have no default to take).
//!
//! A pass resumed after `skip` batches starts at row `skip × n`: whole files and row
//! groups are passed over by their row counts in the footers, rows within one by a row
//! selection, so that no skipped row is decoded.
//!
//! With a [`shard`](ParquetOptions::shard), the files' row groups are numbered as it goes
//! (the global list: file after file) and only the shard's are read; a resumed pass
//! counts the rows of those alone.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use super::convert;
use super::{ParquetFile, ParquetIter, ParquetOptions, table_error};
use crate::abi::table::{ColumnShape, ColumnType, TableColumn};
use crate::column::{Buffer, Element, IntoBuffer};
use crate::error::{Error, Result};
use crate::stage::{Ctx, DataIter, Dataset};

/// A batch of rows of a Parquet table, one [`Buffer`] per column (row-major within a
/// fixed-size list's values): what [`ParquetColumns`] yields.
#[derive(Debug, Clone, PartialEq)]
pub struct TableColumns {
    /// Its rows.
    pub rows: usize,
    /// Each column's values, in the order of [`ParquetOptions::columns`].
    pub columns: Vec<Buffer>,
}

impl TableColumns {
    /// Column `i`'s values as a `Vec<T>`, moved out (an empty one is left behind); an
    /// error when it holds another type.
    pub fn take<T: IntoBuffer>(&mut self, i: usize) -> Result<Vec<T>> {
        let b = self.columns.get_mut(i).ok_or_else(|| Error::Invalid(format!("no column {i}")))?;
        let b = std::mem::replace(b, Buffer::Bool(Vec::new()));
        T::from_buffer(b).map_err(|b| {
            Error::Invalid(format!("column {i} holds {:?} values, not {:?}", b.dtype(), T::DTYPE))
        })
    }
}

impl Element for TableColumns {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>()
            + self.columns.iter().map(|b| size_of::<Buffer>() + b.as_bytes().len()).sum::<usize>()
    }
}

/// Whether the columnar path reads `column`: a number or `bool`, one or a fixed-size list,
/// with no default.
pub fn reads_columnar(column: &TableColumn) -> bool {
    !column.has_default
        && !matches!(column.dtype, ColumnType::Str | ColumnType::Bytes)
        && matches!(column.shape, ColumnShape::Scalar | ColumnShape::Fixed(_))
}

/// The Parquet files `paths` yields, as batches of `size` rows (the last one shorter,
/// unless `drop_remainder`): see the [module](self). Every column must be one
/// [`reads_columnar`] reads.
pub fn parquet_columns<D>(
    paths: D,
    options: ParquetOptions,
    size: usize,
    drop_remainder: bool,
) -> Result<ParquetColumns<D>> {
    if size == 0 {
        return Err(Error::Invalid("parquet columns: a batch size of 0".into()));
    }
    if let Some(c) = options.columns.iter().find(|c| !reads_columnar(c)) {
        return Err(Error::Invalid(format!("parquet columns: column `{}` is not read by columns", c.name)));
    }
    Ok(ParquetColumns { paths, options: Arc::new(options), size, drop_remainder })
}

/// See [`parquet_columns`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct ParquetColumns<D> {
    paths: D,
    options: Arc<ParquetOptions>,
    size: usize,
    drop_remainder: bool,
}

impl<D: Dataset<Item = PathBuf>> Dataset for ParquetColumns<D> {
    type Item = TableColumns;
    type Iter = ParquetColumnsIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// Starts at row `skip × size`, passing over whole files and row groups by their
    /// footers' row counts.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        let rows = skip.checked_mul(self.size as u64).ok_or_else(|| {
            Error::Invalid(format!("a resume after {skip} batches of {} rows: past any table", self.size))
        })?;
        Ok(ParquetColumnsIter {
            paths: self.paths.iter(ctx)?,
            file: None,
            batch: None,
            skip: rows,
            groups: 0,
            options: self.options.clone(),
            size: self.size,
            drop_remainder: self.drop_remainder,
            ctx: ctx.clone(),
            done: false,
        })
    }
}

/// An Arrow batch being taken into output batches.
struct Pending {
    arrays: Vec<ArrayRef>,
    rows: usize,
    /// The next row of it to take.
    next: usize,
    /// Its first row's index in the file, and its row group's.
    first: u64,
    group: usize,
}

/// A pass of [`ParquetColumns`].
pub struct ParquetColumnsIter<I> {
    paths: I,
    file: Option<(PathBuf, ParquetIter)>,
    batch: Option<Pending>,
    /// Rows still to pass over before the first one taken (a resumed pass).
    skip: u64,
    /// The row groups of the files before the next one (a sharded reader's global index).
    groups: u64,
    options: Arc<ParquetOptions>,
    size: usize,
    drop_remainder: bool,
    ctx: Ctx,
    done: bool,
}

impl<I> std::fmt::Debug for ParquetColumnsIter<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetColumnsIter")
            .field("file", &self.file.as_ref().map(|(p, _)| p))
            .field("skip", &self.skip)
            .finish()
    }
}

impl<I: DataIter<Item = PathBuf>> ParquetColumnsIter<I> {
    /// The next Arrow batch with rows left, opening the next file when one ends; `None`
    /// after the last file.
    fn next_pending(&mut self) -> Result<Option<Pending>> {
        loop {
            if self.file.is_none() {
                let Some(path) = self.paths.next()? else { return Ok(None) };
                let file = ParquetFile {
                    path: path.clone(),
                    options: self.options.clone(),
                    first_group: Some(self.groups),
                    footer: None,
                };
                let it = file.open(&self.ctx, self.skip, None)?;
                self.groups += it.meta.metadata().num_row_groups() as u64;
                let rows: u64 = it.groups.iter().map(|g| g.rows).sum();
                if self.skip >= rows {
                    // A resumed pass starts past this whole file.
                    self.skip -= rows;
                    continue;
                }
                self.skip = 0;
                self.file = Some((path, it));
            }
            let Some((_, it)) = self.file.as_mut() else { continue };
            match it.next_batch()? {
                Some(b) => {
                    let group = it.groups[it.group].index;
                    let first = it.row;
                    it.row += b.num_rows() as u64;
                    return Ok(Some(pending(&b, &self.options, first, group, &it.path)?));
                }
                None => self.file = None,
            }
        }
    }

    fn next_columns(&mut self) -> Result<Option<TableColumns>> {
        let mut columns: Vec<Buffer> =
            self.options.columns.iter().map(|c| empty(c, self.size)).collect::<Result<_>>()?;
        let mut rows = 0;
        while rows < self.size {
            if self.batch.as_ref().is_none_or(|b| b.next == b.rows) {
                self.batch = self.next_pending()?;
                if self.batch.is_none() {
                    break;
                }
            }
            let (Some(b), Some((path, it))) = (self.batch.as_mut(), self.file.as_mut()) else { break };
            let take = (self.size - rows).min(b.rows - b.next);
            let range = b.next..b.next + take;
            for ((c, array), out) in self.options.columns.iter().zip(&b.arrays).zip(&mut columns) {
                append(c, array.as_ref(), range.clone(), out).map_err(|(row, m)| {
                    table_error(
                        path,
                        format!(
                            "row group {}, row {}: column `{}`: {m}",
                            b.group,
                            b.first + row as u64,
                            c.name
                        ),
                    )
                })?;
            }
            it.stats.records += take as u64;
            b.next += take;
            rows += take;
        }
        if rows == 0 || (rows < self.size && self.drop_remainder) {
            return Ok(None);
        }
        if let Some((_, it)) = self.file.as_mut() {
            it.stats.bytes += columns.iter().map(|b| b.as_bytes().len() as u64).sum::<u64>();
        }
        Ok(Some(TableColumns { rows, columns }))
    }
}

impl<I: DataIter<Item = PathBuf>> DataIter for ParquetColumnsIter<I> {
    type Item = TableColumns;

    fn next(&mut self) -> Result<Option<TableColumns>> {
        if self.done {
            return Ok(None);
        }
        let next = self.next_columns();
        if !matches!(next, Ok(Some(_))) {
            // The file's statistics go to the context as it is dropped.
            self.done = true;
            self.file = None;
            self.batch = None;
        }
        next
    }
}

/// An Arrow batch's arrays in the columns' order.
fn pending(
    b: &RecordBatch,
    options: &ParquetOptions,
    first: u64,
    group: usize,
    path: &std::path::Path,
) -> Result<Pending> {
    let arrays = options
        .columns
        .iter()
        .map(|c| {
            b.column_by_name(&c.name).cloned().ok_or_else(|| {
                table_error(path, format!("row group {group}: the reader gave no column `{}`", c.name))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Pending { arrays, rows: b.num_rows(), next: 0, first, group })
}

/// An empty buffer of `c`'s type with room for `rows` rows.
fn empty(c: &TableColumn, rows: usize) -> Result<Buffer> {
    let n = rows
        * match c.shape {
            ColumnShape::Fixed(k) => k,
            _ => 1,
        };
    Ok(match c.dtype {
        ColumnType::Bool => Buffer::Bool(Vec::with_capacity(n)),
        ColumnType::U8 => Buffer::U8(Vec::with_capacity(n)),
        ColumnType::I32 => Buffer::I32(Vec::with_capacity(n)),
        ColumnType::U32 => Buffer::U32(Vec::with_capacity(n)),
        ColumnType::I64 => Buffer::I64(Vec::with_capacity(n)),
        ColumnType::U64 => Buffer::U64(Vec::with_capacity(n)),
        ColumnType::F32 => Buffer::F32(Vec::with_capacity(n)),
        ColumnType::F64 => Buffer::F64(Vec::with_capacity(n)),
        ColumnType::Str | ColumnType::Bytes => {
            return Err(Error::Invalid(format!(
                "parquet columns: column `{}` is not read by columns",
                c.name
            )));
        }
    })
}

/// Appends rows `range` of `array` (a column that passed [`TableColumn::check`]) to
/// `out`; `Err((row, why))` names the offending row of the range.
fn append(
    c: &TableColumn,
    array: &dyn Array,
    range: std::ops::Range<usize>,
    out: &mut Buffer,
) -> std::result::Result<(), (usize, String)> {
    let start = range.start;
    let whole = move |m: String| (start, m);
    if array.null_count() > 0
        && let Some(i) = range.clone().find(|&i| array.is_null(i))
    {
        return Err((i, "null, and the schema gives no default".into()));
    }
    match c.shape {
        ColumnShape::Fixed(n) => {
            let (items, values) = match array.data_type() {
                DataType::FixedSizeList(..) => {
                    let l = array.as_fixed_size_list();
                    let k = usize::try_from(l.value_length()).unwrap_or(usize::MAX);
                    if k != n {
                        return Err(whole(format!("lists of {k} values, not {n}")));
                    }
                    let start = l.value_offset_at(range.start);
                    (l.values(), start..start.saturating_add(range.len() * n))
                }
                DataType::List(_) => {
                    let l = array.as_list::<i32>();
                    let o = l.value_offsets();
                    list_rows(o, range.clone(), n)?;
                    (l.values(), o[range.start] as usize..o[range.end] as usize)
                }
                DataType::LargeList(_) => {
                    let l = array.as_list::<i64>();
                    let o = l.value_offsets();
                    list_rows(o, range.clone(), n)?;
                    (l.values(), o[range.start] as usize..o[range.end] as usize)
                }
                t => return Err(whole(format!("a list column read as {t}"))),
            };
            if items.null_count() > 0 && values.clone().any(|k| items.is_null(k)) {
                let row = range.start + values.clone().position(|k| items.is_null(k)).unwrap_or(0) / n.max(1);
                return Err((row, "a null inside the list".into()));
            }
            convert::numbers(c.dtype, items.as_ref(), values, out).map_err(whole)
        }
        _ => convert::numbers(c.dtype, array, range, out).map_err(whole),
    }
}

/// Checks that each row of `range` of a list column holds `n` values.
fn list_rows<O: Copy + TryInto<usize>>(
    offsets: &[O],
    range: std::ops::Range<usize>,
    n: usize,
) -> std::result::Result<(), (usize, String)> {
    for i in range {
        let len = offsets[i + 1].try_into().unwrap_or(0).saturating_sub(offsets[i].try_into().unwrap_or(0));
        if len != n {
            return Err((i, format!("a list of {len} values, not {n}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use ::parquet::arrow::ArrowWriter;
    use ::parquet::file::properties::WriterProperties;
    use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, ListBuilder};
    use arrow_array::{Float32Array, Int32Array};

    use super::*;
    use crate::stage::{RuntimeOptions, from_vec};

    fn column(name: &str, dtype: ColumnType, shape: ColumnShape) -> TableColumn {
        TableColumn { name: name.into(), dtype, shape, has_default: false }
    }

    /// `rows` rows from `from`: `id: int32` (read as `i64`), `f: float` (as `f32`: the
    /// plain copy), `v: fixed_size_list<float>[3]`, `w: list<int32>` of 2 values each (read
    /// as `i32[2]`); row groups of 7 rows; `null_at` makes that row's `f` null.
    fn table(dir: &Path, name: &str, from: i32, rows: i32, null_at: Option<i32>) -> PathBuf {
        let ids: Vec<i32> = (from..from + rows).collect();
        let f: Float32Array = ids.iter().map(|&i| (Some(i) != null_at).then_some(i as f32 * 0.5)).collect();
        let mut v = FixedSizeListBuilder::new(Float32Builder::new(), 3);
        let mut w = ListBuilder::new(arrow_array::builder::Int32Builder::new());
        for &i in &ids {
            for k in 0..3 {
                v.values().append_value(i as f32 + k as f32 / 10.0);
            }
            v.append(true);
            w.values().append_value(i);
            w.values().append_value(-i);
            w.append(true);
        }
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(Int32Array::from(ids))),
            ("f", Arc::new(f)),
            ("v", Arc::new(v.finish())),
            ("w", Arc::new(w.finish())),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let path = dir.join(name);
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(7)).build();
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        path
    }

    fn options() -> ParquetOptions {
        ParquetOptions {
            columns: Arc::from(vec![
                column("id", ColumnType::I64, ColumnShape::Scalar),
                column("f", ColumnType::F32, ColumnShape::Scalar),
                column("v", ColumnType::F32, ColumnShape::Fixed(3)),
                column("w", ColumnType::I32, ColumnShape::Fixed(2)),
            ]),
            batch_rows: 5,
            tests: Arc::from(Vec::new()),
            shard: None,
        }
    }

    type Batch = (Vec<i64>, Vec<f32>, Vec<f32>, Vec<i32>);

    fn batches(paths: &[PathBuf], size: usize, drop: bool, skip: u64) -> Result<Vec<Batch>> {
        let ds = parquet_columns(from_vec(paths.to_vec()), options(), size, drop)?;
        let ctx = Ctx::new(&RuntimeOptions::default());
        let mut it = ds.iter_from(&ctx, skip)?;
        let mut out = Vec::new();
        while let Some(mut t) = it.next()? {
            let b = (t.take::<i64>(0)?, t.take::<f32>(1)?, t.take::<f32>(2)?, t.take::<i32>(3)?);
            assert_eq!((b.0.len(), b.2.len(), b.3.len()), (t.rows, 3 * t.rows, 2 * t.rows));
            out.push(b);
        }
        Ok(out)
    }

    #[test]
    fn batches_take_rows_across_row_groups_and_files_and_resume_by_footers() {
        let dir = tempfile::tempdir().unwrap();
        let paths =
            [table(dir.path(), "a.parquet", 0, 23, None), table(dir.path(), "b.parquet", 23, 10, None)];
        for size in [1, 4, 7, 10, 33, 50] {
            let got = batches(&paths, size, false, 0).unwrap();
            let ids: Vec<i64> = got.iter().flat_map(|b| b.0.clone()).collect();
            assert_eq!(ids, (0..33).collect::<Vec<i64>>(), "size {size}");
            assert!(got.iter().rev().skip(1).all(|b| b.0.len() == size), "size {size}");
            let f: Vec<f32> = got.iter().flat_map(|b| b.1.clone()).collect();
            assert_eq!(f, (0..33).map(|i| i as f32 * 0.5).collect::<Vec<_>>());
            let v: Vec<f32> = got.iter().flat_map(|b| b.2.clone()).collect();
            let want: Vec<f32> =
                (0..33).flat_map(|i| (0..3).map(move |k| i as f32 + k as f32 / 10.0)).collect();
            assert_eq!(v, want);
            let w: Vec<i32> = got.iter().flat_map(|b| b.3.clone()).collect();
            assert_eq!(w, (0..33).flat_map(|i| [i, -i]).collect::<Vec<_>>());
            // Dropping the remainder leaves whole batches; a resume after k batches is the
            // rest of the same pass.
            let dropped = batches(&paths, size, true, 0).unwrap();
            assert_eq!(dropped.len(), 33 / size, "size {size}");
            for skip in [0, 1, 2, 3, 5] {
                let rest = batches(&paths, size, false, skip).unwrap();
                assert_eq!(rest, got[(skip as usize).min(got.len())..], "size {size}, skip {skip}");
            }
        }
    }

    #[test]
    fn a_null_or_a_list_of_another_length_names_file_row_group_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let paths =
            [table(dir.path(), "a.parquet", 0, 10, None), table(dir.path(), "b.parquet", 10, 12, Some(19))];
        let e = batches(&paths, 4, false, 0).unwrap_err().to_string();
        assert!(
            e.contains("b.parquet") && e.contains("row group 1, row 9: column `f`: null, and the schema"),
            "{e}"
        );
        let mut o = options();
        o.columns = Arc::from(vec![column("w", ColumnType::I32, ColumnShape::Fixed(3))]);
        let ds = parquet_columns(from_vec(paths.to_vec()), o, 4, false).unwrap();
        let e = ds.iter(&Ctx::new(&RuntimeOptions::default())).unwrap().next().unwrap_err().to_string();
        assert!(e.contains("a.parquet") && e.contains("row 0: column `w`: a list of 2 values, not 3"), "{e}");
        // Columns the path does not read are refused when it is made.
        let mut o = options();
        o.columns = Arc::from(vec![TableColumn {
            has_default: true,
            ..column("f", ColumnType::F32, ColumnShape::Scalar)
        }]);
        assert!(parquet_columns(from_vec(paths.to_vec()), o, 4, false).is_err());
    }
}
