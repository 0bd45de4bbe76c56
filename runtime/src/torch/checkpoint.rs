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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_that_saved_is_found_and_a_stale_one_removed() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("ckpt.safetensors");
        assert_eq!(saved_by(&model).unwrap(), None);
        let touch = |rank, ranks| std::fs::write(state_path(&model, rank, ranks), b"").unwrap();
        (0..2).for_each(|r| touch(r, 2));
        assert_eq!(saved_by(&model).unwrap(), Some(2));
        // A job of three saved beside them: two sizes are an error naming both.
        (0..3).for_each(|r| touch(r, 3));
        let e = saved_by(&model).unwrap_err().to_string();
        assert!(e.contains("jobs of 2 and 3 ranks") && e.contains("rank0-of-2.state"), "{e}");
        // Once the job of three has written its own, the states of two are removed.
        remove_stale(&model, 3).unwrap();
        assert_eq!(saved_by(&model).unwrap(), Some(3));
        assert!(!state_path(&model, 1, 2).exists());
        touch(0, 1);
        remove_stale(&model, 1).unwrap();
        assert_eq!(saved_by(&model).unwrap(), Some(1));
    }
}
