//! Sluice's runtime: what a compiled pipeline runs on.
//!
//! This crate never depends on the compiler: a program built from generated code links
//! no parser. It holds:
//!
//! - [`tfrecord`]: streaming TFRecord reader and writer (CRC-checked framing, GZIP and
//!   ZLIB streams, corrupt-record policies with resynchronisation), record indexes and
//!   random access by them;
//! - [`example`]: `tf.train.Example` / `SequenceExample` as prost messages, and their
//!   canonical proto3 JSON form;
//! - [`text`]: text sources, the lines of a text file and the rows of a CSV file
//!   (RFC 4180), as records whose origin is a line;
//! - [`synth`]: deterministic synthetic datasets (`sluice gen`);
//! - [`image`]: JPEG/PNG decoding, TensorFlow-exact bilinear resize, crops, flips,
//!   normalization, and a fused decode → resize → normalize path;
//! - [`rng`]: the counter-based random generator every random stage draws from;
//! - [`permutation`]: a seeded bijection of `0..n` in O(1) memory (the global shuffle's
//!   order);
//! - [`stage`]: the streaming stages (sources, map, filter, shuffle, batch, …), their
//!   threads, bounded queues and statistics, and the fused reader of record batches;
//! - [`column`](mod@column): the columnar batches (`Dense`, `Ragged`, `Tensor`, `Batchable`)
//!   and `Element`, what flows through a pipeline (beneath `stage`, which re-exports it);
//! - [`abi`]: what generated code calls besides the stages (the specialised
//!   `tf.train.Example` parser's helpers, the per-field operations, parameters).
//! - [`dist`]: the collective operations between the processes of a multi-process job
//!   (`dist::Mpi` with the `mpi` feature: rank, world size, all-reduce, broadcast);
//! - `torch` (feature `torch`): batches as `tch::Tensor`s without copying, the
//!   per-device split of a pipeline's batches, and the data-parallel `Trainer`.
//! - `cuda` (feature `cuda`): the generated CUDA kernels of post-`batch` chains, compiled
//!   by NVRTC at run time and launched from pinned, double-buffered batches; the Philox
//!   generator in CUDA C; without a GPU, the CPU twin runs.

pub mod abi;
pub mod column;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod defaults;
pub mod dist;
pub mod error;
pub mod example;
pub mod image;
pub mod npy;
pub mod output;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod permutation;
pub mod rng;
pub mod stage;
pub mod storage;
pub mod synth;
pub mod testing;
pub mod text;
pub mod tfrecord;
#[cfg(feature = "torch")]
pub mod torch;
pub mod webdataset;

pub use error::{BoxError, CorruptKind, Error, Result};
