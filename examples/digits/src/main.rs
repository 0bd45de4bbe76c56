//! The main job: a `.pipe` pipeline feeding a training run.
//!
//! `digits.pipe` (compiled by `build.rs`) reads the TFRecord shards of scikit-learn's
//! 8×8 handwritten digits committed under `data/` (written by TensorFlow:
//! `make_data.py`), parses, decodes the PNGs, shifts each training image at random,
//! shuffles and batches. [`sluice::torch::Trainer`] trains a small convolutional network
//! on every visible GPU, or on `--cpu-replicas` CPU replicas, splitting each batch across
//! them. Each epoch prints its throughput, data-stall share, loss and accuracy; the end
//! prints the training pipeline's statistics and, last, `test accuracy: 0.NNNN` on the
//! 360 held-out images.
//!
//! Built with the `mpi` feature and started by `mpirun` (or `srun`), it is one rank of
//! a multi-process job: each rank trains on its shard of the data (the pipelines'
//! `workers`/`worker` parameters), on its own GPU (`local_rank % GPUs`) or CPU, with the
//! gradients summed over the ranks ([`Trainer::join`]); rank 0 prints.
//!
//! ```sh
//! ./scripts/main-job                       # sets up libtorch, builds, runs
//! cargo run --release -p sluice-digits --features torch -- --epochs 20 --cpu-replicas 2
//! cargo build --release -p sluice-digits --features mpi && mpirun -np 2 target/release/digits
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use clap::Parser;
use sluice::dist::Collective;
use sluice::runtime::stage::Ctx;
use sluice::runtime::stage::PipelineState;
use sluice::torch::tch::nn::{self, ModuleT};
use sluice::torch::tch::{self, Device, Kind, Tensor};
use sluice::torch::{
    EpochReport, Feed, PassAhead, StepOutput, TailFeed, TensorBatch, Trainer, devices, rank_devices,
};

sluice::include_pipelines!("digits");

#[derive(Debug, Parser)]
#[command(about = "Trains a small CNN on scikit-learn's digits, fed by a Sluice pipeline")]
struct Args {
    /// Passes over the 1437 training images.
    #[arg(long, default_value_t = 15)]
    epochs: u64,
    /// Global batch size (split across the replicas, and across the ranks of an MPI job).
    #[arg(long, default_value_t = 64)]
    batch_size: u32,
    /// CPU replicas when no GPU is visible (every visible GPU is used otherwise).
    #[arg(long, default_value_t = 1)]
    cpu_replicas: usize,
    /// Peak learning rate (Adam, cosine decay over the epochs).
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Seed of the model's initialisation, the shuffle and the augmentation.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Directory with `train-*.tfrecord` and `test-*.tfrecord` (default: the committed
    /// data).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Saves the trained model here (`.safetensors`, or tch's format), with the training
    /// pipeline's position beside it (`FILE.state`) for `--resume`.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Starts from a model saved with `--save` (its weights only; the run starts at epoch 1).
    #[arg(long)]
    load: Option<PathBuf>,
    /// Stops after this many training steps of this run (an interruption), saving the
    /// model and the pipeline's position to `--save`.
    #[arg(long, requires = "save")]
    stop_after_steps: Option<u64>,
    /// Resumes a run saved with `--save`: the model, and the training pipeline exactly where
    /// it was (the same epoch, the next batch, the same order and augmentation).
    #[arg(long, conflicts_with = "load")]
    resume: Option<PathBuf>,
    /// Prints a digest of each training batch's data (`data EPOCH.STEP HEX`).
    #[arg(long)]
    trace_data: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Starts each epoch's pipeline in its turn, not while the previous epoch's last
    /// batches train (the default overlaps the turns: `Trainer::overlap_epochs`).
    #[arg(long)]
    no_overlap: bool,
    /// Where the training images' tail after `batch` (random crop, scale, transpose)
    /// runs: `cpu` (`digits_train`, in the pipeline's map) or `gpu` (`digits_train_gpu`:
    /// one generated CUDA kernel on each device, fed by the device feed; its CPU twin,
    /// with a note, where there is no GPU or sluice was built without `cuda`).
    #[arg(long, value_enum, default_value_t = Tail::Cpu)]
    tail: Tail,
}

/// Where the training pipeline's tail runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Tail {
    Cpu,
    Gpu,
}

/// Two 3×3 convolutions, a 2×2 max-pool and two fully connected layers: 10 logits.
#[derive(Debug)]
struct Net {
    conv1: nn::Conv2D,
    conv2: nn::Conv2D,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Net {
    fn new(p: &nn::Path<'_>) -> Net {
        let conv = nn::ConvConfig { padding: 1, ..Default::default() };
        Net {
            conv1: nn::conv2d(p / "conv1", 1, 32, 3, conv),
            conv2: nn::conv2d(p / "conv2", 32, 64, 3, conv),
            fc1: nn::linear(p / "fc1", 64 * 4 * 4, 128, Default::default()),
            fc2: nn::linear(p / "fc2", 128, 10, Default::default()),
        }
    }
}

impl ModuleT for Net {
    fn forward_t(&self, x: &Tensor, train: bool) -> Tensor {
        x.apply(&self.conv1)
            .relu()
            .apply(&self.conv2)
            .relu()
            .max_pool2d_default(2)
            .flatten(1, -1)
            .apply(&self.fc1)
            .relu()
            .dropout(0.25, train)
            .apply(&self.fc2)
    }
}

/// Cross-entropy on the `image` column's logits against `label`, and the number of
/// correct predictions.
fn task(net: &Net, batch: &TensorBatch, train: bool) -> sluice::Result<StepOutput> {
    let labels = batch.tensor("label")?;
    // A label outside the classes would abort inside libtorch's loss: say which instead.
    let (lo, hi) = (labels.min().int64_value(&[]), labels.max().int64_value(&[]));
    if lo < 0 || hi > 9 {
        return Err(sluice::Error::Invalid(format!("a batch has labels {lo}..={hi}: the digits are 0..=9")));
    }
    let logits = net.forward_t(batch.tensor("image")?, train);
    let correct = logits.argmax(-1, false).eq_tensor(labels).sum(Kind::Float);
    Ok(StepOutput { loss: logits.cross_entropy_for_logits(labels), metrics: vec![("accuracy", correct)] })
}

fn main() -> ExitCode {
    let args = Args::parse();
    let world = match world() {
        Ok(world) => world,
        Err(e) => return sluice::dist::exit_status(Err(e), None),
    };
    sluice::dist::exit_status(run(&args, world.clone()), world.as_deref())
}

/// The MPI job this process is a rank of, when `mpirun`/`srun` started it (feature `mpi`).
fn world() -> sluice::Result<Option<Rc<dyn Collective>>> {
    #[cfg(feature = "mpi")]
    return Ok(sluice::dist::Mpi::from_env()?.map(|w| Rc::new(w) as Rc<dyn Collective>));
    #[cfg(not(feature = "mpi"))]
    {
        if sluice::dist::launched_by_mpi() {
            eprintln!(
                "digits: started by an MPI launcher, but built without the `mpi` feature: every process trains alone"
            );
        }
        Ok(None)
    }
}

/// Rank `rank` of `ranks`' share of a global batch of `global` rows (the first
/// `global % ranks` ranks take one row more).
fn rank_batch(global: u32, ranks: u32, rank: u32) -> u32 {
    global / ranks + u32::from(rank < global % ranks)
}

fn run(args: &Args, world: Option<Rc<dyn Collective>>) -> sluice::Result<()> {
    let started = Instant::now();
    let data =
        args.data.clone().unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data")));
    let files = format!("{}/train-*.tfrecord", data.display());
    let (workers, worker) = world.as_ref().map_or((1, 0), |w| (w.size() as u32, w.rank() as u32));
    let batch_size = rank_batch(args.batch_size, workers, worker);
    if batch_size == 0 {
        return Err(sluice::Error::Invalid(format!(
            "a global batch of {} rows for {workers} ranks: each rank needs at least one",
            args.batch_size
        )));
    }
    match args.tail {
        Tail::Cpu => {
            let p = digits_train::Params { files, batch_size, seed: args.seed, workers, worker };
            let position = Position {
                state: &|epoch, step| digits_train::state(&p, epoch, step),
                check: &|s| digits_train::check_state(&p, s),
            };
            train(args, world, &data, started, &digits_train::dataset(&p)?, &position)
        }
        Tail::Gpu => {
            let p = digits_train_gpu::Params { files, batch_size, seed: args.seed, workers, worker };
            let feed = TailFeed::new(
                digits_train_gpu::host_dataset(&p)?,
                digits_train_gpu::dataset(&p)?,
                digits_train_gpu::device_tail(&p),
            );
            let position = Position {
                state: &|epoch, step| digits_train_gpu::state(&p, epoch, step),
                check: &|s| digits_train_gpu::check_state(&p, s),
            };
            train(args, world, &data, started, &feed, &position)
        }
    }
}

/// The training pipeline's position: its state after `step` batches of `epoch`, and the
/// check of a saved one.
struct Position<'a> {
    state: &'a dyn Fn(u64, u64) -> sluice::Result<PipelineState>,
    check: &'a dyn Fn(&PipelineState) -> sluice::Result<()>,
}

/// A digest of a batch's data, its parts in order (`--trace-data`).
fn digest(parts: &[TensorBatch]) -> sluice::Result<u64> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        let labels = Vec::<i64>::try_from(part.tensor("label")?.to_device(Device::Cpu))
            .map_err(|e| sluice::Error::Invalid(e.to_string()))?;
        let images = Vec::<f32>::try_from(part.tensor("image")?.to_device(Device::Cpu).flatten(0, -1))
            .map_err(|e| sluice::Error::Invalid(e.to_string()))?;
        let bytes = labels.iter().map(|v| *v as u64).chain(images.iter().map(|v| u64::from(v.to_bits())));
        for v in bytes {
            h = (h ^ v).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    Ok(h)
}

/// Trains on `train` (the training pipeline, with its tail on the CPU or the GPU) and
/// evaluates on the test pipeline after each epoch.
fn train<F: Feed>(
    args: &Args,
    world: Option<Rc<dyn Collective>>,
    data: &std::path::Path,
    started: Instant,
    train: &F,
    position: &Position<'_>,
) -> sluice::Result<()> {
    let (workers, worker) = world.as_ref().map_or((1, 0), |w| (w.size() as u32, w.rank() as u32));
    let test = digits_test::dataset(&digits_test::Params {
        files: format!("{}/test-*.tfrecord", data.display()),
        batch_size: 360,
        workers,
        worker,
    })?;

    let devices = match &world {
        Some(w) => rank_devices(&**w, args.cpu_replicas),
        None => devices(args.cpu_replicas),
    };
    // Rank 0 speaks for the job.
    let lead = worker == 0;
    let on = match devices[0] {
        Device::Cpu => format!("{} CPU replica(s) (no CUDA device)", devices.len()),
        _ => format!("{} CUDA device(s)", devices.len()),
    };
    let ranks = if workers > 1 { format!(" in each of {workers} MPI ranks") } else { String::new() };
    if lead {
        println!(
            "digits: {} -> a CNN on {on}{ranks}, {} epochs, global batch {}, the augmentation's tail on the {}",
            data.display(),
            args.epochs,
            args.batch_size,
            if args.tail == Tail::Gpu { "GPU" } else { "CPU" }
        );
    }

    // Each pipeline runs within its declared budget (AUTOTUNE grows nothing past it).
    let (train_ctx, test_ctx) = (Ctx::new(&digits_train::options()), Ctx::new(&digits_test::options()));
    // A fresh run's first epoch starts reading, shuffling and decoding while the model is
    // built (a resumed one starts where its checkpoint says, once that is loaded).
    let ahead = match &args.resume {
        None if args.epochs > 0 => Some(PassAhead::start(train, &train_ctx, &devices, 0)?),
        _ => None,
    };
    tch::manual_seed(args.seed as i64);
    let mut trainer = Trainer::new(&devices, Net::new, nn::Adam::default(), args.lr)?
        .with_progress(!args.no_progress && lead);
    if let Some(pass) = ahead {
        trainer = trainer.with_pass_ahead(pass);
    }
    if let Some(w) = world {
        trainer = trainer.join(w)?;
        if lead {
            println!(
                "gradients summed over {workers} ranks with {}",
                trainer.gradient_backend().unwrap_or("?")
            );
        }
    }
    if !args.no_overlap {
        // The next epoch's readers and shuffle buffer fill while this one's last batches train.
        trainer.overlap_epochs(args.epochs);
    }
    if let Some(path) = &args.load {
        trainer.load(path)?;
        if lead {
            println!("loaded {}", path.display());
        }
    }
    let (mut first, mut skip) = (0, 0);
    if let Some(path) = &args.resume {
        let Some(state) = trainer.load_checkpoint(path)? else {
            return Err(sluice::Error::Invalid(format!(
                "{}: a model without the pipeline's position beside it ({}.state)",
                path.display(),
                path.display()
            )));
        };
        (position.check)(&state)?;
        (first, skip) = (state.epoch, state.position);
        if lead {
            println!("resumed {} at epoch {} after step {skip}", path.display(), first + 1);
        }
    }

    let mut training = EpochReport::default();
    let mut accuracy = f64::NAN;
    let mut steps = 0;
    for epoch in first..args.epochs {
        let progress = epoch as f64 / args.epochs as f64;
        trainer.set_lr(args.lr * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()));
        let mut stopped = None;
        let r = trainer.train_epoch_from(train, &train_ctx, epoch, skip, &task, &mut |step, parts| {
            if args.trace_data {
                let rank = if workers > 1 { format!("rank {worker} ") } else { String::new() };
                println!("{rank}data {}.{step} {:016x}", epoch + 1, digest(parts)?);
            }
            steps += 1;
            if args.stop_after_steps == Some(steps) {
                stopped = Some(step + 1);
            }
            Ok(stopped.is_none())
        })?;
        skip = 0;
        if let (Some(done), Some(path)) = (stopped, &args.save) {
            trainer.save_checkpoint(path, &(position.state)(epoch, done)?)?;
            if !lead {
                return Ok(());
            }
            println!(
                "{r}\nstopped after {steps} steps, at epoch {} step {done}: saved {} and its pipeline position; \
                 go on with --resume {}",
                epoch + 1,
                path.display(),
                path.display()
            );
            return Ok(());
        }
        let eval = trainer.evaluate(&test, &test_ctx, &task)?;
        accuracy = eval.totals.metric("accuracy").unwrap_or(f64::NAN);
        if lead {
            println!("{r}; test loss {:.4} accuracy {accuracy:.4}", eval.totals.loss());
        }
        training.merge(&r);
    }
    if let Some(path) = &args.save {
        trainer.save_checkpoint(path, &(position.state)(args.epochs, 0)?)?;
        if lead {
            println!("saved the model to {} (and the pipeline's position beside it)", path.display());
        }
    }
    if !lead {
        return Ok(());
    }

    let report = train_ctx.report();
    let name = if args.tail == Tail::Gpu { "digits_train_gpu" } else { "digits_train" };
    let whose = if workers > 1 { ", rank 0's shard".to_string() } else { String::new() };
    println!("\ntraining pipeline ({name}, {} epochs{whose}):\n{report}", args.epochs);
    println!(
        "training: {} examples in {:.2} s, {:.0} examples/s; waited {:.3} s for data, {:.2} s computing: \
         data stall {:.1}%",
        training.totals.rows,
        training.wall.as_secs_f64(),
        training.examples_per_sec(),
        training.data_wait.as_secs_f64(),
        training.compute.as_secs_f64(),
        training.data_stall_pct(),
    );
    println!("total {:.1} s", started.elapsed().as_secs_f64());
    println!("test accuracy: {accuracy:.4}");
    Ok(())
}
