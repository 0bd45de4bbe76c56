//! Per-pixel and geometric operations on [`Image`]s: scaling, per-channel
//! normalization, type casts, centre and random crops, horizontal flips, HWC → CHW,
//! and one-hot labels.
//!
//! Random operations draw from a caller's [`Philox`] stream, a fixed number of words
//! per call whatever the image size, so a pipeline keyed by (seed, epoch, record) gives
//! the same augmentation on any thread count.

use super::{ChwImage, Image, ImageError, Pixel, check_dims};
use crate::rng::Philox;

/// Multiplies every component by `factor` in place (`x * factor`; e.g. `1.0 / 255.0`).
pub fn scale(image: &mut Image<f32>, factor: f32) {
    for v in &mut image.data {
        *v *= factor;
    }
}

/// Normalizes each channel in place: `(x - mean[c]) * (1 / std[c])`. Multiplying by the
/// reciprocal is within one rounding of TensorFlow's `(x - mean) / std`.
///
/// `mean` and `std` need one value per channel; a zero or non-finite `std` is an error.
pub fn normalize(image: &mut Image<f32>, mean: &[f32], std: &[f32]) -> Result<(), ImageError> {
    let (mean, inv_std) = normalizer("normalize", image.channels, mean, std)?;
    image.validate("normalize")?;
    for px in image.data.chunks_exact_mut(image.channels) {
        for ((v, m), s) in px.iter_mut().zip(&mean).zip(&inv_std) {
            *v = (*v - m) * s;
        }
    }
    Ok(())
}

/// Checks per-channel statistics and returns the means and reciprocal deviations.
pub(crate) fn normalizer(
    op: &'static str,
    channels: usize,
    mean: &[f32],
    std: &[f32],
) -> Result<(Vec<f32>, Vec<f32>), ImageError> {
    if mean.len() != channels || std.len() != channels {
        return Err(ImageError::Argument {
            op,
            reason: format!(
                "{} means and {} deviations given for {channels} channels",
                mean.len(),
                std.len()
            ),
        });
    }
    if let Some(bad) = std.iter().find(|s| !s.is_finite() || **s == 0.0) {
        return Err(ImageError::Argument { op, reason: format!("standard deviation {bad} is not usable") });
    }
    if let Some(bad) = mean.iter().find(|m| !m.is_finite()) {
        return Err(ImageError::Argument { op, reason: format!("mean {bad} is not finite") });
    }
    Ok((mean.to_vec(), std.iter().map(|s| 1.0 / s).collect()))
}

/// Converts every component to another type: `u8 → f32` keeps the value (`200 →
/// 200.0`, as `tf.cast`), `f32 → u8` truncates toward zero and saturates at 0 and 255
/// (NaN becomes 0). For `[0, 1]` scaling use [`scale`] after the cast.
pub fn cast<T: Pixel, U: Pixel>(image: &Image<T>) -> Image<U> {
    Image {
        height: image.height,
        width: image.width,
        channels: image.channels,
        data: image.data.iter().map(|v| U::from_f32(v.to_f32())).collect(),
    }
}

/// Copies the `crop_h × crop_w` window whose top-left corner is `(top, left)`.
fn crop<T: Pixel>(image: &Image<T>, top: usize, left: usize, crop_h: usize, crop_w: usize) -> Image<T> {
    let c = image.channels;
    let mut data = Vec::with_capacity(crop_h * crop_w * c);
    for y in top..top + crop_h {
        let start = (y * image.width + left) * c;
        data.extend_from_slice(&image.data[start..start + crop_w * c]);
    }
    Image { height: crop_h, width: crop_w, channels: c, data }
}

/// Checks that a crop fits.
fn check_crop<T: Pixel>(
    op: &'static str,
    image: &Image<T>,
    crop_h: usize,
    crop_w: usize,
) -> Result<(), ImageError> {
    image.validate(op)?;
    check_dims(op, crop_h, crop_w, image.channels)?;
    if crop_h > image.height || crop_w > image.width {
        return Err(ImageError::Crop { op, crop_h, crop_w, height: image.height, width: image.width });
    }
    Ok(())
}

/// The central `crop_h × crop_w` window, offset by `(height - crop_h) / 2` rows and
/// `(width - crop_w) / 2` columns (rounded down, as `tf.image.resize_with_crop_or_pad`
/// crops). A window larger than the image is an error.
pub fn center_crop<T: Pixel>(image: &Image<T>, crop_h: usize, crop_w: usize) -> Result<Image<T>, ImageError> {
    check_crop("center_crop", image, crop_h, crop_w)?;
    Ok(crop(image, (image.height - crop_h) / 2, (image.width - crop_w) / 2, crop_h, crop_w))
}

/// A `crop_h × crop_w` window at a uniformly random position, as `tf.image.random_crop`.
/// Draws exactly two words from `rng` (row offset, then column offset), even when the
/// window fills the image. A window larger than the image is an error (and draws
/// nothing).
pub fn random_crop<T: Pixel>(
    image: &Image<T>,
    crop_h: usize,
    crop_w: usize,
    rng: &mut Philox,
) -> Result<Image<T>, ImageError> {
    check_crop("random_crop", image, crop_h, crop_w)?;
    let top = below(rng, image.height - crop_h + 1);
    let left = below(rng, image.width - crop_w + 1);
    Ok(crop(image, top, left, crop_h, crop_w))
}

/// A uniform integer in `0..n` from one 32-bit draw, or from two for `n` beyond `u32`.
fn below(rng: &mut Philox, n: usize) -> usize {
    match u32::try_from(n) {
        Ok(n) => rng.below(n) as usize,
        Err(_) => (rng.next_u64() % n as u64) as usize,
    }
}

/// Mirrors the image left to right in place.
pub fn flip_left_right<T: Pixel>(image: &mut Image<T>) {
    let (w, c) = (image.width, image.channels);
    if w == 0 || c == 0 {
        return;
    }
    for row in image.data.chunks_exact_mut(w * c) {
        for x in 0..w / 2 {
            let (left, right) = row.split_at_mut((w - 1 - x) * c);
            left[x * c..x * c + c].swap_with_slice(&mut right[..c]);
        }
    }
}

/// Mirrors the image left to right with probability ½, as
/// `tf.image.random_flip_left_right`: draws one word from `rng` and flips when the
/// uniform float it gives is below 0.5. Returns whether it flipped.
pub fn random_flip_left_right<T: Pixel>(image: &mut Image<T>, rng: &mut Philox) -> bool {
    let flip = rng.next_f32() < 0.5;
    if flip {
        flip_left_right(image);
    }
    flip
}

/// Transposes an HWC image into planar CHW layout. An image whose fields disagree
/// (its data not `height * width * channels` long) is an error.
pub fn hwc_to_chw<T: Pixel>(image: &Image<T>) -> Result<ChwImage<T>, ImageError> {
    image.validate("hwc_to_chw")?;
    let (h, w, c) = (image.height, image.width, image.channels);
    let mut data = vec![T::default(); image.data.len()];
    let plane = h * w;
    for (i, px) in image.data.chunks_exact(c).enumerate() {
        for (ch, &v) in px.iter().enumerate() {
            data[ch * plane + i] = v;
        }
    }
    Ok(ChwImage { channels: c, height: h, width: w, data })
}

/// A one-hot vector of `classes` floats with 1.0 at `label`. Unlike `tf.one_hot`, which
/// gives all zeros for a label out of range, a label outside `0..classes` is an error:
/// in a training pipeline it is a data bug.
pub fn one_hot(label: i64, classes: usize) -> Result<Vec<f32>, ImageError> {
    let mut out = vec![0.0; classes];
    one_hot_into(label, classes, &mut out)?;
    Ok(out)
}

/// [`one_hot`] into a caller's buffer of exactly `classes` floats (a batch slot).
pub fn one_hot_into(label: i64, classes: usize, out: &mut [f32]) -> Result<(), ImageError> {
    if out.len() != classes {
        return Err(ImageError::BufferSize { op: "one_hot", expected: classes, got: out.len() });
    }
    let index = usize::try_from(label).ok().filter(|&i| i < classes).ok_or_else(|| ImageError::Argument {
        op: "one_hot",
        reason: format!("label {label} is outside 0..{classes}"),
    })?;
    out.fill(0.0);
    out[index] = 1.0;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(h: usize, w: usize, c: usize) -> Image<u8> {
        Image::new(h, w, c, (0..h * w * c).map(|i| i as u8).collect()).unwrap()
    }

    #[test]
    fn crops_take_the_right_window() {
        let img = ramp(4, 5, 2);
        let c = center_crop(&img, 2, 2).unwrap();
        // Rows 1..3, columns 1..3.
        assert_eq!(c.data, vec![12, 13, 14, 15, 22, 23, 24, 25]);
        assert_eq!(center_crop(&img, 4, 5).unwrap(), img);
        assert!(matches!(center_crop(&img, 5, 1), Err(ImageError::Crop { .. })));
        assert!(matches!(center_crop(&img, 0, 1), Err(ImageError::Dimensions { .. })));
    }

    #[test]
    fn random_crop_is_reproducible_and_covers_all_offsets() {
        let img = ramp(3, 3, 1);
        let mut seen = std::collections::BTreeSet::new();
        for stream in 0..200 {
            let a = random_crop(&img, 2, 2, &mut Philox::new(5, stream)).unwrap();
            let b = random_crop(&img, 2, 2, &mut Philox::new(5, stream)).unwrap();
            assert_eq!(a, b);
            seen.insert(a.data[0]);
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0, 1, 3, 4]);
        let mut rng = Philox::new(1, 1);
        random_crop(&img, 3, 3, &mut rng).unwrap();
        let mut fresh = Philox::new(1, 1);
        fresh.next_u32();
        fresh.next_u32();
        assert_eq!(rng.next_u32(), fresh.next_u32(), "two draws per crop");
    }

    #[test]
    fn flips_mirror_pixels_and_are_involutions() {
        let mut img = ramp(2, 3, 2);
        flip_left_right(&mut img);
        assert_eq!(img.data, vec![4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7]);
        flip_left_right(&mut img);
        assert_eq!(img, ramp(2, 3, 2));
        let flips = (0..1000).filter(|&s| random_flip_left_right(&mut img, &mut Philox::new(9, s))).count();
        assert!((400..600).contains(&flips), "{flips}");
    }

    #[test]
    fn normalize_scale_cast_chw_one_hot() {
        let mut f = cast::<u8, f32>(&ramp(1, 2, 3));
        scale(&mut f, 2.0);
        assert_eq!(f.data, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        normalize(&mut f, &[1.0, 2.0, 3.0], &[1.0, 2.0, 0.5]).unwrap();
        assert_eq!(f.data, vec![-1.0, 0.0, 2.0, 5.0, 3.0, 14.0]);
        assert!(normalize(&mut f, &[0.0; 2], &[1.0; 2]).is_err());
        assert!(normalize(&mut f, &[0.0; 3], &[1.0, 0.0, 1.0]).is_err());
        let back = cast::<f32, u8>(&Image::new(1, 1, 3, vec![-3.0, 7.9, 300.0]).unwrap());
        assert_eq!(back.data, vec![0, 7, 255]);
        let chw = hwc_to_chw(&ramp(2, 2, 3)).unwrap();
        assert_eq!(chw.shape(), [3, 2, 2]);
        assert_eq!(chw.data, vec![0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]);
        assert_eq!(one_hot(2, 4).unwrap(), vec![0.0, 0.0, 1.0, 0.0]);
        assert!(one_hot(4, 4).is_err() && one_hot(-1, 4).is_err());
        assert!(one_hot_into(0, 3, &mut [0.0; 2]).is_err());
    }
}
