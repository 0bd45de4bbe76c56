//! Resolving the file arguments of a command: each must exist; a directory stands for
//! the TFRecord files in it. An object's URL (`s3://…`, `gs://…`, `https://…`) is a file
//! like any other (checked with a `HEAD`); a URL pattern is expanded by listing its
//! bucket.

use std::path::{Path, PathBuf};

use sluice_runtime::storage;

use super::Failure;

/// Checks every path before any output, so a typo fails fast with exit status 2.
pub fn check_files(paths: &[PathBuf]) -> Result<(), Failure> {
    for p in paths {
        if storage::is_url(p) {
            match storage::Object::head(p) {
                Ok(_) => continue,
                Err(e) => return Err(Failure::Usage(e.to_string())),
            }
        }
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => {
                return Err(Failure::Usage(format!(
                    "{}: is a directory, expected a TFRecord file",
                    p.display()
                )));
            }
            Ok(_) => {}
            Err(e) => return Err(Failure::Usage(format!("{}: {e}", p.display()))),
        }
    }
    Ok(())
}

/// Expands directories into their `*.tfrecord[.gz|.zlib]` files (sorted); files stay.
/// A URL is a directory too when it ends in `/` or does not name a TFRecord file and
/// its prefix holds TFRecord objects ([`expand_url_dir`]).
pub fn expand_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for p in paths {
        if storage::is_url(p) {
            out.extend(expand_url_dir(p)?);
            continue;
        }
        let meta = std::fs::metadata(p).map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        if !meta.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| is_tfrecord_name(f))
            .collect();
        if found.is_empty() {
            return Err(Failure::Usage(format!("{}: no *.tfrecord files in this directory", p.display())));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// A URL argument as the objects it stands for: itself when it names a TFRecord object
/// (`….tfrecord[.gz|.zlib]`, not checked here: opening it says if it is missing), else
/// the `*.tfrecord[.gz|.zlib]` objects under it as a directory (one listing, sorted),
/// else itself when it is an object (a `HEAD`). Neither is a usage error naming the URL.
fn expand_url_dir(url: &Path) -> Result<Vec<PathBuf>, Failure> {
    let text = url.to_string_lossy();
    // A web server has no listing: an `https://` URL is one object.
    let web = text.starts_with("http://") || text.starts_with("https://");
    if web || (!text.ends_with('/') && is_tfrecord_name(url)) {
        return Ok(vec![url.to_path_buf()]);
    }
    let dir = text.trim_end_matches('/');
    let pattern = PathBuf::from(format!("{dir}/*.tfrecord*"));
    let found: Vec<PathBuf> = storage::glob::expand(&pattern)
        .map_err(|e| Failure::Usage(e.to_string()))?
        .into_iter()
        .filter(|f| is_tfrecord_name(f))
        .collect();
    if !found.is_empty() {
        return Ok(found);
    }
    if !text.ends_with('/') && storage::exists(url).map_err(|e| Failure::Usage(e.to_string()))? {
        return Ok(vec![url.to_path_buf()]);
    }
    Err(Failure::Usage(format!("{text}: no such object, and no *.tfrecord objects under this prefix")))
}

fn is_tfrecord_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    [".tfrecord", ".tfrecord.gz", ".tfrecord.zlib"].iter().any(|s| name.ends_with(s))
}

/// Expands arguments that name no file but hold a glob pattern (`'data/*.tfrecord'`
/// quoted past the shell) into the files they match, sorted; a pattern that matches
/// nothing is a usage error. A pattern never picks up index files (`*.idx`: see
/// `stage::files`). Other arguments stay as they are.
pub fn expand_globs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for p in paths {
        let text = p.to_string_lossy();
        if p.exists() || !text.contains(['*', '?', '[']) {
            out.push(p.clone());
            continue;
        }
        let files = sluice_runtime::stage::files(&text).map_err(|e| Failure::Usage(e.to_string()))?;
        out.extend(files.paths().iter().cloned());
    }
    Ok(out)
}
