//! The reader's memory stays flat whatever the stream size: it holds one buffer, never
//! the file. Alone in its test binary so the process's peak RSS is this test's.

use std::io::{self, Read};

use sluice_runtime::tfrecord::{ReaderOptions, RecordReader, encode_header, masked_crc};

/// An endless-looking TFRecord stream made on the fly: `records` records of `len` bytes.
struct Synthetic {
    frame: Vec<u8>,
    pos: usize,
    left: u64,
}

impl Synthetic {
    fn new(records: u64, len: usize) -> Self {
        let data: Vec<u8> = (0..len).map(|i| (i * 131) as u8).collect();
        let mut frame = encode_header(len as u64).to_vec();
        frame.extend_from_slice(&data);
        frame.extend_from_slice(&masked_crc(&data).to_le_bytes());
        Synthetic { frame, pos: 0, left: records }
    }
}

impl Read for Synthetic {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() && self.left > 0 {
            let take = (self.frame.len() - self.pos).min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&self.frame[self.pos..self.pos + take]);
            n += take;
            self.pos += take;
            if self.pos == self.frame.len() {
                self.pos = 0;
                self.left -= 1;
            }
        }
        Ok(n)
    }
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn stream(bytes: u64, len: usize) -> u64 {
    let records = bytes / (len as u64 + 16);
    let mut r = RecordReader::new(Synthetic::new(records, len), "synthetic", ReaderOptions::default());
    let mut n = 0;
    while r.next_record().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, records);
    n
}

#[test]
fn peak_memory_does_not_grow_with_the_stream() {
    // Warm up allocator and buffers on a small stream first.
    stream(16 << 20, 12_288);
    let base = peak_rss_kib();
    stream(256 << 20, 12_288);
    let after_small = peak_rss_kib();
    stream(1 << 30, 12_288);
    stream(256 << 20, 124);
    let after_large = peak_rss_kib();
    eprintln!(
        "peak RSS: {base} KiB after warm-up, {after_small} after 256 MiB, {after_large} after 1.25 GiB more"
    );
    // The reader holds a 1 MiB buffer: 1 GiB streamed must not move the peak by more
    // than a few MiB (allocator noise), and no more than 256 MiB did.
    assert!(after_large - base < 8 * 1024, "peak RSS grew by {} KiB", after_large - base);
    assert!(after_large - after_small < 4 * 1024, "{after_small} → {after_large} KiB");
}
