//! The `sluice` command-line tool.
//!
//! Exit status: 0 on success, 1 when the data is corrupt or cannot be read or the output
//! cannot be written, 2 for a bad invocation (unknown flag, missing file).

mod cli;

// Records are allocated on reader threads and freed on others: mimalloc's free lists
// handle that without glibc's per-thread-arena fragmentation (peak RSS then varies
// run to run by up to 40 %) or contention.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    // What is still buffered is written before the exit status is decided: a write
    // error is never a success.
    let flushed = |code| match std::io::Write::flush(&mut std::io::stdout()) {
        Ok(()) => code,
        Err(e) => cli::Failure::write("standard output", e).report(),
    };
    match cli::run(args) {
        Ok(code) => flushed(code),
        // A write to standard output that failed is said once: what it left buffered
        // would fail again.
        Err(failure @ cli::Failure::Write { stream: "standard output", .. }) => {
            let code = failure.report();
            let _ = std::io::Write::flush(&mut std::io::stdout());
            code
        }
        Err(failure) => {
            let code = failure.report();
            flushed(code)
        }
    }
}
