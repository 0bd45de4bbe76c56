//! `take`, `skip` and `shard`: position-based selection. Their state is one counter.

use super::{Ctx, DataIter, Dataset};
use crate::error::{Error, Result};

/// The first `n` elements.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Take<D> {
    input: D,
    n: u64,
}

impl<D> Take<D> {
    pub(crate) fn new(input: D, n: u64) -> Self {
        Take { input, n }
    }
}

impl<D: Dataset> Dataset for Take<D> {
    type Item = D::Item;
    type Iter = TakeIter<D::Iter>;
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        let skip = skip.min(self.n);
        Ok(TakeIter { input: self.input.iter_from(ctx, skip)?, left: self.n - skip })
    }
}

/// One pass of [`Take`].
#[derive(Debug)]
pub struct TakeIter<I> {
    input: I,
    left: u64,
}

impl<I: DataIter> DataIter for TakeIter<I> {
    type Item = I::Item;
    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        self.input.next()
    }
}

/// All but the first `n` elements.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Skip<D> {
    input: D,
    n: u64,
}

impl<D> Skip<D> {
    pub(crate) fn new(input: D, n: u64) -> Self {
        Skip { input, n }
    }
}

impl<D: Dataset> Dataset for Skip<D> {
    type Item = D::Item;
    type Iter = SkipIter<D::Iter>;
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        Ok(SkipIter { input: self.input.iter_from(ctx, self.n.saturating_add(skip))?, to_skip: 0 })
    }
}

/// One pass of [`Skip`].
#[derive(Debug)]
pub struct SkipIter<I> {
    input: I,
    to_skip: u64,
}

impl<I: DataIter> DataIter for SkipIter<I> {
    type Item = I::Item;
    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        while self.to_skip > 0 {
            self.to_skip -= 1;
            if self.input.next()?.is_none() {
                self.to_skip = 0;
                return Ok(None);
            }
        }
        self.input.next()
    }
}

/// Elements `index`, `index + num_shards`, `index + 2·num_shards`, … of the input.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Shard<D> {
    input: D,
    num_shards: u64,
    index: u64,
}

impl<D> Shard<D> {
    pub(crate) fn new(input: D, num_shards: u64, index: u64) -> Result<Self> {
        if num_shards == 0 || index >= num_shards {
            return Err(Error::Invalid(format!(
                "shard index {index} out of range for {num_shards} shards (need 0 <= index < num_shards)"
            )));
        }
        Ok(Shard { input, num_shards, index })
    }
}

impl<D: Dataset> Dataset for Shard<D> {
    type Item = D::Item;
    type Iter = ShardIter<D::Iter>;
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        Ok(ShardIter { input: self.input.iter(ctx)?, num_shards: self.num_shards, index: self.index, pos: 0 })
    }
}

/// One pass of [`Shard`].
#[derive(Debug)]
pub struct ShardIter<I> {
    input: I,
    num_shards: u64,
    index: u64,
    /// Position in the input of the next element to read.
    pos: u64,
}

impl<I: DataIter> DataIter for ShardIter<I> {
    type Item = I::Item;
    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        loop {
            let Some(x) = self.input.next()? else { return Ok(None) };
            let mine = self.pos % self.num_shards == self.index;
            self.pos += 1;
            if mine {
                return Ok(Some(x));
            }
        }
    }
}
