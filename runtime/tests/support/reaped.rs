//! A test server's process that cannot outlive the test process: it runs under `sh`, which
//! kills it (SIGKILL) once the test process's end of the shell's stdin closes, that is when
//! the server's handle is dropped or when the test process exits, however it exits. A
//! server kept in a `static` (one per test binary) is never dropped, and without this it
//! would go on running after the tests. `#[path]`-included by `gcs.rs` and `azurite.rs`.

use std::path::Path;
use std::process::{Child, Command, Stdio};

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
