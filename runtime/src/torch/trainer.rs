//! The data-parallel trainer: one model replica per device, in the style of
//! `tf.distribute.MirroredStrategy`.
//!
//! Each global batch arrives already split by the pipeline
//! ([`device_batches`](super::device_batches)): part `i` on replica `i`'s device. Every
//! replica runs forward and backward on its part in its own thread; the gradients are
//! then all-reduced (a weighted sum on the first device, each part weighted by its
//! share of the batch's rows, copied back to every replica), and every replica takes
//! the same optimizer step. Replicas start from the first replica's parameters, so they
//! stay identical, and a step over `N` replicas computes what one replica computes on
//! the whole batch: the task's loss is a mean over its part's rows, and
//! `Σ (rows_i / rows) · ∇mean_i = ∇mean`.
//!
//! Buffers that are not trained (a batch norm's running statistics) are each replica's
//! own, as with MirroredStrategy's non-synchronised batch norm; checkpoints hold the
//! first replica's.
//!
//! Across processes ([`Trainer::join`], Horovod's way: `mpirun` starts one process per
//! GPU or CPU replica, each reading its own shard of the data), the first replica's
//! gradient of each step is then summed over the ranks ([`super::dist`]): every rank
//! weights its part by its share of the *global* batch's rows, so `W` ranks compute what
//! one process computes on the union of their batches.
//!
//! Epoch turns ([`Trainer::overlap_epochs`]): once a training pass's pipeline has sent its
//! last batch (only queued batches are left to train on), the next epoch's pass of the
//! same dataset starts, so that its readers and shuffle buffer fill while the last steps
//! of the epoch run, and the next epoch's first batch is ready when it begins. Each pass is
//! a pure function of (seed, epoch): the elements and their order are those of passes
//! started in turn. One pipeline computes at a time; the one started ahead waits on its
//! bounded queues.

use std::io::IsTerminal;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tch::nn::{self, OptimizerConfig};
use tch::{Device, Tensor};

use super::checkpoint::{read_states, states_path, write_states};
use super::dist::CrossRank;
use super::feed::{DeviceBatches, Feed};
use super::report::{EpochReport, PartResult, Totals};
use super::tensor::TensorBatch;
use crate::dist::Collective;
use crate::error::{Error, Result};
use crate::stage::Ctx;
use crate::stage::PipelineState;
use crate::tfrecord::ReaderStats;

/// What a task computes on one replica's part of a batch.
#[derive(Debug)]
pub struct StepOutput {
    /// The loss to minimise: a scalar, the **mean** over the part's rows.
    pub loss: Tensor,
    /// Metrics as **sums** over the part's rows (a count of correct predictions, say);
    /// they are reported divided by the number of rows.
    pub metrics: Vec<(&'static str, Tensor)>,
}

/// The devices to train on: every visible CUDA device, or `cpu_replicas` CPU replicas
/// when there is none.
pub fn devices(cpu_replicas: usize) -> Vec<Device> {
    let gpus = super::cuda_device_count();
    if gpus > 0 { (0..gpus).map(Device::Cuda).collect() } else { vec![Device::Cpu; cpu_replicas.max(1)] }
}

struct Replica<M> {
    device: Device,
    vs: nn::VarStore,
    model: M,
    opt: nn::Optimizer,
    /// The trainable variables, in the order of `Trainer::names`.
    vars: Vec<Tensor>,
}

/// A data-parallel trainer of a tch model `M` over one or more devices.
pub struct Trainer<M> {
    replicas: Vec<Replica<M>>,
    /// The trainable variables' names, sorted: the order gradients are reduced in.
    names: Vec<String>,
    progress: bool,
    /// The other ranks, once [`join`](Trainer::join)ed.
    cross: Option<CrossRank>,
    /// Training passes before this epoch start the next one ahead ([`overlap_epochs`](Trainer::overlap_epochs)).
    overlap_until: u64,
    /// The training pass started ahead of its turn.
    next: Option<PassAhead>,
}

/// A training pass started before its turn: of the dataset at `dataset` (its address:
/// the same object the previous pass ran), for `epoch`, from its first batch, on
/// `devices`, with what the readers had counted for `epoch` when it started.
///
/// [`PassAhead::start`] starts one before the trainer exists, so that the first epoch's
/// readers, shuffle buffer and first batches fill while the model is built
/// ([`Trainer::with_pass_ahead`]); the trainer starts the others itself
/// ([`Trainer::overlap_epochs`]).
#[derive(Debug)]
pub struct PassAhead {
    dataset: usize,
    epoch: u64,
    devices: Vec<Device>,
    batches: DeviceBatches,
    skipped_before: ReaderStats,
}

impl PassAhead {
    /// Starts the training pass of `dataset` for `epoch` in `ctx` (the one the epoch will
    /// train in) on `devices` (those of the trainer that will run it), from its first
    /// batch. A `train_epoch` of the same dataset object, epoch and devices on a trainer
    /// given it ([`Trainer::with_pass_ahead`]) continues it; any other training pass drops
    /// it. The elements and their order are those of a pass started at its turn.
    pub fn start<D: Feed>(dataset: &D, ctx: &Ctx, devices: &[Device], epoch: u64) -> Result<PassAhead> {
        let skipped_before = ctx.reader_stats_of(epoch);
        let batches = dataset.feed(&ctx.with_epoch(epoch), devices, 0)?;
        Ok(PassAhead { dataset: address(dataset), epoch, devices: devices.to_vec(), batches, skipped_before })
    }
}

/// The address that identifies the dataset object a pass started ahead belongs to.
fn address<D>(dataset: &D) -> usize {
    dataset as *const D as *const () as usize
}

impl<M> std::fmt::Debug for Trainer<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let devices: Vec<_> = self.replicas.iter().map(|r| r.device).collect();
        f.debug_struct("Trainer")
            .field("devices", &devices)
            .field("variables", &self.names.len())
            .field("cross", &self.cross)
            .finish()
    }
}

fn torch_err(what: &str) -> impl Fn(tch::TchError) -> Error + '_ {
    move |e| Error::Invalid(format!("{what}: {e}"))
}

impl<M: Send> Trainer<M> {
    /// One replica per device, each built by `build` in its own variable store and set
    /// to the first replica's parameters, each with an optimizer from `opt` at learning
    /// rate `lr`.
    pub fn new<O>(devices: &[Device], build: impl Fn(&nn::Path<'_>) -> M, opt: O, lr: f64) -> Result<Self>
    where
        O: OptimizerConfig + Clone,
    {
        if devices.is_empty() {
            return Err(Error::Invalid("a trainer needs at least one device".into()));
        }
        // CPU replicas run side by side: share the cores between them rather than have
        // each replica's operators ask libtorch's pool for every core (oversubscription).
        let cpu_replicas = devices.iter().filter(|d| **d == Device::Cpu).count();
        if cpu_replicas > 1 {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            tch::set_num_threads(i32::try_from((cores / cpu_replicas).max(1)).unwrap_or(1));
        }
        // The initial values come from the CPU's generator whatever the devices: a CUDA
        // device's generator draws other numbers from the same seed, so without this a
        // model on GPUs would not start where the same seed starts it on the CPU (found by
        // `cuda_replicas_train_like_one_cpu_replica` on the first GPU run). A trainer whose
        // first device is the CPU builds there directly, as before.
        let reference = (devices[0] != Device::Cpu).then(|| {
            let vs = nn::VarStore::new(Device::Cpu);
            let _ = build(&vs.root());
            vs
        });
        let mut replicas: Vec<Replica<M>> = Vec::with_capacity(devices.len());
        let mut names: Vec<String> = Vec::new();
        for &device in devices {
            let mut vs = nn::VarStore::new(device);
            let model = build(&vs.root());
            if let Some(from) = replicas.first().map(|r| &r.vs).or(reference.as_ref()) {
                vs.copy(from).map_err(torch_err("replicas of different models"))?;
            }
            let variables = vs.variables();
            let mut trainable: Vec<(String, Tensor)> =
                variables.into_iter().filter(|(_, t)| t.requires_grad()).collect();
            trainable.sort_by(|a, b| a.0.cmp(&b.0));
            let these: Vec<String> = trainable.iter().map(|(n, _)| n.clone()).collect();
            if replicas.is_empty() {
                names = these;
            } else if these != names {
                return Err(Error::Invalid("`build` made replicas with different variables".into()));
            }
            let vars: Vec<Tensor> = trainable.into_iter().map(|(_, t)| t).collect();
            // Give every variable a (zero) gradient now, so that the all-reduce can write
            // into each replica's gradients even before a replica has run a step.
            if !vars.is_empty() {
                let zero = vars
                    .iter()
                    .map(|v| v.sum(v.kind()) * 0.0)
                    .fold(Tensor::from(0.0f32).to_device(device), |a, b| a + b);
                zero.backward();
            }
            let opt = opt.clone().build(&vs, lr).map_err(torch_err("building the optimizer"))?;
            replicas.push(Replica { device, vs, model, opt, vars });
        }
        Ok(Trainer {
            replicas,
            names,
            progress: std::io::stderr().is_terminal(),
            cross: None,
            overlap_until: 0,
            next: None,
        })
    }

    /// Gives the trainer a pass started before it was built ([`PassAhead::start`]): the
    /// `train_epoch` of that dataset and epoch continues it, with the batches it has
    /// prepared meanwhile.
    pub fn with_pass_ahead(mut self, pass: PassAhead) -> Self {
        self.next = Some(pass);
        self
    }

    /// Overlaps the turns of the training epochs before `end`: the pass of epoch `e + 1`
    /// (when `e + 1 < end`) starts as soon as the pipeline of epoch `e` has sent its last
    /// batch, and [`train_epoch_from`](Self::train_epoch_from) of epoch `e + 1` (from its
    /// first batch, same dataset) takes it. The batches are the same as without; the
    /// epoch's first batch does not wait for the readers and the shuffle buffer. `0` (the
    /// default) turns it off.
    pub fn overlap_epochs(&mut self, end: u64) {
        self.overlap_until = end;
        if end == 0 {
            self.next = None;
        }
    }

    /// Makes this trainer one rank of a multi-process job over `comm` (every rank calls it,
    /// with the same model): every rank's parameters (buffers included) are set to rank
    /// 0's, and from now on each step's gradient is summed over the ranks (NCCL between
    /// CUDA devices when it loads, else `comm`), each rank's pass ends when every rank's
    /// does, and reports, checkpoints and evaluations are the whole job's. CPU ranks
    /// sharing a machine share its cores. The caller may keep its own handle on `comm`
    /// (to [`abort`](Collective::abort) the job on an error of its own, say).
    pub fn join(mut self, comm: Rc<dyn Collective>) -> Result<Self> {
        if self.cross.is_some() {
            return Err(Error::Invalid("this trainer has already joined a multi-process job".into()));
        }
        if self.replicas.iter().all(|r| r.device == Device::Cpu) && comm.local_size() > 1 {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let per_rank = (cores / (comm.local_size() * self.replicas.len())).max(1);
            tch::set_num_threads(i32::try_from(per_rank).unwrap_or(1));
        }
        let cross = CrossRank::new(comm, self.replicas[0].device)?;
        let mut all: Vec<(String, Tensor)> = self.replicas[0].vs.variables().into_iter().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let tensors: Vec<Tensor> = all.into_iter().map(|(_, t)| t).collect();
        cross.broadcast_vars(&tensors)?;
        let (first, rest) = self.replicas.split_at_mut(1);
        for r in rest {
            r.vs.copy(&first[0].vs).map_err(torch_err("replicas of different models"))?;
        }
        self.cross = Some(cross);
        Ok(self)
    }

    /// This process's rank in the job (0 without [`join`](Self::join)).
    pub fn rank(&self) -> usize {
        self.cross.as_ref().map_or(0, CrossRank::rank)
    }

    /// The number of ranks in the job (1 without [`join`](Self::join)).
    pub fn world_size(&self) -> usize {
        self.cross.as_ref().map_or(1, CrossRank::size)
    }

    /// How gradients travel between ranks: `"nccl"`, `"mpi"`, or `None` for one process.
    pub fn gradient_backend(&self) -> Option<&'static str> {
        self.cross.as_ref().map(CrossRank::gradient_backend)
    }

    /// Shows (or hides) a progress bar on stderr during [`train_epoch`](Self::train_epoch)
    /// (default: when stderr is a terminal).
    pub fn with_progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// The replicas' devices.
    pub fn devices(&self) -> Vec<Device> {
        self.replicas.iter().map(|r| r.device).collect()
    }

    /// The first replica's model and variables (all replicas hold the same parameters).
    pub fn model(&self) -> (&M, &nn::VarStore) {
        (&self.replicas[0].model, &self.replicas[0].vs)
    }

    /// Replica `i`'s variables.
    pub fn replica_vars(&self, i: usize) -> &nn::VarStore {
        &self.replicas[i].vs
    }

    /// Sets every replica's learning rate.
    pub fn set_lr(&mut self, lr: f64) {
        for r in &mut self.replicas {
            r.opt.set_lr(lr);
        }
    }

    /// Saves the model's parameters (the first replica's; `.safetensors` by extension,
    /// else tch's format). In a multi-process job, rank 0 writes (every rank holds the
    /// same parameters) and every rank returns once the file is whole.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let saved = if self.rank() == 0 {
            self.replicas[0]
                .vs
                .save(path)
                .map_err(|e| Error::Invalid(format!("{}: saving the model: {e}", path.display())))
        } else {
            Ok(())
        };
        if let Some(cross) = &self.cross {
            cross.comm().barrier()?;
        }
        saved
    }

    /// Saves the model as [`save`](Self::save) does, and beside it the training
    /// pipeline's position, `PATH.state`: in a multi-process job every rank's (each reads
    /// its own shard), gathered to rank 0, which writes them in rank order (no shared file
    /// system needed). [`load_checkpoint`](Self::load_checkpoint) resumes both together.
    /// The states are written last: a checkpoint with its states is whole.
    pub fn save_checkpoint(&self, path: impl AsRef<Path>, state: &PipelineState) -> Result<()> {
        let path = path.as_ref();
        self.save(path)?;
        let Some(cross) = &self.cross else { return write_states(path, std::slice::from_ref(state)) };
        let states = crate::dist::all_gather_bytes(cross.comm(), &state.to_bytes())?
            .iter()
            .enumerate()
            .map(|(r, b)| PipelineState::from_bytes(b, &format!("rank {r}'s pipeline state")))
            .collect::<Result<Vec<_>>>()?;
        let saved = if self.rank() == 0 { write_states(path, &states) } else { Ok(()) };
        cross.comm().barrier()?;
        saved
    }

    /// Loads a checkpoint of [`save_checkpoint`](Self::save_checkpoint): the model into
    /// every replica, and this rank's pipeline position (`None` for a model saved alone).
    /// A checkpoint of a job with another number of ranks is an error that says so: its
    /// shards are not this job's.
    pub fn load_checkpoint(&mut self, path: impl AsRef<Path>) -> Result<Option<PipelineState>> {
        let world = self.world_size();
        self.load_checkpoint_resharded(path, |states| {
            let ranks = states.len();
            Err(Error::Invalid(format!(
                "a checkpoint of a job of {ranks} rank(s); this job has {world}: each rank's pipeline position is \
                 for its own shard, so resume it with {ranks}, or redeal the positions to this job's ranks \
                 (`load_checkpoint_resharded`, for an elastic pipeline)"
            )))
        })
    }

    /// Loads a checkpoint of [`save_checkpoint`](Self::save_checkpoint) saved by a job of
    /// any number of ranks: the model into every replica, and this rank's pipeline
    /// position. Rank 0 reads the states and sends them to every rank. When the
    /// checkpoint's job had another number of ranks, `reshard` (the generated `reshard` or
    /// `reshard_with`, with this job's parameters) redeals them to this job's ranks: the
    /// position returned is this rank's of those, from which the ranks together deliver
    /// the rest of the interrupted epoch, each element once. `None` for a model saved
    /// alone.
    pub fn load_checkpoint_resharded(
        &mut self,
        path: impl AsRef<Path>,
        reshard: impl FnOnce(&[PipelineState]) -> Result<Vec<PipelineState>>,
    ) -> Result<Option<PipelineState>> {
        let path = path.as_ref();
        self.load(path)?;
        let Some(mut states) = self.saved_states(path)? else { return Ok(None) };
        let world = self.world_size();
        if states.len() != world {
            let ranks = states.len();
            states = reshard(&states)
                .map_err(|e| Error::Invalid(format!("{}: {e}", states_path(path).display())))?;
            if states.len() != world {
                return Err(Error::Invalid(format!(
                    "{}: the states of {ranks} rank(s) were redealt to {} rank(s), but this job has {world}: set \
                     the pipeline's count of shards to the job's size",
                    path.display(),
                    states.len()
                )));
            }
        }
        Ok(Some(states.swap_remove(self.rank())))
    }

    /// The pipeline states of every rank of the job that saved the checkpoint `path`, as
    /// rank 0 reads them, on every rank (a failure to read them is every rank's error).
    fn saved_states(&self, path: &Path) -> Result<Option<Vec<PipelineState>>> {
        let read = if self.rank() == 0 { read_states(path) } else { Ok(None) };
        let read = match &self.cross {
            None => read,
            Some(cross) => {
                // One byte says what follows: 0 none, 1 the states' bytes, 2 an error.
                let framed = match read {
                    Ok(None) => vec![0],
                    Ok(Some(b)) => [&[1][..], &b].concat(),
                    Err(e) => [&[2][..], e.to_string().as_bytes()].concat(),
                };
                let got = crate::dist::broadcast_bytes(cross.comm(), 0, framed)?;
                match got.split_first() {
                    Some((1, b)) => Ok(Some(b.to_vec())),
                    Some((2, e)) => Err(Error::Invalid(format!("rank 0: {}", String::from_utf8_lossy(e)))),
                    _ => Ok(None),
                }
            }
        };
        let what = states_path(path).display().to_string();
        read?.map(|b| PipelineState::set_from_bytes(&b, &what)).transpose()
    }

    /// Loads parameters saved by [`save`](Self::save) into every replica.
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        for r in &mut self.replicas {
            r.vs.load(path)
                .map_err(|e| Error::Invalid(format!("{}: loading the model: {e}", path.display())))?;
        }
        Ok(())
    }

    /// One training step on a global batch split by the pipeline: `parts[i]` on replica
    /// `i`'s device. Returns the batch's loss and metric sums. In a multi-process job
    /// ([`join`](Self::join)) every rank calls it together, each with its own part of the
    /// global batch (its shard's batch), and gets its own part's sums.
    pub fn step<F>(&mut self, parts: Vec<TensorBatch>, task: &F) -> Result<Totals>
    where
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        self.check_parts(&parts)?;
        let rows: usize = parts.iter().map(TensorBatch::rows).sum();
        let global = match &self.cross {
            None => rows as u64,
            Some(cross) => cross.agree(true, rows, false, false)?.rows,
        };
        self.step_of(Some(parts), global, task)
    }

    /// A step on this rank's `parts` (`None`: this rank has no batch for this step) of a
    /// global batch of `global_rows` rows.
    fn step_of<F>(&mut self, parts: Option<Vec<TensorBatch>>, global_rows: u64, task: &F) -> Result<Totals>
    where
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        if global_rows == 0 {
            return Ok(Totals::default());
        }
        for r in &mut self.replicas {
            for v in &mut r.vars {
                v.zero_grad();
            }
        }
        let results = match parts {
            Some(parts) if parts.iter().any(|p| p.rows() > 0) => self.run_parts(parts, task, true)?,
            _ => Vec::new(),
        };
        let totals = Totals::of_parts(&results);
        let weights: Vec<f64> = results.iter().map(|(r, _, _)| *r as f64 / global_rows as f64).collect();
        self.all_reduce_grads(&weights)?;
        for r in &mut self.replicas {
            r.opt.step();
        }
        Ok(totals)
    }

    fn check_parts(&self, parts: &[TensorBatch]) -> Result<()> {
        if parts.len() != self.replicas.len() {
            return Err(Error::Invalid(format!(
                "a batch split in {} parts for {} replicas (split it with `device_batches` on the trainer's devices)",
                parts.len(),
                self.replicas.len()
            )));
        }
        Ok(())
    }

    /// Runs `task` on each replica's part, in parallel, with backward when training.
    /// Returns each part's (rows, mean loss, metric sums); an empty part gives (0, 0, []).
    fn run_parts<F>(&mut self, parts: Vec<TensorBatch>, task: &F, train: bool) -> Result<Vec<PartResult>>
    where
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        let one = |replica: &Replica<M>, part: TensorBatch| -> Result<PartResult> {
            let rows = part.rows();
            if rows == 0 {
                return Ok((0, 0.0, Vec::new()));
            }
            let out = if train {
                task(&replica.model, &part, true)?
            } else {
                tch::no_grad(|| task(&replica.model, &part, false))?
            };
            if out.loss.numel() != 1 {
                return Err(Error::Invalid(format!(
                    "the task's loss has shape {:?}; it must be a scalar mean",
                    out.loss.size()
                )));
            }
            if train {
                out.loss.f_backward().map_err(torch_err("backward"))?;
            }
            let metrics = out.metrics.iter().map(|(n, t)| (*n, t.double_value(&[]))).collect();
            Ok((rows, out.loss.double_value(&[]), metrics))
        };
        if self.replicas.len() == 1 {
            let part = parts.into_iter().next().expect("one part");
            return Ok(vec![one(&self.replicas[0], part)?]);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = self
                .replicas
                .iter_mut()
                .zip(parts)
                .map(|(replica, part)| s.spawn(move || one(replica, part)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        })
    }

    /// Replaces every replica's gradients by `Σ weights[i] · grad_i` (no term for a
    /// replica without a weight), computed on the first replica's device, then, in a
    /// multi-process job, by its sum over the ranks.
    fn all_reduce_grads(&mut self, weights: &[f64]) -> Result<()> {
        let device = self.replicas[0].device;
        // One replica weighted 1 (a whole batch in one process) already holds it.
        if !(self.replicas.len() == 1 && weights == [1.0]) {
            tch::no_grad(|| {
                for j in 0..self.names.len() {
                    let mut sum: Option<Tensor> = None;
                    for (r, &w) in self.replicas.iter().zip(weights) {
                        if w == 0.0 {
                            continue;
                        }
                        let g = r.vars[j].grad().to_device(device) * w;
                        sum = Some(match sum {
                            Some(s) => s + g,
                            None => g,
                        });
                    }
                    let mut g0 = self.replicas[0].vars[j].grad();
                    match sum {
                        Some(sum) => g0.copy_(&sum),
                        None => _ = g0.zero_(),
                    }
                }
            });
        }
        if let Some(cross) = &self.cross {
            let grads: Vec<Tensor> = self.replicas[0].vars.iter().map(Tensor::grad).collect();
            tch::no_grad(|| cross.all_reduce_grads(&grads))?;
        }
        let (first, rest) = self.replicas.split_at_mut(1);
        tch::no_grad(|| {
            for r in rest {
                for (v, v0) in r.vars.iter().zip(&first[0].vars) {
                    v.grad().copy_(&v0.grad());
                }
            }
        });
        Ok(())
    }

    /// Loss and metrics of the model on `parts` (no gradients, `train` false).
    pub fn eval_step<F>(&mut self, parts: Vec<TensorBatch>, task: &F) -> Result<Totals>
    where
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        self.check_parts(&parts)?;
        Ok(Totals::of_parts(&self.run_parts(parts, task, false)?))
    }

    /// Trains one pass of `dataset` (pass `epoch` of `ctx`), reporting each step on the
    /// progress bar and returning the epoch's figures. In a multi-process job each rank
    /// passes its own shard's pipeline; the pass goes on while any rank has a batch, and
    /// the figures (rows, loss, metrics) are the whole job's.
    pub fn train_epoch<D, F>(&mut self, dataset: &D, ctx: &Ctx, epoch: u64, task: &F) -> Result<EpochReport>
    where
        D: Feed,
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        self.train_epoch_from(dataset, ctx, epoch, 0, task, &mut |_, _| Ok(true))
    }

    /// Trains pass `epoch` from its batch `skip` on (a resumed epoch: the batches before
    /// it are skipped without being computed), calling `after(step, parts)` after each step
    /// (`step` counted from the start of the epoch, `parts` the batch's parts, already
    /// trained on): it returns `false` to stop the epoch there (an interruption: the
    /// report says how many steps ran).
    pub fn train_epoch_from<D, F>(
        &mut self,
        dataset: &D,
        ctx: &Ctx,
        epoch: u64,
        skip: u64,
        task: &F,
        after: &mut AfterStep<'_>,
    ) -> Result<EpochReport>
    where
        D: Feed,
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        self.pass(dataset, ctx, epoch, skip, task, Some(after))
    }

    /// Evaluates the model on one pass of `dataset`.
    pub fn evaluate<D, F>(&mut self, dataset: &D, ctx: &Ctx, task: &F) -> Result<EpochReport>
    where
        D: Feed,
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        self.pass(dataset, ctx, 0, 0, task, None)
    }

    fn pass<D, F>(
        &mut self,
        dataset: &D,
        ctx: &Ctx,
        epoch: u64,
        skip: u64,
        task: &F,
        mut after: Option<&mut AfterStep<'_>>,
    ) -> Result<EpochReport>
    where
        D: Feed,
        F: Fn(&M, &TensorBatch, bool) -> Result<StepOutput> + Sync,
    {
        let start = Instant::now();
        let train = after.is_some();
        let mut skipped_before = ctx.reader_stats_of(epoch);
        let dropped_before = ctx.report().skipped_errors();
        let address = address(dataset);
        let devices = self.devices();
        let ahead = match self.next.take() {
            Some(n)
                if train && skip == 0 && n.dataset == address && n.epoch == epoch && n.devices == devices =>
            {
                skipped_before = n.skipped_before;
                Some(n.batches)
            }
            // An evaluation between two training epochs leaves the next one running.
            other => {
                if !train {
                    self.next = other;
                }
                None
            }
        };
        let started_ahead = ahead.is_some();
        let batches = match ahead {
            Some(b) => b,
            None => dataset.feed(&ctx.with_epoch(epoch), &devices, skip)?,
        };
        let bar = self.bar(train, epoch);
        let mut report = EpochReport { epoch, started_ahead, ..EpochReport::default() };
        // In a multi-process job: this rank's step hook said to stop; it tells the others
        // at the next agreement instead of leaving them waiting in a collective.
        let mut stopping = false;
        loop {
            let t = Instant::now();
            let next = if stopping { None } else { batches.next() };
            if train && self.next.is_none() && epoch + 1 < self.overlap_until && batches.producer_done() {
                let skipped_before = ctx.reader_stats_of(epoch + 1);
                let b = dataset.feed(&ctx.with_epoch(epoch + 1), &devices, 0)?;
                self.next = Some(PassAhead {
                    dataset: address,
                    epoch: epoch + 1,
                    devices: devices.clone(),
                    batches: b,
                    skipped_before,
                });
            }
            let (parts, global_rows) = match &self.cross {
                None => match next {
                    None => break,
                    Some(parts) => {
                        let parts = parts?;
                        let rows = parts.iter().map(TensorBatch::rows).sum::<usize>() as u64;
                        (Some(parts), rows)
                    }
                },
                Some(cross) => match cross.next_step(next, stopping, skip + report.steps, epoch)? {
                    Some(step) => step,
                    None => break,
                },
            };
            if let Some(parts) = &parts {
                self.check_parts(parts)?;
            }
            let t1 = Instant::now();
            report.data_wait += t1 - t;
            let step = skip + report.steps;
            let (totals, go_on) = match after.as_mut() {
                Some(after) => {
                    let kept: Vec<TensorBatch> =
                        parts.iter().flatten().map(TensorBatch::shallow_clone).collect();
                    let totals = self.step_of(parts, global_rows, task)?;
                    (totals, after(step, &kept)?)
                }
                None => match parts {
                    Some(parts) => (self.eval_step(parts, task)?, true),
                    None => (Totals::default(), true),
                },
            };
            report.compute += t1.elapsed();
            report.steps += 1;
            report.totals.merge(&totals);
            report.wall = start.elapsed();
            if let Some(bar) = &bar {
                bar.inc(totals.rows);
                bar.set_message(format!(
                    "{:.0} ex/s, stall {:.0}%, {} (step: {})",
                    report.examples_per_sec(),
                    report.data_stall_pct(),
                    report.totals.summary(),
                    totals.summary()
                ));
            }
            if !go_on {
                if self.cross.is_none() {
                    break;
                }
                stopping = true;
            }
        }
        batches.finish()?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if let Some(cross) = &self.cross {
            cross.reduce_totals(&mut report.totals)?;
        }
        // What this pass's readers skipped: the context counts by epoch, so a pass started
        // ahead for the next epoch never counts here.
        let io = ctx.reader_stats_of(epoch);
        report.skipped_records = io.skipped_records - skipped_before.skipped_records;
        report.skipped_files = io.skipped_files - skipped_before.skipped_files;
        report.skipped_elements = ctx.report().skipped_errors().saturating_sub(dropped_before);
        report.wall = start.elapsed();
        Ok(report)
    }

    fn bar(&self, train: bool, epoch: u64) -> Option<ProgressBar> {
        if !self.progress {
            return None;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let what = if train { format!("epoch {}", epoch + 1) } else { "eval".into() };
        bar.set_style(
            ProgressStyle::with_template(&format!("{what} {{spinner}} {{pos}} examples {{msg}}"))
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Some(bar)
    }
}

/// What [`Trainer::train_epoch_from`] calls after each step: `(step, parts) -> go on?`.
pub type AfterStep<'a> = dyn FnMut(u64, &[TensorBatch]) -> Result<bool> + 'a;
