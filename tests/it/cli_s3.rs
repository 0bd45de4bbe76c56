//! The `sluice` tool against a real S3 server (s3s-fs on 127.0.0.1, started per test by
//! `runtime/tests/support/s3.rs`): `cat` of objects and of a URL pattern prints what it
//! prints for the local copies; a missing object or bucket is exit 2 naming the URL; the
//! tabular and image bench pipelines `run` from `s3://` with the counts of the local run;
//! and streaming a dataset many times the read-ahead keeps the peak RSS near the local
//! run's. Skips without s3s-fs unless `SLUICE_REQUIRE_S3=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::s3::S3Server;
use crate::support::{SLUICE, generate, have_mpirun, root, runner_env, sluice_command, text};

/// Runs `sluice args…` pointed at `server`, with `env` on top, runners cached in `cache`.
fn sluice(server: &S3Server, cache: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    sluice_command(cache)
        .args(args)
        .envs(server.env())
        .envs(env.iter().copied())
        .output()
        .expect("sluice runs")
}

/// `sluice gen KIND` into `dir/KIND`, then the same files under `s3://data/KIND/`.
fn generate_in(server: &S3Server, dir: &Path, kind: &str, records: u64, shards: u32) -> PathBuf {
    let out = dir.join(kind);
    generate(kind, records, shards, &out, &[]);
    server.bucket("data");
    server.put_dir("data", kind, &out);
    out
}

#[test]
fn cat_prints_objects_as_their_local_copies() {
    let Some(server) = S3Server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = generate_in(&server, dir.path(), "tabular", 3000, 3);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&local).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut args = vec!["cat"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let want = sluice(&server, dir.path(), &[], &args);
    assert!(want.status.success());
    let got = sluice(&server, dir.path(), &[], &["cat", "s3://data/tabular/*.tfrecord"]);
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert_eq!(text(&got.stdout).lines().count(), 3000);
    assert!(got.stdout == want.stdout, "s3:// and local differ");

    let o = sluice(&server, dir.path(), &[], &["cat", "s3://data/tabular/missing.tfrecord"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("s3://data/tabular/missing.tfrecord"), "{}", text(&o.stderr));
    let o = sluice(&server, dir.path(), &[], &["cat", "s3://no-bucket/*.tfrecord"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("s3://no-bucket/*.tfrecord"), "{}", text(&o.stderr));
}

/// `run --json` of `pipe` over `files`: its summary.
fn run_json(
    server: &S3Server,
    dir: &Path,
    env: &[(&str, &str)],
    pipe: &str,
    files: &str,
) -> serde_json::Value {
    let pipe = root().join("examples/bench").join(pipe);
    let set = format!("files={files}");
    let o = sluice(server, dir, env, &["run", pipe.to_str().unwrap(), "--set", &set, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_str(text(&o.stdout).trim()).unwrap()
}

#[test]
fn the_bench_pipelines_run_from_a_bucket_as_from_disk() {
    let Some(server) = S3Server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (kind, pipe) in [("tabular", "parse_tabular.pipe"), ("image", "image_raw.pipe")] {
        let local = generate_in(&server, dir.path(), kind, 3000, 4);
        let want = run_json(&server, dir.path(), &[], pipe, &format!("{}/*.tfrecord", local.display()));
        let got = run_json(&server, dir.path(), &[], pipe, &format!("s3://data/{kind}/*.tfrecord"));
        for key in ["records", "batches", "skipped"] {
            assert_eq!(got[key], want[key], "{pipe}: {key}");
        }
        assert_eq!(got["records"].as_u64(), Some(3000), "{pipe}");
    }
}

/// Streaming ~111 MB of images through 4 open objects, each with at most 3 × 256 KiB read
/// ahead (3 MiB in all, 35 times less than the data): the peak RSS stays within 64 MiB of
/// the same run from the local files, well under the data's size. The margin holds the
/// TLS and HTTP client and the storage runtime's threads (about 20 MiB) and the recycled
/// batch buffers (`column::recycle`, up to 32 MiB idle), which one run may end with full
/// and the other empty, as the reader's and the consumer's pace differ.
#[test]
fn streaming_from_a_bucket_keeps_memory_bounded() {
    let Some(server) = S3Server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = generate_in(&server, dir.path(), "image", 9000, 4);
    let bytes: u64 = std::fs::read_dir(&local).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    let env = [("SLUICE_STORAGE_CHUNK", "262144"), ("SLUICE_STORAGE_IN_FLIGHT", "2")];
    let read_ahead = 4 * 3 * 262_144;
    assert!(bytes >= 10 * read_ahead, "the data ({bytes} bytes) is at least 10 times the read-ahead");
    let want =
        run_json(&server, dir.path(), &env, "image_raw.pipe", &format!("{}/*.tfrecord", local.display()));
    let got = run_json(&server, dir.path(), &env, "image_raw.pipe", "s3://data/image/*.tfrecord");
    assert_eq!(got["records"], want["records"]);
    let (peak, base) = (got["peak_rss_bytes"].as_u64().unwrap(), want["peak_rss_bytes"].as_u64().unwrap());
    let margin = 64 << 20;
    assert!(bytes >= margin * 3 / 2, "the data ({bytes} bytes) is well over the margin");
    assert!(peak <= base + margin, "peak RSS {peak} from s3 against {base} from disk");
}

/// A pipeline of records, for `--output`.
const REC: &str = r#"
pipeline rec(files: glob) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); x = x * 2.0; }
}
"#;

/// The objects under `s3://data/PREFIX/` as s3s-fs stores them (one file each), sorted
/// by name: (name, bytes).
fn stored(server: &S3Server, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(server.root.path().join("data").join(prefix))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_str().unwrap().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

/// `sluice gen --out s3://…` uploads the very bytes it writes locally (multipart uploads,
/// one per shard), `sluice index` writes an object's index beside it, and `run --output
/// s3://…` exports what it exports locally (TFRecord shards and their indexes, Parquet
/// files, WebDataset tars).
#[test]
fn gen_and_output_write_to_a_bucket() {
    let Some(server) = S3Server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    server.bucket("data");
    let local = dir.path().join("gen");
    for out in [local.to_str().unwrap(), "s3://data/gen"] {
        let o = sluice(
            &server,
            dir.path(),
            &[],
            &["gen", "tabular", "--records", "500", "--shards", "2", "--out", out],
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let mut want: Vec<_> = std::fs::read_dir(&local)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_str().unwrap().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    want.sort();
    assert_eq!(stored(&server, "gen"), want);
    // `sluice index` of objects writes each index beside its object, as locally.
    for target in [format!("{}/*.tfrecord", local.display()), "s3://data/gen/*.tfrecord".to_string()] {
        let o = sluice(&server, dir.path(), &[], &["index", &target]);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let want = std::fs::read(local.join("tabular-00001-of-00002.tfrecord.idx")).unwrap();
    let got = std::fs::read(server.root.path().join("data/gen/tabular-00001-of-00002.tfrecord.idx")).unwrap();
    assert_eq!(got, want, "the index of an object is the local file's index");

    // `run --output` in each format: the objects are the local files, byte for byte.
    let pipe = dir.path().join("rec.pipe");
    std::fs::write(&pipe, REC).unwrap();
    let formats: [(&str, &[&str]); 3] = [
        ("export", &[]),
        ("export-parquet", &["--format", "parquet", "--row-group", "100"]),
        ("export-webdataset", &["--format", "webdataset", "--compression", "gzip"]),
    ];
    for (name, format) in formats {
        let local_out = dir.path().join(name);
        let url = format!("s3://data/{name}");
        for (files, out) in [
            (format!("files={}/*.tfrecord", local.display()), local_out.to_str().unwrap()),
            ("files=s3://data/gen/*.tfrecord".to_string(), url.as_str()),
        ] {
            let args = [
                &["run", pipe.to_str().unwrap(), "--set", &files, "--output", out, "--shards", "2"][..],
                format,
            ];
            let o = sluice(&server, dir.path(), &[], &args.concat());
            assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        }
        let mut want: Vec<_> = std::fs::read_dir(&local_out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_str().unwrap().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        want.sort();
        assert!(want.len() >= 2, "{name}: {want:?}");
        assert_eq!(stored(&server, name), want, "{name}");
    }
}

/// A global shuffle sharded between workers by parameters.
const SHARDED: &str = r#"
pipeline sharded(files: glob, workers: u32 = 1, worker: u32 = 0, seed: u64 = 5) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    shuffle(global, seed: seed);
    shard(workers, worker, remainder: drop);
    map { parse_example(); }
}
"#;

/// A two-rank `mpirun` job, each rank `sluice show`ing its `shard(workers, worker)` of a
/// global shuffle of objects (indexed by `sluice index`), prints what one process prints
/// for that shard of the local files. Skips without `mpirun` unless `SLUICE_REQUIRE_MPI=1`.
#[test]
fn a_two_rank_mpirun_job_reads_its_shards_from_a_bucket() {
    let Some(server) = S3Server::start() else { return };
    if !have_mpirun() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let local = generate_in(&server, dir.path(), "tabular", 601, 3);
    for target in [format!("{}/*.tfrecord", local.display()), "s3://data/tabular/*.tfrecord".to_string()] {
        let o = sluice(&server, dir.path(), &[], &["index", &target]);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let pipe = dir.path().join("sharded.pipe");
    std::fs::write(&pipe, SHARDED).unwrap();
    let local_files = format!("files={}/*.tfrecord", local.display());
    let want: Vec<String> = (0..2)
        .map(|w| {
            let worker = format!("worker={w}");
            let args = [
                "show",
                pipe.to_str().unwrap(),
                "-n",
                "all",
                "--set",
                &local_files,
                "--set",
                "workers=2",
                "--set",
                &worker,
            ];
            let o = sluice(&server, dir.path(), &[], &args);
            assert!(o.status.success(), "{}", text(&o.stderr));
            text(&o.stdout)
        })
        .collect();
    assert_ne!(want[0], want[1]);
    let script = format!(
        "exec {} show {} -n all --set files='s3://data/tabular/*.tfrecord' --set workers=2 --set worker=$OMPI_COMM_WORLD_RANK > {}/rank-$OMPI_COMM_WORLD_RANK.txt",
        SLUICE,
        pipe.display(),
        dir.path().display()
    );
    let o = Command::new("mpirun")
        .args([
            "-np",
            "2",
            "--oversubscribe",
            "--mca",
            "btl",
            "self,vader",
            "--mca",
            "oob_tcp_if_include",
            "lo",
        ])
        .args(["sh", "-c", &script])
        .envs(server.env())
        .envs(runner_env(dir.path()))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    for (w, want) in want.iter().enumerate() {
        let got = std::fs::read_to_string(dir.path().join(format!("rank-{w}.txt"))).unwrap();
        assert!(got == *want, "rank {w} differs from the local shard");
    }
}
