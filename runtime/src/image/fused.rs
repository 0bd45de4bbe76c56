//! The benchmark's JPEG pipeline in one pass: `decode_jpeg(channels=3)` → bilinear
//! resize to `out_h × out_w` → `(x / 255 - mean[c]) / std[c]`, written straight into a
//! caller's buffer, or appended to a batch column ([`decode_resize_normalize_extend`]:
//! into its spare capacity, each value stored once).
//!
//! The only full-size intermediate is the decoded 8-bit image, in a buffer reused from
//! call to call; the resizer reads it directly and keeps two rows of floats, and the
//! normalization is applied as each output value is stored. The result is bit-identical
//! to the unfused composition [`decode_jpeg`] → [`resize_bilinear`] →
//! [`scale`]`(1/255)` → [`normalize`].
//!
//! [`decode_jpeg`]: super::decode_jpeg
//! [`resize_bilinear`]: super::resize_bilinear
//! [`scale`]: super::scale
//! [`normalize`]: super::normalize

use std::cell::RefCell;
use std::mem::MaybeUninit;

use super::ImageError;
use super::decode::jpeg_into;
use super::ops::normalizer;
use super::resize::{ResizeScratch, as_uninit, resize_raw};
use crate::column::Append;

/// Buffers [`decode_resize_normalize_with`] reuses between calls: keep one per worker
/// thread to decode without allocating once it has seen the largest image.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    pixels: Vec<u8>,
    resize: ResizeScratch,
    /// Each channel's mean and reciprocal deviation repeated along an output row, so the
    /// normalization is one flat (vectorizable) loop per row.
    row_mean: Vec<f32>,
    row_inv_std: Vec<f32>,
}

impl Scratch {
    /// Empty buffers; they grow on first use.
    pub fn new() -> Self {
        Scratch::default()
    }
}

thread_local! {
    /// The buffers of [`decode_resize_normalize`]: per thread, so a worker pool reuses
    /// them without locking. They hold no state that affects results.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Decodes `jpeg` as RGB, resizes it bilinearly to `out_h × out_w` (as
/// `tf.image.resize`), and writes `(x / 255 - mean[c]) / std[c]` into `out`, which must
/// hold exactly `out_h * out_w * 3` floats (HWC). Uses per-thread reusable buffers.
pub fn decode_resize_normalize(
    jpeg: &[u8],
    out_h: usize,
    out_w: usize,
    mean: [f32; 3],
    std: [f32; 3],
    out: &mut [f32],
) -> Result<(), ImageError> {
    // SAFETY: `fused` stores only initialized values into `out`.
    with_scratch(|scratch| fused(scratch, jpeg, None, (out_h, out_w), mean, std, unsafe { as_uninit(out) }))
}

/// [`decode_resize_normalize`] of a JPEG of at most `max_pixels` pixels, as
/// [`decode_jpeg_limited`](super::decode::decode_jpeg_limited) (`decode_jpeg(b,
/// max_pixels: n)` fused with the resize and normalization after it).
pub fn decode_resize_normalize_limited(
    jpeg: &[u8],
    max_pixels: usize,
    out_h: usize,
    out_w: usize,
    mean: [f32; 3],
    std: [f32; 3],
    out: &mut [f32],
) -> Result<(), ImageError> {
    // SAFETY: `fused` stores only initialized values into `out`.
    let out = unsafe { as_uninit(out) };
    with_scratch(|scratch| fused(scratch, jpeg, Some(max_pixels), (out_h, out_w), mean, std, out))
}

/// [`decode_resize_normalize`] (of a JPEG of at most `max_pixels` pixels when given)
/// appending the `out_h * out_w * 3` values to `out`: written once, straight into its
/// spare capacity (no zeroing pass first, as a slot of a batch column made with
/// `resize` would need). On an error nothing is appended.
pub fn decode_resize_normalize_extend(
    jpeg: &[u8],
    max_pixels: Option<usize>,
    out_h: usize,
    out_w: usize,
    mean: [f32; 3],
    std: [f32; 3],
    out: &mut impl Append<f32>,
) -> Result<(), ImageError> {
    super::check_dims("decode_resize_normalize", out_h, out_w, 3)?;
    let n = out_h * out_w * 3;
    let room = out.room(n);
    with_scratch(|scratch| fused(scratch, jpeg, max_pixels, (out_h, out_w), mean, std, room))?;
    // SAFETY: `fused` succeeded, so it wrote all `n` values of the room (the resizer
    // writes every value of every output row).
    unsafe { out.advance(n) };
    Ok(())
}

/// Runs `f` with this thread's buffers.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        // Unreachable today (nothing re-enters), but a fresh buffer is always correct.
        Err(_) => f(&mut Scratch::new()),
    })
}

/// [`decode_resize_normalize`] with explicit reusable buffers.
pub fn decode_resize_normalize_with(
    scratch: &mut Scratch,
    jpeg: &[u8],
    out_h: usize,
    out_w: usize,
    mean: [f32; 3],
    std: [f32; 3],
    out: &mut [f32],
) -> Result<(), ImageError> {
    // SAFETY: `fused` stores only initialized values into `out`.
    fused(scratch, jpeg, None, (out_h, out_w), mean, std, unsafe { as_uninit(out) })
}

/// The fused pass, with the caller's pixel limit if it set one.
fn fused(
    scratch: &mut Scratch,
    jpeg: &[u8],
    max_pixels: Option<usize>,
    (out_h, out_w): (usize, usize),
    mean: [f32; 3],
    std: [f32; 3],
    out: &mut [MaybeUninit<f32>],
) -> Result<(), ImageError> {
    const OP: &str = "decode_resize_normalize";
    super::check_dims(OP, out_h, out_w, 3)?;
    if out.len() != out_h * out_w * 3 {
        return Err(ImageError::BufferSize { op: OP, expected: out_h * out_w * 3, got: out.len() });
    }
    let (mean, inv_std) = normalizer(OP, 3, &mean, &std)?;
    let (h, w, c) = jpeg_into(jpeg, 3, max_pixels, &mut scratch.pixels)?;
    let Scratch { pixels, resize, row_mean, row_inv_std } = scratch;
    row_mean.clear();
    row_inv_std.clear();
    for _ in 0..out_w {
        row_mean.extend_from_slice(&mean);
        row_inv_std.extend_from_slice(&inv_std);
    }
    // The same operations, in the same order, as `scale(1/255)` then `normalize`.
    let to_unit = 1.0f32 / 255.0;
    resize_raw(pixels, h, w, c, out_h, out_w, out, resize, |row| {
        for ((v, m), s) in row.iter_mut().zip(&*row_mean).zip(&*row_inv_std) {
            *v = (*v * to_unit - m) * s;
        }
    })
}
