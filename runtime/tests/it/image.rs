//! Image operations against TensorFlow: fixtures written by
//! `tests/fixtures/image/make_reference.py` (TF's own JPEG/PNG encodings, its decodes,
//! its bilinear resize and normalization), plus decoder robustness on damaged JPEGs.

use std::path::PathBuf;

use sluice_runtime::image::{
    self, Image, ImageError, Scratch, decode_jpeg, decode_png, decode_resize_normalize,
    decode_resize_normalize_extend, decode_resize_normalize_with, normalize, resize_bilinear, scale,
};
use sluice_runtime::rng::Philox;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/image")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn read_f32(name: &str) -> Vec<f32> {
    read(name).chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn manifest() -> serde_json::Value {
    serde_json::from_slice(&read("manifest.json")).unwrap()
}

/// One fixture image: its JPEG, TF's decode and TF's resize (and normalization).
struct Case {
    name: String,
    height: usize,
    width: usize,
    jpeg: Vec<u8>,
    decoded: Image<u8>,
    decoded_accurate: Vec<u8>,
    resized: Vec<f32>,
    normalized: Option<Vec<f32>>,
}

fn cases() -> Vec<Case> {
    let m = manifest();
    m["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let (h, w) = (e["height"].as_u64().unwrap() as usize, e["width"].as_u64().unwrap() as usize);
            Case {
                name: e["name"].as_str().unwrap().to_string(),
                height: h,
                width: w,
                jpeg: read(e["jpeg"].as_str().unwrap()),
                decoded: Image::new(h, w, 3, read(e["decoded"].as_str().unwrap())).unwrap(),
                decoded_accurate: read(e["decoded_accurate"].as_str().unwrap()),
                resized: read_f32(e["resized"].as_str().unwrap()),
                normalized: e["normalized"].as_str().map(read_f32),
            }
        })
        .collect()
}

fn stats() -> ([f32; 3], [f32; 3], usize, usize) {
    let m = manifest();
    let v = |k: &str| -> [f32; 3] {
        let a: Vec<f32> = m[k].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        [a[0], a[1], a[2]]
    };
    let r = m["resize"].as_array().unwrap();
    (v("mean"), v("std"), r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap() as usize)
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn resize_matches_tensorflow_on_tf_decoded_pixels() {
    let (_, _, oh, ow) = stats();
    for case in cases() {
        let ours = resize_bilinear(&case.decoded, oh, ow).unwrap();
        assert_eq!(ours.shape(), [oh, ow, 3]);
        let diff = max_abs(&ours.data, &case.resized);
        eprintln!("{}: resize max |ours - tf| = {diff:e}", case.name);
        assert!(diff <= 1e-3, "{}: {diff}", case.name);
    }
}

#[test]
fn normalization_matches_tensorflow() {
    let (mean, std, oh, ow) = stats();
    for case in cases() {
        let Some(tf_norm) = &case.normalized else { continue };
        let mut ours = resize_bilinear(&case.decoded, oh, ow).unwrap();
        scale(&mut ours, 1.0 / 255.0);
        normalize(&mut ours, &mean, &std).unwrap();
        let diff = max_abs(&ours.data, tf_norm);
        eprintln!("{}: normalized max |ours - tf| = {diff:e}", case.name);
        assert!(diff <= 1e-5, "{}: {diff}", case.name);
    }
}

/// Max and mean absolute difference of two 8-bit buffers, and the share of equal bytes.
fn byte_diff(a: &[u8], b: &[u8]) -> (u8, f64, f64) {
    assert_eq!(a.len(), b.len());
    let max = a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap();
    let sum: u64 = a.iter().zip(b).map(|(x, y)| u64::from(x.abs_diff(*y))).sum();
    let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
    (max, sum as f64 / a.len() as f64, same as f64 / a.len() as f64)
}

/// zune-jpeg against libjpeg-turbo as TensorFlow runs it. TF's default `dct_method` is
/// INTEGER_FAST (the AAN IDCT at 8-bit precision); zune's IDCT is an accurate integer
/// one, so it is closer to TF's INTEGER_ACCURATE decode than to its default one.
#[test]
fn jpeg_decode_is_close_to_tensorflow() {
    for case in cases() {
        let ours = decode_jpeg(&case.jpeg, 3).unwrap();
        assert_eq!(ours.shape(), [case.height, case.width, 3], "{}", case.name);
        let (max, mean, same) = byte_diff(&ours.data, &case.decoded.data);
        let (amax, amean, asame) = byte_diff(&ours.data, &case.decoded_accurate);
        eprintln!(
            "{}: decode |ours - tf default| max {max} mean {mean:.3} equal {:.1}%; \
             |ours - tf INTEGER_ACCURATE| max {amax} mean {amean:.3} equal {:.1}%",
            case.name,
            same * 100.0,
            asame * 100.0
        );
        assert!(max <= 8 && mean <= 2.0, "{}: max {max} mean {mean}", case.name);
        assert!(amax <= 4 && amean <= 1.0, "{}: max {amax} mean {amean}", case.name);
    }
}

#[test]
fn grey_jpeg_channels() {
    let case = cases().into_iter().find(|c| c.name.starts_with("gray")).unwrap();
    let native = decode_jpeg(&case.jpeg, 0).unwrap();
    assert_eq!(native.shape(), [case.height, case.width, 1]);
    let rgb = decode_jpeg(&case.jpeg, 3).unwrap();
    let replicated: Vec<u8> = native.data.iter().flat_map(|&v| [v, v, v]).collect();
    assert_eq!(rgb.data, replicated);
    assert_eq!(decode_jpeg(&case.jpeg, 1).unwrap(), native);
    // A colour JPEG asked for one channel keeps its luma plane.
    let colour = cases().into_iter().next().unwrap();
    assert_eq!(decode_jpeg(&colour.jpeg, 1).unwrap().shape(), [colour.height, colour.width, 1]);
    assert_eq!(decode_jpeg(&colour.jpeg, 0).unwrap().channels, 3);
}

#[test]
fn png_decode_matches_tensorflow_exactly() {
    let m = manifest();
    for e in m["pngs"].as_array().unwrap() {
        let (h, w) = (e["height"].as_u64().unwrap() as usize, e["width"].as_u64().unwrap() as usize);
        let png = read(e["png"].as_str().unwrap());
        let ours = decode_png(&png, 3).unwrap();
        assert_eq!(ours.shape(), [h, w, 3]);
        assert_eq!(ours.data, read(e["decoded"].as_str().unwrap()), "{}", e["name"]);
        let native = decode_png(&png, 0).unwrap();
        assert_eq!(native.channels as u64, e["source_channels"].as_u64().unwrap());
        assert_eq!(decode_png(&png, 4).unwrap().shape(), [h, w, 4]);
        for cut in [8, png.len() / 2, png.len() - 1] {
            assert!(decode_png(&png[..cut], 3).is_err(), "PNG cut at {cut} of {}", png.len());
        }
    }
}

#[test]
fn fused_path_equals_the_composition_and_tracks_tensorflow() {
    let (mean, std, oh, ow) = stats();
    let mut scratch = Scratch::new();
    for case in cases() {
        let mut unfused = resize_bilinear(&decode_jpeg(&case.jpeg, 3).unwrap(), oh, ow).unwrap();
        scale(&mut unfused, 1.0 / 255.0);
        normalize(&mut unfused, &mean, &std).unwrap();
        let mut fused = vec![f32::NAN; oh * ow * 3];
        decode_resize_normalize(&case.jpeg, oh, ow, mean, std, &mut fused).unwrap();
        assert_eq!(fused, unfused.data, "{}", case.name);
        // Reused buffers (after images of other sizes) change nothing.
        let mut again = vec![0.0; oh * ow * 3];
        decode_resize_normalize_with(&mut scratch, &case.jpeg, oh, ow, mean, std, &mut again).unwrap();
        assert_eq!(again, fused);
        // Appended to a column: the same values after what it held, none of the stale
        // values in its spare capacity showing through.
        let mut column = vec![f32::NAN; 3 * oh * ow * 3];
        column.truncate(5);
        decode_resize_normalize_extend(&case.jpeg, None, oh, ow, mean, std, &mut column).unwrap();
        assert_eq!(column.len(), 5 + oh * ow * 3);
        assert_eq!(column[5..], fused[..], "{}", case.name);
        if let Some(tf_norm) = &case.normalized {
            let diff = max_abs(&fused, tf_norm);
            eprintln!("{}: fused (our decode) vs tf normalized: max {diff:e}", case.name);
            assert!(diff <= 8.0 / 255.0 / 0.224, "{diff}");
        }
    }
}

#[test]
fn fused_path_rejects_bad_arguments() {
    let (mean, std, _, _) = stats();
    let jpeg = &cases()[0].jpeg;
    let mut out = vec![0.0; 10];
    assert!(matches!(
        decode_resize_normalize(jpeg, 4, 4, mean, std, &mut out),
        Err(ImageError::BufferSize { expected: 48, got: 10, .. })
    ));
    let mut out = vec![0.0; 48];
    assert!(decode_resize_normalize(jpeg, 4, 4, mean, [1.0, 0.0, 1.0], &mut out).is_err());
    assert!(decode_resize_normalize(b"not a jpeg", 4, 4, mean, std, &mut out).is_err());
    // Appending: on any error, nothing is appended.
    let mut column = vec![1.0f32; 7];
    assert!(decode_resize_normalize_extend(b"not a jpeg", None, 4, 4, mean, std, &mut column).is_err());
    assert!(decode_resize_normalize_extend(jpeg, None, 0, 4, mean, std, &mut column).is_err());
    assert!(decode_resize_normalize_extend(jpeg, None, 4, 4, mean, [1.0, 0.0, 1.0], &mut column).is_err());
    let err = decode_resize_normalize_extend(jpeg, Some(1), 4, 4, mean, std, &mut column).unwrap_err();
    assert!(err.to_string().contains("`max_pixels`"), "{err}");
    let cut = &jpeg[..jpeg.len() - 20];
    assert!(decode_resize_normalize_extend(cut, None, 4, 4, mean, std, &mut column).is_err());
    assert_eq!(column, [1.0; 7]);
    decode_resize_normalize_extend(jpeg, Some(1 << 20), 4, 4, mean, std, &mut column).unwrap();
    assert_eq!(column.len(), 7 + 48);
    let err: sluice_runtime::Error = decode_jpeg(b"", 3).unwrap_err().into();
    assert!(err.to_string().starts_with("stage `decode_jpeg`: decode_jpeg: cannot decode JPEG"), "{err}");
}

#[test]
fn truncated_jpegs_are_errors() {
    for case in cases() {
        let n = case.jpeg.len();
        // Prefixes in steps through headers, tables and scan data, and every one of the
        // last 40 (the last MCU row and the end-of-image marker).
        for cut in (0..n - 40).step_by(13).chain(n - 40..n) {
            assert!(decode_jpeg(&case.jpeg[..cut], 3).is_err(), "{} cut at {cut} of {n}", case.name);
        }
    }
}

#[test]
fn mutated_jpegs_never_panic() {
    let jpeg = &cases()[0].jpeg;
    let (mut ok, mut err) = (0, 0);
    for stream in 0..400 {
        let mut rng = Philox::new(0x1ade, stream);
        let mut bytes = jpeg.clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(bytes.len() as u32) as usize;
            match rng.below(3) {
                0 => bytes[at] = rng.next_u32() as u8,
                1 => bytes[at] ^= 1 << rng.below(8),
                _ => bytes.truncate(at.max(2)),
            }
        }
        match decode_jpeg(&bytes, 3) {
            Ok(img) => {
                assert_eq!(img.data.len(), img.height * img.width * 3);
                ok += 1;
            }
            Err(ImageError::Decode { .. }) => err += 1,
            Err(other) => panic!("unexpected error kind: {other}"),
        }
    }
    eprintln!("mutated JPEGs: {ok} decoded, {err} rejected");
    assert!(err > 0);
}

#[test]
fn encoder_variants_decode() {
    // Progressive and CMYK JPEGs, written by the jpeg-encoder crate.
    let (h, w) = (24u16, 40u16);
    let rgb: Vec<u8> = (0..usize::from(h) * usize::from(w))
        .flat_map(|i| [(i % 40 * 6) as u8, (i / 40 * 10) as u8, 128])
        .collect();
    let encode = |progressive: bool| {
        let mut out = Vec::new();
        let mut enc = jpeg_encoder::Encoder::new(&mut out, 95);
        enc.set_progressive(progressive);
        enc.encode(&rgb, w, h, jpeg_encoder::ColorType::Rgb).unwrap();
        out
    };
    let baseline = decode_jpeg(&encode(false), 3).unwrap();
    let progressive = decode_jpeg(&encode(true), 3).unwrap();
    assert_eq!(progressive.shape(), [24, 40, 3]);
    let worst = baseline.data.iter().zip(&progressive.data).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
    assert!(worst <= 4, "progressive vs baseline: {worst}");
    let close_to_source = baseline.data.iter().zip(&rgb).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
    assert!(close_to_source <= 24, "{close_to_source}");

    // A flat CMYK image (ink 0, 0, 0, 64 of 255: a light grey) converts to RGB.
    let cmyk: Vec<u8> = [0u8, 0, 0, 64].repeat(16 * 16);
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 95).encode(&cmyk, 16, 16, jpeg_encoder::ColorType::Cmyk).unwrap();
    let img = decode_jpeg(&out, 3).unwrap();
    assert_eq!(img.shape(), [16, 16, 3]);
    eprintln!("CMYK (0,0,0,64) decodes to {:?}", img.pixel(8, 8).unwrap());
    assert_eq!(decode_jpeg(&out, 1).unwrap().channels, 1);
}

#[test]
fn augmentations_compose_on_decoded_images() {
    let case = &cases()[0];
    let img = decode_jpeg(&case.jpeg, 3).unwrap();
    let mut rng = Philox::new(42, 7);
    let mut crop = image::random_crop(&img, 100, 100, &mut rng).unwrap();
    image::random_flip_left_right(&mut crop, &mut rng);
    let chw = image::hwc_to_chw(&resize_bilinear(&crop, 64, 64).unwrap()).unwrap();
    assert_eq!(chw.shape(), [3, 64, 64]);
    // The same stream gives the same result.
    let mut rng2 = Philox::new(42, 7);
    let mut crop2 = image::random_crop(&img, 100, 100, &mut rng2).unwrap();
    image::random_flip_left_right(&mut crop2, &mut rng2);
    assert_eq!(crop, crop2);
}

/// `jpeg` with its frame header's dimensions replaced by `height` × `width`.
fn with_jpeg_dims(jpeg: &[u8], height: u16, width: u16) -> Vec<u8> {
    let mut out = jpeg.to_vec();
    let sof = (0..out.len() - 1)
        .find(|&i| out[i] == 0xFF && matches!(out[i + 1], 0xC0..=0xC2))
        .expect("a frame header");
    // FF Cn, length (2), precision (1), height (2), width (2).
    out[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    out[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
    out
}

/// A header claiming more pixels than the data holds (or than any image may have) is an
/// error before anything is allocated for it, not an image of filler: a 16000 × 16000
/// claim in a few kilobytes used to decode "successfully" into 768 MB.
#[test]
fn images_must_account_for_their_claimed_size() {
    let case = &cases()[0];
    let err = decode_jpeg(&with_jpeg_dims(&case.jpeg, 4000, 4000), 3).unwrap_err().to_string();
    assert!(
        err.contains("claims 4000x4000 pixels, more than its") && err.contains("bytes of data can hold"),
        "{err}"
    );
    let err = decode_jpeg(&with_jpeg_dims(&case.jpeg, 16000, 16000), 3).unwrap_err().to_string();
    assert!(err.contains("claims 16000x16000 pixels, more than the 67108864 an image may have"), "{err}");
    // The real size still decodes.
    assert_eq!(
        decode_jpeg(&with_jpeg_dims(&case.jpeg, case.height as u16, case.width as u16), 3).unwrap().height,
        case.height
    );
    // A PNG whose header (with a valid checksum) claims 8000 × 8000 pixels.
    let mut png = read("gray_9x13.png");
    png[16..20].copy_from_slice(&8000u32.to_be_bytes());
    png[20..24].copy_from_slice(&8000u32.to_be_bytes());
    let mut crc = flate2::Crc::new();
    crc.update(&png[12..29]);
    png[29..33].copy_from_slice(&crc.sum().to_be_bytes());
    let err = decode_png(&png, 1).unwrap_err().to_string();
    assert!(err.contains("claims 8000x8000 pixels, more than its"), "{err}");
}
