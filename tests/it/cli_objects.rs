//! More of the `sluice` tool on objects: `bench read`, `bench pipeline` and `bench
//! shuffle` of a URL prefix
//! (against the local S3 server, s3s-fs on 127.0.0.1) count what they count for the local
//! directory; `sluice index --check` of objects, with the index beside the object, in
//! `--index-dir` or in `$SLUICE_INDEX_DIR`, and a stale index (the object replaced) failing
//! naming the object's URL; a global shuffle of objects reading its indexes from
//! `$SLUICE_INDEX_DIR`; and single objects over plain `http://` from a small
//! static-file server on loopback (`runtime/tests/support/http.rs`, no credentials):
//! `cat` byte-identical to the local file, a 404 failing after one request, and a
//! pipeline's `tfrecords` reading it. The S3 tests skip without s3s-fs unless
//! `SLUICE_REQUIRE_S3=1`; the HTTP tests need nothing.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::http::WebServer;
use crate::s3::S3Server;
use crate::support::{generate, sluice_command, text};

/// Runs `sluice args…` with `env` (runners cached in `cache`).
fn sluice(cache: &Path, env: &[(&str, String)], args: &[&str]) -> Output {
    sluice_command(cache)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("sluice runs")
}

/// `sluice gen KIND` into `dir/KIND`.
fn generate_in(dir: &Path, kind: &str, records: u64, shards: u32) -> PathBuf {
    let out = dir.join(kind);
    generate(kind, records, shards, &out, &[]);
    out
}

/// The JSON object `sluice args…` prints, after checking it succeeded.
fn json(dir: &Path, env: &[(&str, String)], args: &[&str]) -> serde_json::Value {
    let o = sluice(dir, env, args);
    assert!(o.status.success(), "sluice {args:?}: {}", text(&o.stderr));
    serde_json::from_str(text(&o.stdout).trim()).unwrap()
}

#[test]
fn bench_reads_a_bucket_prefix_as_a_directory() {
    let Some(server) = S3Server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = generate_in(dir.path(), "tabular", 3000, 3);
    server.bucket("data");
    server.put_dir("data", "tabular", &local);
    let env = server.env();
    let read = |path: &str| {
        json(dir.path(), &env, &["bench", "read", "--json", "--repeat", "1", "--threads", "2", path])
    };
    let want = read(local.to_str().unwrap());
    for url in ["s3://data/tabular", "s3://data/tabular/"] {
        let got = read(url);
        for key in ["files", "file_bytes", "records"] {
            assert_eq!(got[key], want[key], "{url}: {key}");
        }
        assert_eq!(got["read_par"]["records_per_s"].as_f64().map(|r| r > 0.0), Some(true));
    }
    assert_eq!(want["records"].as_u64(), Some(3000));
    let pipeline = |path: &str| {
        json(dir.path(), &env, &["bench", "pipeline", "parse_tabular", path, "--json", "--warmup", "1"])
    };
    let (want, got) = (pipeline(local.to_str().unwrap()), pipeline("s3://data/tabular"));
    assert_eq!(got["records"], want["records"]);
    assert_eq!(got["records"].as_u64(), Some(3000));

    // `bench shuffle` indexes the objects (beside them) and shuffles them globally.
    let o = json(dir.path(), &env, &["bench", "shuffle", "--json", "--repeat", "1", "s3://data/tabular"]);
    assert_eq!(o["records"].as_u64(), Some(3000));
    assert!(server.root.path().join("data/tabular/tabular-00002-of-00003.tfrecord.idx").is_file());

    // A prefix with no TFRecord objects, and no object of that name: exit 2 naming it.
    let o = sluice(dir.path(), &env, &["bench", "read", "s3://data/nothing"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("s3://data/nothing"), "{}", text(&o.stderr));
}

/// A global shuffle (which reads through the record indexes).
const GLOBAL: &str = r#"
pipeline global(files: glob, seed: u64 = 5) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    shuffle(global, seed: seed);
    map { parse_example(); }
}
"#;

#[test]
fn index_check_of_objects_finds_stale_indexes_wherever_they_are() {
    let Some(server) = S3Server::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = generate_in(dir.path(), "tabular", 900, 3);
    server.bucket("data");
    server.put_dir("data", "tabular", &local);
    let env = server.env();
    let idx_dir = dir.path().join("indexes");
    let idx_dir_s = idx_dir.to_str().unwrap().to_string();
    let mut env_dir = env.clone();
    env_dir.push(("SLUICE_INDEX_DIR", idx_dir_s.clone()));
    let first = "s3://data/tabular/tabular-00000-of-00003.tfrecord";

    // Beside the objects: written, then checked.
    let o = sluice(dir.path(), &env, &["index", "s3://data/tabular/"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(server.root.path().join("data/tabular/tabular-00000-of-00003.tfrecord.idx").is_file());
    let o = sluice(dir.path(), &env, &["index", "--check", "s3://data/tabular/*.tfrecord"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).matches(" ok").count(), 3, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains(&format!("{first}.idx ok")), "{}", text(&o.stdout));

    // In a local directory named by the option, and by the environment variable.
    let o = sluice(dir.path(), &env, &["index", "--index-dir", &idx_dir_s, "s3://data/tabular"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let local_idx = idx_dir.join("tabular-00000-of-00003.tfrecord.idx");
    assert_eq!(
        std::fs::read(&local_idx).unwrap(),
        std::fs::read(server.root.path().join("data/tabular/tabular-00000-of-00003.tfrecord.idx")).unwrap()
    );
    let o = sluice(dir.path(), &env_dir, &["index", "--check", "s3://data/tabular"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&local_idx.display().to_string()), "{}", text(&o.stdout));

    // A global shuffle of the objects finds their indexes in `$SLUICE_INDEX_DIR` (those
    // beside the objects removed) and gives what it gives from the local files.
    for i in 0..3 {
        std::fs::remove_file(
            server.root.path().join(format!("data/tabular/tabular-0000{i}-of-00003.tfrecord.idx")),
        )
        .unwrap();
    }
    let o = sluice(dir.path(), &env, &["index", local.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let pipe = dir.path().join("global.pipe");
    std::fs::write(&pipe, GLOBAL).unwrap();
    let show = |env: &[(&str, String)], files: String| {
        let set = format!("files={files}");
        let o = sluice(dir.path(), env, &["show", pipe.to_str().unwrap(), "-n", "all", "--set", &set]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let want = show(&env, format!("{}/*.tfrecord", local.display()));
    assert_eq!(want.lines().count(), 900, "one line per record");
    assert!(
        show(&env_dir, "s3://data/tabular/*.tfrecord".to_string()) == want,
        "the shuffle from s3 differs"
    );

    let o = sluice(dir.path(), &env, &["index", "s3://data/tabular/"]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // The object replaced by another shard's records: every index of it is stale, an error
    // (exit 1) naming the object's URL and the index.
    server.put(
        "data",
        "tabular/tabular-00000-of-00003.tfrecord",
        &local.join("tabular-00001-of-00003.tfrecord"),
    );
    for (env, at) in [(&env, format!("{first}.idx")), (&env_dir, local_idx.display().to_string())] {
        let o = sluice(dir.path(), env, &["index", "--check", "s3://data/tabular"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("stale index") && err.contains(first) && err.contains(&at), "{err}");
    }
    // A missing index says to run `sluice index`, naming where it looked.
    let o = sluice(dir.path(), &env, &["index", "--check", "--index-dir", "s3://data/elsewhere", first]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("s3://data/elsewhere/tabular-00000-of-00003.tfrecord.idx")
            && err.contains("sluice index"),
        "{err}"
    );
}

#[test]
fn a_single_object_over_http_reads_as_the_local_file() {
    let dir = tempfile::tempdir().unwrap();
    let local = generate_in(dir.path(), "tabular", 1000, 1);
    let name = "tabular-00000-of-00001.tfrecord";
    let web = WebServer::start(&local);
    let want = sluice(dir.path(), &[], &["cat", local.join(name).to_str().unwrap()]);
    assert!(want.status.success());
    // Small ranged GETs, so the object takes many of them.
    let env = [("SLUICE_STORAGE_CHUNK", "65536".to_string())];
    let got = sluice(dir.path(), &env, &["cat", &web.url(name)]);
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert_eq!(text(&got.stdout).lines().count(), 1000);
    assert!(got.stdout == want.stdout, "http:// and local differ");
    assert!(web.requests_for(name) > 2, "read with ranged GETs");

    // A missing object: exit 2 naming the URL, after one request (no retry on a 404).
    let missing = web.url("missing.tfrecord");
    let o = sluice(dir.path(), &[], &["cat", &missing]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains(&missing), "{}", text(&o.stderr));
    assert_eq!(web.requests_for("missing.tfrecord"), 1);

    // A pipeline's `tfrecords` over the URL: the records of the local file.
    let pipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench/parse_tabular.pipe");
    let run = |files: String| {
        let set = format!("files={files}");
        json(dir.path(), &env, &["run", pipe.to_str().unwrap(), "--set", &set, "--json"])
    };
    let (want, got) = (run(local.join(name).display().to_string()), run(web.url(name)));
    for key in ["records", "batches", "skipped"] {
        assert_eq!(got[key], want[key], "{key}");
    }
    assert_eq!(got["records"].as_u64(), Some(1000));
}

/// An upload to a store that accepts connections and never answers gives up as a read
/// does, after `SLUICE_STORAGE_RETRIES` retries of `SLUICE_STORAGE_TIMEOUT_MS` each,
/// naming the URL. Before, uploads kept object_store's own policy (30 s a request, 3
/// minutes in all) whatever the environment said: this `sluice gen` ran past the kill
/// below. Needs no S3 server: the listener on loopback is the store.
#[test]
fn an_upload_to_a_silent_store_gives_up_as_the_environment_says_naming_the_url() {
    use std::net::TcpListener;
    use std::time::{Duration, Instant};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts every connection and holds it open, answering nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.extend(conn.ok());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let url = "s3://silent/tabular";
    let mut child = sluice_command(dir.path())
        .args(["gen", "tabular", "--records", "10", "--shards", "1", "--out", url])
        .envs(S3Server::env_for(port))
        .envs([
            ("SLUICE_STORAGE_RETRIES", "1"),
            ("SLUICE_STORAGE_TIMEOUT_MS", "300"),
            ("SLUICE_STORAGE_BACKOFF_MS", "10"),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sluice runs");
    // Generous: it needs well under a second; without the environment it needs minutes.
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let exited = child.try_wait().unwrap().is_some();
    if !exited {
        let _ = child.kill();
    }
    let o = child.wait_with_output().unwrap();
    assert!(exited, "the upload did not give up by itself: {}", text(&o.stderr));
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("s3://silent/tabular/"), "{}", text(&o.stderr));
}
