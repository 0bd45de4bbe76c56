//! The trainer across processes: what [`Trainer::join`](super::Trainer::join) adds to a
//! trainer so that several ranks (processes, each with its own replicas and its own shard
//! of the data) train as one.
//!
//! Per step, every rank calls, in this order:
//!
//! 1. [`CrossRank::agree`]: one small all-reduce of (has a batch, rows, failed, stopping)
//!    over the host transport. It tells every rank the global batch's rows (the weight of
//!    each rank's gradient) and whether the epoch goes on: it ends when no rank has a
//!    batch left, so ranks whose shards differ by a batch still step together (the one
//!    without contributes a zero gradient, exactly as its missing rows would);
//! 2. [`CrossRank::all_reduce_grads`]: the sum of every rank's `Σ rows_i / rows · grad_i`,
//!    in one flat buffer: with NCCL on the GPU when every replica is on a CUDA device and
//!    libnccl loads (features `cuda`), else through host memory over the transport (MPI).
//!
//! So a step over `W` ranks computes the gradient of the whole global batch's mean loss,
//! as one process does with the same rows. At the end of a pass the ranks add up their
//! loss and metric sums ([`CrossRank::reduce_totals`]), so every rank reports the global
//! figures.

use std::rc::Rc;

use tch::{Device, Kind, Tensor};

use super::report::Totals;
use super::tensor::TensorBatch;
use crate::dist::Collective;
use crate::error::{Error, Result};

/// What the ranks agreed on before a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Agreement {
    /// Ranks that have a batch for this step.
    pub with_batch: u64,
    /// The global batch's rows.
    pub rows: u64,
    /// Ranks whose pipeline failed.
    pub failed: u64,
    /// Ranks whose step hook asked to stop.
    pub stopping: u64,
}

/// A trainer's link to the other ranks.
pub(crate) struct CrossRank {
    comm: Rc<dyn Collective>,
    #[cfg(feature = "cuda")]
    nccl: Option<nccl::Nccl>,
}

impl std::fmt::Debug for CrossRank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossRank").field("rank", &self.rank()).field("size", &self.size()).finish()
    }
}

impl CrossRank {
    /// The link over `comm`, gradients on `device` (the first local replica's): NCCL
    /// between CUDA devices when it loads, else `comm`. Says on stderr (rank 0) which.
    pub(crate) fn new(comm: Rc<dyn Collective>, device: Device) -> Result<CrossRank> {
        #[cfg(feature = "cuda")]
        let nccl = match device {
            Device::Cuda(ordinal) => match nccl::Nccl::new(&*comm, ordinal) {
                Ok(n) => Some(n),
                Err(why) => {
                    if comm.rank() == 0 {
                        eprintln!(
                            "sluice: {why}: the gradients go through host memory over {}",
                            comm.backend()
                        );
                    }
                    None
                }
            },
            _ => None,
        };
        #[cfg(not(feature = "cuda"))]
        if matches!(device, Device::Cuda(_)) && comm.rank() == 0 {
            eprintln!(
                "sluice: built without the `cuda` feature (no NCCL): the gradients go through host memory over {}",
                comm.backend()
            );
        }
        Ok(CrossRank {
            comm,
            #[cfg(feature = "cuda")]
            nccl,
        })
    }

    pub(crate) fn rank(&self) -> usize {
        self.comm.rank()
    }

    pub(crate) fn size(&self) -> usize {
        self.comm.size()
    }

    pub(crate) fn comm(&self) -> &dyn Collective {
        &*self.comm
    }

    /// How the gradients travel: `"nccl"` or the host transport's name.
    pub(crate) fn gradient_backend(&self) -> &'static str {
        #[cfg(feature = "cuda")]
        if self.nccl.is_some() {
            return "nccl";
        }
        self.comm.backend()
    }

    /// The agreement of the ranks before a step (see the module's doc).
    pub(crate) fn agree(
        &self,
        has_batch: bool,
        rows: usize,
        failed: bool,
        stopping: bool,
    ) -> Result<Agreement> {
        let mut v = [
            f64::from(u8::from(has_batch)),
            rows as f64,
            f64::from(u8::from(failed)),
            f64::from(u8::from(stopping)),
        ];
        self.comm.all_reduce_sum_f64(&mut v)?;
        Ok(Agreement {
            with_batch: v[0] as u64,
            rows: v[1] as u64,
            failed: v[2] as u64,
            stopping: v[3] as u64,
        })
    }

    /// This rank's next step, agreed with the other ranks: `next` is what its feed gave
    /// (`None`: its pass is over; not asked for when `stopping`, its step hook having
    /// said to stop). `Ok(Some((parts, global_rows)))`: a step of the global batch, with
    /// this rank's parts (`None` when it has none left); `Ok(None)`: the pass is over for
    /// every rank, or every rank stops. An error: this rank's pipeline failed, or another
    /// rank's did (every rank returns one), or the ranks disagree on stopping at
    /// `step` of `epoch`.
    pub(crate) fn next_step(
        &self,
        next: Option<Result<Vec<TensorBatch>>>,
        stopping: bool,
        step: u64,
        epoch: u64,
    ) -> Result<Option<(Option<Vec<TensorBatch>>, u64)>> {
        let (parts, failure) = match next {
            None => (None, None),
            Some(Ok(parts)) => (Some(parts), None),
            Some(Err(e)) => (None, Some(e)),
        };
        let rows = parts.iter().flatten().map(TensorBatch::rows).sum();
        let agreed = self.agree(parts.is_some(), rows, failure.is_some(), stopping)?;
        if let Some(e) = failure {
            return Err(e);
        }
        if agreed.failed > 0 {
            return Err(Error::Invalid(format!(
                "{} other rank(s) failed at step {step} of epoch {} (their errors say why); stopping with them",
                agreed.failed,
                epoch + 1
            )));
        }
        if agreed.stopping > 0 {
            if agreed.stopping as usize != self.size() {
                return Err(Error::Invalid(format!(
                    "the ranks disagree on stopping after step {step} of epoch {}: the step hook must decide alike \
                     on every rank",
                    epoch + 1
                )));
            }
            return Ok(None);
        }
        Ok((agreed.with_batch > 0).then_some((parts, agreed.rows)))
    }

    /// Replaces `grads` (tensors on one device) on every rank by their sum over the ranks.
    pub(crate) fn all_reduce_grads(&self, grads: &[Tensor]) -> Result<()> {
        if grads.is_empty() {
            return Ok(());
        }
        let float = grads.iter().all(|g| g.kind() == Kind::Float);
        let kind = if float { Kind::Float } else { Kind::Double };
        let flat = Tensor::cat(&grads.iter().map(|g| g.reshape([-1]).to_kind(kind)).collect::<Vec<_>>(), 0);
        #[cfg(feature = "cuda")]
        let flat = match &self.nccl {
            Some(n) => {
                n.all_reduce_sum(&flat)?;
                flat
            }
            None => self.host_all_reduce(flat, float)?,
        };
        #[cfg(not(feature = "cuda"))]
        let flat = self.host_all_reduce(flat, float)?;
        let mut offset = 0;
        for g in grads {
            let n = g.numel() as i64;
            let mut g = g.shallow_clone();
            g.copy_(&flat.narrow(0, offset, n).view_as(&g));
            offset += n;
        }
        Ok(())
    }

    /// `flat` summed over the ranks through host memory, in place on the CPU (a copy to
    /// and from it for a device tensor).
    fn host_all_reduce(&self, flat: Tensor, float: bool) -> Result<Tensor> {
        let device = flat.device();
        let host = flat.to_device(Device::Cpu).contiguous();
        let n = host.numel();
        if float {
            // SAFETY: `host` is a fresh contiguous CPU tensor of `n` f32 values (the `cat`
            // of the gradients, or its copy off the device) that nothing else references.
            let v = unsafe { std::slice::from_raw_parts_mut(host.data_ptr().cast::<f32>(), n) };
            self.comm.all_reduce_sum_f32(v)?;
        } else {
            // SAFETY: as above, of `n` f64 values.
            let v = unsafe { std::slice::from_raw_parts_mut(host.data_ptr().cast::<f64>(), n) };
            self.comm.all_reduce_sum_f64(v)?;
        }
        Ok(host.to_device(device))
    }

    /// Sets `vars` on every rank to rank 0's values (bytes as they are, any kind).
    pub(crate) fn broadcast_vars(&self, vars: &[Tensor]) -> Result<()> {
        for v in vars {
            let host = v.to_device(Device::Cpu).contiguous();
            let bytes = host.numel() * host.kind().elt_size_in_bytes();
            let mut buf = vec![0u8; bytes];
            if self.rank() == 0 && bytes > 0 {
                // SAFETY: `host` is a contiguous CPU tensor of `bytes` bytes from its data pointer.
                let src = unsafe { std::slice::from_raw_parts(host.data_ptr() as *const u8, bytes) };
                buf.copy_from_slice(src);
            }
            self.comm.broadcast(0, &mut buf)?;
            let got = Tensor::from_data_size(&buf, &host.size(), host.kind());
            tch::no_grad(|| {
                let mut v = v.shallow_clone();
                v.copy_(&got);
            });
        }
        Ok(())
    }

    /// Adds up every rank's rows, loss and metric sums; every rank gets the totals. The
    /// metrics' names are those of the lowest rank that has any (a rank whose shard was
    /// empty computed none).
    pub(crate) fn reduce_totals(&self, totals: &mut Totals) -> Result<()> {
        let (rank, size) = (self.rank(), self.size());
        // Who has metric names, and how long they are when joined.
        let names: String = totals.metrics.iter().map(|(n, _)| format!("{n}\n")).collect();
        let mut lens = vec![0.0f64; size];
        lens[rank] = names.len() as f64;
        self.comm.all_reduce_sum_f64(&mut lens)?;
        let mut metrics: Vec<&'static str> = totals.metrics.iter().map(|(n, _)| *n).collect();
        if let Some(root) = lens.iter().position(|&l| l > 0.0) {
            let mut buf = vec![0u8; lens[root] as usize];
            if rank == root {
                buf.copy_from_slice(names.as_bytes());
            }
            self.comm.broadcast(root, &mut buf)?;
            let theirs = String::from_utf8_lossy(&buf).into_owned();
            metrics = theirs.lines().map(|n| intern(n, &metrics)).collect();
        }
        let mut v = vec![totals.rows as f64, totals.loss_sum];
        v.extend(
            metrics.iter().map(|n| totals.metrics.iter().find(|(m, _)| m == n).map_or(0.0, |(_, s)| *s)),
        );
        self.comm.all_reduce_sum_f64(&mut v)?;
        totals.rows = v[0] as u64;
        totals.loss_sum = v[1];
        totals.metrics = metrics.into_iter().zip(v[2..].iter().copied()).collect();
        Ok(())
    }
}

/// A metric's name as a `&'static str`: this rank's own when it has it, else one leaked
/// once per process and name (a rank that computed no metric learns the names from
/// another; a task has a handful).
fn intern(name: &str, known: &[&'static str]) -> &'static str {
    static LEARNT: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    if let Some(k) = known.iter().find(|k| **k == name) {
        return k;
    }
    let mut learnt = LEARNT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(k) = learnt.iter().find(|k| **k == name) {
        return k;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    learnt.push(leaked);
    leaked
}

/// NCCL between the ranks' GPUs (cudarc, loaded at run time): the unique id made by rank
/// 0 and broadcast over the host transport, one communicator per process on its first
/// replica's device, all-reduces on the legacy default stream, which libtorch's kernels
/// (the backward pass before, the optimizer step after) run on.
#[cfg(feature = "cuda")]
mod nccl {
    use cudarc::nccl::{result, sys};
    use tch::{Kind, Tensor};

    use crate::dist::Collective;
    use crate::error::{Error, Result};

    pub(super) struct Nccl {
        comm: sys::ncclComm_t,
    }

    // SAFETY: a communicator is used by one thread at a time (the training loop's); NCCL
    // allows a communicator to move between threads.
    unsafe impl Send for Nccl {}

    impl Nccl {
        /// Every rank calls this together. `Err` (the same on every rank, since each
        /// rank's check comes first and all agree on it) says why NCCL cannot be used.
        pub(super) fn new(comm: &dyn Collective, ordinal: usize) -> std::result::Result<Nccl, String> {
            // SAFETY: only tries to dlopen the library.
            let present = unsafe { sys::is_culib_present() };
            let here = if !present {
                Err("NCCL (libnccl.so) was not found".to_string())
            } else {
                crate::cuda::device_count().and_then(|_| {
                    let ctx = cudarc::driver::CudaContext::new(ordinal)
                        .map_err(|e| format!("CUDA device {ordinal}: {e}"))?;
                    ctx.bind_to_thread().map_err(|e| format!("CUDA device {ordinal}: {e}"))
                })
            };
            // Every rank takes the same way: NCCL only if it can start everywhere.
            let mut ready = [f64::from(u8::from(here.is_ok()))];
            comm.all_reduce_sum_f64(&mut ready).map_err(|e| e.to_string())?;
            here?;
            if ready[0] as usize != comm.size() {
                return Err("NCCL or the CUDA driver is missing on another rank".into());
            }
            let mut id = [0u8; 128];
            let made = if comm.rank() == 0 { Some(result::get_uniqueid()) } else { None };
            let mut ok = [f64::from(u8::from(!matches!(made, Some(Err(_)))))];
            comm.all_reduce_sum_f64(&mut ok).map_err(|e| e.to_string())?;
            match made {
                Some(Err(e)) => return Err(format!("ncclGetUniqueId: {e:?}")),
                Some(Ok(made)) => {
                    for (b, c) in id.iter_mut().zip(made.internal) {
                        *b = c as u8;
                    }
                }
                None if ok[0] as usize != comm.size() => {
                    return Err("ncclGetUniqueId failed on rank 0".into());
                }
                None => {}
            }
            comm.broadcast(0, &mut id).map_err(|e| e.to_string())?;
            let id = sys::ncclUniqueId { internal: id.map(|b| b as std::ffi::c_char) };
            let mut raw = std::mem::MaybeUninit::uninit();
            // SAFETY: `raw` receives the communicator; every rank passes the same id,
            // world size and its own rank, with its device current on this thread.
            unsafe { result::comm_init_rank(raw.as_mut_ptr(), comm.size() as i32, id, comm.rank() as i32) }
                .map_err(|e| format!("ncclCommInitRank: {e:?}"))?;
            // SAFETY: initialised by the successful call above.
            Ok(Nccl { comm: unsafe { raw.assume_init() } })
        }

        /// Sums `flat` (contiguous, `f32` or `f64`, on this communicator's device) over
        /// the ranks, in place, on the legacy default stream.
        pub(super) fn all_reduce_sum(&self, flat: &Tensor) -> Result<()> {
            let dtype = match flat.kind() {
                Kind::Float => sys::ncclDataType_t::ncclFloat32,
                Kind::Double => sys::ncclDataType_t::ncclFloat64,
                other => return Err(Error::Invalid(format!("NCCL all-reduce of {other:?} gradients"))),
            };
            let ptr = flat.data_ptr();
            // SAFETY: `flat` is a contiguous device tensor of `numel` values of `dtype`;
            // stream 0 (legacy default) orders the reduction after the kernels that wrote
            // it and before those that read it.
            unsafe {
                result::all_reduce(
                    ptr,
                    ptr,
                    flat.numel(),
                    dtype,
                    sys::ncclRedOp_t::ncclSum,
                    self.comm,
                    std::ptr::null_mut(),
                )
            }
            .map_err(|e| Error::Invalid(format!("ncclAllReduce: {e:?}")))?;
            Ok(())
        }
    }

    impl Drop for Nccl {
        fn drop(&mut self) {
            // SAFETY: the communicator is not used after this.
            let _ = unsafe { result::comm_destroy(self.comm) };
        }
    }
}
