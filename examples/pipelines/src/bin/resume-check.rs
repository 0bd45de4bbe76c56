//! Runs a pipeline of `tests/pipes/resume.pipe` for some epochs and prints a digest of
//! every element (`EPOCH DIGEST` per line, the digest an FNV-1a hash of the batch's
//! columns), so that a run stopped and resumed in another process can be compared with an
//! uninterrupted one (`examples/pipelines/tests/it/resume.rs`).
//!
//! ```text
//! resume-check PIPELINE FILES EPOCHS                          the whole run
//! resume-check PIPELINE FILES EPOCHS --stop-after N STATE     N elements, then the state
//! resume-check PIPELINE FILES EPOCHS --resume STATE           the rest of the run
//! resume-check PIPELINE FILES EPOCHS --resume-recompute STATE the same, ignoring the
//!                                     state's stage positions (as a version 1 state
//!                                     resumes: every filter before the position runs again)
//! ```
//!
//! Exit 1 with `error: …` on a pipeline error or a state that does not fit.

use std::process::ExitCode;

use sluice::runtime::column::{AnyColumn, NamedColumns};
use sluice::runtime::stage::{Ctx, Dataset, PipelineState, RuntimeOptions};
use sluice_examples::corpus::{resume_image, resume_tabular};

fn digest(batch: impl NamedColumns) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h = (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, column) in batch.into_named_columns() {
        eat(name.as_bytes());
        match column {
            AnyColumn::Dense { shape, data } => {
                eat(format!("{shape:?}").as_bytes());
                eat(data.as_bytes());
            }
            AnyColumn::Ragged { values, offsets } => {
                eat(values.as_bytes());
                eat(format!("{offsets:?}").as_bytes());
            }
        }
    }
    h
}

/// How the run goes: all of it, stop after `n` elements, or resume.
enum Mode {
    All,
    Stop(u64, String),
    Resume(String, bool),
}

/// Runs `epochs` passes of `ds` (from `start` when resuming), printing digests; on a stop,
/// `state(epoch, position)` is saved.
fn run<D: Dataset>(
    ds: &D,
    epochs: u64,
    mode: &Mode,
    state: &dyn Fn(u64, u64) -> sluice::Result<PipelineState>,
    check: &dyn Fn(&PipelineState) -> sluice::Result<()>,
) -> sluice::Result<()>
where
    D::Item: NamedColumns,
{
    let ctx = Ctx::new(&RuntimeOptions::default());
    let (first, mut skip, mut resumed) = match mode {
        Mode::Resume(path, recompute) => {
            let mut s = PipelineState::load(path)?;
            check(&s)?;
            if *recompute {
                s.stages.clear();
            }
            (s.epoch, s.position, Some(s))
        }
        _ => (0, 0, None),
    };
    let mut emitted = 0;
    for epoch in first..epochs {
        // The resumed pass starts each filter at its saved input position.
        let pass_ctx = match resumed.take() {
            Some(s) => s.ctx(&ctx),
            None => ctx.with_epoch(epoch),
        };
        for (position, item) in (skip..).zip(ds.stream_from(&pass_ctx, skip)?) {
            if let Mode::Stop(n, path) = mode
                && emitted == *n
            {
                return state(epoch, position)?.with_stage_positions(ds).save(path);
            }
            println!("{epoch} {:016x}", digest(item?));
            emitted += 1;
        }
        skip = 0;
    }
    if let Mode::Stop(_, path) = mode {
        // Stopped at the very end: the next run starts after the last epoch.
        state(epochs, 0)?.save(path)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || {
        eprintln!(
            "usage: resume-check PIPELINE FILES EPOCHS [--stop-after N STATE | --resume STATE | --resume-recompute STATE]"
        );
        ExitCode::from(2)
    };
    let (Some(name), Some(files), Some(Ok(epochs))) =
        (args.first(), args.get(1), args.get(2).map(|e| e.parse()))
    else {
        return usage();
    };
    let mode = match args.get(3).map(String::as_str) {
        None => Mode::All,
        Some("--stop-after") => match (args.get(4).map(|n| n.parse()), args.get(5)) {
            (Some(Ok(n)), Some(path)) => Mode::Stop(n, path.clone()),
            _ => return usage(),
        },
        Some(flag @ ("--resume" | "--resume-recompute")) => match args.get(4) {
            Some(path) => Mode::Resume(path.clone(), flag == "--resume-recompute"),
            None => return usage(),
        },
        Some(_) => return usage(),
    };
    let result = match name.as_str() {
        "resume_tabular" => {
            let p = resume_tabular::Params { files: files.clone(), ..Default::default() };
            resume_tabular::dataset(&p).and_then(|ds| {
                run(&ds, epochs, &mode, &|e, pos| resume_tabular::state(&p, e, pos), &|s| {
                    resume_tabular::check_state(&p, s)
                })
            })
        }
        "resume_image" => {
            let p = resume_image::Params { files: files.clone(), ..Default::default() };
            resume_image::dataset(&p).and_then(|ds| {
                run(&ds, epochs, &mode, &|e, pos| resume_image::state(&p, e, pos), &|s| {
                    resume_image::check_state(&p, s)
                })
            })
        }
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
