//! Recycled batch buffers: the large buffers of batch columns and record batches go
//! back to a small process-wide free list when their batch is dropped, and the next
//! batch of the same type and size takes one from there instead of a fresh allocation.
//!
//! A batch column of megabytes allocated and freed per batch costs the kernel's page
//! faults and page zeroing every time (the allocator returns big blocks to the system
//! between batches); a recycled buffer's pages are already mapped. Batches are often
//! filled on a worker thread and dropped on the consumer's, so the list is shared, not
//! per thread: one short lock per buffer, a few per batch.
//!
//! Only buffers of at least [`MIN_BYTES`] are kept, at most [`KEEP`] of them and
//! [`KEEP_BYTES`] in all (the list never holds more than that much idle memory; beyond
//! it a buffer is freed as before). A request takes the smallest idle buffer that fits
//! and is at most twice its size. A taken buffer is empty, so what is written into it
//! is exactly what a fresh `Vec::with_capacity` would hold.

use std::any::Any;
use std::sync::{Mutex, PoisonError};

/// The smallest buffer worth keeping, in bytes: below it the allocator reuses memory
/// without the kernel's help.
pub const MIN_BYTES: usize = crate::defaults::RECYCLE_MIN_BYTES;
/// At most this many idle buffers are kept.
pub const KEEP: usize = crate::defaults::RECYCLE_KEEP;
/// At most this many idle bytes are kept (`explain`'s memory bound counts them).
pub const KEEP_BYTES: usize = crate::defaults::RECYCLE_KEEP_BYTES;

/// New buffers are a whole number of these bytes.
const GRAIN: usize = 64 << 10;

#[derive(Default)]
struct Free {
    /// Idle buffers: each a `Vec<T>` of some `T`, with its capacity in bytes.
    list: Vec<(Box<dyn Any + Send>, usize)>,
    bytes: usize,
}

static FREE: Mutex<Free> = Mutex::new(Free { list: Vec::new(), bytes: 0 });

/// An empty `Vec<T>` with room for at least `capacity` values: an idle buffer of the
/// same type when one is big enough, else a new allocation (`Vec::with_capacity`).
#[inline]
pub fn vec_with_capacity<T: Copy + Send + 'static>(capacity: usize) -> Vec<T> {
    let want = capacity.saturating_mul(size_of::<T>());
    if want < MIN_BYTES {
        return Vec::with_capacity(capacity);
    }
    let reused = FREE.lock().unwrap_or_else(PoisonError::into_inner).take::<T>(want);
    // A new buffer is rounded up to a whole number of `GRAIN`s, so that it fits a later
    // request a little bigger (record batches vary by a few bytes).
    let grain = GRAIN / size_of::<T>().max(1);
    reused.unwrap_or_else(|| Vec::with_capacity(capacity.div_ceil(grain).saturating_mul(grain)))
}

/// Gives `v`'s allocation back for a later [`vec_with_capacity`], or frees it when it
/// is small or bigger than the list may hold.
#[inline]
pub fn give<T: Copy + Send + 'static>(v: Vec<T>) {
    let have = v.capacity().saturating_mul(size_of::<T>());
    if !(MIN_BYTES..=KEEP_BYTES).contains(&have) {
        return;
    }
    let evicted = FREE.lock().unwrap_or_else(PoisonError::into_inner).keep(Box::new(v), have);
    // Freed after the lock is released.
    drop(evicted);
}

impl Free {
    /// The smallest idle `Vec<T>` of at least `want` bytes and at most twice that (a
    /// much bigger one is left for the request it was made for: the last, partial batch
    /// of an epoch does not take a full batch's buffer), emptied.
    fn take<T: Copy + Send + 'static>(&mut self, want: usize) -> Option<Vec<T>> {
        let fits =
            |have: usize| have >= want && have <= want.saturating_mul(2).max(want.saturating_add(GRAIN));
        let (i, _) = (self.list.iter().enumerate())
            .filter(|(_, (b, have))| fits(*have) && b.is::<Vec<T>>())
            .min_by_key(|(_, (_, have))| *have)?;
        let (buffer, have) = self.list.remove(i);
        self.bytes -= have;
        let mut v = *buffer.downcast::<Vec<T>>().ok()?;
        v.clear();
        Some(v)
    }

    /// Keeps `buffer` (of `have` <= [`KEEP_BYTES`] bytes), making room under [`KEEP`] and
    /// [`KEEP_BYTES`] by taking out the smallest idle buffers (the oldest of equals), or
    /// not keeping `buffer` when it is smaller than every one of those; returns what is
    /// taken out, to be freed. A kept buffer saves a page fault per 4 KiB of it when it
    /// is taken again, so the big ones are worth their room: at an epoch's end, when
    /// every batch's buffers come back at once with the epoch's one-off partial batch,
    /// the columns stay (image_raw: 5 of 12 MiB) and the record batches go.
    fn keep(&mut self, buffer: Box<dyn Any + Send>, have: usize) -> Vec<Box<dyn Any + Send>> {
        let mut evicted = Vec::new();
        while self.list.len() >= KEEP || self.bytes + have > KEEP_BYTES {
            // The list is oldest first.
            let smallest = (self.list.iter().enumerate()).min_by_key(|&(i, &(_, bytes))| (bytes, i));
            let Some((i, &(_, bytes))) = smallest else { break };
            if bytes > have {
                evicted.push(buffer);
                return evicted;
            }
            evicted.push(self.list.remove(i).0);
            self.bytes -= bytes;
        }
        self.bytes += have;
        self.list.push((buffer, have));
        evicted
    }
}

/// Turns transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`; a
/// no-op elsewhere than Linux). Generated runners call it first thing: mimalloc asks for
/// 2 MiB pages for its memory (`MADV_HUGEPAGE`), each resident whole once touched, so a
/// process whose threads each use a little of many pages keeps far more resident than it
/// holds (`shuffle_tabular`: 125 MB against 50 MB with 4 KiB pages, at the same CPU
/// time), and every fresh one costs the kernel 2 MiB of zeroing. The batch buffers,
/// recycled here, no longer need huge pages to be cheap. `SLUICE_HUGE_PAGES=1` keeps
/// them (to measure against).
pub fn small_pages() {
    if std::env::var_os("SLUICE_HUGE_PAGES").is_some_and(|v| v == "1") {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: `prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)` only sets a flag of this process;
    // its failure (an old kernel) leaves huge pages as they were, which is harmless.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_buffer_is_rounded_up_so_that_a_slightly_bigger_request_takes_it_again() {
        // A type of this test's own: no other test's buffer is taken.
        #[derive(Clone, Copy)]
        struct Probe(#[allow(dead_code)] u8);
        let v: Vec<Probe> = vec_with_capacity(MIN_BYTES + 1);
        assert_eq!(v.capacity(), 2 * GRAIN);
        let ptr = v.as_ptr();
        give(v);
        let again: Vec<Probe> = vec_with_capacity(MIN_BYTES + 100);
        assert_eq!(again.as_ptr(), ptr, "the same allocation");
        assert!(again.is_empty());
    }

    // On a list of its own: the process-wide one is shared with every other test.
    #[test]
    fn a_kept_buffer_is_taken_again_empty_by_its_type_and_size_and_the_list_stays_bounded() {
        let mut free = Free::default();
        let n = MIN_BYTES / 4 * 3;
        let mut v: Vec<f32> = Vec::with_capacity(n);
        v.extend((0..n).map(|i| i as f32));
        let ptr = v.as_ptr();
        assert!(free.keep(Box::new(v), n * 4).is_empty());
        // Another type or a bigger size does not take it.
        assert!(free.take::<u32>(n * 4).is_none());
        assert!(free.take::<f32>(n * 8).is_none());
        let again = free.take::<f32>(n * 4 - 4).expect("kept");
        assert_eq!(again.as_ptr(), ptr, "the same allocation");
        assert!(again.is_empty() && again.capacity() >= n);
        assert!(free.take::<f32>(4).is_none(), "taken once");
        // At most KEEP buffers and KEEP_BYTES bytes; the oldest go first.
        for i in 0..KEEP + 2 {
            let evicted = free.keep(Box::new(vec![i as u8; MIN_BYTES]), MIN_BYTES);
            assert_eq!(evicted.len(), usize::from(i >= KEEP));
        }
        assert_eq!((free.list.len(), free.bytes), (KEEP, KEEP * MIN_BYTES));
        let first = free.take::<u8>(MIN_BYTES).expect("kept");
        assert_eq!(first.capacity(), MIN_BYTES);
        let evicted = free.keep(Box::new(Vec::<u8>::with_capacity(KEEP_BYTES)), KEEP_BYTES);
        assert_eq!(evicted.len(), KEEP - 1, "room made for a buffer of KEEP_BYTES");
        assert_eq!((free.list.len(), free.bytes), (1, KEEP_BYTES));
    }

    #[test]
    fn a_request_takes_the_smallest_buffer_that_fits_and_leaves_a_much_bigger_one() {
        let mut free = Free::default();
        let mb = 1 << 20;
        for have in [12 * mb, 4 * mb, 3 * mb + GRAIN] {
            assert!(free.keep(Box::new(Vec::<u8>::with_capacity(have)), have).is_empty());
        }
        // 1 MiB does not take 3 MiB (nor 12).
        assert!(free.take::<u8>(mb).is_none());
        // 3 MiB takes the 3 MiB + a grain, not the first kept (12) nor the 4.
        assert_eq!(free.take::<u8>(3 * mb).map(|v| v.capacity()), Some(3 * mb + GRAIN));
        assert_eq!(free.take::<u8>(3 * mb).map(|v| v.capacity()), Some(4 * mb));
        assert!(free.take::<u8>(5 * mb).is_none(), "12 MiB is more than twice 5");
        assert_eq!(free.take::<u8>(6 * mb).map(|v| v.capacity()), Some(12 * mb));
        assert_eq!((free.list.len(), free.bytes), (0, 0));
    }

    #[test]
    fn a_full_list_gives_up_its_smallest_buffers_or_the_one_given_when_that_is_smaller() {
        let mut free = Free::default();
        let (mb, column) = (1 << 20, 12 << 20);
        let keep = |free: &mut Free, have: usize| free.keep(Box::new(Vec::<u8>::with_capacity(have)), have);
        for _ in 0..KEEP_BYTES / column {
            assert!(keep(&mut free, column).is_empty());
        }
        // Room for one batch of records (5 columns are 60 MiB): a second, smaller than
        // every column, is not kept; one of the same size takes the first's place.
        let rest = KEEP_BYTES - free.bytes;
        assert!(keep(&mut free, rest).is_empty());
        assert_eq!(keep(&mut free, rest - GRAIN).len(), 1);
        assert_eq!(keep(&mut free, rest).len(), 1);
        assert_eq!((free.list.len(), free.bytes), (KEEP_BYTES / column + 1, KEEP_BYTES));
        // Another column: the records go first, then the oldest column (no sixth fits).
        let oldest = free.list[0].0.downcast_ref::<Vec<u8>>().unwrap().as_ptr();
        assert_eq!(keep(&mut free, column).len(), 2);
        assert!(free.list.iter().all(|&(_, have)| have == column));
        assert!(free.list.iter().all(|(b, _)| b.downcast_ref::<Vec<u8>>().unwrap().as_ptr() != oldest));
        // Past KEEP buffers, the smallest goes first, the oldest of equals.
        let mut free = Free::default();
        for i in 0..KEEP {
            assert!(keep(&mut free, mb + i * GRAIN).is_empty());
        }
        let first = free.list[0].0.downcast_ref::<Vec<u8>>().unwrap().as_ptr();
        assert_eq!(keep(&mut free, 2 * mb).len(), 1);
        assert!(free.list.iter().all(|(b, _)| b.downcast_ref::<Vec<u8>>().unwrap().as_ptr() != first));
        assert_eq!(keep(&mut free, mb).len(), 1, "smaller than every kept one: not kept");
        assert_eq!(free.list.len(), KEEP);
    }

    #[test]
    fn small_pages_turns_huge_pages_off_for_the_process() {
        small_pages();
        #[cfg(target_os = "linux")]
        // SAFETY: reads a flag of this process.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1);
    }

    #[test]
    fn small_buffers_and_their_requests_bypass_the_list() {
        // Below MIN_BYTES nothing is kept or looked up (no lock is taken).
        let v = vec_with_capacity::<u16>(16);
        assert!(v.capacity() >= 16 && v.is_empty());
        give(v);
    }
}
