//! `flat_map`: for each element of the input, a dataset made from it by a function, whose
//! elements are yielded in order before the next input element is pulled (tf.data's
//! `Dataset.flat_map`). One inner dataset at a time: the stage holds the current inner
//! pass (the inner chain's own buffers) and nothing else, so its memory is one input
//! element's inner pass whatever the input's length.
//!
//! The inner datasets run in a nested context ([`Ctx::nested`]): their stages are not
//! registered one by one in the pipeline's report (one inner pass per input element
//! would add as many), the `flat_map` stage counts what comes out.
//!
//! Errors: an `Err` of the function, or of an inner pass, reaches the consumer as
//! [`Error::Stage`] naming `flat_map` and the position of the input element in the pass
//! (`input element 3: ...`).
//!
//! Resume: `iter_from(k)` pulls the first `k` elements (the default): how many elements
//! an input element expands to is known only by running its inner pass. The saved state
//! stays one position, whatever the inner datasets.
//!
//! Also here: the helpers generated code calls to split the fields of an element into
//! rows for `flat_map { slices(...); }` (tf.data's `from_tensor_slices`).

use std::sync::Arc;

use super::{Ctx, DataIter, Dataset, StageStats, call_user};
use crate::column::{Scalar, Tensor};
use crate::error::{BoxError, Error, Result};

/// For each element of `input`, the elements of the dataset `f` makes of it.
pub fn flat_map<D, F, E, Inner>(input: D, f: F) -> FlatMap<D, F>
where
    D: Dataset,
    F: Fn(D::Item) -> std::result::Result<Inner, E> + Send + Sync + 'static,
    E: Into<BoxError>,
    Inner: Dataset,
{
    FlatMap { input, f: Arc::new(f), stats: Arc::new(StageStats::new("flat_map")) }
}

/// The `flat_map` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct FlatMap<D, F> {
    input: D,
    f: Arc<F>,
    stats: Arc<StageStats>,
}

impl<D, F, E, Inner> Dataset for FlatMap<D, F>
where
    D: Dataset,
    F: Fn(D::Item) -> std::result::Result<Inner, E> + Send + Sync + 'static,
    E: Into<BoxError>,
    Inner: Dataset,
{
    type Item = Inner::Item;
    type Iter = FlatMapIter<D::Iter, F, Inner>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        Ok(FlatMapIter {
            input: Some(self.input.iter(ctx)?),
            f: self.f.clone(),
            inner: None,
            ctx: ctx.nested(),
            pulled: 0,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`FlatMap`].
pub struct FlatMapIter<I, F, Inner: Dataset> {
    /// `None` once the input ended.
    input: Option<I>,
    f: Arc<F>,
    /// The pass over the current input element's dataset.
    inner: Option<Inner::Iter>,
    ctx: Ctx,
    /// Input elements pulled so far in this pass.
    pulled: u64,
    stats: Arc<StageStats>,
}

impl<I, F, Inner: Dataset> std::fmt::Debug for FlatMapIter<I, F, Inner> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlatMapIter")
            .field("pulled", &self.pulled)
            .field("inner", &self.inner.is_some())
            .finish()
    }
}

impl<I, F, E, Inner> FlatMapIter<I, F, Inner>
where
    I: DataIter,
    F: Fn(I::Item) -> std::result::Result<Inner, E> + Send + Sync + 'static,
    E: Into<BoxError>,
    Inner: Dataset,
{
    /// `err` of the input element at `index`, as the stage reports it.
    fn located(&self, index: u64, err: impl std::fmt::Display) -> Error {
        Error::Stage {
            stage: self.stats.name().to_string(),
            source: format!("input element {index}: {err}").into(),
        }
    }
}

impl<I, F, E, Inner> DataIter for FlatMapIter<I, F, Inner>
where
    I: DataIter,
    F: Fn(I::Item) -> std::result::Result<Inner, E> + Send + Sync + 'static,
    E: Into<BoxError>,
    Inner: Dataset,
{
    type Item = Inner::Item;

    fn next(&mut self) -> Result<Option<Inner::Item>> {
        loop {
            if let Some(inner) = self.inner.as_mut() {
                match inner.next() {
                    Ok(Some(x)) => {
                        self.stats.produced(0);
                        return Ok(Some(x));
                    }
                    Ok(None) => self.inner = None,
                    Err(e) => {
                        self.inner = None;
                        self.input = None;
                        return Err(self.located(self.pulled - 1, e));
                    }
                }
            }
            let Some(input) = self.input.as_mut() else { return Ok(None) };
            let Some(x) = input.next()? else {
                self.input = None;
                return Ok(None);
            };
            let index = self.pulled;
            self.pulled += 1;
            let f = self.f.clone();
            let made = call_user(self.stats.name(), || Ok(f(x).map_err(Into::<BoxError>::into)));
            let ds = match made {
                Ok(Ok(ds)) => ds,
                Ok(Err(e)) => {
                    self.input = None;
                    return Err(self.located(index, e));
                }
                Err(panic) => {
                    self.input = None;
                    return Err(self.located(index, panic));
                }
            };
            match ds.iter(&self.ctx) {
                Ok(it) => self.inner = Some(it),
                Err(e) => {
                    self.input = None;
                    return Err(self.located(index, e));
                }
            }
        }
    }
}

/// The rows of several fields sliced together (`slices(a, b)`): their lengths, each named,
/// must be equal; the common length, or an error naming each field's.
pub fn slice_len(lengths: &[(&str, usize)]) -> std::result::Result<usize, BoxError> {
    let Some((_, n)) = lengths.first() else { return Ok(0) };
    if lengths.iter().all(|(_, m)| m == n) {
        return Ok(*n);
    }
    let named: Vec<String> = lengths.iter().map(|(f, m)| format!("`{f}` has {m}")).collect();
    Err(format!("`slices` of fields of unequal lengths: {}", named.join(", ")).into())
}

/// The rows of a tensor along its first dimension: tensors of the remaining dimensions.
/// A tensor of one dimension has scalar rows: take [`Tensor::into_parts`]'s values.
pub fn tensor_rows<T: Scalar>(t: Tensor<T>) -> std::result::Result<Vec<Tensor<T>>, BoxError> {
    let (shape, data) = t.into_parts();
    let Some((&n, rest)) = shape.split_first() else {
        return Err("`slices` of a scalar: it has no rows".into());
    };
    let per: usize = rest.iter().product();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(Tensor::new(rest.to_vec(), data[i * per..(i + 1) * per].to_vec())?);
    }
    Ok(out)
}

/// The length of a tensor's first dimension (0 for a scalar).
pub fn tensor_len<T: Scalar>(t: &Tensor<T>) -> usize {
    t.shape().first().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{Ctx, from_vec, range, range_step};

    fn all<D: Dataset>(d: &D, skip: u64) -> Vec<Result<D::Item>> {
        let ctx = Ctx::new(&Default::default());
        d.stream_from(&ctx, skip).unwrap().collect()
    }

    fn oks<D: Dataset>(d: &D, skip: u64) -> Vec<D::Item> {
        all(d, skip).into_iter().map(|x| x.unwrap()).collect()
    }

    fn ranges() -> impl Dataset<Item = i64> {
        // tf: Dataset.range(1, 5).flat_map(lambda x: Dataset.range(x).map(lambda y: 10 * x + y))
        flat_map(range_step(1, 5, 1), |x: i64| -> std::result::Result<_, BoxError> {
            Ok(range_step(0, x, 1).map(move |y| 10 * x + y))
        })
    }

    #[test]
    fn yields_each_inner_dataset_in_turn() {
        assert_eq!(oks(&ranges(), 0), vec![10, 20, 21, 30, 31, 32, 40, 41, 42, 43]);
        // A second pass is the same.
        assert_eq!(oks(&ranges(), 0), oks(&ranges(), 0));
    }

    #[test]
    fn empty_inner_datasets_yield_nothing() {
        // 0, 2 and 4 expand to nothing, 1 and 3 to one element each.
        let ds = flat_map(range(0..5), |x: u64| -> std::result::Result<_, BoxError> {
            Ok(from_vec(if x % 2 == 1 { vec![x * 100] } else { vec![] }))
        });
        assert_eq!(oks(&ds, 0), vec![100, 300]);
        // Every inner dataset empty: the pass is empty, and ends.
        let none = flat_map(range(0..1000), |_| -> std::result::Result<_, BoxError> { Ok(range(0..0)) });
        assert_eq!(oks(&none, 0), Vec::<u64>::new());
        let empty_input = flat_map(range(0..0), |x| -> std::result::Result<_, BoxError> { Ok(range(0..x)) });
        assert_eq!(oks(&empty_input, 0), Vec::<u64>::new());
    }

    #[test]
    fn resumes_at_every_position() {
        let ds = flat_map(range(0..6), |x: u64| -> std::result::Result<_, BoxError> {
            Ok(range(0..x % 3).map(move |y| x * 10 + y))
        });
        let whole = oks(&ds, 0);
        assert_eq!(whole, vec![10, 20, 21, 40, 50, 51]);
        for k in 0..=whole.len() as u64 + 2 {
            let want: Vec<u64> = whole.iter().skip(k as usize).copied().collect();
            assert_eq!(oks(&ds, k), want, "resumed at {k}");
        }
    }

    #[test]
    fn a_parallel_map_before_it_changes_nothing() {
        let make = |threads: usize| {
            flat_map(
                range(0..50).map(|x| x * 3).num_parallel(threads),
                |x: u64| -> std::result::Result<_, BoxError> { Ok(range(0..x % 4)) },
            )
        };
        let one = oks(&make(1), 0);
        assert_eq!(one.len(), (0..50u64).map(|x| (x * 3) % 4).sum::<u64>() as usize);
        for threads in [2, 4, 8] {
            assert_eq!(oks(&make(threads), 0), one, "{threads} threads");
        }
    }

    #[test]
    fn errors_name_the_input_element() {
        let ds = flat_map(range(0..5), |x: u64| -> std::result::Result<_, BoxError> {
            if x == 3 { Err("no dataset for 3".into()) } else { Ok(range(0..1)) }
        });
        let got = all(&ds, 0);
        assert_eq!(got.len(), 4, "three elements then the error: {got:?}");
        match &got[3] {
            Err(Error::Stage { stage, source }) => {
                assert_eq!(stage, "flat_map");
                assert_eq!(source.to_string(), "input element 3: no dataset for 3");
            }
            other => panic!("expected the stage's error, got {other:?}"),
        }
        // A panic in the function is an error too.
        let ds = flat_map(range(0..2), |x: u64| -> std::result::Result<_, BoxError> {
            assert!(x == 0, "boom");
            Ok(range(0..1))
        });
        let got = all(&ds, 0);
        assert!(matches!(&got[1], Err(Error::Stage { stage, .. }) if stage == "flat_map"), "{got:?}");
    }

    #[test]
    fn slices_check_lengths_and_split_tensors() {
        assert_eq!(slice_len(&[("a", 3), ("b", 3)]).unwrap(), 3);
        let e = slice_len(&[("tokens", 4), ("labels", 3)]).unwrap_err().to_string();
        assert_eq!(e, "`slices` of fields of unequal lengths: `tokens` has 4, `labels` has 3");
        let t = Tensor::new(vec![3, 2], vec![1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(tensor_len(&t), 3);
        let rows = tensor_rows(t).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2].shape(), &[2]);
        assert_eq!(rows[2].as_slice(), &[5, 6]);
    }
}
