//! JPEG and PNG decoding to 8-bit HWC images, with the channel conversions of
//! TensorFlow's `decode_jpeg(channels=…)` and `decode_png(channels=…)`.
//!
//! JPEG goes through zune-jpeg in strict mode, so a truncated or damaged file is an
//! error (as in TensorFlow without `try_recover_truncated`) rather than an image padded
//! with grey. zune-jpeg's IDCT and chroma upsampling differ slightly from the
//! libjpeg-turbo TensorFlow uses (default `dct_method`, fancy upsampling): pixels
//! differ by a few levels at most; `runtime/tests/it/image.rs` measures by how much.

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;
use zune_png::PngDecoder;

use super::{Image, ImageError, check_dims};

/// The most pixels a decoded image may have (8192 × 8192): checked on the header's
/// dimensions, before the output is allocated, so a hostile header costs nothing. The
/// `_limited` decoders (a `.pipe` op's `max_pixels:`) check a tighter limit as well; the
/// compiler's `ir::op::MAX_PIXELS`, the largest `max_pixels` it accepts, is held equal
/// to this by `compiler/tests/codegen.rs`.
pub const MAX_PIXELS: usize = 1 << 26;

/// The most pixels one byte of JPEG data can describe: every 8×8 block of a scan costs
/// at least one bit (a DC code; baseline scans also an end-of-block code), so `n` bytes
/// hold at most `8 n` blocks of 64 pixels. Real images need far more bytes.
const JPEG_PIXELS_PER_BYTE: usize = 512;

/// The most pixel bytes one byte of PNG data can describe: zlib's deflate expands by at
/// most 1032:1.
const PNG_BYTES_PER_BYTE: usize = 1032;

/// Checks an image's claimed size before decoding: at most [`MAX_PIXELS`] pixels, at most
/// `max_pixels` when the caller set a tighter limit (a `.pipe` op's `max_pixels:`; one
/// above the hard cap is the cap), and no more than `bytes` of encoded data can account
/// for (`capacity`: decoded bytes per encoded byte, plus a small image's worth for the
/// headers). A header claiming more is damaged or hostile: decoding it would yield
/// filler, at the cost of its full size.
fn check_claimed(
    error: fn(String) -> ImageError,
    max_pixels: Option<usize>,
    (height, width): (usize, usize),
    decoded: usize,
    bytes: usize,
    capacity: usize,
) -> Result<(), ImageError> {
    let pixels = height.saturating_mul(width);
    if pixels > MAX_PIXELS {
        return Err(error(format!(
            "the header claims {height}x{width} pixels, more than the {MAX_PIXELS} an image may have"
        )));
    }
    if let Some(limit) = max_pixels
        && pixels > limit
    {
        return Err(error(format!(
            "the header claims {height}x{width} pixels, more than the {limit} `max_pixels` allows"
        )));
    }
    if decoded > bytes.saturating_mul(capacity).saturating_add(64 * 64 * 4) {
        return Err(error(format!(
            "the header claims {height}x{width} pixels, more than its {bytes} bytes of data can hold \
             (damaged or truncated)"
        )));
    }
    Ok(())
}

/// Weights of libjpeg's RGB → grey conversion (ITU-R BT.601 luma).
const LUMA_601: [f32; 3] = [0.299, 0.587, 0.114];

fn jpeg_error(reason: impl std::fmt::Display) -> ImageError {
    ImageError::Decode { op: "decode_jpeg", format: "JPEG", reason: reason.to_string() }
}

fn png_error(reason: impl std::fmt::Display) -> ImageError {
    ImageError::Decode { op: "decode_png", format: "PNG", reason: reason.to_string() }
}

/// Decodes a JPEG into an 8-bit HWC image with `channels` components per pixel:
/// `3` for RGB (grey images are replicated, CMYK/YCCK converted), `1` for grey (the
/// luma of colour images), or `0` for the file's own count (1 for grey, else 3).
///
/// Corrupt, truncated or unsupported data is an [`ImageError::Decode`].
pub fn decode_jpeg(bytes: &[u8], channels: usize) -> Result<Image<u8>, ImageError> {
    let mut data = Vec::new();
    let (height, width, channels) = jpeg_into(bytes, channels, None, &mut data)?;
    Ok(Image { height, width, channels, data })
}

/// [`decode_jpeg`] of an image of at most `max_pixels` pixels (`decode_jpeg(b,
/// max_pixels: n)`): a header claiming more is an [`ImageError::Decode`] naming the
/// limit, before anything is allocated. A limit above [`MAX_PIXELS`] is that cap.
pub fn decode_jpeg_limited(
    bytes: &[u8],
    channels: usize,
    max_pixels: usize,
) -> Result<Image<u8>, ImageError> {
    let mut data = Vec::new();
    let (height, width, channels) = jpeg_into(bytes, channels, Some(max_pixels), &mut data)?;
    Ok(Image { height, width, channels, data })
}

/// [`decode_jpeg`] into a reusable buffer (resized to fit, its capacity kept across
/// calls); returns `(height, width, channels)`.
pub fn decode_jpeg_into(
    bytes: &[u8],
    channels: usize,
    out: &mut Vec<u8>,
) -> Result<(usize, usize, usize), ImageError> {
    jpeg_into(bytes, channels, None, out)
}

/// [`decode_jpeg_into`] of an image of at most `max_pixels` pixels, as
/// [`decode_jpeg_limited`].
pub fn decode_jpeg_into_limited(
    bytes: &[u8],
    channels: usize,
    max_pixels: usize,
    out: &mut Vec<u8>,
) -> Result<(usize, usize, usize), ImageError> {
    jpeg_into(bytes, channels, Some(max_pixels), out)
}

/// [`decode_jpeg_into`], with the caller's pixel limit if it set one.
pub(super) fn jpeg_into(
    bytes: &[u8],
    channels: usize,
    max_pixels: Option<usize>,
    out: &mut Vec<u8>,
) -> Result<(usize, usize, usize), ImageError> {
    if !matches!(channels, 0 | 1 | 3) {
        return Err(ImageError::Channels { op: "decode_jpeg", channels, expected: "0, 1 or 3" });
    }
    check_jpeg_complete(bytes).map_err(jpeg_error)?;
    let options = DecoderOptions::default().set_strict_mode(true);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(jpeg_error)?;
    let input = decoder.input_colorspace().ok_or_else(|| jpeg_error("no frame header"))?;
    let want = match channels {
        0 if input == ColorSpace::Luma => 1,
        0 => 3,
        c => c,
    };
    // zune-jpeg converts YCbCr and grey to grey itself (keeping the Y plane, as libjpeg
    // does); other colour spaces are decoded to RGB first and reduced below.
    let direct_grey = matches!(input, ColorSpace::YCbCr | ColorSpace::Luma);
    let out_space = if want == 1 && direct_grey { ColorSpace::Luma } else { ColorSpace::RGB };
    decoder.set_options(options.jpeg_set_out_colorspace(out_space));
    let (width, height) = decoder.dimensions().ok_or_else(|| jpeg_error("no frame header"))?;
    check_dims("decode_jpeg", height, width, want).map_err(|_| jpeg_error("zero-sized image"))?;
    check_claimed(
        jpeg_error,
        max_pixels,
        (height, width),
        height.saturating_mul(width),
        bytes.len(),
        JPEG_PIXELS_PER_BYTE,
    )?;
    let size = decoder.output_buffer_size().ok_or_else(|| jpeg_error("image too large"))?;
    out.clear();
    out.resize(size, 0);
    decoder.decode_into(out).map_err(jpeg_error)?;
    let got = out_space.num_components();
    if size != height * width * got {
        return Err(jpeg_error(format!("decoder returned {size} bytes for a {height}x{width}x{got} image")));
    }
    if got != want {
        rgb_to_grey_in_place(out, LUMA_601);
    }
    Ok((height, width, want))
}

/// Walks the JPEG's markers and entropy-coded segments and checks that the data
/// reaches an end-of-image marker (bytes after it are ignored). zune-jpeg notices a
/// stream cut short only at the start of an MCU row, so without this a file truncated
/// inside its last row would decode with grey filler; libjpeg (and so TensorFlow)
/// rejects it as "premature end of JPEG data".
fn check_jpeg_complete(bytes: &[u8]) -> Result<(), String> {
    let n = bytes.len();
    if n < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8 {
        return Err("missing start-of-image marker".to_string());
    }
    let mut i = 2;
    loop {
        // Skip anything up to the next marker (libjpeg tolerates extraneous bytes), then
        // the fill bytes before its code.
        i += bytes[i.min(n)..].iter().position(|&b| b == 0xFF).unwrap_or(n - i.min(n));
        while i < n && bytes[i] == 0xFF {
            i += 1;
        }
        if i >= n {
            return Err("data ends before the end-of-image marker (truncated file)".to_string());
        }
        let code = bytes[i];
        i += 1;
        match code {
            0xD9 => return Ok(()),
            0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        if i + 2 > n {
            return Err("data ends inside a marker segment (truncated file)".to_string());
        }
        let len = usize::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
        if len < 2 || i + len > n {
            return Err(format!("marker segment 0xFF{code:02X} at byte {} overruns the data", i - 2));
        }
        i += len;
        if code == 0xDA {
            // Entropy-coded data: 0xFF is followed by a stuffed 0x00 or a restart marker
            // inside it, and by a marker code after it.
            loop {
                let Some(at) = bytes[i..].iter().position(|&b| b == 0xFF) else {
                    return Err("scan data ends before the end-of-image marker (truncated file)".to_string());
                };
                let j = i + at;
                match bytes.get(j + 1) {
                    Some(0x00 | 0xD0..=0xD7) => i = j + 2,
                    Some(_) => {
                        i = j;
                        break;
                    }
                    None => {
                        return Err(
                            "scan data ends before the end-of-image marker (truncated file)".to_string()
                        );
                    }
                }
            }
        }
    }
}

/// Reduces packed RGB to grey in place, rounding to nearest.
fn rgb_to_grey_in_place(data: &mut Vec<u8>, w: [f32; 3]) {
    let n = data.len() / 3;
    for i in 0..n {
        let p = &data[3 * i..3 * i + 3];
        let v = w[0] * f32::from(p[0]) + w[1] * f32::from(p[1]) + w[2] * f32::from(p[2]);
        data[i] = (v + 0.5) as u8;
    }
    data.truncate(n);
}

/// Decodes a PNG into an 8-bit HWC image with `channels` components per pixel: `1`
/// grey, `3` RGB, `4` RGBA, or `0` for the file's own count (1, 2, 3 or 4). Palette
/// images are expanded, 16-bit samples reduced to their high byte, alpha dropped or
/// added (opaque) as asked, colour reduced to grey with Rec. 709 weights (libpng's
/// default, which TensorFlow uses) and grey replicated to colour.
pub fn decode_png(bytes: &[u8], channels: usize) -> Result<Image<u8>, ImageError> {
    png(bytes, channels, None)
}

/// [`decode_png`] of an image of at most `max_pixels` pixels (`decode_png(b,
/// max_pixels: n)`): a header claiming more is an [`ImageError::Decode`] naming the
/// limit, before anything is allocated. A limit above [`MAX_PIXELS`] is that cap.
pub fn decode_png_limited(bytes: &[u8], channels: usize, max_pixels: usize) -> Result<Image<u8>, ImageError> {
    png(bytes, channels, Some(max_pixels))
}

/// [`decode_png`], with the caller's pixel limit if it set one.
fn png(bytes: &[u8], channels: usize, max_pixels: Option<usize>) -> Result<Image<u8>, ImageError> {
    if !matches!(channels, 0 | 1 | 3 | 4) {
        return Err(ImageError::Channels { op: "decode_png", channels, expected: "0, 1, 3 or 4" });
    }
    let options = DecoderOptions::default().set_strict_mode(true).png_set_strip_to_8bit(true);
    let mut decoder = PngDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(png_error)?;
    let (width, height) = decoder.dimensions().ok_or_else(|| png_error("no IHDR chunk"))?;
    let space = decoder.colorspace().ok_or_else(|| png_error("no IHDR chunk"))?;
    let have = space.num_components();
    check_dims("decode_png", height, width, have).map_err(|_| png_error("zero-sized image"))?;
    let decoded = height.saturating_mul(width).saturating_mul(have);
    check_claimed(png_error, max_pixels, (height, width), decoded, bytes.len(), PNG_BYTES_PER_BYTE)?;
    let size = decoder.output_buffer_size().ok_or_else(|| png_error("image too large"))?;
    if size != height * width * have {
        return Err(png_error(format!(
            "{size}-byte output for a {height}x{width}x{have} image (16-bit data not reduced)"
        )));
    }
    let mut data = vec![0u8; size];
    decoder.decode_into(&mut data).map_err(png_error)?;
    let want = if channels == 0 { have } else { channels };
    let data = if want == have { data } else { convert_channels(&data, have, want) };
    Ok(Image { height, width, channels: want, data })
}

/// Converts packed pixels between grey (1), grey+alpha (2), RGB (3) and RGBA (4).
fn convert_channels(src: &[u8], from: usize, to: usize) -> Vec<u8> {
    const LUMA_709: [f32; 3] = [0.2126, 0.7152, 0.0722];
    let n = src.len() / from;
    let mut out = Vec::with_capacity(n * to);
    for p in src.chunks_exact(from) {
        let (colour, alpha) = match from {
            1 => ([p[0]; 3], 255),
            2 => ([p[0]; 3], p[1]),
            3 => ([p[0], p[1], p[2]], 255),
            _ => ([p[0], p[1], p[2]], p[3]),
        };
        let grey = || {
            if from <= 2 {
                colour[0]
            } else {
                let v: f32 = (0..3).map(|i| LUMA_709[i] * f32::from(colour[i])).sum();
                (v + 0.5) as u8
            }
        };
        match to {
            1 => out.push(grey()),
            2 => out.extend_from_slice(&[grey(), alpha]),
            3 => out.extend_from_slice(&colour),
            _ => out.extend_from_slice(&[colour[0], colour[1], colour[2], alpha]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_conversions() {
        assert_eq!(convert_channels(&[10, 20], 1, 3), vec![10, 10, 10, 20, 20, 20]);
        assert_eq!(convert_channels(&[10, 99], 2, 4), vec![10, 10, 10, 99]);
        assert_eq!(convert_channels(&[1, 2, 3, 4], 4, 3), vec![1, 2, 3]);
        assert_eq!(convert_channels(&[255, 255, 255], 3, 1), vec![255]);
        let mut rgb = vec![255, 0, 0, 0, 0, 255];
        rgb_to_grey_in_place(&mut rgb, LUMA_601);
        assert_eq!(rgb, vec![76, 29]);
    }

    #[test]
    fn completeness_walker() {
        let seg = [0xFF, 0xDB, 0x00, 0x04, 0xAA, 0xBB];
        let sos = [0xFF, 0xDA, 0x00, 0x02, 0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD3, 0x56];
        let whole = [&[0xFF, 0xD8][..], &seg, &sos, &[0xFF, 0xFF, 0xD9, 0x99]].concat();
        assert_eq!(check_jpeg_complete(&whole), Ok(()));
        for cut in 0..whole.len() - 2 {
            assert!(check_jpeg_complete(&whole[..cut]).is_err(), "cut at {cut}");
        }
        // A marker segment whose length runs past the end.
        assert!(check_jpeg_complete(&[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x09, 0xFF, 0xD9]).is_err());
    }

    /// A 64×64 RGB JPEG (4096 pixels).
    fn jpeg_64x64() -> Vec<u8> {
        let rgb: Vec<u8> = (0..64 * 64 * 3).map(|i| (i * 7 % 251) as u8).collect();
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, 90).encode(&rgb, 64, 64, jpeg_encoder::ColorType::Rgb).unwrap();
        out
    }

    #[test]
    fn max_pixels_bounds_a_jpeg_before_decoding() {
        let jpeg = jpeg_64x64();
        let image = decode_jpeg_limited(&jpeg, 3, 4096).unwrap();
        assert_eq!((image.height, image.width, image.channels), (64, 64, 3));
        assert_eq!(image, decode_jpeg(&jpeg, 3).unwrap());
        let err = decode_jpeg_limited(&jpeg, 3, 4095).unwrap_err();
        assert!(matches!(err, ImageError::Decode { op: "decode_jpeg", .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "decode_jpeg: cannot decode JPEG: the header claims 64x64 pixels, more than the 4095 \
             `max_pixels` allows"
        );
        // The same through the reusable buffer and the fused decode → resize → normalize.
        let mut buf = Vec::new();
        assert_eq!(decode_jpeg_into_limited(&jpeg, 1, 4096, &mut buf).unwrap(), (64, 64, 1));
        assert!(decode_jpeg_into_limited(&jpeg, 1, 4095, &mut buf).is_err());
        let fused = |max_pixels, out: &mut [f32]| {
            super::super::decode_resize_normalize_limited(&jpeg, max_pixels, 8, 8, [0.5; 3], [0.25; 3], out)
        };
        let (mut limited, mut plain) = (vec![0f32; 8 * 8 * 3], vec![0f32; 8 * 8 * 3]);
        fused(4096, &mut limited).unwrap();
        super::super::decode_resize_normalize(&jpeg, 8, 8, [0.5; 3], [0.25; 3], &mut plain).unwrap();
        assert_eq!(limited, plain);
        let err = fused(4095, &mut limited).unwrap_err().to_string();
        assert!(err.ends_with("more than the 4095 `max_pixels` allows"), "{err}");
        // A limit above the hard cap is the cap.
        assert!(decode_jpeg_limited(&jpeg, 3, usize::MAX).is_ok());
    }

    #[test]
    fn max_pixels_bounds_a_png_before_decoding() {
        let png = include_bytes!("../../../tests/fixtures/image/gray_9x13.png");
        let (h, w) = (9, 13);
        let image = decode_png_limited(png, 0, h * w).unwrap();
        assert_eq!((image.height, image.width), (h, w));
        let err = decode_png_limited(png, 0, h * w - 1).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "decode_png: cannot decode PNG: the header claims {h}x{w} pixels, more than the {} \
                 `max_pixels` allows",
                h * w - 1
            )
        );
    }

    #[test]
    fn bad_channel_counts_are_errors() {
        assert!(matches!(decode_jpeg(&[], 2), Err(ImageError::Channels { channels: 2, .. })));
        assert!(matches!(decode_png(&[], 5), Err(ImageError::Channels { channels: 5, .. })));
        assert!(matches!(decode_jpeg(&[], 3), Err(ImageError::Decode { .. })));
        assert!(matches!(decode_png(b"\x89PNG", 3), Err(ImageError::Decode { .. })));
    }
}
