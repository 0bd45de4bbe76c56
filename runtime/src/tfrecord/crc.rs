//! CRC32C of TFRecord framing, fast for the short payloads of tabular data.
//!
//! The `crc32c` crate uses the SSE 4.2 instruction, but on inputs shorter than 768
//! bytes it first walks up to 7 bytes one at a time to reach an 8-byte aligned address
//! and ends the same way: on a 108-byte record that is about 19 dependent `crc32`
//! instructions where 14 suffice, and an 8-byte length at an odd offset costs up to 8
//! instead of 1. x86-64 loads need no alignment, so [`crc32c`] here reads 8 bytes at a
//! time from wherever the data starts and ends with one 4-, 2- and 1-byte step; longer
//! inputs go to the crate, whose three interleaved streams win there. The values are
//! the same CRC32C (Castagnoli, reflected, initial and final inversion) on every path:
//! the tests compare them against the crate on every length and alignment.

/// Inputs at least this long go to the `crc32c` crate (its three-stream path starts at
/// 768 bytes).
const CRATE_FROM: usize = 768;

/// The CRC32C of `data` (the same value as `crc32c::crc32c`).
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if data.len() < CRATE_FROM && std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2, checked just above.
            return unsafe { short_sse42(data) };
        }
    }
    crc32c::crc32c(data)
}

/// The CRC32C of the 8 little-endian bytes of `value` (a record's length field).
#[inline]
pub fn crc32c_u64(value: u64) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2, checked just above.
            return unsafe { u64_sse42(value) };
        }
    }
    crc32c::crc32c(&value.to_le_bytes())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn u64_sse42(value: u64) -> u32 {
    use std::arch::x86_64::_mm_crc32_u64;
    !(_mm_crc32_u64(u64::from(u32::MAX), value) as u32)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn short_sse42(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64};
    let mut crc = u64::from(u32::MAX);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let mut rest = words.remainder();
    let mut c = crc as u32;
    if rest.len() >= 4 {
        c = _mm_crc32_u32(c, u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")));
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        c = _mm_crc32_u16(c, u16::from_le_bytes(rest[..2].try_into().expect("2 bytes")));
        rest = &rest[2..];
    }
    if let Some(&b) = rest.first() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_and_alignment_gives_the_crates_value() {
        // Bytes that are not a pattern the CRC could be blind to.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let bytes: Vec<u8> = (0..CRATE_FROM + 80)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for start in 0..8 {
            for len in 0..CRATE_FROM + 72 {
                let data = &bytes[start..start + len];
                assert_eq!(crc32c(data), crc32c::crc32c(data), "start {start}, length {len}");
            }
        }
        // The known answer of RFC 3720.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn a_length_field_gives_the_crates_value_of_its_bytes() {
        for v in [0u64, 1, 108, 124, 0xffff, 1 << 40, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(crc32c_u64(v), crc32c::crc32c(&v.to_le_bytes()), "{v}");
        }
    }
}
