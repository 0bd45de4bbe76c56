//! `pack`: variable-length token sequences packed into fixed-length rows (the packing of
//! T5 and Grain), each row `length` tokens long with `segment_ids` (1, 2, … for the
//! documents in the row, in the order they were placed; 0 for padding) and `positions`
//! (each token's place in its document, from 0; 0 for padding). An element brings one
//! sequence per packed field; the fields are packed in lockstep, so they must have the
//! same length within an element, and share one `segment_ids` and one `positions`.
//!
//! The algorithm ([`Packer`]), first fit over a window of open rows:
//!
//! 1. An empty sequence is dropped. A sequence longer than `length` is split into chunks
//!    of `length` tokens (the last one shorter), each chunk a document of its own whose
//!    positions start at 0 ([`Overflow::Split`]), or is an error ([`Overflow::Error`]).
//! 2. Each sequence (chunk) goes into the first open row, in the order the rows were
//!    opened, with room for all of it.
//! 3. If none has room, a new row is opened at the back for it; if `window` rows are
//!    open already, the oldest (the front) is closed first.
//! 4. After each placement, full rows at the front are closed. Closed rows come out in
//!    the order they were opened, padded with 0 to `length`; at the end of the input the
//!    open rows are closed in that order.
//!
//! So a document never moves to a row opened before a row it could not fit in was
//! closed, the output is a pure function of the input sequence (no threads, no
//! randomness), and the stage holds at most `window` rows (`window × length × fields`
//! tokens). Packing efficiency (tokens / places) is counted in the stage's statistics.
//!
//! Resume: row `k` depends on every sequence before it, so `iter_from(k)` replays the
//! pass from its start, packing and dropping the first `k` rows (the input is read and
//! mapped again up to there); the saved state stays a position.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::{Ctx, DataIter, Dataset, Element, StageStats};
use crate::error::{Error, Result};

/// What `pack` does with a sequence longer than a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Split it into chunks of the row's length, each a document of its own.
    Split,
    /// Fail.
    Error,
}

/// How `pack` packs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackOptions {
    /// Tokens per row.
    pub length: usize,
    /// Rows open at once (the first-fit window).
    pub window: usize,
    /// Sequences longer than `length`.
    pub overflow: Overflow,
}

/// One packed row: each field's tokens, then `segment_ids` and `positions`, all `length`
/// long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedRow {
    /// The packed fields, in the order given.
    pub fields: Vec<Vec<i32>>,
    /// The document of each token (1, 2, …), 0 for padding.
    pub segment_ids: Vec<i32>,
    /// Each token's position in its document, 0 for padding.
    pub positions: Vec<i32>,
}

impl Element for PackedRow {
    fn byte_size(&self) -> usize {
        std::mem::size_of::<Self>() + 4 * self.segment_ids.len() * (self.fields.len() + 2)
    }
}

impl PackedRow {
    /// Tokens (not padding) in the row.
    pub fn tokens(&self) -> usize {
        self.segment_ids.iter().filter(|&&s| s != 0).count()
    }
}

/// The packing algorithm alone (see the module doc), fed sequences one at a time.
#[derive(Debug)]
pub struct Packer {
    options: PackOptions,
    fields: usize,
    /// Open rows, in the order they were opened: each field's tokens so far, their
    /// segment ids and positions, and the documents in the row.
    open: VecDeque<(PackedRow, i32)>,
    closed: VecDeque<PackedRow>,
}

impl Packer {
    /// A packer of `fields` fields.
    pub fn new(options: PackOptions, fields: usize) -> Result<Packer> {
        if options.length == 0 || options.window == 0 || fields == 0 {
            return Err(Error::Invalid(format!(
                "pack: length ({}), window ({}) and fields ({fields}) must be at least 1",
                options.length, options.window
            )));
        }
        if i32::try_from(options.length).is_err() {
            return Err(Error::Invalid(format!(
                "pack: length {} does not fit i32 positions",
                options.length
            )));
        }
        Ok(Packer { options, fields, open: VecDeque::new(), closed: VecDeque::new() })
    }

    /// Places one element's sequences (one per field, of equal length).
    pub fn push(&mut self, seqs: Vec<Vec<i32>>) -> Result<()> {
        if seqs.len() != self.fields {
            return Err(Error::Invalid(format!(
                "pack: {} fields given, {} expected",
                seqs.len(),
                self.fields
            )));
        }
        let len = seqs[0].len();
        if let Some((i, s)) = seqs.iter().enumerate().find(|(_, s)| s.len() != len) {
            return Err(Error::Invalid(format!(
                "pack: the packed fields of an element differ in length (field 0 has {len} tokens, field {i} has {})",
                s.len()
            )));
        }
        let n = self.options.length;
        if len > n && self.options.overflow == Overflow::Error {
            return Err(Error::Invalid(format!(
                "pack: a sequence of {len} tokens is longer than a row of {n} (overflow: error; \
                 `overflow: split` cuts it into rows)"
            )));
        }
        let mut start = 0;
        while start < len {
            let end = (start + n).min(len);
            self.place(&seqs, start, end);
            start = end;
        }
        Ok(())
    }

    /// First fit of `seqs[..][start..end]`.
    fn place(&mut self, seqs: &[Vec<i32>], start: usize, end: usize) {
        let (n, l) = (self.options.length, end - start);
        let slot = self.open.iter().position(|(r, _)| n - r.segment_ids.len() >= l);
        let slot = match slot {
            Some(i) => i,
            None => {
                if self.open.len() == self.options.window {
                    let (row, _) = self.open.pop_front().expect("a full window has rows");
                    self.close(row);
                }
                let empty = || Vec::with_capacity(n);
                let row = PackedRow {
                    fields: (0..self.fields).map(|_| empty()).collect(),
                    segment_ids: empty(),
                    positions: empty(),
                };
                self.open.push_back((row, 0));
                self.open.len() - 1
            }
        };
        let (row, docs) = &mut self.open[slot];
        *docs += 1;
        for (dst, src) in row.fields.iter_mut().zip(seqs) {
            dst.extend_from_slice(&src[start..end]);
        }
        row.segment_ids.extend(std::iter::repeat_n(*docs, l));
        // `l <= n`, which fits i32 (checked in `new`).
        row.positions.extend(0..l as i32);
        while self.open.front().is_some_and(|(r, _)| r.segment_ids.len() == n) {
            let (row, _) = self.open.pop_front().expect("checked");
            self.close(row);
        }
    }

    fn close(&mut self, mut row: PackedRow) {
        let n = self.options.length;
        for f in row.fields.iter_mut().chain([&mut row.segment_ids, &mut row.positions]) {
            f.resize(n, 0);
        }
        self.closed.push_back(row);
    }

    /// Closes every open row (the end of the input).
    pub fn finish(&mut self) {
        while let Some((row, _)) = self.open.pop_front() {
            self.close(row);
        }
    }

    /// The next closed row, in order.
    pub fn pop(&mut self) -> Option<PackedRow> {
        self.closed.pop_front()
    }
}

/// The `pack` stage over elements given as their packed fields' sequences.
#[must_use = "datasets are lazy: iterate them"]
#[derive(Debug)]
pub struct Pack<D> {
    input: D,
    options: PackOptions,
    fields: usize,
    stats: Arc<StageStats>,
}

/// Packs `input`'s sequences (each element: one `Vec<i32>` per field, `fields` of them)
/// into rows (see the module doc).
pub fn pack<D: Dataset<Item = Vec<Vec<i32>>>>(input: D, fields: usize, options: PackOptions) -> Pack<D> {
    Pack { input, options, fields, stats: Arc::new(StageStats::new("pack")) }
}

impl<D: Dataset<Item = Vec<Vec<i32>>>> Dataset for Pack<D> {
    type Item = PackedRow;
    type Iter = PackIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        self.iter_from(ctx, 0)
    }

    /// Replays the pass from its start and drops the first `skip` rows (module doc).
    fn iter_from(&self, ctx: &Ctx, skip: u64) -> Result<Self::Iter> {
        ctx.register(&self.stats);
        Ok(PackIter {
            input: self.input.iter(ctx)?,
            packer: Packer::new(self.options, self.fields)?,
            done: false,
            skip,
            stats: self.stats.clone(),
        })
    }
}

/// One pass of [`Pack`].
#[derive(Debug)]
pub struct PackIter<I> {
    input: I,
    packer: Packer,
    done: bool,
    skip: u64,
    stats: Arc<StageStats>,
}

impl<I: DataIter<Item = Vec<Vec<i32>>>> PackIter<I> {
    fn next_row(&mut self) -> Result<Option<PackedRow>> {
        loop {
            if let Some(row) = self.packer.pop() {
                return Ok(Some(row));
            }
            if self.done {
                return Ok(None);
            }
            let t = Instant::now();
            let next = self.input.next()?;
            self.stats.add_wait_input(t.elapsed());
            let t = Instant::now();
            match next {
                Some(seqs) => self.packer.push(seqs)?,
                None => {
                    self.done = true;
                    self.packer.finish();
                }
            }
            self.stats.add_busy(t.elapsed());
        }
    }
}

impl<I: DataIter<Item = Vec<Vec<i32>>>> DataIter for PackIter<I> {
    type Item = PackedRow;

    fn next(&mut self) -> Result<Option<PackedRow>> {
        while self.skip > 0 {
            if self.next_row()?.is_none() {
                return Ok(None);
            }
            self.skip -= 1;
        }
        let Some(row) = self.next_row()? else { return Ok(None) };
        self.stats.produced(row.byte_size());
        self.stats.add_tokens(row.tokens(), row.segment_ids.len());
        Ok(Some(row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::{RuntimeOptions, from_vec};

    fn options(length: usize, window: usize, overflow: Overflow) -> PackOptions {
        PackOptions { length, window, overflow }
    }

    /// Rows of one field packed from sequences of these lengths (token `t` of sequence
    /// `s` is `100 * (s + 1) + t`).
    fn pack_lengths(lengths: &[usize], o: PackOptions) -> Vec<PackedRow> {
        let mut p = Packer::new(o, 1).unwrap();
        for (s, &l) in lengths.iter().enumerate() {
            p.push(vec![(0..l).map(|t| (100 * (s + 1) + t) as i32).collect()]).unwrap();
        }
        p.finish();
        std::iter::from_fn(|| p.pop()).collect()
    }

    #[test]
    fn first_fit_in_a_window_exact_rows() {
        // length 8, window 2: [5] opens row A; [4] does not fit A (3 left): row B; [3]
        // fits A (full: closed); [2] fits B; [6] fits nothing: C opens (2 rows open: B, C);
        // [1] fits B; [2] fits C (full, not at the front: stays); end: B, C.
        let rows = pack_lengths(&[5, 4, 3, 2, 6, 1, 2], options(8, 2, Overflow::Split));
        let ids: Vec<Vec<i32>> = rows.iter().map(|r| r.fields[0].clone()).collect();
        assert_eq!(
            ids,
            vec![
                vec![100, 101, 102, 103, 104, 300, 301, 302],
                vec![200, 201, 202, 203, 400, 401, 600, 0],
                vec![500, 501, 502, 503, 504, 505, 700, 701],
            ]
        );
        assert_eq!(rows[0].segment_ids, vec![1, 1, 1, 1, 1, 2, 2, 2]);
        assert_eq!(rows[1].segment_ids, vec![1, 1, 1, 1, 2, 2, 3, 0]);
        assert_eq!(rows[1].positions, vec![0, 1, 2, 3, 0, 1, 0, 0]);
        assert_eq!(rows[2].positions, vec![0, 1, 2, 3, 4, 5, 0, 1]);
        let tokens: usize = rows.iter().map(PackedRow::tokens).sum();
        assert_eq!(tokens, 23);
    }

    #[test]
    fn a_full_window_closes_its_oldest_row() {
        // Window 1: each sequence that does not fit closes the only open row.
        let rows = pack_lengths(&[3, 3, 1, 4], options(4, 1, Overflow::Split));
        let seg: Vec<Vec<i32>> = rows.iter().map(|r| r.segment_ids.clone()).collect();
        assert_eq!(seg, vec![vec![1, 1, 1, 0], vec![1, 1, 1, 2], vec![1, 1, 1, 1]]);
    }

    #[test]
    fn long_sequences_split_into_documents_or_fail() {
        let rows = pack_lengths(&[10, 2], options(4, 4, Overflow::Split));
        let ids: Vec<Vec<i32>> = rows.iter().map(|r| r.fields[0].clone()).collect();
        assert_eq!(ids, vec![vec![100, 101, 102, 103], vec![104, 105, 106, 107], vec![108, 109, 200, 201]]);
        assert_eq!(rows[2].segment_ids, vec![1, 1, 2, 2]);
        assert_eq!(rows[2].positions, vec![0, 1, 0, 1]);
        let mut p = Packer::new(options(4, 4, Overflow::Error), 1).unwrap();
        let e = p.push(vec![vec![1; 5]]).unwrap_err().to_string();
        assert!(e.contains("5 tokens is longer than a row of 4"), "{e}");
        // Exactly a row is no overflow; empty sequences are dropped.
        let rows = pack_lengths(&[4, 0, 4], options(4, 4, Overflow::Error));
        assert_eq!(rows.len(), 2);
    }

    #[test]
    fn fields_pack_in_lockstep_and_must_agree() {
        let mut p = Packer::new(options(4, 2, Overflow::Split), 2).unwrap();
        p.push(vec![vec![1, 2], vec![10, 20]]).unwrap();
        p.push(vec![vec![3], vec![30]]).unwrap();
        p.finish();
        let row = p.pop().unwrap();
        assert_eq!(row.fields, vec![vec![1, 2, 3, 0], vec![10, 20, 30, 0]]);
        assert_eq!((row.segment_ids, row.positions), (vec![1, 1, 2, 0], vec![0, 1, 0, 0]));
        let e = p.push(vec![vec![1, 2], vec![1]]).unwrap_err().to_string();
        assert!(e.contains("differ in length"), "{e}");
    }

    fn corpus() -> Vec<Vec<Vec<i32>>> {
        // Lengths from a fixed sequence: some empty, some longer than a row.
        (0..200u32).map(|i| vec![(0..(i * 37 % 23) as i32).map(|t| i as i32 * 1000 + t).collect()]).collect()
    }

    #[test]
    fn the_stage_is_deterministic_counts_efficiency_and_resumes_exactly() {
        let o = options(16, 3, Overflow::Split);
        let all: Vec<PackedRow> =
            pack(from_vec(corpus()), 1, o).stream().unwrap().collect::<Result<_>>().unwrap();
        let again: Vec<PackedRow> =
            pack(from_vec(corpus()), 1, o).stream().unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(all, again);
        // Every token once, in rows of 16.
        let total: usize = corpus().iter().map(|s| s[0].len()).sum();
        assert_eq!(all.iter().map(PackedRow::tokens).sum::<usize>(), total);
        assert!(all.iter().all(|r| r.fields[0].len() == 16 && r.positions.len() == 16));
        let ds = pack(from_vec(corpus()), 1, o);
        let mut stream = ds.stream().unwrap();
        let n = stream.by_ref().count();
        let report = stream.report();
        let s = report.stages.iter().find(|s| s.name == "pack").unwrap();
        assert_eq!((s.elements, s.tokens, s.token_slots), (n as u64, total as u64, 16 * n as u64));
        assert!(s.packing_efficiency().unwrap() > 0.9, "{s:?}");
        for k in [0, 1, 5, all.len() as u64 - 1, all.len() as u64, all.len() as u64 + 3] {
            let ctx = Ctx::new(&RuntimeOptions::default());
            let rest: Vec<PackedRow> =
                pack(from_vec(corpus()), 1, o).stream_from(&ctx, k).unwrap().collect::<Result<_>>().unwrap();
            assert_eq!(rest, all[(k as usize).min(all.len())..], "from {k}");
        }
    }
}
