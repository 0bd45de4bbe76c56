//! The GPU tail's measurements ([7/9]), for a machine with a GPU (`scripts/gpu-check`):
//! the kernel `build.rs` generates for `random_crop(56, 56) → random_flip → cast(f32) →
//! scale(1/255) → normalize → transpose(chw)` on batches of 256 × 64 × 64 × 3 `u8`.
//!
//! 1. Correctness: for three batches, the kernel's output against the CPU twin (the
//!    runtime's own operations, row by row, with the same Philox keys), bit for bit.
//! 2. The kernel's bandwidth (bytes read + written per second, timed with CUDA events after
//!    a warm-up) as a fraction of a device-to-device copy of the same bytes.
//! 3. The host-to-device copy rate from pinned memory, and the pipelined rate of
//!    `GpuTail` (staging, copy and kernel of batch k+1 overlapping batch k).
//!
//! Without a GPU it says why and exits 0: there is nothing to measure.
//!
//! ```sh
//! cargo run --release -p sluice-examples --features cuda --bin gpu-bench
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sluice::runtime::abi::ops::{self, Flip};
use sluice::runtime::column::Tensor;
use sluice::runtime::cuda::cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg, sys};
use sluice::runtime::cuda::cudarc::nvrtc::Ptx;
use sluice::runtime::cuda::{self, GpuTail, KernelArg};

const SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/gpu_bench_kernel.cu"));
const NAME: &str = "gpu_bench_augment";
const ROWS: usize = 256;
const H: usize = 64;
const W: usize = 64;
const C: usize = 3;
const CROP: usize = 56;
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];
const SEED: u64 = 7;
const EPOCH: u64 = 1;
const REPS: usize = 100;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    if let Some(why) = cuda::cpu_fallback_reason() {
        println!("gpu-bench: {why}: nothing to measure here (run it on a GPU machine: scripts/gpu-check)");
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The CPU twin: the runtime's operations on each row, keyed like the kernel.
fn cpu_twin(input: &[u8], batch: u64) -> Res<Vec<f32>> {
    let mut out = Vec::with_capacity(ROWS * C * CROP * CROP);
    for (i, row) in input.chunks(H * W * C).enumerate() {
        let index = (batch << 20) | i as u64;
        let t = Tensor::new(vec![H, W, C], row.to_vec())?;
        let t = ops::random_crop(&t, CROP, CROP, &mut ops::element_rng(SEED, 0, EPOCH, index))?;
        let t = t.random_flip(&mut ops::element_rng(SEED, 1, EPOCH, index));
        let f: Vec<f32> = t.as_slice().iter().map(|&v| f32::from(v) * (1.0 / 255.0) as f32).collect();
        let f = ops::normalize(Tensor::new(t.shape().to_vec(), f)?, &MEAN, &STD)?;
        out.extend_from_slice(ops::transpose_chw(&f)?.as_slice());
    }
    Ok(out)
}

fn run() -> Res<()> {
    let in_len = ROWS * H * W * C;
    let out_len = ROWS * C * CROP * CROP;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let input: Vec<u8> = (0..in_len)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect();

    // 1. Correctness through the runtime's launch path.
    let mut tail = GpuTail::new(0, NAME, SOURCE)?;
    let mut out = tail.alloc_output::<f32>(out_len)?;
    for batch in 0..3u64 {
        tail.stage(in_len)?.copy_from_slice(&input);
        tail.launch(
            &mut out,
            &[KernelArg::U64(EPOCH), KernelArg::U64(batch), KernelArg::U64(0), KernelArg::U64(SEED)],
        )?;
        let got = tail.download(&out)?;
        let want = cpu_twin(&input, batch)?;
        let equal = got.iter().zip(&want).filter(|(a, b)| a.to_bits() == b.to_bits()).count();
        let max = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        println!("batch {batch}: {equal}/{out_len} values bit-identical to the CPU twin, max |diff| {max:e}");
        if max > 1e-6 {
            return Err(format!("batch {batch}: the kernel differs from its CPU twin by {max}").into());
        }
    }

    // 2. The kernel alone against a device-to-device copy, timed with events.
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let ptx = cuda::compile_ptx(NAME, SOURCE)?;
    let f = ctx.load_module(Ptx::from_src(ptx.text()))?.load_function(NAME)?;
    let d_in = stream.clone_htod(&input)?;
    let mut d_out = stream.alloc_zeros::<f32>(out_len)?;
    let (n, epoch, batch, row0, seed) = (out_len as u64, EPOCH, 0u64, 0u64, SEED);
    let cfg = LaunchConfig {
        grid_dim: (out_len.div_ceil(cuda::BLOCK as usize * cuda::VALUES_PER_THREAD) as u32, 1, 1),
        block_dim: (cuda::BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let timed = |work: &mut dyn FnMut() -> Res<()>| -> Res<f64> {
        for _ in 0..5 {
            work()?;
        }
        let start = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        let end = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        start.record(&stream)?;
        for _ in 0..REPS {
            work()?;
        }
        end.record(&stream)?;
        Ok(f64::from(start.elapsed_ms(&end)?) / 1e3 / REPS as f64)
    };
    let kernel_s = timed(&mut || {
        let mut b = stream.launch_builder(&f);
        b.arg(&d_in).arg(&mut d_out).arg(&n).arg(&epoch).arg(&batch).arg(&row0).arg(&seed);
        // SAFETY: the arguments match the generated kernel's signature (in, out, n, epoch,
        // batch_index, row0, seed0) and the buffers hold `in_len` bytes and `out_len` floats.
        unsafe { b.launch(cfg) }?;
        Ok(())
    })?;
    let bytes = (in_len + out_len * 4) as f64;
    let src = stream.alloc_zeros::<u8>(bytes as usize / 2)?;
    let mut dst = stream.alloc_zeros::<u8>(bytes as usize / 2)?;
    let copy_s = timed(&mut || Ok(stream.memcpy_dtod(&src, &mut dst)?))?;
    let (kernel_bw, copy_bw) = (bytes / kernel_s / 1e9, bytes / copy_s / 1e9);
    println!(
        "kernel: {:.1} µs per batch, {kernel_bw:.0} GB/s (read + written); device-to-device copy of the same bytes: \
         {copy_bw:.0} GB/s; kernel at {:.0}% of copy bandwidth",
        kernel_s * 1e6,
        100.0 * kernel_bw / copy_bw
    );

    // 3. Host → device from pinned memory, and the pipelined tail.
    // SAFETY: the pinned buffer is written before it is read.
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(in_len, 0) }?;
    pinned.as_mut_slice()?.copy_from_slice(&input);
    let mut d_stage = stream.alloc_zeros::<u8>(in_len)?;
    let h2d_s = timed(&mut || Ok(stream.memcpy_htod(&pinned, &mut d_stage)?))?;
    println!("host -> device from pinned memory: {:.1} GB/s", in_len as f64 / h2d_s / 1e9);
    let t = Instant::now();
    for batch in 0..REPS as u64 {
        tail.stage(in_len)?.copy_from_slice(&input);
        tail.launch(
            &mut out,
            &[KernelArg::U64(EPOCH), KernelArg::U64(batch), KernelArg::U64(0), KernelArg::U64(SEED)],
        )?;
    }
    tail.synchronize()?;
    let per = t.elapsed().as_secs_f64() / REPS as f64;
    println!(
        "GpuTail (stage + copy + kernel, overlapped): {:.1} µs per batch, {:.0} batches/s, {:.0} images/s",
        per * 1e6,
        1.0 / per,
        ROWS as f64 / per
    );
    Ok(())
}
