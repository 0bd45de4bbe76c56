//! TFRecord files: a streaming reader and writer.
//!
//! A TFRecord file is a sequence of records, each framed as
//!
//! ```text
//! u64 length (little-endian) | u32 masked crc32c(length bytes) | data | u32 masked crc32c(data)
//! ```
//!
//! with `masked(crc) = ((crc >> 15) | (crc << 17)).wrapping_add(0xa282ead8)`. A whole file
//! may be GZIP- or ZLIB-compressed, as TensorFlow's `TFRecordOptions` write them.
//!
//! The reader streams through a fixed-size buffer (it never holds more than the buffer or
//! the largest record), verifies both checksums by default, and on a corrupt record applies
//! a [`CorruptPolicy`]: fail, skip the record and resynchronise, or skip the rest of the file.
//! Resynchronisation works because the length checksum makes record starts self-checking:
//! the reader scans forward for the next offset whose header and payload validate.
//!
//! An uncompressed file may also have an [`index`] (`FILE.idx`, written by
//! `sluice index`): the offset of every record, so that [`IndexedFile`] can read record
//! `k` directly, and [`read_window`] many records at once: copied out of a read-only
//! memory map of the file (guarded against the file being cut short under it), or in
//! offset order with nearby ones coalesced into one `pread`. The streaming reader never
//! needs or reads an index.

mod crc;
pub mod index;
mod indexed;
mod input;
mod mapped;
mod reader;
mod writer;

pub use index::{INDEX_DIR_ENV, Index, build_index, index_path, index_path_in, write_index, write_index_to};
pub use indexed::{
    CoalesceOptions, IndexedFile, Landed, RecordRequest, check_record, read_records, read_window,
};
pub(crate) use input::open_input_sniffed;
pub use input::{Compression, Input, detect_compression, detect_text_compression};
pub use reader::{
    CorruptPolicy, FileReader, ReaderOptions, ReaderStats, RecordReader, SkipEvent, open, open_with_size,
};
pub use writer::{RecordWriter, ShardWriter, create, create_shard};

/// Bytes of a record header: the length and its checksum.
pub const HEADER_LEN: usize = 12;
/// Bytes of a record footer: the payload checksum.
pub const FOOTER_LEN: usize = 4;

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC32C the way TFRecord (and LevelDB) store it, so that a CRC of data that
/// itself contains CRCs does not degenerate.
#[inline]
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask_crc`].
#[inline]
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The masked CRC32C of `data`, as stored in a TFRecord.
#[inline]
pub fn masked_crc(data: &[u8]) -> u32 {
    mask_crc(crc::crc32c(data))
}

/// Encodes the 12-byte header of a record whose payload is `len` bytes.
#[inline]
pub fn encode_header(len: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&len.to_le_bytes());
    let crc = mask_crc(crc::crc32c_u64(len));
    h[8..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Decodes a header: `Ok(length)` when its checksum holds, `Err((stored, computed))`
/// otherwise.
#[inline]
pub fn decode_header(h: &[u8; HEADER_LEN]) -> Result<u64, (u32, u32)> {
    let len = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
    let stored = u32::from_le_bytes(h[8..].try_into().expect("4 bytes"));
    let computed = mask_crc(crc::crc32c_u64(len));
    if stored == computed { Ok(len) } else { Err((stored, computed)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_matches_tensorflow() {
        // crc32c("") = 0, masked = rotate(0) + delta.
        assert_eq!(masked_crc(b""), 0xa282_ead8);
        // Known answer: crc32c("123456789") = 0xe3069283 (RFC 3720).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let m = masked_crc(b"123456789");
        assert_eq!(m, 0xe306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8));
        assert_eq!(unmask_crc(m), 0xe306_9283);
    }

    #[test]
    fn header_round_trip_and_corruption() {
        for len in [0u64, 1, 124, 12_288, u64::MAX] {
            let h = encode_header(len);
            assert_eq!(decode_header(&h), Ok(len));
            let mut bad = h;
            bad[3] ^= 0x10;
            assert!(decode_header(&bad).is_err());
        }
    }
}
