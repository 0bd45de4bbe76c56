//! The image operations: JPEG/PNG decoding (alone or fused with resize and normalize),
//! resize, crops, flips and layout transposes, on tensors of pixels.

use crate::column::{Scalar, Tensor};
use crate::error::BoxError;
use crate::image::{self, Image, Pixel};
use crate::rng::Philox;

fn to_tensor<T: Scalar + Pixel>(image: Image<T>) -> Tensor<T> {
    let shape = vec![image.height, image.width, image.channels];
    let n = image.data.len();
    Tensor::new(shape, image.data).unwrap_or_else(|_| Tensor::from_vec(vec![T::default(); n]))
}

fn to_image<T: Scalar + Pixel>(op: &str, t: &Tensor<T>) -> Result<Image<T>, BoxError> {
    match *t.shape() {
        [h, w, c] => Ok(Image::new(h, w, c, t.as_slice().to_vec())?),
        _ => {
            Err(format!("{op}: expected an image [height, width, channels], found shape {:?}", t.shape())
                .into())
        }
    }
}

/// `decode_jpeg(bytes, channels)`.
pub fn decode_jpeg(bytes: &[u8], channels: usize) -> Result<Tensor<u8>, BoxError> {
    Ok(to_tensor(image::decode_jpeg(bytes, channels)?))
}

/// `decode_jpeg(bytes, channels, max_pixels: n)`: an image whose header claims more than
/// `max_pixels` pixels is an error naming the limit, before anything is allocated.
pub fn decode_jpeg_limited(bytes: &[u8], channels: usize, max_pixels: usize) -> Result<Tensor<u8>, BoxError> {
    Ok(to_tensor(image::decode_jpeg_limited(bytes, channels, max_pixels)?))
}

/// `decode_png(bytes, channels)` (8-bit components).
pub fn decode_png(bytes: &[u8], channels: usize) -> Result<Tensor<u8>, BoxError> {
    Ok(to_tensor(image::decode_png(bytes, channels)?))
}

/// `decode_png(bytes, channels, max_pixels: n)`, as [`decode_jpeg_limited`].
pub fn decode_png_limited(bytes: &[u8], channels: usize, max_pixels: usize) -> Result<Tensor<u8>, BoxError> {
    Ok(to_tensor(image::decode_png_limited(bytes, channels, max_pixels)?))
}

/// `resize(image, h, w)`: bilinear, as `tf.image.resize`; floats out.
pub fn resize<T: Scalar + Pixel>(t: &Tensor<T>, h: usize, w: usize) -> Result<Tensor<f32>, BoxError> {
    Ok(to_tensor(image::resize_bilinear(&to_image("resize", t)?, h, w)?))
}

/// `decode_jpeg(bytes, 3)` → `resize(h, w)` → `scale(1 / 255)` → `normalize(mean, std)`
/// in one pass, written into `out` (`h * w * 3` floats, a batch column's row): the
/// fused form generated code uses for exactly that chain (bit-identical to it).
/// `mean` and `std` hold one value, or one per channel.
pub fn decode_resize_normalize_into(
    bytes: &[u8],
    h: usize,
    w: usize,
    mean: &[f32],
    std: &[f32],
    out: &mut [f32],
) -> Result<(), BoxError> {
    let (mean, std) = (three(mean, "mean")?, three(std, "std")?);
    Ok(image::decode_resize_normalize(bytes, h, w, mean, std, out)?)
}

/// [`decode_resize_normalize_into`] for `decode_jpeg(bytes, 3, max_pixels: n)`: a JPEG
/// whose header claims more than `max_pixels` pixels is an error naming the limit.
pub fn decode_resize_normalize_limited_into(
    bytes: &[u8],
    max_pixels: usize,
    h: usize,
    w: usize,
    mean: &[f32],
    std: &[f32],
    out: &mut [f32],
) -> Result<(), BoxError> {
    let (mean, std) = (three(mean, "mean")?, three(std, "std")?);
    Ok(image::decode_resize_normalize_limited(bytes, max_pixels, h, w, mean, std, out)?)
}

/// [`decode_resize_normalize_into`] (of at most `max_pixels` pixels when given) appending
/// the pixels to a batch column: written once into its spare capacity, no zeroed slot
/// first. On an error nothing is appended.
pub fn decode_resize_normalize_extend(
    bytes: &[u8],
    max_pixels: Option<usize>,
    h: usize,
    w: usize,
    mean: &[f32],
    std: &[f32],
    out: &mut impl crate::column::Append<f32>,
) -> Result<(), BoxError> {
    let (mean, std) = (three(mean, "mean")?, three(std, "std")?);
    Ok(image::decode_resize_normalize_extend(bytes, max_pixels, h, w, mean, std, out)?)
}

/// `normalize`'s one value, or one per channel, as three.
fn three(v: &[f32], what: &str) -> Result<[f32; 3], BoxError> {
    match *v {
        [x] => Ok([x; 3]),
        [a, b, c] => Ok([a, b, c]),
        _ => Err(format!("normalize: {} {what} values for 3 channels", v.len()).into()),
    }
}

/// `center_crop(image, h, w)`.
pub fn center_crop<T: Scalar + Pixel>(t: &Tensor<T>, h: usize, w: usize) -> Result<Tensor<T>, BoxError> {
    Ok(to_tensor(image::center_crop(&to_image("center_crop", t)?, h, w)?))
}

/// `random_crop(image, h, w, seed)`.
pub fn random_crop<T: Scalar + Pixel>(
    t: &Tensor<T>,
    h: usize,
    w: usize,
    rng: &mut Philox,
) -> Result<Tensor<T>, BoxError> {
    Ok(to_tensor(image::random_crop(&to_image("random_crop", t)?, h, w, rng)?))
}

/// `random_flip(x, seed)`: with probability ½ (one draw whatever the value), an image is
/// mirrored left to right, a list reversed; a scalar stays as it is.
pub trait Flip: Sized {
    /// The value, flipped or not.
    fn random_flip(self, rng: &mut Philox) -> Self;
}

impl<T: Scalar + Pixel> Flip for Tensor<T> {
    fn random_flip(mut self, rng: &mut Philox) -> Self {
        if rng.next_f32() >= 0.5 {
            return self;
        }
        let shape = self.shape().to_vec();
        match shape[..] {
            [_, w, c] if w > 0 && c > 0 => {
                for row in self.as_mut_slice().chunks_exact_mut(w * c) {
                    for x in 0..w / 2 {
                        let (left, right) = row.split_at_mut((w - 1 - x) * c);
                        left[x * c..x * c + c].swap_with_slice(&mut right[..c]);
                    }
                }
            }
            [_, w] if w > 0 => {
                for row in self.as_mut_slice().chunks_exact_mut(w) {
                    row.reverse();
                }
            }
            _ => self.as_mut_slice().reverse(),
        }
        self
    }
}

impl<T: Scalar> Flip for Vec<T> {
    fn random_flip(mut self, rng: &mut Philox) -> Self {
        if rng.next_f32() < 0.5 {
            self.reverse();
        }
        self
    }
}

macro_rules! flip_scalar {
    ($($t:ty),*) => {$(
        impl Flip for $t {
            fn random_flip(self, rng: &mut Philox) -> Self {
                let _ = rng.next_f32();
                self
            }
        }
    )*};
}
flip_scalar!(bool, u8, i8, u16, i16, i32, u32, i64, u64, f32, f64);

/// `transpose(x, chw)`: `[h, w, c]` → `[c, h, w]`.
pub fn transpose_chw<T: Scalar>(t: &Tensor<T>) -> Result<Tensor<T>, BoxError> {
    let [h, w, c] = *t.shape() else { return Err(rank3("transpose", t.shape())) };
    let src = t.as_slice();
    let mut out = Vec::with_capacity(src.len());
    for ch in 0..c {
        out.extend((0..h * w).map(|i| src[i * c + ch]));
    }
    Ok(Tensor::new(vec![c, h, w], out)?)
}

/// `transpose(x, hwc)`: `[c, h, w]` → `[h, w, c]`.
pub fn transpose_hwc<T: Scalar>(t: &Tensor<T>) -> Result<Tensor<T>, BoxError> {
    let [c, h, w] = *t.shape() else { return Err(rank3("transpose", t.shape())) };
    let src = t.as_slice();
    let plane = h * w;
    let mut out = Vec::with_capacity(src.len());
    for i in 0..plane {
        out.extend((0..c).map(|ch| src[ch * plane + i]));
    }
    Ok(Tensor::new(vec![h, w, c], out)?)
}

#[cold]
fn rank3(op: &str, shape: &[usize]) -> BoxError {
    format!("{op}: expected a value of rank 3, found shape {shape:?}").into()
}
