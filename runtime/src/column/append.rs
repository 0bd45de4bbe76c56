//! Where a batch column's values are appended: the column's buffer itself (`Vec<T>`), or
//! one [`ColumnPart`] of it, the rows one thread of a split batch fills.
//!
//! Generated code writes a row's values with `push` and the `abi::ops::put*` functions,
//! generic over [`Append`], so the same row code fills a whole column on one thread or
//! its disjoint parts on several ([`split`]): the values land in the same places either
//! way, so a split batch is bit-identical to the sequential one.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A batch column being filled, row by row, at its end.
pub trait Append<T> {
    /// `n` uninitialized slots after the last value (room made for them if needed). A
    /// [`ColumnPart`] with less room than that panics: its rows have a fixed size, so
    /// more values than it holds is a bug in the code filling it, not in the data.
    fn room(&mut self, n: usize) -> &mut [MaybeUninit<T>];

    /// Marks the first `n` slots of the last [`room`](Self::room) as values.
    ///
    /// # Safety
    /// Those `n` slots must have been written.
    unsafe fn advance(&mut self, n: usize);

    /// The bytes of the whole column (a part's whole column), for choosing streaming
    /// stores for a column bigger than a core's cache.
    fn column_bytes(&self) -> usize;

    /// The values appended so far (a part's own, from its first row).
    fn len(&self) -> usize;

    /// Whether nothing was appended yet.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the values appended after the first `len` (a failed row's).
    fn truncate(&mut self, len: usize);

    /// Room for `n` more values ahead of pushes (a part has all of its room already).
    #[inline]
    fn reserve(&mut self, n: usize) {
        let _ = n;
    }

    /// Appends one value.
    #[inline]
    fn push(&mut self, value: T) {
        self.room(1)[0].write(value);
        // SAFETY: the one slot was written just above.
        unsafe { self.advance(1) };
    }

    /// Appends every value of `values`.
    #[inline]
    fn extend_iter(&mut self, values: impl IntoIterator<Item = T>) {
        for v in values {
            self.push(v);
        }
    }

    /// Appends `values`.
    #[inline]
    fn extend_from_slice(&mut self, values: &[T])
    where
        T: Copy,
    {
        for (slot, v) in self.room(values.len()).iter_mut().zip(values) {
            slot.write(*v);
        }
        // SAFETY: every slot of the room was written by the loop.
        unsafe { self.advance(values.len()) };
    }
}

impl<T> Append<T> for Vec<T> {
    #[inline]
    fn room(&mut self, n: usize) -> &mut [MaybeUninit<T>] {
        self.reserve(n);
        &mut self.spare_capacity_mut()[..n]
    }

    #[inline]
    unsafe fn advance(&mut self, n: usize) {
        // SAFETY: the caller wrote the `n` slots after the length (the room).
        unsafe { self.set_len(self.len() + n) };
    }

    fn column_bytes(&self) -> usize {
        self.capacity().saturating_mul(size_of::<T>())
    }

    #[inline]
    fn len(&self) -> usize {
        Vec::len(self)
    }

    #[inline]
    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len);
    }

    #[inline]
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }

    #[inline]
    fn push(&mut self, value: T) {
        Vec::push(self, value);
    }

    #[inline]
    fn extend_iter(&mut self, values: impl IntoIterator<Item = T>) {
        Extend::extend(self, values);
    }

    #[inline]
    fn extend_from_slice(&mut self, values: &[T])
    where
        T: Copy,
    {
        Vec::extend_from_slice(self, values);
    }
}

/// A column borrowed is the column (generated `map_rows_*` take their targets by value:
/// `&mut Vec<T>` on one thread, a [`ColumnPart`] on each of several).
impl<T, A: Append<T> + ?Sized> Append<T> for &mut A {
    #[inline]
    fn room(&mut self, n: usize) -> &mut [MaybeUninit<T>] {
        (**self).room(n)
    }

    #[inline]
    unsafe fn advance(&mut self, n: usize) {
        // SAFETY: the caller's promise, passed on.
        unsafe { (**self).advance(n) }
    }

    fn column_bytes(&self) -> usize {
        (**self).column_bytes()
    }

    #[inline]
    fn len(&self) -> usize {
        (**self).len()
    }

    #[inline]
    fn truncate(&mut self, len: usize) {
        (**self).truncate(len);
    }

    #[inline]
    fn reserve(&mut self, n: usize) {
        (**self).reserve(n);
    }

    #[inline]
    fn push(&mut self, value: T) {
        (**self).push(value);
    }

    #[inline]
    fn extend_iter(&mut self, values: impl IntoIterator<Item = T>) {
        (**self).extend_iter(values);
    }

    #[inline]
    fn extend_from_slice(&mut self, values: &[T])
    where
        T: Copy,
    {
        (**self).extend_from_slice(values);
    }
}

/// The rows `rows` of a column being split: a window of its spare capacity that one
/// thread fills, values appended as to the column itself. Made by [`split`]; every part
/// that is full when dropped counts towards its [`Filled`].
pub struct ColumnPart<'a, T> {
    start: *mut MaybeUninit<T>,
    len: usize,
    cap: usize,
    column_bytes: usize,
    filled: Arc<AtomicUsize>,
    _column: PhantomData<&'a mut [MaybeUninit<T>]>,
}

// SAFETY: a part is the only handle to its window of the column (the windows of one
// split are disjoint, and the column is borrowed mutably while any part lives), so it
// is a `&mut [MaybeUninit<T>]` in all but name.
unsafe impl<T: Send> Send for ColumnPart<'_, T> {}

impl<T> std::fmt::Debug for ColumnPart<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnPart").field("len", &self.len).field("cap", &self.cap).finish()
    }
}

impl<T> ColumnPart<'_, T> {
    /// Whether every slot of the part holds a value.
    pub fn is_full(&self) -> bool {
        self.len == self.cap
    }
}

impl<T> Append<T> for ColumnPart<'_, T> {
    #[inline]
    fn room(&mut self, n: usize) -> &mut [MaybeUninit<T>] {
        assert!(
            n <= self.cap - self.len,
            "a row wrote more values than its part of the batch column holds ({} more into {} left)",
            n,
            self.cap - self.len
        );
        // SAFETY: `start..start + cap` is this part's window of the column's spare
        // capacity, which no one else touches while the part lives; `len + n <= cap`.
        unsafe { std::slice::from_raw_parts_mut(self.start.add(self.len), n) }
    }

    #[inline]
    unsafe fn advance(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.cap);
        self.len += n;
    }

    fn column_bytes(&self) -> usize {
        self.column_bytes
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn truncate(&mut self, len: usize) {
        // The values are `Copy` in every column that is split; a dropped one is forgotten.
        self.len = self.len.min(len);
    }
}

impl<T> Drop for ColumnPart<'_, T> {
    fn drop(&mut self) {
        if self.is_full() {
            self.filled.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// What [`split`] made of a column: [`commit`](Self::commit) gives it its values once
/// every part has been filled and dropped.
#[derive(Debug)]
pub struct Filled {
    parts: usize,
    values: usize,
    ptr: usize,
    filled: Arc<AtomicUsize>,
}

impl Filled {
    /// Sets the length of `column` (the one split) to every value of every part, when
    /// every part was full when dropped. An error otherwise (a part failed or was
    /// dropped part-filled, or this is another column): the column is left empty.
    pub fn commit<T>(self, column: &mut Vec<T>) -> Result<(), String> {
        let full = self.filled.load(Ordering::Acquire);
        if column.as_ptr() as usize != self.ptr || !column.is_empty() || column.capacity() < self.values {
            return Err("a split batch column committed to another column".into());
        }
        if full != self.parts {
            return Err(format!(
                "{} of the {} parts of a split batch column were not filled",
                self.parts - full,
                self.parts
            ));
        }
        // SAFETY: the parts' windows cover `0..values` of this column's spare capacity
        // (contiguous, checked by `split`), each was full when dropped, and the column is
        // the one they were cut from, still empty, with that capacity.
        unsafe { column.set_len(self.values) };
        Ok(())
    }
}

/// Cuts the spare capacity of the empty `column` into one part per range of `rows`
/// (contiguous, from 0), `per` values a row. The column must be empty with room for every
/// row (else an error).
pub fn split<'a, T>(
    column: &'a mut Vec<T>,
    per: usize,
    rows: &[std::ops::Range<usize>],
) -> Result<(Vec<ColumnPart<'a, T>>, Filled), String> {
    let total_rows = rows.last().map_or(0, |r| r.end);
    let contiguous = rows
        .iter()
        .enumerate()
        .all(|(k, r)| r.start <= r.end && r.start == if k == 0 { 0 } else { rows[k - 1].end });
    let values = total_rows.checked_mul(per).ok_or("a split batch column's size overflows")?;
    if !contiguous || !column.is_empty() || column.capacity() < values {
        return Err(format!(
            "a batch column cannot be split into {} parts of {total_rows} rows of {per} values (holds {}, room {})",
            rows.len(),
            column.len(),
            column.capacity()
        ));
    }
    let column_bytes = column.capacity().saturating_mul(size_of::<T>());
    let filled = Arc::new(AtomicUsize::new(0));
    let ptr = column.as_ptr() as usize;
    let base = column.spare_capacity_mut().as_mut_ptr();
    let parts = rows
        .iter()
        .map(|r| ColumnPart {
            // SAFETY: `r.start * per <= values <= capacity`: within the spare capacity.
            start: unsafe { base.add(r.start * per) },
            len: 0,
            cap: (r.end - r.start) * per,
            column_bytes,
            filled: filled.clone(),
            _column: PhantomData,
        })
        .collect();
    Ok((parts, Filled { parts: rows.len(), values, ptr, filled }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_filled_on_threads_make_the_column_the_sequential_pushes_make() {
        let rows = [0..3, 3..4, 4..8];
        let mut column: Vec<u32> = Vec::with_capacity(16);
        let (parts, filled) = split(&mut column, 2, &rows).unwrap();
        std::thread::scope(|s| {
            for (part, r) in parts.into_iter().zip(rows.clone()) {
                s.spawn(move || {
                    let mut part = part;
                    for i in r {
                        part.push(10 * i as u32);
                        part.extend_from_slice(&[10 * i as u32 + 1]);
                    }
                    assert!(part.is_full());
                });
            }
        });
        filled.commit(&mut column).unwrap();
        let mut sequential = Vec::new();
        for i in 0..8u32 {
            Append::push(&mut sequential, 10 * i);
            Append::extend_from_slice(&mut sequential, &[10 * i + 1]);
        }
        assert_eq!(column, sequential);
    }

    #[test]
    fn a_part_left_short_leaves_the_column_empty_and_says_so() {
        let mut column: Vec<u8> = Vec::with_capacity(4);
        let (mut parts, filled) = split(&mut column, 1, &[0..2, 2..4]).unwrap();
        parts[0].extend_from_slice(&[1, 2]);
        parts[1].push(3);
        drop(parts);
        let err = filled.commit(&mut column).unwrap_err();
        assert!(err.contains("1 of the 2 parts"), "{err}");
        assert!(column.is_empty());
    }

    #[test]
    #[should_panic(expected = "more values than its part")]
    fn a_part_never_writes_past_its_rows() {
        let mut column: Vec<u8> = Vec::with_capacity(4);
        let (mut parts, _filled) = split(&mut column, 1, &[0..2, 2..4]).unwrap();
        parts[0].extend_from_slice(&[1, 2, 3]);
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one part of rows `0..n`
    fn a_column_without_room_or_with_values_is_not_split() {
        let mut column: Vec<u8> = Vec::with_capacity(3);
        assert!(split(&mut column, 2, &[0..2]).is_err());
        let mut column = vec![1u8];
        column.reserve(8);
        assert!(split(&mut column, 1, &[0..2]).is_err());
        let mut column: Vec<u8> = Vec::with_capacity(8);
        assert!(split(&mut column, 1, &[0..2, 3..4]).is_err());
        let (parts, filled) = split(&mut column, 1, &[0..1]).unwrap();
        drop(parts);
        let mut other: Vec<u8> = Vec::with_capacity(8);
        assert!(filled.commit(&mut other).unwrap_err().contains("another column"));
    }
}
