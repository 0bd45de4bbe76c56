//! `sample_from`: weighted random mixing of several datasets, as tf.data's
//! `sample_from_datasets`. Each draw picks an input with probability proportional to its
//! weight among the inputs not yet exhausted, from Philox keyed by (seed, epoch) in draw
//! order.

use super::{Ctx, DataIter, Dataset};
use crate::error::{Error, Result};
use crate::rng::Philox;

const STAGE_TAG: u64 = 0x5341_4d50 << 32; // "SAMP"

/// Mixes `inputs` with the given weights.
pub fn sample_from<D: Dataset>(inputs: Vec<D>, weights: Vec<f64>, seed: u64) -> Result<SampleFrom<D>> {
    if inputs.is_empty() || inputs.len() != weights.len() {
        return Err(Error::Invalid(format!(
            "sample_from needs one weight per dataset and at least one dataset (got {} datasets, {} weights)",
            inputs.len(),
            weights.len()
        )));
    }
    if weights.iter().any(|w| !w.is_finite() || *w < 0.0) || weights.iter().all(|w| *w == 0.0) {
        return Err(Error::Invalid(format!(
            "sample_from weights must be finite, >= 0 and not all 0: {weights:?}"
        )));
    }
    Ok(SampleFrom { inputs, weights, seed, stop_on_empty: false })
}

/// The `sample_from` stage.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct SampleFrom<D> {
    inputs: Vec<D>,
    weights: Vec<f64>,
    seed: u64,
    stop_on_empty: bool,
}

impl<D> SampleFrom<D> {
    /// End as soon as any input is exhausted (default false: go on with the others).
    pub fn stop_on_empty_dataset(mut self, stop: bool) -> Self {
        self.stop_on_empty = stop;
        self
    }
}

impl<D: Dataset> Dataset for SampleFrom<D> {
    type Item = D::Item;
    type Iter = SampleIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        let inputs = self.inputs.iter().map(|d| d.iter(ctx).map(Some)).collect::<Result<Vec<_>>>()?;
        Ok(SampleIter {
            inputs,
            weights: self.weights.clone(),
            rng: Philox::new(self.seed, STAGE_TAG ^ ctx.epoch()),
            stop_on_empty: self.stop_on_empty,
        })
    }
}

/// One pass of [`SampleFrom`].
#[derive(Debug)]
pub struct SampleIter<I> {
    inputs: Vec<Option<I>>,
    weights: Vec<f64>,
    rng: Philox,
    stop_on_empty: bool,
}

impl<I: DataIter> DataIter for SampleIter<I> {
    type Item = I::Item;

    fn next(&mut self) -> Result<Option<I::Item>> {
        loop {
            let total: f64 =
                self.inputs.iter().zip(&self.weights).filter(|(i, _)| i.is_some()).map(|(_, w)| w).sum();
            if total <= 0.0 {
                return Ok(None);
            }
            // 53 random bits → uniform in [0, total).
            let mut u = (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) * total;
            let mut pick = None;
            for (k, (input, w)) in self.inputs.iter().zip(&self.weights).enumerate() {
                if input.is_some() && *w > 0.0 {
                    pick = Some(k);
                    if u < *w {
                        break;
                    }
                    u -= w;
                }
            }
            let k = pick.expect("a live input with positive weight exists");
            match self.inputs[k].as_mut().expect("picked a live input").next()? {
                Some(x) => return Ok(Some(x)),
                None => {
                    self.inputs[k] = None;
                    if self.stop_on_empty {
                        return Ok(None);
                    }
                }
            }
        }
    }
}
