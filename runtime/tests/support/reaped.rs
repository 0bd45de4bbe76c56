//! A test server's process that cannot outlive the test process: it runs under `sh`, which
//! kills it (SIGKILL) once the test process's end of the shell's stdin closes, that is when
//! the server's handle is dropped or when the test process exits, however it exits. A
//! server kept in a `static` (one per test binary) is never dropped, and without this it
//! would go on running after the tests. Also what the servers' harnesses share: a free
//! port, the wait for a server to answer, and one plain HTTP request. `#[path]`-included
//! by `s3.rs`, `gcs.rs` and `azurite.rs`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `bin args…` in `dir`, its output discarded. The returned `Child` is the shell:
/// it exits when the server does (so `try_wait` sees a server that failed to start), and
/// [`stop`] ends both.
pub fn spawn(bin: &Path, args: &[String], dir: &Path) -> Child {
    // fd 3 keeps the shell's stdin for the watcher: an asynchronous list of a
    // non-interactive shell otherwise reads /dev/null.
    let script =
        r#"exec 3<&0; "$@" </dev/null & pid=$!; (cat <&3 >/dev/null; kill -9 $pid 2>/dev/null) & wait $pid"#;
    Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(bin)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()))
}

/// Kills the server `spawn` started and waits for its shell.
pub fn stop(child: &mut Child) {
    drop(child.stdin.take());
    let _ = child.wait();
}

/// A port of 127.0.0.1 free now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits up to `timeout` for `answers()` (the server on its port answers): false when the
/// server (`child`, its shell) exits first or the time runs out.
pub fn wait_ready(child: &mut Child, timeout: Duration, answers: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if answers() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether something listens on 127.0.0.1:`port`.
pub fn listens(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// One HTTP/1.1 request to 127.0.0.1:`port` (the connection closed after it): the
/// answer's status and whole response.
pub fn request(
    port: u16,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)?;
    let status = answer.split(|&b| b == b' ').nth(1).and_then(|c| std::str::from_utf8(c).ok()?.parse().ok());
    Ok((status.unwrap_or(0), answer))
}
