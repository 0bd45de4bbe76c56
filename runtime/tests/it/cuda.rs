//! The `cuda` feature: the CUDA Philox source (built as host C++) against the Rust
//! generator and the random operations, bit for bit; NVRTC compiling kernels to PTX (when
//! its library is on the path, else skipped, saying so); errors instead of panics without
//! a GPU; and, on a GPU, a kernel launched through `GpuTail` against its CPU twin.
#![cfg(feature = "cuda")]

use std::sync::Arc;

use sluice_runtime::Error;
use sluice_runtime::abi::ops::{self, Flip, element_rng};
use sluice_runtime::column::Tensor;
use sluice_runtime::cuda::philox::host::{self, Draw};
use sluice_runtime::cuda::{
    GpuTail, KernelArg, PHILOX_CUDA, VALUES_PER_THREAD, compile_ptx, cpu_fallback_reason, gpu_available,
    note_cpu_fallback, nvrtc_available,
};
use sluice_runtime::rng::{Philox, philox4x32};

/// `n` deterministic test values: mostly uniform 64-bit words, with small and extreme ones
/// mixed in.
fn values(stream: u64, n: usize) -> Vec<u64> {
    let mut r = Philox::new(0x5eed, stream);
    (0..n)
        .map(|i| match i % 8 {
            0 => u64::from(r.below(16)),
            1 => u64::MAX - u64::from(r.below(4)),
            2 => u64::from(r.next_u32()),
            _ => r.next_u64(),
        })
        .collect()
}

#[test]
fn philox_blocks_match_rng() {
    let v = values(1, 6 * 2000);
    for w in v.chunks_exact(6) {
        let ctr = [w[0] as u32, w[1] as u32, w[2] as u32, w[3] as u32];
        let key = [w[4] as u32, (w[5] >> 32) as u32];
        assert_eq!(host::philox4x32(ctr, key), philox4x32(ctr, key), "ctr {ctr:x?} key {key:x?}");
    }
    // Random123's known answer, through the C++ build.
    assert_eq!(host::philox4x32([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
}

/// What the Rust generator gives for `draws` (the image ops' `below` for `Below`).
fn rust_draws(seed: u64, stream: u64, draws: &[Draw]) -> Vec<u64> {
    let mut r = Philox::new(seed, stream);
    draws
        .iter()
        .map(|d| match *d {
            Draw::U32 => u64::from(r.next_u32()),
            Draw::U64 => r.next_u64(),
            Draw::F32 => u64::from(r.next_f32().to_bits()),
            Draw::Below(n) => match u32::try_from(n) {
                Ok(n) => u64::from(r.below(n)),
                Err(_) => r.next_u64() % n,
            },
        })
        .collect()
}

#[test]
fn mixed_draw_sequences_match_rng() {
    let bounds = [0, 1, 2, 3, 7, 224, 1 << 31, u64::from(u32::MAX), 1 << 32, (1 << 32) + 1, u64::MAX];
    let v = values(2, 3 * 300);
    for (t, w) in v.chunks_exact(3).enumerate() {
        let (seed, stream) = (w[0], w[1]);
        // A sequence of 1 to 23 draws of every kind, crossing blocks at every offset.
        let mut pick = Philox::new(w[2], t as u64);
        let draws: Vec<Draw> = (0..1 + pick.below(23))
            .map(|_| match pick.below(4) {
                0 => Draw::U32,
                1 => Draw::U64,
                2 => Draw::F32,
                _ => Draw::Below(bounds[pick.below(bounds.len() as u32) as usize]),
            })
            .collect();
        assert_eq!(
            host::rng_draws(seed, stream, &draws),
            rust_draws(seed, stream, &draws),
            "seed {seed:#x} stream {stream:#x} draws {draws:?}"
        );
    }
}

#[test]
fn element_streams_match_element_rng() {
    let v = values(3, 4 * 1000);
    for w in v.chunks_exact(4) {
        let (seed, op, epoch, index) = (w[0], w[1] % 64, w[2] % 100_000, w[3] >> 20);
        let mut r = element_rng(seed, op, epoch, index);
        let rust: Vec<u32> = (0..9).map(|_| r.next_u32()).collect();
        assert_eq!(host::element_words(seed, op, epoch, index, 9), rust, "{seed:#x} {op} {epoch} {index}");
    }
    // Extreme operation numbers, epochs and indices too (the key multiplication wraps).
    for w in values(4, 4 * 200).chunks_exact(4) {
        let mut r = element_rng(w[0], w[1], w[2], w[3]);
        let rust: Vec<u32> = (0..5).map(|_| r.next_u32()).collect();
        assert_eq!(host::element_words(w[0], w[1], w[2], w[3], 5), rust);
    }
}

#[test]
fn flip_draws_match_random_flip() {
    let mut flips = 0;
    for (i, w) in values(5, 4 * 2000).chunks_exact(4).enumerate() {
        let (seed, op, epoch, index) = (w[0], w[1] % 16, w[2] % 1000, w[3] % 1_000_000 + i as u64);
        // An image one row of two pixels: flipped iff the pixels swap.
        let image = Tensor::new(vec![1, 2, 1], vec![0u8, 1]).unwrap();
        let flipped = image.random_flip(&mut element_rng(seed, op, epoch, index)).as_slice() == [1, 0];
        assert_eq!(host::flip_draw(seed, op, epoch, index), flipped, "{seed:#x} {op} {epoch} {index}");
        // A list draws the same way.
        let list = vec![0i64, 1].random_flip(&mut element_rng(seed, op, epoch, index));
        assert_eq!(list == [1, 0], flipped);
        flips += usize::from(flipped);
    }
    assert!((800..1200).contains(&flips), "{flips} flips of 2000");
    // The boundary: element 11632583 of seed 42 draws exactly 0.5, which does not flip.
    assert_eq!(element_rng(42, 0, 0, 11_632_583).next_f32(), 0.5);
    let image = Tensor::new(vec![1, 2, 1], vec![0u8, 1]).unwrap();
    assert_eq!(image.random_flip(&mut element_rng(42, 0, 0, 11_632_583)).as_slice(), [0, 1]);
    assert!(!host::flip_draw(42, 0, 0, 11_632_583));
}

#[test]
fn crop_draws_match_random_crop() {
    let sizes =
        [(1, 1, 1, 1), (5, 7, 3, 2), (8, 8, 8, 8), (32, 24, 28, 20), (224, 256, 200, 224), (3, 300, 1, 1)];
    for (t, w) in values(6, 4 * 600).chunks_exact(4).enumerate() {
        let (h, wd, ch, cw) = sizes[t % sizes.len()];
        let (seed, op, epoch, index) = (w[0], w[1] % 16, w[2] % 1000, w[3] % 1_000_000);
        // Each pixel holds its own position, so the crop's first pixel names its offset.
        let image = Tensor::new(vec![h, wd, 1], (0..(h * wd) as u32).collect()).unwrap();
        let crop = ops::random_crop(&image, ch, cw, &mut element_rng(seed, op, epoch, index)).unwrap();
        let first = u64::from(crop.as_slice()[0]);
        let (top, left) = host::crop_draw(seed, op, epoch, index, (h - ch + 1) as u64, (wd - cw + 1) as u64);
        assert_eq!((top, left), (first / wd as u64, first % wd as u64), "{h}x{wd} → {ch}x{cw}, {seed:#x}");
    }
    // Beyond 32 bits, `below` takes two words (`next_u64() % n`); no image is that large,
    // so against the same rule on the Rust generator.
    for w in values(7, 4 * 100).chunks_exact(4) {
        let (rows, cols) = ((1 << 32) + (w[2] >> 40), u64::from(w[3] as u32));
        let mut r = element_rng(w[0], w[1] % 16, 3, w[3]);
        let top = r.next_u64() % rows;
        let left = u64::from(r.below(cols as u32));
        assert_eq!(host::crop_draw(w[0], w[1] % 16, 3, w[3], rows, cols), (top, left));
    }
}

/// A kernel in the ABI `GpuTail` launches: a batch of `u8` images `[b, h, w, c]`,
/// `random_flip` (operation 0) and a cast to `f32`, one thread per `VALUES_PER_THREAD`
/// output values.
fn flip_kernel() -> String {
    let vpt = VALUES_PER_THREAD;
    format!(
        "{PHILOX_CUDA}
extern \"C\" __global__ void sluice_test_flip(const unsigned char *in, float *out, unsigned long long n,
                                             unsigned long long seed, unsigned long long epoch,
                                             unsigned long long first_index, unsigned int h, unsigned int w,
                                             unsigned int c) {{
    unsigned long long base = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) * {vpt}ull;
    for (unsigned long long i = base; i < base + {vpt}ull && i < n; ++i) {{
        unsigned long long per = (unsigned long long)h * w * c;
        unsigned long long b = i / per, r = i % per;
        unsigned long long y = r / ((unsigned long long)w * c), x = (r / c) % w, ch = r % c;
        if (sluice_flip_draw(seed, 0, epoch, first_index + b)) x = w - 1 - x;
        out[i] = (float)in[b * per + (y * w + x) * c + ch];
    }}
}}
"
    )
}

/// Whether NVRTC is there; if not, says that the test skips.
fn nvrtc_or_skip(test: &str) -> bool {
    if !nvrtc_available() {
        eprintln!(
            "{test}: skipped: NVRTC (libnvrtc.so.13) is not on the library path (set LD_LIBRARY_PATH \
             to the nvidia-cuda-nvrtc wheel's nvidia/cu13/lib to run it)"
        );
    }
    nvrtc_available()
}

#[test]
fn kernels_using_philox_compile_to_ptx() {
    if !nvrtc_or_skip("kernels_using_philox_compile_to_ptx") {
        return;
    }
    let source = flip_kernel();
    let ptx = compile_ptx("sluice_test_flip", &source).unwrap();
    assert!(ptx.text().contains(".entry sluice_test_flip("), "{}", ptx.text());
    assert_eq!(ptx.name(), "sluice_test_flip");
    if !gpu_available() {
        assert_eq!(ptx.arch(), "compute_90");
    }
    assert!(ptx.text().contains(&format!(".target sm_{}", &ptx.arch()["compute_".len()..])));
    // Compiled once per process: the second call is the cached result.
    assert!(Arc::ptr_eq(&ptx, &compile_ptx("sluice_test_flip", &source).unwrap()));
    // The bare generator compiles too, in a kernel that draws every way.
    let draws = format!(
        "{PHILOX_CUDA}
extern \"C\" __global__ void sluice_test_draws(unsigned long long *out, unsigned long long n) {{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sluice_rng r = sluice_element_rng(7, 1, 2, i);
    unsigned long long top, left;
    sluice_crop_draw(7, 2, 2, i, 33, (1ull << 33), &top, &left);
    out[i] = sluice_rng_next_u64(&r) ^ sluice_rng_below(&r, 10) ^ (unsigned long long)(sluice_rng_next_f32(&r) * 8.0f)
        ^ top ^ left ^ (unsigned long long)sluice_flip_draw(7, 3, 2, i);
}}
"
    );
    assert!(compile_ptx("sluice_test_draws", &draws).unwrap().text().contains(".entry sluice_test_draws("));
}

#[test]
fn compile_errors_name_the_kernel_and_carry_nvrtc_log() {
    if !nvrtc_or_skip("compile_errors_name_the_kernel_and_carry_nvrtc_log") {
        return;
    }
    let bad = "extern \"C\" __global__ void sluice_bad(float *out) { out[0] = undefined_thing; }";
    match compile_ptx("sluice_bad", bad) {
        Err(Error::Cuda { context, message }) => {
            assert!(context.contains("sluice_bad"), "{context}");
            assert!(message.contains("undefined_thing") && message.contains("sluice_bad.cu"), "{message}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    // Compiles, but the kernel asked for is not in it.
    let other = "extern \"C\" __global__ void sluice_other(float *out) { out[0] = 1.0f; }";
    match compile_ptx("sluice_missing", other) {
        Err(e @ Error::Cuda { .. }) => {
            assert!(e.to_string().contains("defines no kernel `sluice_missing`"), "{e}")
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn without_nvrtc_compiling_is_an_error() {
    assert!(matches!(compile_ptx("not an identifier", ""), Err(Error::Cuda { .. })));
    if nvrtc_available() {
        return;
    }
    match compile_ptx("sluice_test_flip", &flip_kernel()) {
        Err(e @ Error::Cuda { .. }) => assert!(e.to_string().contains("NVRTC"), "{e}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn without_a_gpu_the_launch_path_is_an_error_and_the_twin_is_noted() {
    // Never panics, whatever the machine.
    let gpu = gpu_available();
    note_cpu_fallback("the test chain");
    note_cpu_fallback("the test chain"); // printed once
    if gpu && nvrtc_available() {
        assert_eq!(cpu_fallback_reason(), None);
        return;
    }
    assert!(cpu_fallback_reason().is_some());
    if !gpu {
        match GpuTail::new(0, "sluice_test_flip", &flip_kernel()) {
            Err(e @ Error::Cuda { .. }) => {
                let text = e.to_string();
                assert!(text.contains("sluice_test_flip") && text.contains("device 0"), "{text}");
            }
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

#[test]
fn on_a_gpu_the_kernel_matches_its_cpu_twin() {
    if !(gpu_available() && nvrtc_available()) {
        let why = cpu_fallback_reason().unwrap_or_else(|| "no NVRTC".into());
        sluice_runtime::testing::skip_gpu_test("on_a_gpu_the_kernel_matches_its_cpu_twin", &why);
        return;
    }
    let (b, h, w, c) = (5usize, 7usize, 9usize, 3usize);
    let (seed, epoch) = (42u64, 3u64);
    let mut tail = GpuTail::new(0, "sluice_test_flip", &flip_kernel()).unwrap();
    let mut out = tail.alloc_output::<f32>(b * h * w * c).unwrap();
    // Three batches through the two slots, each checked against the CPU twin.
    for k in 0..3u64 {
        let first_index = k * b as u64;
        let batch: Vec<u8> = (0..b * h * w * c).map(|i| (i as u64 * 31 + k * 7) as u8).collect();
        tail.stage(batch.len()).unwrap().copy_from_slice(&batch);
        let args = [
            KernelArg::U64(seed),
            KernelArg::U64(epoch),
            KernelArg::U64(first_index),
            KernelArg::U32(h as u32),
            KernelArg::U32(w as u32),
            KernelArg::U32(c as u32),
        ];
        tail.launch(&mut out, &args).unwrap();
        let got = tail.download(&out).unwrap();
        let mut want = Vec::new();
        for (e, image) in batch.chunks_exact(h * w * c).enumerate() {
            let t = Tensor::new(vec![h, w, c], image.to_vec()).unwrap();
            let t = t.random_flip(&mut element_rng(seed, 0, epoch, first_index + e as u64));
            want.extend(t.as_slice().iter().map(|&v| f32::from(v)));
        }
        assert_eq!(got, want, "batch {k}");
    }
}
