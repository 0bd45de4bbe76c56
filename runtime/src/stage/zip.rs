//! `zip`: element `i` of one dataset with element `i` of another, as a pair (tf.data's
//! `Dataset.zip`); the pass ends with the shorter input. More inputs nest:
//! `zip(zip(a, b), c)` yields `((x, y), z)`.
//!
//! Resume: a zip's position is its element count, and each input resumes at that count
//! (`iter_from(k)` starts both inputs after their first `k` elements).

use super::{Ctx, DataIter, Dataset};
use crate::error::Result;

/// Pairs the elements of `a` and `b`, position by position.
pub fn zip<A: Dataset, B: Dataset>(a: A, b: B) -> Zip<A, B> {
    Zip { a, b }
}

/// The `zip` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Zip<A, B> {
    a: A,
    b: B,
}

impl<A: Dataset, B: Dataset> Dataset for Zip<A, B> {
    type Item = (A::Item, B::Item);
    type Iter = ZipIter<A::Iter, B::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// Both inputs after their first `skip` elements.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        Ok(ZipIter { a: self.a.iter_from(ctx, skip)?, b: self.b.iter_from(ctx, skip)?, done: false })
    }
}

/// One pass of [`Zip`].
#[derive(Debug)]
pub struct ZipIter<A, B> {
    a: A,
    b: B,
    done: bool,
}

impl<A: DataIter, B: DataIter> DataIter for ZipIter<A, B> {
    type Item = (A::Item, B::Item);

    #[inline]
    fn next(&mut self) -> Result<Option<Self::Item>> {
        if self.done {
            return Ok(None);
        }
        // As tf.data: the first input first; once one ends, the other is not pulled.
        let Some(x) = self.a.next()? else {
            self.done = true;
            return Ok(None);
        };
        let Some(y) = self.b.next()? else {
            self.done = true;
            return Ok(None);
        };
        Ok(Some((x, y)))
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
    fn pairs_positions_and_ends_with_the_shortest() {
        let ds = zip(range(0..10).map(|x| x * 2), range(3..6));
        assert_eq!(all(&ds, 0), vec![(0, 3), (2, 4), (4, 5)]);
        let ds = zip(zip(range(0..4), range(10..20)), range(100..103).map(|x| x as i64));
        assert_eq!(all(&ds, 0), vec![((0, 10), 100), ((1, 11), 101), ((2, 12), 102)]);
    }

    #[test]
    fn resumes_every_input_at_the_count() {
        let ds = zip(range(0..10).map(|x| x * 2), range(3..8));
        assert_eq!(all(&ds, 2), vec![(4, 5), (6, 6), (8, 7)]);
        assert_eq!(all(&ds, 5), Vec::<(u64, u64)>::new());
        assert_eq!(all(&ds, 9), Vec::<(u64, u64)>::new());
        // Through a parallel map on one input: the same sequence.
        let par = zip(range(0..50).map(|x| x + 1).num_parallel(3), range(0..40));
        let whole = all(&par, 0);
        assert_eq!(whole.len(), 40);
        assert_eq!(all(&par, 17), whole[17..].to_vec());
    }
}
