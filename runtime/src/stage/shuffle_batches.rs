//! `shuffle_batches`: `shuffle(buffer_size, seed)` then a `batch(n)` of serialized
//! records, as one stage over batches of records (the fused reader's, `tfrecord_batches`).
//!
//! The order is [`Shuffle`](super::Shuffle)'s, draw for draw: the same Philox stream (seed,
//! epoch), the same refill of the picked place by the next input record, the same
//! `swap_remove` once the input runs out; the records it yields, cut into batches of `n`,
//! are those of `shuffle(buffer_size, seed).chunks(n)` over the input's records in order.
//! What differs is where the records live: not one `Vec<u8>` each, moved through the
//! buffer, but end to end in one slab of bytes. A record read in is copied into the place
//! of the one picked (in place when it fits there, else at the slab's end, the old place
//! left as garbage until a compaction), and the picked one is copied straight into the
//! output batch: no allocation per record, no record handed from thread to thread alone.
//!
//! The draws are taken [`AHEAD`] in advance (the same stream, consumed in the same order),
//! so the places the next picks will read are fetched into the cache while this one is
//! copied: a buffer of 100 000 records is larger than the caches, and each pick is a
//! random place in it.
//!
//! Memory: the slab holds the live records' bytes and at most a quarter more of garbage
//! (then it is compacted), in a vector that may have doubled past that; beside it one
//! 40-byte place per buffered record, and the batch being filled. The slab is kept from
//! one pass to the next (emptied, not freed): a pass of a later epoch reuses it instead of
//! growing a new one, whichever thread runs it.

use std::sync::{Arc, Mutex};

use super::shuffle::STAGE_TAG;
use super::{Ctx, DataIter, Dataset, Origin, RecordBatch, StageStats};
use crate::error::{Error, Result};
use crate::rng::Philox;

/// Garbage below this is never worth a compaction.
const MIN_COMPACT_BYTES: usize = 1 << 20;

/// Draws taken in advance: the place of the pick this many ahead is fetched, and the
/// bytes of the one half as many ahead.
const AHEAD: usize = 16;

/// The shuffle's draws, [`AHEAD`] of them taken in advance of their use.
#[derive(Debug)]
struct Draws {
    rng: Philox,
    ahead: [u64; AHEAD],
    /// The next draw's index in `ahead`.
    head: usize,
}

impl Draws {
    fn new(mut rng: Philox) -> Draws {
        let ahead = std::array::from_fn(|_| rng.next_u64());
        Draws { rng, ahead, head: 0 }
    }

    /// The next draw of the stream.
    #[inline]
    fn next(&mut self) -> u64 {
        let x = self.ahead[self.head];
        self.ahead[self.head] = self.rng.next_u64();
        self.head = (self.head + 1) % AHEAD;
        x
    }

    /// The draw `k` after the next (`k < AHEAD`).
    #[inline]
    fn peek(&self, k: usize) -> u64 {
        self.ahead[(self.head + k) % AHEAD]
    }
}

/// Asks the CPU to bring the cache line of `p` in (a hint: never faults, any address).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is a hint that never faults, whatever the address; SSE, which
        // the intrinsic needs, is part of every x86_64 target.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `shuffle(buffer_size, seed)` then `chunks(n)` of the records of `input`'s batches, as
/// batches of `n` records (a last, smaller one unless `drop_remainder`). A new order each
/// epoch unless [`reshuffle_each_epoch(false)`](ShuffleBatches::reshuffle_each_epoch).
pub fn shuffle_batches<D: Dataset<Item = RecordBatch>>(
    input: D,
    buffer_size: usize,
    seed: u64,
    n: usize,
    drop_remainder: bool,
) -> ShuffleBatches<D> {
    ShuffleBatches {
        input,
        buffer_size: buffer_size.max(1),
        seed,
        reshuffle: true,
        n,
        drop_remainder,
        spare: Arc::default(),
        stats: Arc::new(StageStats::new("shuffle")),
    }
}

/// The `shuffle_batches` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct ShuffleBatches<D> {
    input: D,
    buffer_size: usize,
    seed: u64,
    reshuffle: bool,
    n: usize,
    drop_remainder: bool,
    /// The slab of the last pass that ended, for the next to reuse.
    spare: Arc<Mutex<Option<Slab>>>,
    stats: Arc<StageStats>,
}

impl<D> ShuffleBatches<D> {
    /// Whether each epoch gets a new order (default true).
    pub fn reshuffle_each_epoch(mut self, reshuffle: bool) -> Self {
        self.reshuffle = reshuffle;
        self
    }
}

impl<D: Dataset<Item = RecordBatch>> Dataset for ShuffleBatches<D> {
    type Item = RecordBatch;
    type Iter = ShuffleBatchesIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        if self.n == 0 {
            return Err(Error::Invalid("shuffle_batches: the batch size must be at least 1".into()));
        }
        ctx.register(&self.stats);
        let epoch = if self.reshuffle { ctx.epoch() } else { 0 };
        Ok(ShuffleBatchesIter {
            input: Input { iter: Some(self.input.iter(ctx)?), batch: RecordBatch::default(), row: 0, run: 0 },
            slab: self.spare.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default(),
            spare: self.spare.clone(),
            capacity: self.buffer_size,
            n: self.n,
            drop_remainder: self.drop_remainder,
            draws: Draws::new(Philox::new(self.seed, STAGE_TAG ^ epoch)),
            done: false,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`ShuffleBatches`]: the slab of buffered records, the input's position
/// (within its current batch) and the generator's.
#[derive(Debug)]
pub struct ShuffleBatchesIter<I> {
    input: Input<I>,
    slab: Slab,
    capacity: usize,
    n: usize,
    drop_remainder: bool,
    draws: Draws,
    done: bool,
    spare: Arc<Mutex<Option<Slab>>>,
    stats: Arc<StageStats>,
}

/// The slab goes back, emptied, for the next pass.
impl<I> Drop for ShuffleBatchesIter<I> {
    fn drop(&mut self) {
        let mut slab = std::mem::take(&mut self.slab);
        slab.data.clear();
        slab.places.clear();
        slab.garbage = 0;
        *self.spare.lock().unwrap_or_else(|p| p.into_inner()) = Some(slab);
    }
}

/// The input's records one at a time, out of its current batch.
#[derive(Debug)]
struct Input<I> {
    iter: Option<I>,
    batch: RecordBatch,
    /// The next row of `batch`.
    row: usize,
    /// The run of `batch.sources()` that holds `row` (or precedes it).
    run: usize,
}

impl<I: DataIter<Item = RecordBatch>> Input<I> {
    /// The next record and its origin, `None` once the input is done (and ever after).
    fn pull(&mut self) -> Result<Option<(&[u8], Origin)>> {
        while self.row >= self.batch.len() {
            let Some(iter) = self.iter.as_mut() else { return Ok(None) };
            match iter.next()? {
                Some(b) => {
                    self.batch = b;
                    self.row = 0;
                    self.run = 0;
                }
                None => {
                    self.iter = None;
                    self.batch = RecordBatch::default();
                    self.row = 0;
                    return Ok(None);
                }
            }
        }
        let i = self.row;
        self.row += 1;
        let sources = self.batch.sources();
        while self.run + 1 < sources.len() && sources[self.run + 1].0 <= i {
            self.run += 1;
        }
        let origin = match sources.get(self.run) {
            Some(&(start, o)) if start <= i && o.is_known() => o.advanced((i - start) as u64),
            _ => Origin::UNKNOWN,
        };
        Ok(self.batch.get(i).map(|r| (r, origin)))
    }
}

/// Where one buffered record lives in the slab.
#[derive(Debug, Clone, Copy)]
struct Place {
    start: usize,
    len: usize,
    /// Bytes it may grow to in place.
    cap: usize,
    origin: Origin,
}

/// The shuffle buffer: records end to end in one vector of bytes.
#[derive(Debug, Default)]
struct Slab {
    data: Vec<u8>,
    places: Vec<Place>,
    /// Bytes of `data` no place holds.
    garbage: usize,
}

impl Slab {
    fn len(&self) -> usize {
        self.places.len()
    }

    /// Appends a record while filling up to `capacity` records (the first one sizes the
    /// slab for as many of its length).
    fn push(&mut self, record: &[u8], origin: Origin, capacity: usize) {
        if self.places.capacity() == 0 {
            self.places.reserve_exact(capacity.min(1 << 20));
            self.data.reserve_exact(record.len().saturating_mul(capacity).min(256 << 20));
        }
        let start = self.data.len();
        self.data.extend_from_slice(record);
        self.places.push(Place { start, len: record.len(), cap: record.len(), origin });
    }

    /// Fetches the place of record `j` into the cache (`j` may be out of date: any index).
    #[inline]
    fn prefetch_place(&self, j: usize) {
        if let Some(p) = self.places.get(j) {
            prefetch(p);
        }
    }

    /// Fetches the first bytes of record `j` into the cache.
    #[inline]
    fn prefetch_record(&self, j: usize) {
        if let Some(p) = self.places.get(j)
            && let Some(bytes) = self.data.get(p.start..p.start + p.len)
        {
            for line in (0..bytes.len().min(256)).step_by(64) {
                prefetch(&bytes[line]);
            }
        }
    }

    /// Record `j` onto the end of `out`.
    #[inline]
    fn emit(&self, j: usize, out: &mut RecordBatch) {
        let p = self.places[j];
        out.push_from(&self.data[p.start..p.start + p.len], p.origin);
    }

    /// `record` in place of record `j`.
    #[inline]
    fn put(&mut self, j: usize, record: &[u8], origin: Origin) {
        let p = &mut self.places[j];
        if record.len() <= p.cap {
            self.data[p.start..p.start + record.len()].copy_from_slice(record);
            p.len = record.len();
            p.origin = origin;
            return;
        }
        self.garbage += p.cap;
        *p = Place { start: self.data.len(), len: record.len(), cap: record.len(), origin };
        self.data.extend_from_slice(record);
        let live = self.data.len() - self.garbage;
        if self.garbage > MIN_COMPACT_BYTES.max(live / 4) {
            self.compact();
        }
    }

    /// Drops record `j`, the last taking its place (`Vec::swap_remove`).
    fn swap_remove(&mut self, j: usize) {
        let p = self.places.swap_remove(j);
        self.garbage += p.cap;
    }

    /// The live records end to end in a new vector, each place shrunk to its record.
    fn compact(&mut self) {
        let live = self.data.len() - self.garbage;
        let mut data = Vec::with_capacity(live);
        for p in &mut self.places {
            let start = data.len();
            data.extend_from_slice(&self.data[p.start..p.start + p.len]);
            *p = Place { start, len: p.len, cap: p.len, origin: p.origin };
        }
        self.data = data;
        self.garbage = 0;
    }
}

impl<I: DataIter<Item = RecordBatch>> DataIter for ShuffleBatchesIter<I> {
    type Item = RecordBatch;

    fn next(&mut self) -> Result<Option<RecordBatch>> {
        if self.done {
            return Ok(None);
        }
        let avg = if self.slab.len() == 0 { 128 } else { self.slab.data.len() / self.slab.len() + 1 };
        let mut out = RecordBatch::with_capacity_scattered(self.n, self.n.saturating_mul(avg).min(64 << 20));
        let Self { input, slab, draws, .. } = self;
        while out.len() < self.n {
            while slab.len() < self.capacity {
                match input.pull()? {
                    Some((r, o)) => slab.push(r, o, self.capacity),
                    None => break,
                }
            }
            if slab.len() == 0 {
                self.done = true;
                break;
            }
            let len = slab.len() as u64;
            slab.prefetch_place((draws.peek(AHEAD - 1) % len) as usize);
            slab.prefetch_record((draws.peek(AHEAD / 2) % len) as usize);
            let j = (draws.next() % len) as usize;
            slab.emit(j, &mut out);
            match input.pull()? {
                Some((r, o)) => slab.put(j, r, o),
                None => slab.swap_remove(j),
            }
        }
        self.stats.sample_queue(self.slab.len(), self.capacity);
        if out.is_empty() || (self.drop_remainder && out.len() < self.n) {
            self.done = true;
            return Ok(None);
        }
        self.stats.produced(out.bytes());
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{FileId, Record, from_vec};

    /// `count` records of varying lengths (some longer than any before them, so places
    /// move and the slab compacts), each from a known place of one of two files.
    fn records(count: usize, spread: usize) -> Vec<Record> {
        let files = [
            FileId::of(std::path::Path::new("/a.tfrecord")),
            FileId::of(std::path::Path::new("/b.tfrecord")),
        ];
        (0..count)
            .map(|i| {
                let len = 1 + (i * 7919) % spread;
                let bytes: Vec<u8> =
                    (0..len).map(|k| (i + k) as u8).chain((i as u32).to_le_bytes()).collect();
                Record::new(bytes, Origin::new(files[i % 2], i as u64))
            })
            .collect()
    }

    /// `records` cut into batches of varying sizes (with empty ones), as a reader makes.
    fn batches(records: &[Record], cut: usize) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        let mut rest = records;
        let mut k = 0;
        while !rest.is_empty() {
            let take = ((k * 31) % (cut + 1)).min(rest.len());
            out.push(RecordBatch::from(rest[..take].to_vec()));
            rest = &rest[take..];
            k += 1;
        }
        out
    }

    /// Records and origins of a pass, batch by batch.
    fn rows(batches: Vec<RecordBatch>) -> Vec<Vec<(Vec<u8>, Origin)>> {
        batches
            .into_iter()
            .map(|b| (0..b.len()).map(|i| (b.get(i).unwrap().to_vec(), b.origin(i))).collect())
            .collect()
    }

    fn pass<D: Dataset<Item = RecordBatch>>(ds: &D, epoch: u64, skip: u64) -> Vec<RecordBatch> {
        let ctx = Ctx::new(&Default::default()).with_epoch(epoch);
        let mut it = ds.iter_from(&ctx, skip).unwrap();
        std::iter::from_fn(|| it.next().unwrap()).collect()
    }

    #[test]
    fn the_order_is_shuffles_then_chunks_for_many_seeds_and_sizes() {
        for (count, spread, cut) in [(0, 10, 3), (1, 10, 3), (50, 10, 7), (1000, 300, 64), (5000, 40, 700)] {
            let recs = records(count, spread);
            for buffer in [1, 2, 7, 100, 4096, 10_000] {
                for n in [1, 3, 64, 1000] {
                    for seed in [0, 1, 42] {
                        for drop in [false, true] {
                            let reference = from_vec(recs.clone())
                                .shuffle(buffer, seed)
                                .chunks(n, drop)
                                .map(RecordBatch::from);
                            let ours = shuffle_batches(from_vec(batches(&recs, cut)), buffer, seed, n, drop);
                            for epoch in [0, 3] {
                                let want = rows(pass(&reference, epoch, 0));
                                assert_eq!(
                                    rows(pass(&ours, epoch, 0)),
                                    want,
                                    "{count} records, buffer {buffer}, n {n}, seed {seed}, drop {drop}, epoch {epoch}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn epochs_differ_unless_told_not_to_and_resume_mid_epoch_is_exact() {
        let recs = records(3000, 50);
        let ds = shuffle_batches(from_vec(batches(&recs, 300)), 500, 7, 100, false);
        let (e0, e1) = (rows(pass(&ds, 0, 0)), rows(pass(&ds, 1, 0)));
        assert_ne!(e0, e1);
        let mut all: Vec<_> = e0.iter().flatten().map(|(r, _)| r.clone()).collect();
        all.sort();
        let mut want: Vec<_> = recs.iter().map(|r| r.to_vec()).collect();
        want.sort();
        assert_eq!(all, want, "every record once");
        for skip in [1, 13, 29, 30] {
            assert_eq!(
                rows(pass(&ds, 1, skip)),
                e1[skip as usize..].to_vec(),
                "resumed after {skip} batches"
            );
        }
        let fixed =
            shuffle_batches(from_vec(batches(&recs, 300)), 500, 7, 100, false).reshuffle_each_epoch(false);
        assert_eq!(rows(pass(&fixed, 5, 0)), e0);
    }

    #[test]
    fn the_slab_stays_within_a_quarter_of_garbage_and_a_batch_size_of_zero_is_an_error() {
        let mut slab = Slab::default();
        let small = vec![1u8; 100];
        for _ in 0..10_000 {
            slab.push(&small, Origin::UNKNOWN, 10_000);
        }
        for k in 0..100_000 {
            let big = vec![2u8; 100 + k % 400];
            slab.put((k * 7) % 10_000, &big, Origin::UNKNOWN);
            let live: usize = slab.places.iter().map(|p| p.cap).sum();
            assert_eq!(slab.data.len(), live + slab.garbage);
            assert!(slab.garbage <= MIN_COMPACT_BYTES.max(live / 4), "garbage {} of {live}", slab.garbage);
        }
        let ds = shuffle_batches(from_vec(Vec::<RecordBatch>::new()), 10, 1, 0, false);
        assert!(ds.iter(&Ctx::new(&Default::default())).is_err());
    }
}
