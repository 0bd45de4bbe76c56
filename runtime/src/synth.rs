//! Deterministic synthetic datasets (`sluice gen`), with the schemas of the tf.data peer
//! benchmark (`bench/make_data.py`), so either side reads the other's files.
//!
//! Every record is a pure function of (seed, kind, record id) through [`Philox`], so
//! the files are identical whatever the thread count. Record ids are assigned to shards
//! contiguously: shard `k` of `K` holds ids `[k·n/K, (k+1)·n/K)`. Labels are learnable:
//! - `tabular`: `x` 16 standard normals, `label = argmax(x[0..10])`;
//! - `image`: 64×64×3 raw u8 = the label's stripe pattern + uniform noise;
//! - `jpeg`: a 128×128×3 JPEG (quality 90, 4:2:0) of a smooth gradient with a soft disc
//!   whose colour is the label's, plus Gaussian noise (σ = 6), so it compresses like a photo.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use prost::Message;

use crate::error::{Error, Result};
use crate::example::{Example, Feature, Features};
use crate::rng::Philox;
use crate::tfrecord::{self, Compression};

/// Which dataset to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `x` 16 floats, `label`, `id`.
    Tabular,
    /// `image` 64×64×3 raw bytes, `label`, `id`.
    Image,
    /// `image` a 128×128×3 JPEG, `label`, `id`.
    Jpeg,
}

impl Kind {
    /// The name used in file names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tabular => "tabular",
            Kind::Image => "image",
            Kind::Jpeg => "jpeg",
        }
    }

    fn stream_tag(self) -> u64 {
        match self {
            Kind::Tabular => 1,
            Kind::Image => 2,
            Kind::Jpeg => 3,
        }
    }
}

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tabular" => Ok(Kind::Tabular),
            "image" | "image_raw" => Ok(Kind::Image),
            "jpeg" => Ok(Kind::Jpeg),
            _ => Err(format!("unknown dataset kind `{s}` (expected tabular, image or jpeg)")),
        }
    }
}

/// Side of the raw images.
pub const IMAGE_SIDE: usize = 64;
/// Side of the JPEG images.
pub const JPEG_SIDE: usize = 128;
/// Number of classes of every dataset.
pub const CLASSES: u32 = 10;

/// Ids of shard `k` of `shards` over `n` records.
pub fn shard_range(n: u64, shards: u32, k: u32) -> Range<u64> {
    let lo = (u128::from(n) * u128::from(k) / u128::from(shards)) as u64;
    let hi = (u128::from(n) * u128::from(k + 1) / u128::from(shards)) as u64;
    lo..hi
}

/// `DIR/KIND-0000k-of-0000K.tfrecord[.gz|.zlib]`.
pub fn shard_path(dir: &Path, kind: Kind, k: u32, shards: u32, compression: Compression) -> PathBuf {
    crate::storage::join(
        dir,
        &format!("{}-{k:05}-of-{shards:05}.tfrecord{}", kind.name(), compression.extension()),
    )
}

/// Makes the records of one dataset kind, reusing its buffers.
#[derive(Debug)]
pub struct RecordMaker {
    kind: Kind,
    seed: u64,
    templates: Vec<u8>,
    pixels: Vec<u8>,
    jpeg: Vec<u8>,
}

impl RecordMaker {
    /// A maker for `kind` under `seed`.
    pub fn new(kind: Kind, seed: u64) -> Self {
        let templates = if kind == Kind::Image { image_templates() } else { Vec::new() };
        RecordMaker { kind, seed, templates, pixels: Vec::new(), jpeg: Vec::new() }
    }

    fn rng(&self, id: u64) -> Philox {
        Philox::new(self.seed, (self.kind.stream_tag() << 56) ^ id)
    }

    /// The `tf.train.Example` of record `id`.
    pub fn example(&mut self, id: u64) -> Example {
        let mut rng = self.rng(id);
        let (image, label) = match self.kind {
            Kind::Tabular => {
                let x: Vec<f32> = (0..16).map(|_| rng.next_normal()).collect();
                let label = argmax(&x[..10]) as i64;
                let features = [
                    ("x".to_string(), Feature::floats(x)),
                    ("label".to_string(), Feature::int64s(vec![label])),
                    ("id".to_string(), Feature::int64s(vec![id as i64])),
                ];
                return Example::from_features(features);
            }
            Kind::Image => {
                let label = rng.below(CLASSES);
                self.raw_image(&mut rng, label);
                (self.pixels.clone(), label)
            }
            Kind::Jpeg => {
                let label = rng.below(CLASSES);
                self.jpeg_image(&mut rng, label);
                (self.jpeg.clone(), label)
            }
        };
        Example {
            features: Some(Features {
                feature: [
                    ("image".to_string(), Feature::bytes([image])),
                    ("label".to_string(), Feature::int64s(vec![i64::from(label)])),
                    ("id".to_string(), Feature::int64s(vec![id as i64])),
                ]
                .into_iter()
                .collect(),
            }),
        }
    }

    /// The serialized record `id`.
    pub fn record(&mut self, id: u64) -> Vec<u8> {
        self.example(id).encode_to_vec()
    }

    fn raw_image(&mut self, rng: &mut Philox, label: u32) {
        let n = IMAGE_SIDE * IMAGE_SIDE * 3;
        let t = &self.templates[label as usize * n..(label as usize + 1) * n];
        self.pixels.clear();
        self.pixels.reserve(n);
        let mut word = 0u32;
        for (i, &base) in t.iter().enumerate() {
            if i % 4 == 0 {
                word = rng.next_u32();
            }
            // Template ± 64 of uniform noise.
            let noise = i32::from((word >> (8 * (i % 4))) as u8 >> 1) - 64;
            self.pixels.push((i32::from(base) + noise).clamp(0, 255) as u8);
        }
    }

    fn jpeg_image(&mut self, rng: &mut Philox, label: u32) {
        let side = JPEG_SIDE;
        let angle = rng.next_f32() * std::f32::consts::TAU;
        let (ca, sa) = (angle.cos(), angle.sin());
        let c0: [f32; 3] = std::array::from_fn(|_| rng.next_f32() * 255.0);
        let c1: [f32; 3] = std::array::from_fn(|_| rng.next_f32() * 255.0);
        let (cx, cy) = (0.2 + 0.6 * rng.next_f32(), 0.2 + 0.6 * rng.next_f32());
        let r = 0.2 + 0.15 * rng.next_f32();
        let disc = PALETTE[label as usize];
        self.pixels.clear();
        self.pixels.reserve(side * side * 3);
        let scale = 1.0 / (side - 1) as f32;
        for y in 0..side {
            for x in 0..side {
                let (xx, yy) = (x as f32 * scale, y as f32 * scale);
                let t = ((ca * xx + sa * yy) * 0.5 + 0.5).clamp(0.0, 1.0);
                let d = (1.0 - ((xx - cx).powi(2) + (yy - cy).powi(2)).sqrt() / r).clamp(0.0, 1.0);
                let w = (d * 2.0).min(1.0);
                for c in 0..3 {
                    let g = c0[c] * (1.0 - t) + c1[c] * t;
                    let v = g * (1.0 - w) + f32::from(disc[c]) * w + 6.0 * rng.next_normal();
                    self.pixels.push(v.round().clamp(0.0, 255.0) as u8);
                }
            }
        }
        self.jpeg.clear();
        let mut enc = jpeg_encoder::Encoder::new(&mut self.jpeg, 90);
        enc.set_sampling_factor(jpeg_encoder::SamplingFactor::F_2_2);
        enc.encode(&self.pixels, side as u16, side as u16, jpeg_encoder::ColorType::Rgb)
            .expect("encoding an in-memory RGB image of valid size cannot fail");
    }
}

/// Ten well-separated disc colours, one per class.
const PALETTE: [[u8; 3]; 10] = [
    [230, 25, 75],
    [60, 180, 75],
    [255, 225, 25],
    [0, 130, 200],
    [245, 130, 48],
    [145, 30, 180],
    [70, 240, 240],
    [240, 50, 230],
    [250, 250, 250],
    [10, 10, 10],
];

/// One stripe pattern per class: orientation and frequency depend on the class.
fn image_templates() -> Vec<u8> {
    let s = IMAGE_SIDE;
    let mut t = Vec::with_capacity(CLASSES as usize * s * s * 3);
    for class in 0..CLASSES {
        let angle = f64::from(class) * std::f64::consts::PI / f64::from(CLASSES);
        let freq = 2.0 + f64::from(class % 3);
        for y in 0..s {
            for x in 0..s {
                let u = (x as f64 * angle.cos() + y as f64 * angle.sin()) / s as f64;
                for c in 0..3 {
                    let phase = f64::from(c as u32) * 2.0 * std::f64::consts::PI / 3.0;
                    let v = 128.0 + 80.0 * (std::f64::consts::TAU * freq * u + phase).sin();
                    t.push(v.round() as u8);
                }
            }
        }
    }
    t
}

fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Dataset kind.
    pub kind: Kind,
    /// Total records.
    pub records: u64,
    /// Number of files.
    pub shards: u32,
    /// Output directory (created if missing).
    pub out: PathBuf,
    /// Seed of every random draw.
    pub seed: u64,
    /// Compression of the files (`Auto` means none).
    pub compression: Compression,
    /// Worker threads (0: one per core).
    pub threads: usize,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct GenSummary {
    /// The files, in shard order.
    pub files: Vec<PathBuf>,
    /// Records written.
    pub records: u64,
    /// Bytes on disk.
    pub bytes: u64,
}

/// Writes the dataset, calling `progress(n)` after every `n` records written (from
/// worker threads).
pub fn generate(opts: &GenOptions, progress: &(dyn Fn(u64) + Sync)) -> Result<GenSummary> {
    if opts.shards == 0 {
        return Err(Error::Invalid("--shards must be at least 1".into()));
    }
    // A bucket has no directories to make.
    if !crate::storage::is_url(&opts.out) {
        std::fs::create_dir_all(&opts.out).map_err(|e| Error::io(&opts.out, e))?;
    }
    let compression = match opts.compression {
        Compression::Auto => Compression::None,
        c => c,
    };
    let files: Vec<PathBuf> =
        (0..opts.shards).map(|k| shard_path(&opts.out, opts.kind, k, opts.shards, compression)).collect();
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(opts.shards as usize);
    let next = AtomicUsize::new(0);
    // Each shard is written under a temporary name and renamed into place when complete
    // (`tfrecord::ShardWriter`), so a failed or interrupted run leaves no shard that looks whole.
    let write_shard = |k: u32| -> Result<()> {
        let mut maker = RecordMaker::new(opts.kind, opts.seed);
        let mut w = tfrecord::create_shard(&files[k as usize], compression)?;
        let mut pending = 0;
        for id in shard_range(opts.records, opts.shards, k) {
            w.write_record(&maker.record(id))?;
            pending += 1;
            if pending == 256 {
                progress(pending);
                pending = 0;
            }
        }
        progress(pending);
        w.finish()
    };
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= opts.shards as usize {
                            return Ok(());
                        }
                        write_shard(k as u32)?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|h| h.join().expect("generator threads do not panic"))
    })?;
    let mut bytes = 0;
    for f in &files {
        bytes += crate::storage::size(f).map_err(|e| Error::io(f, e))?;
    }
    Ok(GenSummary { files, records: opts.records, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_ids() {
        for (n, k) in [(10u64, 3u32), (2_000_000, 16), (5, 8), (0, 2)] {
            let mut next = 0;
            for s in 0..k {
                let r = shard_range(n, k, s);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, n);
        }
    }

    #[test]
    fn tabular_labels_follow_the_features() {
        let mut m = RecordMaker::new(Kind::Tabular, 1);
        for id in 0..100 {
            let ex = m.example(id);
            let x = ex.feature("x").unwrap().as_floats().unwrap();
            assert_eq!(x.len(), 16);
            let label = ex.feature("label").unwrap().as_int64s().unwrap()[0];
            assert_eq!(label as usize, argmax(&x[..10]));
            assert_eq!(ex.feature("id").unwrap().as_int64s().unwrap(), &[id as i64]);
        }
    }

    #[test]
    fn image_labels_are_learnable_by_nearest_template() {
        let mut m = RecordMaker::new(Kind::Image, 3);
        let n = IMAGE_SIDE * IMAGE_SIDE * 3;
        let mut correct = 0;
        for id in 0..200 {
            let ex = m.example(id);
            let img = &ex.feature("image").unwrap().as_bytes().unwrap()[0];
            assert_eq!(img.len(), n);
            let label = ex.feature("label").unwrap().as_int64s().unwrap()[0] as usize;
            let dist = |c: usize| -> i64 {
                m.templates[c * n..(c + 1) * n]
                    .iter()
                    .zip(img)
                    .map(|(a, b)| (i64::from(*a) - i64::from(*b)).pow(2))
                    .sum()
            };
            let guess = (0..CLASSES as usize).min_by_key(|c| dist(*c)).unwrap();
            correct += usize::from(guess == label);
        }
        assert!(correct >= 190, "{correct}/200");
    }

    #[test]
    fn jpeg_records_are_jpegs() {
        let mut m = RecordMaker::new(Kind::Jpeg, 5);
        let ex = m.example(0);
        let img = &ex.feature("image").unwrap().as_bytes().unwrap()[0];
        assert_eq!(&img[..2], &[0xff, 0xd8], "SOI marker");
        assert_eq!(&img[img.len() - 2..], &[0xff, 0xd9], "EOI marker");
        assert!(img.len() > 3_000 && img.len() < 30_000, "{} bytes", img.len());
    }

    #[test]
    fn records_do_not_depend_on_order() {
        let mut a = RecordMaker::new(Kind::Image, 9);
        let mut b = RecordMaker::new(Kind::Image, 9);
        let r5 = a.record(5);
        b.record(4);
        assert_eq!(b.record(5), r5);
        assert_ne!(a.record(6), r5);
    }
}
