//! `--engine auto|compiled|interpreted` and `sluice build`: `auto` (the default) takes the
//! compiled runner when one is cached for the plan and the engine at once otherwise,
//! compiling nothing behind the user's back; `sluice build` builds the runner on purpose.
//! (`engine_diff` compares what the two backends print.)

use std::path::Path;
use std::process::{Command, Output};

use super::support::{sluice_command, stderr, stdout};

const FILE: &str = r#"
pipeline tripled(n: i64 = 5) {
    range(n);
    map { y = value * 3; }
}
"#;

/// A file with Rust code of the user's: no runner links it, the engine runs the rest.
const MIXED: &str = r#"
pipeline tripled(n: i64 = 5) {
    range(n);
    map { y = value * 3; }
}
pipeline mine() {
    extern fn my::f(x: i64) -> i64;
    range(3);
    map { value = my::f(value); }
}
"#;

/// `sluice ARGS` with the runner cache in `dir` and no `SLUICE_ENGINE` (the default,
/// `auto`), unless `env` sets one.
fn sluice(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c: Command = sluice_command(dir);
    c.env_remove("SLUICE_ENGINE").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("sluice runs")
}

/// The `engine` of `sluice run --json`'s report.
fn engine_of(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    let v: serde_json::Value = serde_json::from_str(&stdout(o)).expect("one JSON object");
    v["engine"].as_str().expect("the report names its engine").to_string()
}

#[test]
fn auto_runs_the_engine_at_once_then_the_runner_built_on_purpose() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.pipe");
    std::fs::write(&file, FILE).unwrap();
    let file = file.to_str().unwrap();

    // Nothing cached: the engine, with no cargo at all (a cargo that cannot run).
    let no_cargo = [("CARGO", "/nonexistent/cargo")];
    let o = sluice(dir.path(), &["run", file, "tripled", "--json"], &no_cargo);
    assert_eq!(engine_of(&o), "interpreted");
    assert!(!stderr(&o).contains("compiling"), "{}", stderr(&o));
    let shown = sluice(dir.path(), &["show", file, "tripled", "-n", "2"], &no_cargo);
    assert_eq!(
        (shown.status.code(), stdout(&shown).lines().last()),
        (
            Some(0),
            Some(
                r#"{"value":{"dtype":"i64","shape":[],"values":[1]},"y":{"dtype":"i64","shape":[],"values":[3]}}"#
            )
        )
    );

    // `compiled` without cargo says what it needs and what runs without it.
    let o = sluice(dir.path(), &["run", file, "tripled", "--engine", "compiled"], &no_cargo);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("needs the Rust toolchain") && stderr(&o).contains("--engine interpreted"),
        "{}",
        stderr(&o)
    );

    // `sluice build` builds the runner on purpose (cargo's messages shown) and prints it.
    let o = sluice(dir.path(), &["build", file, "tripled"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("sluice: compiling"), "{}", stderr(&o));
    let bin = stdout(&o).trim().to_string();
    assert!(Path::new(&bin).is_file(), "{bin}");

    // Now `auto` takes the runner; `--engine interpreted` and `SLUICE_ENGINE` still choose.
    let o = sluice(dir.path(), &["run", file, "tripled", "--json"], &[]);
    assert_eq!(engine_of(&o), "compiled");
    let o = sluice(dir.path(), &["run", file, "tripled", "--json"], &[("SLUICE_ENGINE", "interpreted")]);
    assert_eq!(engine_of(&o), "interpreted");
    let o = sluice(
        dir.path(),
        &["run", file, "tripled", "--json", "--engine", "compiled"],
        &[("SLUICE_ENGINE", "interpreted")],
    );
    assert_eq!(engine_of(&o), "compiled");
}

#[test]
fn what_neither_backend_runs_is_refused_by_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.pipe");
    std::fs::write(&file, MIXED).unwrap();
    let file = file.to_str().unwrap();
    // The engine runs a pipeline of a file that no runner can link.
    let o = sluice(dir.path(), &["run", file, "tripled", "--json"], &[]);
    assert_eq!(engine_of(&o), "interpreted");
    for engine in ["auto", "interpreted", "compiled"] {
        let o = sluice(dir.path(), &["show", file, "mine", "--engine", engine], &[]);
        assert_eq!(o.status.code(), Some(1), "{engine}: {}", stderr(&o));
        assert!(stderr(&o).contains("calls `extern fn my::f`"), "{engine}: {}", stderr(&o));
        assert!(stderr(&o).contains("build.rs"), "{engine}: {}", stderr(&o));
    }
    let o = sluice(dir.path(), &["run", file, "nope", "--engine", "auto"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no pipeline `nope`"), "{}", stderr(&o));
}

/// Parameter values the stages cannot take: both backends refuse them before anything
/// runs, exit 2, with the generated `Params::check`'s message.
#[test]
fn bad_parameter_values_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.pipe");
    std::fs::write(
        &file,
        "pipeline r(b: u64 = 2, s: i64 = 1, n: u64 = 2, i: u64 = 0, buf: u64 = 10) {\n\
             budget 64 MiB;\n\
             range(start: 0, end: 20, step: s);\n\
             shuffle(buf, seed: 1);\n\
             shard(n, i);\n\
             batch(b);\n\
         }\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["b=0"], "parameter `b` is 0: the `size` of `batch` it sets must be at least 1"),
        (&["s=0"], "parameter `s` is 0: the `step` of `range` it sets must not be 0"),
        (&["n=2", "i=2"], "parameter `i` is 2, parameter `n` is 2: the `index` of `shard` must be below"),
        (&["n=0"], "parameter `n` is 0: the `num_shards` of `shard` it sets must be at least 1"),
        (&["buf=100000000000"], "parameter `buf` = 100000000000: the pipeline may then hold 745.1 GiB"),
        (&["ok=1"], "unknown parameter `ok` (parameters: b, s, n, i, buf)"),
    ];
    for (set, message) in cases {
        let run = |engine: &str| {
            let mut args = vec!["show", file, "-n", "2", "--engine", engine];
            for s in set {
                args.extend(["--set", s]);
            }
            sluice(dir.path(), &args, &[])
        };
        let (compiled, interpreted) = (run("compiled"), run("interpreted"));
        for o in [&compiled, &interpreted] {
            assert_eq!(o.status.code(), Some(2), "{set:?}: {}", stderr(o));
            assert!(stderr(o).contains(message), "{set:?}: {}", stderr(o));
        }
        let last = |o: &Output| stderr(o).lines().last().unwrap_or_default().to_string();
        assert_eq!(last(&compiled), last(&interpreted), "{set:?}");
    }
}

/// `sluice run --output`: both backends export the same files, byte for byte (TFRecord
/// shards and their indexes, Parquet files, WebDataset tars), and report the engine that
/// ran.
#[test]
fn both_backends_export_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tab");
    let o = sluice(
        dir.path(),
        &["gen", "tabular", "--records", "50", "--shards", "2", "--out", data.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let file = dir.path().join("x.pipe");
    std::fs::write(
        &file,
        "pipeline scaled(files: glob) {\n\
             schema { x: f32[16], label: i64, id: i64 }\n\
             tfrecords(files);\n\
             map { parse_example(); x = x * 2.0 + 1.0; big = label > 3; m = reshape(x, [4, 4]); }\n\
             filter(id % 7 != 0);\n\
             select(id, x, big, m);\n\
         }\n",
    )
    .unwrap();
    let files = format!("files={}/*.tfrecord", data.display());
    let formats: [&[&str]; 3] = [
        &["--format", "tfrecord"],
        &["--format", "parquet", "--compression", "zstd", "--row-group", "7"],
        &["--format", "webdataset", "--compression", "gzip"],
    ];
    for format in formats {
        let mut exported = Vec::new();
        for engine in ["compiled", "interpreted"] {
            let out = dir.path().join(format!("{engine}-{}", format[1]));
            let args = [
                &[
                    "run",
                    file.to_str().unwrap(),
                    "--set",
                    &files,
                    "--output",
                    out.to_str().unwrap(),
                    "--shards",
                    "2",
                    "--json",
                    "--no-progress",
                    "--engine",
                    engine,
                ][..],
                format,
            ]
            .concat();
            let o = sluice(dir.path(), &args, &[]);
            assert_eq!(engine_of(&o), engine, "{format:?}");
            let mut names: Vec<_> =
                std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
            names.sort();
            let bytes: Vec<(String, Vec<u8>)> = names
                .iter()
                .map(|n| (n.to_string_lossy().into_owned(), std::fs::read(out.join(n)).unwrap()))
                .collect();
            assert!(bytes.len() >= 2, "{engine} {format:?}: {names:?}");
            exported.push(bytes);
        }
        assert!(
            exported[0] == exported[1],
            "{format:?}: the engine's export differs from the compiled runner's"
        );
    }
}

/// `cache(file)` of rows (scalars and a tensor) and of serialized records.
const CACHED: &str = r#"
pipeline rows(c: path = "elements.cache") {
    range(7);
    map { h = one_hot(value % 3, 3); w = cast(value, f32) * 0.5; b = value > 2; }
    cache(c);
    batch(3);
}
pipeline records(files: glob, c: path = "records.cache") {
    schema { x: f32[16], label: i64 }
    tfrecords(files);
    cache(c);
    map { parse_example(); }
}
"#;

/// Each backend writes the cache file the other would, byte for byte, and replays the
/// other's (the file is kept, not rebuilt) with the same elements.
#[test]
fn a_cache_file_is_the_same_from_either_backend() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cached.pipe");
    std::fs::write(&file, CACHED).unwrap();
    let data = dir.path().join("data");
    let o = sluice(
        dir.path(),
        &["gen", "tabular", "--records", "20", "--shards", "2", "--out", data.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let files = format!("files={}/data/*.tfrecord", dir.path().display());
    for (pipeline, cache) in [("rows", "elements.cache"), ("records", "records.cache")] {
        let show = |cwd: &Path, engine: &str| {
            let mut c = sluice_command(dir.path());
            c.env_remove("SLUICE_ENGINE").current_dir(cwd);
            c.args(["show", file.to_str().unwrap(), pipeline, "-n", "all", "--engine", engine]);
            if pipeline == "records" {
                c.args(["--set", &files]);
            }
            let o = c.output().expect("sluice runs");
            assert!(o.status.success(), "{pipeline} ({engine}): {}", stderr(&o));
            stdout(&o)
        };
        let (a, b) =
            (dir.path().join(format!("{pipeline}-compiled")), dir.path().join(format!("{pipeline}-engine")));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let compiled = show(&a, "compiled");
        let interpreted = show(&b, "interpreted");
        assert_eq!(compiled, interpreted, "{pipeline}: the first pass");
        let (ca, cb) = (std::fs::read(a.join(cache)).unwrap(), std::fs::read(b.join(cache)).unwrap());
        assert!(ca.len() > 20, "{pipeline}: a cache of the elements");
        assert_eq!(ca, cb, "{pipeline}: the cache files");
        // Each replays the other's file (its inode kept: not rebuilt), with the same elements.
        use std::os::unix::fs::MetadataExt;
        for (from, to, engine) in [(&a, &b, "interpreted"), (&b, &a, "compiled")] {
            let (src, dst) = (from.join(cache), to.join(cache));
            std::fs::remove_file(&dst).unwrap();
            std::fs::copy(&src, &dst).unwrap();
            let ino = std::fs::metadata(&dst).unwrap().ino();
            assert_eq!(show(to, engine), compiled, "{pipeline}: {engine} replaying");
            assert_eq!(std::fs::metadata(&dst).unwrap().ino(), ino, "{pipeline}: {engine} replayed the file");
        }
    }
}

/// Records globally shuffled (ranged reads of each object through its index) and mapped.
const OBJECTS: &str = r#"
pipeline objects(files: glob, seed: u64 = 5) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    shuffle(global, seed: seed);
    map { parse_example(); x = x * 2.0; }
}
"#;

/// The files of `dir`, sorted by name: (name, bytes).
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

/// The engine reads `s3://` objects and writes `--output s3://…` as it does local files
/// (against s3s-fs, as `cli_s3` tests the compiled runner): a global shuffle of indexed
/// objects shows the elements it shows for their local copies, and the export uploads the
/// very files it writes locally. Skips without s3s-fs unless `SLUICE_REQUIRE_S3=1`.
#[test]
fn the_engine_reads_and_writes_a_bucket_as_local_files() {
    let Some(server) = crate::s3::S3Server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let env: Vec<(&str, String)> = server.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let local = dir.path().join("gen");
    let o = sluice(
        dir.path(),
        &["gen", "tabular", "--records", "700", "--shards", "3", "--out", local.to_str().unwrap()],
        &env,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    server.bucket("data");
    server.put_dir("data", "gen", &local);
    let targets = [format!("{}/*.tfrecord", local.display()), "s3://data/gen/*.tfrecord".to_string()];
    for target in &targets {
        let o = sluice(dir.path(), &["index", target], &env);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let file = dir.path().join("objects.pipe");
    std::fs::write(&file, OBJECTS).unwrap();
    let file = file.to_str().unwrap();
    let shown: Vec<String> = targets
        .iter()
        .map(|t| {
            let set = format!("files={t}");
            let o = sluice(
                dir.path(),
                &["show", file, "-n", "all", "--set", &set, "--engine", "interpreted"],
                &env,
            );
            assert!(o.status.success(), "{t}: {}", stderr(&o));
            stdout(&o)
        })
        .collect();
    assert_eq!(shown[0].lines().count(), 700, "{}", shown[0]);
    assert!(shown[0] == shown[1], "the engine shows other elements from s3:// than from the local files");

    let local_out = dir.path().join("export");
    for (t, out) in targets.iter().zip([local_out.to_str().unwrap(), "s3://data/export"]) {
        let set = format!("files={t}");
        let args = ["run", file, "--set", &set, "--output", out, "--shards", "2", "--json", "--no-progress"];
        let o = sluice(dir.path(), &[&args[..], &["--engine", "interpreted"]].concat(), &env);
        assert_eq!(engine_of(&o), "interpreted");
    }
    let want = files_of(&local_out);
    assert!(want.len() >= 2, "{:?}", want.iter().map(|f| &f.0).collect::<Vec<_>>());
    assert!(
        files_of(&server.root.path().join("data/export")) == want,
        "the upload differs from the local export"
    );
}

/// What neither backend runs yet (half floats: the code generator's E0600) is said as the
/// code generator says it, by either engine, never with the advice to run it compiled.
#[test]
fn what_codegen_does_not_handle_either_is_its_diagnostic_in_the_engine_too() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("half.pipe");
    std::fs::write(
        &file,
        "pipeline half() {\n    range(3);\n    map { h = cast(cast(value, f32), f16); }\n}\n",
    )
    .unwrap();
    for engine in ["interpreted", "compiled", "auto"] {
        let o = sluice(dir.path(), &["show", file.to_str().unwrap(), "--engine", engine], &[]);
        assert_eq!(o.status.code(), Some(1), "{engine}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("E0600") && !err.contains("--engine compiled"), "{engine}: {err}");
    }
}

/// Three `parallel: auto` maps (kept apart by prefetches, so that the first starts working
/// while the others are being built) under the pipeline's declared `threads 3;`, then under
/// `--threads 4` (which overrides it), in either backend: the report gives the CPU budget
/// and the most map workers it gave out at once, never more than it.
#[test]
fn the_cpu_budget_bounds_the_map_workers_of_every_stage_together() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("three.pipe");
    std::fs::write(
        &file,
        "pipeline three(n: i64 = 20000) {\n    threads 3;\n    range(n);\n    map(parallel: auto) { a = value * 3; }\n\
         prefetch(2);\n    map(parallel: auto) { b = a % 7; }\n    prefetch(2);\n    map(parallel: auto) { c = b + a; }\n}\n",
    )
    .unwrap();
    let o = sluice(dir.path(), &["explain", file.to_str().unwrap()], &[]);
    assert!(stdout(&o).contains("threads: 3 (declared: the most threads its maps"), "{}", stdout(&o));
    for engine in ["compiled", "interpreted"] {
        for (flag, budget) in [(None, 3), (Some("4"), 4)] {
            let mut args = vec!["run", file.to_str().unwrap(), "--json", "--no-progress", "--engine", engine];
            args.extend(flag.iter().flat_map(|n| ["--threads", n]));
            let o = sluice(dir.path(), &args, &[]);
            assert_eq!(engine_of(&o), engine);
            let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
            assert_eq!((v["records"].as_u64(), v["threads"].as_u64()), (Some(20000), Some(budget)), "{v}");
            let peak = v["peak_map_workers"].as_u64().unwrap();
            assert!(
                (3..=budget).contains(&peak),
                "{engine}: {peak} map workers at once under a budget of {budget}"
            );
        }
    }
}
