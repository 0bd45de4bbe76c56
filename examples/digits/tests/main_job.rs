//! The main job end to end: the committed TFRecord shards through `digits.pipe` into the
//! trainer. It must reach the stated held-out accuracy (0.95) and end with the pipeline's
//! statistics, the data-stall share and `test accuracy: 0.NNNN`.

use std::process::Command;

fn digits(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_digits")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn accuracy(stdout: &str) -> f64 {
    let last = stdout.lines().last().unwrap_or_default();
    let value = last.strip_prefix("test accuracy: ").unwrap_or_else(|| panic!("last line {last:?}"));
    assert_eq!(value.len(), 6, "0.NNNN: {last:?}");
    value.parse().unwrap()
}

#[test]
fn trains_to_the_stated_accuracy_and_reports_the_pipeline() {
    let (ok, stdout, stderr) = digits(&["--no-progress"]);
    assert!(ok, "{stderr}\n{stdout}");
    let acc = accuracy(&stdout);
    assert!(acc >= 0.95, "test accuracy {acc} < 0.95\n{stdout}");
    assert_eq!(stdout.matches("examples/s, data stall").count(), 15, "one line per epoch\n{stdout}");
    assert!(stdout.contains("1437 examples in 23 steps"), "{stdout}");
    for stage in ["interleave", "shuffle", "map_batch", "bottleneck:"] {
        assert!(stdout.contains(stage), "pipeline statistics lack {stage}\n{stdout}");
    }
    let training = stdout.lines().find(|l| l.starts_with("training: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(training.contains("data stall") && training.ends_with('%'), "{training}");
}

#[test]
fn two_replicas_checkpoint_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("digits.safetensors");
    let model = model.to_str().unwrap();
    let (ok, stdout, stderr) =
        digits(&["--no-progress", "--cpu-replicas", "2", "--epochs", "4", "--save", model]);
    assert!(ok, "{stderr}\n{stdout}");
    assert!(stdout.contains("2 CPU replica(s)") || stdout.contains("CUDA device(s)"), "{stdout}");
    let first = accuracy(&stdout);
    // One more epoch from the checkpoint, at a small learning rate: it starts where the
    // saved model was, not from scratch.
    let (ok, stdout, stderr) = digits(&["--no-progress", "--epochs", "1", "--lr", "1e-5", "--load", model]);
    assert!(ok, "{stderr}\n{stdout}");
    let resumed = accuracy(&stdout);
    assert!(first > 0.9 && (resumed - first).abs() < 0.03, "saved {first}, resumed {resumed}\n{stdout}");
}

#[test]
fn missing_data_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = digits(&["--no-progress", "--data", dir.path().to_str().unwrap()]);
    assert!(!ok, "{stdout}");
    assert!(stderr.starts_with("error: ") && stderr.contains("train-*.tfrecord"), "{stderr}");
}

#[test]
fn a_corrupt_shard_names_the_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    // Flip one byte inside the payload of a record in the middle of a training shard.
    let shard = dir.path().join("train-00002-of-00004.tfrecord");
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&shard, bytes).unwrap();
    let (ok, stdout, stderr) = digits(&["--no-progress", "--data", dir.path().to_str().unwrap()]);
    assert!(!ok, "{stdout}");
    assert!(stderr.contains("train-00002-of-00004.tfrecord") && stderr.contains("record"), "{stderr}");
    assert!(!stdout.contains("test accuracy"), "no result from corrupt data\n{stdout}");
}

#[test]
fn a_label_outside_the_classes_is_an_error_not_an_abort() {
    use prost::Message;
    use sluice::example::{Example, feature::Kind};
    use sluice::tfrecord::{self, Compression, ReaderOptions};
    let dir = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    // The test shard's records, labels shifted by 10 (digits 10..=19), as a training set.
    let mut reader =
        tfrecord::open(data.join("test-00000-of-00001.tfrecord"), &ReaderOptions::default()).unwrap();
    let mut writer =
        tfrecord::create(dir.path().join("train-00000-of-00001.tfrecord"), Compression::None).unwrap();
    while let Some(record) = reader.next_owned().unwrap() {
        let mut example = Example::decode(&record[..]).unwrap();
        let features = &mut example.features.as_mut().unwrap().feature;
        let Some(Kind::Int64List(labels)) = &mut features.get_mut("label").unwrap().kind else {
            panic!("label")
        };
        labels.value[0] += 10;
        writer.write_record(&example.encode_to_vec()).unwrap();
    }
    writer.finish().unwrap();
    std::fs::copy(data.join("test-00000-of-00001.tfrecord"), dir.path().join("test-00000-of-00001.tfrecord"))
        .unwrap();
    let (ok, stdout, stderr) =
        digits(&["--no-progress", "--epochs", "1", "--data", dir.path().to_str().unwrap()]);
    assert!(!ok, "{stdout}");
    assert!(stderr.starts_with("error: ") && stderr.contains("the digits are 0..=9"), "{stderr}");
}

/// The lines of each epoch (loss and accuracy, without the timings).
fn epoch_figures(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("epoch "))
        .map(|l| l.split_once(", loss ").map_or(l, |(_, rest)| rest).to_string())
        .collect()
}

#[test]
fn the_gpu_tail_trains_as_the_cpu_tail() {
    // `--tail gpu` runs `digits_train_gpu`, whose random crop, scale and transpose run as
    // one generated kernel on each GPU, or, here without a GPU, as its CPU twin, saying
    // so. Its rows draw with the keys of `digits_train`'s fused map+batch, so with a CPU
    // tail either way the training is the same, step for step.
    let (ok, gpu_out, gpu_err) = digits(&["--no-progress", "--epochs", "2", "--tail", "gpu"]);
    assert!(ok, "{gpu_err}\n{gpu_out}");
    let (ok, cpu_out, cpu_err) = digits(&["--no-progress", "--epochs", "2", "--tail", "cpu"]);
    assert!(ok, "{cpu_err}\n{cpu_out}");
    assert!(gpu_out.contains("training pipeline (digits_train_gpu"), "{gpu_out}");
    if !gpu_out.contains("CUDA device(s)") {
        assert!(
            gpu_err.matches("running the CPU twin of the device tail of `digits_train_gpu`").count() == 1,
            "said once: {gpu_err}"
        );
        assert_eq!(epoch_figures(&gpu_out), epoch_figures(&cpu_out));
    }
    assert_eq!(epoch_figures(&gpu_out).len(), 2, "{gpu_out}");
}

/// The `data EPOCH.STEP DIGEST` lines of a run.
fn data_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("data ")).collect()
}

#[test]
fn an_interrupted_run_resumes_its_data_exactly() {
    // One uninterrupted run of 2 epochs (23 steps each), then one stopped after 30 steps
    // (epoch 2, step 7) and resumed from its checkpoint in a new process: the batches
    // the two halves train on are those of the uninterrupted run, in order, augmentation
    // included.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("digits.safetensors");
    let model = model.to_str().unwrap();
    let base = ["--no-progress", "--epochs", "2", "--trace-data"];
    let (ok, full, err) = digits(&base);
    assert!(ok, "{err}");
    assert_eq!(data_lines(&full).len(), 46, "{full}");
    let (ok, first, err) = digits(&[&base[..], &["--stop-after-steps", "30", "--save", model]].concat());
    assert!(ok, "{err}");
    assert!(first.contains("stopped after 30 steps, at epoch 2 step 7"), "{first}");
    assert!(std::path::Path::new(&format!("{model}.state")).exists());
    let (ok, rest, err) = digits(&[&base[..], &["--resume", model]].concat());
    assert!(ok, "{err}");
    assert!(rest.contains("at epoch 2 after step 7"), "{rest}");
    let joined: Vec<&str> = data_lines(&first).into_iter().chain(data_lines(&rest)).collect();
    assert_eq!(joined, data_lines(&full));
    // The training goes on from the saved model: it ends where a whole run does.
    assert!(accuracy(&rest) > 0.85, "{rest}");

    // Other data under the same checkpoint: refused, naming why.
    let other = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, other.path().join(path.file_name().unwrap())).unwrap();
    }
    let (ok, stdout, err) =
        digits(&[&base[..], &["--resume", model, "--data", other.path().to_str().unwrap()]].concat());
    assert!(!ok, "{stdout}");
    assert!(err.contains("does not match it now"), "{err}");
}
