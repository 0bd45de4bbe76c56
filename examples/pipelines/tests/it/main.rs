//! The example pipelines' integration tests in one test binary: one compile and link of
//! the generated pipelines and the runtime instead of one a file (`cargo test -p
//! sluice-examples --test it MODULE::` runs one file's). `tokens.rs` stays a binary of
//! its own: one of its tests changes the process's working directory.

mod bucket;
mod combine;
mod corpus;
mod device_tail;
mod differential;
mod engine_resume;
mod flat_map;
mod global_shuffle;
#[path = "macro.rs"] // `macro` is a keyword
mod macros;
mod on_error;
mod parity;
mod reshard;
mod resume;
mod rows;
mod sequence;
mod shard;
mod sources;
mod tf_fixtures;
mod window;
