//! End-to-end tests of `sluice index`: indexes written beside the files (directories and
//! quoted globs resolved), `--check` passing and failing, corrupt and compressed files
//! (exit 1, naming the file, record and offset), missing files (exit 2), and the global
//! shuffle reading what the command indexed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sluice::runtime::stage::{Dataset, global_shuffle};
use sluice::runtime::tfrecord::index_path;

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("sluice runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn generate(kind: &str, records: u64, shards: u32, dir: &Path, extra: &[&str]) -> Vec<PathBuf> {
    let (n, k) = (records.to_string(), shards.to_string());
    let mut args = vec!["gen", kind, "--records", &n, "--shards", &k, "--out", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = sluice(&args);
    assert!(o.status.success(), "gen failed: {}", stderr(&o));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn index_writes_a_sidecar_per_file_and_check_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 1000, 4, dir.path(), &[]);
    let o = sluice(&["index", s(dir.path())]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 4, "{out}");
    for f in &files {
        let idx = index_path(f);
        assert_eq!(std::fs::metadata(&idx).unwrap().len(), 44 + 8 * 250);
        assert!(
            out.contains(&format!("{}: 250 records, index {} (2044 bytes)", f.display(), idx.display())),
            "{out}"
        );
    }
    let o = sluice(&["index", "--check", s(dir.path())]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).matches(" ok\n").count(), 4, "{}", stdout(&o));

    // What was indexed can be shuffled globally: every id once.
    let ds = global_shuffle(&files, 3).unwrap();
    let mut n = 0;
    for r in ds.stream().unwrap() {
        r.unwrap();
        n += 1;
    }
    assert_eq!(n, 1000);
}

#[test]
fn a_quoted_glob_is_expanded_and_skips_index_files() {
    let dir = tempfile::tempdir().unwrap();
    generate("tabular", 30, 3, dir.path(), &[]);
    let pattern = format!("{}/*", dir.path().display());
    for _ in 0..2 {
        // The second time, the pattern also matches the indexes, which are left out.
        let o = sluice(&["index", &pattern]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o).lines().count(), 3, "{}", stdout(&o));
    }
    let o = sluice(&["index", &format!("{}/*.nothing", dir.path().display())]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_missing_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 3, 1, dir.path(), &[]);
    let missing = dir.path().join("nope.tfrecord");
    let o = sluice(&["index", s(&files[0]), s(&missing)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope.tfrecord"), "{}", stderr(&o));
    assert!(!index_path(&files[0]).exists(), "nothing is indexed before the arguments are checked");
    assert_eq!(sluice(&["index"]).status.code(), Some(2));
}

#[test]
fn a_corrupt_record_fails_naming_file_record_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 10, 1, dir.path(), &[]);
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let mut offset = 0;
    for _ in 0..6 {
        let len = u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap()) as usize;
        offset += 16 + len;
    }
    bytes[offset + 12 + 3] ^= 0x10;
    std::fs::write(&files[0], &bytes).unwrap();
    let o = sluice(&["index", s(&files[0])]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(s(&files[0])) && err.contains(&format!("corrupt record 6 at byte offset {offset}")),
        "{err}"
    );
    assert!(!index_path(&files[0]).exists());
}

#[test]
fn a_compressed_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 10, 1, dir.path(), &["--compression", "gzip"]);
    let o = sluice(&["index", s(&files[0])]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("compressed TFRecord file cannot be indexed"), "{}", stderr(&o));
}

#[test]
fn check_fails_on_a_stale_or_missing_index() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 20, 2, dir.path(), &[]);
    assert!(sluice(&["index", s(dir.path())]).status.success());
    // Append one record of file 1's own bytes: the length no longer matches.
    let bytes = std::fs::read(&files[1]).unwrap();
    let first_len = 16 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut more = bytes.clone();
    more.extend_from_slice(&bytes[..first_len]);
    std::fs::write(&files[1], &more).unwrap();
    let o = sluice(&["index", "--check", s(&files[0]), s(&files[1])]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains(s(&index_path(&files[1]))) && err.contains("stale index"), "{err}");
    assert!(err.contains("rerun `sluice index"), "{err}");
    // Reindexing fixes it.
    assert!(sluice(&["index", s(&files[1])]).status.success());
    assert!(sluice(&["index", "--check", s(&files[1])]).status.success());
    std::fs::remove_file(index_path(&files[0])).unwrap();
    let o = sluice(&["index", "--check", s(&files[0])]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no index"), "{}", stderr(&o));
}
