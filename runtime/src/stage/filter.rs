//! `filter`: keeps the elements a predicate accepts. Also the wrappers that adapt plain
//! and fallible closures to the stage function traits.
//!
//! How many inputs make up a filter's first `k` outputs depends on their values: each
//! pass records its input positions ([`PassPositions`]) so that a saved state holds them
//! and a resume seeks its input there instead of testing every element before it again.

use std::sync::Arc;

use super::positions::{PassPositions, Positions};
use super::{Ctx, DataIter, Dataset, StagePosition, StageStats, call_user};
use crate::error::{BoxError, Error, Result};

/// Wraps a closure that cannot fail.
#[derive(Debug, Clone, Copy)]
pub struct Infallible<F>(pub F);

/// Wraps a closure that returns `Result<_, E>` with `E: Into<BoxError>`.
#[derive(Debug, Clone, Copy)]
pub struct Fallible<F>(pub F);

/// A predicate of `filter`.
pub trait FilterFn<T>: Send + Sync + 'static {
    /// True to keep `x`.
    fn test(&self, x: &T) -> std::result::Result<bool, BoxError>;
}

impl<T, P> FilterFn<T> for Infallible<P>
where
    P: Fn(&T) -> bool + Send + Sync + 'static,
{
    #[inline]
    fn test(&self, x: &T) -> std::result::Result<bool, BoxError> {
        Ok((self.0)(x))
    }
}

impl<T, P, E> FilterFn<T> for Fallible<P>
where
    P: Fn(&T) -> std::result::Result<bool, E> + Send + Sync + 'static,
    E: Into<BoxError>,
{
    #[inline]
    fn test(&self, x: &T) -> std::result::Result<bool, BoxError> {
        (self.0)(x).map_err(Into::into)
    }
}

/// The `filter` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Filter<D, P> {
    input: D,
    p: Arc<P>,
    stats: Arc<StageStats>,
    passes: Arc<PassPositions>,
}

impl<D, P> Filter<D, P> {
    pub(crate) fn new(input: D, p: P) -> Self {
        Filter { input, p: Arc::new(p), stats: Arc::new(StageStats::new("filter")), passes: Arc::default() }
    }
}

impl<D: Dataset, P: FilterFn<D::Item>> Dataset for Filter<D, P> {
    type Item = D::Item;
    type Iter = FilterIter<D::Iter, P>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// Records its input position at `output` and goes on below with it.
    fn positions(&self, epoch: u64, output: u64, found: &mut Vec<StagePosition>) {
        self.passes.descend(&self.input, epoch, output, found);
    }

    fn redeal_of(&self, epoch: u64) -> Vec<super::Layer> {
        self.input.redeal_of(epoch)
    }

    /// From the input position a resumed context holds for it; otherwise by testing the
    /// elements before `skip` again.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        if let Some(input) = ctx.take_stage_position(skip) {
            return Ok(FilterIter {
                input: self.input.iter_from(ctx, input)?,
                p: self.p.clone(),
                stats: self.stats.clone(),
                positions: self.passes.record(ctx, skip, input),
                output: skip,
                consumed: input,
            });
        }
        let mut it = FilterIter {
            input: self.input.iter(ctx)?,
            p: self.p.clone(),
            stats: self.stats.clone(),
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

/// One pass of [`Filter`].
#[derive(Debug)]
pub struct FilterIter<I, P> {
    input: I,
    p: Arc<P>,
    stats: Arc<StageStats>,
    positions: Option<Arc<Positions>>,
    /// Elements delivered and inputs consumed so far in the pass.
    output: u64,
    consumed: u64,
}

impl<I: DataIter, P: FilterFn<I::Item>> DataIter for FilterIter<I, P> {
    type Item = I::Item;

    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        while let Some(x) = self.input.next()? {
            self.consumed += 1;
            let keep = call_user(self.stats.name(), || {
                self.p
                    .test(&x)
                    .map_err(|source| Error::Stage { stage: self.stats.name().to_string(), source })
            })?;
            if keep {
                self.output += 1;
                if let Some(p) = &self.positions {
                    p.set(self.output, self.consumed);
                }
                self.stats.produced(0);
                return Ok(Some(x));
            }
        }
        if let Some(p) = &self.positions {
            p.finish(self.output, self.consumed);
        }
        Ok(None)
    }
}
