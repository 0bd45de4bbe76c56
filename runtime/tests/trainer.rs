//! The data-parallel trainer on CPU replicas: N replicas on a global batch train exactly
//! like one replica on the whole batch; the pipeline's device split; checkpoints; epoch
//! turns overlapped with the end of the previous epoch.
#![cfg(feature = "torch")]

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

use sluice_runtime::Result;
use sluice_runtime::column::{AnyColumn, Batchable, ColumnBuilder, Dense, IntoAnyColumn, NamedColumns};
use sluice_runtime::dist::Single;
use sluice_runtime::stage::{
    Ctx, DataIter, Dataset, Element, PipelineState, RuntimeOptions, from_vec, range,
};
use sluice_runtime::torch::tch::nn::{self, Module, OptimizerConfig};
use sluice_runtime::torch::tch::{self, Device, Kind};
use sluice_runtime::torch::{PassAhead, StepOutput, TensorBatch, Trainer, device_batches};

/// A batch like a generated one: features and a class label.
#[derive(Debug, Clone)]
struct Xy {
    x: Dense<f32, [f32; 4]>,
    y: Dense<i64>,
}

impl Element for Xy {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        self.x.len() * 20
    }
}

impl NamedColumns for Xy {
    fn into_named_columns(self) -> Vec<(&'static str, AnyColumn)> {
        vec![("x", self.x.into_any_column()), ("y", self.y.into_any_column())]
    }
}

/// `n` rows starting at row `from` of a fixed, learnable 3-class problem.
fn batch(from: usize, n: usize) -> Xy {
    rows((from..from + n).collect())
}

/// The rows `ids` of the problem of [`batch`].
fn rows(ids: Vec<usize>) -> Xy {
    let n = ids.len();
    let mut x = <[f32; 4] as Batchable>::builder(n);
    let mut y = <i64 as Batchable>::builder(n);
    for i in ids {
        let f = i as f32;
        let v = [(f * 0.37).sin(), (f * 0.11).cos(), (f * 0.53).sin() * 0.5, ((i * 7) % 5) as f32 / 5.0];
        let label = if v[0] + v[1] > 0.5 {
            0
        } else if v[2] > 0.0 {
            1
        } else {
            2
        };
        x.push(v).unwrap();
        y.push(label).unwrap();
    }
    Xy { x: x.finish(), y: y.finish() }
}

fn model(p: &nn::Path<'_>) -> nn::Sequential {
    nn::seq().add(nn::linear(p / "l1", 4, 16, Default::default())).add_fn(|x| x.relu()).add(nn::linear(
        p / "l2",
        16,
        3,
        Default::default(),
    ))
}

fn task(m: &nn::Sequential, b: &TensorBatch, _train: bool) -> Result<StepOutput> {
    let logits = m.forward(b.tensor("x")?);
    let y = b.tensor("y")?;
    let correct = logits.argmax(-1, false).eq_tensor(y).sum(Kind::Float);
    Ok(StepOutput { loss: logits.cross_entropy_for_logits(y), metrics: vec![("accuracy", correct)] })
}

/// `build()` right after `tch::manual_seed(seed)`, no other test in between: libtorch's
/// generator is global to the process and the tests run on parallel threads, so a
/// model built by another test between the seed and this model's initialisation would
/// draw from the same stream (a flaky "the same initial parameters").
fn seeded<T>(seed: i64, build: impl FnOnce() -> T) -> T {
    static SEEDED: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _only = SEEDED.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(seed);
    build()
}

fn trainer(replicas: usize, opt: impl OptimizerConfig + Clone) -> Trainer<nn::Sequential> {
    seeded(17, || Trainer::new(&vec![Device::Cpu; replicas], model, opt, 0.05).unwrap().with_progress(false))
}

fn params(vs: &nn::VarStore) -> Vec<(String, Vec<f32>)> {
    let mut v: Vec<_> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (n, Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn max_diff(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)]) -> f32 {
    assert_eq!(a.iter().map(|p| &p.0).collect::<Vec<_>>(), b.iter().map(|p| &p.0).collect::<Vec<_>>());
    a.iter().zip(b).flat_map(|(x, y)| x.1.iter().zip(&y.1).map(|(p, q)| (p - q).abs())).fold(0.0, f32::max)
}

fn parts(b: Xy, replicas: usize) -> Vec<TensorBatch> {
    TensorBatch::from_batch(b).unwrap().split(replicas)
}

/// The step sizes: uneven splits, and a batch smaller than the replica count.
const STEPS: [usize; 7] = [10, 10, 11, 7, 10, 2, 10];

fn replicas_train_like_one(opt: impl OptimizerConfig + Clone) {
    let mut one = trainer(1, opt.clone());
    let before = params(one.model().1);
    for n in [2, 3, 4] {
        let mut many = trainer(n, opt.clone());
        assert_eq!(max_diff(&params(many.model().1), &before), 0.0, "the same initial parameters");
        let mut from = 0;
        let mut reference = trainer(1, opt.clone());
        for rows in STEPS {
            let a = reference.step(parts(batch(from, rows), 1), &task).unwrap();
            let b = many.step(parts(batch(from, rows), n), &task).unwrap();
            assert_eq!(a.rows, b.rows);
            assert!((a.loss() - b.loss()).abs() < 1e-5, "{n} replicas: loss {} vs {}", b.loss(), a.loss());
            assert_eq!(a.metric("accuracy"), b.metric("accuracy"));
            from += rows;
        }
        let (want, got) = (params(reference.model().1), params(many.model().1));
        assert_ne!(max_diff(&want, &before), 0.0, "training moved the parameters");
        let d = max_diff(&want, &got);
        assert!(d < 1e-5, "{n} replicas differ from one replica by {d}");
        for i in 1..n {
            assert_eq!(params(many.replica_vars(i)), got, "replica {i} is identical to replica 0");
        }
    }
    // Keep `one` unused beyond its initial parameters.
    drop(one.step(parts(batch(0, 4), 1), &task).unwrap());
}

#[test]
fn replicas_train_like_one_replica_sgd_momentum() {
    replicas_train_like_one(nn::sgd(0.9, 0.0, 1e-4, false));
}

#[test]
fn replicas_train_like_one_replica_adam() {
    replicas_train_like_one(nn::Adam::default());
}

/// A trainer joined to a world of one trains exactly as one left alone: the cross-rank
/// path (agreement, flat all-reduce, totals) changes nothing but the route.
#[test]
fn a_trainer_joined_to_a_world_of_one_trains_as_alone() {
    let opt = nn::sgd(0.9, 0.0, 1e-4, false);
    let mut alone = trainer(2, opt);
    let mut joined = trainer(2, opt).join(Rc::new(Single)).unwrap();
    assert_eq!((joined.rank(), joined.world_size(), joined.gradient_backend()), (0, 1, Some("single")));
    let train = from_vec((0..6).map(|i| batch(i * 8, 8)).collect());
    let ctx = Ctx::new(&RuntimeOptions::default());
    for epoch in 0..2 {
        let a = alone.train_epoch(&train, &ctx, epoch, &task).unwrap();
        let b = joined.train_epoch(&train, &ctx, epoch, &task).unwrap();
        assert_eq!((a.steps, &a.totals), (b.steps, &b.totals));
    }
    assert_eq!(params(alone.model().1), params(joined.model().1));
    assert!(joined.join(Rc::new(Single)).unwrap_err().to_string().contains("already joined"));
}

/// On a GPU, a world of one sums gradients with NCCL (when libnccl.so loads) and trains
/// like one CPU replica, to float rounding.
#[test]
fn nccl_of_one_rank_trains_like_a_cpu_replica() {
    if sluice_runtime::torch::cuda_device_count() == 0 {
        sluice_runtime::testing::skip_gpu_test(
            "nccl_of_one_rank_trains_like_a_cpu_replica",
            "no CUDA device (the NCCL path needs a GPU)",
        );
        return;
    }
    let opt = nn::sgd(0.9, 0.0, 1e-4, false);
    let mut cpu = trainer(1, opt);
    let gpu = seeded(17, || Trainer::new(&[Device::Cuda(0)], model, opt, 0.05).unwrap().with_progress(false));
    let mut gpu = gpu.join(Rc::new(Single)).unwrap();
    eprintln!("gradients over {:?}", gpu.gradient_backend());
    let mut from = 0;
    for rows in STEPS {
        cpu.step(parts(batch(from, rows), 1), &task).unwrap();
        let part = TensorBatch::from_batch(batch(from, rows)).unwrap().to_device(Device::Cuda(0));
        gpu.step(vec![part], &task).unwrap();
        from += rows;
    }
    let on_cpu = |vs: &nn::VarStore| {
        let mut v: Vec<_> = vs
            .variables()
            .into_iter()
            .map(|(n, t)| (n, Vec::<f32>::try_from(t.to_device(Device::Cpu).flatten(0, -1)).unwrap()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let d = max_diff(&on_cpu(cpu.model().1), &on_cpu(gpu.model().1));
    assert!(d < 1e-4, "NCCL on one GPU differs from a CPU replica by {d}");
}

#[test]
fn device_batches_split_each_global_batch_per_replica() {
    let ds = from_vec(vec![batch(0, 5), batch(5, 8), batch(13, 1)]);
    let ctx = Ctx::new(&RuntimeOptions::default());
    let feed = device_batches(&ds, &ctx, &[Device::Cpu; 3]).unwrap();
    let mut sizes = Vec::new();
    let mut labels = Vec::new();
    while let Some(parts) = feed.next() {
        let parts = parts.unwrap();
        sizes.push(parts.iter().map(TensorBatch::rows).collect::<Vec<_>>());
        for p in &parts {
            labels.extend(Vec::<i64>::try_from(p.tensor("y").unwrap()).unwrap());
        }
    }
    feed.finish().unwrap();
    assert_eq!(sizes, vec![vec![2, 2, 1], vec![3, 3, 2], vec![1, 0, 0]]);
    let want: Vec<i64> =
        Vec::<i64>::try_from(TensorBatch::from_batch(batch(0, 14)).unwrap().tensor("y").unwrap()).unwrap();
    assert_eq!(labels, want, "every row once, in order");
}

#[test]
fn epochs_learn_and_report_where_the_time_went() {
    let train = from_vec((0..20).map(|i| batch(i * 16, 16)).collect());
    let test = from_vec(vec![batch(10_000, 200)]);
    let ctx = Ctx::new(&RuntimeOptions::default());
    let mut t = trainer(2, nn::Adam::default());
    let first = t.evaluate(&test, &ctx, &task).unwrap();
    let mut last = None;
    for epoch in 0..15 {
        let r = t.train_epoch(&train, &ctx, epoch, &task).unwrap();
        assert_eq!((r.epoch, r.steps, r.totals.rows), (epoch, 20, 320));
        assert!((0.0..=100.0).contains(&r.data_stall_pct()), "{r}");
        assert!(r.examples_per_sec() > 0.0 && r.to_string().contains("examples/s"), "{r}");
        last = Some(r);
    }
    let after = t.evaluate(&test, &ctx, &task).unwrap();
    assert_eq!(after.totals.rows, 200);
    assert!(
        after.totals.loss() < first.totals.loss() * 0.5,
        "loss {} -> {}",
        first.totals.loss(),
        after.totals.loss()
    );
    assert!(after.totals.metric("accuracy").unwrap() > 0.85, "{after}");
    assert!(last.unwrap().totals.loss() < first.totals.loss());
}

#[test]
fn checkpoints_restore_every_replica() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let mut a = trainer(2, nn::Adam::default());
    for i in 0..3 {
        a.step(parts(batch(i * 8, 8), 2), &task).unwrap();
    }
    a.save(&path).unwrap();
    let mut b = seeded(99, || Trainer::new(&[Device::Cpu; 2], model, nn::Adam::default(), 0.05).unwrap());
    assert_ne!(max_diff(&params(b.model().1), &params(a.model().1)), 0.0);
    b.load(&path).unwrap();
    for i in 0..2 {
        assert_eq!(params(b.replica_vars(i)), params(a.model().1));
    }
    let e = b.load(dir.path().join("missing.safetensors")).unwrap_err().to_string();
    assert!(e.contains("missing.safetensors") && e.contains("loading the model"), "{e}");
}

#[test]
fn a_checkpoint_of_several_ranks_is_refused_by_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let mut t = trainer(1, nn::Adam::default());
    t.save(&path).unwrap();
    // A model saved alone resumes nothing.
    assert!(t.load_checkpoint(&path).unwrap().is_none());
    // The per-rank positions of a job of two ranks: not this process's to resume.
    let state = |position| PipelineState {
        pipeline: "p".into(),
        fingerprint: 1,
        epoch: 0,
        position,
        stages: Vec::new(),
        redeal: Vec::new(),
    };
    let two = PipelineState::set_to_bytes(&[state(3), state(2)]).unwrap();
    std::fs::write(dir.path().join("model.safetensors.state"), two).unwrap();
    let e = t.load_checkpoint(&path).unwrap_err().to_string();
    assert!(e.contains("model.safetensors.state: a checkpoint of a job of 2 rank(s); this job has 1"), "{e}");
    // Redealt by the caller's reshard: this rank's of them.
    let got = t.load_checkpoint_resharded(&path, |states| Ok(vec![states[1].clone()])).unwrap();
    assert_eq!(got, Some(state(2)));
    let e = t.load_checkpoint_resharded(&path, |states| Ok(states.to_vec())).unwrap_err().to_string();
    assert!(e.contains("redealt to 2 rank(s), but this job has 1"), "{e}");
    // Damaged: the error names the file.
    std::fs::write(dir.path().join("model.safetensors.state"), b"SLSS\x02").unwrap();
    let e = t.load_checkpoint(&path).unwrap_err().to_string();
    assert!(e.contains("model.safetensors.state: a set of pipeline states cut short"), "{e}");
    assert_eq!((t.rank(), t.world_size(), t.gradient_backend()), (0, 1, None));

    // A joined trainer gathers its ranks' states (here one) and reads them back.
    let mut joined = trainer(1, nn::Adam::default()).join(Rc::new(Single)).unwrap();
    joined.save_checkpoint(&path, &state(5)).unwrap();
    assert_eq!(PipelineState::load(dir.path().join("model.safetensors.state")).unwrap(), state(5));
    assert_eq!(joined.load_checkpoint(&path).unwrap(), Some(state(5)));
}

#[test]
fn misuse_is_a_clear_error() {
    let mut t = trainer(2, nn::Adam::default());
    let e = t.step(parts(batch(0, 4), 3), &task).unwrap_err().to_string();
    assert!(e.contains("3 parts for 2 replicas"), "{e}");
    let vector_loss = |m: &nn::Sequential, b: &TensorBatch, _: bool| -> Result<StepOutput> {
        Ok(StepOutput {
            loss: m.forward(b.tensor("x")?).sum_dim_intlist(-1, false, Kind::Float),
            metrics: vec![],
        })
    };
    let e = t.step(parts(batch(0, 4), 2), &vector_loss).unwrap_err().to_string();
    assert!(e.contains("must be a scalar mean"), "{e}");
    let wrong_column = |m: &nn::Sequential, b: &TensorBatch, _: bool| -> Result<StepOutput> {
        Ok(StepOutput { loss: m.forward(b.tensor("image")?).mean(Kind::Float), metrics: vec![] })
    };
    let e = t.step(parts(batch(0, 4), 2), &wrong_column).unwrap_err().to_string();
    assert!(e.contains("no column `image`") && e.contains("x, y"), "{e}");
    assert!(seeded(0, || Trainer::new(&[], model, nn::Adam::default(), 0.1)).is_err());
}

#[test]
fn a_corrupt_pipeline_error_reaches_the_training_loop() {
    use sluice_runtime::stage::Dataset;
    let ds = from_vec(vec![0u32, 1, 2]).try_map(|i| {
        if i == 1 {
            Err(sluice_runtime::Error::Invalid("record 1 is corrupt".into()))
        } else {
            Ok(batch(i as usize, 4))
        }
    });
    let ctx = Ctx::new(&RuntimeOptions::default());
    let mut t = trainer(1, nn::Adam::default());
    let e = t.train_epoch(&ds, &ctx, 0, &task).unwrap_err().to_string();
    assert!(e.contains("record 1 is corrupt"), "{e}");
}

/// With CUDA devices: replicas on every GPU train like one CPU replica, the parts moved
/// through pinned memory by `TensorBatch::to_device`. Skipped (with a message) without a
/// GPU; run on the GPU machine by scripts/gpu-check.
#[test]
fn cuda_replicas_train_like_one_cpu_replica() {
    let gpus = sluice_runtime::torch::cuda_device_count();
    if gpus == 0 {
        sluice_runtime::testing::skip_gpu_test(
            "cuda_replicas_train_like_one_cpu_replica",
            "libtorch sees no CUDA device",
        );
        return;
    }
    let devices: Vec<Device> = (0..gpus).map(Device::Cuda).collect();
    let mut cpu = trainer(1, nn::Adam::default());
    let mut gpu =
        seeded(17, || Trainer::new(&devices, model, nn::Adam::default(), 0.05).unwrap().with_progress(false));
    assert_eq!(max_diff(&params(cpu.model().1), &params(gpu.model().1)), 0.0);
    let mut from = 0;
    for rows in STEPS {
        cpu.step(parts(batch(from, rows), 1), &task).unwrap();
        let on_gpus =
            parts(batch(from, rows), gpus).iter().zip(&devices).map(|(p, &d)| p.to_device(d)).collect();
        gpu.step(on_gpus, &task).unwrap();
        from += rows;
    }
    let d = max_diff(&params(cpu.model().1), &params(gpu.model().1));
    assert!(d < 1e-4, "{gpus} GPU replica(s) differ from the CPU replica by {d}");
}

/// Records a skipping policy drops are counted in the epoch's report and its text (the
/// trainer used to say nothing of them).
#[test]
fn the_epoch_report_counts_skipped_records() {
    use sluice_runtime::stage::{Dataset, Files, Record, tfrecords};
    use sluice_runtime::tfrecord::{self, Compression, CorruptPolicy, ReaderOptions};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.tfrecord");
    let mut w = tfrecord::create(&path, Compression::None).unwrap();
    for i in 0..4u8 {
        w.write_record(&[i; 8]).unwrap();
    }
    w.finish().unwrap();
    // Damage the payload of record 1 (each record is 12 + 8 + 4 bytes).
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[24 + 12] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let options = ReaderOptions { on_corrupt: CorruptPolicy::Skip, ..ReaderOptions::default() };
    let ds =
        tfrecords(Files::from_paths(vec![path]), options, 1).map(|r: Record| batch(usize::from(r[0]) * 4, 4));
    let ctx = Ctx::new(&RuntimeOptions::default());
    let mut t = trainer(1, nn::Adam::default());
    for epoch in 0..2 {
        let r = t.train_epoch(&ds, &ctx, epoch, &task).unwrap();
        assert_eq!((r.steps, r.skipped_records, r.skipped_files), (3, 1, 0), "epoch {epoch}: {r}");
        assert!(r.to_string().ends_with(", skipped 1 corrupt record"), "{r}");
    }
}

/// Passes of a dataset that count, in `ended`, those dropped: a feeding thread drops its
/// pass once it has sent the pass's last batch and said it is done.
struct NotingEnds<D> {
    inner: D,
    ended: Arc<AtomicU64>,
}

struct NotingEndsIter<I> {
    inner: I,
    ended: Arc<AtomicU64>,
}

impl<D: Dataset> Dataset for NotingEnds<D> {
    type Item = D::Item;
    type Iter = NotingEndsIter<D::Iter>;

    fn iter(&self, ctx: &Ctx) -> Result<Self::Iter> {
        Ok(NotingEndsIter { inner: self.inner.iter(ctx)?, ended: self.ended.clone() })
    }
}

impl<I: DataIter> DataIter for NotingEndsIter<I> {
    type Item = I::Item;

    fn next(&mut self) -> Result<Option<I::Item>> {
        self.inner.next()
    }
}

impl<I> Drop for NotingEndsIter<I> {
    fn drop(&mut self) {
        self.ended.fetch_add(1, SeqCst);
    }
}

/// Whether `what` holds within 10 s (the threads of other tests share the cores).
fn wait_for(what: impl Fn() -> bool) -> bool {
    (0..1000).any(|_| {
        let yes = what();
        if !yes {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        yes
    })
}

/// With epoch turns overlapped, the pass started ahead reads (and skips the corrupt record
/// of) the next epoch while the current one still trains: each epoch's report counts its
/// own pass's skip only. So that the overlap this checks always happens, the first step of
/// each epoch waits until its pass has ended (the epoch's last batch is then queued, and
/// the trainer starts the next pass when it takes it), and the last step waits until the
/// pass ahead has counted its skip.
#[test]
fn overlapped_epochs_count_each_pass_s_skipped_records_in_its_own_epoch() {
    use sluice_runtime::stage::{Files, Record, tfrecords};
    use sluice_runtime::tfrecord::{self, Compression, CorruptPolicy, ReaderOptions};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.tfrecord");
    let mut w = tfrecord::create(&path, Compression::None).unwrap();
    // Three records, the second corrupt: two batches, which the feeding thread's queue
    // holds whole, so its pass ends while the epoch's first step runs.
    for i in 0..3u8 {
        w.write_record(&[i; 8]).unwrap();
    }
    w.finish().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[24 + 12] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let options = ReaderOptions { on_corrupt: CorruptPolicy::Skip, ..ReaderOptions::default() };
    let ended = Arc::new(AtomicU64::new(0));
    let ds = NotingEnds {
        inner: tfrecords(Files::from_paths(vec![path]), options, 1)
            .map(|r: Record| batch(usize::from(r[0]) * 4, 4)),
        ended: ended.clone(),
    };
    let ctx = Ctx::new(&RuntimeOptions::default());
    let mut t = trainer(1, nn::Adam::default());
    t.overlap_epochs(3);
    let mut overlapped = Vec::new();
    for epoch in 0..3 {
        let mut pass_ended = false;
        let mut ahead_counted = false;
        let mut after = |step: u64, _: &[TensorBatch]| {
            if step == 0 {
                pass_ended = wait_for(|| ended.load(SeqCst) > epoch);
            }
            if step == 1 && epoch < 2 {
                // This pass's skip and the one ahead's.
                ahead_counted = wait_for(|| ctx.reader_stats().skipped_records == epoch + 2);
            }
            Ok(true)
        };
        let r = t.train_epoch_from(&ds, &ctx, epoch, 0, &task, &mut after).unwrap();
        assert!(pass_ended, "epoch {epoch}: its pass ended within 10 s");
        assert_eq!((r.steps, r.skipped_records, r.skipped_files), (2, 1, 0), "epoch {epoch}: {r}");
        assert_eq!(r.started_ahead, epoch > 0, "epoch {epoch}");
        overlapped.push(ahead_counted);
    }
    assert_eq!(overlapped, [true, true, false], "the next pass read its file during each turn");
    assert_eq!(ctx.reader_stats().skipped_records, 3);
}

/// A `map(on_error: skip)` in the pipeline: the epoch report counts the elements it
/// dropped in that pass (not the passes before) and says so.
#[test]
fn the_epoch_report_counts_elements_a_skipping_map_dropped() {
    use sluice_runtime::stage::{Dataset, range, skippable};
    // Batches 0..5; the map fails on batches 1 and 3, which are dropped and counted.
    let ds = range(0..5)
        .try_map_skipping(|i: u64| {
            if i % 2 == 1 {
                Err(skippable(format!("batch {i} is bad")))
            } else {
                Ok(Some(batch(i as usize * 4, 4)))
            }
        })
        .somes();
    let ctx = Ctx::new(&RuntimeOptions::default());
    let mut t = trainer(1, nn::Adam::default());
    for epoch in 0..2 {
        let r = t.train_epoch(&ds, &ctx, epoch, &task).unwrap();
        assert_eq!((r.steps, r.skipped_elements, r.skipped_records), (3, 2, 0), "epoch {epoch}: {r}");
        assert!(r.to_string().ends_with(", skipped 2 elements whose map failed"), "{r}");
    }
}

/// Trains 4 epochs of a shuffled pipeline (a new order each epoch), evaluating after
/// each; returns every training batch's features, whether each pass was started ahead,
/// and the parameters at the end.
#[allow(clippy::type_complexity)]
fn shuffled_epochs(
    overlap: bool,
    resume_at: Option<(u64, u64)>,
) -> (Vec<Vec<f32>>, Vec<bool>, Vec<(String, Vec<f32>)>) {
    shuffled_epochs_from(overlap, resume_at, None)
}

/// [`shuffled_epochs`], with the pass of epoch `early` (if any) started before the trainer
/// is built ([`PassAhead`]).
#[allow(clippy::type_complexity)]
fn shuffled_epochs_from(
    overlap: bool,
    resume_at: Option<(u64, u64)>,
    early: Option<u64>,
) -> (Vec<Vec<f32>>, Vec<bool>, Vec<(String, Vec<f32>)>) {
    let train = range(0..330)
        .shuffle(100, 3)
        .reshuffle_each_epoch(true)
        .chunks(16, false)
        .map(|ids: Vec<u64>| rows(ids.into_iter().map(|i| i as usize).collect()));
    let test = from_vec(vec![batch(10_000, 50)]);
    let ctx = Ctx::new(&RuntimeOptions::default());
    let pass = early.map(|e| PassAhead::start(&train, &ctx, &[Device::Cpu], e).unwrap());
    let mut t = trainer(1, nn::Sgd::default());
    if let Some(pass) = pass {
        t = t.with_pass_ahead(pass);
    }
    if overlap {
        t.overlap_epochs(4);
    }
    let (first, skip) = resume_at.unwrap_or((0, 0));
    let (mut seen, mut ahead) = (Vec::new(), Vec::new());
    for epoch in first..4 {
        let mut after = |_: u64, parts: &[TensorBatch]| {
            seen.push(Vec::<f32>::try_from(parts[0].tensor("x")?.flatten(0, -1)).unwrap());
            Ok(true)
        };
        let skip = if epoch == first { skip } else { 0 };
        let r = t.train_epoch_from(&train, &ctx, epoch, skip, &task, &mut after).unwrap();
        assert_eq!(r.steps, 21 - skip);
        ahead.push(r.started_ahead);
        t.evaluate(&test, &ctx, &task).unwrap();
    }
    (seen, ahead, params(t.model().1))
}

#[test]
fn overlapped_epoch_turns_train_on_the_same_batches_bit_for_bit() {
    let (plain, plain_ahead, plain_params) = shuffled_epochs(false, None);
    let (over, over_ahead, over_params) = shuffled_epochs(true, None);
    assert_eq!(plain_ahead, [false; 4]);
    assert_eq!(over_ahead, [false, true, true, true], "every later pass started ahead");
    assert_eq!(plain.len(), 4 * 21);
    assert!(plain == over, "the same batches in the same order");
    assert!(plain_params == over_params, "the same training");
    // A run resumed inside epoch 1 (after 5 batches), overlapping the later turns, goes on
    // with exactly the batches of the uninterrupted run.
    let (resumed, ahead, _) = shuffled_epochs(true, Some((1, 5)));
    assert_eq!(ahead, [false, true, true]);
    assert!(resumed == plain[21 + 5..], "resumed across the epoch boundaries");
}

#[test]
fn a_pass_started_before_the_trainer_trains_on_the_same_batches() {
    let (plain, _, plain_params) = shuffled_epochs(false, None);
    let (early, ahead, early_params) = shuffled_epochs_from(true, None, Some(0));
    assert_eq!(ahead, [true; 4], "the first pass was started before the trainer, the others at the turns");
    assert!(early == plain, "the same batches in the same order");
    assert!(early_params == plain_params, "the same training");
    // A pass started for another epoch than the first one trained is dropped, unused.
    let (other, ahead, _) = shuffled_epochs_from(false, None, Some(1));
    assert_eq!(ahead, [false; 4]);
    assert!(other == plain);
    // As is one for the first epoch of a run resumed inside it: the resumed pass skips.
    let (resumed, ahead, _) = shuffled_epochs_from(false, Some((0, 5)), Some(0));
    assert_eq!(ahead, [false; 4]);
    assert!(resumed == plain[5..]);
}
