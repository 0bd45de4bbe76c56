//! `unbatch` of records whose fields have a leading dimension (tf.data's `unbatch` of an
//! element of lists or tensors): each input element becomes as many elements as its
//! fields have rows, the rows of every field taken together (`{v: [1, 2], w: [[3, 4],
//! [5, 6]]}` → `{v: 1, w: [3, 4]}`, `{v: 2, w: [5, 6]}`); an element whose fields have
//! none yields nothing. The function that splits one element (generated per record type)
//! checks that its fields have equal lengths ([`row_count`]).
//!
//! Errors: an `Err` of the function (fields of unequal lengths) reaches the consumer as
//! [`Error::Stage`] naming `unbatch` and the input element's position in the pass
//! (`element 3: ...`), and ends the pass.
//!
//! Resume: `iter_from(k)` pulls the first `k` elements (the default): how many rows an
//! input element has is known only by splitting it.

use std::sync::Arc;
use std::time::Instant;

use super::{Ctx, DataIter, Dataset, Element, StageStats, call_user};
use crate::error::{BoxError, Error, Result};

/// Each element of `input` split by `f` into its rows, in order.
pub fn unbatch_fields<D, F, U>(input: D, f: F) -> UnbatchFields<D, F>
where
    D: Dataset,
    F: Fn(D::Item) -> std::result::Result<Vec<U>, BoxError> + Send + Sync + 'static,
    U: Element,
{
    UnbatchFields { input, f: Arc::new(f), stats: Arc::new(StageStats::new("unbatch")) }
}

/// The number of rows of an element whose fields have these lengths (`(name, length)`),
/// which must be equal; else an error naming each field's.
pub fn row_count(lengths: &[(&str, usize)]) -> std::result::Result<usize, BoxError> {
    let Some((_, n)) = lengths.first() else { return Ok(0) };
    if lengths.iter().all(|(_, m)| m == n) {
        return Ok(*n);
    }
    let named: Vec<String> = lengths.iter().map(|(f, m)| format!("`{f}` has {m}")).collect();
    Err(format!("the fields unbatched have different lengths: {}", named.join(", ")).into())
}

/// The `unbatch` stage over records with fields.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct UnbatchFields<D, F> {
    input: D,
    f: Arc<F>,
    stats: Arc<StageStats>,
}

impl<D, F, U> Dataset for UnbatchFields<D, F>
where
    D: Dataset,
    F: Fn(D::Item) -> std::result::Result<Vec<U>, BoxError> + Send + Sync + 'static,
    U: Element,
{
    type Item = U;
    type Iter = UnbatchFieldsIter<D::Iter, F, U>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        Ok(UnbatchFieldsIter {
            input: Some(self.input.iter(ctx)?),
            f: self.f.clone(),
            rows: Vec::new().into_iter(),
            pulled: 0,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`UnbatchFields`]: the rows of the current element and the input's
/// position.
pub struct UnbatchFieldsIter<I, F, U> {
    /// `None` once the input ended or failed.
    input: Option<I>,
    f: Arc<F>,
    rows: std::vec::IntoIter<U>,
    /// Input elements pulled so far in this pass.
    pulled: u64,
    stats: Arc<StageStats>,
}

impl<I, F, U> std::fmt::Debug for UnbatchFieldsIter<I, F, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnbatchFieldsIter")
            .field("rows_left", &self.rows.len())
            .field("pulled", &self.pulled)
            .field("done", &self.input.is_none())
            .finish_non_exhaustive()
    }
}

impl<I, F, U> DataIter for UnbatchFieldsIter<I, F, U>
where
    I: DataIter,
    F: Fn(I::Item) -> std::result::Result<Vec<U>, BoxError> + Send + Sync + 'static,
    U: Element,
{
    type Item = U;

    fn next(&mut self) -> Result<Option<U>> {
        loop {
            if let Some(x) = self.rows.next() {
                self.stats.produced(x.byte_size());
                return Ok(Some(x));
            }
            let Some(input) = self.input.as_mut() else { return Ok(None) };
            let start = Instant::now();
            let x = input.next();
            let pulled = Instant::now();
            self.stats.add_wait_input(pulled - start);
            let x = match x {
                Ok(Some(x)) => x,
                Ok(None) => {
                    self.input = None;
                    return Ok(None);
                }
                Err(e) => {
                    self.input = None;
                    return Err(e);
                }
            };
            let index = self.pulled;
            self.pulled += 1;
            let f = self.f.clone();
            match call_user(self.stats.name(), || Ok(f(x))) {
                Ok(Ok(rows)) => self.rows = rows.into_iter(),
                Ok(Err(e)) => {
                    self.input = None;
                    return Err(Error::Stage {
                        stage: self.stats.name().to_string(),
                        source: format!("element {index}: {e}").into(),
                    });
                }
                Err(panic) => {
                    self.input = None;
                    return Err(panic);
                }
            }
            self.stats.add_busy(pulled.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{from_vec, range};

    fn all<D: Dataset>(d: &D, skip: u64) -> Vec<Result<D::Item>> {
        let ctx = Ctx::new(&Default::default());
        d.stream_from(&ctx, skip).unwrap().collect()
    }

    /// Element `x` as two "fields" of `x % 3` rows each: `(10 x + i, -i)`.
    fn pairs() -> impl Dataset<Item = (u64, i64)> {
        unbatch_fields(range(0..6), |x: u64| -> std::result::Result<_, BoxError> {
            let (a, b): (Vec<u64>, Vec<i64>) = (0..x % 3).map(|i| (10 * x + i, -(i as i64))).unzip();
            let n = row_count(&[("a", a.len()), ("b", b.len())])?;
            Ok(a.into_iter().zip(b).take(n).collect())
        })
    }

    #[test]
    fn yields_the_rows_of_each_element_in_order_and_resumes() {
        let whole: Vec<(u64, i64)> = all(&pairs(), 0).into_iter().map(|x| x.unwrap()).collect();
        assert_eq!(whole, vec![(10, 0), (20, 0), (21, -1), (40, 0), (50, 0), (51, -1)]);
        for k in 0..=whole.len() + 2 {
            let rest: Vec<(u64, i64)> = all(&pairs(), k as u64).into_iter().map(|x| x.unwrap()).collect();
            assert_eq!(rest, whole[k.min(whole.len())..].to_vec(), "resumed at {k}");
        }
    }

    #[test]
    fn fields_of_unequal_lengths_fail_naming_the_element() {
        assert_eq!(row_count(&[("v", 2), ("w", 2)]).unwrap(), 2);
        assert_eq!(row_count(&[]).unwrap(), 0);
        let ds = unbatch_fields(from_vec(vec![(vec![1, 2], vec![3, 4]), (vec![5], vec![6, 7])]), |x| {
            let n = row_count(&[("v", x.0.len()), ("w", x.1.len())])?;
            Ok((0..n).map(|i| (x.0[i], x.1[i])).collect::<Vec<(i64, i64)>>())
        });
        let got = all(&ds, 0);
        assert_eq!(got.len(), 3, "two rows then the error: {got:?}");
        assert_eq!(got[1].as_ref().unwrap(), &(2, 4));
        match &got[2] {
            Err(Error::Stage { stage, source }) => {
                assert_eq!(stage, "unbatch");
                assert_eq!(
                    source.to_string(),
                    "element 1: the fields unbatched have different lengths: `v` has 1, `w` has 2"
                );
            }
            other => panic!("expected the stage's error, got {other:?}"),
        }
    }
}
