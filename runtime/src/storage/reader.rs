//! [`ObjectReader`]: an object as a `Read`, made of ranged GETs of `chunk` bytes with up
//! to `in_flight` of them running ahead of the reader.
//!
//! **Bounded read-ahead:** an open object holds at most `in_flight` chunks being fetched
//! or fetched and waiting, plus the one being read: `(in_flight + 1) × chunk` bytes
//! ([`ReadOptions::read_ahead_bytes`]), whatever the object's size. Only its first chunk
//! ahead is its own: the others are taken from one pool for the whole process
//! ([`ReadOptions::shared`] bytes, given back as each is read), so `n` open objects hold
//! at most `min((in_flight + 1) × chunk × n, 2 × chunk × n + shared)`. A reader that
//! finds the pool empty goes on with its one chunk ahead (it never waits for the pool).
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
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use object_store::{GetOptions, GetRange};
use tokio::task::JoinHandle;

use super::rt;
use super::store::{Object, Retry, env_num, gave_up, http_status, is_transient, stalled, to_io};

/// The size of one ranged GET (`SLUICE_STORAGE_CHUNK` overrides it). From the runtime's
/// `defaults.rs`, which the physical plan reads too: `explain` states the read-ahead of
/// its open files beside the memory bound, for when they are objects.
pub const STORAGE_CHUNK_BYTES: usize = crate::defaults::OBJECT_READ_CHUNK_BYTES;

/// Ranged GETs in flight per object being read (`SLUICE_STORAGE_IN_FLIGHT` overrides it):
/// an open object holds at most this many chunks fetched ahead plus the one being read,
/// 40 MiB by default.
pub const STORAGE_IN_FLIGHT: usize = crate::defaults::OBJECT_READS_IN_FLIGHT;

/// The process-wide pool of read-ahead beyond each open object's first chunk ahead
/// (`SLUICE_STORAGE_READ_AHEAD` overrides it).
pub const STORAGE_SHARED_READ_AHEAD: usize = crate::defaults::OBJECT_READ_AHEAD_SHARED_BYTES;

/// Bytes of the shared pool taken now, by every open reader of the process.
static SHARED_TAKEN: AtomicU64 = AtomicU64::new(0);

/// How an object is read: the size of each ranged GET, how many run ahead, and the retry
/// policy.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Bytes per ranged GET.
    pub chunk: usize,
    /// Ranged GETs in flight at once (at least 1).
    pub in_flight: usize,
    /// Bytes of the process-wide pool the GETs beyond each reader's first one draw on.
    pub shared: u64,
    /// Retries, backoff and the stall timeout.
    pub retry: Retry,
}

impl ReadOptions {
    /// The defaults ([`STORAGE_CHUNK_BYTES`], [`STORAGE_IN_FLIGHT`],
    /// [`STORAGE_SHARED_READ_AHEAD`]), overridden by `SLUICE_STORAGE_CHUNK`,
    /// `SLUICE_STORAGE_IN_FLIGHT` and `SLUICE_STORAGE_READ_AHEAD`, and [`Retry::from_env`].
    pub fn from_env() -> ReadOptions {
        let chunk = env_num("SLUICE_STORAGE_CHUNK").map_or(STORAGE_CHUNK_BYTES, |n| n as usize);
        let in_flight = env_num("SLUICE_STORAGE_IN_FLIGHT").map_or(STORAGE_IN_FLIGHT, |n| n as usize);
        let shared = env_num("SLUICE_STORAGE_READ_AHEAD").unwrap_or(STORAGE_SHARED_READ_AHEAD as u64);
        ReadOptions { chunk: chunk.max(1), in_flight: in_flight.max(1), shared, retry: Retry::from_env() }
    }

    /// The most bytes one open object holds: the chunks in flight and the one being read.
    pub fn read_ahead_bytes(&self) -> u64 {
        (self.in_flight as u64 + 1) * self.chunk as u64
    }

    /// The most bytes `open` open objects hold together: each its own two chunks (the one
    /// read and the first ahead), and the shared pool.
    pub fn read_ahead_bytes_of(&self, open: u64) -> u64 {
        let own = open.saturating_mul(self.read_ahead_bytes());
        own.min(open.saturating_mul(2 * self.chunk as u64).saturating_add(self.shared))
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
    /// The sizes of the pending chunks taken from the shared pool, oldest first (all
    /// pending chunks but the oldest one).
    borrowed: VecDeque<u64>,
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
            borrowed: VecDeque::new(),
        }
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.object.size
    }

    /// Requests chunks until `in_flight` are pending, the shared pool has no room for
    /// one more beyond the first, or the object is all requested.
    fn top_up(&mut self) {
        while self.pending.len() < self.opts.in_flight && self.next_fetch < self.object.size {
            let end = (self.next_fetch + self.opts.chunk as u64).min(self.object.size);
            if !self.pending.is_empty() {
                let n = end - self.next_fetch;
                let limit = self.opts.shared;
                let took = SHARED_TAKEN.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                    t.checked_add(n).filter(|&after| after <= limit)
                });
                if took.is_err() {
                    break;
                }
                self.borrowed.push_back(n);
            }
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
            // The next pending chunk, if any, is now the first ahead: its own, no longer
            // borrowed. (The borrowed sizes are the chunks after the first, oldest first.)
            if let Some(n) = self.borrowed.pop_front() {
                SHARED_TAKEN.fetch_sub(n, Ordering::AcqRel);
            }
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
        SHARED_TAKEN.fetch_sub(self.borrowed.iter().sum::<u64>(), Ordering::AcqRel);
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
        // Every range asked for lies within the size the object had when it was opened:
        // a store that finds it unsatisfiable holds a shorter object under the key now
        // (one that answers range before precondition, or an object with no ETag).
        Ok(Err(e)) if http_status(&e) == Some(416) => {
            return Err(Failure::Permanent(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the object changed while it was read: it no longer holds bytes {range:?} \
                     (416 Range Not Satisfiable) ({url})"
                ),
            )));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

    /// Readers of one in-memory object: the first ahead of each is its own, the GETs
    /// beyond it share the pool, which a reader gives back as it reads and when dropped;
    /// one that finds the pool full still reads its object whole and in order.
    #[test]
    fn read_ahead_beyond_the_first_chunk_comes_from_one_pool() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let key = object_store::path::Path::from("pool/a");
        rt::block_on(store.put(&key, PutPayload::from(data.clone()))).unwrap();
        let object = Object { store, key, url: "mem://pool/a".into(), size: data.len() as u64, e_tag: None };
        let opts = ReadOptions { chunk: 1000, in_flight: 4, shared: 2000, retry: Retry::from_env() };
        assert_eq!(ReadOptions { shared: 1 << 30, ..opts }.read_ahead_bytes_of(2), 2 * 5000);
        assert_eq!(opts.read_ahead_bytes_of(1), 2000 + 2000);
        assert_eq!(opts.read_ahead_bytes_of(3), 3 * 2000 + 2000);
        let before = SHARED_TAKEN.load(Ordering::Acquire);
        let mut a = ObjectReader::new(object.clone(), ReadOptions { shared: before + 2000, ..opts });
        let mut b = ObjectReader::new(object, ReadOptions { shared: before + 2000, ..opts });
        let mut byte = [0u8; 1];
        a.read_exact(&mut byte).unwrap();
        // `a` has its own chunk ahead and two from the pool; the pool is then full.
        assert_eq!((a.pending.len(), a.borrowed.len()), (3, 2));
        b.read_exact(&mut byte).unwrap();
        assert_eq!((b.pending.len(), b.borrowed.len()), (1, 0), "the pool is full: one ahead");
        let mut rest = Vec::new();
        b.read_to_end(&mut rest).unwrap();
        assert_eq!([&byte[..], &rest].concat(), data);
        drop(a);
        assert_eq!(SHARED_TAKEN.load(Ordering::Acquire), before, "all given back");
    }
}
