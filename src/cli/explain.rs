//! `sluice explain FILE.pipe [--verbose]`: the plans of each pipeline of a file, one
//! node per line — the logical plan, the optimized one, then the physical one;
//! `--verbose` adds the plan after each optimizer and fusion rule that changed it. Exit status as `sluice check`: 1 with the
//! diagnostics when the file has errors.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sluice_compiler::diagnostic::render;

use super::Failure;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The `.pipe` file.
    file: PathBuf,
    /// Also print the plan after each optimizer and fusion rule that changed it.
    #[arg(long)]
    verbose: bool,
}

pub fn run(args: ExplainArgs) -> Result<ExitCode, Failure> {
    let source = super::check::read_source(&args.file)?;
    let compilation = sluice_compiler::compile(&source);
    if compilation.has_errors() {
        say!("{}", render(&args.file.display().to_string(), &source, &compilation.diagnostics));
        return Ok(ExitCode::from(1));
    }
    for p in &compilation.pipelines {
        out!("{}", p.explain(args.verbose));
    }
    Ok(ExitCode::SUCCESS)
}
