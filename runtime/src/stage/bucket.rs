//! `bucket_by_length`: tf.data's `bucket_by_sequence_length`, elements grouped into
//! buckets by a length and each bucket batched and padded on its own.
//!
//! The algorithm is TensorFlow's (`group_by_window` with the bucket index as key,
//! `padded_batch` as reduce function and the bucket's batch size as window size):
//!
//! 1. An element of length `l` goes to bucket `i`, the number of boundaries `≤ l`: bucket
//!    0 holds `l < b[0]`, bucket `i` holds `b[i-1] ≤ l < b[i]`, the last bucket `l ≥
//!    b[n-1]` (a negative length goes to bucket 0).
//! 2. When a bucket holds `batch_sizes[i]` elements it becomes one padded batch, emitted
//!    at once (before any further input is read).
//! 3. At the end of the input the partial buckets are emitted in increasing bucket order
//!    (TensorFlow's `GroupByWindow` keeps its groups in an ordered map and flushes them
//!    from the smallest key), or dropped with `drop_remainder`.
//!
//! Each batch is padded as its bucket's padding says: to the longest element of the
//! batch, or with `pad_to_bucket_boundary` to `b[i] - 1` (the generated code makes one
//! padding per bucket). As in TensorFlow, with `pad_to_bucket_boundary` an element in the
//! last bucket (no boundary above it) is an error, raised when that bucket's batch is
//! made (full or flushed at the end, even a dropped partial one).
//!
//! The stage holds at most `Σ (batch_sizes[i] - 1)` elements in its buckets plus the
//! batch being built, runs on the consumer's thread, and its output is a pure function
//! of its input (deterministic whatever the thread counts above it).
//!
//! Resume: a batch holds elements read long before it is emitted (a rare long sequence
//! waits in its bucket), so `iter_from(k)` replays the pass from its start, assigning
//! elements to buckets and dropping the first `k` batches without building them (the
//! input is read and mapped again up to there); the saved state stays a position.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::{Ctx, DataIter, Dataset, Element, StageStats};
use crate::column::{Batchable, ColumnBuilder};
use crate::error::{Error, Result};

/// How `bucket_by_length` buckets and batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketOptions {
    /// The bucket boundaries, strictly increasing and positive (`n` of them: `n + 1`
    /// buckets).
    pub boundaries: Vec<i64>,
    /// The batch size of each bucket (`n + 1` of them, each at least 1).
    pub batch_sizes: Vec<usize>,
    /// Pad each bucket's batches to its boundary minus one (an element in the last bucket
    /// is then an error).
    pub pad_to_bucket_boundary: bool,
    /// Drop the partial buckets at the end of the input.
    pub drop_remainder: bool,
}

impl BucketOptions {
    /// The bucket of an element of length `len` (module doc, step 1).
    pub fn bucket(&self, len: i64) -> usize {
        self.boundaries.partition_point(|&b| b <= len)
    }

    /// The options' own errors: what the compiler checks, checked again for hand-written
    /// pipelines.
    fn check(&self, paddings: usize) -> Result<()> {
        let bad = |what: String| Err(Error::Invalid(format!("bucket_by_length: {what}")));
        if self.boundaries.iter().any(|&b| b < 1) || self.boundaries.windows(2).any(|w| w[0] >= w[1]) {
            return bad(format!("boundaries {:?} must be positive and strictly increasing", self.boundaries));
        }
        if self.batch_sizes.len() != self.boundaries.len() + 1 {
            return bad(format!(
                "{} batch sizes for {} boundaries ({} expected)",
                self.batch_sizes.len(),
                self.boundaries.len(),
                self.boundaries.len() + 1
            ));
        }
        if self.batch_sizes.contains(&0) {
            return bad(format!("batch sizes {:?} must be at least 1", self.batch_sizes));
        }
        if paddings != self.batch_sizes.len() {
            return bad(format!("{paddings} paddings for {} buckets", self.batch_sizes.len()));
        }
        Ok(())
    }
}

/// The `bucket_by_length` stage (module doc).
#[must_use = "datasets are lazy: iterate them"]
pub struct BucketByLength<D: Dataset, F>
where
    D::Item: Batchable,
{
    input: D,
    length: Arc<F>,
    options: Arc<BucketOptions>,
    paddings: Arc<Vec<<D::Item as Batchable>::Padding>>,
    stats: Arc<StageStats>,
}

/// Buckets `input`'s elements by `length` and pads each bucket's batches with its
/// padding (`paddings[i]` for bucket `i`), as the module doc describes.
pub fn bucket_by_length<D, F>(
    input: D,
    length: F,
    options: BucketOptions,
    paddings: Vec<<D::Item as Batchable>::Padding>,
) -> BucketByLength<D, F>
where
    D: Dataset,
    D::Item: Batchable,
    F: Fn(&D::Item) -> i64 + Send + Sync + 'static,
{
    BucketByLength {
        input,
        length: Arc::new(length),
        options: Arc::new(options),
        paddings: Arc::new(paddings),
        stats: Arc::new(StageStats::new("bucket_by_length")),
    }
}

impl<D: Dataset + fmt::Debug, F> fmt::Debug for BucketByLength<D, F>
where
    D::Item: Batchable,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketByLength")
            .field("input", &self.input)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<D, F> Dataset for BucketByLength<D, F>
where
    D: Dataset,
    D::Item: Batchable,
    F: Fn(&D::Item) -> i64 + Send + Sync + 'static,
{
    type Item = <D::Item as Batchable>::Padded;
    type Iter = BucketIter<D::Iter, F>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// Replays the pass from its start and drops the first `skip` batches (module doc).
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        self.options.check(self.paddings.len())?;
        ctx.register(&self.stats);
        Ok(BucketIter {
            input: Some(self.input.iter(ctx)?),
            length: self.length.clone(),
            buckets: self.options.batch_sizes.iter().map(|_| Vec::new()).collect(),
            options: self.options.clone(),
            paddings: self.paddings.clone(),
            flushed: 0,
            skip,
            batches: 0,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`BucketByLength`]: the buckets being filled, the next bucket to flush at
/// the end of the input, and the batches still to drop on a resume.
pub struct BucketIter<I: DataIter, F>
where
    I::Item: Batchable,
{
    input: Option<I>,
    length: Arc<F>,
    options: Arc<BucketOptions>,
    paddings: Arc<Vec<<I::Item as Batchable>::Padding>>,
    buckets: Vec<Vec<I::Item>>,
    /// At the end of the input: the buckets before this one are flushed.
    flushed: usize,
    skip: u64,
    /// Batches made in this pass (dropped ones included), for error messages.
    batches: u64,
    stats: Arc<StageStats>,
}

impl<I: DataIter, F> fmt::Debug for BucketIter<I, F>
where
    I::Item: Batchable,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held: Vec<usize> = self.buckets.iter().map(Vec::len).collect();
        f.debug_struct("BucketIter")
            .field("held", &held)
            .field("batches", &self.batches)
            .field("skip", &self.skip)
            .field("done", &self.input.is_none())
            .finish_non_exhaustive()
    }
}

impl<I: DataIter, F> BucketIter<I, F>
where
    I::Item: Batchable,
    F: Fn(&I::Item) -> i64 + Send + Sync + 'static,
{
    /// The next bucket to make a batch of, with its elements: a full one while the input
    /// lasts, then the partial ones in bucket order. `None` at the end of the pass.
    fn next_window(&mut self) -> Result<Option<(usize, Vec<I::Item>)>> {
        while let Some(input) = self.input.as_mut() {
            let t = Instant::now();
            let next = input.next();
            self.stats.add_wait_input(t.elapsed());
            match next {
                Ok(Some(x)) => {
                    let b = self.options.bucket((self.length)(&x));
                    self.buckets[b].push(x);
                    if self.buckets[b].len() >= self.options.batch_sizes[b] {
                        return Ok(Some((b, std::mem::take(&mut self.buckets[b]))));
                    }
                }
                Ok(None) => self.input = None,
                Err(e) => {
                    self.input = None;
                    self.flushed = self.buckets.len();
                    self.buckets.iter_mut().for_each(Vec::clear);
                    return Err(e);
                }
            }
        }
        while self.flushed < self.buckets.len() {
            let b = self.flushed;
            self.flushed += 1;
            if !self.buckets[b].is_empty() {
                return Ok(Some((b, std::mem::take(&mut self.buckets[b]))));
            }
        }
        Ok(None)
    }

    /// The batch of bucket `b`'s `window`, or `None` for a partial one dropped.
    fn make(&mut self, b: usize, window: Vec<I::Item>) -> Result<Option<<I::Item as Batchable>::Padded>> {
        let index = self.batches;
        self.batches += 1;
        if self.options.pad_to_bucket_boundary && b + 1 == self.buckets.len() {
            let max = self.options.boundaries.last().copied().unwrap_or(0);
            self.stop();
            return Err(Error::Invalid(format!(
                "bucket_by_length: with pad_to_bucket_boundary, elements must have length < {max} \
                 (the largest boundary); batch {index} holds longer ones"
            )));
        }
        if window.len() < self.options.batch_sizes[b] && self.options.drop_remainder {
            return Ok(None);
        }
        let mut builder = <I::Item as Batchable>::padded_builder(window.len(), &self.paddings[b]);
        for x in window {
            if let Err(e) = builder.push(x) {
                self.stop();
                return Err(Error::Stage {
                    stage: self.stats.name().to_string(),
                    source: Box::new(e.at_batch(index)),
                });
            }
        }
        Ok(Some(builder.finish()))
    }

    /// Ends the pass after an error.
    fn stop(&mut self) {
        self.input = None;
        self.flushed = self.buckets.len();
        self.buckets.iter_mut().for_each(Vec::clear);
    }
}

impl<I: DataIter, F> DataIter for BucketIter<I, F>
where
    I::Item: Batchable,
    F: Fn(&I::Item) -> i64 + Send + Sync + 'static,
{
    type Item = <I::Item as Batchable>::Padded;

    fn next(&mut self) -> Result<Option<Self::Item>> {
        loop {
            let Some((b, window)) = self.next_window()? else { return Ok(None) };
            let full = window.len() >= self.options.batch_sizes[b];
            if self.skip > 0 && (full || !self.options.drop_remainder) {
                // A batch the resumed pass had already delivered: counted, not built.
                if self.options.pad_to_bucket_boundary && b + 1 == self.buckets.len() {
                    self.make(b, window)?;
                }
                self.batches += 1;
                self.skip -= 1;
                continue;
            }
            let t = Instant::now();
            let batch = self.make(b, window)?;
            self.stats.add_busy(t.elapsed());
            if let Some(batch) = batch {
                self.stats.produced(batch.byte_size());
                return Ok(Some(batch));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::{Dense, PadLen};
    use crate::stage::{RuntimeOptions, from_vec};

    /// Elements `(index, tokens)`: sequence `i` of length `l` is `[1, 2, …, l]`.
    fn elements(lengths: &[usize]) -> Vec<(i64, Vec<i64>)> {
        lengths.iter().enumerate().map(|(i, &l)| (i as i64, (1..=l as i64).collect())).collect()
    }

    fn options(boundaries: &[i64], sizes: &[usize], pad: bool, drop: bool) -> BucketOptions {
        BucketOptions {
            boundaries: boundaries.to_vec(),
            batch_sizes: sizes.to_vec(),
            pad_to_bucket_boundary: pad,
            drop_remainder: drop,
        }
    }

    /// The paddings generated code makes: the boundary minus one per bucket with
    /// `pad_to_bucket_boundary`, else the longest.
    fn paddings(o: &BucketOptions) -> Vec<((), PadLen<i64>)> {
        (0..o.batch_sizes.len())
            .map(|i| match (o.pad_to_bucket_boundary, o.boundaries.get(i)) {
                (true, Some(&b)) => ((), PadLen::to(b as usize - 1, 0)),
                _ => ((), PadLen::longest(0)),
            })
            .collect()
    }

    type Out = (Dense<i64, i64>, Dense<i64, Vec<i64>>);

    fn dataset(lengths: &[usize], o: &BucketOptions) -> impl Dataset<Item = Out> + use<> {
        bucket_by_length(
            from_vec(elements(lengths)),
            |x: &(i64, Vec<i64>)| x.1.len() as i64,
            o.clone(),
            paddings(o),
        )
    }

    /// Each batch as (indices, padded shape).
    fn summary(batches: &[Out]) -> Vec<(Vec<i64>, Vec<usize>)> {
        batches.iter().map(|(i, t)| (i.as_slice().to_vec(), t.shape().to_vec())).collect()
    }

    fn run(lengths: &[usize], o: &BucketOptions) -> Result<Vec<Out>> {
        dataset(lengths, o).stream()?.collect()
    }

    /// The lengths of `tfb.py` (the bucket_by_length interop program's first case), and
    /// what TensorFlow 2.21 yields for them with boundaries [3, 6, 10] and batch sizes
    /// [2, 2, 3, 2].
    const LENGTHS: [usize; 12] = [5, 1, 9, 3, 12, 2, 7, 20, 4, 8, 1, 15];

    #[test]
    fn batches_come_out_as_buckets_fill_then_flush_in_bucket_order() {
        let o = options(&[3, 6, 10], &[2, 2, 3, 2], false, false);
        let batches = run(&LENGTHS, &o).unwrap();
        assert_eq!(
            summary(&batches),
            vec![
                (vec![0, 3], vec![2, 5]),
                (vec![1, 5], vec![2, 2]),
                (vec![4, 7], vec![2, 20]),
                (vec![2, 6, 9], vec![3, 9]),
                (vec![10], vec![1, 1]),
                (vec![8], vec![1, 4]),
                (vec![11], vec![1, 15]),
            ]
        );
        // Padded with 0 to the longest of the batch.
        assert_eq!(batches[0].1.as_slice(), &[1, 2, 3, 4, 5, 1, 2, 3, 0, 0]);
    }

    #[test]
    fn drop_remainder_drops_the_partial_buckets() {
        let o = options(&[3, 6, 10], &[2, 2, 3, 2], false, true);
        let batches = run(&LENGTHS, &o).unwrap();
        assert_eq!(
            summary(&batches),
            vec![
                (vec![0, 3], vec![2, 5]),
                (vec![1, 5], vec![2, 2]),
                (vec![4, 7], vec![2, 20]),
                (vec![2, 6, 9], vec![3, 9]),
            ]
        );
    }

    #[test]
    fn pad_to_bucket_boundary_pads_to_the_boundary_minus_one() {
        // TensorFlow 2.21 on these lengths: [0, 3] [2, 5]; [1, 4] [2, 2]; [2, 5, 7] [3, 9];
        // then [8] [1, 2] and [6] [1, 5].
        let o = options(&[3, 6, 10], &[2, 2, 3, 2], true, false);
        let batches = run(&[5, 1, 9, 3, 2, 7, 4, 8, 1], &o).unwrap();
        assert_eq!(
            summary(&batches),
            vec![
                (vec![0, 3], vec![2, 5]),
                (vec![1, 4], vec![2, 2]),
                (vec![2, 5, 7], vec![3, 9]),
                (vec![8], vec![1, 2]),
                (vec![6], vec![1, 5]),
            ]
        );
    }

    #[test]
    fn pad_to_bucket_boundary_fails_on_the_last_bucket() {
        // The first batches come out; the last bucket's batch is an error.
        let o = options(&[3, 6, 10], &[2, 2, 3, 2], true, false);
        let mut s = dataset(&LENGTHS, &o).stream().unwrap();
        assert_eq!(s.next().unwrap().unwrap().1.shape(), &[2, 5]);
        assert_eq!(s.next().unwrap().unwrap().1.shape(), &[2, 2]);
        let e = s.next().unwrap().unwrap_err().to_string();
        assert!(e.contains("length < 10") && e.contains("batch 2"), "{e}");
        assert!(s.next().is_none());
        // Dropped or not: TensorFlow checks the partial last bucket too.
        let o = options(&[3], &[4, 4], true, true);
        let e = run(&[1, 5], &o).unwrap_err().to_string();
        assert!(e.contains("length < 3"), "{e}");
    }

    #[test]
    fn longer_than_the_last_boundary_goes_to_the_last_bucket_and_negative_to_the_first() {
        let o = options(&[3, 6, 10], &[1, 1, 1, 1], false, false);
        assert_eq!(o.bucket(-4), 0);
        assert_eq!(o.bucket(2), 0);
        assert_eq!(o.bucket(3), 1);
        assert_eq!(o.bucket(9), 2);
        assert_eq!(o.bucket(10), 3);
        assert_eq!(o.bucket(1 << 40), 3);
        let batches = run(&[100, 0], &o).unwrap();
        assert_eq!(summary(&batches), vec![(vec![0], vec![1, 100]), (vec![1], vec![1, 0])]);
    }

    #[test]
    fn no_boundaries_is_padded_batch() {
        let o = options(&[], &[3], false, false);
        let batches = run(&LENGTHS, &o).unwrap();
        let ours = summary(&batches);
        let padded: Vec<Out> = from_vec(elements(&LENGTHS))
            .padded_batch(3, false, ((), PadLen::longest(0)))
            .stream()
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(ours, summary(&padded));
        assert_eq!(batches[1].1.as_slice(), padded[1].1.as_slice());
    }

    #[test]
    fn bad_options_are_errors_when_a_pass_starts() {
        for o in [
            options(&[3, 3], &[1, 1, 1], false, false),
            options(&[0], &[1, 1], false, false),
            options(&[3], &[1], false, false),
            options(&[3], &[1, 0], false, false),
        ] {
            let e = run(&[1], &o).unwrap_err();
            assert!(matches!(e, Error::Invalid(_)), "{e}");
        }
        let ds = bucket_by_length(
            from_vec(elements(&[1])),
            |x: &(i64, Vec<i64>)| x.1.len() as i64,
            options(&[3], &[1, 1], false, false),
            vec![((), PadLen::longest(0))],
        );
        assert!(ds.stream().unwrap_err().to_string().contains("1 paddings for 2 buckets"));
    }

    #[test]
    fn an_element_longer_than_its_padding_names_the_batch() {
        // A length that is not the sequence's: bucket 0 (length 1), padded to 2 tokens.
        let ds = bucket_by_length(
            from_vec(elements(&[5])),
            |_: &(i64, Vec<i64>)| 1,
            options(&[3], &[1, 1], true, false),
            vec![((), PadLen::to(2, 0)), ((), PadLen::longest(0))],
        );
        let e = ds.stream().unwrap().collect::<Result<Vec<_>>>().unwrap_err();
        assert!(matches!(&e, Error::Stage { stage, .. } if stage == "bucket_by_length"), "{e}");
    }

    #[test]
    fn resume_at_every_position_is_exact() {
        let lengths: Vec<usize> = (0..60).map(|i| (i * 7 + i * i) % 23).collect();
        for (pad, drop) in [(false, false), (false, true), (true, false)] {
            let o = options(&[4, 9, 15, 24], &[3, 2, 4, 1, 5], pad, drop);
            let all = summary(&run(&lengths, &o).unwrap());
            let whole: Vec<Out> = run(&lengths, &o).unwrap();
            for k in 0..=all.len() + 1 {
                let ds = dataset(&lengths, &o);
                let rest: Vec<Out> = ds
                    .stream_from(&Ctx::new(&RuntimeOptions::default()), k as u64)
                    .unwrap()
                    .collect::<Result<_>>()
                    .unwrap();
                assert_eq!(summary(&rest), all[k.min(all.len())..], "pad {pad} drop {drop} from {k}");
                for (a, b) in rest.iter().zip(&whole[k.min(whole.len())..]) {
                    assert_eq!(a.1.as_slice(), b.1.as_slice());
                }
            }
        }
    }
}
