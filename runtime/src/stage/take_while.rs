//! `take_while`: the elements up to the first one a predicate rejects, where the pass
//! ends (tf.data's `take_while`). The predicate is a [`FilterFn`], as `filter`'s.

use std::sync::Arc;

use super::{Ctx, DataIter, Dataset, Fallible, FilterFn, StageStats, call_user};
use crate::error::{BoxError, Error, Result};

/// The elements of `input` while the fallible predicate `p` holds; an `Err` reaches the
/// consumer as [`Error::Stage`] naming `take_while`.
pub fn take_while<D, P, E>(input: D, p: P) -> TakeWhile<D, Fallible<P>>
where
    D: Dataset,
    P: Fn(&D::Item) -> std::result::Result<bool, E> + Send + Sync + 'static,
    E: Into<BoxError>,
{
    TakeWhile { input, p: Arc::new(Fallible(p)), stats: Arc::new(StageStats::new("take_while")) }
}

/// The `take_while` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct TakeWhile<D, P> {
    input: D,
    p: Arc<P>,
    stats: Arc<StageStats>,
}

impl<D: Dataset, P: FilterFn<D::Item>> Dataset for TakeWhile<D, P> {
    type Item = D::Item;
    type Iter = TakeWhileIter<D::Iter, P>;

    // `iter_from` pulls (the default): whether the pass ended before position `skip`
    // takes the predicate of every element before it.
    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        Ok(TakeWhileIter { input: Some(self.input.iter(ctx)?), p: self.p.clone(), stats: self.stats.clone() })
    }
}

/// One pass of [`TakeWhile`].
#[derive(Debug)]
pub struct TakeWhileIter<I, P> {
    /// `None` once the predicate failed: the input is dropped (its threads stop) and
    /// never pulled again.
    input: Option<I>,
    p: Arc<P>,
    stats: Arc<StageStats>,
}

impl<I: DataIter, P: FilterFn<I::Item>> DataIter for TakeWhileIter<I, P> {
    type Item = I::Item;

    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        let Some(input) = self.input.as_mut() else { return Ok(None) };
        let Some(x) = input.next()? else {
            self.input = None;
            return Ok(None);
        };
        let holds = call_user(self.stats.name(), || {
            self.p.test(&x).map_err(|source| Error::Stage { stage: self.stats.name().to_string(), source })
        })?;
        if holds {
            self.stats.produced(0);
            Ok(Some(x))
        } else {
            self.input = None;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Ctx, range};

    fn below(n: u64) -> impl Fn(&u64) -> std::result::Result<bool, BoxError> + Send + Sync + 'static {
        move |x: &u64| Ok(*x < n)
    }

    fn all<D: Dataset>(d: &D, skip: u64) -> Vec<D::Item> {
        let ctx = Ctx::new(&Default::default());
        d.stream_from(&ctx, skip).unwrap().map(|x| x.unwrap()).collect()
    }

    #[test]
    fn ends_at_the_first_element_that_fails() {
        // 0, 1, 2 hold; 7 fails, and the 0 and 1 after it are never reached.
        let ds = take_while(crate::stage::from_vec(vec![0u64, 1, 2, 7, 0, 1]), below(3));
        assert_eq!(all(&ds, 0), vec![0, 1, 2]);
        // Every element holds: the whole input; none does: nothing.
        assert_eq!(all(&take_while(range(0..4), below(10)), 0), vec![0, 1, 2, 3]);
        assert_eq!(all(&take_while(range(5..9), below(3)), 0), Vec::<u64>::new());
    }

    #[test]
    fn resumes_where_an_uninterrupted_pass_is() {
        let ds = take_while(crate::stage::from_vec(vec![0u64, 1, 2, 7, 0, 1]), below(3));
        assert_eq!(all(&ds, 1), vec![1, 2]);
        assert_eq!(all(&ds, 3), Vec::<u64>::new());
        // Past the end of the pass: still nothing, not the elements after the stop.
        assert_eq!(all(&ds, 5), Vec::<u64>::new());
    }

    #[test]
    fn a_predicate_error_names_the_stage() {
        let ds = take_while(range(0..5), |x: &u64| if *x == 2 { Err("bad element") } else { Ok(true) });
        let got: Vec<Result<u64>> = ds.stream().unwrap().collect();
        assert_eq!(got.len(), 3);
        assert!(matches!(&got[2], Err(Error::Stage { stage, .. }) if stage == "take_while"), "{got:?}");
    }
}
