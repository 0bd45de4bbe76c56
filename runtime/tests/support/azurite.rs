//! Azurite, Microsoft's Azure Storage emulator, for the `az://` tests: its blob server
//! (`azurite-blob`, installed by `scripts/setup-azurite`) started on a free 127.0.0.1
//! port, in memory, with telemetry off; killed on drop or when the test process exits
//! (`reaped.rs`). It serves the well-known emulator account `devstoreaccount1`
//! (object_store's default with `AZURE_STORAGE_USE_EMULATOR`). Containers are made and
//! filled by plain HTTP requests carrying [`SAS`], an account SAS of that account's
//! published key. Nothing here reaches past loopback.
//!
//! Without Azurite the tests skip with a message, unless `SLUICE_REQUIRE_AZURITE=1` (what
//! `scripts/test` sets after installing it), which makes its absence a failure.
#![allow(dead_code)]

// Each server module brings its own copy, so that a test includes only what it uses.
#[allow(clippy::duplicate_mod)]
#[path = "reaped.rs"]
mod reaped;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use reaped::free_port;

/// The emulator's account: object URLs are `http://127.0.0.1:PORT/devstoreaccount1/…`.
pub const ACCOUNT: &str = "devstoreaccount1";

/// An account SAS (blob service; service, container and object; read, write, delete,
/// list, add, create; http; until 2099) of [`ACCOUNT`] signed with the emulator's
/// published key (`Eby8vdM0…GMGw==`, the same in every Azurite), so the helpers need no
/// signing code. Made with Python's hmac: the base64 HMAC-SHA256, under the decoded key,
/// of `"devstoreaccount1\nrwdlac\nb\nsco\n\n2099-12-31T00:00:00Z\n\nhttp\n2021-08-06\n\n"`.
pub const SAS: &str = "sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&se=2099-12-31T00%3A00%3A00Z&spr=http\
                       &sig=9%2BIc85mJbhQS3qFw%2FjNiJRBaP4jqDx4MBXjKMQvuh90%3D";

/// The azurite-blob script: `SLUICE_AZURITE`, else
/// `<repo>/.tools/azurite/node_modules/.bin/azurite-blob`. `None` (after printing why the
/// test skips) when it is not installed and not required.
pub fn azurite_blob() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scripts/setup-azurite").exists())?
        .to_path_buf();
    let bin = std::env::var_os("SLUICE_AZURITE")
        .map_or(repo.join(".tools/azurite/node_modules/.bin/azurite-blob"), PathBuf::from);
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        std::env::var("SLUICE_REQUIRE_AZURITE").as_deref() != Ok("1"),
        "SLUICE_REQUIRE_AZURITE=1 but {} is missing: run scripts/setup-azurite",
        bin.display()
    );
    eprintln!(
        "skipped az://: Azurite is not installed (run scripts/setup-azurite; {} missing)",
        bin.display()
    );
    None
}

/// A running Azurite blob server; killed on drop, and when the test process exits.
#[derive(Debug)]
pub struct Azurite {
    child: Child,
    /// Its working directory (it writes nothing there in memory, but it is its own).
    dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Azurite {
    /// Starts Azurite on a free port, or `None` when it is not installed (see
    /// [`azurite_blob`]).
    pub fn start() -> Option<Azurite> {
        let bin = azurite_blob()?;
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let args: Vec<String> = ["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()]
                .into_iter()
                .chain(["--inMemoryPersistence", "--silent", "--disableTelemetry"])
                // object_store may send a newer `x-ms-version` than this Azurite knows.
                .chain(["--skipApiVersionCheck"])
                .map(String::from)
                .collect();
            let child = reaped::spawn(&bin, &args, dir.path());
            let mut server = Azurite { child, dir, port };
            if server.wait_ready() {
                return Some(server);
            }
        }
        panic!("Azurite did not start");
    }

    fn wait_ready(&mut self) -> bool {
        // Node starts in a second or two; more on a loaded machine.
        let port = self.port;
        reaped::wait_ready(&mut self.child, Duration::from_secs(60), || reaped::listens(port))
    }

    /// Makes `container` (one that exists already is no error).
    pub fn container(&self, container: &str) {
        let target = format!("/{ACCOUNT}/{container}?restype=container&{SAS}");
        let (status, answer) = request(self.port, "PUT", &target, &[], b"").unwrap();
        assert!(
            matches!(status, 201 | 409),
            "creating container {container}: {}",
            String::from_utf8_lossy(&answer)
        );
    }

    /// Puts the local file `from` at `az://container/key` (one Put Blob).
    pub fn put(&self, container: &str, key: &str, from: &Path) {
        assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b)), "a plain key: {key}");
        let target = format!("/{ACCOUNT}/{container}/{key}?{SAS}");
        let data = std::fs::read(from).unwrap();
        let (status, answer) =
            request(self.port, "PUT", &target, &[("x-ms-blob-type", "BlockBlob")], &data).unwrap();
        assert_eq!(status, 201, "uploading az://{container}/{key}: {}", String::from_utf8_lossy(&answer));
    }

    /// Puts every regular file of the local directory `dir` under `az://container/prefix/`.
    pub fn put_dir(&self, container: &str, prefix: &str, dir: &Path) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                self.put(container, &format!("{prefix}/{}", p.file_name().unwrap().to_str().unwrap()), &p);
            }
        }
    }

    /// The environment pointing Sluice's `az://` at `port` (this server's, or a proxy's in
    /// front of it), as a user sets it for Azurite: object_store's
    /// `MicrosoftAzureBuilder::from_env` reads `AZURE_STORAGE_USE_EMULATOR=true` (the
    /// emulator's account and key, plain http) and the endpoint from
    /// `AZURITE_BLOB_STORAGE_URL` (default `http://127.0.0.1:10000`).
    pub fn env_for(port: u16) -> Vec<(&'static str, String)> {
        vec![
            ("AZURE_STORAGE_USE_EMULATOR", "true".into()),
            ("AZURITE_BLOB_STORAGE_URL", format!("http://127.0.0.1:{port}")),
        ]
    }

    /// [`Azurite::env_for`] this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        Azurite::env_for(self.port)
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        reaped::stop(&mut self.child);
    }
}

/// [`reaped::request`] with the Blob service version Azurite's REST API wants.
fn request(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut all = vec![("x-ms-version", "2021-08-06")];
    all.extend_from_slice(headers);
    reaped::request(port, method, target, &all, body)
}
