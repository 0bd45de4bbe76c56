//! End-to-end tests of `sluice cat`, `sluice gen` and `sluice index`: run the built
//! binary, check its output, exit status and messages (for `index`: sidecars written for
//! files, directories and quoted globs, `--check` passing and failing, corrupt and
//! compressed files, missing files, and the global shuffle reading what was indexed).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use sluice::runtime::stage::{Dataset, global_shuffle};
use sluice::runtime::tfrecord::index_path;

use crate::support::{SLUICE, generate, sluice, sluice_command, stderr, stdout};

fn cat(files: &[PathBuf], extra: &[&str]) -> Output {
    let mut args: Vec<&str> = vec!["cat"];
    args.extend_from_slice(extra);
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    sluice(&args)
}

fn lines(o: &Output) -> Vec<Value> {
    stdout(o).lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect()
}

fn int_feature(v: &Value, name: &str) -> i64 {
    v["features"]["feature"][name]["int64List"]["value"][0].as_str().unwrap().parse().unwrap()
}

#[test]
fn gen_writes_named_shards_and_cat_prints_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 1000, 4, dir.path(), &["--seed", "7"]);
    let names: Vec<String> =
        files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(
        names,
        [
            "tabular-00000-of-00004.tfrecord",
            "tabular-00001-of-00004.tfrecord",
            "tabular-00002-of-00004.tfrecord",
            "tabular-00003-of-00004.tfrecord"
        ]
    );
    let o = cat(&files, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let recs = lines(&o);
    assert_eq!(recs.len(), 1000);
    let ids: Vec<i64> = recs.iter().map(|r| int_feature(r, "id")).collect();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>(), "shards hold contiguous ids in order");
    for r in &recs {
        let x: Vec<f64> = r["features"]["feature"]["x"]["floatList"]["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(x.len(), 16);
        let label = int_feature(r, "label") as usize;
        assert!(x[..10].iter().all(|v| *v <= x[label]), "label is argmax(x[0..10])");
    }
}

#[test]
fn gen_is_deterministic_whatever_the_threads() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let c = tempfile::tempdir().unwrap();
    let fa = generate("image", 60, 3, a.path(), &["--seed", "3", "--threads", "1"]);
    let fb = generate("image", 60, 3, b.path(), &["--seed", "3", "--threads", "2"]);
    let fc = generate("image", 60, 3, c.path(), &["--seed", "4"]);
    for ((x, y), z) in fa.iter().zip(&fb).zip(&fc) {
        let bx = std::fs::read(x).unwrap();
        assert_eq!(bx, std::fs::read(y).unwrap(), "same seed, other thread count");
        assert_ne!(bx, std::fs::read(z).unwrap(), "another seed");
    }
}

#[test]
fn compressed_datasets_print_like_uncompressed_ones() {
    let plain = tempfile::tempdir().unwrap();
    let want = stdout(&cat(&generate("jpeg", 20, 2, plain.path(), &[]), &[]));
    assert_eq!(want.lines().count(), 20);
    for (c, ext) in [("gzip", ".tfrecord.gz"), ("zlib", ".tfrecord.zlib")] {
        let dir = tempfile::tempdir().unwrap();
        let files = generate("jpeg", 20, 2, dir.path(), &["--compression", c]);
        assert!(files.iter().all(|f| f.to_str().unwrap().ends_with(ext)), "{files:?}");
        let o = cat(&files, &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o), want, "{c}");
        // Explicit compression works on a name that does not say it.
        let renamed = dir.path().join("data.bin");
        std::fs::copy(&files[0], &renamed).unwrap();
        let o = cat(std::slice::from_ref(&renamed), &["--compression", c]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o).lines().count(), 10);
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tf").join(name)
}

#[test]
fn cat_prints_what_tensorflow_prints() {
    for (file, expect, flags) in [
        ("examples.tfrecord.gz", "examples.tfrecord.jsonl", &[][..]),
        ("sequence.tfrecord", "sequence.tfrecord.jsonl", &["--sequence"][..]),
        ("zero_length.tfrecord", "zero_length.tfrecord.jsonl", &[][..]),
    ] {
        let o = cat(&[fixture(file)], flags);
        assert!(o.status.success(), "{}", stderr(&o));
        let got = lines(&o);
        let want: Vec<Value> = std::fs::read_to_string(fixture(expect))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got, want, "{file}");
    }
    let o = cat(&[fixture("empty.tfrecord")], &[]);
    assert!(o.status.success() && o.stdout.is_empty());
}

/// Ten tabular records, with byte `at` of record `record`'s payload flipped.
fn corrupt_copy(dir: &Path, record: usize, at: usize) -> (PathBuf, u64) {
    let files = generate("tabular", 10, 1, &dir.join("src"), &[]);
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let mut offset = 0;
    for _ in 0..record {
        let len = u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap()) as usize;
        offset += 16 + len;
    }
    bytes[offset + 12 + at] ^= 0x55;
    let path = dir.join("bad.tfrecord");
    std::fs::write(&path, bytes).unwrap();
    (path, offset as u64)
}

#[test]
fn corrupt_record_fails_after_printing_the_records_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (bad, offset) = corrupt_copy(dir.path(), 5, 20);
    let o = cat(std::slice::from_ref(&bad), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(lines(&o).len(), 5, "records before the corrupt one are printed");
    let err = stderr(&o);
    assert!(err.contains(bad.to_str().unwrap()), "{err}");
    assert!(err.contains("record 5") && err.contains(&format!("offset {offset}")), "{err}");
    assert!(err.contains("checksum"), "{err}");
}

#[test]
fn skip_resynchronises_and_reports_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let (bad, offset) = corrupt_copy(dir.path(), 3, 0);
    let o = cat(std::slice::from_ref(&bad), &["--on-corrupt", "skip"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ids: Vec<i64> = lines(&o).iter().map(|r| int_feature(r, "id")).collect();
    assert_eq!(ids, [0, 1, 2, 4, 5, 6, 7, 8, 9]);
    let err = stderr(&o);
    assert!(err.contains("skipped 1 corrupt record"), "{err}");
    assert!(err.contains(&format!("record 3 at byte offset {offset}")), "{err}");
}

#[test]
fn skip_file_goes_on_with_the_next_file() {
    let dir = tempfile::tempdir().unwrap();
    let (bad, _) = corrupt_copy(dir.path(), 2, 7);
    let good = generate("tabular", 4, 1, &dir.path().join("good"), &[]);
    let o = cat(&[bad, good[0].clone()], &["--on-corrupt", "skip_file"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ids: Vec<i64> = lines(&o).iter().map(|r| int_feature(r, "id")).collect();
    assert_eq!(ids, [0, 1, 0, 1, 2, 3]);
    assert!(stderr(&o).contains("rest of file skipped"), "{}", stderr(&o));
}

#[test]
fn a_payload_that_is_not_an_example_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.tfrecord");
    let mut maker = sluice::synth::RecordMaker::new(sluice::synth::Kind::Tabular, 0);
    let first = maker.record(0);
    let mut w = sluice::tfrecord::create(&path, sluice::tfrecord::Compression::None).unwrap();
    w.write_record(&first).unwrap();
    w.write_record(&[0x0a, 0x10, 0x01]).unwrap();
    w.write_record(&maker.record(2)).unwrap();
    w.finish().unwrap();
    let offset = 16 + first.len();
    let o = cat(std::slice::from_ref(&path), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(lines(&o).len(), 1);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("record 1 at byte offset {offset}"))
            && err.contains("not a valid tf.train.Example"),
        "{err}"
    );
    let o = cat(&[path], &["--on-corrupt", "skip"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(lines(&o).len(), 2);
    assert!(stderr(&o).contains("skipped 1 corrupt record"), "{}", stderr(&o));
}

#[test]
fn bad_invocations_exit_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 3, 1, dir.path(), &[]);
    let missing = dir.path().join("nope.tfrecord");
    // A missing file fails before anything is printed, even after a good one.
    let o = cat(&[files[0].clone(), missing.clone()], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(stderr(&o).contains("nope.tfrecord") && stderr(&o).contains("No such file"), "{}", stderr(&o));
    for args in [
        &["cat"][..],
        &["cat", "--bogus", "x"][..],
        &["cat", "--on-corrupt", "ignore", "x"][..],
        &["cat", "--compression", "lz4", "x"][..],
        &["gen", "video", "--records", "1", "--out", "x"][..],
        &["gen", "tabular", "--records", "1", "--shards", "0", "--out", "x"][..],
        &["gen", "tabular", "--records", "many", "--out", "x"][..],
        &["frobnicate"][..],
    ] {
        let o = sluice(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}");
    }
    let o = cat(&[dir.path().to_path_buf()], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is a directory"));
}

#[test]
fn a_closed_pipe_ends_cat_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 50_000, 1, dir.path(), &[]);
    let mut child = sluice_command(dir.path())
        .arg("cat")
        .arg(&files[0])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
}

#[test]
fn every_id_appears_once_across_shards() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("image", 101, 7, dir.path(), &[]);
    let ids: BTreeSet<i64> = lines(&cat(&files, &[])).iter().map(|r| int_feature(r, "id")).collect();
    assert_eq!(ids, (0..101).collect());
}

#[test]
fn bench_pipelines_see_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let tab = dir.path().join("tabular");
    let img = dir.path().join("image");
    let jpg = dir.path().join("jpeg");
    generate("tabular", 3000, 4, &tab, &[]);
    generate("image", 600, 3, &img, &[]);
    generate("jpeg", 300, 2, &jpg, &[]);
    for (name, data, records) in [
        ("read", &tab, 3000),
        ("parse_tabular", &tab, 3000),
        ("shuffle_tabular", &tab, 3000),
        ("image_raw", &img, 600),
        ("jpeg", &jpg, 300),
        ("memory", &img, 600),
    ] {
        let o = sluice(&["bench", "pipeline", name, "--json", "--warmup", "1", data.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(v["records"], records, "{name}");
        assert!(v["peak_rss_mb"].as_f64().unwrap() > 0.0);
        assert!(!v["stages"].as_array().unwrap().is_empty(), "{name}: stage statistics");
    }
    let o = sluice(&["bench", "pipeline", "nope", tab.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    // A corrupt record fails the pipeline with the file, record and offset.
    let (bad, offset) = corrupt_copy(dir.path(), 4, 3);
    let only = dir.path().join("bad-only");
    std::fs::create_dir(&only).unwrap();
    std::fs::rename(&bad, only.join("bad.tfrecord")).unwrap();
    let o = sluice(&["bench", "pipeline", "parse_tabular", only.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("bad.tfrecord") && err.contains("record 4") && err.contains(&format!("offset {offset}")),
        "{err}"
    );
}

#[test]
fn check_reports_diagnostics_with_exit_status() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for good in std::fs::read_dir(root.join("tests/pipes")).unwrap() {
        let path = good.unwrap().path();
        let o = sluice(&["check", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", path.display(), stderr(&o));
        // Warnings are shown and do not fail the check: image_train shards its files.
        if path.ends_with("image_train.pipe") {
            assert!(stderr(&o).contains("warning[W0210]: file-level sharding"), "{}", stderr(&o));
        }
    }
    let bad = root.join("tests/errors/missing_semicolon.pipe");
    let o = sluice(&["check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("error[E0001]: expected `;`") && err.contains("missing_semicolon.pipe:2:21"),
        "{err}"
    );
    let o = sluice(&["check", "/no/such/file.pipe"]);
    assert_eq!(o.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("bin.pipe");
    std::fs::write(&binary, [b'p', 0xff, 0xfe, b'\n']).unwrap();
    let o = sluice(&["check", binary.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not valid UTF-8 (first bad byte at offset 1)"), "{}", stderr(&o));
}

#[test]
fn explain_code_prints_a_page_lists_the_codes_and_refuses_an_unknown_one() {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/guide/src/diagnostics/E0306.md"),
    )
    .unwrap();
    let o = sluice(&["explain-code", "E0306"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), page, "the page, as it is");
    let o = sluice(&["explain-code"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let list = stdout(&o);
    assert!(list.starts_with("E0001  syntax error\n") && list.contains("\nW0210  "), "{list}");
    let o = sluice(&["explain-code", "E0316"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains("no diagnostic code `E0316`; close codes: E0313, E0314, E0315"),
        "{}",
        stderr(&o)
    );
    // A report of diagnostics ends with the hint, as rustc's `--explain` one.
    let bad = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/errors/missing_semicolon.pipe");
    let o = sluice(&["check", bad.to_str().unwrap()]);
    assert!(
        stderr(&o).ends_with("for more on this diagnostic, run `sluice explain-code E0001`\n"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn explain_prints_the_logical_plan() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let o = sluice(&["explain", root.join("tests/pipes/tabular.pipe").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("== parse_tabular (logical) ==\nPrefetch: buffer=auto"), "{out}");
    assert!(out.contains("\n        Files: pattern=$files"), "{out}");
    // The optimized plan follows each logical one: `eval`'s arithmetic runs once per
    // batch, after the batch of its parse. It holds no fused node: the physical plan fuses.
    let logical = out.find("== eval (logical) ==\n").expect("eval's logical plan");
    let optimized = out.find("== eval (optimized) ==\nMap: fns=[expr]").expect("eval's optimized plan");
    assert!(logical < optimized, "{out}");
    assert!(out[optimized..].contains("\n  Batch: size=512"), "{out}");
    assert!(out[optimized..].contains("\n    Map: fns=[parse_example]"), "{out}");
    // The physical plan is what runs: the map over the batches runs in the map + batch's
    // rows, one stage.
    let physical = out.find("== eval (physical) ==\nPrefetchExec:").expect("eval's physical plan");
    assert!(
        out[physical..].starts_with(
            "== eval (physical) ==\nPrefetchExec: threads=1, holds=2, memory=72.0 KiB, resume=fast-forward\n  MapBatchExec: "
        ),
        "{out}"
    );
    assert!(!out.contains("-- after"), "{out}");
    // `--verbose` adds the plan after each rule that changed it, after the optimized plan:
    // the optimizer's, then the physical plan's fusion rules.
    let o = sluice(&["explain", "--verbose", root.join("tests/pipes/tabular.pipe").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let verbose = stdout(&o);
    assert!(out.lines().all(|l| verbose.lines().any(|v| v == l)), "{verbose}");
    let rules: Vec<&str> = verbose.lines().filter(|l| l.starts_with("-- after ")).collect();
    assert_eq!(
        rules,
        [
            "-- after vectorize_past_batch:",
            "-- after fuse_map_batch (physical):",
            "-- after insert_prefetch (physical):"
        ],
        "{verbose}"
    );
    assert!(verbose.contains("-- after fuse_map_batch (physical):\nMap: fns=[expr]"), "{verbose}");
    assert!(verbose.contains("\n  MapBatch: fns=[parse_example]"), "{verbose}");
    let o = sluice(&["explain", root.join("tests/errors/second_source.pipe").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error[E0302]"), "{}", stderr(&o));
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
fn index_expands_a_quoted_glob_and_skips_index_files() {
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
fn index_of_a_missing_file_is_a_usage_error() {
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
fn index_fails_on_a_corrupt_record_naming_file_record_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (bad, offset) = corrupt_copy(dir.path(), 6, 3);
    let o = sluice(&["index", s(&bad)]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(s(&bad)) && err.contains(&format!("corrupt record 6 at byte offset {offset}")),
        "{err}"
    );
    assert!(!index_path(&bad).exists());
}

#[test]
fn index_refuses_a_compressed_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 10, 1, dir.path(), &["--compression", "gzip"]);
    let o = sluice(&["index", s(&files[0])]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("compressed TFRecord file cannot be indexed"), "{}", stderr(&o));
}

#[test]
fn index_check_fails_on_a_stale_or_missing_index() {
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

/// A pipeline, parameter or field named by a word no Rust identifier can be (`self`,
/// `Self`, `crate`, `super`) is a diagnostic in every command, never a panic of the code
/// generator.
#[test]
fn reserved_words_of_rust_are_diagnostics_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    for (what, source) in [
        ("pipeline", "pipeline self(files: glob = \"d/*\") { tfrecords(files); }"),
        ("parameter", "pipeline p(crate: glob = \"d/*\") { tfrecords(crate); }"),
        (
            "field",
            "pipeline p(files: glob = \"d/*\") { schema { Self: i64 } tfrecords(files); map { parse_example(); } }",
        ),
        (
            "field",
            "pipeline p(files: glob = \"d/*\") { schema { x: i64 } tfrecords(files); map { parse_example(); super = x; } }",
        ),
    ] {
        let file = dir.path().join("p.pipe");
        std::fs::write(&file, source).unwrap();
        for command in ["check", "emit", "explain", "run"] {
            let o = sluice(&[command, file.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(1), "{command} {source}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("error[E0119]") && stderr(&o).contains(&format!("cannot name a {what}")),
                "{command} {source}: {}",
                stderr(&o)
            );
        }
    }
}

/// An index that is a FIFO fails `index --check` at once, naming it (it used to wait for
/// a writer forever).
#[test]
fn an_index_that_is_a_fifo_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 10, 1, dir.path(), &[]);
    let idx = index_path(&files[0]);
    assert!(Command::new("mkfifo").arg(&idx).status().expect("mkfifo").success());
    let mut child = sluice_command(dir.path())
        .args(["index", "--check", s(&files[0])])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("`sluice index --check` waits on a FIFO index");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(".idx") && stderr(&o).contains("not a regular file"), "{}", stderr(&o));
}

/// A file with no pipeline cannot be run: a usage error naming the file, before any
/// runner is built.
#[test]
fn running_a_file_without_a_pipeline_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.pipe");
    std::fs::write(&file, "// nothing here yet\n").unwrap();
    assert!(sluice(&["check", s(&file)]).status.success());
    let o = sluice(&["run", s(&file)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{}: the file has no pipeline to run", file.display())),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("compiling"), "{}", stderr(&o));
}

/// Output that cannot be written (a full disk: `/dev/full`) is exit 1 with a message,
/// never a panic and never a success: on standard output for the commands that print
/// there, and on standard error for those whose report goes there.
#[test]
fn a_full_disk_is_a_failure_not_a_panic_or_a_success() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 50, 1, dir.path(), &[]);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let pipe = root.join("tests/pipes/tabular.pipe");
    let bad = dir.path().join("bad.pipe");
    std::fs::write(&bad, "pipeline p(files: glob) {\n    tfrecords(files, cycle: 0);\n}\n").unwrap();
    let full = || Stdio::from(std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full"));
    let run = |args: &[&str], stdout_full: bool| {
        let mut c = sluice_command(dir.path());
        c.args(args);
        if stdout_full {
            c.stdout(full()).stderr(Stdio::piped());
        } else {
            c.stdout(Stdio::piped()).stderr(full());
        }
        c.output().unwrap()
    };
    let gen_dir = dir.path().join("gen");
    for (args, stdout_full) in [
        (vec!["cat", s(&files[0])], true),
        (vec!["emit", s(&pipe)], true),
        (vec!["explain", s(&pipe)], true),
        (vec!["index", s(&files[0])], true),
        (vec!["check", s(&bad)], false),
        (vec!["gen", "tabular", "--records", "10", "--shards", "1", "--out", s(&gen_dir)], false),
    ] {
        let o = run(&args, stdout_full);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        if stdout_full {
            assert!(stderr(&o).contains("cannot write to standard output"), "{args:?}: {}", stderr(&o));
        }
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

/// Uncompressed TFRecord from a pipe (`cat f | sluice cat /dev/stdin`) reads every record:
/// a pipe's size is unknown, not zero (it used to be "corrupt record 0", or with `skip`
/// every record dropped and exit 0).
#[test]
fn records_from_a_pipe_read_like_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate("tabular", 200, 1, dir.path(), &[]);
    let want = sluice(&["cat", s(&files[0])]);
    assert!(want.status.success(), "{}", stderr(&want));
    for extra in [&[][..], &["--on-corrupt", "skip"][..]] {
        let mut child = sluice_command(dir.path())
            .args(["cat", "/dev/stdin"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let bytes = std::fs::read(&files[0]).unwrap();
        let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &bytes));
        let o = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), stdout(&want), "{extra:?}: {}", stderr(&o));
        assert_eq!(stdout(&o).lines().count(), 200);
        assert!(!stderr(&o).contains("skipped"), "{extra:?}: {}", stderr(&o));
    }
}

/// `sluice gen` writes each shard under a temporary name and renames it when complete: a
/// run that cannot finish (here the file-size limit of a full disk) leaves no shard that
/// looks whole.
#[test]
fn gen_cut_short_leaves_no_shard_that_looks_complete() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gen");
    let script = format!(
        "ulimit -f 256; exec '{}' gen tabular --records 200000 --shards 2 --out '{}'",
        SLUICE,
        out.display()
    );
    let o = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(!o.status.success(), "the limit stops it: {}", stderr(&o));
    let names: Vec<String> = std::fs::read_dir(&out)
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(!names.iter().any(|n| n.ends_with(".tfrecord")), "{names:?}");
    // Without the limit, the same command writes both shards under their own names.
    let o = sluice(&["gen", "tabular", "--records", "2000", "--shards", "2", "--out", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.iter().filter(|n| n.ends_with(".tfrecord")).count(), 2, "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with(".partial")), "a complete run leaves no partial: {names:?}");
}
