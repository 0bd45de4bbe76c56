//! The runtime's integration tests in one test binary: one compile and link of the
//! runtime's test dependencies instead of one a file (`cargo test -p sluice-runtime --test
//! it MODULE::` runs one file's). A test that needs a process of its own stays a file in
//! `tests/`: `memory.rs` and `hostile_length.rs` measure the process's peak RSS,
//! `storage.rs` sets the storage layer's environment once for its process, and
//! `trainer.rs` builds only with the `torch` feature.

mod cuda;
mod example;
mod example_parse;
mod global_shuffle;
mod image;
mod index;
mod stage_basic;
mod stage_batch;
mod stage_interleave;
mod stage_parallel;
mod stage_pipeline;
mod stage_reshard;
mod stage_resume;
mod stage_resume_positions;
mod stage_shard;
mod tf_reference;
mod tfrecord;
