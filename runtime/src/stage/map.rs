//! `map`: applies a user function to every element, on the consumer's thread or on
//! `num_parallel` worker threads, in order (`deterministic`, the default) or as results
//! complete.

use std::sync::Arc;

use super::{Ctx, DataIter, Dataset, Element, Fallible, Infallible, Parallelism, StageStats, call_user};
use crate::error::{BoxError, Error, Result};

/// A function of `map`.
pub trait MapFn<T>: Send + Sync + 'static {
    /// The output element.
    type Output: Element;
    /// Transforms one element.
    fn call(&self, x: T) -> std::result::Result<Self::Output, BoxError>;
}

impl<T, U, F> MapFn<T> for Infallible<F>
where
    F: Fn(T) -> U + Send + Sync + 'static,
    U: Element,
{
    type Output = U;
    #[inline]
    fn call(&self, x: T) -> std::result::Result<U, BoxError> {
        Ok((self.0)(x))
    }
}

impl<T, U, E, F> MapFn<T> for Fallible<F>
where
    F: Fn(T) -> std::result::Result<U, E> + Send + Sync + 'static,
    E: Into<BoxError>,
    U: Element,
{
    type Output = U;
    #[inline]
    fn call(&self, x: T) -> std::result::Result<U, BoxError> {
        (self.0)(x).map_err(Into::into)
    }
}

/// The `map` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Map<D, F> {
    input: D,
    f: Arc<F>,
    parallelism: Parallelism,
    deterministic: bool,
    stats: Arc<StageStats>,
}

impl<D, F> Map<D, F> {
    pub(crate) fn new(input: D, f: F, name: &str) -> Self {
        Map {
            input,
            f: Arc::new(f),
            parallelism: Parallelism::Fixed(1),
            deterministic: true,
            stats: Arc::new(StageStats::new(name)),
        }
    }

    /// Worker threads: `Fixed(1)` (the default) runs on the consumer's thread.
    pub fn num_parallel(mut self, p: impl Into<Parallelism>) -> Self {
        self.parallelism = p.into();
        self
    }

    /// Keep input order (true, the default) or deliver results as they complete.
    pub fn deterministic(mut self, deterministic: bool) -> Self {
        self.deterministic = deterministic;
        self
    }

    /// Names the stage in statistics and errors.
    pub fn named(mut self, name: &str) -> Self {
        self.stats = Arc::new(StageStats::new(name));
        self
    }
}

impl<D: Dataset, F: MapFn<D::Item>> Dataset for Map<D, F> {
    type Item = F::Output;
    type Iter = MapIter<D::Iter, F>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        Ok(MapIter { input: self.input.iter(ctx)?, f: self.f.clone(), stats: self.stats.clone() })
    }
}

/// One pass of [`Map`].
#[derive(Debug)]
pub struct MapIter<I, F> {
    input: I,
    f: Arc<F>,
    stats: Arc<StageStats>,
}

/// Applies `f` to `x` as stage `stats.name()`: user errors and panics become errors naming
/// the stage; busy time and output are counted.
#[inline]
pub(crate) fn apply<T, F: MapFn<T>>(f: &F, x: T, stats: &StageStats) -> Result<F::Output> {
    let y = stats.time_busy(|| {
        call_user(stats.name(), || {
            f.call(x).map_err(|source| Error::Stage { stage: stats.name().to_string(), source })
        })
    })?;
    stats.produced(y.byte_size());
    Ok(y)
}

impl<I: DataIter, F: MapFn<I::Item>> DataIter for MapIter<I, F> {
    type Item = F::Output;

    #[inline]
    fn next(&mut self) -> Result<Option<F::Output>> {
        match self.input.next()? {
            Some(x) => apply(&*self.f, x, &self.stats).map(Some),
            None => Ok(None),
        }
    }
}
