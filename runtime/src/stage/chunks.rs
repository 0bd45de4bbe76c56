//! `chunks`: groups consecutive elements into a `Vec` without copying them: a batch of
//! whole elements, for elements that are not columns yet (serialized records before a
//! batch-level parse, as tf.data batches strings before `parse_example`).

use std::sync::Arc;
use std::time::Instant;

use super::{Ctx, DataIter, Dataset, Element, StageStats};
use crate::error::{Error, Result};

/// The `chunks` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Chunks<D> {
    input: D,
    n: usize,
    drop_remainder: bool,
    stats: Arc<StageStats>,
}

impl<D> Chunks<D> {
    pub(crate) fn new(input: D, n: usize, drop_remainder: bool) -> Self {
        Chunks { input, n, drop_remainder, stats: Arc::new(StageStats::new("chunks")) }
    }
}

impl<D: Dataset> Dataset for Chunks<D> {
    type Item = Vec<D::Item>;
    type Iter = ChunksIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// `output` chunks are `output × n` elements.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<super::StagePosition>) {
        self.input.positions(epoch, output.saturating_mul(self.n as u64), found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<super::Layer> {
        self.input.redeal_of(epoch)
    }

    /// `skip` chunks are `skip × n` elements.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        if self.n == 0 {
            return Err(Error::Invalid("chunks: the chunk size must be at least 1".into()));
        }
        ctx.register(&self.stats);
        Ok(ChunksIter {
            input: self.input.iter_from(ctx, skip.saturating_mul(self.n as u64))?,
            n: self.n,
            drop_remainder: self.drop_remainder,
            done: false,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`Chunks`].
#[derive(Debug)]
pub struct ChunksIter<I> {
    input: I,
    n: usize,
    drop_remainder: bool,
    done: bool,
    stats: Arc<StageStats>,
}

impl<I: DataIter> DataIter for ChunksIter<I> {
    type Item = Vec<I::Item>;

    fn next(&mut self) -> Result<Option<Vec<I::Item>>> {
        if self.done {
            return Ok(None);
        }
        let start = Instant::now();
        let mut chunk = Vec::with_capacity(self.n);
        while chunk.len() < self.n {
            match self.input.next()? {
                Some(x) => chunk.push(x),
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        self.stats.add_wait_input(start.elapsed());
        if chunk.is_empty() || (self.drop_remainder && chunk.len() < self.n) {
            return Ok(None);
        }
        self.stats.produced(chunk.byte_size());
        Ok(Some(chunk))
    }
}
