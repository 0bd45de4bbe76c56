//! The figures the physical plan sizes stages by. The runtime's defaults come from the
//! runtime's own `defaults.rs`, included as source (`ir::limits`): one file, read by both crates
//! (the compiler does not link the runtime). `compiler/tests/physical.rs` also holds them
//! against what the runtime's stages do.

use crate::ir::limits::runtime;

/// Elements a parallel interleave buffers per open file.
pub const INTERLEAVE_BUFFER_PER_SLOT: u64 = runtime::INTERLEAVE_BUFFER_PER_SLOT as u64;
/// The read buffer of one open TFRecord file.
pub const READ_BUFFER_BYTES: u64 = runtime::READ_BUFFER_BYTES as u64;
/// What the memory bound assumes one open Parquet file holds: a row group's column chunks
/// (of the columns read), fetched whole, and the batch of rows decoded from them.
pub const PARQUET_ROW_GROUP_BYTES: u64 = 64 << 20;
/// The read-ahead of one file read from an object store: the ranged GETs in flight and
/// the chunk being read.
pub const OBJECT_READ_AHEAD_BYTES: u64 =
    ((runtime::OBJECT_READS_IN_FLIGHT + 1) * runtime::OBJECT_READ_CHUNK_BYTES) as u64;
/// What one open object keeps of its read-ahead for itself (the chunk being read and the
/// first ahead); the rest comes from a pool for the whole process.
pub const OBJECT_READ_AHEAD_OWN_BYTES: u64 = 2 * runtime::OBJECT_READ_CHUNK_BYTES as u64;
/// The process-wide pool of read-ahead beyond each open object's own.
pub const OBJECT_READ_AHEAD_SHARED_BYTES: u64 = runtime::OBJECT_READ_AHEAD_SHARED_BYTES as u64;
/// The bytes of records in one window of a global shuffle.
pub const GLOBAL_SHUFFLE_WINDOW_BYTES: u64 = runtime::GLOBAL_SHUFFLE_WINDOW_BYTES;
/// The fewest rows of a batch one part of a split across the pool takes.
pub const MIN_ROWS_PER_PART: u64 = runtime::MIN_ROWS_PER_PART as u64;
/// The rows a global shuffle of Parquet rows gathers at once when its window is not set.
pub const PARQUET_SHUFFLE_WINDOW: u64 = runtime::PARQUET_SHUFFLE_WINDOW;
/// The depth an automatic prefetch starts at.
pub const PREFETCH_AUTO_DEPTH: u64 = runtime::PREFETCH_AUTO_DEPTH as u64;
/// Finished batches each reader thread of a `ReadBatchesExec` may queue.
pub const READ_BATCHES_HANDOVER_PER_THREAD: u64 = runtime::READ_BATCHES_HANDOVER_PER_THREAD as u64;
/// The most bytes of finished batches each reader thread of a `ReadBatchesExec` may
/// queue (one batch always passes).
pub const READ_BATCHES_HANDOVER_BYTES_PER_THREAD: u64 =
    runtime::READ_BATCHES_HANDOVER_BYTES_PER_THREAD as u64;
/// Batch buffers below this size are not kept for recycling.
pub const RECYCLE_MIN_BYTES: u64 = runtime::RECYCLE_MIN_BYTES as u64;
/// The most idle batch buffers kept for recycling.
pub const RECYCLE_KEEP: u64 = runtime::RECYCLE_KEEP as u64;
/// The most bytes of idle batch buffers kept for recycling.
pub const RECYCLE_KEEP_BYTES: u64 = runtime::RECYCLE_KEEP_BYTES as u64;
/// The most elements a parallel map's worker takes at once (a micro-batch).
pub const MAP_MICRO_BATCH: u64 = runtime::MAP_MICRO_BATCH as u64;
/// The most bytes of results of one micro-batch of a parallel map.
pub const MAP_MICRO_BATCH_BYTES: u64 = runtime::MAP_MICRO_BATCH_BYTES as u64;
/// Global batches the device feed prepares ahead of the training loop, at most.
pub const DEVICE_FEED_AHEAD: u64 = runtime::DEVICE_FEED_AHEAD as u64;
/// The bytes the device feed holds ahead past its first 2 batches.
pub const DEVICE_FEED_AHEAD_BYTES: u64 = runtime::DEVICE_FEED_AHEAD_BYTES as u64;

/// Assumed size of one serialized record when nothing bounds it.
pub const ASSUMED_RECORD_BYTES: u64 = 64 << 10;
/// Assumed size of one byte string (an image's encoded bytes).
pub const ASSUMED_BYTES_VALUE: u64 = 64 << 10;
/// Assumed size of a named dimension (`H`, `W` of a decoded image) or a variable length.
pub const ASSUMED_DIM: u64 = 1024;
/// Threads a parallel stage starts per core at most (a larger fixed `parallel` starts
/// fewer).
pub const THREADS_PER_CORE: u64 = runtime::THREADS_PER_CORE as u64;
