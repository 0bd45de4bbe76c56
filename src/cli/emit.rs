//! `sluice emit FILE.pipe`: prints the Rust generated for a pipeline file (one module per
//! pipeline, formatted). Diagnostics and exit status as `sluice check`: 1 with the
//! rendered diagnostics when the file has errors, 2 when it cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::Failure;
use super::check::{read_source, report};

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The `.pipe` file.
    file: PathBuf,
}

pub fn run(args: EmitArgs) -> Result<ExitCode, Failure> {
    match generate(&args.file)? {
        Some(generated) => {
            print!("{}", generated.to_pretty_string());
            Ok(ExitCode::SUCCESS)
        }
        None => Ok(ExitCode::from(1)),
    }
}

/// Checks and compiles `file`, reporting its diagnostics (warnings too) on stderr; `None`
/// when it has errors.
pub fn generate(file: &std::path::Path) -> Result<Option<sluice_compiler::codegen::Generated>, Failure> {
    let source = read_source(file)?;
    // `check` gives the warnings of a clean file too, which `generate` does not.
    if report(file, &source, &sluice_compiler::check(&source)) {
        return Ok(None);
    }
    match sluice_compiler::codegen::generate(&source) {
        Ok(generated) => Ok(Some(generated)),
        Err(diagnostics) => {
            // The warnings were shown above.
            let errors: Vec<_> = diagnostics.into_iter().filter(|d| d.is_error()).collect();
            if !report(file, &source, &errors) {
                eprintln!("error: {}: code generation failed", file.display());
            }
            Ok(None)
        }
    }
}
