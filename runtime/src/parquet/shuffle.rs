//! `shuffle(global)` over Parquet files: every row of every file once per epoch, in a
//! seeded permutation of the whole dataset, gathered a window of positions at a time.
//!
//! # Order
//!
//! The rows are numbered globally: the row groups of every file, file after file in the
//! order of the paths, each group's rows in order (the counts come from the footers, read
//! once when the stage is made). Position `p` of an epoch's pass is global row
//! [`Permutation::get`]`(p)` of the permutation keyed by the seed, this stage's tag and
//! the epoch (epoch 0 always with `reshuffle_each_epoch(false)`), as the TFRecord
//! [`global_shuffle`](crate::stage::global_shuffle)'s: the output depends on the seed, the
//! epoch and the row counts only, never on the window.
//!
//! # Reads: a window at a time
//!
//! A Parquet row is not addressable alone (it lives in a compressed page of a row group),
//! so the positions are taken in windows of `W` ([`window`](ParquetShuffle::window),
//! default [`WINDOW`]): window `w` holds positions `w·W ≤ p < (w + 1)·W`. Its rows are
//! sorted by global row and gathered in one pass over the files' row groups in order,
//! opening only the files and decoding only the row groups that hold one of them, each
//! through a row selection of just its needed rows (the reader's own decoding,
//! projection and conversions: the records are those the `parquet` reader gives); each
//! row lands in its output slot, and the window is then handed out in position order.
//! The cost is honest: an epoch reads the needed row groups up to `⌈N / W⌉` times (a
//! window's rows are spread over the whole dataset), one pass when `W ≥ N`.
//!
//! # Memory
//!
//! One window of rows (`W` records and a sorted list of `W` row numbers), and one row
//! group's projected column chunks being decoded; the footers of every file are held
//! from when the stage is made.
//!
//! # Resume and shards
//!
//! A pass resumed at position `p` starts in window `p / W` and gathers only its positions
//! from `p` on; [`shard`](ParquetShuffle::shard) takes a contiguous block of each epoch's
//! permutation per worker (as the TFRecord global shuffle deals), redealt after a
//! reshard the same way. Errors (a file that is not Parquet, a damaged page, a column the
//! file lacks) name the file, as the row reader's do.

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use ::parquet::arrow::arrow_reader::{RowSelection, RowSelector};

use super::shard::Footer;
use super::{ParquetFile, ParquetOptions, table_error};
use crate::error::{Error, Result};
use crate::permutation::Permutation;
use crate::stage::reshard::{self, Redealt};
use crate::stage::{Ctx, DataIter, Dataset, Deal, Layer, Record, ShardOf, StagePosition, StageStats};

/// Distinguishes this permutation from other uses of the same seed.
const STAGE_TAG: u64 = 0x5053_4846 << 32; // "PSHF"

/// Positions gathered together when the window is not set.
pub const WINDOW: u64 = crate::defaults::PARQUET_SHUFFLE_WINDOW;

/// The rows of the Parquet files `paths`, read with `options` (its columns; its tests and
/// shard do not apply), in a new pseudo-random permutation of all of them each epoch,
/// keyed by `seed` (see the [module doc](self)). Reads every footer now: a file that is
/// missing or not Parquet is an error naming it.
pub fn parquet_global_shuffle<P: AsRef<Path>>(
    paths: impl IntoIterator<Item = P>,
    options: ParquetOptions,
    seed: u64,
) -> Result<ParquetShuffle> {
    let options = Arc::new(ParquetOptions { tests: Arc::from(Vec::new()), shard: None, ..options });
    let (mut files, mut group_starts, mut file_groups) = (Vec::new(), vec![0u64], vec![0usize]);
    for p in paths {
        let path = p.as_ref().to_path_buf();
        let footer = Footer::read(&path)?;
        for rg in footer.meta.metadata().row_groups() {
            let rows = u64::try_from(rg.num_rows()).unwrap_or(0);
            group_starts.push(group_starts.last().copied().unwrap_or(0) + rows);
        }
        file_groups.push(group_starts.len() - 1);
        files.push(ParquetFile { path, options: options.clone(), first_group: None, footer: Some(footer) });
    }
    Ok(ParquetShuffle {
        files: files.into(),
        group_starts: group_starts.into(),
        file_groups: file_groups.into(),
        seed,
        reshuffle: true,
        window: WINDOW,
        positions: 0..u64::MAX,
        sharded: None,
        redealt: Redealt::default(),
        stats: Arc::new(StageStats::new("global_shuffle")),
    })
}

/// The stage made by [`parquet_global_shuffle`].
#[must_use = "datasets are lazy: iterate them"]
pub struct ParquetShuffle {
    files: Arc<[ParquetFile]>,
    /// The global row of each global row group's first row (one more entry: all rows).
    group_starts: Arc<[u64]>,
    /// The global index of each file's first row group (one more entry: all groups).
    file_groups: Arc<[usize]>,
    seed: u64,
    reshuffle: bool,
    window: u64,
    positions: Range<u64>,
    sharded: Option<(u64, u64, bool)>,
    redealt: Redealt,
    stats: Arc<StageStats>,
}

impl fmt::Debug for ParquetShuffle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParquetShuffle")
            .field("files", &self.files.len())
            .field("rows", &self.len())
            .field("window", &self.window)
            .field("positions", &self.positions)
            .finish()
    }
}

impl ParquetShuffle {
    /// Rows in one epoch (all files).
    pub fn len(&self) -> u64 {
        self.group_starts.last().copied().unwrap_or(0)
    }

    /// True when the files hold no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The permutation of epoch `epoch`: position `p` is global row `permutation(epoch).get(p)`.
    pub fn permutation(&self, epoch: u64) -> Permutation {
        let epoch = if self.reshuffle { epoch } else { 0 };
        Permutation::new(self.len(), self.seed, STAGE_TAG ^ epoch)
    }

    /// The (file, row in the file) of global row `g`.
    pub fn locate(&self, g: u64) -> Option<(usize, u64)> {
        if g >= self.len() {
            return None;
        }
        let group = self.group_starts.partition_point(|&s| s <= g) - 1;
        let file = self.file_groups.partition_point(|&f| f <= group) - 1;
        Some((file, g - self.group_starts[self.file_groups[file]]))
    }

    /// Whether each epoch gets a new permutation (default true).
    pub fn reshuffle_each_epoch(mut self, reshuffle: bool) -> Self {
        self.reshuffle = reshuffle;
        self
    }

    /// Positions gathered in one pass over the row groups (at least 1; default
    /// [`WINDOW`]): the rows held at once, and `⌈N / window⌉` passes an epoch. Never
    /// changes the order.
    pub fn window(mut self, rows: u64) -> Self {
        self.window = rows.max(1);
        self
    }

    /// Restricts each pass to the positions `range` of its permutation (clamped to the
    /// epoch): an exact slice of the epoch, for resuming or an exact shard.
    pub fn positions(mut self, range: Range<u64>) -> Self {
        self.positions = range;
        self
    }

    /// Worker `index` of `num_shards`: a contiguous block of each epoch's permutation, as
    /// [`GlobalShuffle::shard`](crate::stage::GlobalShuffle::shard) deals.
    pub fn shard(mut self, num_shards: u64, index: u64, drop_remainder: bool) -> Result<Self> {
        if num_shards == 0 || index >= num_shards {
            return Err(Error::Invalid(format!(
                "shard index {index} out of range for {num_shards} shards (need 0 <= index < num_shards)"
            )));
        }
        let range = reshard::block(self.len(), num_shards, index, drop_remainder);
        self.sharded = Some((num_shards, index, drop_remainder));
        Ok(self.positions(range))
    }

    /// Names the stage in statistics and errors.
    pub fn named(mut self, name: &str) -> Self {
        self.stats = Arc::new(StageStats::new(name));
        self
    }

    fn pass(&self, ctx: &Ctx, skip: u64) -> Result<ParquetShuffleIter> {
        ctx.register(&self.stats);
        self.stats.set_parallelism(1);
        let n = self.len();
        self.redealt.record(ctx);
        let spans = reshard::pass_spans(ctx, n, &self.positions, self.sharded, skip)?;
        Ok(ParquetShuffleIter {
            ctx: ctx.clone(),
            stage: Gather {
                files: self.files.clone(),
                group_starts: self.group_starts.clone(),
                file_groups: self.file_groups.clone(),
                perm: self.permutation(ctx.epoch()),
            },
            window: self.window,
            pos: spans.first().map_or(0, |s| s.start),
            spans,
            span: 0,
            rows: Vec::new().into_iter(),
            stats: self.stats.clone(),
        })
    }
}

impl Dataset for ParquetShuffle {
    type Item = Record;
    type Iter = ParquetShuffleIter;

    fn iter(&self, ctx: &Ctx) -> Result<ParquetShuffleIter> {
        self.pass(ctx, 0)
    }

    /// Starts `skip` positions later: in window `p / W`, gathering only its positions from
    /// `p` on, nothing before.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<ParquetShuffleIter> {
        self.pass(ctx, skip)
    }

    fn positions(&self, _epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        if let Some((shards, index, drop)) = self.sharded {
            found.push(StagePosition {
                output,
                input: output,
                shard: Some(ShardOf { shards, index, deal: Deal::Blocks { drop } }),
            });
        }
    }

    fn redeal_of(&self, epoch: u64) -> Vec<Layer> {
        self.redealt.of(epoch)
    }
}

/// What a pass gathers from.
struct Gather {
    files: Arc<[ParquetFile]>,
    group_starts: Arc<[u64]>,
    file_groups: Arc<[usize]>,
    perm: Permutation,
}

impl Gather {
    /// The rows of positions `range`, in position order: each file holding one read once,
    /// its needed row groups in order, only their needed rows.
    fn window(&self, ctx: &Ctx, range: Range<u64>) -> Result<Vec<Record>> {
        let mut wanted: Vec<(u64, usize)> = range.enumerate().map(|(k, p)| (self.perm.get(p), k)).collect();
        wanted.sort_unstable();
        let mut out: Vec<Option<Record>> = (0..wanted.len()).map(|_| None).collect();
        let mut i = 0;
        while i < wanted.len() {
            let group = self.group_starts.partition_point(|&s| s <= wanted[i].0) - 1;
            let file = self.file_groups.partition_point(|&f| f <= group) - 1;
            let (first_group, end_group) = (self.file_groups[file], self.file_groups[file + 1]);
            let end = self.group_starts[end_group];
            let j = i + wanted[i..].partition_point(|w| w.0 < end);
            // The needed rows of each needed row group of the file, in order.
            let mut picked: Vec<(usize, Vec<u64>)> = Vec::new();
            let mut g = group;
            for &(row, _) in &wanted[i..j] {
                while self.group_starts[g + 1] <= row {
                    g += 1;
                }
                let local = g - first_group;
                match picked.last_mut() {
                    Some((l, rows)) if *l == local => rows.push(row - self.group_starts[g]),
                    _ => picked.push((local, vec![row - self.group_starts[g]])),
                }
            }
            let f = &self.files[file];
            let mut rows = f.open(ctx, 0, Some(picked))?;
            for &(_, slot) in &wanted[i..j] {
                let r = rows.next()?.ok_or_else(|| short(&f.path))?;
                out[slot] = Some(r);
            }
            i = j;
        }
        out.into_iter()
            .map(|r| r.ok_or_else(|| Error::Invalid("a window's row was not gathered".into())))
            .collect()
    }
}

fn short(path: &Path) -> Error {
    table_error(path, "a row group holds fewer rows than its footer counts")
}

/// The row selection of the sorted rows `picks` of a row group of `total` rows.
pub(super) fn selection(picks: &[u64], total: u64) -> RowSelection {
    let mut runs: Vec<RowSelector> = Vec::new();
    let mut at = 0u64;
    for &r in picks {
        if r > at {
            runs.push(RowSelector::skip((r - at) as usize));
        }
        match runs.last_mut() {
            Some(s) if !s.skip => s.row_count += 1,
            _ => runs.push(RowSelector::select(1)),
        }
        at = r + 1;
    }
    if total > at {
        runs.push(RowSelector::skip((total - at) as usize));
    }
    RowSelection::from(runs)
}

/// One pass of [`ParquetShuffle`]: window after window of its positions.
pub struct ParquetShuffleIter {
    ctx: Ctx,
    stage: Gather,
    window: u64,
    /// The pass's positions, spans of the permutation in order (one, but after a reshard).
    spans: Vec<Range<u64>>,
    span: usize,
    /// The next position to gather.
    pos: u64,
    /// The window being handed out.
    rows: std::vec::IntoIter<Record>,
    stats: Arc<StageStats>,
}

impl fmt::Debug for ParquetShuffleIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParquetShuffleIter").field("pos", &self.pos).field("window", &self.window).finish()
    }
}

impl DataIter for ParquetShuffleIter {
    type Item = Record;

    fn next(&mut self) -> Result<Option<Record>> {
        loop {
            if let Some(r) = self.rows.next() {
                self.stats.produced(r.len());
                return Ok(Some(r));
            }
            let Some(s) = self.spans.get(self.span) else { return Ok(None) };
            self.pos = self.pos.max(s.start);
            if self.pos >= s.end {
                self.span += 1;
                continue;
            }
            // To the end of the window `pos` is in, or of the span.
            let end = s.end.min((self.pos / self.window + 1).saturating_mul(self.window));
            let t = std::time::Instant::now();
            let rows = self.stage.window(&self.ctx, self.pos..end);
            self.stats.add_busy(t.elapsed());
            self.rows = rows.inspect_err(|_| self.span = self.spans.len())?.into_iter();
            self.pos = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::abi::table::{ColumnShape, ColumnType, RowReader, TableColumn};

    use crate::parquet::shard::tests::table;

    fn options() -> ParquetOptions {
        let id = TableColumn {
            name: "id".into(),
            dtype: ColumnType::I64,
            shape: ColumnShape::Scalar,
            has_default: false,
        };
        ParquetOptions { columns: Arc::from(vec![id]), batch_rows: 2, ..ParquetOptions::default() }
    }

    /// Three files of 10, 7 and 13 rows (ids 0..30, the global row numbers) in row groups
    /// of 3, 4 and 5 rows.
    fn files(dir: &Path) -> Vec<PathBuf> {
        vec![
            table(dir, "a.parquet", 0, 10, 3),
            table(dir, "b.parquet", 10, 7, 4),
            table(dir, "c.parquet", 17, 13, 5),
        ]
    }

    /// The ids of epoch `epoch`'s pass from position `skip`, and their rows in their files.
    fn pass(ds: &ParquetShuffle, epoch: u64, skip: u64) -> Vec<(i64, u64)> {
        let ctx = Ctx::new(&Default::default()).with_epoch(epoch);
        let mut it = ds.iter_from(&ctx, skip).unwrap();
        let mut out = Vec::new();
        while let Some(r) = it.next().unwrap() {
            let id = RowReader::new(&r).unwrap().scalar::<i64>("id", None).unwrap();
            out.push((id, r.origin().index));
        }
        out
    }

    fn ids(rows: &[(i64, u64)]) -> Vec<i64> {
        rows.iter().map(|r| r.0).collect()
    }

    #[test]
    fn an_epoch_is_the_permutation_of_every_row_whatever_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path());
        let ds = parquet_global_shuffle(&paths, options(), 9).unwrap();
        assert_eq!(ds.len(), 30);
        let perm = ds.permutation(0);
        let want: Vec<i64> = (0..30).map(|p| perm.get(p) as i64).collect();
        for w in [1, 4, 7, 29, 30, 1000] {
            let ds = parquet_global_shuffle(&paths, options(), 9).unwrap().window(w);
            let got = pass(&ds, 0, 0);
            assert_eq!(ids(&got), want, "window {w}");
            for (id, row) in &got {
                let (_, r) = ds.locate(*id as u64).unwrap();
                assert_eq!(*row, r, "a row keeps its index in its file");
            }
        }
        let mut sorted = want.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..30).collect::<Vec<_>>(), "every row once");
        assert_ne!(want, sorted);
    }

    #[test]
    fn epochs_differ_and_a_seed_repeats_its_orders() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path());
        let ds = parquet_global_shuffle(&paths, options(), 3).unwrap().window(8);
        let (e0, e1) = (ids(&pass(&ds, 0, 0)), ids(&pass(&ds, 1, 0)));
        assert_ne!(e0, e1);
        let again = parquet_global_shuffle(&paths, options(), 3).unwrap().window(5);
        assert_eq!(ids(&pass(&again, 1, 0)), e1);
        let other = parquet_global_shuffle(&paths, options(), 4).unwrap().window(8);
        assert_ne!(ids(&pass(&other, 0, 0)), e0);
        let fixed = parquet_global_shuffle(&paths, options(), 3).unwrap().reshuffle_each_epoch(false);
        assert_eq!(ids(&pass(&fixed, 1, 0)), e0);
    }

    #[test]
    fn a_resumed_pass_is_the_rest_of_the_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path());
        let ds = parquet_global_shuffle(&paths, options(), 11).unwrap().window(7);
        let all = pass(&ds, 2, 0);
        for skip in [1, 6, 7, 8, 13, 14, 20, 28, 29, 30, 31] {
            assert_eq!(pass(&ds, 2, skip), all[(skip as usize).min(30)..], "skip {skip}");
        }
    }

    #[test]
    fn shards_are_blocks_of_the_permutation() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path());
        let all = ids(&pass(&parquet_global_shuffle(&paths, options(), 5).unwrap(), 1, 0));
        let mut joined = Vec::new();
        for i in 0..3 {
            let ds =
                parquet_global_shuffle(&paths, options(), 5).unwrap().window(4).shard(3, i, false).unwrap();
            let got = ids(&pass(&ds, 1, 0));
            assert_eq!(got.len(), 10);
            assert_eq!(ids(&pass(&ds, 1, 3)), got[3..], "a shard resumes inside its block");
            joined.extend(got);
        }
        assert_eq!(joined, all, "the blocks, in order, are the epoch");
        let ds = parquet_global_shuffle(&paths, options(), 5).unwrap();
        assert!(ds.shard(3, 3, false).is_err());
    }

    #[test]
    fn damaged_files_are_errors_naming_the_file_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = files(dir.path());
        let good = std::fs::read(&paths[1]).unwrap();
        let cut = dir.path().join("cut.parquet");
        std::fs::write(&cut, &good[..good.len() - 3]).unwrap();
        let e = parquet_global_shuffle([&paths[0], &cut], options(), 1).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: not a readable Parquet file", cut.display())), "{e}");
        let e = parquet_global_shuffle([dir.path().join("none.parquet")], options(), 1).unwrap_err();
        assert!(e.to_string().contains("none.parquet"), "{e}");
        // A column the files lack: an error naming the file, when a window reads it.
        let y = TableColumn {
            name: "y".into(),
            dtype: ColumnType::I64,
            shape: ColumnShape::Scalar,
            has_default: false,
        };
        let ds =
            parquet_global_shuffle(&paths, ParquetOptions { columns: Arc::from(vec![y]), ..options() }, 1)
                .unwrap();
        let e = ds.iter(&Ctx::new(&Default::default())).unwrap().next().unwrap_err().to_string();
        assert!(e.contains(".parquet: no column `y`"), "{e}");
        // Data bytes flipped in turn (the footer intact): rows or an error naming the file.
        let flip = dir.path().join("flip.parquet");
        paths[1] = flip.clone();
        let mut errors = 0;
        for at in (4..good.len() / 2).step_by(5) {
            let mut bad = good.clone();
            bad[at] ^= 0x5a;
            std::fs::write(&flip, &bad).unwrap();
            let Ok(ds) = parquet_global_shuffle(&paths, options(), 1) else { continue };
            let mut it = ds.window(6).iter(&Ctx::new(&Default::default())).unwrap();
            loop {
                match it.next() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        errors += 1;
                        assert!(e.to_string().contains(&flip.display().to_string()), "{e}");
                        break;
                    }
                }
            }
        }
        assert!(errors > 0);
    }
}
