//! Type erasure for the few places that need it, and the small adapters generated code
//! chains between stages:
//!
//! - [`Boxed`]: a dataset behind a box, so datasets of different types with one element
//!   type can go in one `Vec` (`sample_from` of generated pipelines), and so that a long
//!   chain of stages stays a shallow type (generated code boxes every 32nd stage: rustc's
//!   trait solver overflows on types nested ~128 deep). A pass pays one virtual call per
//!   element; it fast-forwards (`iter_from`) and reports positions as what it boxes.
//! - [`Somes`]: the `Some` elements of a dataset of `Option`s (a fused `map` + `filter`
//!   whose workers return `None` for rejected elements). Like `filter`, it records its
//!   input positions ([`PassPositions`]) so that a resume seeks past it.

use std::sync::Arc;

use super::positions::{PassPositions, Positions};
use super::{Ctx, DataIter, Dataset, Element, Layer, StagePosition};
use crate::error::Result;

/// A [`Dataset`] with its iterator type erased.
pub trait DynDataset<T>: Send + Sync + 'static {
    /// Starts a pass.
    fn iter_dyn(&self, ctx: &Ctx) -> Result<Box<dyn DataIter<Item = T>>>;
    /// Starts a pass after its first `skip` elements ([`Dataset::iter_from`]).
    fn iter_from_dyn(&self, ctx: &Ctx, skip: u64) -> Result<Box<dyn DataIter<Item = T>>>;
    /// [`Dataset::positions`].
    fn positions_dyn(&self, epoch: u64, output: u64, found: &mut Vec<StagePosition>);
    /// [`Dataset::redeal_of`].
    fn redeal_of_dyn(&self, epoch: u64) -> Vec<Layer>;
}

impl<D: Dataset> DynDataset<D::Item> for D {
    fn iter_dyn(&self, ctx: &Ctx) -> Result<Box<dyn DataIter<Item = D::Item>>> {
        Ok(Box::new(self.iter(ctx)?))
    }
    fn iter_from_dyn(&self, ctx: &Ctx, skip: u64) -> Result<Box<dyn DataIter<Item = D::Item>>> {
        Ok(Box::new(self.iter_from(ctx, skip)?))
    }
    fn positions_dyn(&self, epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        self.positions(epoch, output, found);
    }
    fn redeal_of_dyn(&self, epoch: u64) -> Vec<Layer> {
        self.redeal_of(epoch)
    }
}

impl<T: Element> DataIter for Box<dyn DataIter<Item = T>> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Result<Option<T>> {
        (**self).next()
    }
}

/// A boxed dataset of `T`: see [`Dataset::boxed`].
pub struct Boxed<T> {
    inner: Box<dyn DynDataset<T>>,
}

impl<T> std::fmt::Debug for Boxed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Boxed")
    }
}

impl<T: Element> Boxed<T> {
    pub(crate) fn new<D: Dataset<Item = T>>(d: D) -> Self {
        Boxed { inner: Box::new(d) }
    }
}

impl<T: Element> Dataset for Boxed<T> {
    type Item = T;
    type Iter = Box<dyn DataIter<Item = T>>;
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.inner.iter_dyn(ctx)
    }
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        self.inner.iter_from_dyn(ctx, skip)
    }
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        self.inner.positions_dyn(epoch, output, found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<Layer> {
        self.inner.redeal_of_dyn(epoch)
    }
}

/// The `Some` elements of a dataset of `Option`s: see [`Dataset::somes`].
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Somes<D> {
    input: D,
    passes: Arc<PassPositions>,
}

impl<D> Somes<D> {
    pub(crate) fn new(input: D) -> Self {
        Somes { input, passes: Arc::default() }
    }
}

impl<T: Element, D: Dataset<Item = Option<T>>> Dataset for Somes<D> {
    type Item = T;
    type Iter = SomesIter<D::Iter>;
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// Records its input position at `output` and goes on below with it.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        self.passes.descend(&self.input, epoch, output, found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<Layer> {
        self.input.redeal_of(epoch)
    }

    /// From the input position a resumed context holds for it; otherwise by pulling the
    /// elements before `skip` again.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        if let Some(input) = ctx.take_stage_position(skip) {
            return Ok(SomesIter {
                input: self.input.iter_from(ctx, input)?,
                positions: self.passes.record(ctx, skip, input),
                output: skip,
                consumed: input,
            });
        }
        let mut it = SomesIter {
            input: self.input.iter(ctx)?,
            positions: self.passes.record(ctx, 0, 0),
            output: 0,
            consumed: 0,
        };
        for _ in 0..skip {
            if it.next()?.is_none() {
                break;
            }
        }
        Ok(it)
    }
}

/// One pass of [`Somes`].
#[derive(Debug)]
pub struct SomesIter<I> {
    input: I,
    positions: Option<Arc<Positions>>,
    /// Elements delivered and inputs consumed so far in the pass.
    output: u64,
    consumed: u64,
}

impl<T: Element, I: DataIter<Item = Option<T>>> DataIter for SomesIter<I> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Result<Option<T>> {
        loop {
            match self.input.next()? {
                None => {
                    if let Some(p) = &self.positions {
                        p.finish(self.output, self.consumed);
                    }
                    return Ok(None);
                }
                Some(Some(x)) => {
                    self.consumed += 1;
                    self.output += 1;
                    if let Some(p) = &self.positions {
                        p.set(self.output, self.consumed);
                    }
                    return Ok(Some(x));
                }
                Some(None) => self.consumed += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::range;

    #[test]
    fn boxed_and_somes() {
        let a = range(0..4).map(|x| (x % 2 == 0).then_some(x)).somes().boxed();
        let got: Vec<u64> = a.stream().unwrap().map(|x| x.unwrap()).collect();
        assert_eq!(got, vec![0, 2]);
    }
}
