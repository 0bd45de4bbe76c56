//! The runtime's error type: every error names the file, and for bad data the record
//! index and byte offset, so a user can find the problem with `sluice cat` or a hex dump.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A result whose error is the runtime's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error from reading or writing pipeline data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused an operation on a file (missing, unreadable, disk full).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A record is corrupt: its framing or checksums do not hold, or its payload is not
    /// the message it should be.
    #[error(
        "{}: corrupt record {record} at byte offset {offset}{}: {kind}",
        path.display(),
        if *in_decompressed { " of the decompressed stream" } else { "" }
    )]
    Corrupt {
        /// The file holding the record.
        path: PathBuf,
        /// Index of the record in its file, counting from 0 (a corrupt region skipped
        /// under the `skip` policy counts as one record).
        record: u64,
        /// Byte offset of the record's first byte (its length field).
        offset: u64,
        /// True when `offset` counts bytes of a GZIP/ZLIB file after decompression.
        in_decompressed: bool,
        /// What is wrong.
        kind: CorruptKind,
    },
    /// A text or CSV file is malformed at a line (and a column, counted in characters
    /// from 1, where one applies): a stray quote, a row with the wrong number of fields,
    /// a header without a column the schema names, a damaged compressed stream.
    #[error(
        "{}:{line}{}: {message}",
        path.display(),
        column.map_or(String::new(), |c| format!(":{c}"))
    )]
    Text {
        /// The file.
        path: PathBuf,
        /// The line, counted from 1.
        line: u64,
        /// The character on the line, counted from 1.
        column: Option<u64>,
        /// What is wrong.
        message: String,
    },
    /// A table file (Parquet) cannot be read as the schema says: not a Parquet file, a
    /// column missing or of another type, a damaged page (naming its row group).
    #[error("{}: {message}", path.display())]
    Table {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where in the file.
        message: String,
    },
    /// A user-supplied argument is invalid.
    #[error("{0}")]
    Invalid(String),
    /// A TFRecord index (`FILE.idx`, see [`tfrecord::index`](crate::tfrecord::index)) is
    /// missing, damaged, or no longer describes its data file.
    #[error("{}: {reason}", path.display())]
    Index {
        /// The index file.
        path: PathBuf,
        /// What is wrong, and what to do about it.
        reason: String,
    },
    /// A user function of a stage (a `map`, `filter`, `interleave`… closure) returned an
    /// error.
    #[error("stage `{stage}`: {source}")]
    Stage {
        /// The stage's name.
        stage: String,
        /// What the user function returned.
        #[source]
        source: BoxError,
    },
    /// A CUDA step failed (feature `cuda`): the driver or NVRTC library is missing, there
    /// is no GPU, a kernel did not compile (`message` then holds NVRTC's log), or the
    /// driver refused an operation.
    #[error("cuda: {context}: {message}")]
    Cuda {
        /// What was being done: the kernel (by name), NVRTC, the device.
        context: String,
        /// What went wrong.
        message: String,
    },
    /// A user function of a stage panicked; the pipeline reports it instead of hanging
    /// or losing a worker.
    #[error("stage `{stage}`: user function panicked: {message}")]
    Panic {
        /// The stage's name.
        stage: String,
        /// The panic payload, if it was a string.
        message: String,
    },
}

/// The error a user function may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Turns a caught panic payload into [`Error::Panic`].
    pub fn from_panic(stage: &str, payload: Box<dyn std::any::Any + Send>) -> Self {
        let message = match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(payload) => match payload.downcast::<&'static str>() {
                Ok(s) => (*s).to_string(),
                Err(_) => "non-string panic payload".to_string(),
            },
        };
        Error::Panic { stage: stage.to_string(), message }
    }

    /// True for data corruption (as opposed to an I/O failure or a bad argument),
    /// malformed text included.
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. } | Error::Text { .. })
    }
}

/// What makes a record corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorruptKind {
    /// The masked CRC32C of the 8 length bytes does not match the stored one.
    LengthCrc {
        /// The stored (masked) checksum.
        stored: u32,
        /// The checksum of the bytes read (masked).
        computed: u32,
    },
    /// The masked CRC32C of the payload does not match the stored one.
    DataCrc {
        /// The stored (masked) checksum.
        stored: u32,
        /// The checksum of the bytes read (masked).
        computed: u32,
    },
    /// The file ends inside a record.
    Truncated {
        /// Bytes the record needs from its offset (header, payload and footer).
        needed: u64,
        /// Bytes the file still had from that offset.
        available: u64,
    },
    /// The length field is larger than the reader's limit.
    TooLarge {
        /// The declared payload length.
        length: u64,
        /// The reader's `max_record_len`.
        limit: u64,
    },
    /// A record read by its index declares another length than the index says: the file
    /// changed since it was indexed.
    IndexMismatch {
        /// The payload length the index implies.
        indexed: u64,
        /// The payload length the record's header declares.
        declared: u64,
    },
    /// The GZIP or ZLIB stream itself is damaged (bad header, bad deflate data, bad
    /// trailer checksum, or cut short).
    Compression(String),
    /// The payload is framed correctly but is not a valid protobuf message of the
    /// expected type.
    Decode {
        /// The message type expected, e.g. `tf.train.Example`.
        message: &'static str,
        /// What the protobuf decoder said.
        reason: String,
    },
    /// A file read whole (`read_file`) could not be read: missing (deleted since it was
    /// listed), unreadable or not a file; the operating system's message. Only a skip
    /// event carries it: under the `fail` policy the error is [`Error::Io`].
    Unreadable(String),
}

impl fmt::Display for CorruptKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptKind::LengthCrc { stored, computed } => {
                write!(f, "length checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")
            }
            CorruptKind::DataCrc { stored, computed } => {
                write!(f, "data checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")
            }
            CorruptKind::Truncated { needed, available } => {
                write!(f, "truncated: the record needs {needed} bytes but the file has {available} left")
            }
            CorruptKind::TooLarge { length, limit } => write!(
                f,
                "declared length {length} exceeds the limit of {limit} bytes \
                 (raise ReaderOptions::max_record_len if the record is genuine)"
            ),
            CorruptKind::IndexMismatch { indexed, declared } => write!(
                f,
                "the record declares {declared} bytes but its index says {indexed}: \
                 the file changed since it was indexed (rerun `sluice index`)"
            ),
            CorruptKind::Compression(reason) => write!(f, "damaged compressed stream: {reason}"),
            CorruptKind::Decode { message, reason } => {
                write!(f, "payload is not a valid {message}: {reason}")
            }
            CorruptKind::Unreadable(reason) => write!(f, "the file could not be read: {reason}"),
        }
    }
}
