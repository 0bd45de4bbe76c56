//! The test harness for object storage, shared by the runtime's and the CLI's tests
//! (`#[path]`-included): a real S3 server (`s3s-fs`, installed by `scripts/setup-s3`)
//! started on 127.0.0.1 over a temporary directory with test credentials, and a
//! fault-injection proxy between Sluice and it that, on a seeded schedule, resets
//! connections, answers 503 and stalls mid-body. Nothing here reaches past loopback.
//!
//! Without s3s-fs the tests skip with a message, unless `SLUICE_REQUIRE_S3=1` (what
//! `scripts/test` sets after installing it), which makes its absence a failure.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;

// The server's process dies with the test process: the runtime's storage tests keep one
// in a `static`, which is never dropped.
#[path = "reaped.rs"]
mod reaped;
use reaped::free_port;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The test credentials and region.
pub const ACCESS_KEY: &str = "sluice-test-key";
pub const SECRET_KEY: &str = "sluice-test-secret";

/// The s3s-fs binary: `SLUICE_S3S_FS`, else `<repo>/.tools/s3s-fs/bin/s3s-fs`. `None`
/// (after printing why the test skips) when it is not installed and not required.
pub fn s3s_fs() -> Option<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scripts/setup-s3").exists())?
        .to_path_buf();
    let bin = std::env::var_os("SLUICE_S3S_FS").map_or(repo.join(".tools/s3s-fs/bin/s3s-fs"), PathBuf::from);
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        std::env::var("SLUICE_REQUIRE_S3").as_deref() != Ok("1"),
        "SLUICE_REQUIRE_S3=1 but {} is missing: run scripts/setup-s3",
        bin.display()
    );
    eprintln!("skipped: s3s-fs is not installed (run scripts/setup-s3; {} missing)", bin.display());
    None
}

/// A running s3s-fs over a temporary directory; killed on drop.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    /// The directory it serves: one subdirectory per bucket.
    pub root: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl S3Server {
    /// Starts s3s-fs on a free port, or `None` when it is not installed (see [`s3s_fs`]).
    pub fn start() -> Option<S3Server> {
        Self::start_with(true)
    }

    /// Starts s3s-fs with no credentials: it takes unsigned requests (as a client with
    /// `GOOGLE_SKIP_SIGNATURE=true` sends them).
    pub fn start_anonymous() -> Option<S3Server> {
        Self::start_with(false)
    }

    fn start_with(credentials: bool) -> Option<S3Server> {
        let bin = s3s_fs()?;
        let mut root = tempfile::tempdir().unwrap();
        for _ in 0..5 {
            let port = free_port();
            let keys = ["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY];
            let mut args: Vec<String> = ["--host", "127.0.0.1", "--port", &port.to_string()]
                .into_iter()
                .chain(keys.into_iter().filter(|_| credentials))
                .map(String::from)
                .collect();
            args.push(root.path().to_string_lossy().into_owned());
            let child = reaped::spawn(&bin, &args, &std::env::temp_dir());
            let mut server = S3Server { child, root, port };
            if server.wait_ready() {
                return Some(server);
            }
            root = server.take_root();
        }
        panic!("s3s-fs did not start");
    }

    /// The served directory of a server that failed to start (dropping it kills it).
    fn take_root(mut self) -> tempfile::TempDir {
        std::mem::replace(&mut self.root, tempfile::tempdir().unwrap())
    }

    fn wait_ready(&mut self) -> bool {
        let port = self.port;
        reaped::wait_ready(&mut self.child, Duration::from_secs(20), || reaped::listens(port))
    }

    /// Makes `bucket` (a directory of the served root).
    pub fn bucket(&self, bucket: &str) {
        std::fs::create_dir_all(self.root.path().join(bucket)).unwrap();
    }

    /// Puts the local file `from` at `s3://bucket/key`.
    pub fn put(&self, bucket: &str, key: &str, from: &Path) {
        let to = self.root.path().join(bucket).join(key);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }

    /// Puts every regular file of the local directory `dir` under `s3://bucket/prefix/`.
    pub fn put_dir(&self, bucket: &str, prefix: &str, dir: &Path) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                self.put(bucket, &format!("{prefix}/{}", p.file_name().unwrap().to_str().unwrap()), &p);
            }
        }
    }

    /// The environment pointing Sluice at `port` (this server's, or a proxy's in front of
    /// it) with the test credentials.
    pub fn env_for(port: u16) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
            ("AWS_ALLOW_HTTP", "true".into()),
            // No instance-metadata credential probing (it would reach past loopback).
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ]
    }

    /// [`S3Server::env_for`] this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        S3Server::env_for(self.port)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        reaped::stop(&mut self.child);
    }
}

/// What the proxy does to a request it faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Pass it through.
    None,
    /// Close the connection after part of the response body.
    Reset,
    /// Answer `503 Slow Down` (S3's throttling).
    Throttle,
    /// Send part of the body, then nothing for `stall` before closing.
    Stall,
}

/// The proxy's schedule and counts.
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests seen, by method and path (`GET /bucket/key`).
    pub requests: Mutex<Vec<String>>,
    pub resets: AtomicU64,
    pub throttles: AtomicU64,
    pub stalls: AtomicU64,
}

/// A loopback TCP proxy in front of an S3 server: one request per connection (it asks the
/// server to close after each), faulting requests whose path starts with `/{prefix}` at
/// `rate` (out of 1000) on a schedule drawn from `seed` by request number.
#[derive(Debug)]
pub struct FaultProxy {
    /// The proxy's port on 127.0.0.1.
    pub port: u16,
    /// What it saw and did.
    pub counts: Arc<Counts>,
}

impl FaultProxy {
    /// Starts the proxy to `upstream` (a port on 127.0.0.1); `stall` is how long a stalled
    /// response sends nothing (longer than the reader's stall timeout).
    pub fn start(upstream: u16, seed: u64, prefix: &str, rate: u64, stall: Duration) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Counts::default());
        let (c, prefix) = (counts.clone(), format!("/{prefix}"));
        let n = Arc::new(AtomicU64::new(0));
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (c, prefix, n) = (c.clone(), prefix.clone(), n.clone());
                std::thread::spawn(move || {
                    let _ = serve(
                        client,
                        upstream,
                        &c,
                        |method, path| {
                            if !path.starts_with(&prefix) {
                                return Fault::None;
                            }
                            let draw = splitmix(seed ^ n.fetch_add(1, Ordering::SeqCst)) % 1000;
                            match draw {
                                d if d >= rate => Fault::None,
                                d if d % 3 == 0 => Fault::Throttle,
                                // Only a GET has a body to cut.
                                _ if method != "GET" => Fault::Throttle,
                                d if d % 3 == 1 => Fault::Reset,
                                _ => Fault::Stall,
                            }
                        },
                        stall,
                        &[],
                    );
                });
            }
        });
        FaultProxy { port, counts }
    }

    /// A proxy to `upstream` that faults nothing and drops the request headers named
    /// `strip` (lowercase), e.g. a GCS client's `authorization` bearer, which an S3
    /// server without credentials refuses.
    pub fn stripping(upstream: u16, strip: &'static [&'static str]) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let c = c.clone();
                std::thread::spawn(move || {
                    let _ = serve(client, upstream, &c, |_, _| Fault::None, Duration::ZERO, strip);
                });
            }
        });
        FaultProxy { port, counts }
    }

    /// How many requests named `path` (`GET /bucket/key`, `HEAD …`) reached the proxy.
    pub fn requests_for(&self, what: &str) -> usize {
        self.counts.requests.lock().unwrap().iter().filter(|r| r.starts_with(what)).count()
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One request through the proxy.
fn serve(
    client: TcpStream,
    upstream: u16,
    counts: &Counts,
    decide: impl Fn(&str, &str) -> Fault,
    stall: Duration,
    strip: &[&str],
) -> std::io::Result<()> {
    let mut from_client = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        if from_client.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            content_length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") || strip.iter().any(|h| lower.starts_with(&format!("{h}:"))) {
            continue;
        }
        head.push(line);
    }
    let mut body = vec![0; content_length];
    from_client.read_exact(&mut body)?;
    let mut words = head.first().map(|l| l.split(' ')).into_iter().flatten();
    let (method, path) = (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").to_string());
    counts.requests.lock().unwrap().push(format!("{method} {path}"));
    let fault = decide(&method, &path);
    let mut client = client;
    if fault == Fault::Throttle {
        counts.throttles.fetch_add(1, Ordering::SeqCst);
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
        write!(
            client,
            "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{xml}",
            xml.len()
        )?;
        return client.shutdown(Shutdown::Both);
    }
    let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
    for line in &head {
        server.write_all(line.as_bytes())?;
    }
    server.write_all(b"Connection: close\r\n\r\n")?;
    server.write_all(&body)?;
    let mut from_server = BufReader::new(server);
    // The response head, passed on whole.
    let mut response_len = None;
    loop {
        let mut line = String::new();
        if from_server.read_line(&mut line)? == 0 {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            response_len = v.trim().parse::<usize>().ok();
        }
        client.write_all(line.as_bytes())?;
        if line == "\r\n" {
            break;
        }
    }
    // Cut a faulted body part-way (a response with a body of at least 2 bytes).
    let cut = match (fault, response_len) {
        (Fault::Reset | Fault::Stall, Some(len)) if len >= 2 => {
            Some((splitmix(len as u64) as usize % (len - 1)) + 1)
        }
        _ => None,
    };
    let mut buf = vec![0; 64 << 10];
    let mut sent = 0;
    loop {
        let room = cut.map_or(buf.len(), |c| (c - sent).min(buf.len()));
        if room == 0 {
            break;
        }
        let n = from_server.read(&mut buf[..room])?;
        if n == 0 {
            return Ok(());
        }
        client.write_all(&buf[..n])?;
        sent += n;
    }
    client.flush()?;
    if fault == Fault::Stall {
        counts.stalls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(stall);
    } else {
        counts.resets.fetch_add(1, Ordering::SeqCst);
    }
    client.shutdown(Shutdown::Both)
}
