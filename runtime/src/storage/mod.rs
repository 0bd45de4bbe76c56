//! Object storage: files that live in a bucket (`s3://`, `gs://`, `az://`) or behind a URL
//! (`https://`), read and written through Apache Arrow's `object_store` crate.
//!
//! A location travels through the runtime as a `PathBuf` holding the URL intact (origins,
//! error messages and the process-wide path table see it as any path); [`is_url`] tells
//! the two apart where a file is opened, listed or written. `file://` URLs are local paths
//! ([`local_path`]). Everything async stays in this module: one tokio runtime
//! ([`rt`]) owned by it, on which the pipeline's plain reader threads block.
//!
//! - [`store`]: a store per bucket (`from_env()` builders, cached), the one retry policy
//!   and which failures are transient.
//! - [`glob`]: glob patterns over a bucket, listed from the prefix before the first
//!   wildcard and matched as local globs are.
//! - [`reader`]: [`ObjectReader`], a `Read` made of ranged GETs, several in flight, with a
//!   bounded read-ahead; a failed GET resumes at the byte where it stopped.
//! - [`writer`]: [`ObjectWriter`], a `Write` as a multipart upload that appears whole on
//!   `finish` and never otherwise.
//!
//! Credentials and endpoints come from the environment as each store's `from_env()`
//! reads them: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL` (an S3-compatible store), `AWS_ALLOW_HTTP=true` (a
//! plain-http endpoint); `GOOGLE_SERVICE_ACCOUNT` / `GOOGLE_APPLICATION_CREDENTIALS`;
//! `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_KEY`…
//! Emulators need no code here either: `GOOGLE_BASE_URL`, `GOOGLE_SKIP_SIGNATURE=true` and
//! `GOOGLE_ALLOW_HTTP=true` point `gs://` at a fake GCS server, and
//! `AZURE_STORAGE_USE_EMULATOR=true` with `AZURITE_BLOB_STORAGE_URL` points `az://` at
//! Azurite (what `tests/storage_gcs_az.rs` runs against).

pub mod glob;
pub mod reader;
pub mod rt;
pub mod store;
pub mod writer;

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub use reader::{ObjectReader, ReadOptions};
pub use store::Object;
pub use writer::{ObjectWriter, PartialFile, Sink};

/// The URL schemes read through `object_store`.
pub const SCHEMES: [&str; 8] = ["s3", "s3a", "gs", "az", "abfs", "abfss", "http", "https"];

/// True when `path` is a URL of an object store or web server (`s3://…`, `gs://…`,
/// `az://…`, `https://…`), false for a local path (`file://` URLs included).
pub fn is_url(path: &Path) -> bool {
    path.to_str().and_then(|s| s.split_once("://")).is_some_and(|(scheme, _)| SCHEMES.contains(&scheme))
}

/// A `file://` URL as the local path it names; any other path unchanged.
pub fn local_path(path: &Path) -> PathBuf {
    match path.to_str().and_then(|s| s.strip_prefix("file://")) {
        Some(rest) => PathBuf::from(rest),
        None => path.to_path_buf(),
    }
}

/// What a file is read from: a local file or an object streamed by ranged GETs.
#[derive(Debug)]
pub enum Source {
    /// A local file.
    File(File),
    /// An object in a store.
    Object(Box<ObjectReader>),
}

impl Read for Source {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::File(f) => f.read(buf),
            Source::Object(o) => o.read(buf),
        }
    }
}

/// Opens a local file or an object for reading; returns it and its size (`None` for a
/// local file that is not a regular one: a pipe's size is unknown). A missing object is
/// an `io::ErrorKind::NotFound` error, as a missing file is.
pub fn open(path: &Path) -> io::Result<(Source, Option<u64>)> {
    if is_url(path) {
        let reader = ObjectReader::open(path, ReadOptions::from_env())?;
        let size = reader.size();
        return Ok((Source::Object(Box::new(reader)), Some(size)));
    }
    let file = File::open(local_path(path))?;
    let meta = file.metadata()?;
    Ok((Source::File(file), meta.is_file().then_some(meta.len())))
}

/// The whole contents of a local file or an object.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    if !is_url(path) {
        return std::fs::read(local_path(path));
    }
    let (mut source, size) = open(path)?;
    let mut out = Vec::with_capacity(usize::try_from(size.unwrap_or(0)).unwrap_or(0));
    source.read_to_end(&mut out)?;
    Ok(out)
}

/// The size in bytes of a local file or an object.
pub fn size(path: &Path) -> io::Result<u64> {
    if is_url(path) { Ok(Object::head(path)?.size) } else { Ok(std::fs::metadata(local_path(path))?.len()) }
}

/// True when `path` names an existing regular file or object (an object-store error other
/// than "not found" is reported, not taken for absence).
pub fn exists(path: &Path) -> io::Result<bool> {
    if !is_url(path) {
        return Ok(local_path(path).is_file());
    }
    match Object::head(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes a local file or an object; one that is already absent is no error.
pub fn remove(path: &Path) -> io::Result<()> {
    if !is_url(path) {
        return match std::fs::remove_file(local_path(path)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            done => done,
        };
    }
    use object_store::ObjectStoreExt;
    let o = Object::locate(path)?;
    let retry = store::Retry::from_env();
    let gone = rt::block_on(store::retrying(&retry, &o.url, || {
        let (store, key) = (o.store.clone(), o.key.clone());
        async move { store.delete(&key).await }
    }));
    match gone {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

/// `name` inside the directory `dir` (a local directory or a URL prefix).
pub fn join(dir: &Path, name: &str) -> PathBuf {
    if is_url(dir) {
        let d = dir.to_str().unwrap_or_default().trim_end_matches('/');
        PathBuf::from(format!("{d}/{name}"))
    } else {
        local_path(dir).join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_url(Path::new("s3://bucket/a/b.tfrecord")));
        assert!(is_url(Path::new("gs://bucket/x")));
        assert!(is_url(Path::new("https://example.com/data.tfrecord")));
        assert!(!is_url(Path::new("file:///tmp/x")));
        assert!(!is_url(Path::new("data/train-*.tfrecord")));
        assert!(!is_url(Path::new("weird://x")));
        assert_eq!(local_path(Path::new("file:///tmp/x")), PathBuf::from("/tmp/x"));
        assert_eq!(join(Path::new("s3://b/out/"), "part-0"), PathBuf::from("s3://b/out/part-0"));
    }

    #[test]
    fn a_url_survives_as_a_path() {
        let p = PathBuf::from("s3://bucket/dir/train-0.tfrecord.gz");
        assert_eq!(p.display().to_string(), "s3://bucket/dir/train-0.tfrecord.gz");
        assert_eq!(p.extension().unwrap(), "gz");
        let mut idx = p.clone().into_os_string();
        idx.push(".idx");
        assert_eq!(PathBuf::from(idx).to_str().unwrap(), "s3://bucket/dir/train-0.tfrecord.gz.idx");
    }
}
