//! `zip`: element `i` of one dataset with element `i` of another, as a pair (tf.data's
//! `Dataset.zip`); the pass ends with the shorter input. More inputs nest:
//! `zip(zip(a, b), c)` yields `((x, y), z)`.
//!
//! Resume: a zip's position is its element count, and each input resumes at that count
//! (`iter_from(k)` starts both inputs after their first `k` elements).
//!
//! [`zip_batches`] zips two datasets of batches (columns): element `i` is the pair of the
//! inputs' `i`-th batches, which must have as many rows (what a zip of batches means in
//! a columnar batch: row `r` of the zipped batch is row `r` of each); batches of
//! different sizes end the pass with an error naming the element and both sizes.

use super::{Ctx, DataIter, Dataset};
use crate::column::Columns;
use crate::error::{Error, Result};

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

/// Pairs the batches of `a` and `b`, position by position; a pair of batches with
/// different numbers of rows is an error.
pub fn zip_batches<A: Dataset, B: Dataset>(a: A, b: B) -> ZipBatches<A, B>
where
    A::Item: Columns,
    B::Item: Columns,
{
    ZipBatches { zip: Zip { a, b } }
}

/// The `zip` stage over batches.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct ZipBatches<A, B> {
    zip: Zip<A, B>,
}

impl<A: Dataset, B: Dataset> Dataset for ZipBatches<A, B>
where
    A::Item: Columns,
    B::Item: Columns,
{
    type Item = (A::Item, B::Item);
    type Iter = ZipBatchesIter<A::Iter, B::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        Ok(ZipBatchesIter { zip: self.zip.iter_from(ctx, skip)?, index: skip })
    }
}

/// One pass of [`ZipBatches`]: the pairs and their position.
#[derive(Debug)]
pub struct ZipBatchesIter<A, B> {
    zip: ZipIter<A, B>,
    index: u64,
}

impl<A: DataIter, B: DataIter> DataIter for ZipBatchesIter<A, B>
where
    A::Item: Columns,
    B::Item: Columns,
{
    type Item = (A::Item, B::Item);

    fn next(&mut self) -> Result<Option<Self::Item>> {
        let Some((x, y)) = self.zip.next()? else { return Ok(None) };
        let index = self.index;
        self.index += 1;
        let fail = |source: String| {
            Err(Error::Stage { stage: "zip".into(), source: format!("element {index}: {source}").into() })
        };
        let (n, m) = match (x.num_rows(), y.num_rows()) {
            (Ok(n), Ok(m)) => (n, m),
            (Err(e), _) | (_, Err(e)) => {
                self.zip.done = true;
                return fail(e.to_string());
            }
        };
        if n != m {
            self.zip.done = true;
            return fail(format!(
                "batches of {n} and {m} rows: a zip of batches pairs batches of one size \
                 (batch the inputs by the same size, or zip them before `batch`)"
            ));
        }
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

    #[test]
    fn zipped_batches_pair_batches_of_one_size_and_fail_on_others() {
        use crate::stage::from_vec;
        // tf: zip(range(10).batch(4), range(10, 20).batch(4)): [0..4]+[10..14], ...
        let ds = zip_batches(range(0..10).batch(4, false), range(10..20).batch(4, false));
        let got = all(&ds, 0);
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].0.as_slice(), &[8, 9]);
        assert_eq!(got[2].1.as_slice(), &[18, 19]);
        assert_eq!(all(&ds, 1).len(), 2, "resumes at the count");
        // 10 and 12 elements by 4: the third pair is 2 rows and 4.
        let ds = zip_batches(from_vec((0..10u64).collect()).batch(4, false), range(0..12).batch(4, false));
        let ctx = Ctx::new(&Default::default());
        let got: Vec<_> = ds.stream_from(&ctx, 0).unwrap().collect();
        assert_eq!(got.len(), 3, "{got:?}");
        match &got[2] {
            Err(Error::Stage { stage, source }) => {
                assert_eq!(stage, "zip");
                assert!(source.to_string().starts_with("element 2: batches of 2 and 4 rows"), "{source}");
            }
            other => panic!("expected the zip's error, got {other:?}"),
        }
    }
}
