//! The `sluice` command-line tool.
//!
//! Exit status: 0 on success, 1 when the data is corrupt or cannot be read, 2 for a bad
//! invocation (unknown flag, missing file).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}
