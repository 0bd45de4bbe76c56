//! Operations that decode or check one field's values: `decode_raw`, `parse_tensor`,
//! `reshape`, `one_hot`, `check_finite` and `normalize`.

use super::{Array, Cast};
use crate::column::{Scalar, Tensor};
use crate::error::BoxError;
use crate::example::tensor::TensorValue;
use crate::image;

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

pub(super) fn raw_length_error<T: RawScalar>(len: usize) -> BoxError {
    format!("decode_raw: {len} bytes is not a whole number of {}-byte values", T::SIZE).into()
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
