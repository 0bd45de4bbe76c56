//! `take`, `skip` and `shard`: position-based selection. Their state is one counter
//! (plus, for `shard`, the element a round holds back, or the elements before the
//! worker's first position, kept for padding: see [`Remainder`]).

use super::reshard::{Redealt, RoundsRest};
pub use super::state::Remainder;
use super::state::{Deal, Layer, ShardOf};
use super::{Ctx, DataIter, Dataset, StagePosition};
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

/// Worker `index` of `num_shards`: elements `index`, `index + num_shards`,
/// `index + 2·num_shards`, … of the input, with the last partial round kept, dropped or
/// padded as its [`Remainder`] says.
///
/// A resumed pass with `keep` or `drop` starts its input where the position says, by
/// arithmetic (`keep`: `index + (c - 1)·num_shards + 1` inputs make the first `c` outputs;
/// `drop`: `c·num_shards`); with `pad` it pulls the elements before the position again
/// (it keeps the first ones for the padding). A saved state records the count it had
/// delivered and which shard it is, and a pass resumed from a resharded state deals only
/// what the ranks before had not taken ([`PipelineState::reshard`](super::PipelineState::reshard)).
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Shard<D> {
    input: D,
    num_shards: u64,
    index: u64,
    remainder: Remainder,
    /// The redeals of its last passes (a redealt pass's positions are not arithmetic).
    redealt: Redealt,
}

impl<D> Shard<D> {
    pub(crate) fn new(input: D, num_shards: u64, index: u64, remainder: Remainder) -> Result<Self> {
        if num_shards == 0 || index >= num_shards {
            return Err(Error::Invalid(format!(
                "shard index {index} out of range for {num_shards} shards (need 0 <= index < num_shards)"
            )));
        }
        Ok(Shard { input, num_shards, index, remainder, redealt: Redealt::default() })
    }

    /// The inputs consumed when `output` elements were delivered, when that is arithmetic
    /// (`keep`, `drop`).
    fn input_at(&self, output: u64) -> Option<u64> {
        let n = self.num_shards;
        match self.remainder {
            Remainder::Keep if output == 0 => Some(0),
            Remainder::Keep => {
                Some(self.index.saturating_add((output - 1).saturating_mul(n)).saturating_add(1))
            }
            Remainder::Drop => Some(output.saturating_mul(n)),
            Remainder::Pad => None,
        }
    }

    fn of(&self) -> ShardOf {
        ShardOf { shards: self.num_shards, index: self.index, deal: Deal::Rounds(self.remainder) }
    }
}

impl<D: Dataset> Dataset for Shard<D> {
    type Item = D::Item;
    type Iter = ShardIter<D::Iter, D::Item>;
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        // Its own position, if the state recorded one (taken, so that a filter below
        // takes its own next); the count is all it needs.
        let _ = ctx.take_stage_position(skip);
        let rest = ctx.redeal().map(RoundsRest::new).transpose()?;
        self.redealt.record(ctx);
        let at = if rest.is_none() { self.input_at(skip) } else { None };
        let mut it = ShardIter {
            input: match at {
                Some(at) => self.input.iter_from(ctx, at)?,
                None => self.input.iter(ctx)?,
            },
            num_shards: self.num_shards,
            index: self.index,
            remainder: self.remainder,
            pos: at.unwrap_or(0),
            held: None,
            first: Vec::new(),
            done: false,
            rest,
        };
        if at.is_none() {
            for _ in 0..skip {
                if it.next()?.is_none() {
                    break;
                }
            }
        }
        Ok(it)
    }

    /// Records its count and which shard it is; goes on below when its input position is
    /// arithmetic (`keep`, `drop`, a pass not redealt).
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        let input = if self.redealt.of(epoch).is_empty() { self.input_at(output) } else { None };
        found.push(StagePosition { output, input: input.unwrap_or(0), shard: Some(self.of()) });
        if let Some(input) = input {
            self.input.positions(epoch, input, found);
        }
    }

    fn redeal_of(&self, epoch: u64) -> Vec<Layer> {
        self.redealt.of(epoch)
    }
}

/// One pass of [`Shard`].
#[derive(Debug)]
pub struct ShardIter<I, T> {
    input: I,
    num_shards: u64,
    index: u64,
    remainder: Remainder,
    /// Position in the (redealt) input of the next element to read.
    pos: u64,
    /// `Drop`: this worker's element of the current round, until the round completes.
    held: Option<T>,
    /// `Pad`: the first `min(index, pos)` elements of the pass, the padding's sources.
    first: Vec<T>,
    /// `Drop`, `Pad`: the input has ended (and the padding, if any, was delivered).
    done: bool,
    /// A resharded pass: which input elements are left to deal (the others were taken
    /// before the reshard).
    rest: Option<RoundsRest>,
}

impl<I: DataIter> ShardIter<I, I::Item> {
    /// The next input element to deal: of the rest, in a redealt pass.
    #[inline]
    fn next_input(&mut self) -> Result<Option<I::Item>> {
        let Some(rest) = &mut self.rest else { return self.input.next() };
        while let Some(x) = self.input.next()? {
            if rest.admit() {
                return Ok(Some(x));
            }
        }
        Ok(None)
    }

    /// `Keep`: the next element at one of this worker's positions.
    #[inline]
    fn next_keep(&mut self) -> Result<Option<I::Item>> {
        loop {
            let Some(x) = self.next_input()? else { return Ok(None) };
            let mine = self.pos % self.num_shards == self.index;
            self.pos += 1;
            if mine {
                return Ok(Some(x));
            }
        }
    }

    /// `Drop`: this worker's element of a round, once the round's last element is read.
    fn next_drop(&mut self) -> Result<Option<I::Item>> {
        loop {
            let Some(x) = self.next_input()? else {
                // The round in progress, if any, is partial: its element is dropped.
                self.held = None;
                self.done = true;
                return Ok(None);
            };
            let slot = self.pos % self.num_shards;
            self.pos += 1;
            if slot == self.index {
                self.held = Some(x);
            }
            if slot == self.num_shards - 1
                && let Some(mine) = self.held.take()
            {
                return Ok(Some(mine));
            }
        }
    }

    /// `Pad`: this worker's elements as they come, then its padding element when the
    /// last round was partial and this worker's position in it is past the end.
    fn next_pad(&mut self) -> Result<Option<I::Item>> {
        loop {
            let Some(x) = self.next_input()? else {
                self.done = true;
                return Ok(self.padding());
            };
            let p = self.pos;
            self.pos += 1;
            if p < self.index {
                self.first.push(x);
            } else if p % self.num_shards == self.index {
                return Ok(Some(x));
            }
        }
    }

    /// At the end of a `Pad` pass of `N = pos` elements, with `q = floor(N / n)` full
    /// rounds and `r = N mod n` elements left: this worker's position in the partial
    /// round is `p = n·q + index`, past the end when `index >= r > 0`; its padding is the
    /// element at `p mod N`, which is `index - r` when `q >= 1` and `index mod r`
    /// otherwise, so always below `index`: one of `first`.
    fn padding(&mut self) -> Option<I::Item> {
        let mut first = std::mem::take(&mut self.first);
        let (n, len) = (self.num_shards, self.pos);
        let rest = len % n;
        if rest == 0 || self.index < rest {
            return None;
        }
        let source = usize::try_from((len - rest + self.index) % len).ok()?;
        (source < first.len()).then(|| first.swap_remove(source))
    }
}

impl<I: DataIter> DataIter for ShardIter<I, I::Item> {
    type Item = I::Item;
    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        match self.remainder {
            Remainder::Keep => self.next_keep(),
            _ if self.done => Ok(None),
            Remainder::Drop => self.next_drop(),
            Remainder::Pad => self.next_pad(),
        }
    }
}
