//! End-to-end tests of `sluice run FILE.pipe PIPELINE --output DIR`: a pipeline's records
//! written as `tf.train.Example` TFRecord shards, read back with `sluice cat` and compared
//! with `sluice show -n all` of the same pipeline. Runners build with the dev profile,
//! sharing one target directory under `target/tmp` (as tests/it/cli_run.rs).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{pipes_and_tabular, sluice_in, stderr, stdout};

/// `rec` yields records with a tensor field, `train` batches, `bad` fails on every
/// record (the files hold 16 floats, not 15), `flat` scalars, `listed` lists, `raw`
/// serialized records; `rec_back`, `flat_back`, `rec_wds_back` and `listed_back` read the
/// Parquet and WebDataset exports of `rec`, `flat` and `listed`.
const PIPES: &str = r#"
pipeline rec(files: glob) {
    schema { x: f32[4, 4], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); x = x * 2.0; }
}

pipeline train(files: glob) {
    schema { x: f32[16], label: i64 }
    tfrecords(files);
    map { parse_example(); }
    batch(4);
}

pipeline bad(files: glob) {
    schema { x: f32[15], label: i64 }
    tfrecords(files);
    map { parse_example(); }
}

pipeline flat(files: glob) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); score = cast(label, f64) / 3.0; big = label > 4; }
    select(id, label, score, big);
}

pipeline raw(files: glob) {
    tfrecords(files);
}

pipeline rec_back(files: glob) {
    schema { x: f32[4, 4], label: i64, id: i64 }
    parquet(files);
}

pipeline listed(files: glob) {
    schema { x: f32[], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); }
}

pipeline listed_back(files: glob) {
    schema { x: f32[], label: i64, id: i64 }
    webdataset(files);
}

pipeline rec_wds_back(files: glob) {
    schema { x: f32[4, 4], label: i64, id: i64 }
    webdataset(files);
}

pipeline flat_back(files: glob) {
    schema { __key__: str, id: i64, label: i64, score: f64, big: bool }
    webdataset(files);
    select(id, label, score, big);
}
"#;

/// `PIPES` as `dir/pipes.pipe`, and 31 tabular records in 2 files under `dir/data`.
fn setup(dir: &Path) -> (PathBuf, String) {
    pipes_and_tabular(dir, PIPES, 31)
}

/// The names in `dir`, sorted (none when it does not exist).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().or_else(|| x.as_str()?.parse().ok()).unwrap()).collect()
}

/// `(id, label, x, x.shape)` of each record `sluice cat` prints of `files`.
fn cat(dir: &Path, files: &[PathBuf]) -> Vec<(f64, f64, Vec<f64>, Vec<f64>)> {
    let mut args = vec!["cat"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let o = sluice_in(dir, &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let f = &v["features"]["feature"];
            let ints = |k: &str| numbers(&f[k]["int64List"]["value"]);
            (ints("id")[0], ints("label")[0], numbers(&f["x"]["floatList"]["value"]), ints("x.shape"))
        })
        .collect()
}

/// The shard files of `rec` in `out`: `n` of them, `ext` the extension after `.tfrecord`.
fn shards(out: &Path, n: u32, ext: &str) -> Vec<PathBuf> {
    (0..n).map(|k| out.join(format!("rec-{k:05}-of-{n:05}.tfrecord{ext}"))).collect()
}

#[test]
fn export_deals_every_record_once_to_indexed_shards_readable_back() {
    let dir = tempfile::tempdir().unwrap();
    let (file, files) = setup(dir.path());
    let (file, out) = (file.to_str().unwrap(), dir.path().join("out"));
    let o = sluice_in(
        dir.path(),
        &["run", file, "rec", "--set", &files, "--output", out.to_str().unwrap(), "--shards", "3"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("rec: wrote 31 records in 3 tfrecord shards (10-11 records each, "),
        "{}",
        stdout(&o)
    );
    let files3 = shards(&out, 3, "");
    let mut expected: Vec<String> = Vec::new();
    for f in &files3 {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        expected.extend([name.clone(), format!("{name}.idx")]);
    }
    assert_eq!(names(&out), expected, "the shards and their indexes, no partial files");

    // Round-robin: sizes differ by at most one.
    let sizes: Vec<usize> = files3.iter().map(|f| cat(dir.path(), std::slice::from_ref(f)).len()).collect();
    assert_eq!(sizes, [11, 10, 10]);
    let o = sluice_in(dir.path(), &[&["index", "--check"][..], &[out.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));

    // Every element once, with the values `sluice show` gives.
    let mut got = cat(dir.path(), &files3);
    got.sort_by(|a, b| a.0.total_cmp(&b.0));
    let o = sluice_in(dir.path(), &["show", file, "rec", "--set", &files, "-n", "all"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut shown: Vec<(f64, f64, Vec<f64>, Vec<f64>)> = stdout(&o)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let shape = v["x"]["shape"].as_array().unwrap().iter().map(|d| d.as_f64().unwrap()).collect();
            (
                numbers(&v["id"]["values"])[0],
                numbers(&v["label"]["values"])[0],
                numbers(&v["x"]["values"]),
                shape,
            )
        })
        .collect();
    shown.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(got.len(), 31);
    assert_eq!(got, shown);
    assert_eq!(got[0].3, [4.0, 4.0], "the tensor's shape as `x.shape`");

    // Gzip: `.tfrecord.gz`, no index, the same records; `--json` gives one object.
    let gz = dir.path().join("gz");
    let o = sluice_in(
        dir.path(),
        &["run", file, "rec", "--set", &files, "--output", gz.to_str().unwrap(), "--shards=2"]
            .iter()
            .copied()
            .chain(["--compression", "gzip", "--json"])
            .collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("one JSON object");
    assert_eq!((v["records"].as_u64(), v["shards"].as_u64()), (Some(31), Some(2)));
    assert_eq!(v["records_per_shard"], serde_json::json!([16, 15]));
    assert_eq!(names(&gz), ["rec-00000-of-00002.tfrecord.gz", "rec-00001-of-00002.tfrecord.gz"]);
    let mut got_gz = cat(dir.path(), &shards(&gz, 2, ".gz"));
    got_gz.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(got_gz, shown);
}

#[test]
fn export_refuses_batches_zero_shards_and_leaves_nothing_of_a_failed_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let (file, files) = setup(dir.path());
    let (file, out) = (file.to_str().unwrap(), dir.path().join("out"));
    let export = |pipeline: &str, extra: &[&str]| {
        let args = [&["run", file, pipeline, "--set", &files, "--output", out.to_str().unwrap()][..], extra];
        sluice_in(dir.path(), &args.concat())
    };

    let o = export("train", &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("pipeline `train` yields a batch, not records") && err.contains("remove `batch`"),
        "{err}"
    );
    assert!(names(&out).is_empty(), "{:?}", names(&out));

    let o = export("rec", &["--shards", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("`--shards 0`: expected a positive integer"), "{}", stderr(&o));

    let o = export("bad", &["--shards", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: pipeline `bad`: "), "{}", stderr(&o));
    assert!(names(&out).is_empty(), "no shard, complete or partial: {:?}", names(&out));
}

/// `sluice show -n all` of `pipeline`, its lines sorted (the order of the shards read back
/// is not the order written).
fn shown_sorted(dir: &Path, file: &str, pipeline: &str, files: &str) -> Vec<String> {
    let o = sluice_in(dir, &["show", file, pipeline, "--set", files, "-n", "all"]);
    assert_eq!(o.status.code(), Some(0), "{pipeline}: {}", stderr(&o));
    let mut lines: Vec<String> = stdout(&o).lines().map(String::from).collect();
    lines.sort();
    lines
}

/// `--format parquet` and `--format webdataset`: the shards read back by `parquet(files)`
/// and `webdataset(files)` show exactly the pipeline's own elements (tensors as
/// fixed-size lists or `.npy` members, lists as lists or `.npy`, `f64` and `bool`
/// unchanged), in row groups of the size asked.
#[test]
fn parquet_and_webdataset_exports_read_back_as_the_pipelines_elements() {
    let dir = tempfile::tempdir().unwrap();
    let (file, files) = setup(dir.path());
    let file = file.to_str().unwrap();
    let run = |pipeline: &str, out: &Path, extra: &[&str]| {
        let args = [&["run", file, pipeline, "--set", &files, "--output", out.to_str().unwrap()][..], extra];
        let o = sluice_in(dir.path(), &args.concat());
        assert_eq!(o.status.code(), Some(0), "{pipeline}: {}", stderr(&o));
        stdout(&o)
    };

    let pq = dir.path().join("pq");
    let said = run(
        "rec",
        &pq,
        &["--format", "parquet", "--shards", "2", "--row-group", "4", "--compression", "zstd"],
    );
    assert!(said.starts_with("rec: wrote 31 records in 2 parquet shards (15-16 records each, "), "{said}");
    assert_eq!(names(&pq), ["rec-00000-of-00002.parquet", "rec-00001-of-00002.parquet"]);
    let back = format!("files={}/*.parquet", pq.display());
    assert_eq!(
        shown_sorted(dir.path(), file, "rec_back", &back),
        shown_sorted(dir.path(), file, "rec", &files)
    );
    let bytes = std::fs::read(pq.join("rec-00000-of-00002.parquet")).unwrap();
    assert_eq!(&bytes[..4], b"PAR1");
    assert_eq!(&bytes[bytes.len() - 4..], b"PAR1");

    let wds = dir.path().join("wds");
    let said = run("flat", &wds, &["--format", "webdataset", "--compression", "gzip", "--json"]);
    let v: Value = serde_json::from_str(&said).expect("one JSON object");
    assert_eq!((v["records"].as_u64(), v["format"].as_str()), (Some(31), Some("webdataset")));
    assert_eq!(names(&wds), ["flat-00000-of-00001.tar.gz"]);
    let back = format!("files={}/*.tar.gz", wds.display());
    let flat = shown_sorted(dir.path(), file, "flat", &files);
    assert_eq!(shown_sorted(dir.path(), file, "flat_back", &back), flat);
    assert!(flat.iter().any(|l| l.contains("\"big\":{\"dtype\":\"bool\"")), "{flat:?}");

    // Lists and tensors are `KEY.x.npy` members, read back by a list or tensor field `x`.
    for (pipeline, back) in [("listed", "listed_back"), ("rec", "rec_wds_back")] {
        let out = dir.path().join(pipeline);
        run(pipeline, &out, &["--format", "webdataset", "--shards", "2"]);
        let files_back = format!("files={}/*.tar", out.display());
        let want = shown_sorted(dir.path(), file, pipeline, &files);
        assert_eq!(shown_sorted(dir.path(), file, back, &files_back), want, "{pipeline}");
        assert_eq!(want.len(), 31);
    }
}

/// Serialized records have no typed fields to make columns or members of: exit 2 saying
/// to parse them (or to keep TFRecord), and no file is left.
#[test]
fn parquet_and_webdataset_exports_refuse_serialized_records_and_batches() {
    let dir = tempfile::tempdir().unwrap();
    let (file, files) = setup(dir.path());
    let (file, out) = (file.to_str().unwrap(), dir.path().join("out"));
    for format in ["parquet", "webdataset"] {
        for (pipeline, says) in [
            (
                "raw",
                format!(
                    "pipeline `raw` yields serialized records: `--format {format}` writes typed fields; parse the records first"
                ),
            ),
            ("train", "pipeline `train` yields a batch, not records".to_string()),
        ] {
            let args = [
                "run",
                file,
                pipeline,
                "--set",
                &files,
                "--output",
                out.to_str().unwrap(),
                "--format",
                format,
            ];
            let o = sluice_in(dir.path(), &args);
            assert_eq!(o.status.code(), Some(2), "{format} {pipeline}: {}", stderr(&o));
            assert!(stderr(&o).contains(&says), "{format} {pipeline}: {}", stderr(&o));
            assert!(names(&out).is_empty(), "{format} {pipeline}: {:?}", names(&out));
        }
    }
}
