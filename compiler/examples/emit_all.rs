//! Writes the Rust generated for each `.pipe` file given into a directory, one `.rs` file
//! each (the diagnostics' codes for a file with errors): run it with two versions of the
//! compiler and diff the directories to see what a compiler change does to generated code.
//!
//! ```sh
//! cargo run -p sluice-compiler --example emit_all -- OUT_DIR $(find examples tests -name '*.pipe' | sort)
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(out) = args.next().map(PathBuf::from) else {
        eprintln!("usage: emit_all OUT_DIR FILE.pipe...");
        return ExitCode::from(2);
    };
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("{}: {e}", out.display());
        return ExitCode::from(1);
    }
    for path in args {
        let source = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{path}: {e}");
                return ExitCode::from(1);
            }
        };
        let text = match sluice_compiler::compile(&source).generate() {
            Ok(generated) => generated.to_pretty_string(),
            Err(diagnostics) => format!("ERR {:?}", diagnostics.iter().map(|d| d.code).collect::<Vec<_>>()),
        };
        let name = out.join(format!("{}.rs", path.replace('/', "_")));
        if let Err(e) = std::fs::write(&name, text) {
            eprintln!("{}: {e}", name.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
