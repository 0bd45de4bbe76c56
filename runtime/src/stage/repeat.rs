//! `repeat`: several passes over the input, one epoch each.

use super::{Ctx, DataIter, Dataset};
use crate::error::Result;

/// The input repeated `count` times (`None`: forever).
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Repeat<D> {
    input: std::sync::Arc<D>,
    count: Option<u64>,
}

impl<D> Repeat<D> {
    pub(crate) fn new(input: D, count: Option<u64>) -> Self {
        Repeat { input: std::sync::Arc::new(input), count }
    }
}

impl<D: Dataset> Dataset for Repeat<D> {
    type Item = D::Item;
    type Iter = RepeatIter<D>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        let first_epoch = ctx.epoch() * self.count.unwrap_or(1);
        let current =
            if self.count == Some(0) { None } else { Some(self.input.iter(&ctx.with_epoch(first_epoch))?) };
        Ok(RepeatIter {
            input: self.input.clone(),
            ctx: ctx.clone(),
            count: self.count,
            first_epoch,
            pass: 0,
            current,
            produced_this_pass: false,
        })
    }
}

/// One pass of [`Repeat`]: the input's passes in turn.
#[derive(Debug)]
pub struct RepeatIter<D: Dataset> {
    input: std::sync::Arc<D>,
    ctx: Ctx,
    count: Option<u64>,
    first_epoch: u64,
    /// Index of the current inner pass.
    pass: u64,
    current: Option<D::Iter>,
    produced_this_pass: bool,
}

impl<D: Dataset> DataIter for RepeatIter<D> {
    type Item = D::Item;

    fn next(&mut self) -> Result<Option<D::Item>> {
        loop {
            let Some(it) = self.current.as_mut() else { return Ok(None) };
            if let Some(x) = it.next()? {
                self.produced_this_pass = true;
                return Ok(Some(x));
            }
            self.current = None;
            // An empty pass ends `repeat` even when it is endless: no busy loop.
            if !self.produced_this_pass {
                return Ok(None);
            }
            self.pass += 1;
            if self.count.is_some_and(|c| self.pass >= c) {
                return Ok(None);
            }
            self.produced_this_pass = false;
            self.current = Some(self.input.iter(&self.ctx.with_epoch(self.first_epoch + self.pass))?);
        }
    }
}
