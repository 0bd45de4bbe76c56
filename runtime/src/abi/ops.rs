//! The per-field operations of a `map` block, on the values generated code holds:
//! scalars (`T`), variable-length lists (`Vec<T>`), tensors ([`Tensor<T>`]) and byte
//! strings (`&[u8]`). Each is a thin, monomorphic wrapper over the runtime's image and
//! column code, so the generated code stays short and the semantics live in one place.
//!
//! Elementwise arithmetic, `cast` and `scale` are generated as closures applied with
//! [`Array::map`] / [`Array::zip`], so one fused loop computes a whole expression.
//!
//! This module holds the containers and the elementwise arithmetic; the operations live
//! by family in `values` (decoding and checking one field's values), `images` and
//! `columns` (filling a batch's columns), all re-exported here: generated code names
//! them as `ops::…`.

use crate::column::{Scalar, Tensor};
use crate::error::BoxError;
use crate::rng::Philox;

mod columns;
mod images;
mod values;

pub use columns::*;
pub use images::*;
pub use values::*;

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
