//! `filter`: keeps the elements a predicate accepts. Also the wrappers that adapt plain
//! and fallible closures to the stage function traits.

use std::sync::Arc;

use super::{Ctx, DataIter, Dataset, StageStats, call_user};
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
}

impl<D, P> Filter<D, P> {
    pub(crate) fn new(input: D, p: P) -> Self {
        Filter { input, p: Arc::new(p), stats: Arc::new(StageStats::new("filter")) }
    }
}

impl<D: Dataset, P: FilterFn<D::Item>> Dataset for Filter<D, P> {
    type Item = D::Item;
    type Iter = FilterIter<D::Iter, P>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        Ok(FilterIter { input: self.input.iter(ctx)?, p: self.p.clone(), stats: self.stats.clone() })
    }
}

/// One pass of [`Filter`].
#[derive(Debug)]
pub struct FilterIter<I, P> {
    input: I,
    p: Arc<P>,
    stats: Arc<StageStats>,
}

impl<I: DataIter, P: FilterFn<I::Item>> DataIter for FilterIter<I, P> {
    type Item = I::Item;

    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        while let Some(x) = self.input.next()? {
            let keep = call_user(self.stats.name(), || {
                self.p
                    .test(&x)
                    .map_err(|source| Error::Stage { stage: self.stats.name().to_string(), source })
            })?;
            if keep {
                self.stats.produced(0);
                return Ok(Some(x));
            }
        }
        Ok(None)
    }
}
