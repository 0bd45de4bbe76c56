//! The runtime's default buffer sizes and queue depths, in one place: the stages read
//! them here, and the compiler's physical plan, which bounds a pipeline's memory by them,
//! includes this very file (`compiler/src/physical/defaults.rs`), so the two cannot
//! drift apart. Plain constants only: the compiler compiles this file too.

/// Elements a parallel interleave buffers per open file (per cycle slot).
pub const INTERLEAVE_BUFFER_PER_SLOT: usize = 64;

/// The read buffer of one open TFRecord file (`ReaderOptions::buffer_size`), grown only
/// to fit a larger record.
pub const READ_BUFFER_BYTES: usize = 1 << 20;

/// The bytes of one ranged GET of an object being read from an object store
/// (`storage::ObjectReader`; `SLUICE_STORAGE_CHUNK` overrides it at run time).
pub const OBJECT_READ_CHUNK_BYTES: usize = 8 << 20;

/// Ranged GETs running ahead of the reader of one object (`SLUICE_STORAGE_IN_FLIGHT`
/// overrides it): an open object holds at most this many chunks plus the one being read.
pub const OBJECT_READS_IN_FLIGHT: usize = 4;

/// The ranged GETs an open object runs ahead beyond its first one draw on one pool of
/// this many bytes for the whole process (`SLUICE_STORAGE_READ_AHEAD` overrides it): so
/// `n` open objects hold at most `min(n × (in_flight + 1), 2n) × chunk + this`, and many
/// open objects (a wide interleave) do not each get the full read-ahead.
pub const OBJECT_READ_AHEAD_SHARED_BYTES: usize = 128 << 20;

/// The bytes of records one window of a global shuffle reads at once.
pub const GLOBAL_SHUFFLE_WINDOW_BYTES: u64 = 8 << 20;

/// The rows a global shuffle of Parquet rows gathers in one pass over the row groups when
/// its `window` is not set: the rows it holds, and `⌈N / window⌉` passes an epoch.
pub const PARQUET_SHUFFLE_WINDOW: u64 = 1 << 16;

/// The most elements a worker of a parallel `map` takes from its input at once (a
/// micro-batch: one hand-over for many cheap elements instead of one each).
pub const MAP_MICRO_BATCH: usize = 32;

/// The most bytes of results one micro-batch of a parallel `map` may hold: larger
/// elements are handed over one by one.
pub const MAP_MICRO_BATCH_BYTES: usize = 64 << 10;

/// The fewest rows of a batch one part of a split across the pipeline's pool takes
/// (`stage/rows.rs`): fewer are not worth a thread's hand-over.
pub const MIN_ROWS_PER_PART: usize = 8;

/// The depth an automatic prefetch (`prefetch()`, `prefetch(auto)`) starts at.
pub const PREFETCH_AUTO_DEPTH: usize = 2;

/// Finished batches each reader thread of `tfrecord_batches` may queue for the consumer,
/// besides the one it fills.
pub const READ_BATCHES_HANDOVER_PER_THREAD: usize = 2;

/// The most bytes of finished batches the reader threads of `tfrecord_batches` may queue
/// for the consumer, per thread (one batch is always let through): a batch of decoded
/// images (12 MiB in `image_raw`) waits one to a thread, not two.
pub const READ_BATCHES_HANDOVER_BYTES_PER_THREAD: usize = 16 << 20;

/// Batch buffers smaller than this are not recycled (`column::recycle`).
pub const RECYCLE_MIN_BYTES: usize = 64 << 10;

/// At most this many idle batch buffers are kept for recycling: a few columns and the
/// record batches they are parsed from (with 4 and 32 MiB, image_raw's 12 MiB columns
/// were often freed and allocated again, a page fault and a zeroed page each 4 KiB).
pub const RECYCLE_KEEP: usize = 6;

/// At most this many bytes of idle batch buffers are kept for recycling (the memory
/// bound counts them).
pub const RECYCLE_KEEP_BYTES: usize = 64 << 20;

/// Global batches the device feed prepares ahead of the training loop, at most: it holds
/// fewer when they would pass [`DEVICE_FEED_AHEAD_BYTES`], never fewer than 2. Deep
/// enough that a feed refilled in bursts (it resumes when half are left,
/// `torch::handoff`) is never empty when the step asks for the next batch.
pub const DEVICE_FEED_AHEAD: usize = 16;

/// The bytes of tensors the device feed holds ahead of the training loop past its first
/// 2 batches (host memory for CPU devices, device memory for CUDA ones).
pub const DEVICE_FEED_AHEAD_BYTES: usize = 64 << 20;

/// The most files an interleave reads at once (`cycle`): a larger cycle is refused (the
/// literal at `sluice check`, a parameter when the pipeline is built).
pub const MAX_CYCLE_LENGTH: usize = 1 << 16;

/// The most threads a stage may be asked for (`parallel`): a larger count is refused (the
/// literal at `sluice check`, a parameter when the pipeline is built).
pub const MAX_PARALLEL: usize = 4096;

/// Threads a parallel stage starts per core at most: a fixed `parallel: n` starts
/// `min(n, cores × THREADS_PER_CORE)` workers (an interleave also at most `2 × cycle + 1`,
/// a reader of batches at most `cycle`), enough for workers that wait on I/O, and never
/// thousands on a small machine.
pub const THREADS_PER_CORE: usize = 4;
