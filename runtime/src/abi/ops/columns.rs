//! Filling a batch's columns: a fixed-size field's values appended with their count
//! checked, mapped on the way in (`put_map`, `put_raw_map`), and [`extend_mapped`]'s
//! vectorised append.

use super::{Array, RawScalar, decode_raw, raw_length_error};
use crate::column::{Append, Scalar};
use crate::error::BoxError;
use std::mem::MaybeUninit;

/// Appends one element's values of a fixed-size field to its batch column, checking the
/// count (`per` values a row).
#[inline]
pub fn put<T: Copy>(
    column: &mut impl Append<T>,
    values: &[T],
    per: usize,
    field: &str,
) -> Result<(), BoxError> {
    if values.len() != per {
        return Err(format!(
            "field `{field}`: {} values, but its batch column holds {per} per row",
            values.len()
        )
        .into());
    }
    column.extend_from_slice(values);
    Ok(())
}

/// An empty batch column buffer with room for `values` values: a recycled one (the
/// buffer of a dropped batch, its pages already mapped) when there is one, see
/// [`recycle`](crate::column::recycle).
#[inline]
pub fn column<T: Scalar>(values: usize) -> Vec<T> {
    crate::column::recycle::vec_with_capacity(values)
}

/// `f` of each value of `values` appended to a batch column that holds `per` values a
/// row: `put(column, Array::map(values, f))` without the tensor in between.
#[inline]
pub fn put_map<T: Scalar, U: Copy>(
    column: &mut impl Append<U>,
    values: &impl Array<T>,
    per: usize,
    field: &str,
    f: impl FnMut(T) -> U,
) -> Result<(), BoxError> {
    let values = values.values();
    if values.len() != per {
        return Err(format!(
            "field `{field}`: {} values, but its batch column holds {per} per row",
            values.len()
        )
        .into());
    }
    extend_mapped(column, values, f);
    Ok(())
}

/// `decode_raw(bytes, T)`, `reshape` to `shape`, then `f` of each value appended to a
/// batch column that holds `per` values a row: `put_map(column, reshape(decode_raw(bytes),
/// shape), f)` without the vector and the tensor in between. The same checks in the same
/// order, with the same messages. One-byte values (`u8`, `i8`) are read in place; wider
/// ones too when `bytes` is aligned for them (on a little-endian target), else decoded
/// first.
#[inline]
pub fn put_raw_map<T: RawScalar, U: Copy>(
    column: &mut impl Append<U>,
    bytes: &[u8],
    shape: &[usize],
    per: usize,
    field: &str,
    f: impl FnMut(T) -> U,
) -> Result<(), BoxError> {
    if !bytes.len().is_multiple_of(T::SIZE) {
        return Err(raw_length_error::<T>(bytes.len()));
    }
    let n = bytes.len() / T::SIZE;
    if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(n) {
        return Err(format!("reshape: {n} values do not fit the shape {shape:?}").into());
    }
    if n != per {
        return Err(format!("field `{field}`: {n} values, but its batch column holds {per} per row").into());
    }
    #[cfg(target_endian = "little")]
    {
        // SAFETY: `RawScalar` is implemented only for primitive integers and floats
        // (`raw_scalar!`), for which every bit pattern is a value and whose in-memory form
        // on a little-endian target is their little-endian bytes; `align_to` gives the
        // aligned middle part only.
        let (head, values, tail) = unsafe { bytes.align_to::<T>() };
        if head.is_empty() && tail.is_empty() {
            extend_mapped(column, values, f);
            return Ok(());
        }
    }
    extend_mapped(column, &decode_raw::<T>(bytes)?, f);
    Ok(())
}

/// `column.extend(values.iter().copied().map(f))`, compiled for the widest vectors the
/// processor has (AVX2 on x86-64, detected at run time; the baseline is SSE2): the
/// element-wise expression of an image row (`cast(x, f32) / 255.0`, 12,288 values) runs
/// 8 lanes wide, and a big column is written with streaming stores (its stores, not the
/// division, bound it once the column outgrows L2). The values are the same bits on
/// either path: Rust's float operations are IEEE-exact per operation whatever the
/// vector width (no contraction into fused operations). The engine appends its blocks
/// of computed values to a batch column through it (`f` the identity).
#[inline]
pub fn extend_mapped<T: Copy, U: Copy>(column: &mut impl Append<U>, values: &[T], f: impl FnMut(T) -> U) {
    let big = column.column_bytes() >= STREAM_STORE_MIN_COLUMN_BYTES;
    write_mapped(column.room(values.len()), values, big, f);
    // SAFETY: `write_mapped` wrote every slot of the room.
    unsafe { column.advance(values.len()) };
}

/// `f` of each value of `values` into `room` (as long), with streaming stores into a
/// `big` column where the processor has AVX2.
#[inline]
fn write_mapped<T: Copy, U: Copy>(
    room: &mut [MaybeUninit<U>],
    values: &[T],
    big: bool,
    mut f: impl FnMut(T) -> U,
) {
    debug_assert_eq!(room.len(), values.len());
    #[cfg(target_arch = "x86_64")]
    if values.len() >= WIDE_MIN_VALUES && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (checked just above).
        unsafe { write_mapped_avx2(room, values, big, f) };
        return;
    }
    let _ = big;
    for (slot, v) in room.iter_mut().zip(values) {
        slot.write(f(*v));
    }
}

/// Rows shorter than this take the baseline loop (the feature check is not worth it).
const WIDE_MIN_VALUES: usize = 64;

/// A batch column of at least this many bytes is written with non-temporal (streaming)
/// stores, bypassing the caches: it is larger than a core's L2, so its lines would be
/// evicted before the batch is read, and a plain store first reads each line from memory.
/// image_raw's 12.6 MB `f32` column: about 15 % less CPU a batch (BENCHMARKS.md).
pub(super) const STREAM_STORE_MIN_COLUMN_BYTES: usize = 4 << 20;

/// [`extend_mapped`]'s loop compiled with AVX2 enabled (`f` is inlined into it). Into a
/// column of at least [`STREAM_STORE_MIN_COLUMN_BYTES`] bytes, the
/// values are computed into a small buffer on the stack, 256 at a time, and copied to
/// the column with streaming stores (a plain store would first read the line from
/// memory); the same values either way.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn write_mapped_avx2<T: Copy, U: Copy>(
    room: &mut [MaybeUninit<U>],
    values: &[T],
    big: bool,
    mut f: impl FnMut(T) -> U,
) {
    use std::arch::x86_64::{__m256i, _mm_sfence, _mm256_load_si256, _mm256_stream_si256};
    /// Bytes of values computed a round, then streamed.
    const CHUNK_BYTES: usize = 1024;
    /// Loads 4 KiB apart from a pending store look to the processor as if they read it
    /// (only the address's low 12 bits are compared at first), and a streamed store stays
    /// pending long: so the round's values are computed into a window of `space` that lies
    /// 2 KiB away, modulo 4 KiB, from where they are streamed to. A fixed buffer sat on
    /// the destination for whole columns whose address happened to line up (every row of
    /// image_raw's column starts at the same offset in its page): 2.5x slower.
    const PAGE: usize = 4096;
    let size = size_of::<U>();
    let dst = room.as_mut_ptr().cast::<U>();
    // Plain stores for a small column, or a value type aligned to less than its size (no
    // whole number of values reaches a 32-byte boundary).
    if !big
        || size == 0
        || 32 % size != 0
        || values.len() < 2 * CHUNK_BYTES / size
        || !(dst as usize).is_multiple_of(size)
    {
        for (slot, v) in room.iter_mut().zip(values) {
            slot.write(f(*v));
        }
        return;
    }
    let chunk = CHUNK_BYTES / size;
    // Plain stores up to the first 32-byte boundary (`dst` is a multiple of `U`'s size,
    // which divides 32, so a whole number of values gets there).
    let head = ((32 - dst as usize % 32) % 32 / size).min(values.len());
    for (i, v) in values[..head].iter().enumerate() {
        // SAFETY: within the room (`values.len()` slots from `dst`).
        unsafe { dst.add(i).write(f(*v)) };
    }
    let mut space = [MaybeUninit::<__m256i>::uninit(); (PAGE + CHUNK_BYTES) / 32];
    let base = space.as_mut_ptr();
    // Computes `values[done..done + n]` into the window for `to` (32-byte aligned, so the
    // window is: both addresses are multiples of 32) and streams its `n * size / 32`
    // blocks there.
    let mut round = |done: usize, n: usize, to: *mut U| {
        let off = (to as usize + PAGE / 2).wrapping_sub(base as usize) % PAGE;
        // SAFETY: `off + n * size <= PAGE + CHUNK_BYTES`, the size of `space`.
        let window = unsafe { base.cast::<u8>().add(off) }.cast::<MaybeUninit<U>>();
        for (i, v) in values[done..done + n].iter().enumerate() {
            // SAFETY: `i < n`, within the window.
            unsafe { (*window.add(i)).write(f(*v)) };
        }
        // SAFETY: the window's `n * size / 32` blocks were written just above and are
        // 32-byte aligned; `to` is on a 32-byte boundary with room for them (the
        // caller's), so every streamed store is aligned and in bounds.
        unsafe {
            let (from, to) = (window.cast::<__m256i>(), to.cast::<__m256i>());
            for k in 0..n * size / 32 {
                _mm256_stream_si256(to.add(k), _mm256_load_si256(from.add(k)));
            }
        }
    };
    let mut done = head;
    while values.len() - done >= chunk {
        // SAFETY: `done < values.len()`, within the room; `dst + done` is on a
        // 32-byte boundary (past the head, whole chunks of `CHUNK_BYTES`).
        let to = unsafe { dst.add(done) };
        round(done, chunk, to);
        done += chunk;
    }
    // The rest of the whole 32-byte blocks the same way, then plain stores.
    let rest = (values.len() - done) * size / 32 * 32 / size;
    if rest > 0 {
        // SAFETY: as above.
        let to = unsafe { dst.add(done) };
        round(done, rest, to);
        done += rest;
    }
    for (i, v) in values[done..].iter().enumerate() {
        // SAFETY: within the room (`values.len()` slots from `dst`).
        unsafe { dst.add(done + i).write(f(*v)) };
    }
    // Streaming stores are weakly ordered: fence them before the batch is handed over.
    _mm_sfence();
}
