//! The per-field operations of a `map` block, on the values generated code holds:
//! scalars (`T`), variable-length lists (`Vec<T>`), tensors ([`Tensor<T>`]) and byte
//! strings (`&[u8]`). Each is a thin, monomorphic wrapper over the runtime's image and
//! column code, so the generated code stays short and the semantics live in one place.
//!
//! Elementwise arithmetic, `cast` and `scale` are generated as closures applied with
//! [`Array::map`] / [`Array::zip`], so one fused loop computes a whole expression.

use crate::column::{Scalar, Tensor};
use crate::error::BoxError;
use crate::example::tensor::TensorValue;
use crate::image::{self, Image, Pixel};
use crate::rng::Philox;

/// A value with a flat buffer of numbers: a [`Tensor`] or a `Vec` (variable length).
pub trait Array<T: Scalar>: Sized {
    /// The same container holding another type.
    type Out<U: Scalar>: Array<U>;
    /// The values, row-major.
    fn values(&self) -> &[T];
    /// The values, to change in place.
    fn values_mut(&mut self) -> &mut [T];
    /// The size of the last dimension (channels of an image), 1 for a scalar shape.
    fn last_dim(&self) -> usize;
    /// The container with `values` instead, which must be as many.
    fn with_values<U: Scalar>(&self, values: Vec<U>) -> Self::Out<U>;
    /// The values, without copying.
    fn into_values(self) -> Vec<T>;

    /// Applies `f` to every value.
    #[inline]
    fn map<U: Scalar>(self, f: impl FnMut(T) -> U) -> Self::Out<U> {
        let values = self.values().iter().copied().map(f).collect();
        self.with_values(values)
    }

    /// Applies a fallible `f` to every value.
    #[inline]
    fn try_map<U: Scalar>(self, f: impl FnMut(T) -> Result<U, BoxError>) -> Result<Self::Out<U>, BoxError> {
        let values = self.values().iter().copied().map(f).collect::<Result<Vec<U>, BoxError>>()?;
        Ok(self.with_values(values))
    }

    /// Applies `f` to the values of `self` and `other` pairwise; they must be as many.
    #[inline]
    fn zip<B: Scalar, U: Scalar>(
        self,
        other: &impl Array<B>,
        mut f: impl FnMut(T, B) -> Result<U, BoxError>,
    ) -> Result<Self::Out<U>, BoxError> {
        let (a, b) = (self.values(), other.values());
        if a.len() != b.len() {
            return Err(
                format!("elementwise operation on values of {} and {} elements", a.len(), b.len()).into()
            );
        }
        let values = a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect::<Result<Vec<U>, BoxError>>()?;
        Ok(self.with_values(values))
    }
}

impl<T: Scalar> Array<T> for Tensor<T> {
    type Out<U: Scalar> = Tensor<U>;
    #[inline]
    fn values(&self) -> &[T] {
        self.as_slice()
    }
    #[inline]
    fn values_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
    #[inline]
    fn last_dim(&self) -> usize {
        self.shape().last().copied().unwrap_or(1)
    }
    #[inline]
    fn with_values<U: Scalar>(&self, values: Vec<U>) -> Tensor<U> {
        Tensor::new(self.shape().to_vec(), values).unwrap_or_else(|_| Tensor::from_vec(Vec::new()))
    }
    #[inline]
    fn into_values(self) -> Vec<T> {
        self.into_parts().1
    }
}

impl<T: Scalar> Array<T> for Vec<T> {
    type Out<U: Scalar> = Vec<U>;
    #[inline]
    fn values(&self) -> &[T] {
        self
    }
    #[inline]
    fn values_mut(&mut self) -> &mut [T] {
        self
    }
    #[inline]
    fn last_dim(&self) -> usize {
        1
    }
    #[inline]
    fn with_values<U: Scalar>(&self, values: Vec<U>) -> Vec<U> {
        values
    }
    #[inline]
    fn into_values(self) -> Vec<T> {
        self
    }
}

/// `as`-style numeric conversion between any two value types (`cast`); to `bool` is
/// "not zero", from `bool` is 0 or 1.
pub trait Cast<U> {
    /// The converted value.
    fn cast(self) -> U;
}

// `as` on purpose for every pair: one rule (Rust's `as`) whatever the types.
macro_rules! cast_numbers {
    ($($from:ty),*) => {$(
        #[allow(clippy::cast_lossless)]
        impl Cast<u8> for $from { #[inline(always)] fn cast(self) -> u8 { self as u8 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<i8> for $from { #[inline(always)] fn cast(self) -> i8 { self as i8 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<u16> for $from { #[inline(always)] fn cast(self) -> u16 { self as u16 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<i16> for $from { #[inline(always)] fn cast(self) -> i16 { self as i16 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<i32> for $from { #[inline(always)] fn cast(self) -> i32 { self as i32 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<u32> for $from { #[inline(always)] fn cast(self) -> u32 { self as u32 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<i64> for $from { #[inline(always)] fn cast(self) -> i64 { self as i64 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<u64> for $from { #[inline(always)] fn cast(self) -> u64 { self as u64 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<f32> for $from { #[inline(always)] fn cast(self) -> f32 { self as f32 } }
        #[allow(clippy::cast_lossless)]
        impl Cast<f64> for $from { #[inline(always)] fn cast(self) -> f64 { self as f64 } }
        #[allow(clippy::float_cmp)]
        impl Cast<bool> for $from { #[inline(always)] fn cast(self) -> bool { self != (0 as $from) } }
        impl Cast<$from> for bool { #[inline(always)] fn cast(self) -> $from { u8::from(self) as $from } }
    )*};
}
cast_numbers!(u8, i8, u16, i16, i32, u32, i64, u64, f32, f64);

impl Cast<bool> for bool {
    #[inline(always)]
    fn cast(self) -> bool {
        self
    }
}

/// [`Cast`] as a function, for closures: `cast::<u8, f32>(v)`.
#[inline(always)]
pub fn cast<T: Cast<U>, U>(v: T) -> U {
    v.cast()
}

/// Integer arithmetic that cannot panic: division and remainder by zero are errors (as
/// in TensorFlow), overflow wraps.
pub trait IntArith: Sized + Copy {
    /// `a / b`.
    fn div(self, b: Self) -> Result<Self, BoxError>;
    /// `a % b`.
    fn rem(self, b: Self) -> Result<Self, BoxError>;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl IntArith for $t {
            #[inline(always)]
            fn div(self, b: Self) -> Result<Self, BoxError> {
                if b == 0 { Err("integer division by zero".into()) } else { Ok(self.wrapping_div(b)) }
            }
            #[inline(always)]
            fn rem(self, b: Self) -> Result<Self, BoxError> {
                if b == 0 { Err("integer remainder by zero".into()) } else { Ok(self.wrapping_rem(b)) }
            }
        }
    )*};
}
int_arith!(u8, i8, u16, i16, i32, u32, i64, u64);

/// `a / b` on integers, an error when `b` is zero.
#[inline(always)]
pub fn int_div<T: IntArith>(a: T, b: T) -> Result<T, BoxError> {
    a.div(b)
}

/// `a % b` on integers, an error when `b` is zero.
#[inline(always)]
pub fn int_rem<T: IntArith>(a: T, b: T) -> Result<T, BoxError> {
    a.rem(b)
}

/// The generator of one random operation on one element: keyed by the operation's
/// `seed` and its position `op` among the pipeline's random operations, on the stream of
/// (epoch, element index), so results do not depend on threads or timing.
pub fn element_rng(seed: u64, op: u64, epoch: u64, index: u64) -> Philox {
    let key = seed ^ op.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    Philox::new(key, (epoch << 40) ^ index)
}

/// A value type a byte string decodes to with `decode_raw` (little-endian).
pub trait RawScalar: Scalar {
    /// Bytes per value.
    const SIZE: usize;
    /// The value of `SIZE` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! raw_scalar {
    ($($t:ty),*) => {$(
        impl RawScalar for $t {
            const SIZE: usize = size_of::<$t>();
            #[inline(always)]
            fn from_le(bytes: &[u8]) -> Self {
                let mut a = [0u8; size_of::<$t>()];
                a.copy_from_slice(bytes);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}
raw_scalar!(u8, i8, u16, i16, i32, u32, i64, u64, f32, f64);

/// `decode_raw(bytes, T)`: the bytes as little-endian values (as `tf.io.decode_raw`);
/// a length that is not a multiple of the value size is an error.
pub fn decode_raw<T: RawScalar>(bytes: &[u8]) -> Result<Vec<T>, BoxError> {
    if !bytes.len().is_multiple_of(T::SIZE) {
        return Err(raw_length_error::<T>(bytes.len()));
    }
    let n = bytes.len() / T::SIZE;
    #[cfg(target_endian = "little")]
    {
        // The values' little-endian bytes are their memory: one copy, not one value at
        // a time (`decode_raw` of an image's bytes was 7 % of `image_raw`).
        let mut values: Vec<T> = Vec::with_capacity(n);
        // SAFETY: `RawScalar` is implemented only for primitive integers and floats
        // (`raw_scalar!`), for which every bit pattern is a value and whose in-memory
        // form on a little-endian target is their little-endian bytes; `values` has room
        // for `n` of them, `n * T::SIZE == bytes.len()` bytes, and does not overlap
        // `bytes`.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), values.as_mut_ptr().cast::<u8>(), bytes.len());
            values.set_len(n);
        }
        Ok(values)
    }
    #[cfg(not(target_endian = "little"))]
    Ok(bytes.chunks_exact(T::SIZE).map(T::from_le).collect())
}

/// `reshape(x, [dims])`: the same values in a new shape, which must hold them all.
pub fn reshape<T: Scalar, A: Array<T>>(x: A, shape: &[usize]) -> Result<Tensor<T>, BoxError> {
    let n = x.values().len();
    Tensor::new(shape.to_vec(), x.into_values())
        .map_err(|_| format!("reshape: {n} values do not fit the shape {shape:?}").into())
}

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
    out: &mut Vec<f32>,
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

/// `one_hot(label, depth)`: `depth` floats, 1 at `label`; a label outside `0..depth` is
/// an error.
pub fn one_hot<T: Cast<i64>>(label: T, depth: usize) -> Result<Tensor<f32>, BoxError> {
    Ok(Tensor::from_vec(image::one_hot(label.cast(), depth)?))
}

/// `check_finite(x)` on a list or tensor of floats (tf.debugging.check_numerics): `x`
/// itself when every value is finite, else an error naming `what` (the field) and the
/// first value that is NaN or infinite, by its position in row-major order.
pub fn check_finite<T: Scalar + Cast<f64>, A: Array<T>>(x: A, what: &str) -> Result<A, BoxError> {
    match x.values().iter().position(|v| !v.cast().is_finite()) {
        None => Ok(x),
        Some(i) => {
            let v: f64 = x.values()[i].cast();
            Err(format!("check_finite: `{what}` has {} at index {i}", not_finite(v)).into())
        }
    }
}

/// `check_finite(x)` on one float.
pub fn check_finite_scalar<T: Copy + Cast<f64>>(x: T, what: &str) -> Result<T, BoxError> {
    let v: f64 = x.cast();
    if v.is_finite() { Ok(x) } else { Err(format!("check_finite: `{what}` is {}", not_finite(v)).into()) }
}

/// How an error names a value that is not finite: `NaN`, `inf` or `-inf`.
fn not_finite(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// `normalize(x, mean, std)` in place on floats: `(x - mean[c]) * (1 / std[c])` with `c`
/// the position in the last dimension; one `mean`/`std` value applies to every channel.
pub fn normalize<A: Array<f32>>(mut x: A, mean: &[f32], std: &[f32]) -> Result<A, BoxError> {
    let channels = x.last_dim().max(1);
    let spread = |v: &[f32], what: &str| -> Result<Vec<f32>, BoxError> {
        match v.len() {
            1 => Ok(vec![v[0]; channels]),
            n if n == channels => Ok(v.to_vec()),
            n => Err(format!("normalize: {n} {what} values for {channels} channel(s)").into()),
        }
    };
    let (mean, std) = (spread(mean, "mean")?, spread(std, "std")?);
    if let Some(bad) = std.iter().find(|s| !s.is_finite() || **s == 0.0) {
        return Err(format!("normalize: standard deviation {bad} is not usable").into());
    }
    let inv: Vec<f32> = std.iter().map(|s| 1.0 / s).collect();
    for px in x.values_mut().chunks_exact_mut(channels) {
        for ((v, m), s) in px.iter_mut().zip(&mean).zip(&inv) {
            *v = (*v - m) * s;
        }
    }
    Ok(x)
}

/// `normalize` of a single float.
pub fn normalize_scalar(x: f32, mean: &[f32], std: &[f32]) -> Result<f32, BoxError> {
    Ok(normalize(vec![x], mean, std)?[0])
}

/// Appends one element's values of a fixed-size field to its batch column, checking the
/// count (`per` values a row).
#[inline]
pub fn put<T: Copy>(column: &mut Vec<T>, values: &[T], per: usize, field: &str) -> Result<(), BoxError> {
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
    column: &mut Vec<U>,
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
    column: &mut Vec<U>,
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

fn raw_length_error<T: RawScalar>(len: usize) -> BoxError {
    format!("decode_raw: {len} bytes is not a whole number of {}-byte values", T::SIZE).into()
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
pub fn extend_mapped<T: Copy, U: Copy>(column: &mut Vec<U>, values: &[T], f: impl FnMut(T) -> U) {
    #[cfg(target_arch = "x86_64")]
    if values.len() >= WIDE_MIN_VALUES && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (checked just above).
        unsafe { extend_mapped_avx2(column, values, f) };
        return;
    }
    column.extend(values.iter().copied().map(f));
}

/// Rows shorter than this take the baseline loop (the feature check is not worth it).
const WIDE_MIN_VALUES: usize = 64;

/// A batch column of at least this many bytes is written with non-temporal (streaming)
/// stores, bypassing the caches: it is larger than a core's L2, so its lines would be
/// evicted before the batch is read, and a plain store first reads each line from memory.
/// image_raw's 12.6 MB `f32` column: about 15 % less CPU a batch (BENCHMARKS.md).
const STREAM_STORE_MIN_COLUMN_BYTES: usize = 4 << 20;

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
unsafe fn extend_mapped_avx2<T: Copy, U: Copy>(column: &mut Vec<U>, values: &[T], mut f: impl FnMut(T) -> U) {
    use std::arch::x86_64::{__m256i, _mm_sfence, _mm256_load_si256, _mm256_stream_si256};
    use std::mem::MaybeUninit;
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
    let big = column.capacity().saturating_mul(size) >= STREAM_STORE_MIN_COLUMN_BYTES;
    if !big || size == 0 || 32 % size != 0 || values.len() < 2 * CHUNK_BYTES / size {
        column.extend(values.iter().copied().map(f));
        return;
    }
    let chunk = CHUNK_BYTES / size;
    column.reserve(values.len());
    let start = column.len();
    // SAFETY: `reserve` made room for `values.len()` values past `start`.
    let dst = unsafe { column.as_mut_ptr().add(start) };
    if !(dst as usize).is_multiple_of(size) {
        // A value type aligned to less than its size: no whole number of values reaches
        // a 32-byte boundary.
        column.extend(values.iter().copied().map(f));
        return;
    }
    // Plain stores up to the first 32-byte boundary (`dst` is a multiple of `U`'s size,
    // which divides 32, so a whole number of values gets there).
    let head = ((32 - dst as usize % 32) % 32 / size).min(values.len());
    for (i, v) in values[..head].iter().enumerate() {
        // SAFETY: within the room reserved above.
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
        // SAFETY: `done < values.len()`, within the reserved room; `dst + done` is on a
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
        // SAFETY: within the room reserved above.
        unsafe { dst.add(done + i).write(f(*v)) };
    }
    // Streaming stores are weakly ordered: fence them before the batch is handed over.
    _mm_sfence();
    // SAFETY: every value of `start..start + values.len()` was written above.
    unsafe { column.set_len(start + values.len()) };
}

/// `parse_tensor(bytes, dtype, [dims])`: the `tf.io.serialize_tensor` bytes as a tensor
/// of `T`, whose shape must have the rank of `dims` and each `Some` size (`None`: a named
/// dimension, any size).
pub fn parse_tensor<T: Scalar + TensorValue>(
    bytes: &[u8],
    dims: &[Option<usize>],
) -> Result<Tensor<T>, BoxError> {
    let (shape, values) =
        crate::example::tensor::parse_tensor::<T>(bytes).map_err(|e| format!("parse_tensor: {e}"))?;
    let fits = shape.len() == dims.len() && shape.iter().zip(dims).all(|(s, d)| d.is_none_or(|d| d == *s));
    if !fits {
        let want: Vec<String> = dims.iter().map(|d| d.map_or("_".to_string(), |d| d.to_string())).collect();
        return Err(format!(
            "parse_tensor: the tensor's shape is {shape:?}, not the [{}] declared",
            want.join(", ")
        )
        .into());
    }
    Tensor::new(shape, values).map_err(|e| format!("parse_tensor: {e}").into())
}

/// `parse_tensor(bytes, dtype, [])`: a scalar tensor's value.
pub fn parse_tensor_scalar<T: Scalar + TensorValue>(bytes: &[u8]) -> Result<T, BoxError> {
    let (shape, values) =
        crate::example::tensor::parse_tensor::<T>(bytes).map_err(|e| format!("parse_tensor: {e}"))?;
    match (shape.is_empty(), values.first()) {
        (true, Some(v)) => Ok(*v),
        _ => Err(format!("parse_tensor: the tensor's shape is {shape:?}, not the scalar [] declared").into()),
    }
}

/// `parse_tensor(bytes, dtype)`: every value of a tensor of any shape, in row-major order.
pub fn parse_tensor_values<T: Scalar + TensorValue>(bytes: &[u8]) -> Result<Vec<T>, BoxError> {
    let (_, values) =
        crate::example::tensor::parse_tensor::<T>(bytes).map_err(|e| format!("parse_tensor: {e}"))?;
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_raw_copies_little_endian_values_and_rejects_partial_ones() {
        let bytes: Vec<u8> = (0u8..=255).cycle().take(4096).collect();
        let one_by_one = |size: usize| bytes.chunks_exact(size).map(|c| c.to_vec()).collect::<Vec<_>>();
        assert_eq!(decode_raw::<u8>(&bytes).unwrap(), bytes);
        let u16s: Vec<u16> = one_by_one(2).iter().map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(decode_raw::<u16>(&bytes).unwrap(), u16s);
        let f32s: Vec<u32> = decode_raw::<f32>(&bytes).unwrap().iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> =
            one_by_one(4).iter().map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(f32s, want);
        let i64s = decode_raw::<i64>(&bytes[..16]).unwrap();
        assert_eq!(
            i64s,
            [
                i64::from_le_bytes(bytes[..8].try_into().unwrap()),
                i64::from_le_bytes(bytes[8..16].try_into().unwrap())
            ]
        );
        assert!(decode_raw::<u32>(&bytes[..6]).is_err());
    }

    #[test]
    fn the_wide_loop_gives_the_bits_of_the_baseline_loop() {
        // Rows long enough for the vector path; every u8 value, and floats of every kind.
        let bytes: Vec<u8> = (0u8..=255).cycle().take(12_288).collect();
        let f = |v: u8| -> f32 { cast::<u8, f32>(v) / 255f32 };
        let mut wide = Vec::new();
        extend_mapped(&mut wide, &bytes, f);
        let base: Vec<f32> = bytes.iter().copied().map(f).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&wide), bits(&base));
        let floats: Vec<f32> = (0..4096u32).map(|i| f32::from_bits(i.wrapping_mul(0x9e37_79b9))).collect();
        let g = |x: f32| -> f32 { (x * 0.37 - 1.5) / 3.0 + x.sqrt() };
        let mut wide = Vec::new();
        extend_mapped(&mut wide, &floats, g);
        let base: Vec<f32> = floats.iter().copied().map(g).collect();
        assert_eq!(bits(&wide), bits(&base));
    }

    #[test]
    fn a_big_column_written_with_streaming_stores_holds_the_bits_of_the_baseline_loop() {
        // A column past the streaming size, rows starting at every alignment and of lengths
        // that are not whole chunks, after values already in the column.
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        let f = |v: u8| -> f32 { cast::<u8, f32>(v) / 255f32 };
        let g = |v: u8| -> f64 { f64::from(v).sqrt() - 3.0 };
        let big = STREAM_STORE_MIN_COLUMN_BYTES;
        let bits32 = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let bits64 = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for lead in 0..9 {
            for len in [64, 100, 336, 512, 513, 1000, 12_288, 20_000 - 9] {
                let row = &bytes[lead..lead + len];
                let mut wide: Vec<f32> = Vec::with_capacity(big / 4);
                wide.extend((0..lead).map(|i| i as f32));
                let mut base = wide.clone();
                extend_mapped(&mut wide, row, f);
                base.extend(row.iter().copied().map(f));
                assert_eq!(bits32(&wide), bits32(&base), "f32, {lead} before, {len} values");
                let mut wide: Vec<f64> = Vec::with_capacity(big / 8);
                wide.extend((0..lead).map(|i| i as f64));
                let mut base = wide.clone();
                extend_mapped(&mut wide, row, g);
                base.extend(row.iter().copied().map(g));
                assert_eq!(bits64(&wide), bits64(&base), "f64, {lead} before, {len} values");
            }
        }
    }

    #[test]
    fn put_map_appends_what_put_of_array_map_appends_and_checks_the_row_size() {
        let image = Tensor::new(vec![2, 2, 3], (0u8..12).map(|v| v * 21).collect()).unwrap();
        let f = |v: u8| -> f32 { cast::<u8, f32>(v) / 255f32 };
        let (mut mapped, mut direct) = (vec![1.5f32], vec![1.5f32]);
        put(&mut mapped, Array::map(image.clone(), f).as_slice(), 12, "image").unwrap();
        put_map(&mut direct, &image, 12, "image", f).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&direct), bits(&mapped));
        let err = put_map(&mut direct, &image, 16, "image", f).unwrap_err().to_string();
        assert_eq!(err, "field `image`: 12 values, but its batch column holds 16 per row");
        assert_eq!(direct.len(), 13, "nothing appended on an error");
    }

    /// `decode_raw`, `reshape` and `put_map` one by one, as the generated code did before
    /// `put_raw_map`.
    fn unfused<T: RawScalar, U: Copy>(
        column: &mut Vec<U>,
        bytes: &[u8],
        shape: &[usize],
        per: usize,
        f: impl FnMut(T) -> U,
    ) -> Result<(), BoxError> {
        let values = reshape(decode_raw::<T>(bytes)?, shape)?;
        put_map(column, &values, per, "x", f)
    }

    #[test]
    fn put_raw_map_appends_the_bits_and_the_errors_of_the_steps_one_by_one() {
        let bytes: Vec<u8> = (0..4100u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // u8 in place, every byte value, a row long enough for the wide loop.
        let f = |v: u8| -> f32 { cast::<u8, f32>(v) / 255f32 };
        let (mut a, mut b) = (vec![0.5f32], vec![0.5f32]);
        put_raw_map(&mut a, &bytes[..4096], &[16, 16, 16], 4096, "x", f).unwrap();
        unfused(&mut b, &bytes[..4096], &[16, 16, 16], 4096, f).unwrap();
        assert_eq!(bits(&a), bits(&b));
        // f32 and i16 at every alignment of the bytes (in place when aligned, decoded when
        // not), and the identity.
        for skew in 0..4 {
            let raw = &bytes[skew..skew + 4096];
            let g = |v: f32| -> f32 { v * 0.5 + 1.0 };
            let (mut a, mut b) = (Vec::new(), Vec::new());
            put_raw_map(&mut a, raw, &[32, 32], 1024, "x", g).unwrap();
            unfused(&mut b, raw, &[32, 32], 1024, g).unwrap();
            assert_eq!(bits(&a), bits(&b), "f32 at skew {skew}");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            put_raw_map(&mut a, raw, &[2048], 2048, "x", |v: i16| v).unwrap();
            unfused(&mut b, raw, &[2048], 2048, |v: i16| v).unwrap();
            assert_eq!(a, b, "i16 at skew {skew}");
        }
        // The same messages, in the same order: a partial value, then the shape, then the
        // column's row size; nothing appended.
        let mut a: Vec<u16> = vec![7];
        let err = |r: Result<(), BoxError>| r.unwrap_err().to_string();
        let id = |v: u16| v;
        for (len, shape, per) in
            [(5, &[2usize][..], 2), (6, &[2, 2], 4), (8, &[2, 2], 6), (8, &[usize::MAX, 2], 4)]
        {
            let mut b: Vec<u16> = vec![7];
            assert_eq!(
                err(put_raw_map(&mut a, &bytes[..len], shape, per, "x", id)),
                err(unfused(&mut b, &bytes[..len], shape, per, id)),
                "{len} bytes as {shape:?}, {per} a row"
            );
        }
        assert_eq!(a, [7], "nothing appended on an error");
        assert_eq!(
            err(put_raw_map(&mut a, &bytes[..5], &[2], 2, "x", id)),
            "decode_raw: 5 bytes is not a whole number of 2-byte values"
        );
    }

    #[test]
    fn check_finite_passes_finite_values_and_names_the_first_that_is_not() {
        let err = |r: Result<Vec<f32>, BoxError>| r.unwrap_err().to_string();
        assert_eq!(check_finite(vec![1.0f32, -2.5, 0.0], "x").unwrap(), [1.0, -2.5, 0.0]);
        assert_eq!(
            err(check_finite(vec![1.0f32, f32::INFINITY, f32::NAN], "x")),
            "check_finite: `x` has inf at index 1"
        );
        assert_eq!(err(check_finite(vec![f32::NEG_INFINITY], "y")), "check_finite: `y` has -inf at index 0");
        let t = Tensor::new(vec![2, 2], vec![0.5f64, 1.0, f64::NAN, 2.0]).unwrap();
        let e = check_finite(t, "image").unwrap_err().to_string();
        assert_eq!(e, "check_finite: `image` has NaN at index 2");
        let t = Tensor::new(vec![1, 2], vec![0.5f64, 1.0]).unwrap();
        assert_eq!(check_finite(t.clone(), "image").unwrap(), t);
        assert_eq!(check_finite_scalar(3.0f32, "r").unwrap(), 3.0);
        assert_eq!(
            check_finite_scalar(1.0f64 / 0.0, "r").unwrap_err().to_string(),
            "check_finite: `r` is inf"
        );
        assert_eq!(check_finite_scalar(f32::NAN, "r").unwrap_err().to_string(), "check_finite: `r` is NaN");
    }
}
