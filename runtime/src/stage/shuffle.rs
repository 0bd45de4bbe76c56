//! `shuffle`: a uniform random pick from a buffer of `buffer_size` elements, refilled
//! from the input (tf.data's algorithm). The draws come from Philox keyed by the seed and
//! the epoch, in element order, so the output depends on the seed and the input order
//! only; with `reshuffle_each_epoch(false)` every epoch uses the epoch-0 order.

use std::sync::Arc;

use super::{Ctx, DataIter, Dataset, StageStats};
use crate::error::Result;
use crate::rng::Philox;

/// Distinguishes shuffle's random streams from those of other stages using the same seed.
pub(crate) const STAGE_TAG: u64 = 0x5348_5546 << 32; // "SHUF"

/// The `shuffle` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Shuffle<D> {
    input: D,
    buffer_size: usize,
    seed: u64,
    reshuffle: bool,
    stats: Arc<StageStats>,
}

impl<D> Shuffle<D> {
    pub(crate) fn new(input: D, buffer_size: usize, seed: u64) -> Self {
        Shuffle {
            input,
            buffer_size: buffer_size.max(1),
            seed,
            reshuffle: true,
            stats: Arc::new(StageStats::new("shuffle")),
        }
    }

    /// Whether each epoch gets a new order (default true).
    pub fn reshuffle_each_epoch(mut self, reshuffle: bool) -> Self {
        self.reshuffle = reshuffle;
        self
    }
}

impl<D: Dataset> Dataset for Shuffle<D> {
    type Item = D::Item;
    type Iter = ShuffleIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        let epoch = if self.reshuffle { ctx.epoch() } else { 0 };
        Ok(ShuffleIter {
            input: Some(self.input.iter(ctx)?),
            buffer: Vec::with_capacity(self.buffer_size.min(1 << 20)),
            capacity: self.buffer_size,
            rng: Philox::new(self.seed, STAGE_TAG ^ epoch),
            emitted: 0,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`Shuffle`]. Its state is the buffer, the input's position and the
/// generator's position.
#[derive(Debug)]
pub struct ShuffleIter<I: DataIter> {
    input: Option<I>,
    buffer: Vec<I::Item>,
    capacity: usize,
    rng: Philox,
    emitted: u64,
    stats: Arc<StageStats>,
}

impl<I: DataIter> ShuffleIter<I> {
    fn pull(&mut self) -> Result<Option<I::Item>> {
        let Some(input) = self.input.as_mut() else { return Ok(None) };
        let x = input.next()?;
        if x.is_none() {
            self.input = None;
        }
        Ok(x)
    }
}

impl<I: DataIter> DataIter for ShuffleIter<I> {
    type Item = I::Item;

    fn next(&mut self) -> Result<Option<I::Item>> {
        while self.buffer.len() < self.capacity {
            match self.pull()? {
                Some(x) => self.buffer.push(x),
                None => break,
            }
        }
        if self.buffer.is_empty() {
            return Ok(None);
        }
        let j = (self.rng.next_u64() % self.buffer.len() as u64) as usize;
        let out = match self.pull()? {
            Some(x) => std::mem::replace(&mut self.buffer[j], x),
            None => self.buffer.swap_remove(j),
        };
        self.stats.produced(0);
        self.emitted += 1;
        if self.emitted.is_multiple_of(1024) {
            self.stats.sample_queue(self.buffer.len(), self.capacity);
        }
        Ok(Some(out))
    }
}
