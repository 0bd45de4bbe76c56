//! `shard` by Parquet row groups: a `shard(num_shards, index)` (remainder `keep`) right on
//! a `parquet` reader moves into it (the compiler's `push_shard_down`), which then reads
//! only this worker's row groups.
//!
//! The row groups are numbered across the files, in the order of the paths: file 0's
//! groups, then file 1's, … (the global row-group list). A reader of shard `index` of
//! `num_shards` reads the groups whose global index is `index` modulo `num_shards`, each
//! whole, and no other: each worker decodes about `1 / num_shards` of the data, balanced
//! to a row group even with a single file. Every worker lists the same paths (a shuffled
//! file list is shuffled with the same seed by each), so the shards partition the row
//! groups, hence the rows, each epoch.
//!
//! The shard is decided on the global index before the row-group tests
//! ([`ParquetOptions::tests`](super::ParquetOptions::tests)) skip any group by its
//! statistics: a group a test skips belongs to exactly one shard, which skips it, so the
//! shards still partition the rows that pass. A resumed pass counts only the rows of the
//! groups its shard reads (the footers' row counts), which is what it delivered.
//!
//! The row path needs each file's first global index when the file is opened, which the
//! interleave cannot know: [`parquet_parts`] reads the footers of the paths in order as
//! the interleave takes them, counting the row groups before each, and hands each file on
//! with its footer ([`ParquetPart`]), which [`OpenParquet`](super::OpenParquet) then reads
//! without reading the footer again. The columnar path reads its files in order itself
//! and counts as it goes.

use std::path::PathBuf;

use ::parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};

use super::chunks::Chunks;
use super::table_error;
use crate::error::{Error, Result};
use crate::stage::{Ctx, DataIter, Dataset};

/// This worker's share of the row groups: those whose global index is `index` modulo
/// `num_shards` (see the [module](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowGroupShard {
    num_shards: u64,
    index: u64,
}

impl RowGroupShard {
    /// Shard `index` of `num_shards`; an [`Error::Invalid`] naming the `shard` unless
    /// `index < num_shards`.
    pub fn new(num_shards: u64, index: u64) -> Result<Self> {
        if num_shards == 0 || index >= num_shards {
            return Err(Error::Invalid(format!(
                "shard of parquet row groups: index {index} out of range for {num_shards} shards \
                 (need 0 <= index < num_shards)"
            )));
        }
        Ok(RowGroupShard { num_shards, index })
    }

    /// The number of shards.
    pub fn num_shards(&self) -> u64 {
        self.num_shards
    }

    /// This shard's index.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Whether the row group of global index `group` is this shard's.
    pub fn reads(&self, group: u64) -> bool {
        group % self.num_shards == self.index
    }
}

/// A Parquet file of the path list, its footer read, with the global index of its first
/// row group: what [`parquet_parts`] yields and a sharded
/// [`OpenParquet`](super::OpenParquet) opens.
#[derive(Debug, Clone)]
pub struct ParquetPart {
    pub(super) path: PathBuf,
    /// The global index of its first row group.
    pub(super) first_group: u64,
    pub(super) footer: Footer,
}

/// A file opened and its footer read.
#[derive(Debug, Clone)]
pub(super) struct Footer {
    pub(super) input: Chunks,
    pub(super) meta: ArrowReaderMetadata,
}

impl Footer {
    /// Opens `path` and reads its footer.
    pub(super) fn read(path: &std::path::Path) -> Result<Footer> {
        let input = Chunks::open(path)?;
        let meta = ArrowReaderMetadata::load(&input, ArrowReaderOptions::new())
            .map_err(|e| table_error(path, format!("not a readable Parquet file: {e}")))?;
        Ok(Footer { input, meta })
    }

    /// The file's row groups.
    pub(super) fn row_groups(&self) -> u64 {
        self.meta.metadata().num_row_groups() as u64
    }
}

/// The Parquet files `paths` yields, each with its footer and the global index of its
/// first row group: the input of an interleave of a sharded `parquet` reader
/// (`parquet_parts(paths).interleave(OpenParquet::new(options), cycle, block)`).
pub fn parquet_parts<D>(paths: D) -> ParquetParts<D> {
    ParquetParts { paths }
}

/// See [`parquet_parts`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug, Clone)]
pub struct ParquetParts<D> {
    paths: D,
}

impl<D: Dataset<Item = PathBuf>> Dataset for ParquetParts<D> {
    type Item = ParquetPart;
    type Iter = ParquetPartsIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        Ok(ParquetPartsIter { paths: self.paths.iter(ctx)?, groups: 0 })
    }
}

/// A pass of [`ParquetParts`].
#[derive(Debug)]
pub struct ParquetPartsIter<I> {
    paths: I,
    /// The row groups of the files before the next one.
    groups: u64,
}

impl<I: DataIter<Item = PathBuf>> DataIter for ParquetPartsIter<I> {
    type Item = ParquetPart;

    fn next(&mut self) -> Result<Option<ParquetPart>> {
        let Some(path) = self.paths.next()? else { return Ok(None) };
        let footer = Footer::read(&path)?;
        let first_group = self.groups;
        self.groups += footer.row_groups();
        Ok(Some(ParquetPart { path, first_group, footer }))
    }
}

impl crate::column::Element for ParquetPart {
    const FLAT: bool = false;
    /// The path; the footer is not counted (as an open file's is not).
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.path.as_os_str().len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use ::parquet::arrow::ArrowWriter;
    use ::parquet::file::properties::WriterProperties;
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};

    use super::*;
    use crate::abi::table::{ColumnShape, ColumnType, RowReader, TableColumn};
    use crate::parquet::{Bound, Cmp, OpenParquet, ParquetOptions, RowGroupTest, parquet_columns};
    use crate::stage::from_vec;

    /// A file of `rows` rows, `id` from `start`, in row groups of `group` rows (also
    /// `shuffle.rs`'s tests').
    pub(crate) fn table(dir: &Path, name: &str, start: i64, rows: i64, group: usize) -> PathBuf {
        let ids: ArrayRef = Arc::new(Int64Array::from((start..start + rows).collect::<Vec<_>>()));
        let batch = RecordBatch::try_from_iter([("id", ids)]).unwrap();
        let path = dir.join(name);
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(group)).build();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    fn options(shard: Option<(u64, u64)>, tests: Vec<RowGroupTest>) -> ParquetOptions {
        ParquetOptions {
            columns: Arc::from(vec![TableColumn {
                name: "id".into(),
                dtype: ColumnType::I64,
                shape: ColumnShape::Scalar,
                has_default: false,
            }]),
            batch_rows: 3,
            tests: Arc::from(tests),
            shard: shard.map(|(n, i)| RowGroupShard::new(n, i).unwrap()),
        }
    }

    /// The ids of a pass from row `skip` by the row path: an interleave of `cycle` files.
    fn rows(paths: &[PathBuf], o: ParquetOptions, cycle: usize, skip: u64) -> Vec<i64> {
        let ctx = Ctx::new(&Default::default());
        let ds = parquet_parts(from_vec(paths.to_vec())).interleave(OpenParquet::new(o), cycle, 1);
        let mut it = ds.iter_from(&ctx, skip).unwrap();
        let mut out = Vec::new();
        while let Some(r) = it.next().unwrap() {
            out.push(RowReader::new(&r).unwrap().scalar::<i64>("id", None).unwrap());
        }
        out
    }

    /// The ids of a pass from batch `skip` by the columnar path, in batches of 4.
    fn columns(paths: &[PathBuf], o: ParquetOptions, skip: u64) -> Vec<i64> {
        let ctx = Ctx::new(&Default::default());
        let ds = parquet_columns(from_vec(paths.to_vec()), o, 4, false).unwrap();
        let mut it = ds.iter_from(&ctx, skip).unwrap();
        let mut out = Vec::new();
        while let Some(mut t) = it.next().unwrap() {
            out.extend(t.take::<i64>(0).unwrap());
        }
        out
    }

    /// Three files, 0..20, 100..109 and 200..215 in row groups of 4 rows: 12 row groups,
    /// the global list `groups` (each group's ids).
    fn three(dir: &Path) -> (Vec<PathBuf>, Vec<Vec<i64>>) {
        let spans = [(0, 20), (100, 9), (200, 15)];
        let paths =
            spans.iter().enumerate().map(|(k, &(s, n))| table(dir, &format!("t{k}.parquet"), s, n, 4));
        let groups = spans
            .iter()
            .flat_map(|&(s, n)| (0..n).step_by(4).map(move |g| (s + g..s + (g + 4).min(n)).collect()))
            .collect();
        (paths.collect(), groups)
    }

    #[test]
    fn shards_partition_the_rows_each_holding_its_whole_row_groups_by_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, groups) = three(dir.path());
        assert_eq!(groups.len(), 12);
        let all = rows(&paths, options(None, vec![]), 1, 0);
        assert_eq!(all, groups.concat());
        let mut union = Vec::new();
        for i in 0..3 {
            let want: Vec<i64> = groups.iter().skip(i as usize).step_by(3).flatten().copied().collect();
            let got = rows(&paths, options(Some((3, i)), vec![]), 1, 0);
            assert_eq!(got, want, "shard {i}: the row groups i, i + 3, …, whole and in order");
            assert_eq!(columns(&paths, options(Some((3, i)), vec![]), 0), want, "shard {i}, columnar");
            // Two files at a time: the same rows, interleaved.
            let mut two = rows(&paths, options(Some((3, i)), vec![]), 2, 0);
            two.sort_unstable();
            let mut sorted = want.clone();
            sorted.sort_unstable();
            assert_eq!(two, sorted, "shard {i}, cycle 2");
            union.extend(got);
        }
        union.sort_unstable();
        assert_eq!(union, all, "every row in exactly one shard");
    }

    #[test]
    fn one_file_of_seven_row_groups_gives_every_shard_rows() {
        let dir = tempfile::tempdir().unwrap();
        let paths = vec![table(dir.path(), "one.parquet", 0, 28, 4)];
        let group = |g: i64| (4 * g..4 * g + 4).collect::<Vec<_>>();
        for (i, gs) in [(0, vec![0, 3, 6]), (1, vec![1, 4]), (2, vec![2, 5])] {
            let want: Vec<i64> = gs.into_iter().flat_map(group).collect();
            assert_eq!(rows(&paths, options(Some((3, i)), vec![]), 1, 0), want, "shard {i}");
            assert_eq!(columns(&paths, options(Some((3, i)), vec![]), 0), want, "shard {i}, columnar");
        }
    }

    #[test]
    fn row_groups_skipped_by_statistics_leave_the_shards_a_partition() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, _) = three(dir.path());
        // Skips the groups below 8 and from 200 on, whichever shard holds them.
        let tests = || {
            vec![
                RowGroupTest { column: "id".into(), op: Cmp::Ge, value: Bound::Int(8) },
                RowGroupTest { column: "id".into(), op: Cmp::Lt, value: Bound::Int(200) },
            ]
        };
        let all = rows(&paths, options(None, tests()), 1, 0);
        assert_eq!(all, (8..20).chain(100..109).collect::<Vec<_>>());
        let mut union: Vec<i64> =
            (0..3).flat_map(|i| rows(&paths, options(Some((3, i)), tests()), 1, 0)).collect();
        union.sort_unstable();
        assert_eq!(union, all);
        // The shards of the unfiltered reader, less the groups skipped: the shard came first.
        for i in 0..3 {
            let unfiltered = rows(&paths, options(Some((3, i)), vec![]), 1, 0);
            let kept: Vec<i64> = unfiltered.into_iter().filter(|id| all.contains(id)).collect();
            assert_eq!(rows(&paths, options(Some((3, i)), tests()), 1, 0), kept, "shard {i}");
        }
    }

    #[test]
    fn a_resumed_sharded_pass_starts_at_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let (paths, _) = three(dir.path());
        for i in 0..3 {
            let o = || options(Some((3, i)), vec![]);
            let whole = rows(&paths, o(), 1, 0);
            for skip in [1, 4, 5, 9, 13] {
                let from = (skip as usize).min(whole.len());
                assert_eq!(rows(&paths, o(), 1, skip), whole[from..], "shard {i}, rows from {skip}");
                // A single file resumed by its footer's counts (what an interleave's file gets).
                let file = crate::parquet::parquet_file(&paths[0], o());
                let ctx = Ctx::new(&Default::default());
                let mut it = file.iter_from(&ctx, skip).unwrap();
                let mut got = Vec::new();
                while let Some(r) = it.next().unwrap() {
                    got.push(RowReader::new(&r).unwrap().scalar::<i64>("id", None).unwrap());
                }
                let first: Vec<i64> = whole.iter().copied().filter(|id| *id < 100).collect();
                assert_eq!(got, first[(skip as usize).min(first.len())..], "shard {i}, file 0 from {skip}");
            }
            let batches = columns(&paths, o(), 0);
            assert_eq!(batches, whole);
            for skip in [1, 2, 3] {
                let from = (4 * skip as usize).min(whole.len());
                assert_eq!(columns(&paths, o(), skip), whole[from..], "shard {i}, batches from {skip}");
            }
        }
    }

    #[test]
    fn a_shard_index_out_of_range_is_an_error_and_an_unsharded_path_list_is_refused() {
        for (n, i) in [(3, 3), (3, 7), (0, 0)] {
            let e = RowGroupShard::new(n, i).unwrap_err().to_string();
            assert!(
                e.contains(&format!("shard of parquet row groups: index {i} out of range for {n} shards")),
                "{e}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let path = table(dir.path(), "a.parquet", 0, 8, 4);
        let ds = from_vec(vec![path]).interleave(OpenParquet::new(options(Some((2, 0)), vec![])), 1, 1);
        let ctx = Ctx::new(&Default::default());
        let e = ds.iter(&ctx).and_then(|mut it| it.next()).unwrap_err().to_string();
        assert!(e.contains("takes its files from `parquet_parts`"), "{e}");
    }
}
