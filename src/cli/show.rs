//! `sluice show FILE.pipe [PIPELINE] [--set NAME=VALUE]... [-n N|all]`: the first elements
//! of a pipeline as JSON lines, one element a line (the pipeline's `take(N)` + print): the
//! first thing to run on a new pipeline. It builds the runner `sluice run` builds (the
//! same cache) and runs it with `--show N`, which prints each element through its
//! `abi::show::Show` impl (the format: `runtime/src/abi/show.rs`) and stops pulling after
//! the `N`th; no statistics, no progress bar. On a terminal long values are abbreviated
//! as NumPy prints them, unless `--full`; piped, every line is the element's whole JSON.
//!
//! Exit status: as `sluice run`'s (1 for the file's diagnostics, a data error or a failed
//! write to stdout; 2 for a bad invocation or parameter); a reader that stops reading
//! (`| head -1`) ends it quietly.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Args;

use super::Failure;
use super::run::{Backend, backend, exec, name_value};

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The `.pipe` file.
    file: PathBuf,
    /// The pipeline to show; may be left out when the file has one.
    pipeline: Option<String>,
    /// Sets a parameter of the pipeline (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = name_value)]
    set: Vec<String>,
    /// How many elements to print: a positive number, or `all` for every element of one
    /// pass.
    #[arg(short = 'n', value_name = "N|all", default_value = "5", value_parser = count)]
    n: u64,
    /// Print every value whole, as JSON. Without it, on a terminal, long arrays and byte
    /// strings are abbreviated as NumPy prints them (`[0,1,2,...,1021,1022,1023]`); piped,
    /// the output is always whole JSON lines.
    #[arg(long)]
    full: bool,
    /// Which backend runs the pipeline: `auto` (the compiled runner when one is cached for
    /// this plan, else the engine at once), `compiled` (a runner built by cargo, cached)
    /// or `interpreted` (the engine in this tool: no cargo).
    /// `SLUICE_ENGINE` sets the default.
    #[arg(long, value_enum, default_value = "auto", env = "SLUICE_ENGINE")]
    engine: super::interpret::Engine,
}

/// `-n`'s value: a positive number, or `all` (`u64::MAX`).
fn count(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ if s == "all" => Ok(u64::MAX),
        _ => Err("expected a positive integer or `all`".into()),
    }
}

pub fn run(args: ShowArgs) -> Result<ExitCode, Failure> {
    let argv = runner_args(&args);
    let bin = match backend(&args.file, args.pipeline.as_deref(), args.engine, false, &[])? {
        Backend::Runner(bin) => bin,
        Backend::Exit(code) => return Ok(code),
        Backend::Engine => return super::interpret::run(&args.file, args.pipeline.as_deref(), argv),
    };
    let mut command = Command::new(&bin);
    command.args(args.pipeline.iter().map(OsString::from).chain(argv));
    exec(command, &format!("sluice show {}", args.file.display()))
}

/// The runner's flags for `args` (after the pipeline's name).
fn runner_args(args: &ShowArgs) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    for s in &args.set {
        argv.extend(["--set".into(), s.into()]);
    }
    let n = if args.n == u64::MAX { "all".to_string() } else { args.n.to_string() };
    argv.extend(["--show".into(), n.into(), "--no-progress".into()]);
    if args.full {
        argv.push("--full".into());
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_positive_numbers_or_all() {
        assert_eq!(count("3"), Ok(3));
        assert_eq!(count("all"), Ok(u64::MAX));
        for bad in ["0", "-1", "x", "", "ALL"] {
            assert!(count(bad).is_err(), "{bad}");
        }
    }
}
