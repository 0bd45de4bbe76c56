//! `sluice emit FILE.pipe`: prints the Rust generated for a pipeline file (one module per
//! pipeline, formatted); `--cuda` prints the CUDA C of the `device cuda` pipelines'
//! kernels instead (one per column their tail changes, as NVRTC compiles them). Diagnostics and exit status as `sluice check`: 1 with the
//! rendered diagnostics when the file has errors, 2 when it cannot be read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use sluice_compiler::Compilation;
use sluice_compiler::codegen::Generated;

use super::Failure;
use super::check::{read_source, report};

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The `.pipe` file.
    file: PathBuf,
    /// Print the generated CUDA C kernels instead of the Rust.
    #[arg(long)]
    cuda: bool,
}

pub fn run(args: EmitArgs) -> Result<ExitCode, Failure> {
    let source = read_source(&args.file)?;
    match generate(&args.file, &source, &sluice_compiler::compile(&source))? {
        Some(generated) if args.cuda => {
            if generated.kernels.is_empty() {
                sayln!(
                    "{}: no kernels (only a `device cuda` pipeline's tail after `batch` becomes kernels)",
                    args.file.display()
                );
            }
            for k in &generated.kernels {
                match k.source() {
                    Ok(source) => out!("// kernel {} (column `{}`)\n{source}\n", k.name, k.field),
                    Err(e) => return Err(Failure::Data(anyhow::anyhow!("kernel {}: {e}", k.name))),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(generated) => {
            out!("{}", generated.to_pretty_string());
            Ok(ExitCode::SUCCESS)
        }
        None => Ok(ExitCode::from(1)),
    }
}

/// The code of `compilation` (of `source`, read from `file`), reporting its diagnostics
/// (warnings too) on stderr; `None` when it has errors.
pub fn generate(file: &Path, source: &str, compilation: &Compilation) -> Result<Option<Generated>, Failure> {
    if report(file, source, &compilation.diagnostics)? {
        return Ok(None);
    }
    match compilation.generate() {
        Ok(generated) => Ok(Some(generated)),
        Err(diagnostics) => {
            // The warnings were shown above.
            let errors: Vec<_> = diagnostics.into_iter().filter(|d| d.is_error()).collect();
            if !report(file, source, &errors)? {
                sayln!("error: {}: code generation failed", file.display());
            }
            Ok(None)
        }
    }
}
