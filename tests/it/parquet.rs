//! `parquet(files)` through both backends: pyarrow's files (tests/fixtures/parquet) read
//! the same by each, and hostile files (a cut footer, junk, damaged pages, a schema the
//! file does not match, a null without a default) fail the same way, exit 1 with a
//! message naming the file (and the column, row group and row where one is at fault),
//! never a panic.

use std::path::PathBuf;

use super::support::{root, show_both, sluice_command, stderr, stdout};

const PIPES: &str = r#"
pipeline rows(files: glob) {
    schema { id: i64, x: f32[4], score: f64 = -1.0, tokens: i32[], name: str = "?" }
    parquet(files);
    map { y = x * 2.0; }
}
pipeline strict(files: glob) {
    schema { id: i64, score: f64 }
    parquet(files);
}
pipeline narrow(files: glob) {
    schema { id: i32 }
    parquet(files);
}
pipeline missing(files: glob) {
    schema { id: i64, weight: f32 }
    parquet(files);
}
pipeline shape(files: glob) {
    schema { id: i64, x: f32[3] }
    parquet(files);
}
pipeline columns(files: glob) {
    schema { id: i64, x: f32[4], flag: bool, small: u8 }
    parquet(files);
    batch(5);
}
pipeline column_rows(files: glob) {
    schema { id: i64, x: f32[4], flag: bool, small: u8 }
    parquet(files);
    map { id = id * 1; }
    batch(5);
}
pipeline strict_columns(files: glob) {
    schema { id: i64, score: f64 }
    parquet(files);
    batch(4);
}
pipeline skipping(files: glob) {
    schema { id: i64, score: f64 }
    parquet(files, on_error: skip);
    batch(2);
}
"#;

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/parquet").join(name)
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("parquet.pipe");
    std::fs::write(&pipe, PIPES).unwrap();
    (dir, pipe)
}

#[test]
fn pyarrows_files_read_the_same_through_both_backends() {
    let (dir, pipe) = setup();
    let o = show_both(dir.path(), &pipe, "rows", &fixture("table-*.parquet"));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 17, "{out}");
    let first = out.lines().next().unwrap();
    assert!(first.contains(r#""score":{"dtype":"f64","shape":[],"values":[1e-9]}"#), "{first}");
    assert!(out.contains(r#""name":"cé""#) && out.contains(r#""name":"?""#), "{out}");
    // Skipping: rows whose `score` is null (ids 1, 5, 9, 13) are dropped and counted.
    let o = show_both(dir.path(), &pipe, "skipping", &fixture("table-*.parquet"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 7, "13 rows in batches of 2");
}

/// The columns of every batch of `pipeline`'s output, flattened: `field -> values`.
fn batch_values(out: &str) -> std::collections::BTreeMap<String, Vec<serde_json::Value>> {
    let mut all = std::collections::BTreeMap::<String, Vec<serde_json::Value>>::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for (k, c) in v.as_object().unwrap() {
            all.entry(k.clone()).or_default().extend(c["values"].as_array().unwrap().iter().cloned());
        }
    }
    all
}

#[test]
fn numbers_go_into_batch_columns_whole_and_equal_the_rows_path() {
    let (dir, pipe) = setup();
    let o = sluice_command(dir.path()).args(["explain", pipe.to_str().unwrap()]).output().unwrap();
    let plan = stdout(&o);
    let of = |name: &str| {
        plan.split("== ").find(|s| s.starts_with(&format!("{name} (physical)"))).unwrap().to_string()
    };
    assert!(
        of("columns").contains("ReadColumnsExec") && of("columns").contains("arrays into batch columns"),
        "{plan}"
    );
    assert!(!of("column_rows").contains("ReadColumnsExec"), "{plan}");
    // Through both backends; the same values as the rows path, in the same batches.
    let files = fixture("table-*.parquet");
    let columns = show_both(dir.path(), &pipe, "columns", &files);
    let rows = show_both(dir.path(), &pipe, "column_rows", &files);
    assert!(columns.status.success() && rows.status.success(), "{}{}", stderr(&columns), stderr(&rows));
    assert_eq!(stdout(&columns).lines().count(), 4, "17 rows in batches of 5");
    assert_eq!(batch_values(&stdout(&columns)), batch_values(&stdout(&rows)));
    assert_eq!(batch_values(&stdout(&columns))["id"].len(), 17);
    // A null where the schema gives no default: file, row group, row and column named.
    let file = fixture("table-0.parquet");
    let o = show_both(dir.path(), &pipe, "strict_columns", &file);
    assert_eq!(o.status.code(), Some(1));
    let want = format!(
        "{}: row group 0, row 1: column `score`: null, and the schema gives no default",
        file.display()
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
}

#[test]
fn a_schema_the_file_does_not_match_fails_before_any_row_naming_file_and_column() {
    let (dir, pipe) = setup();
    let file = fixture("table-0.parquet");
    let f = file.display().to_string();
    for (pipeline, message) in [
        ("narrow", format!("{f}: column `id`: the file holds int64, which is not i32 (declare it `i64`)")),
        (
            "missing",
            format!(
                "{f}: no column `weight` (the file has: id, x, score, tokens, name, blob, flag, small, unused)"
            ),
        ),
        (
            "shape",
            format!(
                "{f}: column `x`: the file holds fixed_size_list<float>[4], which is not f32[3]: its lists hold 4 values"
            ),
        ),
    ] {
        let o = show_both(dir.path(), &pipe, pipeline, &file);
        assert_eq!(o.status.code(), Some(1), "{pipeline}");
        assert!(stdout(&o).is_empty(), "{pipeline}: no element before the error");
        assert!(stderr(&o).contains(&message), "{pipeline}: {}", stderr(&o));
    }
}

#[test]
fn a_null_without_a_default_names_column_row_group_and_row() {
    let (dir, pipe) = setup();
    let file = fixture("table-0.parquet");
    let o = show_both(dir.path(), &pipe, "strict", &file);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).lines().count(), 1, "row 0 comes before the null of row 1");
    let want = format!(
        "{}: record 1: column `score` (row group 0): null, and the schema gives no default",
        file.display()
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
}

#[test]
fn damaged_files_fail_the_same_through_both_backends_naming_the_file() {
    let (dir, pipe) = setup();
    let good = std::fs::read(fixture("table-1.parquet")).unwrap();
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("cut_footer".into(), good[..good.len() - 5].to_vec()),
        ("cut_half".into(), good[..good.len() / 2].to_vec()),
        ("junk".into(), b"PAR1 this is not a parquet file PAR1".to_vec()),
        ("empty".into(), Vec::new()),
    ];
    // Bytes flipped across the column chunks (a damaged page header, values, lengths).
    for at in (8..good.len() / 2).step_by(97) {
        let mut bad = good.clone();
        bad[at] ^= 0xa5;
        cases.push((format!("flip_{at}"), bad));
    }
    let mut failed = 0;
    for (name, bytes) in &cases {
        let file = dir.path().join(format!("{name}.parquet"));
        std::fs::write(&file, bytes).unwrap();
        let o = show_both(dir.path(), &pipe, "rows", &file);
        if !o.status.success() {
            failed += 1;
            assert!(
                stderr(&o).contains(file.to_str().unwrap()),
                "{name}: the error names no file: {}",
                stderr(&o)
            );
        } else {
            assert!(name.starts_with("flip_"), "{name} read without an error");
        }
    }
    assert!(failed > 4, "only {failed} of {} damaged files failed", cases.len());
}

#[test]
fn row_groups_a_filter_empties_are_skipped_and_counted_by_both_backends() {
    let pipe = root().join("tests/pipes/parquet.pipe");
    let dir = tempfile::tempdir().unwrap();
    for engine in ["compiled", "interpreted"] {
        let o = sluice_command(dir.path())
            .current_dir(root())
            .args(["run", pipe.to_str().unwrap(), "pruned", "--json", "--no-progress", "--engine", engine])
            .output()
            .expect("sluice runs");
        assert!(o.status.success(), "{engine}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(stdout(&o).lines().last().unwrap()).unwrap();
        // table-0's row groups hold ids 0-3, 4-7 and 8-9: none reaches 12.
        assert_eq!(v["pruned_row_groups"], 3, "{engine}");
        assert_eq!(v["records"], 3, "{engine}: ids 13, 14 and 16");
    }
    let explain = super::support::sluice(&["explain", pipe.to_str().unwrap()]);
    assert!(stdout(&explain).contains("reader=parquet(columns: [id, name], skip_row_groups: [id >= 12])"));
}

/// `shard(workers, worker)` right after `parquet` shards row groups (table-0's three of 4,
/// 4 and 2 rows, then table-1's one of 7: four in the global list), in both backends and on
/// both paths (rows, with a filter whose statistics skip row group 0; columns): each
/// worker's rows are its whole row groups, the workers' rows partition the unsharded
/// pass's, and an index past the count is a usage error naming the `shard`, no panic.
#[test]
fn a_shard_on_parquet_deals_whole_row_groups_and_partitions_the_rows_in_both_backends() {
    let pipe = root().join("tests/pipes/parquet.pipe");
    let dir = tempfile::tempdir().unwrap();
    let show = |pipeline: &str, engine: &str, sets: &[String]| {
        let mut c = sluice_command(dir.path());
        c.current_dir(root()).args([
            "show",
            pipe.to_str().unwrap(),
            pipeline,
            "-n",
            "all",
            "--engine",
            engine,
        ]);
        for s in sets {
            c.arg("--set").arg(s);
        }
        c.output().expect("sluice runs")
    };
    let ids = |out: &str| -> Vec<i64> {
        out.lines()
            .flat_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let id = &v["id"];
                let values =
                    id.get("values").and_then(|v| v.as_array()).cloned().unwrap_or_else(|| vec![id.clone()]);
                values.into_iter().map(|x| x.as_i64().unwrap()).collect::<Vec<_>>()
            })
            .collect()
    };
    let groups: [&[i64]; 4] = [&[0, 1, 2, 3], &[4, 5, 6, 7], &[8, 9], &[10, 11, 12, 13, 14, 15, 16]];
    for (pipeline, from) in [("sharded", 2), ("sharded_columns", 0)] {
        let mut union = Vec::new();
        for worker in 0..3usize {
            let sets = [format!("worker={worker}")];
            let (compiled, engine) =
                (show(pipeline, "compiled", &sets), show(pipeline, "interpreted", &sets));
            assert!(compiled.status.success(), "{pipeline} {worker}: {}", stderr(&compiled));
            assert_eq!(compiled.stdout, engine.stdout, "{pipeline} {worker}: the backends differ");
            let want: Vec<i64> = groups
                .iter()
                .skip(worker)
                .step_by(3)
                .flat_map(|g| g.iter().copied())
                .filter(|&i| i >= from)
                .collect();
            let got = ids(&stdout(&compiled));
            assert_eq!(got, want, "{pipeline}: worker {worker} reads row groups {worker}, {} …", worker + 3);
            assert!(!got.is_empty(), "{pipeline}: worker {worker}");
            union.extend(got);
        }
        union.sort_unstable();
        assert_eq!(union, (from..17).collect::<Vec<_>>(), "{pipeline}: every row once");
        for engine in ["compiled", "interpreted"] {
            let o = show(pipeline, engine, &["worker=3".into()]);
            assert_eq!(o.status.code(), Some(2), "{pipeline} {engine}: {}", stderr(&o));
            let e = stderr(&o);
            assert!(
                e.contains("the `index` of `shard` must be below its `num_shards`"),
                "{pipeline} {engine}: {e}"
            );
            assert!(!e.contains("panicked"), "{e}");
        }
    }
}

/// `shuffle(global, window: 5)` over the fixtures' 17 rows (four row groups, two files):
/// both backends give the same order, a permutation of every row (four windows); with
/// `shard(3, i)` right after it each worker's rows are its block of that order.
#[test]
fn a_global_shuffle_of_parquet_rows_is_the_same_permutation_in_both_backends_and_shards_are_its_blocks() {
    let pipe = root().join("tests/pipes/parquet.pipe");
    let dir = tempfile::tempdir().unwrap();
    let show = |engine: &str, sets: &[String]| {
        let mut c = sluice_command(dir.path());
        c.current_dir(root()).args([
            "show",
            pipe.to_str().unwrap(),
            "shuffled",
            "-n",
            "all",
            "--engine",
            engine,
        ]);
        for s in sets {
            c.arg("--set").arg(s);
        }
        let o = c.output().expect("sluice runs");
        assert!(o.status.success(), "{engine} {sets:?}: {}", stderr(&o));
        stdout(&o)
    };
    let ids = |out: &str| -> Vec<i64> {
        out.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]["values"][0].as_i64().unwrap()
            })
            .collect()
    };
    let all = show("compiled", &[]);
    assert_eq!(all, show("interpreted", &[]), "the backends differ");
    let order = ids(&all);
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..17).collect::<Vec<_>>(), "every row once");
    assert_ne!(order, sorted, "shuffled");
    let mut blocks = Vec::new();
    for worker in 0..3 {
        let sets = ["workers=3".to_string(), format!("worker={worker}")];
        let got = show("compiled", &sets);
        assert_eq!(got, show("interpreted", &sets), "worker {worker}: the backends differ");
        blocks.extend(ids(&got));
    }
    assert_eq!(blocks, order, "the workers' blocks, in order, are the epoch");
}
