//! `sluice check FILE.pipe`: reports every diagnostic of a pipeline file, rendered like
//! rustc's with `file:line:col`. Exit status 0 when the file is clean (warnings allowed),
//! 1 when it has errors, 2 when it cannot be read. `emit` and `run` read and report the
//! same way ([`read_source`], [`report`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use sluice_compiler::Diagnostic;
use sluice_compiler::diagnostic::render;

use super::Failure;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The `.pipe` file.
    file: PathBuf,
}

pub fn run(args: CheckArgs) -> Result<ExitCode, Failure> {
    let source = read_source(&args.file)?;
    let diagnostics = sluice_compiler::compile(&source).diagnostics;
    if report(&args.file, &source, &diagnostics)? { Ok(ExitCode::from(1)) } else { Ok(ExitCode::SUCCESS) }
}

/// Reads a `.pipe` file: one that cannot be read is a usage error (exit 2), one that is
/// not UTF-8 a data error (exit 1) saying where.
pub fn read_source(file: &Path) -> Result<String, Failure> {
    let bytes = std::fs::read(file).map_err(|e| Failure::Usage(format!("{}: {e}", file.display())))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        Failure::Data(anyhow::anyhow!("{}: not valid UTF-8 (first bad byte at offset {at})", file.display()))
    })
}

/// Renders `diagnostics` of `file` on stderr, then a count of the errors if there are
/// any; true when there are.
pub fn report(file: &Path, source: &str, diagnostics: &[Diagnostic]) -> Result<bool, Failure> {
    if diagnostics.is_empty() {
        return Ok(false);
    }
    let name = file.display().to_string();
    say!("{}", render(&name, source, diagnostics));
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        sayln!("error: {name}: {errors} error{}", if errors == 1 { "" } else { "s" });
    }
    sayln!("{}", explain_hint(diagnostics));
    Ok(errors > 0)
}

/// rustc's "for more information about this error, try `rustc --explain E0308`": names
/// `sluice explain-code` with the first code, and the other codes there are.
fn explain_hint(diagnostics: &[Diagnostic]) -> String {
    let mut codes: Vec<&str> = Vec::new();
    for d in diagnostics {
        if !codes.contains(&d.code) {
            codes.push(d.code);
        }
    }
    match codes.as_slice() {
        [one] => format!("for more on this diagnostic, run `sluice explain-code {one}`"),
        [first, ..] => format!(
            "for more on a diagnostic, run `sluice explain-code {first}` (codes here: {})",
            codes.join(", ")
        ),
        [] => String::new(),
    }
}
