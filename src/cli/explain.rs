//! `sluice explain FILE.pipe [--verbose]`: the plans of each pipeline of a file, one
//! node per line — the logical plan, then the optimized one; `--verbose` adds the plan
//! after each optimizer rule that changed it. Exit status as `sluice check`: 1 with the
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
    /// Also print the plan after each optimizer rule that changed it.
    #[arg(long)]
    verbose: bool,
}

pub fn run(args: ExplainArgs) -> Result<ExitCode, Failure> {
    let source = std::fs::read_to_string(&args.file)
        .map_err(|e| Failure::Usage(format!("{}: {e}", args.file.display())))?;
    match sluice_compiler::compile(&source) {
        Ok(checked) => {
            for c in &checked {
                match &c.plan {
                    Some(plan) => {
                        print!("{}", sluice_compiler::optimizer::explain(&c.decls.name, plan, args.verbose))
                    }
                    None => println!("== {} (logical) ==", c.decls.name),
                }
                if let Some(physical) = &c.physical {
                    println!("== {} (physical) ==", c.decls.name);
                    print!("{}", physical.explain());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(diagnostics) => {
            eprint!("{}", render(&args.file.display().to_string(), &source, &diagnostics));
            Ok(ExitCode::from(1))
        }
    }
}
