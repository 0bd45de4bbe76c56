//! `sluice check FILE.pipe`: reports every diagnostic of a pipeline file, rendered like
//! rustc's with `file:line:col`. Exit status 0 when the file is clean (warnings allowed),
//! 1 when it has errors, 2 when it cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use sluice_compiler::diagnostic::render;

use super::Failure;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The `.pipe` file.
    file: PathBuf,
}

pub fn run(args: CheckArgs) -> Result<ExitCode, Failure> {
    let bytes =
        std::fs::read(&args.file).map_err(|e| Failure::Usage(format!("{}: {e}", args.file.display())))?;
    let name = args.file.display().to_string();
    let source = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            eprintln!("error: {name}: not valid UTF-8 (first bad byte at offset {at})");
            return Ok(ExitCode::from(1));
        }
    };
    let diagnostics = sluice_compiler::check(&source);
    if diagnostics.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprint!("{}", render(&name, &source, &diagnostics));
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        eprintln!("error: {name}: {errors} error{}", if errors == 1 { "" } else { "s" });
        Ok(ExitCode::from(1))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}
