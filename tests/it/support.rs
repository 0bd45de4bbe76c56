//! What the `sluice` tool's end-to-end tests share: the `sluice` command with its runner
//! cache in a directory of the test's own, the runners built with the dev profile in one
//! target directory under `target/tmp` (so the runtime compiles once for every test), and
//! the output as text.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root (the `sluice` package's directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `sluice` with its runner cache in `cache`, not yet given arguments or run.
pub fn sluice_command(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.env("SLUICE_CACHE_DIR", cache)
        .env("SLUICE_TARGET_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("sluice-run-target"))
        .env("SLUICE_RUN_PROFILE", "dev")
        // The tests of the compiled path say so; the engine's (`engine_diff`, `cli_engine`)
        // name their engine with `--engine`, which wins over this.
        .env("SLUICE_ENGINE", "compiled");
    c
}

/// Runs `sluice args…` with its runner cache in `cache`.
pub fn sluice_in(cache: &Path, args: &[&str]) -> Output {
    sluice_command(cache).args(args).output().expect("sluice runs")
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
    let records = records.to_string();
    let o = sluice_in(
        dir,
        &["gen", "tabular", "--records", &records, "--shards", "2", "--out", data.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    (file, format!("files={}/*.tfrecord", data.display()))
}
