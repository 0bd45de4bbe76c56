//! Command-line definitions and dispatch.

/// Writes to standard output (`print!`'s arguments): a write error returns a
/// [`Failure::Write`] from the enclosing function, never a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        write!(::std::io::stdout().lock(), $($arg)*).map_err(|e| crate::cli::Failure::write("standard output", e))?
    }};
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        writeln!(::std::io::stdout().lock(), $($arg)*).map_err(|e| crate::cli::Failure::write("standard output", e))?
    }};
}

/// Writes to standard error (`eprint!`'s arguments): a write error returns a
/// [`Failure::Write`], never a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        write!(::std::io::stderr().lock(), $($arg)*).map_err(|e| crate::cli::Failure::write("standard error", e))?
    }};
}

/// [`say!`] with a newline.
macro_rules! sayln {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        writeln!(::std::io::stderr().lock(), $($arg)*).map_err(|e| crate::cli::Failure::write("standard error", e))?
    }};
}

mod bench;
mod build;
mod cat;
mod check;
mod emit;
mod explain;
mod explain_code;
mod files;
mod generate;
mod index;
mod interpret;
mod pages;
mod pipelines;
mod python_lib;
mod run;
mod show;
mod shuffle_bench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Sluice: a declarative input-pipeline compiler for ML training.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print TFRecord files of tf.train.Example (or SequenceExample) as JSON lines.
    Cat(cat::CatArgs),
    /// Check a `.pipe` file and report every problem (exit 1 on errors).
    Check(check::CheckArgs),
    /// Print the plan of each pipeline of a `.pipe` file.
    Explain(explain::ExplainArgs),
    /// Explain a diagnostic code (`sluice explain-code E0306`): what it means, a failing
    /// example and its fix; with no code, list every code.
    ExplainCode(explain_code::ExplainCodeArgs),
    /// Print the Rust generated for a `.pipe` file.
    Emit(emit::EmitArgs),
    /// Print the first elements of a pipeline as JSON lines (5 by default; `-n N|all`):
    /// the first thing to run on a new pipeline.
    Show(show::ShowArgs),
    /// Run a pipeline of a `.pipe` file, reporting throughput and stages (`--engine`: the
    /// cached compiled runner, else the engine at once).
    Run(run::RunArgs),
    /// Build the compiled runner of a `.pipe` file ahead of time (cargo's progress
    /// shown); `run` and `show` then take it.
    Build(build::BuildArgs),
    /// Build a `.pipe` file into the library the Python package loads (`sluice.Pipeline`
    /// runs it); prints one JSON object.
    #[command(hide = true)]
    PythonLib(python_lib::PythonLibArgs),
    /// Write a deterministic synthetic dataset of TFRecord files.
    Gen(generate::GenArgs),
    /// Write the record index (FILE.idx) of TFRecord files, for random access and
    /// global shuffling; `--check` verifies existing indexes.
    Index(index::IndexArgs),
    /// Measure throughput.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// Runs one command.
pub fn run(cli: Cli) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Cat(args) => cat::run(args),
        Command::Check(args) => check::run(args),
        Command::Explain(args) => explain::run(args),
        Command::ExplainCode(args) => explain_code::run(args),
        Command::Emit(args) => emit::run(args),
        Command::Show(args) => show::run(args),
        Command::Run(args) => run::run(args),
        Command::Build(args) => build::run(args),
        Command::PythonLib(args) => python_lib::run(args),
        Command::Gen(args) => generate::run(args),
        Command::Index(args) => index::run(args),
        Command::Bench(cmd) => bench::run(cmd),
    }
}

/// Why a command failed, and so which exit status it ends with.
#[derive(Debug)]
pub enum Failure {
    /// Bad invocation or missing input (exit 2).
    Usage(String),
    /// The data could not be read or is corrupt (exit 1).
    Data(anyhow::Error),
    /// Output could not be written (a full disk, a closed terminal): exit 1, saying so
    /// on standard error when that still works. A reader that stopped reading (`sluice
    /// cat f | head`, a broken pipe) is no failure: the command stops quietly.
    Write {
        /// `standard output` or `standard error`.
        stream: &'static str,
        /// What happened.
        error: std::io::Error,
    },
}

impl Failure {
    /// A failure to write to `stream`.
    pub fn write(stream: &'static str, error: std::io::Error) -> Failure {
        Failure::Write { stream, error }
    }

    /// Prints the failure to stderr (ignoring an error doing so: there is nowhere left to
    /// say it) and gives the exit status.
    pub fn report(self) -> ExitCode {
        use std::io::Write as _;
        let mut stderr = std::io::stderr().lock();
        match self {
            Failure::Usage(msg) => {
                let _ = writeln!(stderr, "error: {msg}");
                ExitCode::from(2)
            }
            Failure::Data(e) => {
                let _ = writeln!(stderr, "error: {}", message(&e));
                ExitCode::from(1)
            }
            Failure::Write { error, .. } if error.kind() == std::io::ErrorKind::BrokenPipe => {
                ExitCode::SUCCESS
            }
            Failure::Write { stream, error } => {
                let _ = writeln!(stderr, "error: cannot write to {stream}: {error}");
                ExitCode::from(1)
            }
        }
    }
}

impl From<sluice_runtime::Error> for Failure {
    fn from(e: sluice_runtime::Error) -> Self {
        Failure::Data(e.into())
    }
}

/// An error and its causes on one line, each cause once: the runtime's errors already
/// say their cause (`f: Permission denied`), which a plain `{:#}` would repeat.
fn message(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !out.contains(&cause) {
            out.push_str(": ");
            out.push_str(&cause);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_said_once() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = anyhow::Error::from(sluice_runtime::Error::io("data/a.tfrecord", denied));
        assert_eq!(message(&e), "data/a.tfrecord: permission denied");
        let e = anyhow::anyhow!("inner cause").context("outer");
        assert_eq!(message(&e), "outer: inner cause");
    }
}
