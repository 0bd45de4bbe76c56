//! [`ObjectReader`]: an object as a `Read`, made of ranged GETs of `chunk` bytes with up
//! to `in_flight` of them running ahead of the reader.
//!
//! **Bounded read-ahead:** an open object holds at most `in_flight` chunks being fetched
//! or fetched and waiting, plus the one being read: `(in_flight + 1) × chunk` bytes
//! ([`ReadOptions::read_ahead_bytes`]), whatever the object's size.
//!
//! **Exact resume:** a chunk is one byte range; when its GET fails or stalls part-way
//! (connection reset, 5xx, 503 throttling, no bytes for the stall timeout), the bytes
//! received are kept and the next attempt asks for the rest of the range only, so the
//! reader sees every byte once, in order. Each GET carries the ETag the `HEAD` saw
//! (`if_match`) and the ETag of each answer is compared with it: an object replaced
//! mid-read is a permanent error naming the URL, as are 403 and 404.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use object_store::{GetOptions, GetRange};
use tokio::task::JoinHandle;

use super::rt;
use super::store::{Object, Retry, env_num, gave_up, is_transient, stalled, to_io};

/// The size of one ranged GET (`SLUICE_STORAGE_CHUNK` overrides it). From the runtime's
/// `defaults.rs`, which the physical plan reads too: `explain` states the read-ahead of
/// its open files beside the memory bound, for when they are objects.
pub const STORAGE_CHUNK_BYTES: usize = crate::defaults::OBJECT_READ_CHUNK_BYTES;

/// Ranged GETs in flight per object being read (`SLUICE_STORAGE_IN_FLIGHT` overrides it):
/// an open object holds at most this many chunks fetched ahead plus the one being read,
/// 40 MiB by default.
pub const STORAGE_IN_FLIGHT: usize = crate::defaults::OBJECT_READS_IN_FLIGHT;

/// How an object is read: the size of each ranged GET, how many run ahead, and the retry
/// policy.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Bytes per ranged GET.
    pub chunk: usize,
    /// Ranged GETs in flight at once (at least 1).
    pub in_flight: usize,
    /// Retries, backoff and the stall timeout.
    pub retry: Retry,
}

impl ReadOptions {
    /// The defaults ([`STORAGE_CHUNK_BYTES`], [`STORAGE_IN_FLIGHT`]),
    /// overridden by `SLUICE_STORAGE_CHUNK` and `SLUICE_STORAGE_IN_FLIGHT`, and
    /// [`Retry::from_env`].
    pub fn from_env() -> ReadOptions {
        let chunk = env_num("SLUICE_STORAGE_CHUNK").map_or(STORAGE_CHUNK_BYTES, |n| n as usize);
        let in_flight = env_num("SLUICE_STORAGE_IN_FLIGHT").map_or(STORAGE_IN_FLIGHT, |n| n as usize);
        ReadOptions { chunk: chunk.max(1), in_flight: in_flight.max(1), retry: Retry::from_env() }
    }

    /// The most bytes one open object holds: the chunks in flight and the one being read.
    pub fn read_ahead_bytes(&self) -> u64 {
        (self.in_flight as u64 + 1) * self.chunk as u64
    }
}

/// An object read as a stream of ranged GETs (see the module doc).
#[derive(Debug)]
pub struct ObjectReader {
    object: Arc<Object>,
    opts: ReadOptions,
    /// The start of the next range to request.
    next_fetch: u64,
    /// The ranges requested, in order.
    pending: VecDeque<JoinHandle<io::Result<Bytes>>>,
    /// The chunk being read and how far.
    current: Bytes,
    pos: usize,
}

impl ObjectReader {
    /// Opens the object at `url` (a `HEAD`: a missing object or bucket fails here).
    pub fn open(url: &Path, opts: ReadOptions) -> io::Result<ObjectReader> {
        Ok(ObjectReader::new(Object::head(url)?, opts))
    }

    /// Reads `object`, whose size and ETag are known.
    pub fn new(object: Object, opts: ReadOptions) -> ObjectReader {
        ObjectReader {
            object: Arc::new(object),
            opts,
            next_fetch: 0,
            pending: VecDeque::new(),
            current: Bytes::new(),
            pos: 0,
        }
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.object.size
    }

    /// Requests chunks until `in_flight` are pending or the object is all requested.
    fn top_up(&mut self) {
        while self.pending.len() < self.opts.in_flight && self.next_fetch < self.object.size {
            let end = (self.next_fetch + self.opts.chunk as u64).min(self.object.size);
            let (object, retry) = (self.object.clone(), self.opts.retry);
            self.pending.push_back(rt::spawn(fetch(object, self.next_fetch..end, retry)));
            self.next_fetch = end;
        }
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.current.len() {
            self.top_up();
            let Some(next) = self.pending.pop_front() else { return Ok(0) };
            self.current =
                rt::block_on(next).map_err(|e| io::Error::other(format!("{e} ({})", self.object.url)))??;
            self.pos = 0;
            // Keep the pipe full while this chunk is read.
            self.top_up();
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Drop for ObjectReader {
    fn drop(&mut self) {
        for h in &self.pending {
            h.abort();
        }
    }
}

/// The bytes `range` of `object`, retried under `retry` and resumed where a failed
/// attempt stopped.
pub async fn fetch(object: Arc<Object>, range: Range<u64>, retry: Retry) -> io::Result<Bytes> {
    let want = (range.end - range.start) as usize;
    let mut got = BytesMut::with_capacity(want);
    let mut attempt = 0;
    loop {
        let from = range.start + got.len() as u64;
        let failure = match attempt_range(&object, from..range.end, retry, &mut got).await {
            Ok(()) if got.len() == want => return Ok(got.freeze()),
            Ok(()) => io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the store sent {} of {want} bytes of range {range:?} ({})", got.len(), object.url),
            ),
            Err(Failure::Permanent(e)) => return Err(e),
            Err(Failure::Transient(e)) => e,
        };
        attempt += 1;
        if attempt > retry.retries {
            return Err(gave_up(failure, attempt));
        }
        tokio::time::sleep(retry.wait(attempt)).await;
    }
}

enum Failure {
    Transient(io::Error),
    Permanent(io::Error),
}

/// One GET of `range`, appending what arrives to `got` (kept on failure).
async fn attempt_range(
    object: &Object,
    range: Range<u64>,
    retry: Retry,
    got: &mut BytesMut,
) -> Result<(), Failure> {
    let url = object.url.as_str();
    let opts = GetOptions {
        range: Some(GetRange::Bounded(range.clone())),
        if_match: object.e_tag.clone(),
        ..Default::default()
    };
    let answer = match tokio::time::timeout(retry.stall, object.store.get_opts(&object.key, opts)).await {
        Err(_) => return Err(Failure::Transient(stalled(url, retry.stall))),
        Ok(Err(e)) if is_transient(&e) => return Err(Failure::Transient(to_io(url, e))),
        Ok(Err(e)) => return Err(Failure::Permanent(to_io(url, e))),
        Ok(Ok(r)) => r,
    };
    if let (Some(want), Some(seen)) = (&object.e_tag, &answer.meta.e_tag)
        && want != seen
    {
        return Err(Failure::Permanent(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the object changed while it was read: ETag {want} became {seen} ({url})"),
        )));
    }
    if answer.range.start != range.start {
        return Err(Failure::Permanent(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "asked for bytes from {}, the store answered from {} ({url})",
                range.start, answer.range.start
            ),
        )));
    }
    let mut body = answer.into_stream();
    let mut received = 0u64;
    loop {
        match tokio::time::timeout(retry.stall, body.next()).await {
            Err(_) => return Err(Failure::Transient(stalled(url, retry.stall))),
            Ok(None) => return Ok(()),
            Ok(Some(Ok(bytes))) => {
                received += bytes.len() as u64;
                if received > range.end - range.start {
                    return Err(Failure::Permanent(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the store sent more than the {} bytes asked for ({url})",
                            range.end - range.start
                        ),
                    )));
                }
                got.extend_from_slice(&bytes);
            }
            Ok(Some(Err(e))) if is_transient(&e) => return Err(Failure::Transient(to_io(url, e))),
            Ok(Some(Err(e))) => return Err(Failure::Permanent(to_io(url, e))),
        }
    }
}

/// The bytes of several ranges of one object, each a GET of its own, all in flight at
/// once (what a global shuffle's window of coalesced records asks for).
pub fn fetch_ranges(object: &Arc<Object>, ranges: &[Range<u64>], retry: Retry) -> io::Result<Vec<Bytes>> {
    let handles: Vec<_> = ranges.iter().map(|r| rt::spawn(fetch(object.clone(), r.clone(), retry))).collect();
    rt::block_on(async {
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(h.await.map_err(io::Error::other)??);
        }
        Ok(out)
    })
}
