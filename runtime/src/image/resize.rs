//! Bilinear resizing with TensorFlow's arithmetic: `tf.image.resize(images, [h, w],
//! method='bilinear', antialias=False)`, i.e. `ResizeBilinear` with
//! `half_pixel_centers=True` and `align_corners=False`, output `float32`.
//!
//! For each output index `i` along an axis of `n_in → n_out`, with
//! `scale = n_in / n_out` in `f32`: `s = (i + 0.5) * scale - 0.5`, `lo = max(floor(s), 0)`,
//! `hi = min(ceil(s), n_in - 1)`, `t = s - floor(s)`. A pixel is
//! `top + (bottom - top) * ty` where `top = tl + (tr - tl) * tx` (and `bottom` alike),
//! the same operations in the same order as TensorFlow's CPU kernel, so results agree
//! to the last bit or so.
//!
//! The work is separable: each input row that an output row needs is interpolated
//! horizontally once (into one of two cached rows), then each output row is one
//! vertical lerp of two cached rows. Indices and weights are computed once per call, or
//! once per size where a worker keeps its scratch. On x86-64 the horizontal pass runs on
//! 4-lane vectors (one output pixel each), for 3 channels with AVX2 on 8 (two pixels).

use std::mem::MaybeUninit;

use super::{Image, ImageError, Pixel, check_dims};

/// Interpolation taps along one axis: for output index `i`, the offsets (already
/// multiplied by the stride) of the two input samples and the weight of the second.
#[derive(Debug, Default, Clone)]
pub(crate) struct Taps {
    lo: Vec<usize>,
    hi: Vec<usize>,
    t: Vec<f32>,
    /// Each weight 4 times: two output pixels' weights are one 8-lane load.
    t4: Vec<f32>,
    /// The largest offset of `lo` and `hi`.
    max: usize,
    /// The `(n_in, n_out, stride)` they were computed for: a worker resizing images of
    /// one size computes them once.
    of: Option<(usize, usize, usize)>,
}

impl Taps {
    fn compute(&mut self, n_in: usize, n_out: usize, stride: usize) {
        if self.of == Some((n_in, n_out, stride)) {
            return;
        }
        self.of = Some((n_in, n_out, stride));
        self.lo.clear();
        self.hi.clear();
        self.t.clear();
        let scale = n_in as f32 / n_out as f32;
        let last = n_in as i64 - 1;
        for i in 0..n_out {
            let s = (i as f32 + 0.5) * scale - 0.5;
            let f = s.floor();
            let lo = (f as i64).max(0);
            let hi = (s.ceil() as i64).min(last);
            self.lo.push(lo as usize * stride);
            self.hi.push(hi as usize * stride);
            self.t.push(s - f);
        }
        self.t4.clear();
        self.t4.extend(self.t.iter().flat_map(|&t| [t; 4]));
        self.max = self.lo.iter().chain(&self.hi).copied().max().unwrap_or(0);
    }
}

/// Reusable buffers of the resizer: the taps and two horizontally resized rows.
#[derive(Debug, Default, Clone)]
pub(crate) struct ResizeScratch {
    x: Taps,
    y: Taps,
    rows: [Vec<f32>; 2],
    row_of: [usize; 2],
    /// One input row as `f32`, for the vector pass.
    row: Vec<f32>,
}

/// Which horizontal pass runs: tests pick each one on a processor with AVX2.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq)]
enum RowPass {
    /// The fastest the processor has.
    Best,
    /// The 4-lane pass (SSE2), not the AVX2 one.
    Lanes,
    /// The scalar pass.
    Scalar,
}

#[cfg(test)]
thread_local! {
    static ROW_PASS: std::cell::Cell<RowPass> = const { std::cell::Cell::new(RowPass::Best) };
}

/// Whether the horizontal pass of `c`-channel rows runs on 4-lane vectors: on x86-64
/// (SSE2 is part of it) for 2 to 4 channels, one output pixel a vector.
fn pixel_lanes(c: usize) -> bool {
    #[cfg(test)]
    if ROW_PASS.get() == RowPass::Scalar {
        return false;
    }
    cfg!(target_arch = "x86_64") && (2..=4).contains(&c)
}

/// One input row interpolated horizontally, one output pixel of `c` ≤ 4 channels a
/// 4-lane vector: the row as `f32` (`row`, 4 values of padding past its end), then each
/// output pixel `l + (r - l) * t` of its two input pixels, lanes past `c` spilling into
/// the next pixel's place (written after) or into `dst`'s padding. The scalar pass's
/// operations in its order: the same bits.
///
/// # Panics
/// When `dst` has no room for `4 - c` values past the row's `out_w * c`.
#[cfg(target_arch = "x86_64")]
fn hrow_lanes<T: Pixel>(src: &[T], x: &Taps, c: usize, row: &mut Vec<f32>, dst: &mut [f32]) {
    use std::arch::x86_64::{_mm_add_ps, _mm_loadu_ps, _mm_mul_ps, _mm_set1_ps, _mm_storeu_ps, _mm_sub_ps};
    assert!((1..=4).contains(&c) && dst.len() >= x.t.len() * c + 4 - c, "hrow_lanes: no room for the lanes");
    row_as_f32(src, row);
    assert!(x.max + 4 <= row.len(), "hrow_lanes: a tap past the row");
    for ((j, (&lo, &hi)), &t) in x.lo.iter().zip(&x.hi).enumerate().zip(&x.t) {
        // SAFETY: the loads read `row[lo..lo + 4]` and `row[hi..hi + 4]` (every tap is at
        // most `x.max`, checked above); the store writes `dst[j * c..j * c + 4]`, within
        // `dst` (`j < out_w` and the room checked on entry). SSE2 is part of x86-64.
        unsafe {
            let l = _mm_loadu_ps(row.as_ptr().add(lo));
            let r = _mm_loadu_ps(row.as_ptr().add(hi));
            let v = _mm_add_ps(l, _mm_mul_ps(_mm_sub_ps(r, l), _mm_set1_ps(t)));
            _mm_storeu_ps(dst.as_mut_ptr().add(j * c), v);
        }
    }
}

/// `src` as floats into `row`, followed by 4 zeros (the last pixel's spare lanes). The
/// zeros are written only when the row's length changes (a worker resizing images of one
/// width writes them once): a call per row to fill 4 values costs more than the values.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn row_as_f32<T: Pixel>(src: &[T], row: &mut Vec<f32>) {
    if row.len() != src.len() + 4 {
        row.clear();
        row.resize(src.len() + 4, 0.0);
    }
    for (f, v) in row.iter_mut().zip(src) {
        *f = v.to_f32();
    }
}

/// [`hrow_lanes`] of 3-channel rows with AVX2: the row's conversion to `f32` on 8-lane
/// vectors, then two output pixels a 256-bit vector (each half one pixel's 4 lanes,
/// stored in order, so the later pixel's store overwrites the lane the earlier one spilt
/// into it). The same operations on each value: the same bits.
///
/// # Safety
/// The processor must have AVX2.
///
/// # Panics
/// When `dst` has no room for one value past the row's `out_w * 3`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn hrow_c3_avx2<T: Pixel>(src: &[T], x: &Taps, row: &mut Vec<f32>, dst: &mut [f32]) {
    use std::arch::x86_64::{
        __m128, _mm_add_ps, _mm_loadu_ps, _mm_mul_ps, _mm_set1_ps, _mm_storeu_ps, _mm_sub_ps, _mm256_add_ps,
        _mm256_castps256_ps128, _mm256_extractf128_ps, _mm256_loadu_ps, _mm256_loadu2_m128, _mm256_mul_ps,
        _mm256_sub_ps,
    };
    let n = x.t.len();
    assert!(dst.len() > n * 3 && x.t4.len() == n * 4, "hrow_c3_avx2: no room for the lanes");
    row_as_f32(src, row);
    assert!(x.max + 4 <= row.len(), "hrow_c3_avx2: a tap past the row");
    let (p, d) = (row.as_ptr(), dst.as_mut_ptr());
    let mut j = 0;
    // SAFETY: every load reads `row[o..o + 4]` for a tap `o ≤ x.max` (checked above), or
    // `x.t4[4 * j..4 * j + 8]` with `j + 2 ≤ n`; every store writes `dst[3 * j..3 * j + 4]`
    // for `j < n`, within `dst` (its length checked on entry). AVX2 is the caller's promise.
    unsafe {
        while j + 2 <= n {
            let l = _mm256_loadu2_m128(p.add(x.lo[j + 1]), p.add(x.lo[j]));
            let r = _mm256_loadu2_m128(p.add(x.hi[j + 1]), p.add(x.hi[j]));
            let t = _mm256_loadu_ps(x.t4.as_ptr().add(4 * j));
            let v = _mm256_add_ps(l, _mm256_mul_ps(_mm256_sub_ps(r, l), t));
            _mm_storeu_ps(d.add(3 * j), _mm256_castps256_ps128(v));
            _mm_storeu_ps(d.add(3 * j + 3), _mm256_extractf128_ps::<1>(v));
            j += 2;
        }
        if j < n {
            let (l, r): (__m128, __m128) = (_mm_loadu_ps(p.add(x.lo[j])), _mm_loadu_ps(p.add(x.hi[j])));
            let v = _mm_add_ps(l, _mm_mul_ps(_mm_sub_ps(r, l), _mm_set1_ps(x.t[j])));
            _mm_storeu_ps(d.add(3 * j), v);
        }
    }
}

/// Resizes `image` to `out_h × out_w` with bilinear interpolation, as
/// `tf.image.resize(image, [out_h, out_w])` (bilinear, no antialiasing) does.
pub fn resize_bilinear<T: Pixel>(
    image: &Image<T>,
    out_h: usize,
    out_w: usize,
) -> Result<Image<f32>, ImageError> {
    check_dims("resize_bilinear", out_h, out_w, image.channels)?;
    let mut data = vec![0.0; out_h * out_w * image.channels];
    resize_bilinear_into(image, out_h, out_w, &mut data)?;
    Ok(Image { height: out_h, width: out_w, channels: image.channels, data })
}

/// [`resize_bilinear`] into a caller's buffer of `out_h * out_w * channels` floats
/// (HWC), e.g. a slot of a batch column.
pub fn resize_bilinear_into<T: Pixel>(
    image: &Image<T>,
    out_h: usize,
    out_w: usize,
    out: &mut [f32],
) -> Result<(), ImageError> {
    image.validate("resize_bilinear")?;
    let mut scratch = ResizeScratch::default();
    resize_raw(
        &image.data,
        image.height,
        image.width,
        image.channels,
        out_h,
        out_w,
        // SAFETY: `resize_raw` stores only initialized values into `out`.
        unsafe { as_uninit(out) },
        &mut scratch,
        |_| {},
    )
}

/// `out` as memory to write (`resize_raw` takes fresh memory too).
///
/// # Safety
/// Only initialized values may be stored through the result (`out` stays initialized).
pub(crate) unsafe fn as_uninit(out: &mut [f32]) -> &mut [MaybeUninit<f32>] {
    // SAFETY: `MaybeUninit<f32>` has `f32`'s layout; the caller stores only values.
    unsafe { &mut *(out as *mut [f32] as *mut [MaybeUninit<f32>]) }
}

/// The resizer on raw HWC components, calling `finish(row)` on each output row once it
/// is written (while it is in cache): a no-op for a plain resize, the normalization for
/// the fused path.
#[allow(clippy::too_many_arguments)]
pub(crate) fn resize_raw<T: Pixel, F: FnMut(&mut [f32])>(
    src: &[T],
    h: usize,
    w: usize,
    c: usize,
    out_h: usize,
    out_w: usize,
    out: &mut [MaybeUninit<f32>],
    scratch: &mut ResizeScratch,
    finish: F,
) -> Result<(), ImageError> {
    check_dims("resize_bilinear", h, w, c)?;
    check_dims("resize_bilinear", out_h, out_w, c)?;
    if src.len() != h * w * c {
        return Err(ImageError::BufferSize { op: "resize_bilinear", expected: h * w * c, got: src.len() });
    }
    if out.len() != out_h * out_w * c {
        return Err(ImageError::BufferSize {
            op: "resize_bilinear",
            expected: out_h * out_w * c,
            got: out.len(),
        });
    }
    #[cfg(target_arch = "x86_64")]
    if c == 3 && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (checked just above).
        unsafe { resize_core_avx2::<T, F>(src, h, w, out_h, out_w, out, scratch, finish) };
        return Ok(());
    }
    // Constant channel counts let the compiler unroll the per-pixel loops.
    match c {
        1 => resize_core::<T, F, 1>(src, h, w, 1, out_h, out_w, out, scratch, finish, false),
        3 => resize_core::<T, F, 3>(src, h, w, 3, out_h, out_w, out, scratch, finish, false),
        4 => resize_core::<T, F, 4>(src, h, w, 4, out_h, out_w, out, scratch, finish, false),
        _ => resize_core::<T, F, 0>(src, h, w, c, out_h, out_w, out, scratch, finish, false),
    }
    Ok(())
}

/// [`resize_core`] of 3-channel images compiled with AVX2 enabled (the vertical lerp and
/// `finish`, e.g. the normalisation, on 8-lane vectors); IEEE-exact per operation and
/// never contracted into fused ones, so the same bits.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn resize_core_avx2<T: Pixel, F: FnMut(&mut [f32])>(
    src: &[T],
    h: usize,
    w: usize,
    out_h: usize,
    out_w: usize,
    out: &mut [MaybeUninit<f32>],
    s: &mut ResizeScratch,
    finish: F,
) {
    resize_core::<T, F, 3>(src, h, w, 3, out_h, out_w, out, s, finish, true)
}

/// The separable kernel; `C` is the channel count, or 0 to use `c_dyn`. `avx2` only
/// from [`resize_core_avx2`] (3 channels, the processor has AVX2).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn resize_core<T: Pixel, F: FnMut(&mut [f32]), const C: usize>(
    src: &[T],
    h: usize,
    w: usize,
    c_dyn: usize,
    out_h: usize,
    out_w: usize,
    out: &mut [MaybeUninit<f32>],
    s: &mut ResizeScratch,
    mut finish: F,
    avx2: bool,
) {
    let c = if C == 0 { c_dyn } else { C };
    #[cfg(test)]
    let avx2 = avx2 && ROW_PASS.get() == RowPass::Best;
    let avx2 = avx2 && cfg!(target_arch = "x86_64");
    let row_len = w * c;
    s.x.compute(w, out_w, c);
    s.y.compute(h, out_h, row_len);
    let lanes = pixel_lanes(c);
    // The vector pass's last pixel writes up to 4 lanes. Each row is written by the
    // horizontal pass before it is read, so only a new length needs filling.
    let row_len_out = out_w * c + if lanes { 4 } else { 0 };
    for r in &mut s.rows {
        if r.len() != row_len_out {
            r.clear();
            r.resize(row_len_out, 0.0);
        }
    }
    s.row_of = [usize::MAX; 2];
    // Only the vector pass (x86-64) writes `s_row`, which makes `hrow` `FnMut`.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut s_row = std::mem::take(&mut s.row);
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut hrow = |start: usize, x: &Taps, dst: &mut [f32]| {
        let row = &src[start..start + row_len];
        #[cfg(target_arch = "x86_64")]
        if avx2 && C == 3 {
            // SAFETY: `avx2` is set only where the processor has AVX2.
            unsafe { hrow_c3_avx2(row, x, &mut s_row, dst) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if lanes {
            hrow_lanes(row, x, c, &mut s_row, dst);
            return;
        }
        for (((px, &lo), &hi), &t) in dst.chunks_exact_mut(c).zip(&x.lo).zip(&x.hi).zip(&x.t) {
            let (a, b) = (&row[lo..lo + c], &row[hi..hi + c]);
            for ch in 0..c {
                let (l, r) = (a[ch].to_f32(), b[ch].to_f32());
                px[ch] = l + (r - l) * t;
            }
        }
    };
    for (y, dst) in out.chunks_exact_mut(out_w * c).enumerate() {
        let (top, bot, ty) = (s.y.lo[y], s.y.hi[y], s.y.t[y]);
        // Make both source rows resident, evicting neither of the two this row needs.
        for (want, keep) in [(top, bot), (bot, top)] {
            if s.row_of[0] != want && s.row_of[1] != want {
                let slot = usize::from(s.row_of[0] == keep);
                hrow(want, &s.x, &mut s.rows[slot]);
                s.row_of[slot] = want;
            }
        }
        let a = &s.rows[usize::from(s.row_of[0] != top)];
        let b = &s.rows[usize::from(s.row_of[0] != bot)];
        // A flat loop over the row: contiguous, so the compiler vectorizes it. It only
        // writes: `out` may be fresh memory (a column's spare capacity).
        debug_assert!(a.len() >= dst.len() && b.len() >= dst.len());
        for ((o, &t), &b) in dst.iter_mut().zip(a).zip(b) {
            o.write(t + (b - t) * ty);
        }
        // SAFETY: the loop above wrote every value of `dst` (`a` and `b` are rows of at
        // least `out_w * c` values, `dst`'s length).
        finish(unsafe { &mut *(dst as *mut [MaybeUninit<f32>] as *mut [f32]) });
    }
    s.row = s_row;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taps_follow_half_pixel_centers() {
        let mut t = Taps::default();
        t.compute(4, 2, 1);
        // scale 2: s = 0.5 and 2.5.
        assert_eq!((t.lo.clone(), t.hi.clone(), t.t.clone()), (vec![0, 2], vec![1, 3], vec![0.5, 0.5]));
        t.compute(2, 4, 3);
        // scale 0.5: s = -0.25, 0.25, 0.75, 1.25 (the first clamps to sample 0).
        assert_eq!(t.lo, vec![0, 0, 0, 3]);
        assert_eq!(t.hi, vec![0, 3, 3, 3]);
        assert_eq!(t.t, vec![0.75, 0.25, 0.75, 0.25]);
    }

    /// The module's formula, one output value at a time.
    fn reference<T: Pixel>(img: &Image<T>, out_h: usize, out_w: usize) -> Vec<f32> {
        let c = img.channels;
        let (mut x, mut y) = (Taps::default(), Taps::default());
        x.compute(img.width, out_w, c);
        y.compute(img.height, out_h, img.width * c);
        let mut out = Vec::new();
        for i in 0..out_h {
            for j in 0..out_w {
                for ch in 0..c {
                    let v = |row: usize, col: usize| img.data[row + col + ch].to_f32();
                    let lerp = |row: usize| {
                        let (l, r) = (v(row, x.lo[j]), v(row, x.hi[j]));
                        l + (r - l) * x.t[j]
                    };
                    let (top, bottom) = (lerp(y.lo[i]), lerp(y.hi[i]));
                    out.push(top + (bottom - top) * y.t[i]);
                }
            }
        }
        out
    }

    #[test]
    fn every_path_gives_the_bits_of_the_formula() {
        // Down and up, by whole and odd factors, 1 to 5 channels, u8 and f32 pixels, each
        // horizontal pass the processor has (on x86-64 with AVX2: the AVX2 one for 3
        // channels, the 4-lane one for 2 to 4, the scalar one for any).
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let passes = [RowPass::Best, RowPass::Lanes, RowPass::Scalar];
        for (pass, c) in passes.into_iter().flat_map(|s| (1..=5).map(move |c| (s, c))) {
            ROW_PASS.set(pass);
            for (h, w, oh, ow) in
                [(224, 224, 112, 112), (37, 53, 11, 29), (5, 7, 13, 17), (64, 9, 64, 3), (1, 40, 3, 40)]
            {
                let data: Vec<u8> = (0..h * w * c).map(|i| ((i * 2_654_435_761usize) >> 7) as u8).collect();
                let img = Image::new(h, w, c, data).unwrap();
                let got = resize_bilinear(&img, oh, ow).unwrap();
                assert_eq!(
                    bits(&got.data),
                    bits(&reference(&img, oh, ow)),
                    "u8 {h}x{w}x{c} -> {oh}x{ow}, {pass:?}"
                );
                let floats =
                    Image::new(h, w, c, img.data.iter().map(|&v| f32::from(v) * 0.37 - 4.0).collect())
                        .unwrap();
                let got = resize_bilinear(&floats, oh, ow).unwrap();
                assert_eq!(
                    bits(&got.data),
                    bits(&reference(&floats, oh, ow)),
                    "f32 {h}x{w}x{c} -> {oh}x{ow}, {pass:?}"
                );
            }
        }
    }

    #[test]
    fn one_scratch_resizes_a_run_of_sizes_as_fresh_ones_do() {
        // Its taps are kept for the next image of the same sizes and recomputed for
        // another: same size again, another input, another output, another channel count.
        let mut scratch = ResizeScratch::default();
        for (h, w, c, oh, ow) in
            [(16, 16, 3, 7, 9), (16, 16, 3, 7, 9), (17, 16, 3, 7, 9), (17, 16, 3, 9, 7), (17, 16, 1, 9, 7)]
        {
            let data: Vec<u8> = (0..h * w * c).map(|i| ((i * 2_654_435_761usize) >> 9) as u8).collect();
            let img = Image::new(h, w, c, data).unwrap();
            let mut got = vec![0.0f32; oh * ow * c];
            // SAFETY: `resize_raw` stores only initialized values.
            let out = unsafe { as_uninit(&mut got) };
            resize_raw(&img.data, h, w, c, oh, ow, out, &mut scratch, |_| {}).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&reference(&img, oh, ow)), "{h}x{w}x{c} -> {oh}x{ow}");
        }
    }

    #[test]
    fn same_size_is_identity_and_constant_stays_constant() {
        let data: Vec<u8> = (0..5 * 7 * 3).map(|i| (i * 37 % 251) as u8).collect();
        let img = Image::new(5, 7, 3, data.clone()).unwrap();
        let same = resize_bilinear(&img, 5, 7).unwrap();
        assert_eq!(same.data, data.iter().map(|&v| f32::from(v)).collect::<Vec<_>>());
        let flat = Image::new(3, 3, 2, vec![9.5f32; 18]).unwrap();
        let up = resize_bilinear(&flat, 11, 4).unwrap();
        assert!(up.data.iter().all(|&v| v == 9.5));
        assert_eq!(up.shape(), [11, 4, 2]);
    }

    #[test]
    fn odd_channel_counts_use_the_generic_path() {
        let img = Image::new(2, 2, 5, (0..20).map(|i| i as f32).collect()).unwrap();
        let one = resize_bilinear(&img, 1, 1).unwrap();
        // The single output sample sits at (0.5, 0.5): the mean of the four pixels.
        let want: Vec<f32> = (0..5).map(|c| (c + (5 + c) + (10 + c) + (15 + c)) as f32 / 4.0).collect();
        assert_eq!(one.data, want);
    }

    #[test]
    fn bad_sizes_are_errors() {
        let img = Image::new(2, 2, 1, vec![0u8; 4]).unwrap();
        assert!(matches!(resize_bilinear(&img, 0, 3), Err(ImageError::Dimensions { .. })));
        let mut small = [0.0f32; 3];
        assert!(matches!(resize_bilinear_into(&img, 2, 2, &mut small), Err(ImageError::BufferSize { .. })));
        let broken = Image { height: 3, width: 2, channels: 1, data: vec![0u8; 4] };
        assert!(resize_bilinear(&broken, 2, 2).is_err());
    }
}
