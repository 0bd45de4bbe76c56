//! The `cuda` feature: post-`batch` chains of a pipeline as CUDA kernels.
//!
//! The compiler turns each elementwise/layout chain after `batch` into one CUDA C kernel
//! (and a CPU twin that computes the same values); this module is what runs them:
//!
//! - [`nvrtc_available`], [`gpu_available`], [`cpu_fallback_reason`]: whether the GPU path
//!   can run, asked without ever panicking (cudarc panics when it calls into a library that
//!   is not there, so the libraries' presence is checked first);
//! - [`compile_ptx`]: NVRTC compiles a kernel's source to PTX once per process (cached by
//!   name and source); errors name the kernel and carry NVRTC's log;
//! - [`GpuTail`]: one kernel on one device: batches assembled in pinned host memory
//!   (double-buffered), copied host → device on a copy stream while the previous batch's
//!   kernel runs on a compute stream, the kernel writing into a caller's device buffer
//!   (a cudarc slice, or a raw pointer such as a `tch::Tensor`'s `data_ptr`);
//! - [`PHILOX_CUDA`]: the CUDA C of the runtime's Philox generator and the draws of the
//!   random operations, bit-identical to [`crate::rng`] and [`crate::abi::ops`];
//! - [`note_cpu_fallback`]: says once per process, on stderr, that the CPU twin runs
//!   instead, and why.
//!
//! The driver (`libcuda.so`) and NVRTC (`libnvrtc.so.13`) are loaded at run time by cudarc
//! (CUDA 13.0 API), so the feature builds with no CUDA installed. NVRTC needs no GPU: with
//! the `nvidia-cuda-nvrtc` wheel's folder on `LD_LIBRARY_PATH` (it holds
//! `libnvrtc-builtins.so.13.0` too), every kernel can be compiled to PTX in CI.

mod nvrtc;
pub mod philox;
mod tail;

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, Once, OnceLock};

use cudarc::driver::CudaContext;

use crate::error::Error;

pub use cudarc;
pub use nvrtc::{Ptx, compile_ptx};
pub use philox::PHILOX_CUDA;
pub use tail::{BLOCK, GpuTail, KernelArg, VALUES_PER_THREAD};

/// Whether NVRTC's library can be loaded (`libnvrtc.so`, `.so.13`… on the library path).
/// Checked once per process.
pub fn nvrtc_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        // SAFETY: only tries to load the library (and unloads it); no symbol is called.
        unsafe { cudarc::nvrtc::sys::is_culib_present() }
    })
}

/// Whether a CUDA device can be used: the driver library loads, initialises and counts at
/// least one device. Checked once per process; never panics.
pub fn gpu_available() -> bool {
    device_count().is_ok_and(|n| n > 0)
}

/// The number of CUDA devices, or why there is none usable.
pub(crate) fn device_count() -> Result<usize, String> {
    static COUNT: OnceLock<Result<usize, String>> = OnceLock::new();
    COUNT
        .get_or_init(|| {
            // SAFETY: only tries to load the library (and unloads it); no symbol is called.
            if !unsafe { cudarc::driver::sys::is_culib_present() } {
                return Err("no CUDA driver library (libcuda.so) was found".into());
            }
            let count = catch(|| {
                cudarc::driver::result::init()?;
                cudarc::driver::result::device::get_count()
            })?;
            match count {
                Ok(n) if n > 0 => Ok(usize::try_from(n).unwrap_or(0)),
                Ok(_) => Err("the CUDA driver sees no device".into()),
                Err(e) => Err(format!("the CUDA driver did not initialise: {e}")),
            }
        })
        .clone()
}

/// Why the GPU path cannot run, or `None` when it can (a device and NVRTC are there).
pub fn cpu_fallback_reason() -> Option<String> {
    match device_count() {
        Err(why) => Some(why),
        Ok(_) if !nvrtc_available() => Some("NVRTC (libnvrtc.so) was not found".into()),
        Ok(_) => None,
    }
}

/// Says on stderr, once per process, that `what` (and any later GPU stage) runs on its CPU
/// twin instead of the GPU, and why.
pub fn note_cpu_fallback(what: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let why = cpu_fallback_reason().unwrap_or_else(|| "the GPU path was not taken".into());
        eprintln!("sluice: {why}: running the CPU twin of {what} (and of any later GPU stage)");
    });
}

/// The context (primary, shared with libtorch) of device `ordinal`, made once; an error
/// says why there is none (`device N: ...`).
fn context(ordinal: usize) -> Result<Arc<CudaContext>, String> {
    static CONTEXTS: Mutex<Vec<(usize, Arc<CudaContext>)>> = Mutex::new(Vec::new());
    let device = |message: String| format!("device {ordinal}: {message}");
    let n = device_count().map_err(device)?;
    if ordinal >= n {
        return Err(device(format!("there are {n} CUDA devices")));
    }
    let mut contexts = CONTEXTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ctx)) = contexts.iter().find(|(o, _)| *o == ordinal) {
        return Ok(ctx.clone());
    }
    let ctx = catch(|| CudaContext::new(ordinal))
        .map_err(device)?
        .map_err(|e| device(format!("creating its context: {e}")))?;
    contexts.push((ordinal, ctx.clone()));
    Ok(ctx)
}

/// Runs `f`, turning a panic (cudarc's reaction to a missing library function) into an
/// error message.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| match Error::from_panic("cuda", payload) {
        Error::Panic { message, .. } => format!("cudarc panicked: {message}"),
        other => other.to_string(),
    })
}
