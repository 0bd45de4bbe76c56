//! Several processes training as one: the collective operations the data-parallel
//! trainer needs between processes ([`Collective`]), and (feature `mpi`) their MPI
//! implementation, [`Mpi`], over the MPI library the job was launched with (`mpirun`,
//! `srun`), as Horovod does.
//!
//! A process is a *rank* of a *world* of `size` ranks. Each rank reads its own shard of
//! the training data (`shard(workers, worker)` in the pipeline, set from [`Collective::rank`]
//! and [`Collective::size`]), computes the gradient of its part of every global batch, and
//! the ranks sum their gradients with [`Collective::all_reduce_sum_f32`] (or, between
//! GPUs, NCCL: `torch`'s trainer sets that up over this trait's
//! [`broadcast`](Collective::broadcast)). The trainer uses nothing else, so another
//! transport (Gloo, a test's threads) is one implementation of this trait.
//!
//! Every collective call must be made by every rank, in the same order: the trainer
//! keeps to that by agreeing, before each step, whether any rank still has a batch.

use crate::error::Result;

/// The collective operations of a world of processes, called by every rank in the same
/// order (MPI's rule: a rank that skips one stalls the others).
pub trait Collective {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of processes.
    fn size(&self) -> usize;
    /// This process's rank among the processes on its own machine (which GPU it takes).
    fn local_rank(&self) -> usize;
    /// The number of processes on this machine.
    fn local_size(&self) -> usize;
    /// Replaces `buf` on every rank by the element-wise sum of every rank's `buf`.
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<()>;
    /// Replaces `buf` on every rank by the element-wise sum of every rank's `buf`.
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<()>;
    /// Replaces `buf` on every rank by rank `root`'s `buf` (the same length everywhere).
    fn broadcast(&self, root: usize, buf: &mut [u8]) -> Result<()>;
    /// Waits until every rank has called it.
    fn barrier(&self) -> Result<()>;
    /// Ends every rank of the job at once with exit status `code`: what a rank that failed
    /// alone calls, so that the others do not wait for it forever in a collective.
    fn abort(&self, code: i32) -> !;
    /// The transport's name, for reports (`"mpi"`).
    fn backend(&self) -> &'static str;
}

/// A world of one process: every collective is the identity. A trainer joined to it
/// takes the cross-rank path (and NCCL on a GPU) and trains as it would alone; the tests
/// check that path with it where no MPI launcher is at hand.
#[derive(Debug, Clone, Copy, Default)]
pub struct Single;

impl Collective for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn local_rank(&self) -> usize {
        0
    }
    fn local_size(&self) -> usize {
        1
    }
    fn all_reduce_sum_f64(&self, _: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn all_reduce_sum_f32(&self, _: &mut [f32]) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, root: usize, _: &mut [u8]) -> Result<()> {
        match root {
            0 => Ok(()),
            _ => Err(crate::Error::Invalid(format!("broadcast from rank {root} of 1"))),
        }
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
    fn backend(&self) -> &'static str {
        "single"
    }
}

/// Every rank's `mine`, in rank order, on every rank: the lengths summed over the ranks
/// (each rank's in its own slot), then each rank's bytes broadcast from it. For small
/// things: a trainer gathers its ranks' pipeline states into one checkpoint with it.
pub fn all_gather_bytes(comm: &dyn Collective, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut lens = vec![0.0f64; comm.size()];
    // An f64 holds a length exactly up to 2^53 bytes.
    lens[comm.rank()] = mine.len() as f64;
    comm.all_reduce_sum_f64(&mut lens)?;
    let mut all = Vec::with_capacity(lens.len());
    for (r, len) in lens.into_iter().enumerate() {
        let mut buf = if r == comm.rank() { mine.to_vec() } else { vec![0; len as usize] };
        comm.broadcast(r, &mut buf)?;
        all.push(buf);
    }
    Ok(all)
}

/// Rank `root`'s `bytes` on every rank (the others' `bytes` are not read): their length,
/// then them.
pub fn broadcast_bytes(comm: &dyn Collective, root: usize, bytes: Vec<u8>) -> Result<Vec<u8>> {
    let mut len = (bytes.len() as u64).to_le_bytes();
    comm.broadcast(root, &mut len)?;
    let mut buf = if comm.rank() == root { bytes } else { vec![0; u64::from_le_bytes(len) as usize] };
    comm.broadcast(root, &mut buf)?;
    Ok(buf)
}

/// A program's exit status for `result`: `Ok` is success; an error is printed on stderr
/// (naming the rank in a job of several, in one write so that the ranks' lines do not
/// interleave) and is a failure, and in a multi-process job it ends every rank
/// ([`Collective::abort`]), since the others may be waiting for this one in a collective.
pub fn exit_status(result: Result<()>, world: Option<&dyn Collective>) -> std::process::ExitCode {
    use std::io::Write;
    match (result, world) {
        (Ok(()), _) => std::process::ExitCode::SUCCESS,
        (Err(e), None) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
        (Err(e), Some(w)) => {
            let line = format!("error: rank {} of {}: {e}\n", w.rank(), w.size());
            let _ = std::io::stderr().write_all(line.as_bytes());
            w.abort(1)
        }
    }
}

/// Environment variables that MPI launchers set in the processes they start: Open MPI's
/// `mpirun`, PMIx (Open MPI 5, Slurm's `srun --mpi=pmix`), PMI-1/2 (MPICH's Hydra, Intel
/// MPI, `srun --mpi=pmi2`), MVAPICH.
pub const LAUNCHER_VARS: &[&str] =
    &["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"];

/// Whether this process was started by an MPI launcher ([`LAUNCHER_VARS`]), or
/// `SLUICE_MPI=1` says to join MPI anyway (`SLUICE_MPI=0`: never).
pub fn launched_by_mpi() -> bool {
    match std::env::var("SLUICE_MPI").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some()),
    }
}

#[cfg(feature = "mpi")]
pub use self::mpi_world::Mpi;

#[cfg(feature = "mpi")]
mod mpi_world {
    use mpi::collective::SystemOperation;
    use mpi::environment::Universe;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::{Communicator, CommunicatorCollectives, Root};

    use super::Collective;
    use crate::error::{Error, Result};

    /// The MPI world this process was launched in (`MPI_COMM_WORLD`), initialised with
    /// `MPI_THREAD_FUNNELED`: the pipeline's threads never call MPI, only the thread that
    /// made this (the training loop). MPI is finalised when it is dropped.
    pub struct Mpi {
        // Field order: the communicators are freed before the universe finalises MPI.
        world: SimpleCommunicator,
        local: SimpleCommunicator,
        _universe: Universe,
    }

    impl std::fmt::Debug for Mpi {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Mpi").field("rank", &self.rank()).field("size", &self.size()).finish()
        }
    }

    impl Mpi {
        /// Initialises MPI (once per process) and joins the launch's world.
        pub fn init() -> Result<Mpi> {
            if mpi::environment::is_initialized() {
                return Err(Error::Invalid("MPI is already initialised in this process".into()));
            }
            let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Funneled)
                .ok_or_else(|| Error::Invalid("MPI could not be initialised".into()))?;
            if level < mpi::Threading::Funneled {
                return Err(Error::Invalid(format!(
                    "the MPI library offers threading level {level:?}; Sluice's pipeline threads need MPI_THREAD_FUNNELED"
                )));
            }
            let world = universe.world();
            // The ranks that share this machine's memory: which GPU each takes.
            let local = world.split_shared(world.rank());
            Ok(Mpi { world, local, _universe: universe })
        }

        /// [`Mpi::init`] when this process was started by an MPI launcher
        /// ([`launched_by_mpi`](super::launched_by_mpi)); `None` for a plain run.
        pub fn from_env() -> Result<Option<Mpi>> {
            if super::launched_by_mpi() { Mpi::init().map(Some) } else { Ok(None) }
        }
    }

    impl Collective for Mpi {
        fn rank(&self) -> usize {
            self.world.rank() as usize
        }

        fn size(&self) -> usize {
            self.world.size() as usize
        }

        fn local_rank(&self) -> usize {
            self.local.rank() as usize
        }

        fn local_size(&self) -> usize {
            self.local.size() as usize
        }

        fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<()> {
            let send = buf.to_vec();
            self.world.all_reduce_into(&send[..], buf, SystemOperation::sum());
            Ok(())
        }

        fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<()> {
            let send = buf.to_vec();
            self.world.all_reduce_into(&send[..], buf, SystemOperation::sum());
            Ok(())
        }

        fn broadcast(&self, root: usize, buf: &mut [u8]) -> Result<()> {
            let root = i32::try_from(root)
                .ok()
                .filter(|r| (*r as usize) < self.size())
                .ok_or_else(|| Error::Invalid(format!("broadcast from rank {root} of {}", self.size())))?;
            self.world.process_at_rank(root).broadcast_into(buf);
            Ok(())
        }

        fn barrier(&self) -> Result<()> {
            self.world.barrier();
            Ok(())
        }

        fn abort(&self, code: i32) -> ! {
            self.world.abort(code)
        }

        fn backend(&self) -> &'static str {
            "mpi"
        }
    }
}
