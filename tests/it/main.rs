//! The `sluice` tool's end-to-end tests in one test binary: one compile and link instead
//! of one a file (`cargo test -p sluice --test it MODULE::` runs one file's). `support`
//! holds the command they share, `http` and `s3` the local servers of the object tests
//! (`runtime/tests/support/`). `memory.rs` stays a binary of its own (it compares peak
//! RSS figures), as does `tidy.rs` (it reads the source tree). `generative` builds random
//! pipelines from the compiler's tables and runs them all through one runner.

#[path = "../../runtime/tests/support/http.rs"]
mod http;
#[path = "../../runtime/tests/support/s3.rs"]
mod s3;
mod support;

mod cli;
mod cli_engine;
mod cli_export;
mod cli_limits;
mod cli_objects;
mod cli_run;
mod cli_s3;
mod cli_show;
mod engine_diff;
mod engine_hostile;
mod generative;
mod parquet;
mod webdataset;
