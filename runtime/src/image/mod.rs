//! Image operations for input pipelines: JPEG/PNG decoding, bilinear resizing that
//! matches TensorFlow, per-pixel ops, crops and flips, and a fused
//! decode → resize → normalize path that writes straight into a batch column.
//!
//! Images are owned [`Image<T>`] values in HWC layout (row-major, channels last, the
//! layout `tf.io.decode_jpeg` returns); [`hwc_to_chw`] turns one into a [`ChwImage<T>`]
//! for frameworks that want planes. Every operation reports bad input (a corrupt JPEG,
//! a crop larger than the image, a wrong buffer size) as an [`ImageError`], never a
//! panic; `ImageError` converts into [`crate::Error`] (and into a stage's `BoxError`).
//!
//! Random operations take a [`Philox`](crate::rng::Philox) stream from the caller, so a
//! result is a pure function of (seed, stream, position) and never of thread timing.
//!
//! - [`decode`]: [`decode_jpeg`] (zune-jpeg) and [`decode_png`] (zune-png);
//! - [`resize`]: [`resize_bilinear`], `tf.image.resize(method='bilinear', antialias=False)`;
//! - [`ops`]: [`scale`], [`normalize`], [`cast`], [`center_crop`], [`random_crop`],
//!   [`flip_left_right`], [`random_flip_left_right`], [`hwc_to_chw`], [`one_hot`];
//! - [`fused`]: [`decode_resize_normalize`], the benchmark's JPEG pipeline in one pass.

pub mod decode;
pub mod fused;
pub mod ops;
pub mod resize;

pub use decode::{
    decode_jpeg, decode_jpeg_into, decode_jpeg_into_limited, decode_jpeg_limited, decode_png,
    decode_png_limited,
};
pub use fused::{
    Scratch, decode_resize_normalize, decode_resize_normalize_extend, decode_resize_normalize_limited,
    decode_resize_normalize_with,
};
pub use ops::{
    cast, center_crop, flip_left_right, hwc_to_chw, normalize, one_hot, one_hot_into, random_crop,
    random_flip_left_right, scale,
};
pub use resize::{resize_bilinear, resize_bilinear_into};

/// A pixel component type: what an [`Image`] may hold.
pub trait Pixel: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    /// The value as a float, unscaled (`200u8` is `200.0`).
    fn to_f32(self) -> f32;
    /// A float converted with Rust's `as` semantics: truncation toward zero, saturation
    /// at the type's bounds, NaN to 0 (for `u8`, what `tf.cast` gives in range).
    fn from_f32(v: f32) -> Self;
}

impl Pixel for u8 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as u8
    }
}

impl Pixel for u16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as u16
    }
}

impl Pixel for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

/// The other numeric types, so every per-field image operation works on any dtype:
/// `as` conversions both ways (integers round toward zero and saturate).
macro_rules! pixel_as {
    ($($t:ty),*) => {$(
        #[allow(clippy::cast_lossless)]
        impl Pixel for $t {
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
        }
    )*};
}
pixel_as!(i8, i16, i32, u32, i64, u64, f64);

impl Pixel for bool {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        if self { 1.0 } else { 0.0 }
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v != 0.0
    }
}

/// An owned image in HWC layout: `data[(y * width + x) * channels + c]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Image<T> {
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Components per pixel (1 grey, 3 RGB, 4 RGBA, or any other count).
    pub channels: usize,
    /// `height * width * channels` components, channels last.
    pub data: Vec<T>,
}

impl<T: Pixel> Image<T> {
    /// An image from its HWC components; `data` must hold exactly
    /// `height * width * channels` of them and no dimension may be zero.
    pub fn new(height: usize, width: usize, channels: usize, data: Vec<T>) -> Result<Self, ImageError> {
        check_dims("Image::new", height, width, channels)?;
        let expected = height * width * channels;
        if data.len() != expected {
            return Err(ImageError::BufferSize { op: "Image::new", expected, got: data.len() });
        }
        Ok(Image { height, width, channels, data })
    }

    /// An image of `T::default()` (zeros).
    pub fn zeros(height: usize, width: usize, channels: usize) -> Result<Self, ImageError> {
        check_dims("Image::zeros", height, width, channels)?;
        Ok(Image { height, width, channels, data: vec![T::default(); height * width * channels] })
    }

    /// `[height, width, channels]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.height, self.width, self.channels]
    }

    /// The components of pixel `(y, x)`, or `None` outside the image.
    pub fn pixel(&self, y: usize, x: usize) -> Option<&[T]> {
        if y >= self.height || x >= self.width {
            return None;
        }
        let i = (y * self.width + x) * self.channels;
        self.data.get(i..i + self.channels)
    }

    /// Checks that the fields agree (they are public, so a caller may have changed them).
    pub(crate) fn validate(&self, op: &'static str) -> Result<(), ImageError> {
        check_dims(op, self.height, self.width, self.channels)?;
        let expected = self.height * self.width * self.channels;
        if self.data.len() != expected {
            return Err(ImageError::BufferSize { op, expected, got: self.data.len() });
        }
        Ok(())
    }
}

/// An owned image in CHW (planar) layout, as PyTorch models take it:
/// `data[(c * height + y) * width + x]`. Made by [`hwc_to_chw`].
#[derive(Debug, Clone, PartialEq)]
pub struct ChwImage<T> {
    /// Planes.
    pub channels: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// `channels * height * width` components, one plane after another.
    pub data: Vec<T>,
}

impl<T> ChwImage<T> {
    /// `[channels, height, width]`.
    pub fn shape(&self) -> [usize; 3] {
        [self.channels, self.height, self.width]
    }
}

/// Rejects zero or overflowing dimensions.
pub(crate) fn check_dims(
    op: &'static str,
    height: usize,
    width: usize,
    channels: usize,
) -> Result<(), ImageError> {
    let ok = height > 0
        && width > 0
        && channels > 0
        && height.checked_mul(width).and_then(|n| n.checked_mul(channels)).is_some();
    if ok { Ok(()) } else { Err(ImageError::Dimensions { op, height, width, channels }) }
}

/// What went wrong in an image operation. Each variant names the operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImageError {
    /// The bytes are not a valid image of the format (corrupt, truncated, unsupported).
    #[error("{op}: cannot decode {format}: {reason}")]
    Decode {
        /// The operation, e.g. `decode_jpeg`.
        op: &'static str,
        /// `JPEG` or `PNG`.
        format: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// A channel count the operation does not support.
    #[error("{op}: unsupported channel count {channels} (expected one of {expected})")]
    Channels {
        /// The operation.
        op: &'static str,
        /// The count given.
        channels: usize,
        /// The counts allowed, in words.
        expected: &'static str,
    },
    /// A zero or overflowing dimension.
    #[error("{op}: invalid image dimensions {height}x{width}x{channels} (each must be positive)")]
    Dimensions {
        /// The operation.
        op: &'static str,
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
        /// Channels.
        channels: usize,
    },
    /// A buffer has the wrong number of components.
    #[error("{op}: buffer holds {got} values but the shape needs {expected}")]
    BufferSize {
        /// The operation.
        op: &'static str,
        /// Components the shape needs.
        expected: usize,
        /// Components the buffer holds.
        got: usize,
    },
    /// A crop window does not fit in the image.
    #[error("{op}: crop {crop_h}x{crop_w} does not fit in a {height}x{width} image")]
    Crop {
        /// The operation.
        op: &'static str,
        /// Requested rows.
        crop_h: usize,
        /// Requested columns.
        crop_w: usize,
        /// Image rows.
        height: usize,
        /// Image columns.
        width: usize,
    },
    /// An argument is out of its domain (a zero std, a label beyond the class count).
    #[error("{op}: {reason}")]
    Argument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl ImageError {
    /// The operation that failed.
    pub fn op(&self) -> &'static str {
        match self {
            ImageError::Decode { op, .. }
            | ImageError::Channels { op, .. }
            | ImageError::Dimensions { op, .. }
            | ImageError::BufferSize { op, .. }
            | ImageError::Crop { op, .. }
            | ImageError::Argument { op, .. } => op,
        }
    }
}

/// An image error inside a pipeline is the failure of the stage function that ran the
/// operation: it becomes [`crate::Error::Stage`] named after the operation, with the
/// `ImageError` as its source (so it can be downcast back).
impl From<ImageError> for crate::Error {
    fn from(e: ImageError) -> Self {
        crate::Error::Stage { stage: e.op().to_string(), source: Box::new(e) }
    }
}
