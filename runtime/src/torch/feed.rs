//! [`Feed`]: what the trainer pulls a pass of device batches from. Any pipeline whose
//! batches are [`NamedColumns`] is one ([`device_batches`]); a `device cuda` pipeline is
//! a [`TailFeed`]: its host batches, its device tail's kernels and its CPU twin.
//!
//! Either way the pass is a [`DeviceBatches`]: the global batches a thread of the feed's
//! own delivers on the devices, in one part per device, ahead of the training loop: up to
//! 16 global batches (2 whatever their size, more within 64 MiB), refilled in bursts once
//! half are left ([`handoff`](super::handoff): one wake-up of the feed per several steps
//! rather than one per step, each of which took the training thread's core on a busy
//! machine).
//!
//! The GPU path of a [`TailFeed`] (features `torch` and `cuda`, every device a CUDA
//! device, the driver and NVRTC present) runs on the feed's own thread, per global batch
//! `b` of the pass:
//!
//! 1. the host batch becomes CPU tensors sharing its memory ([`TensorBatch::from_batch`])
//!    and is split in one part per device (rows `row0..row0 + len`);
//! 2. each column the tail computes is staged in one of its kernel's two pinned buffers
//!    ([`GpuTail::stage`]), copied to the device on the kernel's copy stream, and the
//!    kernel (compiled once per process by NVRTC) runs on the device's default stream,
//!    writing straight into a `tch::Tensor` libtorch allocated on that stream: no device
//!    copy after it, and the training step that reads it is ordered after it by the
//!    stream, not by the host;
//! 3. the other columns move as in [`device_batches`] (pinned, non-blocking).
//!
//! The feed runs ahead of the training loop, so batch `b + 1`'s copy overlaps batch `b`'s
//! kernel and training step (a staging buffer is reused once its copy is done). Draws are
//! keyed by the pass's epoch, `b` and the global row (`row0 + i`), as in the CPU twin.
//!
//! Anywhere else (no GPU, no driver, no NVRTC, CPU devices, or built without `cuda`) the
//! CPU twin runs instead, and the feed says so once per process on stderr.

use std::sync::Once;
use std::thread::JoinHandle;

use tch::Device;

use super::handoff::{self, Receiver, Sender};
use super::tensor::TensorBatch;
use crate::abi::DeviceTail;
use crate::column::NamedColumns;
use crate::error::{Error, Result};
use crate::stage::{Ctx, Dataset};

/// A source of device batches for the trainer: one pass in `ctx`, each global batch split
/// in one part per device and delivered there.
pub trait Feed {
    /// Starts a pass, after its first `skip` batches (0: the whole pass; more: a resumed
    /// one, fast-forwarded by [`Dataset::iter_from`]).
    fn feed(&self, ctx: &Ctx, devices: &[Device], skip: u64) -> Result<DeviceBatches>;
}

impl<D> Feed for D
where
    D: Dataset,
    D::Item: NamedColumns,
{
    fn feed(&self, ctx: &Ctx, devices: &[Device], skip: u64) -> Result<DeviceBatches> {
        device_batches_from(self, ctx, devices, skip)
    }
}

/// A `device cuda` pipeline: its host batches (`host_dataset()`), its device tail
/// (`device_tail()`) and its CPU twin (`dataset()`), as the generated module gives them.
#[derive(Debug)]
pub struct TailFeed<H, T> {
    host: H,
    twin: T,
    tail: DeviceTail,
}

impl<H, T> TailFeed<H, T> {
    /// The feed of a generated `device cuda` pipeline `NAME`:
    /// `TailFeed::new(NAME::host_dataset(&p)?, NAME::dataset(&p)?, NAME::device_tail(&p))`.
    pub fn new(host: H, twin: T, tail: DeviceTail) -> Self {
        TailFeed { host, twin, tail }
    }

    /// The device tail.
    pub fn tail(&self) -> &DeviceTail {
        &self.tail
    }

    /// Why the GPU path cannot run on `devices`, or `None` when it can.
    pub fn cpu_reason(&self, devices: &[Device]) -> Option<String> {
        if devices.is_empty() || devices.iter().any(|d| !d.is_cuda()) {
            return Some("the training devices are not all CUDA devices".into());
        }
        gpu_reason()
    }
}

impl<H, T> Feed for TailFeed<H, T>
where
    H: Dataset,
    H::Item: NamedColumns,
    T: Dataset,
    T::Item: NamedColumns,
{
    fn feed(&self, ctx: &Ctx, devices: &[Device], skip: u64) -> Result<DeviceBatches> {
        match self.cpu_reason(devices) {
            None => gpu::feed(&self.host, &self.tail, ctx, devices, skip),
            Some(why) => {
                note_twin(self.tail.pipeline, &why);
                device_batches_from(&self.twin, ctx, devices, skip)
            }
        }
    }
}

/// The global batches of one pass of a pipeline, each converted to tensors, split in one
/// part per device and moved to its device, by a thread of its own that runs ahead of the
/// training loop: see [`device_batches`].
#[derive(Debug)]
pub struct DeviceBatches {
    rx: Receiver<Result<Vec<TensorBatch>>>,
    thread: Option<JoinHandle<()>>,
}

impl DeviceBatches {
    /// The batches a feeding `thread` sends on a channel.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // the GPU tail's feed
    pub(crate) fn new(rx: Receiver<Result<Vec<TensorBatch>>>, thread: JoinHandle<()>) -> Self {
        DeviceBatches { rx, thread: Some(thread) }
    }

    /// The next global batch's parts, `None` at the end of the pass.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&self) -> Option<Result<Vec<TensorBatch>>> {
        self.rx.recv()
    }

    /// Whether the feeding thread has sent its last batch (or failed): the pipeline has
    /// nothing more to compute for this pass, only batches queued for the consumer. The
    /// feeder says so by dropping its sender as soon as its pass ends, before it drops the
    /// pass (which joins the pipeline's threads); a feeder that panicked dropped it too.
    pub fn producer_done(&self) -> bool {
        self.rx.sender_gone()
    }

    /// Stops the feeding thread (it may be ahead, or the consumer may have stopped early)
    /// and waits for it; an error if it panicked.
    pub fn finish(mut self) -> Result<()> {
        drop(std::mem::replace(&mut self.rx, handoff::queue(0, 0).1));
        self.join()
    }

    fn join(&mut self) -> Result<()> {
        match self.thread.take().map(JoinHandle::join) {
            Some(Err(_)) => Err(Error::Invalid("the thread feeding the devices panicked".into())),
            _ => Ok(()),
        }
    }
}

impl Drop for DeviceBatches {
    fn drop(&mut self) {
        // Unblock the feeder (its sends fail once the receiver is gone) and wait for it.
        drop(std::mem::replace(&mut self.rx, handoff::queue(0, 0).1));
        let _ = self.join();
    }
}

/// Runs one pass of `dataset` in `ctx` on a thread of its own, converting each batch to
/// tensors ([`TensorBatch::from_batch`]), splitting it in `devices.len()` near-equal parts
/// and moving part `i` to `devices[i]` (through pinned memory and a non-blocking copy
/// for a GPU), ahead of the consumer (see the [module docs](self)).
pub fn device_batches<D>(dataset: &D, ctx: &Ctx, devices: &[Device]) -> Result<DeviceBatches>
where
    D: Dataset,
    D::Item: NamedColumns,
{
    device_batches_from(dataset, ctx, devices, 0)
}

/// [`device_batches`] of the pass after its first `skip` batches ([`Dataset::stream_from`]:
/// a resumed epoch).
pub fn device_batches_from<D>(dataset: &D, ctx: &Ctx, devices: &[Device], skip: u64) -> Result<DeviceBatches>
where
    D: Dataset,
    D::Item: NamedColumns,
{
    let stream = dataset.stream_from(ctx, skip)?;
    let devices = devices.to_vec();
    let (tx, rx) = feed_queue();
    let thread = std::thread::Builder::new()
        .name("sluice-to-device".into())
        .spawn(move || {
            let mut stream = stream;
            for item in stream.by_ref() {
                let parts = item.and_then(TensorBatch::from_batch).map(|b| {
                    let parts = b.split(devices.len());
                    parts.iter().zip(&devices).map(|(p, &d)| p.to_device(d)).collect()
                });
                if !send(&tx, parts) {
                    break;
                }
            }
            // Done: say so before the pass is dropped (its threads joined), so that an
            // epoch turn can start the next pass now ([`DeviceBatches::producer_done`]).
            drop(tx);
            drop(stream);
        })
        .map_err(|e| Error::Invalid(format!("starting the thread feeding the devices: {e}")))?;
    Ok(DeviceBatches { rx, thread: Some(thread) })
}

/// The queue from a feed's thread to the training loop: up to
/// [`DEVICE_FEED_AHEAD`](crate::defaults::DEVICE_FEED_AHEAD) global batches and, past
/// the first two, [`DEVICE_FEED_AHEAD_BYTES`](crate::defaults::DEVICE_FEED_AHEAD_BYTES).
type FeedQueue = (Sender<Result<Vec<TensorBatch>>>, Receiver<Result<Vec<TensorBatch>>>);

fn feed_queue() -> FeedQueue {
    handoff::queue(crate::defaults::DEVICE_FEED_AHEAD, crate::defaults::DEVICE_FEED_AHEAD_BYTES)
}

/// Queues one global batch's parts (or the error that ends the pass); whether the feed
/// goes on (the consumer is there and this was no error).
fn send(tx: &Sender<Result<Vec<TensorBatch>>>, parts: Result<Vec<TensorBatch>>) -> bool {
    let failed = parts.is_err();
    let bytes = parts.as_ref().map_or(0, |p| p.iter().map(TensorBatch::bytes).sum());
    tx.send(parts, bytes).is_ok() && !failed
}

/// Says once per process that a device tail runs as its CPU twin, and why.
fn note_twin(pipeline: &str, why: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "sluice: {why}: running the CPU twin of the device tail of `{pipeline}` (and of any later one)"
        );
    });
}

#[cfg(not(feature = "cuda"))]
fn gpu_reason() -> Option<String> {
    Some("sluice was built without its `cuda` feature".into())
}

#[cfg(feature = "cuda")]
fn gpu_reason() -> Option<String> {
    crate::cuda::cpu_fallback_reason()
}

#[cfg(not(feature = "cuda"))]
mod gpu {
    use super::*;

    pub(super) fn feed<H: Dataset>(
        _: &H,
        _: &DeviceTail,
        _: &Ctx,
        _: &[Device],
        _: u64,
    ) -> Result<DeviceBatches> {
        unreachable!("the GPU path is only taken with the `cuda` feature")
    }
}

#[cfg(feature = "cuda")]
mod gpu {
    use tch::{Kind, Tensor};

    use super::*;
    use crate::abi::TailKernel;
    use crate::cuda::{GpuTail, KernelArg};
    use crate::torch::tensor::{Column, split_sizes};

    /// The libtorch type of a kernel's dtype name.
    fn kind(dtype: &str) -> Result<Kind> {
        Ok(match dtype {
            "bool" => Kind::Bool,
            "u8" => Kind::Uint8,
            "i32" => Kind::Int,
            "i64" => Kind::Int64,
            "f32" => Kind::Float,
            "f64" => Kind::Double,
            other => return Err(Error::Invalid(format!("no tensor type for kernel values of type {other}"))),
        })
    }

    /// The kernels of one device.
    struct DeviceKernels {
        device: Device,
        kernels: Vec<(TailKernel, GpuTail)>,
    }

    pub(super) fn feed<H>(
        host: &H,
        tail: &DeviceTail,
        ctx: &Ctx,
        devices: &[Device],
        skip: u64,
    ) -> Result<DeviceBatches>
    where
        H: Dataset,
        H::Item: NamedColumns,
    {
        let mut per_device = Vec::new();
        for &device in devices {
            let Device::Cuda(ordinal) = device else {
                return Err(Error::Invalid(format!("the GPU tail on {device:?}")));
            };
            let mut kernels = Vec::new();
            for k in &tail.kernels {
                kernels.push((k.clone(), GpuTail::on_default_stream(ordinal, k.name, k.source)?));
            }
            per_device.push(DeviceKernels { device, kernels });
        }
        let stream = host.stream_from(ctx, skip)?;
        let epoch = ctx.epoch();
        let (tx, rx) = feed_queue();
        let thread = std::thread::Builder::new()
            .name("sluice-gpu-tail".into())
            .spawn(move || {
                let mut stream = stream;
                // Batch `b` of the pass draws with `b`, resumed or not.
                for (b, item) in (skip..).zip(stream.by_ref()) {
                    let parts = item.and_then(|batch| launch(batch, &mut per_device, epoch, b));
                    if !send(&tx, parts) {
                        break;
                    }
                }
                // Done ([`DeviceBatches::producer_done`]), then the pass dropped.
                drop(tx);
                drop(stream);
                // The staging buffers outlive the copies out of them: `GpuTail`'s drop waits.
                drop(per_device);
            })
            .map_err(|e| Error::Invalid(format!("starting the thread feeding the GPU tail: {e}")))?;
        Ok(DeviceBatches::new(rx, thread))
    }

    /// One global batch: split, each part's tail columns computed on its device by the
    /// kernels, the other columns moved there.
    fn launch<B: NamedColumns>(
        batch: B,
        per_device: &mut [DeviceKernels],
        epoch: u64,
        b: u64,
    ) -> Result<Vec<TensorBatch>> {
        let host = TensorBatch::from_batch(batch)?;
        if let Some(dk) = per_device.first() {
            for (k, _) in &dk.kernels {
                check_range(&host, k)?;
            }
        }
        let mut parts = Vec::with_capacity(per_device.len());
        let mut row0 = 0;
        let sizes = split_sizes(host.rows(), per_device.len());
        for (dk, len) in per_device.iter_mut().zip(sizes) {
            let part = host.slice(row0, len);
            let mut columns = Vec::new();
            for (name, column) in part.columns() {
                let computed = match dk.kernels.iter_mut().find(|(k, _)| k.field == *name) {
                    Some((k, gpu)) => {
                        Column::Dense(run_kernel(k, gpu, column, dk.device, len, epoch, b, row0)?)
                    }
                    None => part.moved_column(column, dk.device),
                };
                columns.push((*name, computed));
            }
            parts.push(TensorBatch::from_columns(len, columns));
            row0 += len;
        }
        Ok(parts)
    }

    /// A leading `one_hot`'s labels must lie in range: the kernel cannot fail, the CPU
    /// twin would.
    fn check_range(host: &TensorBatch, k: &TailKernel) -> Result<()> {
        let Some((lo, hi)) = k.in_range else { return Ok(()) };
        let t = host.tensor(k.field)?;
        let values = Vec::<i64>::try_from(&t.to_kind(Kind::Int64).reshape([-1]))
            .map_err(|e| Error::Invalid(format!("column `{}`: {e}", k.field)))?;
        match values.iter().position(|v| !(lo..hi).contains(v)) {
            None => Ok(()),
            Some(row) => Err(Error::Invalid(format!(
                "row {row} of the batch: one_hot: label {} of column `{}` is outside 0..{hi}",
                values[row], k.field
            ))),
        }
    }

    /// Rows `row0..row0 + len` of a host column through kernel `k` on `device`.
    #[allow(clippy::too_many_arguments)]
    fn run_kernel(
        k: &TailKernel,
        gpu: &mut GpuTail,
        column: &Column,
        device: Device,
        len: usize,
        epoch: u64,
        b: u64,
        row0: usize,
    ) -> Result<Tensor> {
        let Column::Dense(t) = column else {
            return Err(Error::Invalid(format!("column `{}` is ragged: no kernel takes it", k.field)));
        };
        if t.kind() != kind(k.in_dtype)? {
            return Err(Error::Invalid(format!(
                "column `{}` holds {:?} where kernel {} takes {}",
                k.field,
                t.kind(),
                k.name,
                k.in_dtype
            )));
        }
        let t = t.contiguous();
        let bytes = len * k.in_row_len() * t.kind().elt_size_in_bytes();
        let staged = gpu.stage(bytes)?;
        if bytes > 0 {
            // SAFETY: `t` is a contiguous CPU tensor of `len` rows of `in_row_len` values
            // of the kernel's input type: `bytes` bytes from its data pointer.
            let src = unsafe { std::slice::from_raw_parts(t.data_ptr() as *const u8, bytes) };
            staged.copy_from_slice(src);
        }
        let mut shape = vec![len as i64];
        shape.extend(k.out_shape.iter().map(|&d| d as i64));
        let out = Tensor::empty(shape.as_slice(), (kind(k.out_dtype)?, device));
        let n = len * k.out_row_len();
        let mut args = vec![KernelArg::U64(epoch), KernelArg::U64(b), KernelArg::U64(row0 as u64)];
        args.extend(k.seeds.iter().map(|&s| KernelArg::U64(s)));
        // SAFETY: `out` is a fresh tensor of `n` values of the kernel's output type on this
        // device, allocated by libtorch on the default stream the kernel runs on; it lives
        // on in the batch handed to the trainer, whose work on it the stream orders after
        // the kernel.
        unsafe { gpu.launch_raw(out.data_ptr() as u64, n, &args)? };
        Ok(out)
    }
}
