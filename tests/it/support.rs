//! What the `sluice` tool's end-to-end tests share: the `sluice` command with its runner
//! cache in a directory of the test's own, the runners built with the dev profile in one
//! target directory under `target/tmp` (so the runtime compiles once for every test), the
//! output as text, the test data `sluice gen` writes, and the guard of the tests that
//! need `mpirun`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `sluice` binary under test (for the scripts that run it under a shell's limits).
pub const SLUICE: &str = env!("CARGO_BIN_EXE_sluice");

/// The repository's root (the `sluice` package's directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `sluice` builds and keeps its runners: the cache in `cache`, the runners built
/// with the dev profile in one target directory under `target/tmp` (for a command that
/// starts `sluice` itself, as `mpirun` does), every one with the `parquet` feature, so
/// that they share one build of the runtime whether or not they read Parquet.
pub fn runner_env(cache: &Path) -> [(&'static str, OsString); 4] {
    [
        ("SLUICE_CACHE_DIR", cache.into()),
        ("SLUICE_TARGET_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("sluice-run-target").into()),
        ("SLUICE_RUN_PROFILE", "dev".into()),
        ("SLUICE_RUN_FEATURES", "parquet".into()),
    ]
}

/// `sluice` with its runner cache in `cache`, not yet given arguments or run.
pub fn sluice_command(cache: &Path) -> Command {
    let mut c = Command::new(SLUICE);
    c.envs(runner_env(cache))
        // The tests of the compiled path say so; the engine's (`engine_diff`, `cli_engine`)
        // name their engine with `--engine`, which wins over this.
        .env("SLUICE_ENGINE", "compiled");
    c
}

/// Runs `sluice args…` with its runner cache in `cache`.
pub fn sluice_in(cache: &Path, args: &[&str]) -> Output {
    sluice_command(cache).args(args).output().expect("sluice runs")
}

/// Runs `sluice args…`, a command that builds no runner (`cat`, `gen`, `index`, `check`,
/// `explain`…): its runner cache is a directory of its own, removed after.
pub fn sluice(args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    sluice_in(cache.path(), args)
}

/// `sluice gen KIND --records N --shards K --out OUT EXTRA…`, checked to succeed: the
/// files in `out`, sorted.
pub fn generate(kind: &str, records: u64, shards: u32, out: &Path, extra: &[&str]) -> Vec<PathBuf> {
    let (n, k) = (records.to_string(), shards.to_string());
    let mut args = vec!["gen", kind, "--records", &n, "--shards", &k, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = sluice(&args);
    assert!(o.status.success(), "gen failed: {}", stderr(&o));
    let mut files: Vec<PathBuf> = std::fs::read_dir(out).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

/// Whether `mpirun` runs here. Without it a test skips, saying so, unless
/// `SLUICE_REQUIRE_MPI=1` makes that a failure (scripts/setup-mpi installs Open MPI).
pub fn have_mpirun() -> bool {
    if Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    assert!(std::env::var("SLUICE_REQUIRE_MPI").as_deref() != Ok("1"), "SLUICE_REQUIRE_MPI=1 but no mpirun");
    eprintln!("skipped: no `mpirun` on PATH (scripts/setup-mpi installs Open MPI)");
    false
}

/// Standard output, which must be UTF-8.
pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Standard error, which must be UTF-8.
pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Bytes as text, invalid UTF-8 replaced.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `source` as `dir/pipes.pipe`, and `records` tabular records in 2 files under
/// `dir/data` (`sluice gen tabular`): the file and the `files=` parameter for them.
pub fn pipes_and_tabular(dir: &Path, source: &str, records: u32) -> (PathBuf, String) {
    let file = dir.join("pipes.pipe");
    std::fs::write(&file, source).unwrap();
    let data = dir.join("data");
    generate("tabular", records.into(), 2, &data, &[]);
    (file, format!("files={}/*.tfrecord", data.display()))
}

/// `sluice show PIPE PIPELINE -n all --engine ENGINE --set files=FILES`, run with `dir` as
/// its cache.
pub fn show_files(dir: &Path, pipe: &Path, pipeline: &str, files: &Path, engine: &str) -> Output {
    sluice_command(dir)
        .args(["show", pipe.to_str().unwrap(), pipeline, "-n", "all", "--engine", engine])
        .arg("--set")
        .arg(format!("files={}", files.display()))
        .output()
        .expect("sluice runs")
}

/// [`show_files`] by the compiled runner and by the engine, checked to agree: the same
/// exit status (0 or 1, never a panic), the same elements, and on failure the same last
/// line of the error. The compiled runner's output.
pub fn show_both(dir: &Path, pipe: &Path, pipeline: &str, files: &Path) -> Output {
    let compiled = show_files(dir, pipe, pipeline, files, "compiled");
    let interpreted = show_files(dir, pipe, pipeline, files, "interpreted");
    let key = format!("{pipeline} over {}", files.display());
    for o in [&compiled, &interpreted] {
        assert!(!stderr(o).contains("panicked"), "{key}: {}", stderr(o));
        assert!(matches!(o.status.code(), Some(0 | 1)), "{key}: {:?} {}", o.status, stderr(o));
    }
    assert_eq!(
        compiled.status.code(),
        interpreted.status.code(),
        "{key}: {}\n{}",
        stderr(&compiled),
        stderr(&interpreted)
    );
    let last = |o: &Output| stderr(o).lines().last().unwrap_or_default().to_string();
    if !compiled.status.success() {
        assert_eq!(last(&compiled), last(&interpreted), "{key}");
    }
    assert!(compiled.stdout == interpreted.stdout, "{key}: the elements differ");
    compiled
}
