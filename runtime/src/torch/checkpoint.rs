//! Where a checkpoint's pipeline states lie beside its model: `PATH.state`, one state for
//! a job of one process, else every rank's (gathered to rank 0, which writes them: no
//! shared file system needed); the per-rank `PATH.rankR-of-W.state` of earlier versions
//! are still read, and removed once a new checkpoint is written.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::stage::PipelineState;

/// `PATH.state` beside the model `PATH`: where the states of a checkpoint lie.
pub(super) fn states_path(model: &Path) -> PathBuf {
    state_path(model, 0, 1)
}

/// Where the earlier versions put rank `rank` of `ranks`' pipeline state: `PATH.state`
/// for one process, `PATH.rankR-of-W.state` for a job of several.
fn state_path(model: &Path, rank: usize, ranks: usize) -> PathBuf {
    let mut name = model.as_os_str().to_owned();
    if ranks > 1 {
        name.push(format!(".rank{rank}-of-{ranks}"));
    }
    name.push(".state");
    name.into()
}

/// Writes the states of every rank of a job, in rank order, to `PATH.state` (a temporary
/// file renamed into place: a crash leaves the old states or the new ones), and removes
/// the per-rank states of earlier versions beside it.
pub(super) fn write_states(model: &Path, states: &[PipelineState]) -> Result<()> {
    let path = states_path(model);
    let bytes = match states {
        [one] => one.to_bytes(),
        all => PipelineState::set_to_bytes(all)?,
    };
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| Error::Io { path: p, source }
    };
    let tmp = path.with_extension("state-tmp");
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    remove_per_rank(model)
}

/// The bytes of the states beside `model`: `PATH.state`, else the per-rank states of an
/// earlier version's job (framed as a set); `None` for a model saved alone.
pub(super) fn read_states(model: &Path) -> Result<Option<Vec<u8>>> {
    let path = states_path(model);
    match std::fs::read(&path) {
        Ok(b) => return Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(Error::Io { path, source }),
    }
    let ranks = match per_rank_states(model)?.as_slice() {
        [] => return Ok(None),
        [(ranks, _)] => *ranks,
        [(a, p), (b, q), ..] => {
            return Err(Error::Invalid(format!(
                "{}: the pipeline positions of jobs of {a} and {b} ranks lie beside it ({}, {}): remove the stale ones",
                model.display(),
                p.display(),
                q.display()
            )));
        }
    };
    let states =
        (0..ranks).map(|r| PipelineState::load(state_path(model, r, ranks))).collect::<Result<Vec<_>>>()?;
    PipelineState::set_to_bytes(&states).map(Some)
}

/// The per-rank states of earlier versions beside `model`, by the number of ranks of the
/// job that saved them, as `(ranks, rank 0's path)`.
fn per_rank_states(model: &Path) -> Result<Vec<(usize, PathBuf)>> {
    let mut found = Vec::new();
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

/// Removes the per-rank states of earlier versions beside `model` (stale once
/// `PATH.state` holds a newer checkpoint's).
fn remove_per_rank(model: &Path) -> Result<()> {
    for (ranks, _) in per_rank_states(model)? {
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

    fn state(position: u64) -> PipelineState {
        PipelineState {
            pipeline: "p".into(),
            fingerprint: 1,
            epoch: 0,
            position,
            stages: Vec::new(),
            redeal: Vec::new(),
        }
    }

    #[test]
    fn one_file_holds_every_rank_and_an_earlier_versions_are_read_then_removed() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("ckpt.safetensors");
        assert_eq!(read_states(&model).unwrap(), None);
        let read = |model: &Path| {
            let b = read_states(model).unwrap().unwrap();
            PipelineState::set_from_bytes(&b, "x").unwrap()
        };
        // One process: a plain state, as `PipelineState::load` reads it.
        write_states(&model, &[state(4)]).unwrap();
        assert_eq!(PipelineState::load(states_path(&model)).unwrap(), state(4));
        assert_eq!(read(&model), [state(4)]);
        // A job of three: one file, in rank order.
        let three = [state(1), state(2), state(3)];
        write_states(&model, &three).unwrap();
        assert_eq!(read(&model), three);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        // An earlier version's per-rank states: read as a set, two job sizes refused.
        let old = dir.path().join("old.safetensors");
        let touch = |rank, ranks| state(rank as u64).save(state_path(&old, rank, ranks)).unwrap();
        (0..2).for_each(|r| touch(r, 2));
        assert_eq!(read(&old), [state(0), state(1)]);
        (0..3).for_each(|r| touch(r, 3));
        let e = read_states(&old).unwrap_err().to_string();
        assert!(e.contains("jobs of 2 and 3 ranks") && e.contains("rank0-of-2.state"), "{e}");
        // A new checkpoint beside them removes them.
        write_states(&old, &three).unwrap();
        assert_eq!(read(&old), three);
        assert!(!state_path(&old, 1, 2).exists() && !state_path(&old, 2, 3).exists());
        // One of them missing: the error names it.
        let lost = dir.path().join("lost.safetensors");
        let touch = |rank| state(rank as u64).save(state_path(&lost, rank, 2)).unwrap();
        touch(0);
        std::fs::write(state_path(&lost, 1, 2).with_extension("tmp"), b"").unwrap();
        let e = read_states(&lost).unwrap_err().to_string();
        assert!(e.contains("lost.safetensors.rank1-of-2.state"), "{e}");
    }
}
