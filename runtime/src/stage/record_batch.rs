//! Batches of serialized records, and the fused reader that makes them.
//!
//! [`RecordBatch`]: records end to end in one buffer with their offsets: a batch of
//! `n` records costs two allocations, not `n`.
//!
//! [`tfrecord_batches`]: `tfrecords(files, cycle).deterministic(false).chunks(n)` in one
//! stage. Each worker reads its own files in turn, copying each record straight from the
//! reader's buffer into the batch it is filling (carrying a part-filled batch on to its
//! next file), and hands over whole batches: one queue operation per `n` records instead
//! of one per record. When the files run out, the workers' part-filled batches are
//! merged into full ones and one last, partial batch (dropped with `drop_remainder`).
//! The order of records is not deterministic, which is what a non-deterministic
//! interleave followed by `batch` allows; every record is delivered exactly once, and
//! every batch but the last holds exactly `n`.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::{Columns, Ctx, DataIter, Dataset, Element, FileId, Origin, Parallelism, Record, StageStats};
use crate::column::ColumnError;
use crate::error::{BoxError, Error, Result};
use crate::tfrecord::{self, ReaderOptions};

/// Serialized records end to end, with their offsets, and where they came from when
/// the reader that filled the batch knew (so an error can name the file and record).
#[derive(Debug, Clone, Default)]
pub struct RecordBatch {
    data: Vec<u8>,
    /// `len + 1` offsets into `data`, starting at 0.
    offsets: Vec<usize>,
    /// Runs of consecutive records of one file: (first row, the first's origin); an
    /// unknown origin where records of no known file follow.
    sources: Vec<(usize, Origin)>,
}

/// A dropped batch's buffer goes back to [`recycle`](crate::column::recycle) for the
/// next batch (a big one; a small one is freed).
impl Drop for RecordBatch {
    fn drop(&mut self) {
        crate::column::recycle::give(std::mem::take(&mut self.data));
    }
}

impl PartialEq for RecordBatch {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data && self.offsets == other.offsets
    }
}

impl Eq for RecordBatch {}

impl RecordBatch {
    /// An empty batch with room for `records` records of `bytes` bytes in all.
    pub fn with_capacity(records: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(records + 1);
        offsets.push(0);
        RecordBatch { data: crate::column::recycle::vec_with_capacity(bytes), offsets, sources: Vec::new() }
    }

    /// An empty batch with room for `records` records of `bytes` bytes in all, each of
    /// its own run of origins (as shuffled records are).
    pub(crate) fn with_capacity_scattered(records: usize, bytes: usize) -> Self {
        let mut b = RecordBatch::with_capacity(records, bytes);
        b.sources.reserve_exact(records);
        b
    }

    /// Appends a record read from `origin` (recorded once per run of records).
    #[inline]
    pub fn push_from(&mut self, record: &[u8], origin: Origin) {
        let row = self.len();
        let continues = match self.sources.last() {
            Some(&(start, o)) if o.is_known() => {
                o.file == origin.file
                    && o.unit == origin.unit
                    && o.index + (row - start) as u64 == origin.index
            }
            Some(_) => !origin.is_known(),
            None => !origin.is_known(),
        };
        if !continues {
            self.sources.push((row, origin));
        }
        self.push(record);
    }

    /// The runs of consecutive records of one file: (first row, the first's origin).
    pub(crate) fn sources(&self) -> &[(usize, Origin)] {
        &self.sources
    }

    /// Where row `i` came from, when the reader that filled the batch knew.
    pub fn origin(&self, i: usize) -> Origin {
        match self.sources.iter().rev().find(|(start, _)| *start <= i) {
            Some(&(start, o)) if o.is_known() => o.advanced((i - start) as u64),
            _ => Origin::UNKNOWN,
        }
    }

    /// Where row `i` came from: `file: record N`, or `record i of the batch` when the
    /// batch was not filled by a reader.
    pub fn locate(&self, i: usize) -> String {
        let o = self.origin(i);
        if o.is_known() { o.to_string() } else { format!("record {i} of the batch") }
    }

    /// Row `i` as a [`Record`], with its origin.
    pub fn record(&self, i: usize) -> Option<Record> {
        Some(Record::new(self.get(i)?.to_vec(), self.origin(i)))
    }

    /// Appends a record.
    #[inline]
    pub fn push(&mut self, record: &[u8]) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(record);
        self.offsets.push(self.data.len());
    }

    /// Appends row `i` of `from`, keeping where it came from.
    fn push_located(&mut self, record: &[u8], from: &RecordBatch, i: usize) {
        self.push_from(record, from.origin(i));
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let (start, end) = (*self.offsets.get(i)?, *self.offsets.get(i + 1)?);
        self.data.get(start..end)
    }

    /// The records in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.offsets.windows(2).map(|w| &self.data[w[0]..w[1]])
    }

    /// The bytes of all records.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }
}

impl From<Vec<Record>> for RecordBatch {
    fn from(records: Vec<Record>) -> Self {
        let mut b = RecordBatch::with_capacity(records.len(), records.iter().map(|r| r.len()).sum());
        for r in &records {
            b.push_from(r, r.origin());
        }
        b
    }
}

impl From<Vec<Vec<u8>>> for RecordBatch {
    fn from(records: Vec<Vec<u8>>) -> Self {
        let mut b = RecordBatch::with_capacity(records.len(), records.iter().map(Vec::len).sum());
        for r in &records {
            b.push(r);
        }
        b
    }
}

impl Element for RecordBatch {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.data.capacity() + self.offsets.capacity() * size_of::<usize>()
    }
}

/// `unbatch` gives the records back, with their origins.
impl Columns for RecordBatch {
    type Row = Record;
    fn num_rows(&self) -> std::result::Result<usize, ColumnError> {
        Ok(self.len())
    }
    fn row(&self, i: usize) -> Record {
        self.record(i).unwrap_or_default()
    }
}

/// Batches of `n` records of the TFRecord files `files` yields, read in parallel in no
/// particular order (see the module documentation).
pub fn tfrecord_batches<D: Dataset<Item = PathBuf>>(
    files: D,
    options: ReaderOptions,
    cycle_length: usize,
    n: usize,
    drop_remainder: bool,
) -> TfRecordBatches<D, Unchanged> {
    TfRecordBatches {
        files,
        options: Arc::new(options),
        cycle_length,
        n,
        drop_remainder,
        parallelism: Parallelism::Auto,
        stats: Arc::new(StageStats::new("read_batches")),
        f: Arc::new(Ok),
    }
}

/// The batch function of plain [`tfrecord_batches`]: the batch as it is.
pub type Unchanged = fn(RecordBatch) -> std::result::Result<RecordBatch, BoxError>;

/// A function applied to each batch by the reader thread that filled it.
pub trait BatchFn: Send + Sync + 'static {
    /// What a batch becomes.
    type Output: Element;
    /// Transforms one batch.
    fn call(&self, batch: RecordBatch) -> std::result::Result<Self::Output, BoxError>;
}

impl<T: Element, F: Fn(RecordBatch) -> std::result::Result<T, BoxError> + Send + Sync + 'static> BatchFn
    for F
{
    type Output = T;
    #[inline]
    fn call(&self, batch: RecordBatch) -> std::result::Result<T, BoxError> {
        self(batch)
    }
}

/// See [`tfrecord_batches`].
#[must_use = "datasets are lazy: iterate them"]
pub struct TfRecordBatches<D, F> {
    files: D,
    options: Arc<ReaderOptions>,
    cycle_length: usize,
    n: usize,
    drop_remainder: bool,
    parallelism: Parallelism,
    stats: Arc<StageStats>,
    f: Arc<F>,
}

impl<D: std::fmt::Debug, F> std::fmt::Debug for TfRecordBatches<D, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TfRecordBatches").field("files", &self.files).field("n", &self.n).finish()
    }
}

impl<D, F> TfRecordBatches<D, F> {
    /// Reader threads: a fixed count, or `Auto` (the cores, at most `cycle_length`).
    pub fn num_parallel(mut self, p: impl Into<Parallelism>) -> Self {
        self.parallelism = p.into();
        self
    }

    /// Applies `g` to each batch in the reader thread that filled it (a fused `map`:
    /// parsing where the bytes are, with no hand-over in between). An error ends the
    /// pass, named as this stage's.
    pub fn map_batches<G: BatchFn>(self, g: G) -> TfRecordBatches<D, G> {
        TfRecordBatches {
            files: self.files,
            options: self.options,
            cycle_length: self.cycle_length,
            n: self.n,
            drop_remainder: self.drop_remainder,
            parallelism: self.parallelism,
            stats: Arc::new(StageStats::new("read_map_batches")),
            f: Arc::new(g),
        }
    }
}

/// What a worker hands over.
enum Msg<T> {
    /// A finished batch and the bytes it holds in the queue (see [`Gate`]).
    Full(T, usize),
    /// The worker's last, part-filled batch (possibly empty): it has finished.
    Rest(RecordBatch),
    Failed(Error),
}

impl<D: Dataset<Item = PathBuf>, F: BatchFn> Dataset for TfRecordBatches<D, F> {
    type Item = F::Output;
    type Iter = TfRecordBatchesIter<F>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        if self.n == 0 {
            return Err(Error::Invalid("tfrecord_batches: a batch size of 0".into()));
        }
        if self.cycle_length == 0 {
            return Err(Error::Invalid("tfrecord_batches: a cycle length of 0".into()));
        }
        let workers = match self.parallelism {
            Parallelism::Fixed(0) => return Err(Error::Invalid("tfrecord_batches: 0 threads".into())),
            // More than the files open at once, or than can run, would only wait.
            Parallelism::Fixed(k) => k.min(self.cycle_length).min(super::autotune::most_threads(ctx)),
            Parallelism::Auto => ctx.cores().min(self.cycle_length),
        }
        .max(1);
        ctx.register(&self.stats);
        self.stats.set_parallelism(workers);
        // The readers run the batch function (a fused map): they count in the CPU budget
        // until the pass ends, so a split of a batch's rows takes only what is left.
        let budget = super::budget::Taken::new(ctx, workers);
        let paths = Arc::new(Mutex::new(self.files.iter(&ctx.nested())?));
        // Two finished batches per worker may wait, and at most their share of bytes:
        // enough to keep the consumer fed.
        let (tx, rx) = sync_channel(crate::defaults::READ_BATCHES_HANDOVER_PER_THREAD * workers);
        let gate = Arc::new(Gate::new(crate::defaults::READ_BATCHES_HANDOVER_BYTES_PER_THREAD * workers));
        let threads = (0..workers)
            .map(|_| {
                let (paths, tx, gate, options, ctx, stats, f) = (
                    paths.clone(),
                    tx.clone(),
                    gate.clone(),
                    self.options.clone(),
                    ctx.clone(),
                    self.stats.clone(),
                    self.f.clone(),
                );
                let n = self.n;
                std::thread::spawn(move || {
                    // The batch function may split a batch's rows within what the
                    // pipeline's CPU budget has left over (`rows`).
                    let _in = super::rows::enter(&ctx, &stats);
                    worker(&paths, &tx, &gate, &options, &ctx, &stats, &*f, n)
                })
            })
            .collect();
        Ok(TfRecordBatchesIter {
            rx,
            gate,
            threads,
            _budget: budget,
            running: workers,
            rest: Vec::new(),
            merged: None,
            n: self.n,
            drop_remainder: self.drop_remainder,
            failed: false,
            f: self.f.clone(),
            stats: self.stats.clone(),
        })
    }
}

/// The bytes of the finished batches waiting for the consumer, kept within a limit: a
/// worker waits before queueing a batch that would take them past it, unless none is
/// waiting (so the queue always takes one batch, however large). Big batches (a batch
/// of decoded images is megabytes) then wait fewer to a worker than small ones.
#[derive(Debug)]
struct Gate {
    /// (bytes queued, whether the consumer is gone).
    state: Mutex<(usize, bool)>,
    changed: Condvar,
    limit: usize,
}

impl Gate {
    fn new(limit: usize) -> Gate {
        Gate { state: Mutex::new((0, false)), changed: Condvar::new(), limit }
    }

    /// Waits until `bytes` more may be queued, and counts them; false once the consumer
    /// is gone.
    fn enter(&self, bytes: usize) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !s.1 && s.0 > 0 && s.0.saturating_add(bytes) > self.limit {
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.0 += bytes;
        !s.1
    }

    /// `bytes` have left the queue.
    fn leave(&self, bytes: usize) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0 = s.0.saturating_sub(bytes);
        self.changed.notify_all();
    }

    /// The consumer is gone: every wait ends.
    fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.changed.notify_all();
    }
}

/// Reads files until there are none left, handing over full batches, then its rest.
#[allow(clippy::too_many_arguments)]
fn worker<I: DataIter<Item = PathBuf>, F: BatchFn>(
    paths: &Mutex<I>,
    tx: &SyncSender<Msg<F::Output>>,
    gate: &Gate,
    options: &ReaderOptions,
    ctx: &Ctx,
    stats: &StageStats,
    f: &F,
    n: usize,
) {
    let mut batch = RecordBatch::default();
    loop {
        let next = match paths.lock() {
            Ok(mut p) => p.next(),
            Err(_) => Err(Error::Invalid("tfrecord_batches: the file list panicked".into())),
        };
        let path = match next {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(e) => {
                let _ = tx.send(Msg::Failed(e));
                return;
            }
        };
        let mut reader = match tfrecord::open(&path, options) {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Msg::Failed(e));
                return;
            }
        };
        let started = Instant::now();
        let file = FileId::of(&path);
        loop {
            match reader.next_indexed() {
                Ok(Some((index, record))) => {
                    if batch.is_empty() && batch.data.capacity() == 0 {
                        // A worker's first batch: room for `n` records like this one
                        // (up to a limit: the first may be unusually long) rather than
                        // growing, and copying, from nothing.
                        let guess = room(record.len().saturating_mul(n)).min(FIRST_BATCH_ROOM_MAX);
                        batch = RecordBatch::with_capacity(n, guess);
                    }
                    batch.push_from(record, Origin::new(file, index));
                    if batch.len() == n {
                        let bytes = batch.bytes();
                        let out = match call(f, std::mem::take(&mut batch)) {
                            Ok(out) => out,
                            Err(e) => {
                                let _ = tx.send(Msg::Failed(e));
                                return;
                            }
                        };
                        // Made after `f` is done with the full batch: its buffer, given
                        // back when `f` dropped it, is the one this batch takes.
                        batch = RecordBatch::with_capacity(n, room(bytes));
                        let bytes = out.byte_size();
                        stats.produced(bytes);
                        let t = Instant::now();
                        if !gate.enter(bytes) || tx.send(Msg::Full(out, bytes)).is_err() {
                            return;
                        }
                        stats.add_wait_output(t.elapsed());
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    ctx.add_reader_stats(reader.stats());
                    let _ = tx.send(Msg::Failed(e));
                    return;
                }
            }
        }
        stats.add_busy(started.elapsed());
        ctx.add_reader_stats(reader.stats());
    }
    let _ = tx.send(Msg::Rest(batch));
}

/// The most bytes a worker reserves for its first batch from the length of the batch's
/// first record; a bigger batch grows from there.
const FIRST_BATCH_ROOM_MAX: usize = 8 << 20;

/// The bytes to reserve for a batch like one of `bytes`: a little more, so that a next
/// batch of slightly longer records does not outgrow (and copy) its buffer, and a
/// recycled buffer fits the next request.
fn room(bytes: usize) -> usize {
    bytes.saturating_add(bytes / 8)
}

/// `f(batch)`, a panic or error in it becoming this stage's error.
fn call<F: BatchFn>(f: &F, batch: RecordBatch) -> Result<F::Output> {
    super::call_user("read_map_batches", || {
        f.call(batch).map_err(|source| Error::Stage { stage: "read_map_batches".into(), source })
    })
}

/// One pass of [`TfRecordBatches`].
pub struct TfRecordBatchesIter<F: BatchFn> {
    rx: Receiver<Msg<F::Output>>,
    gate: Arc<Gate>,
    threads: Vec<JoinHandle<()>>,
    running: usize,
    rest: Vec<RecordBatch>,
    /// The workers' rests merged, being handed out in batches of `n`.
    merged: Option<(RecordBatch, usize)>,
    n: usize,
    drop_remainder: bool,
    failed: bool,
    f: Arc<F>,
    /// The stage's counters: the batches of the merged rests count as its elements too.
    stats: Arc<StageStats>,
    /// The readers' threads in the CPU budget, given back when the pass is dropped.
    _budget: super::budget::Taken,
}

impl<F: BatchFn> std::fmt::Debug for TfRecordBatchesIter<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TfRecordBatchesIter").field("running", &self.running).finish()
    }
}

impl<T> std::fmt::Debug for Msg<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Msg::Full(..) => "Full",
            Msg::Rest(_) => "Rest",
            Msg::Failed(_) => "Failed",
        })
    }
}

impl<F: BatchFn> DataIter for TfRecordBatchesIter<F> {
    type Item = F::Output;

    fn next(&mut self) -> Result<Option<F::Output>> {
        if self.failed {
            return Ok(None);
        }
        while self.running > 0 {
            match self.rx.recv() {
                Ok(Msg::Full(b, bytes)) => {
                    self.gate.leave(bytes);
                    return Ok(Some(b));
                }
                Ok(Msg::Rest(b)) => {
                    self.running -= 1;
                    self.rest.push(b);
                }
                Ok(Msg::Failed(e)) => {
                    self.failed = true;
                    return Err(e);
                }
                Err(_) => {
                    self.failed = true;
                    return Err(Error::Invalid("tfrecord_batches: a reader thread stopped".into()));
                }
            }
        }
        if self.merged.is_none() {
            let records = self.rest.iter().map(RecordBatch::len).sum();
            let bytes = self.rest.iter().map(RecordBatch::bytes).sum();
            let mut all = RecordBatch::with_capacity(records, bytes);
            for b in self.rest.drain(..) {
                for (i, r) in b.iter().enumerate() {
                    all.push_located(r, &b, i);
                }
            }
            self.merged = Some((all, 0));
        }
        let Some((all, pos)) = self.merged.as_mut() else { return Ok(None) };
        let left = all.len() - *pos;
        if left == 0 || (left < self.n && self.drop_remainder) {
            return Ok(None);
        }
        let started = Instant::now();
        let take = left.min(self.n);
        let bytes = all.offsets[*pos + take] - all.offsets[*pos];
        let mut out = RecordBatch::with_capacity(take, bytes);
        for i in *pos..*pos + take {
            out.push_located(all.get(i).unwrap_or_default(), all, i);
        }
        *pos += take;
        match call(&*self.f, out) {
            Ok(x) => {
                // The stage's row counts every batch it hands out (the report's batch count
                // and its rows agree), the ones made of the workers' rests too.
                self.stats.produced(x.byte_size());
                self.stats.add_busy(started.elapsed());
                Ok(Some(x))
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }
}

impl<F: BatchFn> Drop for TfRecordBatchesIter<F> {
    fn drop(&mut self) {
        // Closing the channel makes every worker's next hand-over fail, so each stops
        // after at most the batch it is filling.
        let (_, dead) = sync_channel(0);
        drop(std::mem::replace(&mut self.rx, dead));
        self.gate.close();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{RuntimeOptions, files};
    use crate::tfrecord::{Compression, create};

    fn write(dir: &std::path::Path, shards: usize, per: usize) {
        for s in 0..shards {
            let mut w = create(dir.join(format!("f{s}.tfrecord")), Compression::None).unwrap();
            for i in 0..per {
                w.write_record(format!("{s}-{i}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
        }
    }

    #[test]
    fn every_record_once_in_full_batches() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 5, 333);
        for threads in [1, 2, 4] {
            for drop_remainder in [false, true] {
                let fs = files(&format!("{}/*.tfrecord", dir.path().display())).unwrap();
                let ds = tfrecord_batches(fs, ReaderOptions::default(), 4, 100, drop_remainder)
                    .num_parallel(threads);
                let batches: Vec<RecordBatch> = ds.stream().unwrap().map(|b| b.unwrap()).collect();
                let sizes: Vec<usize> = batches.iter().map(RecordBatch::len).collect();
                let total: usize = sizes.iter().sum();
                assert!(sizes[..sizes.len() - 1].iter().all(|&s| s == 100), "{sizes:?}");
                if drop_remainder {
                    assert_eq!(total, 1600);
                } else {
                    assert_eq!(total, 1665);
                    let mut all: Vec<Vec<u8>> =
                        batches.iter().flat_map(|b| b.iter().map(<[u8]>::to_vec)).collect();
                    all.sort();
                    all.dedup();
                    assert_eq!(all.len(), 1665);
                }
            }
        }
    }

    #[test]
    fn each_batch_is_reserved_once_for_n_records_like_its_first_and_never_grows() {
        // Records of 40 bytes, batches of 100: 4,000 bytes, below the recycled sizes, so
        // a capacity is exactly what was asked for (doubling from nothing would show as
        // 4,096, or a regrown buffer as more).
        let dir = tempfile::tempdir().unwrap();
        for s in 0..3 {
            let mut w = create(dir.path().join(format!("f{s}.tfrecord")), Compression::None).unwrap();
            for i in 0..250u32 {
                w.write_record(format!("{s:>20}{i:>20}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
        }
        for threads in [1, 2] {
            let fs = files(&format!("{}/*.tfrecord", dir.path().display())).unwrap();
            let ds = tfrecord_batches(fs, ReaderOptions::default(), 3, 100, false).num_parallel(threads);
            let batches: Vec<RecordBatch> = ds.stream().unwrap().map(|b| b.unwrap()).collect();
            assert_eq!(batches.iter().map(RecordBatch::len).sum::<usize>(), 750);
            for b in &batches {
                let bytes = b.bytes();
                assert_eq!(bytes, 40 * b.len());
                if b.len() == 100 {
                    assert!([room(4000), 4000].contains(&b.data.capacity()), "{}", b.data.capacity());
                } else {
                    // The last, partial batch (merged from the workers' rests).
                    assert_eq!(b.data.capacity(), bytes);
                }
            }
        }
    }

    #[test]
    fn the_stage_counts_every_batch_it_hands_out_the_merged_rests_too() {
        // 5 files of 333 records in batches of 100: 16 full batches from the workers and
        // 1 (or, with 4 workers, 2) from their merged rests.
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 5, 333);
        for threads in [1, 2, 4] {
            let fs = files(&format!("{}/*.tfrecord", dir.path().display())).unwrap();
            let ds = tfrecord_batches(fs, ReaderOptions::default(), 4, 100, false).num_parallel(threads);
            let ctx = Ctx::new(&RuntimeOptions::default());
            let handed_out = ds.stream_in(&ctx).unwrap().collect::<Result<Vec<_>>>().unwrap().len() as u64;
            let report = ctx.report();
            let row = report.stages.iter().find(|s| s.name == "read_batches").unwrap();
            assert_eq!(row.elements, handed_out, "{threads} threads");
            assert!(handed_out > 16, "some batches came from the rests: {handed_out}");
        }
    }

    #[test]
    fn rows_know_their_file_and_record() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 3, 7);
        let fs = files(&format!("{}/*.tfrecord", dir.path().display())).unwrap();
        let ds = tfrecord_batches(fs, ReaderOptions::default(), 3, 4, false).num_parallel(2);
        for b in ds.stream().unwrap() {
            let b = b.unwrap();
            for (i, r) in b.iter().enumerate() {
                // Record `s-k` is record k of file f{s}.
                let text = std::str::from_utf8(r).unwrap();
                let (s, k) = text.split_once('-').unwrap();
                let at = b.locate(i);
                assert!(at.ends_with(&format!("f{s}.tfrecord: record {k}")), "{at} for {text}");
            }
        }
        assert_eq!(RecordBatch::from(vec![b"x".to_vec()]).locate(0), "record 0 of the batch");
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 2, 50);
        let p = dir.path().join("f1.tfrecord");
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&p, bytes).unwrap();
        let fs = files(&format!("{}/*.tfrecord", dir.path().display())).unwrap();
        let ds = tfrecord_batches(fs, ReaderOptions::default(), 2, 10, false);
        let err = ds.stream().unwrap().find_map(|b| b.err()).expect("an error");
        assert!(err.to_string().contains("f1.tfrecord"), "{err}");
    }

    #[test]
    fn dropping_mid_pass_stops_the_workers() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 4, 1000);
        let fs = files(&format!("{}/*.tfrecord", dir.path().display())).unwrap();
        let ds = tfrecord_batches(fs, ReaderOptions::default(), 4, 10, false);
        let mut s = ds.stream().unwrap();
        assert_eq!(s.next().unwrap().unwrap().len(), 10);
        drop(s);
    }

    #[test]
    fn the_hand_over_gate_bounds_queued_bytes_lets_one_batch_through_and_opens_when_closed() {
        let gate = Arc::new(Gate::new(100));
        assert!(gate.enter(150), "an empty queue takes any batch");
        let waiter = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.enter(10))
        };
        // It waits while 150 bytes are queued; 150 leaving lets it in.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished());
        gate.leave(150);
        assert!(waiter.join().unwrap());
        assert!(gate.enter(90), "10 + 90 fit the limit");
        let blocked = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.enter(1))
        };
        gate.close();
        assert!(!blocked.join().unwrap(), "closing ends the wait, refused");
        assert!(!gate.enter(1));
    }

    #[test]
    fn batches_bigger_than_the_hand_over_bytes_still_all_arrive() {
        // Records of 1 MiB in batches of 20: 20 MiB a batch, over the 16 MiB a thread may
        // queue, so one batch waits at a time.
        let dir = tempfile::tempdir().unwrap();
        let record = vec![7u8; 1 << 20];
        for s in 0..2 {
            let mut w = create(dir.path().join(format!("f{s}.tfrecord")), Compression::None).unwrap();
            for _ in 0..50 {
                w.write_record(&record).unwrap();
            }
            w.finish().unwrap();
        }
        let fs = files(&format!("{}/*.tfrecord", dir.path().display())).unwrap();
        let ds = tfrecord_batches(fs, ReaderOptions::default(), 2, 20, false).num_parallel(2);
        let sizes: Vec<usize> = ds.stream().unwrap().map(|b| b.unwrap().len()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 100);
        assert!(sizes.iter().all(|&n| n == 20), "{sizes:?}");
    }
}
