//! A store per bucket (or per web server), built from the URL and the environment with
//! `object_store`'s `from_env()` builders and cached for the process; [`Object`], one
//! object's location and what a `HEAD` said of it; the one retry policy
//! ([`Retry`], [`retrying`]) and which failures are transient.
//!
//! `object_store`'s own retries are off (`max_retries: 0`): every retry happens here, so a
//! ranged GET that fails mid-body resumes at the byte it reached instead of starting over,
//! and a permanent failure (404, 403, 412) surfaces at once, naming the URL.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use url::Url;

use super::rt;

/// One object: its store, key and URL, and (once [`Object::head`] ran) its size and ETag.
#[derive(Debug, Clone)]
pub struct Object {
    /// The store holding it.
    pub store: Arc<dyn ObjectStore>,
    /// Its key in the store.
    pub key: ObjectPath,
    /// The URL as the user wrote it (what errors and origins name).
    pub url: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its ETag, when the store gives one: every ranged GET must return the same.
    pub e_tag: Option<String>,
}

impl Object {
    /// The store and key of `url`, without asking the store anything.
    pub fn locate(url: &Path) -> io::Result<Object> {
        Object::locate_in(url, false)
    }

    /// [`Object::locate`] for writing: its store retries requests itself (an upload's
    /// parts are idempotent; reads resume where they stopped instead, in `reader`).
    pub fn locate_for_write(url: &Path) -> io::Result<Object> {
        Object::locate_in(url, true)
    }

    fn locate_in(url: &Path, write: bool) -> io::Result<Object> {
        let text = url.to_str().ok_or_else(|| invalid(url, "a URL must be UTF-8"))?;
        let parsed = Url::parse(text).map_err(|e| invalid(url, &format!("not a valid URL: {e}")))?;
        let store = store_for(&parsed, write).map_err(|e| to_io(text, e))?;
        // The key is the URL's path: below the bucket, or (HTTP) below the server.
        let key = ObjectPath::from_url_path(parsed.path())
            .map_err(|e| invalid(url, &format!("bad object key: {e}")))?;
        Ok(Object { store, key, url: text.to_string(), size: 0, e_tag: None })
    }

    /// The object with its size and ETag (a `HEAD`, retried as a GET is).
    pub fn head(url: &Path) -> io::Result<Object> {
        let mut o = Object::locate(url)?;
        let retry = Retry::from_env();
        let (store, key) = (o.store.clone(), o.key.clone());
        let meta = rt::block_on(retrying(&retry, &o.url, || {
            let (store, key) = (store.clone(), key.clone());
            async move { store.head(&key).await }
        }))?;
        o.size = meta.size;
        o.e_tag = meta.e_tag;
        Ok(o)
    }
}

fn invalid(url: &Path, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{what} ({})", url.display()))
}

/// The store serving `url`'s bucket (or server), made once per process.
fn store_for(url: &Url, write: bool) -> object_store::Result<Arc<dyn ObjectStore>> {
    /// By the URL's `scheme://authority` and whether for writing.
    type Stores = HashMap<(String, bool), Arc<dyn ObjectStore>>;
    static STORES: OnceLock<Mutex<Stores>> = OnceLock::new();
    rt::install_tls();
    let root = format!("{}://{}", url.scheme(), url.authority());
    let mut stores = STORES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = stores.get(&(root.clone(), write)) {
        return Ok(s.clone());
    }
    // For reads, no retries inside object_store: `retrying` and `reader::fetch` do them,
    // resuming partial reads. Writes (idempotent parts) are retried by object_store, under
    // the same policy (see `write_retry`), each request given at most the stall timeout.
    let retry = Retry::from_env();
    let (retry_config, timeout) = if write {
        (write_retry(&retry), Some(format!("{}ms", retry.stall.as_millis())))
    } else {
        (RetryConfig { max_retries: 0, ..RetryConfig::default() }, None)
    };
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => {
            let mut b = AmazonS3Builder::from_env().with_url(url.as_str()).with_retry(retry_config);
            if let Some(t) = &timeout {
                b = b.with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), t);
            }
            Arc::new(b.build()?)
        }
        "gs" => {
            let mut b = GoogleCloudStorageBuilder::from_env().with_url(url.as_str()).with_retry(retry_config);
            if let Some(t) = &timeout {
                b = b.with_config(GoogleConfigKey::Client(ClientConfigKey::Timeout), t);
            }
            Arc::new(b.build()?)
        }
        "az" | "abfs" | "abfss" => {
            let mut b = MicrosoftAzureBuilder::from_env().with_url(url.as_str()).with_retry(retry_config);
            if let Some(t) = &timeout {
                b = b.with_config(AzureConfigKey::Client(ClientConfigKey::Timeout), t);
            }
            Arc::new(b.build()?)
        }
        _ => {
            let mut options = ClientOptions::new().with_allow_http(url.scheme() == "http");
            if write {
                options = options.with_timeout(retry.stall);
            }
            Arc::new(
                HttpBuilder::new()
                    .with_url(root.as_str())
                    .with_client_options(options)
                    .with_retry(retry_config)
                    .build()?,
            )
        }
    };
    stores.insert((root, write), store.clone());
    Ok(store)
}

/// object_store's retry policy for an upload's requests, from [`Retry`]: as many
/// retries, the same backoff (doubling, at most 5 s), and no deadline shorter than the
/// attempts themselves take. With the request timeout set to [`Retry::stall`], a server
/// that never answers fails an upload after `(retries + 1) × stall` plus the waits, as it
/// fails a read.
fn write_retry(retry: &Retry) -> RetryConfig {
    let waits: Duration = (1..=retry.retries).map(|a| retry.wait(a)).sum();
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: retry.backoff,
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: retry.retries as usize,
        retry_timeout: retry.stall.saturating_mul(retry.retries.saturating_add(1)).saturating_add(waits),
    }
}

/// How failed requests are retried: attempts, backoff and the stall timeout. From the
/// environment: `SLUICE_STORAGE_RETRIES` (attempts after the first, default 10),
/// `SLUICE_STORAGE_BACKOFF_MS` (the first wait, default 100, doubling up to 5 s) and
/// `SLUICE_STORAGE_TIMEOUT_MS` (a request or a body that sends nothing for this long
/// counts as failed, default 30 000).
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Retries after the first attempt.
    pub retries: u32,
    /// The first wait; doubled after each failure, at most 5 s.
    pub backoff: Duration,
    /// A request that answers nothing, or a body that stalls, for this long has failed.
    pub stall: Duration,
}

impl Retry {
    /// The policy, from the environment (see [`Retry`]).
    pub fn from_env() -> Retry {
        Retry {
            retries: env_num("SLUICE_STORAGE_RETRIES").unwrap_or(10) as u32,
            backoff: Duration::from_millis(env_num("SLUICE_STORAGE_BACKOFF_MS").unwrap_or(100)),
            stall: Duration::from_millis(env_num("SLUICE_STORAGE_TIMEOUT_MS").unwrap_or(30_000).max(1)),
        }
    }

    /// The wait before retry number `attempt` (from 1).
    pub fn wait(&self, attempt: u32) -> Duration {
        self.backoff.saturating_mul(1 << attempt.saturating_sub(1).min(16)).min(Duration::from_secs(5))
    }
}

/// A number from the environment variable `name`, if set and valid.
pub(crate) fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

/// True for failures worth retrying: anything but a definite answer about the object
/// (missing, forbidden, unauthenticated, changed, unsupported, a bad key or config).
pub fn is_transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    match e {
        E::Generic { .. } => http_status(e).is_none_or(|s| s >= 500 || s == 408 || s == 429),
        E::JoinError { .. } => true,
        _ => false,
    }
}

/// The HTTP status a `Generic` error carries. object_store maps 404/403/412… to their own
/// variants for GET and HEAD, but a failed list (a missing bucket) is `Generic`, its
/// status only in the text of its source chain ("…status code: 404 Not Found…"), since
/// the error type that holds it is private.
pub(crate) fn http_status(e: &object_store::Error) -> Option<u16> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if let Some(i) = text.find("status code: ") {
            return text[i + 13..].get(..3)?.parse().ok();
        }
        cur = err.source();
    }
    None
}

/// An `object_store` error as an `io::Error` naming `url`, of the kind a local file's
/// error would have (not found, permission denied).
pub fn to_io(url: &str, e: object_store::Error) -> io::Error {
    use object_store::Error as E;
    let kind = match &e {
        E::NotFound { .. } => io::ErrorKind::NotFound,
        E::Generic { .. } if http_status(&e) == Some(404) => io::ErrorKind::NotFound,
        E::Generic { .. } if matches!(http_status(&e), Some(401 | 403)) => io::ErrorKind::PermissionDenied,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        E::Precondition { .. } => io::ErrorKind::InvalidData,
        E::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
        _ => io::ErrorKind::Other,
    };
    let what = match &e {
        E::NotFound { .. } => "no such object or bucket".to_string(),
        E::Generic { .. } if http_status(&e) == Some(404) => "no such bucket or prefix".to_string(),
        E::PermissionDenied { .. } => "access denied".to_string(),
        E::Unauthenticated { .. } => "not authenticated (check the credentials)".to_string(),
        E::Precondition { .. } => "the object changed while it was read (its ETag differs)".to_string(),
        _ => e.to_string(),
    };
    io::Error::new(kind, format!("{what} ({url})"))
}

/// Runs `op` under `retry`: transient failures and stalls (no answer within the stall
/// timeout) are retried with backoff; a permanent failure, or the last transient one, is
/// returned as an `io::Error` naming `url`.
pub async fn retrying<T, F, Fut>(retry: &Retry, url: &str, mut op: F) -> io::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    let mut attempt = 0;
    loop {
        let failure = match tokio::time::timeout(retry.stall, op()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) if !is_transient(&e) => return Err(to_io(url, e)),
            Ok(Err(e)) => to_io(url, e),
            Err(_) => stalled(url, retry.stall),
        };
        attempt += 1;
        if attempt > retry.retries {
            return Err(gave_up(failure, attempt));
        }
        tokio::time::sleep(retry.wait(attempt)).await;
    }
}

/// The error of a request that answered nothing for `stall`.
pub(crate) fn stalled(url: &str, stall: Duration) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("no answer for {stall:?} ({url})"))
}

/// The last failure, after `attempts` tries.
pub(crate) fn gave_up(last: io::Error, attempts: u32) -> io::Error {
    io::Error::new(last.kind(), format!("{last}; gave up after {attempts} attempts"))
}
