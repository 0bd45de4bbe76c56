//! Glob patterns over a bucket: `s3://bucket/train/part-*.tfrecord` lists the prefix
//! before the first wildcard (`s3://bucket/train/`) and keeps the keys the pattern
//! matches with the semantics of local globs (`*` and `?` stay within one `/`-separated
//! component, `[...]` classes, `**` any depth), sorted. A URL without a wildcard is one
//! object, which must exist.

use std::io;
use std::path::{Path, PathBuf};

use futures_util::TryStreamExt;
use glob::{MatchOptions, Pattern};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use super::rt;
use super::store::{Object, Retry, retrying};

/// The URLs of the objects `pattern` matches, sorted; an empty list when it has a wildcard
/// and matches nothing. Record indexes (`*.idx`) are left out, as locally. A missing
/// bucket is an error naming the URL.
pub fn expand(pattern: &Path) -> io::Result<Vec<PathBuf>> {
    let text = pattern.to_str().unwrap_or_default();
    let (scheme_and_bucket, key_pattern) = split(text);
    let Some(wild) = key_pattern.find(['*', '?', '[']) else {
        // One object: it must be there (a HEAD, so a missing one fails here, naming it).
        Object::head(pattern)?;
        return Ok(vec![pattern.to_path_buf()]);
    };
    let matcher = Pattern::new(key_pattern).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("bad file pattern `{text}`: {e}"))
    })?;
    // List the directory the first wildcard is in (object_store lists whole components).
    let dir = key_pattern[..wild].rsplit_once('/').map_or("", |(d, _)| d);
    let root = Object::locate(Path::new(&format!("{scheme_and_bucket}/{dir}")))?;
    let prefix = (!dir.is_empty()).then(|| ObjectPath::from(dir));
    let retry = Retry::from_env();
    let keys = rt::block_on(retrying(&retry, text, || list(root.store.clone(), prefix.clone())))?;
    let opts = MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    let mut urls: Vec<PathBuf> = keys
        .into_iter()
        .filter(|k| matcher.matches_with(k, opts) && !k.ends_with(".idx"))
        .map(|k| PathBuf::from(format!("{scheme_and_bucket}/{k}")))
        .collect();
    urls.sort();
    Ok(urls)
}

/// Every key under `prefix`.
async fn list(
    store: std::sync::Arc<dyn ObjectStore>,
    prefix: Option<ObjectPath>,
) -> object_store::Result<Vec<String>> {
    store.list(prefix.as_ref()).map_ok(|m| m.location.to_string()).try_collect().await
}

/// `s3://bucket/a/b*` as `("s3://bucket", "a/b*")`.
fn split(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => (&url[..after_scheme + i], &url[after_scheme + i + 1..]),
        None => (url, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_bucket_from_the_key_pattern() {
        assert_eq!(split("s3://b/train/x-*.tfrecord"), ("s3://b", "train/x-*.tfrecord"));
        assert_eq!(split("s3://b"), ("s3://b", ""));
        assert_eq!(split("https://host:8080/d/f"), ("https://host:8080", "d/f"));
    }

    #[test]
    fn wildcards_stay_within_a_component() {
        let opts = MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        let p = Pattern::new("train/*.tfrecord").unwrap();
        assert!(p.matches_with("train/a.tfrecord", opts));
        assert!(!p.matches_with("train/sub/a.tfrecord", opts));
        assert!(Pattern::new("train/**/*.tfrecord").unwrap().matches_with("train/sub/a.tfrecord", opts));
    }
}
