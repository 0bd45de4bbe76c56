//! `global_shuffle`: a source that reads every record of every file of an indexed
//! TFRecord dataset once per epoch, in a seeded pseudo-random permutation of the whole
//! dataset — not a buffer's approximation of one.
//!
//! # Order
//!
//! The records of files `f0, f1, …` are numbered globally in file order (file `f`'s
//! records are `starts[f]..starts[f + 1]`, a prefix sum of the per-file counts). Position
//! `p` of an epoch's pass is global record [`Permutation::get`]`(p)` of the permutation
//! keyed by the seed, this stage's tag and the epoch (epoch 0 always, with
//! `reshuffle_each_epoch(false)`). The output is exactly that sequence: it depends on the
//! seed, the epoch and the files' record counts only — never on the window, the coalescing
//! or the number of threads. [`positions`](GlobalShuffle::positions) restricts a pass to a
//! range of positions, so `starting_at(p)` resumes a pass at position `p` without reading
//! what comes before it, and disjoint ranges give exact, disjoint shards of an epoch.
//!
//! # Reads
//!
//! Positions are taken a window at a time (by default about 8 MiB of records:
//! 8 MiB / the mean record extent, between 256 and 65 536 records). A window's records
//! are mapped to (file, record) and read into one arena ([`read_window`]): copied out of
//! a read-only memory map of each local file (a `memcpy` a record; a file cut short under
//! the map is an error, never SIGBUS), or, for objects in a store and with
//! [`CoalesceOptions::map`] off, sorted by file and offset and read with positioned reads
//! that coalesce nearby records. Each is checked (length checksum, the extent the index
//! gives, payload checksum) and handed out in permutation order, its payload copied from
//! the arena into the record's own vector. With
//! `num_parallel(n > 1)` (the default `Auto` uses the pipeline's cores) worker threads
//! read whole windows ahead, at most `2 · n` windows beyond the consumer; with 1 the
//! consumer's thread reads them.
//!
//! # Memory
//!
//! The permutation is a few words; the prefix sums are one `u64` per file; each file's
//! index is 8 bytes per record, loaded once when the stage is made; the windows in flight
//! hold at most `2 · n + 1` windows of records (each an arena of the window's record
//! extents), consumed windows kept for reuse at most one per reader, and each reader one
//! coalescing buffer (at most 1 MiB, or the longest record).
//! The memory maps are backed by the page cache, not the process's own memory (though
//! the pages a pass touched count in its resident set, as file-backed pages). Nothing
//! else grows with the dataset but the indexes.
//!
//! # Errors
//!
//! Every file needs an index (`sluice index FILE`): a missing, damaged or stale one fails
//! [`global_shuffle`] with [`Error::Index`]; each pass first checks every file still has
//! the length its index describes. A corrupt record is an error naming the file, record
//! and offset under the `fail` policy (the default); `skip` drops it; `skip_file` drops
//! it and every later record of that file in the pass. Skips are counted in the pipeline's
//! reader statistics. Policies apply in output order, so what is skipped does not depend
//! on threads either. Dropping the iterator cancels and joins its workers.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::reshard;
use super::state::{Deal, Layer, ShardOf};
use super::{Ctx, DataIter, Dataset, FileId, Origin, Parallelism, Record, StagePosition, StageStats};
use crate::error::{CorruptKind, Error, Result};
use crate::permutation::Permutation;
use crate::tfrecord::{
    CoalesceOptions, CorruptPolicy, IndexedFile, Landed, ReaderStats, RecordRequest, SkipEvent, read_window,
};

/// Distinguishes the global shuffle's permutation from other uses of the same seed.
const STAGE_TAG: u64 = 0x4753_4846 << 32; // "GSHF"

/// Bytes of records a window aims at when its size is not set.
const WINDOW_BYTES: u64 = crate::defaults::GLOBAL_SHUFFLE_WINDOW_BYTES;
/// Bounds of the automatic window, in records.
const MIN_WINDOW: u64 = 256;
const MAX_WINDOW: u64 = 1 << 16;

/// The records of the indexed TFRecord files `paths`, in a new pseudo-random permutation
/// of the whole dataset each epoch, keyed by `seed` (see the [module doc](self)). Loads
/// and checks every file's index now: a missing, damaged or stale one is an
/// [`Error::Index`] naming it and saying to run `sluice index`.
pub fn global_shuffle<P: AsRef<Path>>(
    paths: impl IntoIterator<Item = P>,
    seed: u64,
) -> Result<GlobalShuffle> {
    let files = paths.into_iter().map(IndexedFile::open).collect::<Result<Vec<_>>>()?;
    GlobalShuffle::from_files(files, seed)
}

/// The `global_shuffle` stage: made by [`global_shuffle`].
#[must_use = "datasets are lazy: iterate them"]
pub struct GlobalShuffle {
    files: Arc<[IndexedFile]>,
    starts: Arc<[u64]>,
    seed: u64,
    reshuffle: bool,
    window: Option<u64>,
    parallelism: Parallelism,
    positions: Range<u64>,
    /// Worker `index` of `shards`, the remainder dropped or not ([`shard`](Self::shard)).
    sharded: Option<(u64, u64, bool)>,
    /// The redeals of its last passes.
    redealt: reshard::Redealt,
    read: CoalesceOptions,
    on_corrupt: CorruptPolicy,
    stats: Arc<StageStats>,
}

impl fmt::Debug for GlobalShuffle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalShuffle")
            .field("files", &self.files.len())
            .field("records", &self.len())
            .field("seed", &self.seed)
            .field("window", &self.window_len())
            .field("positions", &self.positions)
            .finish()
    }
}

impl GlobalShuffle {
    /// The stage over files already opened with their indexes.
    pub fn from_files(files: Vec<IndexedFile>, seed: u64) -> Result<GlobalShuffle> {
        if files.len() > u32::MAX as usize {
            return Err(Error::Invalid(format!("global shuffle of {} files: at most 2^32", files.len())));
        }
        let mut starts = Vec::with_capacity(files.len() + 1);
        let mut total = 0u64;
        starts.push(0);
        for f in &files {
            total += f.len();
            starts.push(total);
        }
        Ok(GlobalShuffle {
            files: files.into(),
            starts: starts.into(),
            seed,
            reshuffle: true,
            window: None,
            parallelism: Parallelism::Auto,
            positions: 0..u64::MAX,
            sharded: None,
            redealt: Default::default(),
            read: CoalesceOptions::default(),
            on_corrupt: CorruptPolicy::Fail,
            stats: Arc::new(StageStats::new("global_shuffle")),
        })
    }

    /// Records in one epoch (all files).
    pub fn len(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// True when the files hold no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The files, in their global numbering order.
    pub fn files(&self) -> &[IndexedFile] {
        &self.files
    }

    /// The permutation of epoch `epoch`: position `p` of that epoch's pass is global
    /// record `permutation(epoch).get(p)` (before any [`positions`](Self::positions)
    /// restriction, which only selects positions).
    pub fn permutation(&self, epoch: u64) -> Permutation {
        let epoch = if self.reshuffle { epoch } else { 0 };
        Permutation::new(self.len(), self.seed, STAGE_TAG ^ epoch)
    }

    /// The (file index, record index in the file) of global record `g`.
    pub fn locate(&self, g: u64) -> Option<(usize, u64)> {
        locate(&self.starts, g)
    }

    /// Whether each epoch gets a new permutation (default true).
    pub fn reshuffle_each_epoch(mut self, reshuffle: bool) -> Self {
        self.reshuffle = reshuffle;
        self
    }

    /// Positions of the permutation taken, sorted and read together (at least 1; the
    /// default is about 8 MiB of records). Changes memory and locality, never the order.
    pub fn window(mut self, records: usize) -> Self {
        self.window = Some((records as u64).max(1));
        self
    }

    /// Reader threads (default `Auto`: the pipeline's cores; 1 reads on the consumer's
    /// thread). Changes throughput, never the order.
    pub fn num_parallel(mut self, n: impl Into<Parallelism>) -> Self {
        self.parallelism = n.into();
        self
    }

    /// Restricts each pass to the positions `range` of its permutation (clamped to the
    /// epoch's length): an exact slice of the epoch, read without touching the records
    /// outside it. For resuming a pass or an exact shard of it.
    pub fn positions(mut self, range: Range<u64>) -> Self {
        self.positions = range;
        self
    }

    /// Worker `index` of `num_shards`: a contiguous block of each epoch's permutation,
    /// reading only its own records. The blocks partition the epoch exactly: with
    /// `drop_remainder` every worker gets `N / num_shards` positions (the last `N mod
    /// num_shards` positions of the permutation go to none), else the first `N mod
    /// num_shards` workers get one more. Every worker must be built over the same files
    /// with the same seed (they then draw the same permutation). A pass resumed from a
    /// resharded state reads its block of the positions the workers before had not taken
    /// ([`PipelineState::reshard`](super::PipelineState::reshard)).
    pub fn shard(mut self, num_shards: u64, index: u64, drop_remainder: bool) -> Result<Self> {
        if num_shards == 0 || index >= num_shards {
            return Err(crate::error::Error::Invalid(format!(
                "shard index {index} out of range for {num_shards} shards (need 0 <= index < num_shards)"
            )));
        }
        let range = reshard::block(self.len(), num_shards, index, drop_remainder);
        self.sharded = Some((num_shards, index, drop_remainder));
        Ok(self.positions(range))
    }

    /// Starts each pass at position `p` of its permutation: the exact suffix of the
    /// epoch from `p` (`positions(p..u64::MAX)`).
    pub fn starting_at(self, p: u64) -> Self {
        self.positions(p..u64::MAX)
    }

    /// How reads are coalesced, and whether payload checksums are verified.
    pub fn coalesce(mut self, options: CoalesceOptions) -> Self {
        self.read = options;
        self
    }

    /// What a corrupt record does (default `fail`); see the [module doc](self).
    pub fn on_corrupt(mut self, policy: CorruptPolicy) -> Self {
        self.on_corrupt = policy;
        self
    }

    /// Names the stage in statistics and errors.
    pub fn named(mut self, name: &str) -> Self {
        self.stats = Arc::new(StageStats::new(name));
        self
    }

    /// The window in records: set, or about `WINDOW_BYTES` of records.
    fn window_len(&self) -> u64 {
        self.window.unwrap_or_else(|| {
            let bytes: u64 = self.files.iter().map(|f| f.index().file_len()).sum();
            let mean = bytes.checked_div(self.len()).unwrap_or(1).max(1);
            (WINDOW_BYTES / mean).clamp(MIN_WINDOW, MAX_WINDOW)
        })
    }
}

fn locate(starts: &[u64], g: u64) -> Option<(usize, u64)> {
    if g >= *starts.last()? {
        return None;
    }
    // The last file whose first global record is at or before g (empty files share
    // their start with the next file and are passed over).
    let f = starts.partition_point(|&s| s <= g) - 1;
    Some((f, g - starts[f]))
}

impl Dataset for GlobalShuffle {
    type Item = Record;
    type Iter = GlobalShuffleIter;

    fn iter(&self, ctx: &Ctx) -> Result<GlobalShuffleIter> {
        self.pass(ctx, 0)
    }

    /// Starts `skip` positions later, reading nothing before them: exact while every
    /// record is good (`on_corrupt: fail`, the default); under a skipping policy an
    /// element is not a position, so the skipped elements are pulled.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<GlobalShuffleIter> {
        if self.on_corrupt != CorruptPolicy::Fail {
            let mut iter = self.pass(ctx, 0)?;
            for _ in 0..skip {
                if iter.next()?.is_none() {
                    break;
                }
            }
            return Ok(iter);
        }
        self.pass(ctx, skip)
    }

    /// A sharded pass records its count of positions and which shard it is (under the
    /// `fail` policy, where an element is a position).
    fn positions(&self, _epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        if let Some((shards, index, drop)) = self.sharded
            && self.on_corrupt == CorruptPolicy::Fail
        {
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

impl GlobalShuffle {
    /// A pass from `skip` positions after the start of its range.
    fn pass(&self, ctx: &Ctx, skip: u64) -> Result<GlobalShuffleIter> {
        ctx.register(&self.stats);
        for f in self.files.iter() {
            f.check_len()?;
        }
        let n = self.len();
        self.redealt.record(ctx);
        let spans = reshard::pass_spans(ctx, n, &self.positions, self.sharded, skip)?;
        let mut offsets = Vec::with_capacity(spans.len() + 1);
        offsets.push(0u64);
        for s in &spans {
            offsets.push(offsets.last().copied().unwrap_or(0) + (s.end - s.start));
        }
        let plan = Arc::new(Plan {
            files: self.files.clone(),
            starts: self.starts.clone(),
            perm: self.permutation(ctx.epoch()),
            spans: spans.into(),
            offsets: offsets.into(),
            window: self.window_len(),
            read: self.read,
            stats: self.stats.clone(),
        });
        let threads = match self.parallelism {
            Parallelism::Fixed(n) => n.max(1),
            Parallelism::Auto => ctx.cores(),
        };
        let threads = threads.min(plan.windows().max(1) as usize);
        self.stats.set_parallelism(threads);
        let source = if threads <= 1 {
            Source::Inline { plan, next: 0, buffers: Buffers::default() }
        } else {
            Source::Workers(Workers::start(plan, threads, self.stats.name())?)
        };
        Ok(GlobalShuffleIter {
            ctx: ctx.clone(),
            files: self.files.clone(),
            on_corrupt: self.on_corrupt,
            current: Window::default(),
            at: 0,
            source,
            abandoned: vec![false; self.files.len()],
            ids: self.files.iter().map(|f| FileId::of(f.path())).collect(),
            reader: ReaderStats::default(),
            stats: self.stats.clone(),
            done: false,
        })
    }
}

/// What one pass reads: the permutation, its positions (spans of them, in order: one,
/// but for a pass redealt after a reshard), the window.
struct Plan {
    files: Arc<[IndexedFile]>,
    starts: Arc<[u64]>,
    perm: Permutation,
    spans: Arc<[Range<u64>]>,
    /// `offsets[i]`: the pass's positions before span `i` (one more entry: all of them).
    offsets: Arc<[u64]>,
    window: u64,
    read: CoalesceOptions,
    stats: Arc<StageStats>,
}

/// One record of a window, in permutation order: its payload's bytes in the window's
/// arena, or why it is corrupt.
struct Slot {
    file: u32,
    record: u64,
    data: Landed,
}

/// A window read: its records' extents in one arena, and its slots in permutation order.
#[derive(Default)]
struct Window {
    arena: Vec<u8>,
    slots: Vec<Slot>,
}

/// A reader's reusable buffers.
#[derive(Default)]
struct Buffers {
    scratch: Vec<u8>,
    requests: Vec<RecordRequest>,
    /// A window given back by the consumer, its buffers reused by the next.
    spare: Window,
}

impl Plan {
    fn windows(&self) -> u64 {
        self.offsets.last().copied().unwrap_or(0).div_ceil(self.window)
    }

    /// The permutation positions of the pass's elements `lo..hi`, in order.
    fn positions(&self, lo: u64, hi: u64) -> impl Iterator<Item = u64> + '_ {
        let first = self.offsets.partition_point(|&o| o <= lo).saturating_sub(1).min(self.spans.len());
        self.spans[first..].iter().zip(&self.offsets[first..]).flat_map(move |(s, &o)| {
            let from = s.start + lo.saturating_sub(o);
            let to = s.end.min(s.start + hi.saturating_sub(o));
            from..to.max(from)
        })
    }

    /// Reads window `w`: its records in permutation order.
    fn read(&self, w: u64, buf: &mut Buffers) -> Result<Window> {
        let t = Instant::now();
        let lo = w * self.window;
        let hi = (lo + self.window).min(self.offsets.last().copied().unwrap_or(0));
        let mut window = std::mem::take(&mut buf.spare);
        window.slots.clear();
        buf.requests.clear();
        for (slot, p) in self.positions(lo, hi).enumerate() {
            let g = self.perm.get(p);
            let (file, record) = locate(&self.starts, g)
                .ok_or_else(|| Error::Invalid(format!("global record {g} is past the dataset's end")))?;
            buf.requests.push(RecordRequest { file: file as u32, record, slot: slot as u32 });
            window.slots.push(Slot { file: file as u32, record, data: Ok(0..0) });
        }
        let Window { arena, slots } = &mut window;
        let mut landed = 0;
        read_window(&self.files, &mut buf.requests, &self.read, &mut buf.scratch, arena, |slot, data| {
            // Every request lands once, in its own slot (made just above).
            slots[slot as usize].data = data;
            landed += 1;
            Ok(())
        })?;
        if landed != slots.len() {
            return Err(Error::Invalid(format!("{landed} of a window's {} records were read", slots.len())));
        }
        self.stats.add_busy(t.elapsed());
        Ok(window)
    }
}

enum Source {
    /// The consumer's thread reads window `next` when it needs it.
    Inline {
        plan: Arc<Plan>,
        next: u64,
        buffers: Buffers,
    },
    Workers(Workers),
}

impl Source {
    /// The next window, `None` after the last.
    fn next_window(&mut self) -> Option<Result<Window>> {
        match self {
            Source::Inline { plan, next, buffers } => {
                if *next >= plan.windows() {
                    return None;
                }
                *next += 1;
                Some(plan.read(*next - 1, buffers))
            }
            Source::Workers(w) => w.next_window(),
        }
    }

    /// Gives a consumed window back, its buffers to be reused.
    fn recycle(&mut self, window: Window) {
        match self {
            Source::Inline { buffers, .. } => buffers.spare = window,
            Source::Workers(w) => {
                let mut spare = w.shared.spare.lock().unwrap_or_else(PoisonError::into_inner);
                if spare.len() < w.handles.len() {
                    spare.push(window);
                }
            }
        }
    }

    fn shut_down(&mut self) {
        if let Source::Workers(w) = self {
            w.shut_down();
        }
    }
}

/// Worker threads reading whole windows ahead, handed over in window order.
struct Workers {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

struct Shared {
    plan: Arc<Plan>,
    state: Mutex<WorkState>,
    /// Signalled when a window is finished (the consumer waits on it).
    ready: Condvar,
    /// Signalled when the consumer takes a window (workers wait on it for room).
    room: Condvar,
    cancel: AtomicBool,
    /// Consumed windows, for the workers to reuse (at most one per worker).
    spare: Mutex<Vec<Window>>,
}

struct WorkState {
    /// The next window a worker will claim.
    next_claim: u64,
    /// The next window the consumer takes.
    next_deliver: u64,
    /// Windows read and not yet taken, by number.
    finished: BTreeMap<u64, Result<Window>>,
    /// Windows claimed beyond `next_deliver` at most (the bound on memory).
    depth: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, WorkState> {
        // No code that can panic runs under the lock, so a poisoned lock is consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Workers {
    fn start(plan: Arc<Plan>, threads: usize, name: &str) -> Result<Workers> {
        let shared = Arc::new(Shared {
            plan,
            state: Mutex::new(WorkState {
                next_claim: 0,
                next_deliver: 0,
                finished: BTreeMap::new(),
                depth: 2 * threads as u64,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            cancel: AtomicBool::new(false),
            spare: Mutex::new(Vec::new()),
        });
        let mut workers = Workers { shared, handles: Vec::with_capacity(threads) };
        for i in 0..threads {
            let shared = workers.shared.clone();
            let spawned =
                std::thread::Builder::new().name(format!("sluice-{name}-{i}")).spawn(move || work(&shared));
            match spawned {
                Ok(h) => workers.handles.push(h),
                Err(e) => {
                    workers.shut_down();
                    return Err(Error::Stage {
                        stage: name.to_string(),
                        source: format!("cannot start a reader thread: {e}").into(),
                    });
                }
            }
        }
        Ok(workers)
    }

    fn next_window(&mut self) -> Option<Result<Window>> {
        let shared = &*self.shared;
        let mut st = shared.lock();
        loop {
            let next = st.next_deliver;
            if next >= shared.plan.windows() {
                return None;
            }
            if let Some(r) = st.finished.remove(&next) {
                shared.plan.stats.sample_queue(st.finished.len() + 1, st.depth as usize);
                st.next_deliver += 1;
                drop(st);
                shared.room.notify_all();
                return Some(r);
            }
            st = shared.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn shut_down(&mut self) {
        {
            let _st = self.shared.lock();
            self.shared.cancel.store(true, Ordering::Relaxed);
        }
        self.shared.room.notify_all();
        for h in self.handles.drain(..) {
            // Workers catch panics from reading; a join error would be a bug here, and
            // the consumer is not waiting for anything any more.
            let _ = h.join();
        }
    }
}

/// A worker: claims the next window while it is within `depth` of the consumer, reads
/// it, files it.
fn work(shared: &Shared) {
    let plan = &*shared.plan;
    let mut buffers = Buffers::default();
    loop {
        let w = {
            let mut st = shared.lock();
            loop {
                if shared.cancel.load(Ordering::Relaxed) || st.next_claim >= plan.windows() {
                    return;
                }
                if st.next_claim < st.next_deliver + st.depth {
                    break;
                }
                let t = Instant::now();
                st = shared.room.wait(st).unwrap_or_else(PoisonError::into_inner);
                plan.stats.add_wait_output(t.elapsed());
            }
            st.next_claim += 1;
            st.next_claim - 1
        };
        if let Some(window) = shared.spare.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            buffers.spare = window;
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan.read(w, &mut buffers)))
            .unwrap_or_else(|payload| Err(Error::from_panic(plan.stats.name(), payload)));
        shared.lock().finished.insert(w, r);
        shared.ready.notify_one();
    }
}

/// One pass of [`GlobalShuffle`]. Its position is the number of positions delivered
/// (plus the pass's start).
pub struct GlobalShuffleIter {
    ctx: Ctx,
    files: Arc<[IndexedFile]>,
    on_corrupt: CorruptPolicy,
    /// The window being handed out, and the next of its slots.
    current: Window,
    at: usize,
    source: Source,
    abandoned: Vec<bool>,
    /// The files' numbers, for the origins of their records.
    ids: Vec<FileId>,
    reader: ReaderStats,
    stats: Arc<StageStats>,
    done: bool,
}

impl fmt::Debug for GlobalShuffleIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalShuffleIter")
            .field("stage", &self.stats.name())
            .field("delivered", &self.reader.records)
            .field("done", &self.done)
            .finish()
    }
}

impl GlobalShuffleIter {
    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.source.shut_down();
            self.ctx.add_reader_stats(&self.reader);
        }
    }

    /// Applies the corrupt-record policy to record `record` of file `file`: the error to
    /// return under `fail`, else `None` (skipped and counted).
    fn corrupt(&mut self, file: u32, record: u64, kind: CorruptKind) -> Option<Error> {
        let f = &self.files[file as usize];
        let err = f.corrupt(record, kind.clone());
        if self.on_corrupt == CorruptPolicy::Fail {
            return Some(err);
        }
        let (offset, extent) = f.index().extent(record).unwrap_or((0, 0));
        let rest_of_file = self.on_corrupt == CorruptPolicy::SkipFile;
        self.abandoned[file as usize] |= rest_of_file;
        self.note_skip(SkipEvent {
            path: f.path().to_path_buf(),
            record,
            offset,
            kind,
            bytes: extent,
            rest_of_file,
        });
        None
    }

    fn note_skip(&mut self, event: SkipEvent) {
        self.reader.note_skip(event);
    }
}

impl DataIter for GlobalShuffleIter {
    type Item = Record;

    fn next(&mut self) -> Result<Option<Record>> {
        loop {
            if self.done {
                return Ok(None);
            }
            let Some(slot) = self.current.slots.get_mut(self.at) else {
                match self.source.next_window() {
                    Some(Ok(w)) => {
                        let done = std::mem::replace(&mut self.current, w);
                        self.at = 0;
                        self.source.recycle(done);
                    }
                    Some(Err(e)) => {
                        self.finish();
                        return Err(e);
                    }
                    None => self.finish(),
                }
                continue;
            };
            self.at += 1;
            let (file, record) = (slot.file, slot.record);
            if self.abandoned[file as usize] {
                // A record of a file abandoned under `skip_file`: counted, not delivered.
                self.reader.skipped_records += 1;
                continue;
            }
            match std::mem::replace(&mut slot.data, Ok(0..0)) {
                Ok(range) => {
                    let v = self.current.arena[range].to_vec();
                    self.reader.records += 1;
                    self.reader.bytes += v.len() as u64;
                    self.stats.produced(v.len());
                    return Ok(Some(Record::new(v, Origin::new(self.ids[file as usize], record))));
                }
                Err(kind) => {
                    if let Some(e) = self.corrupt(file, record, kind) {
                        self.finish();
                        return Err(e);
                    }
                }
            }
        }
    }
}

impl Drop for GlobalShuffleIter {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_passes_over_empty_files() {
        // Files of 2, 0, 3 and 0 records.
        let starts = [0, 2, 2, 5, 5];
        let got: Vec<_> = (0..6).map(|g| locate(&starts, g)).collect();
        assert_eq!(got, [Some((0, 0)), Some((0, 1)), Some((2, 0)), Some((2, 1)), Some((2, 2)), None]);
        assert_eq!(locate(&[0], 0), None);
        assert_eq!(locate(&[0, 0], 0), None);
    }
}
