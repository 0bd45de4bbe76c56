//! End-to-end tests of `sluice show`: the first elements of a pipeline as JSON lines,
//! checked against the records `sluice gen` wrote (made again with `synth::RecordMaker`):
//! batches, records with a scalar and a fixed tensor, byte strings and raw records; exit
//! statuses as `sluice run`'s. Runners build as in `tests/it/cli_run.rs`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use sluice::synth::{Kind, RecordMaker};

use crate::support::{generate, root, sluice_command, sluice_in, stderr, stdout};

/// The lines of a successful `sluice show`, parsed.
fn lines(o: &Output) -> Vec<Value> {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    stdout(o).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// Batches, records of fields, records with a byte string, raw records, padded batches
/// of variable-length lists and batches of paths.
const PIPES: &str = r#"
pipeline batched(files: glob, batch: u32 = 4) {
    schema { x: f32[16], label: i64 }
    tfrecords(files);
    map { parse_example(); }
    batch(batch);
}

pipeline rows(files: glob) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); }
}

pipeline images(files: glob) {
    schema { image: bytes, id: i64 }
    tfrecords(files);
    map { parse_example(); }
}

pipeline raw(files: glob) {
    tfrecords(files);
}

pipeline lists(files: glob) {
    schema { x: f32[], id: i64 }
    tfrecords(files);
    map { parse_example(); }
    padded_batch(3);
}

pipeline paths(files: glob) {
    files(files);
    batch(2);
}
"#;

/// `PIPES` as `dir/show.pipe`; 30 tabular records in 2 files and 3 images, and the
/// `--set files=…` of each.
fn setup(dir: &Path) -> (PathBuf, String, String) {
    let file = dir.join("show.pipe");
    std::fs::write(&file, PIPES).unwrap();
    let mut sets = Vec::new();
    for (kind, records, shards) in [("tabular", 30, 2), ("image", 3, 1)] {
        let data = dir.join(kind);
        generate(kind, records, shards, &data, &[]);
        sets.push(format!("files={}/*.tfrecord", data.display()));
    }
    (file, sets.remove(0), sets.remove(0))
}

/// A numeric field's `dtype`, `shape` and values, checking there are as many values as
/// the shape says.
fn numbers(v: &Value) -> (&str, Vec<u64>, &Vec<Value>) {
    let shape: Vec<u64> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
    let values = v["values"].as_array().unwrap();
    assert_eq!(values.len() as u64, shape.iter().product::<u64>(), "{v}");
    (v["dtype"].as_str().unwrap(), shape, values)
}

/// The `values` of field `field` on a JSON line, as written: each number's own text.
fn value_texts<'a>(line: &'a str, field: &str) -> Vec<&'a str> {
    let start = line.find(&format!("\"{field}\":")).unwrap();
    let values = start + line[start..].find("\"values\":[").unwrap() + "\"values\":[".len();
    let end = values + line[values..].find(']').unwrap();
    line[values..end].split(',').collect()
}

#[test]
fn show_prints_the_first_elements_as_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (file, tabular, images) = setup(dir.path());
    let file = file.to_str().unwrap();
    let show = |args: &[&str]| sluice_in(dir.path(), &[&["show", file], args].concat());

    // Batches: five by default, the batch's dimension first.
    let o = show(&["batched", "--set", &tabular]);
    let batches = lines(&o);
    assert_eq!(batches.len(), 5, "{}", stdout(&o));
    for b in &batches {
        let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["label", "x"]);
        let (dtype, shape, _) = numbers(&b["x"]);
        assert_eq!((dtype, shape), ("f32", vec![4, 16]));
        let (dtype, shape, _) = numbers(&b["label"]);
        assert_eq!((dtype, shape), ("i64", vec![4]));
    }
    assert!(!stdout(&o).contains("records/s"), "no report");
    assert_eq!(lines(&show(&["batched", "--set", &tabular, "--set", "batch=7", "-n", "2"])).len(), 2);
    let b = &lines(&show(&["batched", "--set", &tabular, "--set", "batch=7", "-n", "2"]))[0];
    assert_eq!(numbers(&b["x"]).1, vec![7, 16]);

    // Records: every one with `-n all`, each float reading back as the f32 written.
    let o = show(&["rows", "--set", &tabular, "-n", "all"]);
    let rows = lines(&o);
    assert_eq!(rows.len(), 30);
    let mut maker = RecordMaker::new(Kind::Tabular, 0);
    let mut ids = BTreeSet::new();
    for (row, text) in rows.iter().zip(stdout(&o).lines()) {
        let (dtype, shape, id) = numbers(&row["id"]);
        assert_eq!((dtype, shape.as_slice()), ("i64", &[][..]));
        let id = id[0].as_u64().unwrap();
        ids.insert(id);
        let ex = maker.example(id);
        let (dtype, shape, values) = numbers(&row["x"]);
        assert_eq!((dtype, shape), ("f32", vec![16]));
        let want = ex.feature("x").unwrap().as_floats().unwrap();
        let exact: Vec<f32> = value_texts(text, "x").iter().map(|t| t.parse().unwrap()).collect();
        assert_eq!(
            exact.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let through_f64: Vec<f32> = values.iter().map(|v| v.as_f64().unwrap() as f32).collect();
        assert_eq!(through_f64, want, "read as f64, then cast");
        let label = ex.feature("label").unwrap().as_int64s().unwrap()[0];
        assert_eq!(row["label"]["values"][0].as_i64(), Some(label));
    }
    assert_eq!(ids, (0..30).collect(), "every record once");

    // Byte strings: base64 of the bytes written.
    let mut maker = RecordMaker::new(Kind::Image, 0);
    let imgs = lines(&show(&["images", "--set", &images]));
    assert_eq!(imgs.len(), 3);
    for img in &imgs {
        let id = img["id"]["values"][0].as_u64().unwrap();
        assert_eq!(img["image"]["dtype"], "bytes");
        let bytes = STANDARD.decode(img["image"]["base64"].as_str().unwrap()).unwrap();
        assert_eq!(bytes, maker.example(id).feature("image").unwrap().as_bytes().unwrap()[0]);
        assert_eq!(bytes.len(), 64 * 64 * 3);
    }

    // Raw records: the serialized bytes and where each came from.
    let raw = lines(&show(&["raw", "--set", &tabular, "-n", "all"]));
    let mut maker = RecordMaker::new(Kind::Tabular, 0);
    let shown: BTreeSet<Vec<u8>> =
        raw.iter().map(|r| STANDARD.decode(r["record"]["base64"].as_str().unwrap()).unwrap()).collect();
    assert_eq!(shown, (0..30).map(|id| maker.record(id)).collect());
    let origin = raw[0]["origin"].as_str().unwrap();
    assert!(origin.contains("tabular-0000") && origin.contains(".tfrecord: record "), "{origin}");

    // A padded batch of lists: the batch's dimension, then the longest list's.
    let b = &lines(&show(&["lists", "--set", &tabular, "-n", "1"]))[0];
    assert_eq!(numbers(&b["x"]).1, vec![3, 16]);
    assert_eq!(numbers(&b["id"]).1, vec![3]);

    // A batch of elements without fields: a JSON array of them.
    let p = lines(&show(&["paths", "--set", &tabular]));
    assert_eq!(p.len(), 1);
    let names: Vec<&str> = p[0].as_array().unwrap().iter().map(|x| x["path"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2);
    assert!(names.iter().all(|n| n.ends_with("-of-00002.tfrecord")), "{names:?}");

    // A bad parameter is the runner's usage error, as for `sluice run`.
    let o = show(&["batched", "--set", &tabular, "--set", "batch=many"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("parameter `batch`"), "{}", stderr(&o));

    // A reader that stops after one line (`| head -1`) ends the command quietly.
    let mut child = sluice_command(dir.path())
        .args(["show", file, "rows", "--set", &tabular, "-n", "all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(first.starts_with("{\"x\":"), "{first}");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("error"), "{}", stderr(&o));
}

#[test]
fn show_refuses_bad_counts_files_and_parameters() {
    let cache = tempfile::tempdir().unwrap();
    let tabular = root().join("tests/pipes/tabular.pipe");
    let tabular = tabular.to_str().unwrap();
    for n in ["0", "x", "2.5"] {
        let o = sluice_in(cache.path(), &["show", tabular, "-n", n]);
        assert_eq!(o.status.code(), Some(2), "-n {n}");
        assert!(stderr(&o).contains("'-n <N|all>'"), "{}", stderr(&o));
    }
    let o = sluice_in(cache.path(), &["show", tabular, "--set", "batch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("expected NAME=VALUE, found `batch`"), "{}", stderr(&o));

    let o = sluice_in(cache.path(), &["show", "/no/such/file.pipe"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("error: /no/such/file.pipe: "), "{}", stderr(&o));

    let bad = root().join("tests/errors/missing_semicolon.pipe");
    let o = sluice_in(cache.path(), &["show", bad.to_str().unwrap()]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(1), ""));
    let err = stderr(&o);
    assert!(
        err.contains("error[E0001]: expected `;`") && err.contains("missing_semicolon.pipe:2:21"),
        "{err}"
    );
    assert!(!cache.path().join("run").exists(), "nothing is built for a bad file");
}
