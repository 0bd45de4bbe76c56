//! [`GpuTail`]: one generated kernel on one device, fed batch after batch.
//!
//! The kernel ABI (what the compiler generates):
//!
//! ```c
//! extern "C" __global__ void NAME(const unsigned char *in, OUT *out, unsigned long long n,
//!                                 /* the launch's KernelArgs, in order */ ...)
//! // thread i computes out[V*i .. V*i + V] (those below n) from the batch's bytes `in`
//! ```
//!
//! The staged batch is one byte buffer (several columns lie at offsets the kernel is told
//! through its arguments or its source); the grid has one thread per
//! [`VALUES_PER_THREAD`] (V) output values, blocks of [`BLOCK`] threads. A block covers
//! `V * BLOCK` consecutive values in V rounds, its threads writing consecutive values in
//! each (coalesced stores); a thread's V loads are independent and in flight together.
//!
//! The flow of batch `k` through slot `k % 2` (two pinned host buffers, two device input
//! buffers, two streams, events between them):
//!
//! ```text
//! host:    stage(k): wait copied[s] (the slot's last copy), fill pinned[s]
//! copy:    wait consumed[s] (the slot's last kernel); pinned[s] → device[s]; record copied[s]
//! compute: wait copied[s]; kernel(device[s] → out); record consumed[s]
//! ```
//!
//! so the copy of batch `k + 1` runs while batch `k`'s kernel does, and the host fills a
//! buffer only when its previous copy is done. The output is written on the compute stream:
//! a `CudaSlice` output is tracked by cudarc (later use on another stream waits for it);
//! after [`GpuTail::launch_raw`], the caller waits with [`GpuTail::synchronize`] or orders
//! its own stream after [`GpuTail::compute_stream`].
//!
//! On a GPU, `scripts/gpu-check` exercises the copies, the launches, the events' ordering
//! and the overlap (the digits job's `gpu_tail` test and `gpu-bench`, against the CPU
//! twin bit for bit); without one, the tests check that every entry point returns an error
//! instead of panicking.

use std::fmt;
use std::sync::Arc;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, DriverError,
    LaunchConfig, PinnedHostSlice, PushKernelArg, ValidAsZeroBits,
};

use super::{catch, compile_ptx, context, nvrtc_available};
use crate::error::{Error, Result};

/// Threads per block of a launch.
pub const BLOCK: u32 = 256;

/// Output values per thread of a launch (consecutive ones; see the module doc).
pub const VALUES_PER_THREAD: usize = 4;

/// A scalar argument of a kernel, after its `in`, `out` and `n` (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    /// `unsigned int`.
    U32(u32),
    /// `int`.
    I32(i32),
    /// `unsigned long long` (seeds, epochs, element indices, offsets).
    U64(u64),
    /// `long long`.
    I64(i64),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
}

/// One of the two buffers of the double buffering.
struct Slot {
    /// Page-locked host memory the batch is assembled in.
    host: Option<PinnedHostSlice<u8>>,
    /// The batch's bytes on the device, the kernel's input.
    device: Option<CudaSlice<u8>>,
    /// Bytes staged by [`GpuTail::stage`] and not yet launched.
    staged: Option<usize>,
    /// Recorded on the copy stream after the copy out of `host`: `host` may be refilled
    /// and `device` read once it completes.
    copied: CudaEvent,
    /// Recorded on the compute stream after the kernel reading `device`: `device` may be
    /// overwritten once it completes.
    consumed: CudaEvent,
}

/// One generated kernel on one device: its context, a copy stream and a compute stream
/// made for it, the module loaded from the PTX [`compile_ptx`] cached, and double-buffered
/// pinned staging memory reused across batches.
///
/// Per batch: [`stage`](Self::stage) (assemble the batch's bytes in the returned pinned
/// buffer), then [`launch`](Self::launch) or [`launch_raw`](Self::launch_raw) (copy it to
/// the device and run the kernel into the output); both only enqueue work.
pub struct GpuTail {
    name: String,
    ordinal: usize,
    ctx: Arc<CudaContext>,
    copy: Arc<CudaStream>,
    compute: Arc<CudaStream>,
    function: CudaFunction,
    slots: [Slot; 2],
    next: usize,
}

impl fmt::Debug for GpuTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuTail")
            .field("name", &self.name)
            .field("ordinal", &self.ordinal)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl GpuTail {
    /// Kernel `name` of `source` on device `ordinal`: compiles it (or takes it from the
    /// cache), loads it, makes the streams and events. An error, never a panic, when there
    /// is no GPU, no NVRTC, or the kernel does not compile.
    pub fn new(ordinal: usize, name: &str, source: &str) -> Result<Self> {
        Self::make(ordinal, name, source, false)
    }

    /// As [`new`](Self::new), with the kernels on the context's legacy default stream
    /// (the null stream) instead of a stream of its own: the stream libtorch works on, so
    /// a kernel writing a `tch::Tensor` that libtorch's caching allocator just gave out
    /// runs after the work that used that memory before, and the training step that reads
    /// the output runs after the kernel, with no synchronisation on the host. The copies
    /// stay on their own stream (non-blocking): they overlap the training step.
    pub fn on_default_stream(ordinal: usize, name: &str, source: &str) -> Result<Self> {
        Self::make(ordinal, name, source, true)
    }

    fn make(ordinal: usize, name: &str, source: &str, default_stream: bool) -> Result<Self> {
        let fail = |message: String| Error::Cuda { context: format!("kernel `{name}`"), message };
        // The device first: without one, say so rather than what NVRTC thinks.
        let ctx = context(ordinal).map_err(&fail)?;
        if !nvrtc_available() {
            return Err(fail("NVRTC (libnvrtc.so.13) was not found".into()));
        }
        let ptx = compile_ptx(name, source)?;
        let driver = |what: &'static str| move |e: DriverError| fail(format!("{what}: {e}"));
        let function = catch(|| {
            let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx.text()))?;
            module.load_function(name)
        })
        .map_err(&fail)?
        .map_err(driver("loading its PTX"))?;
        let copy = ctx.new_stream().map_err(driver("creating its copy stream"))?;
        let compute = if default_stream {
            ctx.default_stream()
        } else {
            ctx.new_stream().map_err(driver("creating its compute stream"))?
        };
        let slot = || -> Result<Slot> {
            Ok(Slot {
                host: None,
                device: None,
                staged: None,
                copied: ctx.new_event(None).map_err(driver("creating an event"))?,
                consumed: ctx.new_event(None).map_err(driver("creating an event"))?,
            })
        };
        let slots = [slot()?, slot()?];
        Ok(GpuTail { name: name.to_string(), ordinal, ctx, copy, compute, function, slots, next: 0 })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's context (its primary context, which libtorch uses too).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream the kernel runs on: order later work on the output after it.
    pub fn compute_stream(&self) -> &Arc<CudaStream> {
        &self.compute
    }

    /// The pinned buffer to assemble the next batch's `bytes` bytes in, once the copy out
    /// of it two batches ago is done. Grown (reallocated) when too small; its contents are
    /// whatever was there before.
    pub fn stage(&mut self, bytes: usize) -> Result<&mut [u8]> {
        let fail = self.failure();
        let slot = &mut self.slots[self.next];
        slot.copied.synchronize().map_err(|e| fail(format!("waiting for a copy: {e}")))?;
        if slot.host.as_ref().is_none_or(|h| h.len() < bytes) {
            slot.host = None;
            // SAFETY: the memory is zeroed below before anything reads it.
            let mut host = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }
                .map_err(|e| fail(format!("allocating {bytes} bytes of pinned memory: {e}")))?;
            host.as_mut_slice().map_err(|e| fail(e.to_string()))?.fill(0);
            slot.host = Some(host);
        }
        slot.staged = Some(bytes);
        let host = slot.host.as_mut().map(|h| h.as_mut_slice());
        match host {
            Some(Ok(buf)) => Ok(&mut buf[..bytes]),
            Some(Err(e)) => Err(fail(e.to_string())),
            None => Err(fail("no staging buffer".into())),
        }
    }

    /// Copies the staged batch to the device and runs the kernel into `out`, one thread
    /// per value of `out` (`n = out.len()`), with `args` after `in`, `out` and `n`. Only
    /// enqueues: `out` is ready for work ordered after the compute stream (cudarc orders
    /// its own uses of `out` on other streams).
    pub fn launch<T: DeviceRepr>(&mut self, out: &mut CudaSlice<T>, args: &[KernelArg]) -> Result<()> {
        let compute = self.compute.clone();
        let n = out.len();
        // The compute stream waits for earlier uses of `out`; dropping `record` after the
        // launch records the write for later users (cudarc's tracking across streams).
        let (ptr, record) = out.device_ptr_mut(&compute);
        let launched = self.enqueue(ptr, n, args);
        drop(record);
        launched
    }

    /// As [`launch`](Self::launch), into `n` values at device address `out` (a
    /// `tch::Tensor`'s `data_ptr`, say).
    ///
    /// # Safety
    ///
    /// `out` must be memory of this device, in its primary context, valid for `n` values
    /// of the kernel's output type and not freed or used by other work until the kernel is
    /// done ([`synchronize`](Self::synchronize), or work ordered after
    /// [`compute_stream`](Self::compute_stream)).
    pub unsafe fn launch_raw(&mut self, out: CUdeviceptr, n: usize, args: &[KernelArg]) -> Result<()> {
        self.enqueue(out, n, args)
    }

    /// Waits until every launched kernel (and copy) is done.
    pub fn synchronize(&self) -> Result<()> {
        let fail = self.failure();
        self.copy.synchronize().map_err(|e| fail(format!("copy stream: {e}")))?;
        self.compute.synchronize().map_err(|e| fail(format!("compute stream: {e}")))
    }

    /// A zeroed device buffer of `len` values, for [`launch`](Self::launch).
    pub fn alloc_output<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        let fail = self.failure();
        self.compute.alloc_zeros(len).map_err(|e| fail(format!("allocating the output: {e}")))
    }

    /// The values of a device buffer, once the kernels writing it are done.
    pub fn download<T: DeviceRepr>(&self, out: &CudaSlice<T>) -> Result<Vec<T>> {
        let fail = self.failure();
        let values = self.compute.clone_dtoh(out).map_err(|e| fail(format!("copying to the host: {e}")))?;
        self.compute.synchronize().map_err(|e| fail(format!("copying to the host: {e}")))?;
        Ok(values)
    }

    /// Errors about this kernel.
    fn failure(&self) -> impl Fn(String) -> Error + use<> {
        let context = format!("kernel `{}` on device {}", self.name, self.ordinal);
        move |message| Error::Cuda { context: context.clone(), message }
    }

    /// The copy of the staged slot and the launch into `n` values at `out`.
    fn enqueue(&mut self, out: CUdeviceptr, n: usize, args: &[KernelArg]) -> Result<()> {
        let fail = self.failure();
        let blocks = u32::try_from(n.div_ceil(BLOCK as usize * VALUES_PER_THREAD))
            .ok()
            .filter(|&b| b <= i32::MAX as u32)
            .ok_or_else(|| fail(format!("{n} output values are too many for one launch")))?;
        let slot = &mut self.slots[self.next];
        let bytes = slot.staged.take().ok_or_else(|| fail("launch without a staged batch".into()))?;
        let driver = |what: &'static str| {
            let fail = &fail;
            move |e: DriverError| fail(format!("{what}: {e}"))
        };

        // Copy stream: once the slot's last kernel has read its device buffer, overwrite it.
        self.copy.wait(&slot.consumed).map_err(driver("ordering the copy"))?;
        if slot.device.as_ref().is_none_or(|d| d.len() < bytes) {
            slot.device = None; // freed in stream order, after the wait above
            // SAFETY: the kernel reads only the `bytes` bytes copied in below.
            let device = unsafe { self.copy.alloc::<u8>(bytes.max(1)) }
                .map_err(|e| fail(format!("allocating {bytes} device bytes: {e}")))?;
            slot.device = Some(device);
        }
        let (Some(host), Some(device)) = (slot.host.as_ref(), slot.device.as_mut()) else {
            return Err(fail("launch without a staging buffer".into()));
        };
        if bytes > 0 {
            let src = host.as_slice().map_err(driver("reading the staged batch"))?;
            let mut dst = device.slice_mut(..bytes);
            self.copy.memcpy_htod(&src[..bytes], &mut dst).map_err(driver("copying the batch"))?;
        }
        slot.copied.record(&self.copy).map_err(driver("recording the copy"))?;

        // Compute stream: once the copy is done, run the kernel.
        self.compute.wait(&slot.copied).map_err(driver("ordering the kernel"))?;
        if n > 0 {
            let n64 = n as u64;
            let mut builder = self.compute.launch_builder(&self.function);
            builder.arg(&*device).arg(&out).arg(&n64);
            for arg in args {
                match arg {
                    KernelArg::U32(v) => builder.arg(v),
                    KernelArg::I32(v) => builder.arg(v),
                    KernelArg::U64(v) => builder.arg(v),
                    KernelArg::I64(v) => builder.arg(v),
                    KernelArg::F32(v) => builder.arg(v),
                    KernelArg::F64(v) => builder.arg(v),
                };
            }
            let config =
                LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: the arguments follow the kernel ABI of the module doc: the input
            // buffer holds the staged batch, the output `n` values (the caller's promise for
            // a raw pointer, the slice's length otherwise), then the caller's scalars.
            unsafe { builder.launch(config) }.map_err(driver("launching"))?;
        }
        slot.consumed.record(&self.compute).map_err(driver("recording the kernel"))?;
        self.next ^= 1;
        Ok(())
    }
}

impl Drop for GpuTail {
    fn drop(&mut self) {
        // The pinned and device buffers must outlive the work that uses them.
        let _ = self.copy.synchronize();
        let _ = self.compute.synchronize();
    }
}
