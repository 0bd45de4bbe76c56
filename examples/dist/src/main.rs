//! `dist-check`: multi-process data-parallel training with Sluice, and the check that it
//! trains exactly as one process does.
//!
//! - `dist-check gen --out DIR` writes the tabular dataset of `sluice gen` (TFRecord, with
//!   record ids) and its indexes (`dist.pipe` shuffles globally).
//! - `mpirun -np W dist-check train --data DIR --out OUT`: each rank reads its exact shard
//!   of `dist.pipe` (`workers` = W, `worker` = its rank) in batches of its part of the
//!   global batch, and [`Trainer::join`] sums the gradients over the ranks (MPI; NCCL
//!   between GPUs). Each rank writes the ids it trained on, step by step
//!   (`OUT/ids.rankR.txt`); rank 0 saves the model (`OUT/model.safetensors`).
//!   `--stop-after-steps N` stops there with a checkpoint (`OUT/ckpt.safetensors` and
//!   each rank's pipeline position); `--resume` goes on from it, under `mpirun` with
//!   the same number of ranks or another (the positions are redealt: `dist.pipe` is
//!   elastic, its shards are blocks of a global permutation).
//! - `dist-check train --reference W ...`: one process, one replica, training on the same
//!   global batches: at each step, the concatenation of the W shards' batches.
//!   `--reshard STEPS:M` redeals the W shards' positions to M shards after STEPS steps,
//!   as a job stopped there and resumed by M ranks does.
//! - `dist-check compare A B`: the largest difference between two saved models.
//!
//! `examples/dist/tests/mpirun.rs` runs these under `mpirun -np 2` and checks the
//! parameters and that every record is trained on once per epoch across the ranks.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use clap::{Parser, Subcommand};
use sluice::dist::{Collective, Mpi};
use sluice::runtime::stage::{Ctx, Dataset, RuntimeOptions};
use sluice::torch::tch::nn::{self, Module, OptimizerConfig};
use sluice::torch::tch::{self, Device, Kind, Tensor};
use sluice::torch::{StepOutput, TensorBatch, Trainer, rank_devices};

sluice::include_pipelines!("dist");

#[derive(Debug, Parser)]
#[command(about = "Data-parallel training over MPI with a Sluice pipeline, checked against one process")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes the tabular dataset (x: 16 floats, label, id) and its record indexes.
    Gen {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1000)]
        records: u64,
        #[arg(long, default_value_t = 3)]
        files: u32,
    },
    /// Trains (under mpirun: one shard per rank; with --reference: one process).
    Train(TrainArgs),
    /// Compares two saved models: prints the largest absolute difference of a parameter.
    Compare {
        a: PathBuf,
        b: PathBuf,
        /// Fails (exit 1) above this difference.
        #[arg(long, default_value_t = 1e-5)]
        tolerance: f64,
    },
}

#[derive(Debug, clap::Args)]
struct TrainArgs {
    /// The dataset of `gen`.
    #[arg(long)]
    data: PathBuf,
    /// Where the ids, the model and checkpoints go.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 2)]
    epochs: u64,
    /// The global batch: each of W ranks takes B / W rows (the first B mod W one more).
    #[arg(long, default_value_t = 64)]
    batch_size: u32,
    #[arg(long, default_value_t = 0.1)]
    lr: f64,
    /// SGD's momentum (0: plain SGD, which keeps no state: the optimizer's state is not
    /// in checkpoints, so only then does a resumed run equal an uninterrupted one exactly).
    #[arg(long, default_value_t = 0.9)]
    momentum: f64,
    #[arg(long, default_value_t = 3)]
    seed: u64,
    /// One process training on the global batches of W ranks' shards (no MPI).
    #[arg(long)]
    reference: Option<u32>,
    /// Stops after this many steps of this run, with a checkpoint in OUT.
    #[arg(long)]
    stop_after_steps: Option<u64>,
    /// Goes on from OUT's checkpoint.
    #[arg(long)]
    resume: bool,
    /// With --reference W: after STEPS steps, the W shards' positions are redealt to M
    /// shards and the global batches are theirs from then on, as a job of W ranks stopped
    /// there and resumed under `mpirun -np M` trains (`STEPS:M`).
    #[arg(long, value_parser = parse_reshard, requires = "reference")]
    reshard: Option<(u64, u32)>,
}

fn parse_reshard(s: &str) -> Result<(u64, u32), String> {
    let (steps, m) = s.split_once(':').ok_or("STEPS:M, as 21:3")?;
    let steps = steps.parse().map_err(|e| format!("STEPS `{steps}`: {e}"))?;
    let m: u32 = m.parse().map_err(|e| format!("M `{m}`: {e}"))?;
    if m == 0 {
        return Err("M: at least one shard".into());
    }
    Ok((steps, m))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Gen { out, records, files } => {
            sluice::dist::exit_status(generate_data(&out, records, files), None)
        }
        Command::Compare { a, b, tolerance } => match compare(&a, &b) {
            Ok(diff) => {
                println!("largest difference {diff:e} (tolerance {tolerance:e})");
                if diff <= tolerance { ExitCode::SUCCESS } else { ExitCode::FAILURE }
            }
            Err(e) => sluice::dist::exit_status(Err(e), None),
        },
        Command::Train(args) => {
            let world: Option<Rc<dyn Collective>> = match args.reference {
                Some(_) => None,
                None => match Mpi::from_env() {
                    Ok(w) => w.map(|w| Rc::new(w) as Rc<dyn Collective>),
                    Err(e) => return sluice::dist::exit_status(Err(e), None),
                },
            };
            let result = match args.reference {
                Some(w) => reference(&args, w),
                None => train(&args, world.clone()),
            };
            sluice::dist::exit_status(result, world.as_deref())
        }
    }
}

fn generate_data(out: &Path, records: u64, files: u32) -> sluice::Result<()> {
    use sluice::synth::{GenOptions, Kind as Data, generate};
    let opts = GenOptions {
        kind: Data::Tabular,
        records,
        shards: files,
        out: out.to_path_buf(),
        seed: 1,
        compression: sluice::tfrecord::Compression::None,
        threads: 1,
    };
    let summary = generate(&opts, &|_| {})?;
    for f in &summary.files {
        sluice::tfrecord::write_index(f)?;
    }
    println!("{} records in {} files under {}", summary.records, summary.files.len(), out.display());
    Ok(())
}

/// The largest absolute difference between two models' parameters (the same names).
fn compare(a: &Path, b: &Path) -> sluice::Result<f64> {
    let read = |p: &Path| {
        Tensor::read_safetensors(p).map_err(|e| sluice::Error::Invalid(format!("{}: {e}", p.display())))
    };
    let (mut ta, mut tb) = (read(a)?, read(b)?);
    ta.sort_by(|x, y| x.0.cmp(&y.0));
    tb.sort_by(|x, y| x.0.cmp(&y.0));
    let names = |t: &[(String, Tensor)]| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    if names(&ta) != names(&tb) {
        return Err(sluice::Error::Invalid(format!(
            "the models' parameters differ: {:?} and {:?}",
            names(&ta),
            names(&tb)
        )));
    }
    let mut worst = 0.0f64;
    for ((_, x), (_, y)) in ta.iter().zip(&tb) {
        worst = worst.max((x - y).abs().max().double_value(&[]));
    }
    Ok(worst)
}

/// A two-layer perceptron: 16 inputs, 64 hidden, 10 logits.
fn net(p: &nn::Path<'_>) -> nn::Sequential {
    nn::seq().add(nn::linear(p / "fc1", 16, 64, Default::default())).add_fn(|x| x.relu()).add(nn::linear(
        p / "fc2",
        64,
        10,
        Default::default(),
    ))
}

fn task(model: &nn::Sequential, batch: &TensorBatch, _train: bool) -> sluice::Result<StepOutput> {
    let labels = batch.tensor("label")?;
    let logits = model.forward(batch.tensor("x")?);
    let correct = logits.argmax(-1, false).eq_tensor(labels).sum(Kind::Float);
    Ok(StepOutput { loss: logits.cross_entropy_for_logits(labels), metrics: vec![("accuracy", correct)] })
}

fn optimizer(args: &TrainArgs) -> impl OptimizerConfig + Clone {
    nn::Sgd { momentum: args.momentum, ..Default::default() }
}

/// Worker `worker` of `workers`' pipeline parameters: its shard, its part of the batch.
fn params(args: &TrainArgs, workers: u32, worker: u32) -> dist_train::Params {
    let (base, extra) = (args.batch_size / workers, args.batch_size % workers);
    dist_train::Params {
        files: format!("{}/tabular-*.tfrecord", args.data.display()),
        workers,
        worker,
        batch_size: base + u32::from(worker < extra),
        seed: args.seed,
    }
}

/// Appends one line per step to `path`: `EPOCH STEP id id …` (the rows' record ids).
fn log_ids(path: &Path, epoch: u64, step: u64, parts: &[TensorBatch]) -> sluice::Result<()> {
    let mut line = format!("{epoch} {step}");
    for part in parts {
        let ids = Vec::<i64>::try_from(part.tensor("id")?.to_device(Device::Cpu))
            .map_err(|e| sluice::Error::Invalid(e.to_string()))?;
        for id in ids {
            line.push_str(&format!(" {id}"));
        }
    }
    line.push('\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| sluice::Error::Invalid(format!("{}: {e}", path.display())))
}

/// This process's share of a (possibly one-rank) job.
fn train(args: &TrainArgs, world: Option<Rc<dyn Collective>>) -> sluice::Result<()> {
    let (rank, size) = world.as_ref().map_or((0, 1), |w| (w.rank(), w.size()));
    let devices = match &world {
        Some(w) => rank_devices(&**w, 1),
        None => sluice::torch::devices(1),
    };
    std::fs::create_dir_all(&args.out)
        .map_err(|e| sluice::Error::Invalid(format!("{}: {e}", args.out.display())))?;
    let p = params(args, size as u32, rank as u32);
    let dataset = dist_train::dataset(&p)?;
    tch::manual_seed(args.seed as i64);
    let mut trainer = Trainer::new(&devices, net, optimizer(args), args.lr)?.with_progress(false);
    if let Some(w) = world {
        trainer = trainer.join(w)?;
    }
    let ckpt = args.out.join("ckpt.safetensors");
    let (mut first, mut skip) = (0, 0);
    let mut ctx = Ctx::new(&RuntimeOptions::default());
    if args.resume {
        // A checkpoint of a job of another size: every rank's position is redealt to this
        // job's ranks (each rank's batch size is its part of the global batch).
        let state = trainer
            .load_checkpoint_resharded(&ckpt, |states| {
                dist_train::reshard_with(states, size as u64, |n, i| {
                    let n = u32::try_from(n).map_err(|_| sluice::Error::Invalid(format!("{n} ranks")))?;
                    Ok(params(args, n, i as u32))
                })
            })?
            .ok_or_else(|| {
                sluice::Error::Invalid(format!("{}: no pipeline position beside the model", ckpt.display()))
            })?;
        dist_train::check_state(&p, &state)?;
        (first, skip) = (state.epoch, state.position);
        // The context of its epoch carries the state's stage positions and redeal.
        ctx = state.ctx(&ctx);
    }
    if rank == 0 {
        println!(
            "{size} rank(s), gradients over {}, global batch {}, devices {:?}",
            trainer.gradient_backend().unwrap_or("(one process)"),
            args.batch_size,
            trainer.devices()
        );
    }
    let ids = args.out.join(format!("ids.rank{rank}.txt"));
    let mut steps = 0;
    for epoch in first..args.epochs {
        let mut stopped = None;
        let r = trainer.train_epoch_from(&dataset, &ctx, epoch, skip, &task, &mut |step, parts| {
            log_ids(&ids, epoch, step, parts)?;
            steps += 1;
            if args.stop_after_steps == Some(steps) {
                stopped = Some(step + 1);
            }
            Ok(stopped.is_none())
        })?;
        skip = 0;
        if rank == 0 {
            println!("{r}");
        }
        if let Some(done) = stopped {
            // With the stage positions: the shard's count, which a resume on another number
            // of ranks redeals from.
            let state = dist_train::state(&p, epoch, done)?.with_stage_positions(&dataset);
            trainer.save_checkpoint(&ckpt, &state)?;
            if rank == 0 {
                println!(
                    "stopped after {steps} steps at epoch {} step {done}: {}",
                    epoch + 1,
                    ckpt.display()
                );
            }
            return Ok(());
        }
    }
    trainer.save(args.out.join("model.safetensors"))
}

/// One process, one replica, on the global batches of `workers` ranks: at each step, the
/// rows of every shard's next batch, concatenated. With `--reshard STEPS:M`, the shards'
/// positions after STEPS steps are redealt to M shards, whose batches make the global
/// batches from then on.
fn reference(args: &TrainArgs, workers: u32) -> sluice::Result<()> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| sluice::Error::Invalid(format!("{}: {e}", args.out.display())))?;
    let shards_of =
        |n: u32| (0..n).map(|w| dist_train::dataset(&params(args, n, w))).collect::<sluice::Result<Vec<_>>>();
    let mut shards = shards_of(workers)?;
    tch::manual_seed(args.seed as i64);
    let mut trainer = Trainer::new(&[Device::Cpu], net, optimizer(args), args.lr)?.with_progress(false);
    let ctx = Ctx::new(&RuntimeOptions::default());
    let ids = args.out.join("ids.reference.txt");
    let mut steps = 0;
    for epoch in 0..args.epochs {
        let mut streams = shards
            .iter()
            .map(|d| d.stream_from(&ctx.with_epoch(epoch), 0))
            .collect::<sluice::Result<Vec<_>>>()?;
        let mut step = 0;
        loop {
            let mut parts = Vec::new();
            for s in &mut streams {
                if let Some(batch) = s.next() {
                    parts.push(TensorBatch::from_batch(batch?)?);
                }
            }
            if parts.is_empty() {
                break;
            }
            let global = TensorBatch::concat(&parts)?;
            log_ids(&ids, epoch, step, std::slice::from_ref(&global))?;
            let totals = trainer.step(vec![global], &task)?;
            println!("epoch {} step {step}: {} rows, loss {:.4}", epoch + 1, totals.rows, totals.loss());
            step += 1;
            steps += 1;
            let Some((_, m)) = args.reshard.filter(|&(at, _)| at == steps) else { continue };
            // Each shard's state there (its stage positions taken while its pass is alive),
            // redealt to M shards, which go on with the rest of the epoch.
            let n = shards.len() as u32;
            let states = (0..n)
                .map(|w| {
                    Ok(dist_train::state(&params(args, n, w), epoch, step)?
                        .with_stage_positions(&shards[w as usize]))
                })
                .collect::<sluice::Result<Vec<_>>>()?;
            let redealt = dist_train::reshard_with(&states, u64::from(m), |n, i| {
                let n = u32::try_from(n).map_err(|_| sluice::Error::Invalid(format!("{n} ranks")))?;
                Ok(params(args, n, i as u32))
            })?;
            shards = shards_of(m)?;
            streams = shards
                .iter()
                .zip(&redealt)
                .map(|(d, state)| d.stream_from(&state.ctx(&ctx), state.position))
                .collect::<sluice::Result<Vec<_>>>()?;
            println!("redealt the positions of {n} shards to {m} after {steps} steps");
        }
    }
    trainer.save(args.out.join("model.safetensors"))
}
