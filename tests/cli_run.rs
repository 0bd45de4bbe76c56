//! End-to-end tests of `sluice emit` and `sluice run`: run the built binary on `.pipe`
//! files, check output, exit status and messages. Runners build with the dev profile in a
//! cache of each test's own, sharing one target directory under `target/tmp` so the
//! runtime compiles once.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `sluice args…` with its runner cache in `cache`.
fn sluice_in(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("SLUICE_CACHE_DIR", cache)
        .env("SLUICE_TARGET_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("sluice-run-target"))
        .env("SLUICE_RUN_PROFILE", "dev")
        .output()
        .expect("sluice runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

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
        assert!(err.ends_with("missing_semicolon.pipe: 1 error\n"), "{err}");
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
