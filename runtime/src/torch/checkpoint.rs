//! Where a checkpoint's pipeline states lie beside its model: `PATH.state` for one
//! process, `PATH.rankR-of-W.state` for each rank of a job of W; which job saved them, and
//! the removal of a stale job's.

use std::path::Path;

use crate::error::{Error, Result};

/// Where [`Trainer::save_checkpoint`](super::Trainer::save_checkpoint) puts rank `rank` of `ranks`' pipeline state:
/// `PATH.state` for one process, `PATH.rankR-of-W.state` for a job of several.
pub(super) fn state_path(model: &Path, rank: usize, ranks: usize) -> std::path::PathBuf {
    let mut name = model.as_os_str().to_owned();
    if ranks > 1 {
        name.push(format!(".rank{rank}-of-{ranks}"));
    }
    name.push(".state");
    name.into()
}

/// The states beside `model`, by the number of ranks of the job that saved them (1: the
/// `.state` of a one-rank job), as `(ranks, rank 0's path)`.
fn saved_states(model: &Path) -> Result<Vec<(usize, std::path::PathBuf)>> {
    let mut found = Vec::new();
    let one = state_path(model, 0, 1);
    if one.exists() {
        found.push((1, one));
    }
    let dir = model.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(file) = model.file_name() else { return Ok(found) };
    let prefix = format!("{}.rank0-of-", file.to_string_lossy());
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(Error::Io { path: dir.to_path_buf(), source: e }),
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(ranks) = name.strip_prefix(&prefix).and_then(|n| n.strip_suffix(".state")?.parse().ok()) {
            found.push((ranks, e.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// The number of ranks of the job whose states lie beside `model`, if any; an error when
/// states of jobs of several sizes do (a checkpoint interrupted while it was written).
pub(super) fn saved_by(model: &Path) -> Result<Option<usize>> {
    let found = saved_states(model)?;
    match found.as_slice() {
        [] => Ok(None),
        [(ranks, _)] => Ok(Some(*ranks)),
        [(a, p), (b, q), ..] => Err(Error::Invalid(format!(
            "{}: the pipeline positions of jobs of {a} and {b} ranks lie beside it ({}, {}): remove the stale ones",
            model.display(),
            p.display(),
            q.display()
        ))),
    }
}

/// Removes the states beside `model` of jobs of another size than `world` (stale once a
/// job of `world` ranks has written its own).
pub(super) fn remove_stale(model: &Path, world: usize) -> Result<()> {
    for (ranks, _) in saved_states(model)?.into_iter().filter(|(r, _)| *r != world) {
        for r in 0..ranks {
            let stale = state_path(model, r, ranks);
            match std::fs::remove_file(&stale) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::Io { path: stale, source: e });
                }
                _ => {}
            }
        }
    }
    Ok(())
}
