//! A fake GCS server for the `gs://` tests: fake-gcs-server (installed by
//! `scripts/setup-gcs`) started on a free 127.0.0.1 port with an in-memory backend, plain
//! http, and `-public-host 127.0.0.1` so that it answers GCS's XML API (what object_store
//! reads through) on path-style URLs of any port, a proxy's included. Buckets are made and
//! filled through its JSON API (`POST /storage/v1/b`, `POST /upload/storage/v1/b/…/o`);
//! it has no XML uploads (see `storage_gcs_az.rs`). Killed on drop or when the test
//! process exits (`reaped.rs`). Nothing here reaches past loopback.
//!
//! Without fake-gcs-server the tests skip with a message, unless `SLUICE_REQUIRE_GCS=1`
//! (what `scripts/test` sets after installing it), which makes its absence a failure.
#![allow(dead_code)]

// Each server module brings its own copy, so that a test includes only what it uses.
#[allow(clippy::duplicate_mod)]
#[path = "reaped.rs"]
mod reaped;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use reaped::{free_port, request};

/// The fake-gcs-server binary: `SLUICE_FAKE_GCS`, else
/// `<repo>/.tools/fake-gcs-server/bin/fake-gcs-server`. `None` (after printing why the
/// test skips) when it is not installed and not required.
pub fn fake_gcs_server() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scripts/setup-gcs").exists())?
        .to_path_buf();
    let bin = std::env::var_os("SLUICE_FAKE_GCS")
        .map_or(repo.join(".tools/fake-gcs-server/bin/fake-gcs-server"), PathBuf::from);
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        std::env::var("SLUICE_REQUIRE_GCS").as_deref() != Ok("1"),
        "SLUICE_REQUIRE_GCS=1 but {} is missing: run scripts/setup-gcs",
        bin.display()
    );
    eprintln!(
        "skipped gs://: fake-gcs-server is not installed (run scripts/setup-gcs; {} missing)",
        bin.display()
    );
    None
}

/// A running fake-gcs-server; killed on drop, and when the test process exits.
#[derive(Debug)]
pub struct GcsServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl GcsServer {
    /// Starts fake-gcs-server on a free port, or `None` when it is not installed (see
    /// [`fake_gcs_server`]).
    pub fn start() -> Option<GcsServer> {
        let bin = fake_gcs_server()?;
        for _ in 0..5 {
            let port = free_port();
            let args = format!(
                "-scheme http -host 127.0.0.1 -port {port} -public-host 127.0.0.1 -backend memory -log-level error"
            );
            let args: Vec<String> = args.split(' ').map(String::from).collect();
            let child = reaped::spawn(&bin, &args, &std::env::temp_dir());
            let mut server = GcsServer { child, port };
            if server.wait_ready() {
                return Some(server);
            }
        }
        panic!("fake-gcs-server did not start");
    }

    fn wait_ready(&mut self) -> bool {
        let port = self.port;
        reaped::wait_ready(&mut self.child, Duration::from_secs(20), || {
            matches!(request(port, "GET", "/_internal/healthcheck", &[], b""), Ok((200, _)))
        })
    }

    /// Makes `bucket` (one that exists already is no error).
    pub fn bucket(&self, bucket: &str) {
        let body = format!("{{\"name\":\"{bucket}\"}}");
        let (status, answer) = request(
            self.port,
            "POST",
            "/storage/v1/b",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .unwrap();
        assert!(
            matches!(status, 200 | 409),
            "creating bucket {bucket}: {}",
            String::from_utf8_lossy(&answer)
        );
    }

    /// Puts the local file `from` at `gs://bucket/key` (a JSON API media upload).
    pub fn put(&self, bucket: &str, key: &str, from: &Path) {
        assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b)), "a plain key: {key}");
        let target = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={key}");
        let data = std::fs::read(from).unwrap();
        let (status, answer) =
            request(self.port, "POST", &target, &[("Content-Type", "application/octet-stream")], &data)
                .unwrap();
        assert_eq!(status, 200, "uploading gs://{bucket}/{key}: {}", String::from_utf8_lossy(&answer));
    }

    /// Puts every regular file of the local directory `dir` under `gs://bucket/prefix/`.
    pub fn put_dir(&self, bucket: &str, prefix: &str, dir: &Path) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                self.put(bucket, &format!("{prefix}/{}", p.file_name().unwrap().to_str().unwrap()), &p);
            }
        }
    }

    /// The environment pointing Sluice's `gs://` at `port` (this server's, or a proxy's in
    /// front of it), as a user sets it for an emulator: object_store's
    /// `GoogleCloudStorageBuilder::from_env` reads `GOOGLE_BASE_URL`, and
    /// `GOOGLE_SKIP_SIGNATURE=true` sends requests unsigned (no credentials needed),
    /// `GOOGLE_ALLOW_HTTP=true` allows the plain-http endpoint.
    pub fn env_for(port: u16) -> Vec<(&'static str, String)> {
        vec![
            ("GOOGLE_BASE_URL", format!("http://127.0.0.1:{port}")),
            ("GOOGLE_SKIP_SIGNATURE", "true".into()),
            ("GOOGLE_ALLOW_HTTP", "true".into()),
        ]
    }

    /// [`GcsServer::env_for`] this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        GcsServer::env_for(self.port)
    }
}

impl Drop for GcsServer {
    fn drop(&mut self) {
        reaped::stop(&mut self.child);
    }
}
