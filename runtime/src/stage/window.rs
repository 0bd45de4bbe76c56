//! `window`: tf.data's `Dataset.window(size, shift, stride, drop_remainder)` followed by
//! the idiom every program writes after it, `.flat_map(lambda w: w.batch(size))`: each
//! window as one columnar batch, built with `batch`'s column builders
//! ([`Batchable::builder`]).
//!
//! Window `k` holds the input elements `k × shift + j × stride` for `j` in `0..size`,
//! those that exist; a window starts at every `k × shift` the input reaches. Without
//! `drop_remainder` the last windows may be shorter (as tf.data yields them); with it,
//! only full windows come out. The pass holds a buffer of at most
//! `(size - 1) × stride + 1` elements (the span of one window): elements shared with
//! the next window (`shift` below that span) are cloned into the batch, the others are
//! moved; when `shift` is beyond the span the elements between two windows are pulled
//! and dropped, never held. An error of the input, even of an element between windows,
//! ends the pass (tf.data ignores errors of the elements it discards).
//!
//! Resume: window `k` depends only on the input from position `k × shift`, so a pass
//! started after `skip` windows starts its input after `skip × shift` elements
//! ([`Dataset::iter_from`]); nothing but that position is state.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::{Ctx, DataIter, Dataset, Element, StageStats};
use crate::column::{Batchable, ColumnBuilder};
use crate::error::{Error, Result};

/// The most elements the buffer reserves room for up front.
const MAX_RESERVE: usize = 1 << 16;

/// The `window` stage: see the [module doc](self).
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Window<D> {
    input: D,
    size: usize,
    shift: usize,
    stride: usize,
    drop_remainder: bool,
    stats: Arc<StageStats>,
}

impl<D> Window<D> {
    pub(crate) fn new(input: D, size: usize, shift: usize, stride: usize, drop_remainder: bool) -> Self {
        Window { input, size, shift, stride, drop_remainder, stats: Arc::new(StageStats::new("window")) }
    }
}

impl<D: Dataset> Dataset for Window<D>
where
    D::Item: Batchable + Clone,
{
    type Item = <D::Item as Batchable>::Columns;
    type Iter = WindowIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// `skip` windows start the input after `skip × shift` elements.
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        for (name, v) in [("size", self.size), ("shift", self.shift), ("stride", self.stride)] {
            if v == 0 {
                return Err(Error::Invalid(format!("window: the {name} must be at least 1")));
            }
        }
        // The span of one window: its first element to its last.
        let span =
            (self.size - 1).checked_mul(self.stride).and_then(|s| s.checked_add(1)).ok_or_else(|| {
                Error::Invalid(format!(
                    "window: a size of {} with a stride of {} spans more elements than this machine counts",
                    self.size, self.stride
                ))
            })?;
        ctx.register(&self.stats);
        Ok(WindowIter {
            input: Some(self.input.iter_from(ctx, skip.saturating_mul(self.shift as u64))?),
            size: self.size,
            shift: self.shift,
            stride: self.stride,
            span,
            drop_remainder: self.drop_remainder,
            buffer: VecDeque::with_capacity(span.min(MAX_RESERVE)),
            discard: 0,
            windows: skip,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`Window`]: the buffered elements from the next window's first, the
/// elements to drop before it, and the windows delivered.
pub struct WindowIter<I: DataIter> {
    input: Option<I>,
    size: usize,
    shift: usize,
    stride: usize,
    span: usize,
    drop_remainder: bool,
    buffer: VecDeque<I::Item>,
    /// Input elements to pull and drop before the next window (`shift` beyond the span).
    discard: usize,
    windows: u64,
    stats: Arc<StageStats>,
}

impl<I: DataIter> fmt::Debug for WindowIter<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowIter")
            .field("size", &self.size)
            .field("shift", &self.shift)
            .field("stride", &self.stride)
            .field("drop_remainder", &self.drop_remainder)
            .field("buffered", &self.buffer.len())
            .field("windows", &self.windows)
            .field("done", &self.input.is_none())
            .finish_non_exhaustive()
    }
}

impl<I: DataIter> WindowIter<I> {
    /// Pulls the next input element; `None` at the end (the input then dropped). An
    /// error ends the pass.
    fn pull(&mut self) -> Result<Option<I::Item>> {
        let Some(input) = self.input.as_mut() else { return Ok(None) };
        match input.next() {
            Ok(Some(x)) => Ok(Some(x)),
            Ok(None) => {
                self.input = None;
                Ok(None)
            }
            Err(e) => {
                self.input = None;
                self.buffer.clear();
                Err(e)
            }
        }
    }
}

impl<I: DataIter> DataIter for WindowIter<I>
where
    I::Item: Batchable + Clone,
{
    type Item = <I::Item as Batchable>::Columns;

    fn next(&mut self) -> Result<Option<Self::Item>> {
        let start = Instant::now();
        while self.discard > 0 && self.input.is_some() {
            self.discard -= 1;
            self.pull()?;
        }
        while self.buffer.len() < self.span {
            match self.pull()? {
                Some(x) => self.buffer.push_back(x),
                None => break,
            }
        }
        let pulled = Instant::now();
        self.stats.add_wait_input(pulled - start);
        if self.buffer.is_empty() || (self.drop_remainder && self.buffer.len() < self.span) {
            self.buffer.clear();
            self.input = None;
            return Ok(None);
        }
        let held = self.buffer.len();
        let rows = 1 + (held - 1) / self.stride;
        let mut builder = <I::Item as Batchable>::builder(rows);
        // The elements before the next window's first leave the buffer: moved into the
        // batch (or dropped, between strides); the rest stay and are cloned.
        let leaving = self.shift.min(held);
        let mut pushed = Ok(());
        for i in 0..held {
            let row = i % self.stride == 0 && i / self.stride < rows;
            if i < leaving {
                let x = self.buffer.pop_front().expect("an element buffered");
                if row && pushed.is_ok() {
                    pushed = builder.push(x);
                }
            } else if row && pushed.is_ok() {
                pushed = builder.push(self.buffer[i - leaving].clone());
            }
        }
        if let Err(e) = pushed {
            self.input = None;
            self.buffer.clear();
            return Err(Error::Stage {
                stage: self.stats.name().to_string(),
                source: Box::new(e.at_batch(self.windows)),
            });
        }
        self.discard = self.shift - leaving;
        let columns = builder.finish();
        self.windows += 1;
        self.stats.add_busy(pulled.elapsed());
        self.stats.produced(columns.byte_size());
        Ok(Some(columns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::{Columns, Tensor};
    use crate::stage::{RuntimeOptions, from_vec, range};

    /// Every window of a pass from window `skip`, as the rows of each.
    fn windows<D>(ds: &D, skip: u64) -> Vec<Vec<u64>>
    where
        D: Dataset,
        D::Item: Columns<Row = u64>,
    {
        let ctx = Ctx::new(&RuntimeOptions::default());
        ds.stream_from(&ctx, skip)
            .unwrap()
            .map(|b| {
                let b = b.unwrap();
                (0..b.num_rows().unwrap()).map(|i| b.row(i)).collect()
            })
            .collect()
    }

    /// tf.data's windows, computed from their definition: window `k` starts at `k ×
    /// shift` while that element exists, and holds `k × shift + j × stride < n`.
    fn expected(n: u64, size: u64, shift: u64, stride: u64, drop: bool) -> Vec<Vec<u64>> {
        (0..)
            .map(|k| k * shift)
            .take_while(|&s| s < n)
            .map(|s| (0..size).map(|j| s + j * stride).filter(|&x| x < n).collect::<Vec<u64>>())
            .filter(|w| !drop || w.len() as u64 == size)
            .collect()
    }

    #[test]
    fn exact_windows_as_tf_data_yields_them() {
        let w = |n, size, shift, stride, drop| windows(&range(0..n).window(size, shift, stride, drop), 0);
        // shift < size: overlapping windows, shorter ones at the end.
        assert_eq!(w(5, 3, 1, 1, false), [vec![0, 1, 2], vec![1, 2, 3], vec![2, 3, 4], vec![3, 4], vec![4]]);
        assert_eq!(w(5, 3, 1, 1, true), [vec![0, 1, 2], vec![1, 2, 3], vec![2, 3, 4]]);
        // shift = size: batch's windows.
        assert_eq!(w(7, 3, 3, 1, false), [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
        assert_eq!(w(7, 3, 3, 1, true), [vec![0, 1, 2], vec![3, 4, 5]]);
        // shift > size: the elements between windows are dropped.
        assert_eq!(w(10, 2, 4, 1, false), [vec![0, 1], vec![4, 5], vec![8, 9]]);
        assert_eq!(w(9, 2, 4, 1, false), [vec![0, 1], vec![4, 5], vec![8]]);
        assert_eq!(w(9, 2, 4, 1, true), [vec![0, 1], vec![4, 5]]);
        // stride 2: every other element, over a span of (size - 1) × 2 + 1.
        assert_eq!(w(8, 3, 2, 2, false), [vec![0, 2, 4], vec![2, 4, 6], vec![4, 6], vec![6]]);
        assert_eq!(w(8, 3, 2, 2, true), [vec![0, 2, 4], vec![2, 4, 6]]);
        assert_eq!(
            w(9, 2, 1, 3, false),
            [
                vec![0, 3],
                vec![1, 4],
                vec![2, 5],
                vec![3, 6],
                vec![4, 7],
                vec![5, 8],
                vec![6],
                vec![7],
                vec![8]
            ]
        );
        // Every combination, against the definition.
        for n in 0..12 {
            for size in 1..5 {
                for shift in 1..6 {
                    for stride in 1..4 {
                        for drop in [false, true] {
                            assert_eq!(
                                w(n, size as usize, shift as usize, stride as usize, drop),
                                expected(n, size, shift, stride, drop),
                                "n={n} size={size} shift={shift} stride={stride} drop={drop}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn empty_input_and_input_shorter_than_a_window() {
        assert!(windows(&range(0..0).window(3, 1, 1, false), 0).is_empty());
        assert!(windows(&range(0..0).window(3, 1, 1, true), 0).is_empty());
        assert_eq!(windows(&range(0..2).window(4, 4, 1, false), 0), [vec![0, 1]]);
        assert_eq!(windows(&range(0..2).window(4, 1, 1, false), 0), [vec![0, 1], vec![1]]);
        assert!(windows(&range(0..2).window(4, 1, 1, true), 0).is_empty());
        // A span longer than the input, with a full window's elements not all there.
        assert!(windows(&range(0..5).window(3, 1, 3, true), 0).is_empty());
    }

    #[test]
    fn resumes_at_every_window_boundary() {
        for (n, size, shift, stride, drop) in [
            (11, 3, 1, 1, false),
            (11, 3, 3, 1, true),
            (11, 2, 4, 1, false),
            (11, 3, 2, 2, false),
            (11, 3, 5, 2, true),
        ] {
            let ds = range(0..n).window(size, shift, stride, drop);
            let whole = windows(&ds, 0);
            for k in 0..=whole.len() + 2 {
                assert_eq!(
                    windows(&ds, k as u64),
                    whole.get(k..).unwrap_or_default(),
                    "size={size} shift={shift} stride={stride} drop={drop}, resumed at window {k}"
                );
            }
        }
    }

    #[test]
    fn errors_end_the_pass_naming_the_stage_and_window() {
        // A zero argument fails when the pass starts.
        let ctx = Ctx::new(&RuntimeOptions::default());
        for (size, shift, stride, what) in [(0, 1, 1, "size"), (2, 0, 1, "shift"), (2, 1, 0, "stride")] {
            let err = range(0..4).window(size, shift, stride, false).iter(&ctx).unwrap_err();
            assert!(err.to_string().contains(&format!("window: the {what} must be at least 1")), "{err}");
        }
        // An input error, here in an element between two windows, ends the pass there.
        let failing = range(0..10).try_map(|x| if x == 3 { Err("bad element 3") } else { Ok(x) });
        let got: Vec<Result<Vec<u64>>> = failing
            .window(2, 4, 1, false)
            .stream()
            .unwrap()
            .map(|b| b.map(|b| (0..b.num_rows().unwrap()).map(|i| b.row(i)).collect()))
            .collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].as_ref().unwrap(), &vec![0, 1]);
        assert!(got[1].as_ref().unwrap_err().to_string().contains("bad element 3"), "{got:?}");
        // Elements whose shapes differ: batch's error, naming the window and the row.
        let shapes = from_vec(vec![
            Tensor::from_vec(vec![1u8, 2]),
            Tensor::from_vec(vec![3u8, 4]),
            Tensor::from_vec(vec![5u8]),
        ]);
        let got: Vec<Result<_>> = shapes.window(2, 1, 1, false).stream().unwrap().collect();
        assert_eq!(got.len(), 2);
        let err = got[1].as_ref().unwrap_err();
        assert!(matches!(err, Error::Stage { stage, .. } if stage == "window"), "{err}");
        assert!(err.to_string().contains("batch 1, element 1"), "{err}");
    }
}
