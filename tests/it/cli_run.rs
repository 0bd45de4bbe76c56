//! End-to-end tests of `sluice emit` and `sluice run`: run the built binary on `.pipe`
//! files, check output, exit status and messages. Runners build with the dev profile in a
//! cache of each test's own, sharing one target directory under `target/tmp` so the
//! runtime compiles once.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{SLUICE, generate, pipes_and_tabular, root, sluice_command, sluice_in, stderr, stdout};

#[test]
fn emit_and_run_render_the_diagnostics_of_a_bad_file() {
    let cache = tempfile::tempdir().unwrap();
    let bad = root().join("tests/errors/missing_semicolon.pipe");
    for command in ["emit", "run"] {
        let o = sluice_in(cache.path(), &[command, bad.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{command}");
        assert_eq!(stdout(&o), "", "{command}");
        let err = stderr(&o);
        assert!(
            err.contains("error[E0001]: expected `;`") && err.contains("missing_semicolon.pipe:2:21"),
            "{err}"
        );
        assert!(
            err.ends_with(
                "missing_semicolon.pipe: 1 error\nfor more on this diagnostic, run `sluice explain-code E0001`\n"
            ),
            "{err}"
        );
    }
    assert!(!cache.path().join("run").exists(), "nothing is built for a bad file");
}

#[test]
fn emit_and_run_of_a_missing_file_are_usage_errors() {
    let cache = tempfile::tempdir().unwrap();
    for command in ["emit", "run"] {
        let o = sluice_in(cache.path(), &[command, "/no/such/file.pipe"]);
        assert_eq!(o.status.code(), Some(2), "{command}");
        assert!(stderr(&o).starts_with("error: /no/such/file.pipe: "), "{}", stderr(&o));
    }
}

#[test]
fn run_refuses_a_malformed_set_before_compiling() {
    let cache = tempfile::tempdir().unwrap();
    let file = root().join("tests/pipes/tabular.pipe");
    let o = sluice_in(cache.path(), &["run", file.to_str().unwrap(), "--set", "batch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("expected NAME=VALUE, found `batch`"), "{}", stderr(&o));
    let o = sluice_in(cache.path(), &["run", file.to_str().unwrap(), "--epochs", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Two pipelines over tabular records: `train` parses and batches them, `raw` passes the
/// serialized records through.
const PIPES: &str = r#"
pipeline train(files: glob, batch: u32 = 4) {
    schema { x: f32[16], label: i64 }
    tfrecords(files);
    map { parse_example(); x = x * 2.0; }
    batch(batch);
}

pipeline raw(files: glob) {
    tfrecords(files);
}
"#;

/// `PIPES` as `dir/pipes.pipe`, and 30 tabular records in 2 files under `dir/data`.
fn setup(dir: &Path) -> (PathBuf, String) {
    pipes_and_tabular(dir, PIPES, 30)
}

#[test]
fn emit_prints_one_module_per_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = setup(dir.path());
    let o = sluice_in(dir.path(), &["emit", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("pub mod train {") && out.contains("pub mod raw {"), "{out}");
    assert!(out.contains("pub fn run(args: &__sl::runner::RunArgs)"), "{out}");
}

#[test]
fn emit_cuda_prints_the_kernels_of_a_device_cuda_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = root().join("tests/pipes/gpu_augment.pipe");
    let o = sluice_in(dir.path(), &["emit", "--cuda", gpu.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for kernel in ["gpu_augment_tail_image", "gpu_augment_tail_label"] {
        assert!(out.contains(&format!("extern \"C\" __global__ void {kernel}(")), "{out}");
    }
    assert!(out.contains("// kernel gpu_augment_tail_image (column `image`)"), "{out}");
    // The Rust has the CPU twin and the tail's description.
    let o = sluice_in(dir.path(), &["emit", gpu.to_str().unwrap()]);
    let out = stdout(&o);
    for f in ["pub fn host_dataset(", "pub fn device_tail(", "pub fn dataset("] {
        assert!(out.contains(f), "{f}\n{out}");
    }
    // A file without `device cuda` has no kernels, and says so.
    let (file, _) = setup(dir.path());
    let o = sluice_in(dir.path(), &["emit", "--cuda", file.to_str().unwrap()]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), ""));
    assert!(stderr(&o).contains("no kernels"), "{}", stderr(&o));
}

#[test]
fn run_builds_once_then_reuses_the_runner() {
    let dir = tempfile::tempdir().unwrap();
    let (file, files) = setup(dir.path());
    let file = file.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", file, "train", "--set", &files, "--verbose"];
        args.extend_from_slice(extra);
        sluice_in(dir.path(), &args)
    };

    let o = run(&["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("sluice: compiling ") && err.contains("sluice: built the runner "), "{err}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("one JSON object");
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let expected = [
        "batches",
        "bottleneck",
        "engine",
        "epoch_seconds",
        "epochs",
        "memory_budget_bytes",
        "peak_map_workers",
        "peak_rss_bytes",
        "pipeline",
        "pruned_row_groups",
        "records",
        "records_per_sec",
        "seconds",
        "skipped",
        "stages",
        "threads",
    ];
    assert_eq!(keys, expected);
    assert_eq!(
        (v["pipeline"].as_str(), v["records"].as_u64(), v["batches"].as_u64()),
        (Some("train"), Some(30), Some(8))
    );
    let stage = &v["stages"][0];
    for key in ["name", "elements", "bytes", "parallelism", "busy_s", "wait_input_s", "wait_output_s"] {
        assert!(stage.get(key).is_some(), "{key}: {stage}");
    }

    let o = run(&["--epochs", "2", "--set", "batch=10"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.starts_with("sluice: running the cached runner ") && !err.contains("compiling"), "{err}");
    let out = stdout(&o);
    assert!(out.starts_with("train: 60 records in 6 batches over 2 epochs, "), "{out}");
    assert!(out.contains("bottleneck: "), "{out}");
}

#[test]
fn run_reports_bad_parameters_pipelines_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let (file, files) = setup(dir.path());
    let file = file.to_str().unwrap();

    let o = sluice_in(dir.path(), &["run", file, "--set", &files]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("name the pipeline to run: train, raw"), "{}", stderr(&o));
    let o = sluice_in(dir.path(), &["run", file, "test", "--set", &files]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no pipeline `test` (the file has train, raw)"), "{}", stderr(&o));
    assert!(!dir.path().join("run").exists(), "naming no pipeline or a wrong one builds nothing");

    let o = sluice_in(dir.path(), &["run", file, "raw", "--set", &files, "--set", "batch=3"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).lines().last(),
        Some("error: pipeline `raw`: unknown parameter `batch` (parameters: files)")
    );

    let o = sluice_in(dir.path(), &["run", file, "train", "--set", &files, "--set", "batch=many"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).ends_with(
            "error: pipeline `train`: parameter `batch`: expected an unsigned 32-bit integer, found `many`\n"
        ),
        "{}",
        stderr(&o)
    );

    let o = sluice_in(dir.path(), &["run", file, "raw", "--set", "files=/no/such/dir/*.tfrecord"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).ends_with("error: pipeline `raw`: no files match `/no/such/dir/*.tfrecord`\n"),
        "{}",
        stderr(&o)
    );

    let bad = dir.path().join("bad.tfrecord");
    std::fs::write(&bad, [7u8; 40]).unwrap();
    let o = sluice_in(dir.path(), &["run", file, "raw", "--set", &format!("files={}", bad.display())]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("bad.tfrecord: corrupt record 0 at byte offset 0"), "{err}");
}

#[test]
fn run_refuses_a_file_that_calls_rust_functions() {
    let cache = tempfile::tempdir().unwrap();
    let file = root().join("tests/pipes/image_train.pipe");
    let o = sluice_in(cache.path(), &["run", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("image_train.pipe:") && err.contains("calls `extern fn my_augment::jitter`"),
        "{err}"
    );
    assert!(!cache.path().join("run").exists(), "nothing is built");
}

const SIZED: &str = r#"
pipeline sized(files: glob, bs: u32 = 4, buf: u64 = 8, workers: u32 = 1, worker: u32 = 0) {
    tfrecords(files);
    shuffle(buf, seed: 1);
    shard(workers, worker, remainder: drop);
    batch(bs);
}
"#;

/// A parameter value a stage cannot take is a usage error (exit 2) naming the parameter
/// and the stage argument it sets, as the same literal is a compile error: a zero batch
/// size (was exit 1 from inside the stage), a zero shuffle buffer (was accepted), a zero
/// shard count or an index not below it (were exit 1).
#[test]
fn run_refuses_parameter_values_the_stages_cannot_take() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = setup(dir.path());
    let file = dir.path().join("sized.pipe");
    std::fs::write(&file, SIZED).unwrap();
    let file = file.to_str().unwrap();
    let o = sluice_in(dir.path(), &["run", file, "--set", &files, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (set, message) in [
        (&["bs=0"][..], "parameter `bs` is 0: the `size` of `batch` it sets must be at least 1"),
        (&["buf=0"][..], "parameter `buf` is 0: the `buffer` of `shuffle` it sets must be at least 1"),
        (
            &["workers=0"][..],
            "parameter `workers` is 0: the `num_shards` of `shard` it sets must be at least 1",
        ),
        (
            &["workers=2", "worker=2"][..],
            "parameter `worker` is 2, parameter `workers` is 2: the `index` of `shard` must be below its `num_shards`",
        ),
    ] {
        let mut args = vec!["run", file, "--set", &files];
        for s in set {
            args.extend(["--set", s]);
        }
        let o = sluice_in(dir.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{set:?}: {}", stderr(&o));
        assert!(
            stderr(&o).ends_with(&format!("error: pipeline `sized`: {message}\n")),
            "{set:?}: {}",
            stderr(&o)
        );
    }
}

const SKIPPING: &str = r#"
pipeline skipping(files: glob) {
    tfrecords(files, on_corrupt: skip);
}
"#;

/// Records a `skip` policy drops are reported, in the text and in `--json`, naming file,
/// record and offset (they used to be dropped without a word, exit 0).
#[test]
fn run_reports_what_the_readers_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = setup(dir.path());
    let file = dir.path().join("skipping.pipe");
    std::fs::write(&file, SKIPPING).unwrap();
    let file = file.to_str().unwrap();
    let clean = sluice_in(dir.path(), &["run", file, "--set", &files, "--json"]);
    assert!(clean.status.success(), "{}", stderr(&clean));
    let v: serde_json::Value = serde_json::from_str(stdout(&clean).trim()).unwrap();
    assert_eq!((v["records"].as_u64(), v["skipped"]["records"].as_u64()), (Some(30), Some(0)), "{v}");
    // Damage the payload of the first record of the first file.
    let mut shards: Vec<PathBuf> = std::fs::read_dir(dir.path().join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tfrecord"))
        .collect();
    shards.sort();
    let mut bytes = std::fs::read(&shards[0]).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&shards[0], bytes).unwrap();
    let o = sluice_in(dir.path(), &["run", file, "--set", &files, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["records"].as_u64(), Some(29), "{v}");
    let skipped = &v["skipped"];
    assert_eq!((skipped["records"].as_u64(), skipped["files"].as_u64()), (Some(1), Some(0)), "{v}");
    let event = &skipped["events"][0];
    assert!(
        event["path"].as_str().unwrap().ends_with(shards[0].file_name().unwrap().to_str().unwrap()),
        "{v}"
    );
    assert_eq!((event["record"].as_u64(), event["offset"].as_u64()), (Some(0), Some(0)), "{v}");
    let o = sluice_in(dir.path(), &["run", file, "--set", &files, "--no-progress"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("skipped 1 corrupt record ("), "{text}");
    assert!(text.contains(&format!("{}: record 0 at byte offset 0: ", shards[0].display())), "{text}");
    // Three epochs, each pass started ahead of its turn (after the first): each epoch
    // counts its own pass's skip.
    let o = sluice_in(dir.path(), &["run", file, "--set", &files, "--json", "--epochs", "3", "--overlap"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["records"].as_u64(), Some(3 * 29), "{v}");
    assert_eq!(v["skipped"]["records"].as_u64(), Some(3), "{v}");
    assert_eq!(v["skipped"]["per_epoch"], serde_json::json!([1, 1, 1]), "{v}");
    assert_eq!(v["epoch_seconds"].as_array().map(Vec::len), Some(3), "{v}");
}

const CACHED: &str = r#"
pipeline cached(files: glob, cache: path) {
    tfrecords(files);
    cache(cache);
}
"#;

/// A `cache(file)` made from other files (or other parameters, another plan) is rebuilt,
/// not replayed: a run over new data used to print the old data's count, exit 0.
#[test]
fn a_cache_file_of_other_data_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = setup(dir.path());
    let file = dir.path().join("cached.pipe");
    std::fs::write(&file, CACHED).unwrap();
    let file = file.to_str().unwrap();
    let cache = format!("cache={}", dir.path().join("c.bin").display());
    let records = |files: &str| {
        let o = sluice_in(dir.path(), &["run", file, "--set", files, "--set", &cache, "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        v["records"].as_u64().unwrap()
    };
    assert_eq!(records(&files), 30);
    assert_eq!(records(&files), 30, "replayed");
    let other = dir.path().join("other");
    generate("tabular", 10, 1, &other, &[]);
    assert_eq!(records(&format!("files={}/*.tfrecord", other.display())), 10, "rebuilt from the new files");
}

const FAULTY: &str = r#"
pipeline plain(files: glob) {
    schema { x: f32[2], label: i64 }
    tfrecords(files, cycle: 2);
    map { parse_example(); label = one_hot(label, 3); }
}
pipeline divide(files: glob) {
    schema { x: f32[2], label: i64 }
    tfrecords(files, cycle: 2, parallel: 2);
    map(parallel: 2) { parse_example(); label = 12 / label; }
}
pipeline batched(files: glob) {
    schema { x: f32[2], label: i64 }
    tfrecords(files, cycle: 2);
    batch(4);
    map { parse_example(); label = one_hot(label, 3); }
}
pipeline map_batch(files: glob) {
    schema { x: f32[2], label: i64 }
    tfrecords(files, cycle: 2, parallel: 2);
    map(parallel: 2) { parse_example(); label = one_hot(label, 3); }
    batch(4);
}
pipeline fused(files: glob) {
    schema { x: f32[2], label: i64 }
    tfrecords(files, cycle: 2, parallel: auto, deterministic: false);
    batch(4);
    map(parallel: auto) { parse_example(); }
}
pipeline global(files: glob) {
    schema { x: f32[2], label: i64 }
    tfrecords(files);
    shuffle(global, seed: 3);
    map { parse_example(); label = one_hot(label, 3); }
}
"#;

/// An error in a map names the file and the record it came from, on every path: a map
/// after the interleave, a parallel one, a map of a batch of records, a map fused with
/// the batch after it, the fused reader and the global shuffle (they used to say `record 3 of the batch`, or nothing).
#[test]
fn errors_in_maps_name_the_file_and_record() {
    use sluice::example::{Example, Feature};
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, records: &[Vec<u8>]| {
        let path = dir.path().join(name);
        let mut w = sluice::tfrecord::create(&path, sluice::tfrecord::Compression::None).unwrap();
        for r in records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
        let o = sluice_in(dir.path(), &["index", path.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        path
    };
    let example = |label: i64| {
        Example::from_features([
            ("x".to_string(), Feature::floats(vec![0.5, 1.5])),
            ("label".to_string(), Feature::int64s(vec![label])),
        ])
        .encode_record()
    };
    let good: Vec<Vec<u8>> = (0..8).map(|i| example(1 + i % 2)).collect();
    write("a.tfrecord", &good);
    // Record 5 of b: a label out of range and 0 (division); record 6 malformed.
    let mut b = good.clone();
    b[5] = example(0);
    b[6] = vec![0xff, 0xff, 0xff];
    let b_path = write("b.tfrecord", &b);
    let file = dir.path().join("faulty.pipe");
    std::fs::write(&file, FAULTY).unwrap();
    let files = format!("files={}/*.tfrecord", dir.path().display());
    let b_name = b_path.display().to_string();
    let cases = [
        ("plain", "stage `map`", 6, "malformed tf.train.Example"),
        ("divide", "stage `map`", 5, "integer division by zero"),
        ("batched", "stage `map`", 6, "malformed tf.train.Example"),
        ("map_batch", "stage `map_batch`", 6, "malformed tf.train.Example"),
        ("fused", "stage `read_map_batches`", 6, "malformed tf.train.Example"),
        ("global", "stage `map`", 6, "malformed tf.train.Example"),
    ];
    for (pipeline, stage, record, what) in cases {
        let o = sluice_in(
            dir.path(),
            &["run", file.to_str().unwrap(), pipeline, "--set", &files, "--no-progress"],
        );
        assert_eq!(o.status.code(), Some(1), "{pipeline}: {}", stderr(&o));
        let err = stderr(&o);
        let want = format!("{stage}: {b_name}: record {record}: {what}");
        assert!(err.contains(&want), "{pipeline}: wanted `{want}` in\n{err}");
    }
    // A label out of range, on its own.
    let mut c = good;
    c[2] = example(9);
    std::fs::remove_file(&b_path).unwrap();
    let c_path = write("c.tfrecord", &c);
    let o =
        sluice_in(dir.path(), &["run", file.to_str().unwrap(), "plain", "--set", &files, "--no-progress"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let want = format!("stage `map`: {}: record 2: one_hot: label 9 is outside 0..3", c_path.display());
    assert!(err.contains(&want), "wanted `{want}` in\n{err}");
}

const BUDGETED: &str = r#"
pipeline budgeted(files: glob) {
    budget 96 MiB;
    schema { image: bytes, label: i64 }
    tfrecords(files, cycle: 4, parallel: auto);
    map(parallel: auto) {
        parse_example();
        image = decode_raw(image, u8);
        image = reshape(image, [64, 64, 3]);
        image = cast(image, f32) / 255.0;
    }
    batch(64);
    prefetch(auto);
}
"#;

/// The declared `budget` is the run's memory budget (it used to stop at the compile-time
/// check: AUTOTUNE ran unbounded unless `--memory-budget-mb` was given), the flag
/// overrides it, and a run over data three times the budget stays within it (peak RSS of
/// the runner process, measured by itself, past its footprint on a tiny input). The
/// budget covers the bound, which counts the idle recycled batch buffers (89 MiB here).
#[test]
fn the_declared_budget_bounds_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    generate("image", 24_000, 8, &data, &[]);
    let file = dir.path().join("budgeted.pipe");
    std::fs::write(&file, BUDGETED).unwrap();
    let files = format!("files={}/*.tfrecord", data.display());
    let run = |extra: &[&str]| {
        let mut args = vec!["run", file.to_str().unwrap(), "--set", &files, "--json"];
        args.extend_from_slice(extra);
        let o = sluice_in(dir.path(), &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        v
    };
    let v = run(&[]);
    assert_eq!(v["records"].as_u64(), Some(24_000), "{v}");
    assert_eq!(v["memory_budget_bytes"].as_u64(), Some(96 << 20), "{v}");
    let peak = v["peak_rss_bytes"].as_u64().unwrap();
    // The budget bounds the buffers; the process itself (code, libraries, allocator)
    // comes on top: measured as the same runner's peak over 64 records.
    let tiny = dir.path().join("tiny");
    generate("image", 64, 1, &tiny, &[]);
    let tiny_files = format!("files={}/*.tfrecord", tiny.display());
    let o = sluice_in(dir.path(), &["run", file.to_str().unwrap(), "--set", &tiny_files, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let base: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let base = base["peak_rss_bytes"].as_u64().unwrap();
    assert!(
        peak > 0 && peak <= base + (96 << 20),
        "peak RSS {peak} bytes over 96 MiB past the footprint {base}: {v}"
    );
    let v = run(&["--memory-budget-mb", "16"]);
    assert_eq!(v["memory_budget_bytes"].as_u64(), Some(16 << 20), "the flag overrides: {v}");
}

/// A pipeline of `n` stages alternating `take` and `map` after a parse.
fn deep_pipeline(n: usize) -> String {
    let mut s = String::from(
        "pipeline deep(files: glob) {\n    schema { x: f32[4], label: i64 }\n    tfrecords(files);\n    map { parse_example(); }\n",
    );
    for i in 0..n / 2 {
        s.push_str(&format!("    take({});\n    map {{ x = x * 2.0; }}\n", 1_000_000_000 - i));
    }
    s.push_str("}\n");
    s
}

/// `sluice emit` grows linearly with the stage count: a pipeline at the stage limit emits
/// under a 256 MiB address-space cap, its code about twice that of half as many stages
/// (the plan text embedded as `PLAN` used to grow with the square of the depth, and 8 000
/// stages took 8.3 GB); 8 000 stages are refused (E0315) under the same cap.
#[test]
fn emit_of_a_deep_pipeline_is_linear_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let emit = |n: usize| {
        let file = dir.path().join(format!("deep{n}.pipe"));
        std::fs::write(&file, deep_pipeline(n)).unwrap();
        let script = "ulimit -v 262144 && exec \"$0\" emit \"$1\"";
        let o = Command::new("sh")
            .args(["-c", script, SLUICE, file.to_str().unwrap()])
            .output()
            .expect("sh runs");
        (o.status.code(), o.stdout.len(), stderr(&o))
    };
    let (code, half, err) = emit(500);
    assert_eq!(code, Some(0), "{err}");
    let (code, full, err) = emit(1000);
    assert_eq!(code, Some(0), "{err}");
    assert!(full < half * 5 / 2, "500 stages: {half} bytes, 1000 stages: {full} bytes");
    let (code, _, err) = emit(8000);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("error[E0315]: pipeline `deep` has 8002 stages, more than 1024"), "{err}");
}

const TENSORS: &str = r#"
pipeline tensors(files: glob) {
    schema { t: bytes }
    tfrecords(files);
    map { parse_example(); t = parse_tensor(t, f32, [2, 3]); }
}
"#;

/// `parse_tensor` of a tensor of another dtype or shape, or of bytes that are no
/// TensorProto, is exit 1 naming the file and the record.
#[test]
fn parse_tensor_errors_name_the_record() {
    use sluice::example::tensor::{TensorProto, TensorShapeDim, TensorShapeProto};
    use sluice::example::{Example, Feature};
    let dir = tempfile::tempdir().unwrap();
    let tensor = |dtype: i32, dims: &[i64], content: Vec<u8>| {
        let dim = dims.iter().map(|&size| TensorShapeDim { size, name: String::new() }).collect();
        let p = TensorProto {
            dtype,
            tensor_shape: Some(TensorShapeProto { dim, unknown_rank: false }),
            tensor_content: content,
            ..Default::default()
        };
        p.to_bytes()
    };
    let good = tensor(1, &[2, 3], vec![0; 24]);
    let cases = [
        (
            "dtype",
            tensor(9, &[2, 3], vec![0; 48]),
            "parse_tensor: the tensor is DT_INT64, not the DT_FLOAT declared",
        ),
        (
            "shape",
            tensor(1, &[3, 2], vec![0; 24]),
            "parse_tensor: the tensor's shape is [3, 2], not the [2, 3] declared",
        ),
        ("bytes", vec![0xff, 0xff, 0xff], "parse_tensor: malformed TensorProto"),
    ];
    let file = dir.path().join("tensors.pipe");
    std::fs::write(&file, TENSORS).unwrap();
    for (what, bad, message) in cases {
        let path = dir.path().join(format!("{what}.tfrecord"));
        let mut w = sluice::tfrecord::create(&path, sluice::tfrecord::Compression::None).unwrap();
        for t in [&good, &good, &bad] {
            let e = Example::from_features([("t".to_string(), Feature::bytes([t.clone()]))]);
            w.write_record(&e.encode_record()).unwrap();
        }
        w.finish().unwrap();
        let files = format!("files={}", path.display());
        let o = sluice_in(dir.path(), &["run", file.to_str().unwrap(), "--set", &files, "--no-progress"]);
        assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
        let want = format!("stage `map`: {}: record 2: {message}", path.display());
        assert!(stderr(&o).contains(&want), "{what}: wanted `{want}` in\n{}", stderr(&o));
    }
}

const SKIPPING_MAP: &str = r#"
pipeline ratios(files: glob) {
    schema {
        x: f32[2],
        label: i64,
    }
    tfrecords(files);
    map(on_error: skip) {
        parse_example();
        label = 12 / label;
    }
}
"#;

/// What `map(on_error: skip)` drops is never silent: `--json` counts it per stage with
/// the first messages (naming file and record), and the text says which stage dropped
/// how many.
#[test]
fn run_reports_what_a_skipping_map_dropped() {
    use sluice::example::{Example, Feature};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.tfrecord");
    let mut w = sluice::tfrecord::create(&path, sluice::tfrecord::Compression::None).unwrap();
    for label in [1i64, 0, 3, 4, 0, 6] {
        let e = Example::from_features([
            ("x".to_string(), Feature::floats(vec![0.5, 1.5])),
            ("label".to_string(), Feature::int64s(vec![label])),
        ]);
        w.write_record(&e.encode_record()).unwrap();
    }
    w.finish().unwrap();
    let file = dir.path().join("ratios.pipe");
    std::fs::write(&file, SKIPPING_MAP).unwrap();
    let (file, files) = (file.to_str().unwrap(), format!("files={}", path.display()));
    let o = sluice_in(dir.path(), &["run", file, "--set", &files, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["records"].as_u64(), Some(4), "{v}");
    let stages = v["stages"].as_array().unwrap();
    let skipping: Vec<&serde_json::Value> =
        stages.iter().filter(|s| s["skipped_errors"].as_u64().unwrap_or(0) > 0).collect();
    assert_eq!(skipping.len(), 1, "{v}");
    assert_eq!(skipping[0]["skipped_errors"].as_u64(), Some(2), "{v}");
    let first = skipping[0]["first_skipped_errors"][0].as_str().unwrap();
    assert!(first.contains("r.tfrecord: record 1"), "{first}");
    let o = sluice_in(dir.path(), &["run", file, "--set", &files, "--no-progress"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("skipped 2 elements whose map failed"), "{text}");
}

/// The example of `examples/text/` as the README runs it, from the repository's root:
/// `sluice run` packs every token of the corpus (the tokenizer's ids of each line; no
/// BOS or EOS, as `tokenize` adds none by default) into rows of 256, 8 a batch, and reports the packing efficiency; `sluice
/// show` gives rows whose first document is the first line's ids, with `segment_ids`
/// and `positions` that restart with each document.
#[test]
fn the_text_example_runs_and_packs_every_token() {
    use sluice::runtime::text::tokenize::Tokenizer;
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        // The engine `auto` picks, not the compiled path the other tests name.
        let o = sluice_command(dir.path())
            .env_remove("SLUICE_ENGINE")
            .args(args)
            .current_dir(root())
            .output()
            .expect("sluice runs");
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let t = Tokenizer::from_file(root().join("examples/text/tokenizer.json")).unwrap();
    let corpus = std::fs::read_to_string(root().join("examples/text/corpus/jargon.txt")).unwrap();
    let ids: Vec<Vec<i32>> = corpus.lines().map(|l| t.encode(l, false, false).unwrap()).collect();
    let tokens: u64 = ids.iter().map(|s| s.len() as u64).sum();

    let v: serde_json::Value =
        serde_json::from_str(run(&["run", "examples/text/text.pipe", "--json"]).trim()).unwrap();
    let pack = v["stages"].as_array().unwrap().iter().find(|s| s["name"] == "pack").expect("a pack stage");
    let rows = v["records"].as_u64().unwrap();
    assert_eq!(pack["tokens"].as_u64(), Some(tokens), "{pack}");
    assert_eq!(pack["token_slots"].as_u64(), Some(rows * 256), "{pack}");
    assert_eq!(v["batches"].as_u64(), Some(rows.div_ceil(8)), "{v}");
    let efficiency = pack["packing_efficiency"].as_f64().unwrap();
    assert!((efficiency - tokens as f64 / (rows * 256) as f64).abs() < 1e-9, "{pack}");

    let first: serde_json::Value =
        serde_json::from_str(run(&["show", "examples/text/text.pipe", "-n", "1"]).trim()).unwrap();
    let column = |name: &str| -> Vec<i64> {
        assert_eq!(first[name]["shape"], serde_json::json!([8, 256]), "{name}: {}", first[name]["shape"]);
        first[name]["values"].as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
    };
    let (row_ids, segments, positions) = (column("ids"), column("segment_ids"), column("positions"));
    let n = ids[0].len();
    assert_eq!(row_ids[..n].iter().map(|&x| x as i32).collect::<Vec<_>>(), ids[0]);
    assert!(segments[..n].iter().all(|&s| s == 1) && segments[n] != 1, "{:?}", &segments[..n + 1]);
    for k in 0..segments.len() {
        let want = match segments[k] {
            0 => 0,
            s if k % 256 > 0 && segments[k - 1] == s => positions[k - 1] + 1,
            _ => 0,
        };
        assert_eq!(positions[k], want, "position {k}");
    }
}

const WHOLE_FILES: &str = r#"
pipeline images(files: glob) {
    files(files);
    read_file(labels: dir);
    map { image = decode_jpeg(contents, channels: 3); }
}
pipeline shuffled(files: glob) {
    files(files);
    read_file();
    shuffle(4, seed: 1);
    map(parallel: 2) { image = decode_jpeg(contents, channels: 3); }
}
pipeline raw(files: glob) {
    files(files);
    read_file(on_error: skip);
}
pipeline records(files: glob) {
    tfrecords(files);
}
"#;

/// What a glob matches is read or reported, never dropped, and an error in a map over
/// files read whole names the file: a map over `read_file`'s elements names it, as one
/// over a TFRecord record names the record (it said only `decode_jpeg: cannot decode
/// JPEG: …`); `read_file(on_error: skip)` counts and names a link loop (it was left out
/// of the listing: exit 0, nothing skipped); `tfrecords` over a glob with a dangling link
/// fails naming it (it was left out: exit 0, a shard's records missing unsaid).
#[cfg(unix)]
#[test]
fn glob_matches_are_read_or_reported_and_map_errors_name_whole_files() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("whole.pipe");
    std::fs::write(&file, WHOLE_FILES).unwrap();
    let file = file.to_str().unwrap();
    let run = |pipeline: &str, pattern: &Path, extra: &[&str]| {
        let files = format!("files={}", pattern.display());
        let mut args = vec!["run", file, pipeline, "--set", &files, "--no-progress"];
        args.extend(extra);
        sluice_in(dir.path(), &args)
    };

    let cat = dir.path().join("img/cat");
    std::fs::create_dir_all(&cat).unwrap();
    let bad = cat.join("bad.jpg");
    std::fs::write(&bad, b"not a jpeg").unwrap();
    for pipeline in ["images", "shuffled"] {
        let o = run(pipeline, &dir.path().join("img/*/*.jpg"), &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{pipeline}: {err}");
        let want = format!("stage `map`: {}: decode_jpeg: ", bad.display());
        assert!(err.contains(&want), "{pipeline}: wanted `{want}` in\n{err}");
    }

    let a = dir.path().join("raw/a");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::write(a.join("good.bin"), b"good").unwrap();
    let looping = a.join("loop.bin");
    symlink(&looping, &looping).unwrap();
    let o = run("raw", &a.join("*"), &["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["records"].as_u64(), Some(1), "{v}");
    let skipped = &v["skipped"];
    assert_eq!((skipped["records"].as_u64(), skipped["files"].as_u64()), (Some(1), Some(1)), "{v}");
    assert_eq!(skipped["events"][0]["path"].as_str(), looping.to_str(), "{v}");

    let tf = dir.path().join("tf");
    std::fs::create_dir_all(&tf).unwrap();
    let mut w =
        sluice::tfrecord::create(tf.join("part-0.tfrecord"), sluice::tfrecord::Compression::None).unwrap();
    w.write_record(b"one").unwrap();
    w.finish().unwrap();
    let dangling = tf.join("part-1.tfrecord");
    symlink(tf.join("moved-away.tfrecord"), &dangling).unwrap();
    let o = run("records", &tf.join("part-*.tfrecord"), &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&dangling.display().to_string()), "{err}");
}
