//! `--engine interpreted` of `sluice run` and `sluice show`: the pipeline's physical plan
//! run at once by `sluice-engine`, in this process, with no code generated and no cargo.
//! The flags are the ones a compiled runner takes (parsed by `runner::parse_args`), and
//! the output is the compiled runner's (`runner::run`: the same `show` JSON lines, the
//! same report, which names the engine).
//!
//! Exit status: as the compiled path's: 1 for the file's diagnostics, a pipeline the
//! engine does not run yet (the message names the stage or operation and says to run it
//! with `--engine compiled`) or a data error; 2 for a bad invocation or parameter.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::ValueEnum;

use super::Failure;

/// Which backend runs a pipeline (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// The compiled runner when one is cached for this plan, else the engine at once
    /// (cargo only for a pipeline the engine does not run yet).
    Auto,
    /// The engine in this tool: runs at once, no Rust toolchain needed.
    Interpreted,
    /// Generated Rust built by cargo into a cached runner (the fastest runs).
    Compiled,
}

/// Why the engine does not run `pipeline` of `file` (its refusal), or `None` when it
/// does; the file is known to compile.
pub(super) fn refusal(
    file: &Path,
    pipeline: Option<&str>,
) -> Result<Option<sluice_engine::EngineError>, Failure> {
    let source = super::check::read_source(file)?;
    let compilation = sluice_compiler::compile(&source);
    let p = &compilation.pipelines[resolve(file, &compilation, pipeline)?];
    Ok(sluice_engine::check_in(&compilation.pipelines, p).err())
}

/// The index of `pipeline` in `compilation` (the only one when `None`), or the usage
/// error a compiled runner gives.
fn resolve(
    file: &Path,
    compilation: &sluice_compiler::Compilation,
    pipeline: Option<&str>,
) -> Result<usize, Failure> {
    let names: Vec<&str> = compilation.pipelines.iter().map(|p| p.name()).collect();
    Ok(match pipeline {
        Some(p) => names.iter().position(|n| *n == p).ok_or_else(|| {
            Failure::Usage(format!(
                "{}: no pipeline `{p}` (the file has {})",
                file.display(),
                names.join(", ")
            ))
        })?,
        None if names.is_empty() => {
            return Err(Failure::Usage(format!("{}: the file has no pipeline to run", file.display())));
        }
        None if names.len() > 1 => {
            return Err(Failure::Usage(format!(
                "{}: name the pipeline to run: {}",
                file.display(),
                names.join(", ")
            )));
        }
        None => 0,
    })
}

/// Runs `pipeline` of `file` in the engine with the runner arguments `argv` (the flags
/// after the pipeline's name, as a compiled runner takes them).
pub(super) fn run(file: &Path, pipeline: Option<&str>, argv: Vec<OsString>) -> Result<ExitCode, Failure> {
    // As a compiled runner's `main` does: 4 KiB pages, resident memory close to what the
    // pipeline holds.
    sluice::__private::small_pages();
    let source = super::check::read_source(file)?;
    let compilation = sluice_compiler::compile(&source);
    if super::check::report(file, &source, &compilation.diagnostics)? {
        return Ok(ExitCode::from(1));
    }
    let index = resolve(file, &compilation, pipeline)?;
    let names: Vec<&str> = compilation.pipelines.iter().map(|p| p.name()).collect();
    let p = &compilation.pipelines[index];
    if let Err(e) = sluice_engine::check_in(&compilation.pipelines, p) {
        // What the code generator does not handle either (E0600) is said as it says it,
        // not with the advice to run it compiled.
        if !matches!(e, sluice_engine::EngineError::Extern { .. }) && compilation.generate().is_err() {
            super::emit::generate(file, &source, &compilation)?;
            return Ok(ExitCode::from(1));
        }
        return Err(Failure::Data(anyhow::anyhow!("{}: {e}", file.display())));
    }
    let mut full: Vec<OsString> = vec![names[index].into()];
    full.extend(argv);
    let Some((_, args)) = sluice::__private::runner::parse_args(full, &names).map_err(Failure::Usage)? else {
        return Err(Failure::Usage("`--help` is not a runner flag here".into()));
    };
    let budget = p.decls.budget.map(|b| b as usize);
    let threads = p.decls.threads.map(|n| n as usize);
    let args = sluice::__private::runner::RunArgs {
        engine: sluice_engine::NAME,
        ..args.or_budget(budget).or_threads(threads)
    };
    if p.physical.tail.is_some() {
        // What a compiled runner of a `device cuda` pipeline says first.
        sluice::__private::runner::note_cpu_twin(p.name());
    }
    let name = p.name().to_string();
    drop(names);
    // The compilation lives until the dataset is built (which keeps what it needs of it),
    // not through the run.
    let compilation = std::rc::Rc::new(compilation);
    let for_params = std::rc::Rc::clone(&compilation);
    Ok(sluice::__private::runner::run(
        &args,
        &name,
        move |set| sluice_engine::params_in(&for_params.pipelines, &for_params.pipelines[index], set),
        move |params| {
            let built =
                sluice_engine::dataset_in(&compilation.pipelines, &compilation.pipelines[index], params);
            drop(compilation);
            // The compiler is done with: its memory and code pages need not stay resident
            // through the run.
            super::pages::let_go();
            built
        },
    ))
}
