//! `sluice build FILE.pipe [PIPELINE]`: builds the compiled runner of a `.pipe` file on
//! purpose, with cargo's messages shown as it works, so that later `sluice run` and
//! `sluice show` (`--engine auto`) take the fast path at once. Nothing else builds behind
//! the user's back: `auto` runs the engine while no runner is cached.
//!
//! Exit status: 1 for the file's diagnostics or a failed build, 2 for a bad invocation;
//! 0 with the runner's path on standard output.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::Failure;
use super::run::{Build, runner};

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The `.pipe` file.
    file: PathBuf,
    /// A pipeline of the file, to check that it has it; every pipeline of a file shares
    /// one runner.
    pipeline: Option<String>,
}

pub fn run(args: BuildArgs) -> Result<ExitCode, Failure> {
    // One runner holds every pipeline of the file: without a name, any will do.
    let pipeline = match &args.pipeline {
        Some(p) => Some(p.clone()),
        None => {
            let source = super::check::read_source(&args.file)?;
            sluice_compiler::compile(&source).pipelines.first().map(|p| p.name().to_string())
        }
    };
    match runner(&args.file, pipeline.as_deref(), true, Build::Yes { progress: true }, &[])? {
        Ok(bin) => {
            outln!("{}", bin.expect("built").display());
            Ok(ExitCode::SUCCESS)
        }
        Err(code) => Ok(code),
    }
}
