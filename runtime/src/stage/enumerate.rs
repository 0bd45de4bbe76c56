//! `enumerate`: tags each element with the pass's epoch and its position in the pass,
//! so a parallel stage after it can key per-element randomness by (seed, epoch, index)
//! and give the same result on any thread count (generated code puts it before a `map`
//! with random operations).

use super::{Ctx, DataIter, Dataset, Element};
use crate::error::Result;

/// An element with the epoch and position it came at.
#[derive(Debug, Clone, PartialEq)]
pub struct Indexed<T> {
    /// The pass (`Ctx::epoch`).
    pub epoch: u64,
    /// Position in the pass, from 0.
    pub index: u64,
    /// The element.
    pub value: T,
}

impl<T: Element> Element for Indexed<T> {
    const FLAT: bool = T::FLAT;
    fn byte_size(&self) -> usize {
        2 * size_of::<u64>() + self.value.byte_size()
    }
}

/// The `enumerate` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Enumerate<D> {
    input: D,
}

impl<D> Enumerate<D> {
    pub(crate) fn new(input: D) -> Self {
        Enumerate { input }
    }
}

impl<D: Dataset> Dataset for Enumerate<D> {
    type Item = Indexed<D::Item>;
    type Iter = EnumerateIter<D::Iter>;
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// The positions go on from `skip`.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        Ok(EnumerateIter { input: self.input.iter_from(ctx, skip)?, epoch: ctx.epoch(), next: skip })
    }
}

/// One pass of [`Enumerate`].
#[derive(Debug)]
pub struct EnumerateIter<I> {
    input: I,
    epoch: u64,
    next: u64,
}

impl<I: DataIter> DataIter for EnumerateIter<I> {
    type Item = Indexed<I::Item>;
    #[inline]
    fn next(&mut self) -> Result<Option<Self::Item>> {
        let Some(value) = self.input.next()? else { return Ok(None) };
        let index = self.next;
        self.next += 1;
        Ok(Some(Indexed { epoch: self.epoch, index, value }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::range;

    #[test]
    fn tags_positions_per_pass() {
        let ds = range(5..8).enumerate();
        let got: Vec<(u64, u64)> =
            ds.stream().unwrap().map(|x| x.unwrap()).map(|x| (x.index, x.value)).collect();
        assert_eq!(got, vec![(0, 5), (1, 6), (2, 7)]);
    }

    #[test]
    fn a_resumed_pass_goes_on_numbering_from_its_position() {
        // The `.pipe` stage `enumerate()` is this and a map adding `start` to `index`.
        let ds = range(5..12).map(|x| x * 10).num_parallel(2).enumerate();
        let ctx = Ctx::new(&Default::default()).with_epoch(3);
        let whole: Vec<(u64, u64, u64)> =
            ds.stream_in(&ctx).unwrap().map(|x| x.unwrap()).map(|x| (x.epoch, x.index, x.value)).collect();
        assert_eq!(whole, (0..7).map(|i| (3, i, (i + 5) * 10)).collect::<Vec<_>>());
        for k in 0..=8 {
            let rest: Vec<(u64, u64, u64)> = ds
                .stream_from(&ctx, k)
                .unwrap()
                .map(|x| x.unwrap())
                .map(|x| (x.epoch, x.index, x.value))
                .collect();
            assert_eq!(rest, whole.iter().skip(k as usize).copied().collect::<Vec<_>>(), "resumed at {k}");
        }
    }
}
