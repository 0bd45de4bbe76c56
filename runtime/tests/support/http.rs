//! A static-file web server on 127.0.0.1 for the `https://`/`http://` object tests: `GET`
//! and `HEAD` of the files under a directory, byte ranges (`Range: bytes=a-b`, answered
//! `206` with `Content-Range`), an `ETag` from each file's length and modification time,
//! `404` for anything else; one request per connection. It counts the requests made for
//! each path, so a test can see that a missing object was asked for once. No credentials,
//! no network beyond loopback. It is a real (small) HTTP server, not a mock of a store.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The server; it stops serving when the test process ends.
pub struct WebServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

impl WebServer {
    /// Serves the files under `root` on a free port.
    pub fn start(root: &Path) -> WebServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let (root, c) = (root.to_path_buf(), counts.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (root, c) = (root.clone(), c.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &root, &c);
                });
            }
        });
        WebServer { port, counts }
    }

    /// `http://127.0.0.1:PORT/name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// Requests made so far for `/name`.
    pub fn requests_for(&self, name: &str) -> usize {
        self.counts.lock().unwrap().get(&format!("/{name}")).copied().unwrap_or(0)
    }
}

/// Answers one request on `conn`.
fn serve(mut conn: TcpStream, root: &Path, counts: &Mutex<HashMap<String, usize>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("/").to_string());
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_string());
        }
    }
    *counts.lock().unwrap().entry(target.clone()).or_default() += 1;
    let path: PathBuf = root.join(target.trim_start_matches('/'));
    let file = match (method.as_str(), std::fs::File::open(&path)) {
        ("GET" | "HEAD", Ok(f)) if f.metadata()?.is_file() => f,
        _ => {
            return conn
                .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    };
    let meta = file.metadata()?;
    let len = meta.len();
    let mtime = meta.modified()?.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let etag = format!("\"{len:x}-{mtime:x}\"");
    // `bytes=a-b` or `bytes=a-`, inclusive; anything else is the whole file.
    let span = range.as_deref().and_then(|r| r.strip_prefix("bytes=")).and_then(|r| {
        let (a, b) = r.split_once('-')?;
        let a: u64 = a.parse().ok()?;
        let b: u64 = if b.is_empty() { len.checked_sub(1)? } else { b.parse::<u64>().ok()?.min(len - 1) };
        (a <= b && b < len).then_some((a, b))
    });
    let (status, start, n, extra) = match span {
        Some((a, b)) => {
            ("206 Partial Content", a, b - a + 1, format!("Content-Range: bytes {a}-{b}/{len}\r\n"))
        }
        None => ("200 OK", 0, len, String::new()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {n}\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\n{extra}Connection: close\r\n\r\n"
    );
    conn.write_all(head.as_bytes())?;
    if method == "GET" {
        let mut f = file;
        f.seek(SeekFrom::Start(start))?;
        std::io::copy(&mut f.take(n), &mut conn)?;
    }
    conn.flush()
}
