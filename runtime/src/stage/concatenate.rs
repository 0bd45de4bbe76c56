//! `concatenate`: every element of one dataset, then every element of another (tf.data's
//! `a.concatenate(b)`). More inputs nest: `concatenate(concatenate(a, b), c)`. The
//! second input's pass starts only when the first's ends (its threads, if any, start
//! then).
//!
//! Resume: `iter_from(k)` pulls the first input's elements (its length is not known
//! without reading it) and, when it ends after `m < k`, starts the second after its
//! first `k - m` (which skips as cheaply as that input can).

use std::sync::Arc;

use super::{Ctx, DataIter, Dataset};
use crate::error::Result;

/// The elements of `a`, then those of `b`.
pub fn concatenate<A: Dataset, B: Dataset<Item = A::Item>>(a: A, b: B) -> Concatenate<A, B> {
    Concatenate { a, b: Arc::new(b) }
}

/// The `concatenate` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Concatenate<A, B> {
    a: A,
    /// Shared with the passes, which start it when the first input ends.
    b: Arc<B>,
}

impl<A: Dataset, B: Dataset<Item = A::Item>> Dataset for Concatenate<A, B> {
    type Item = A::Item;
    type Iter = ConcatenateIter<A::Iter, B>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        Ok(ConcatenateIter { a: Some(self.a.iter(ctx)?), b: Second::Waiting(self.b.clone(), ctx.clone()) })
    }

    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        let mut a = self.a.iter(ctx)?;
        for pulled in 0..skip {
            if a.next()?.is_none() {
                let b = self.b.iter_from(ctx, skip - pulled)?;
                return Ok(ConcatenateIter { a: None, b: Second::Running(b) });
            }
        }
        Ok(ConcatenateIter { a: Some(a), b: Second::Waiting(self.b.clone(), ctx.clone()) })
    }
}

/// The second input of a pass: not started yet, or running.
enum Second<B: Dataset> {
    Waiting(Arc<B>, Ctx),
    Running(B::Iter),
}

impl<B: Dataset> std::fmt::Debug for Second<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Second::Waiting(..) => "Waiting",
            Second::Running(_) => "Running",
        })
    }
}

/// One pass of [`Concatenate`].
#[derive(Debug)]
pub struct ConcatenateIter<I, B: Dataset> {
    /// `None` once the first input ended (dropped: its threads stop).
    a: Option<I>,
    b: Second<B>,
}

impl<I: DataIter, B: Dataset<Item = I::Item>> DataIter for ConcatenateIter<I, B> {
    type Item = I::Item;

    #[inline]
    fn next(&mut self) -> Result<Option<I::Item>> {
        if let Some(a) = self.a.as_mut() {
            if let Some(x) = a.next()? {
                return Ok(Some(x));
            }
            self.a = None;
        }
        if let Second::Waiting(b, ctx) = &self.b {
            self.b = Second::Running(b.iter(ctx)?);
        }
        match &mut self.b {
            Second::Running(b) => b.next(),
            Second::Waiting(..) => unreachable!("started above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Ctx, range};

    fn all<D: Dataset>(d: &D, skip: u64) -> Vec<D::Item> {
        let ctx = Ctx::new(&Default::default());
        d.stream_from(&ctx, skip).unwrap().map(|x| x.unwrap()).collect()
    }

    #[test]
    fn yields_each_input_in_turn() {
        let ds = concatenate(range(0..3), range(10..12).map(|x| x * 2));
        assert_eq!(all(&ds, 0), vec![0, 1, 2, 20, 22]);
        let ds = concatenate(concatenate(range(0..2), range(5..5)), range(7..9));
        assert_eq!(all(&ds, 0), vec![0, 1, 7, 8]);
        // A second pass is the same.
        assert_eq!(all(&ds, 0), vec![0, 1, 7, 8]);
    }

    #[test]
    fn resumes_on_either_side_of_the_boundary() {
        let ds = concatenate(range(0..3), range(10..14));
        let whole = all(&ds, 0);
        for k in 0..=8u64 {
            let want: Vec<u64> = whole.iter().skip(k as usize).copied().collect();
            assert_eq!(all(&ds, k), want, "resumed at {k}");
        }
        let nested =
            concatenate(concatenate(range(0..2), range(5..5)), range(7..12).map(|x| x).num_parallel(2));
        let whole = all(&nested, 0);
        assert_eq!(whole, vec![0, 1, 7, 8, 9, 10, 11]);
        for k in 0..=8u64 {
            assert_eq!(all(&nested, k), whole.iter().skip(k as usize).copied().collect::<Vec<_>>());
        }
    }
}
