//! `map(on_error: skip)` (tf.data's `ignore_errors` after a `map`): a map function whose
//! failures on some elements drop those elements, counted in the map stage's statistics.
//!
//! The function returns `Ok(Some(y))` for an element it keeps, `Ok(None)` for one a fused
//! filter rejects, and an error wrapped by [`skippable`] for one it failed on: that one
//! becomes `None` and is counted ([`StageStats::skipped_error`], with its message). Any
//! other error (a fused filter's predicate, an input error) still fails the pass. The
//! stage is a plain [`Map`](super::Map) of `Option`s followed by
//! [`somes`](super::Dataset::somes), so:
//!
//! - the output is the sequential map's for any number of workers (`deterministic`);
//! - resume pulls: [`Somes`](super::Somes) has no `iter_from` of its own, so starting
//!   after `k` elements maps the input until `k` kept elements have come out, exactly
//!   where the uninterrupted pass was (the map's own fast-forward, which skips inputs
//!   without computing, never runs under it).

use std::fmt;

use super::{Element, MapFn, StageStats};
use crate::error::BoxError;

/// An error a `map(on_error: skip)` function drops its element for (see [`skippable`]).
#[derive(Debug)]
pub struct Skippable(pub BoxError);

impl fmt::Display for Skippable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Skippable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Marks `e` as the failure of the map's own operations: a [`SkipErrors`] function
/// drops the element and counts it instead of failing.
pub fn skippable(e: impl Into<BoxError>) -> BoxError {
    Box::new(Skippable(e.into()))
}

/// A map function that drops and counts the elements it failed on: see the module doc
/// and [`Dataset::try_map_skipping`](super::Dataset::try_map_skipping).
#[derive(Debug)]
pub struct SkipErrors<F>(pub F);

impl<T, U, F> MapFn<T> for SkipErrors<F>
where
    F: Fn(T) -> Result<Option<U>, BoxError> + Send + Sync + 'static,
    U: Element,
{
    type Output = Option<U>;

    #[inline]
    fn call(&self, x: T) -> Result<Option<U>, BoxError> {
        match (self.0)(x) {
            Err(e) if e.is::<Skippable>() => Ok(None),
            r => r,
        }
    }

    #[inline]
    fn call_in(&self, x: T, stats: &StageStats) -> Result<Option<U>, BoxError> {
        match (self.0)(x) {
            Err(e) if e.is::<Skippable>() => {
                stats.skipped_error(&e);
                Ok(None)
            }
            r => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Ctx, Dataset, Parallelism, RuntimeOptions, range};

    /// Fails on multiples of 3 (skippable) and on 100 (not).
    fn f(x: u64) -> Result<Option<u64>, BoxError> {
        match x {
            100 => Err("fatal".into()),
            x if x % 3 == 0 => Err(skippable(format!("bad {x}"))),
            x if x % 5 == 0 => Ok(None),
            x => Ok(Some(x * 10)),
        }
    }

    fn expected(n: u64) -> Vec<u64> {
        (0..n).filter(|x| x % 3 != 0 && x % 5 != 0).map(|x| x * 10).collect()
    }

    #[test]
    fn drops_and_counts_the_failed_elements_for_any_thread_count() {
        for par in [Parallelism::Fixed(1), Parallelism::Fixed(4), Parallelism::Auto] {
            let ds = range(0..60).try_map_skipping(f).num_parallel(par).named("map").somes();
            let ctx = Ctx::new(&RuntimeOptions::default());
            let got: Vec<u64> = ds.stream_in(&ctx).unwrap().map(|x| x.unwrap()).collect();
            assert_eq!(got, expected(60), "{par:?}");
            let stats = ctx.report();
            let map = stats.stages.iter().find(|s| s.name == "map").unwrap();
            assert_eq!(map.skipped_errors, 20, "{par:?}");
            assert_eq!(map.first_skipped.len(), 3);
            if par == Parallelism::Fixed(1) {
                assert_eq!(map.first_skipped, ["bad 0", "bad 3", "bad 6"]);
            }
        }
    }

    #[test]
    fn other_errors_fail() {
        let ds = range(95..110).try_map_skipping(f).num_parallel(4).somes();
        let got: Vec<_> = ds.stream().unwrap().collect();
        assert_eq!(got.iter().filter_map(|x| x.as_ref().ok()).copied().collect::<Vec<_>>(), [970, 980]);
        let e = got.last().unwrap().as_ref().unwrap_err().to_string();
        assert!(e.contains("fatal"), "{e}");
    }

    #[test]
    fn a_resumed_pass_is_the_rest_of_the_pass() {
        let full = expected(60);
        for par in [1, 3] {
            for k in [0, 1, 7, full.len() as u64] {
                let ds = range(0..60).try_map_skipping(f).num_parallel(par).somes();
                let ctx = Ctx::new(&RuntimeOptions::default());
                let got: Vec<u64> = ds.stream_from(&ctx, k).unwrap().map(|x| x.unwrap()).collect();
                assert_eq!(got, full[k as usize..], "par {par}, from {k}");
            }
        }
    }
}
