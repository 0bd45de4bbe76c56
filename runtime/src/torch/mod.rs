//! The `torch` feature: batches as `tch::Tensor`s and a data-parallel trainer.
//!
//! - [`TensorBatch`]: a generated batch struct's columns as tensors, without copying
//!   (the tensors own the column buffers), split per device and moved to CUDA devices
//!   through pinned memory with non-blocking copies;
//! - [`device_batches`]: a pipeline's pass, each global batch split in one part per
//!   device and delivered on its device by a thread of its own, ahead of the training
//!   loop;
//! - [`Feed`], [`TailFeed`]: where the trainer pulls a pass from: any such pipeline, or a
//!   `device cuda` pipeline whose tail after `batch` runs as generated CUDA kernels on the
//!   feed's thread, writing into the tensors the trainer gets (its CPU twin without a GPU);
//! - [`Trainer`]: one model replica per device, forward and backward in parallel, the
//!   gradients all-reduced, one optimizer step in sync (`tf.distribute.MirroredStrategy`),
//!   with per-step and per-epoch throughput, data-stall share, loss and metrics; joined
//!   to other processes ([`Trainer::join`] over a [`crate::dist::Collective`], MPI with
//!   the `mpi` feature), the gradients are summed over the ranks too (NCCL between GPUs);
//! - [`rank_devices`]: the devices of one rank of such a job.
//!
//! libtorch comes from `scripts/setup-torch` (PyPI's `torch==2.11.0`, what tch 0.24
//! wants); see the repository's README.

mod checkpoint;
mod dist;
mod feed;
mod handoff;
mod report;
mod tensor;
mod trainer;

pub use feed::{DeviceBatches, Feed, TailFeed, device_batches, device_batches_from};
pub use report::{EpochReport, Totals};
pub use tch;
pub use tensor::{Column, TensorBatch};
pub use trainer::{AfterStep, PassAhead, StepOutput, Trainer, devices};

/// The devices of rank `comm.local_rank()` of a multi-process job: the visible CUDA
/// device it takes (ranks on a machine take its GPUs in turn, `local_rank % GPUs`, as
/// Horovod does), or `cpu_replicas` CPU replicas when there is none.
pub fn rank_devices(comm: &dyn crate::dist::Collective, cpu_replicas: usize) -> Vec<tch::Device> {
    let gpus = cuda_device_count();
    if gpus > 0 {
        vec![tch::Device::Cuda(comm.local_rank() % gpus)]
    } else {
        vec![tch::Device::Cpu; cpu_replicas.max(1)]
    }
}

/// The number of CUDA devices libtorch sees (0 without a GPU or a driver).
pub fn cuda_device_count() -> usize {
    usize::try_from(tch::Cuda::device_count()).unwrap_or(0)
}
