//! An example program: runs any of the pipelines compiled by this crate's `build.rs`
//! to the end with the runner `sluice run` uses, e.g.
//!
//! ```sh
//! cargo run --release -p sluice-examples -- parse_tabular --set 'files=bench-data/tabular/*.tfrecord' --json
//! ```

use std::process::ExitCode;

use sluice_examples as ex;

#[global_allocator]
static ALLOCATOR: sluice::__private::MiMalloc = sluice::__private::MiMalloc;

fn main() -> ExitCode {
    sluice::__private::runner::main(&[
        ("read", ex::read::run),
        ("parse_tabular", ex::parse_tabular::run),
        ("shuffle_tabular", ex::shuffle_tabular::run),
        ("image_raw", ex::image_raw::run),
        ("jpeg", ex::jpeg::run),
        ("augment", ex::augment::run),
    ])
}
