//! The sequential interleave: tf.data's loop over the open datasets, run on the
//! consumer's thread.

use std::sync::Arc;

use super::{Ctx, DataIter, InnerItem, InnerIter, InterleaveFn, StageStats, open_inner};
use crate::error::Result;
use crate::stage::Element;

pub(super) struct Seq<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    pub(super) input: I,
    pub(super) f: Arc<G>,
    pub(super) ctx: Ctx,
    pub(super) stats: Arc<StageStats>,
    pub(super) slots: Vec<Option<InnerIter<G, I::Item>>>,
    pub(super) block_length: usize,
    pub(super) cycle_index: usize,
    pub(super) block_index: usize,
    pub(super) num_open: usize,
    pub(super) end_of_input: bool,
}

impl<I, G> Seq<I, G>
where
    I: DataIter,
    G: InterleaveFn<I::Item>,
{
    pub(super) fn advance(&mut self) {
        self.block_index = 0;
        self.cycle_index = (self.cycle_index + 1) % self.slots.len();
    }

    pub(super) fn next(&mut self) -> Result<Option<InnerItem<G, I::Item>>> {
        while !self.end_of_input || self.num_open > 0 {
            let ci = self.cycle_index;
            if let Some(it) = &mut self.slots[ci] {
                match self.stats.time_busy(|| it.next())? {
                    Some(y) => {
                        self.stats.produced(y.byte_size());
                        self.block_index += 1;
                        if self.block_index == self.block_length {
                            self.advance();
                        }
                        return Ok(Some(y));
                    }
                    None => {
                        self.slots[ci] = None;
                        self.num_open -= 1;
                        self.advance();
                    }
                }
            } else if !self.end_of_input {
                match self.stats.time_input(|| self.input.next())? {
                    Some(x) => {
                        self.slots[ci] = Some(open_inner(&*self.f, x, &self.ctx, &self.stats)?);
                        self.num_open += 1;
                    }
                    None => self.end_of_input = true,
                }
            } else {
                self.advance();
            }
        }
        Ok(None)
    }
}
