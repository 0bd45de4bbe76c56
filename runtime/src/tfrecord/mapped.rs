//! Read-only memory maps of indexed data files, for random reads of small records: a
//! record copied out of the page cache with one `memcpy` instead of one `pread` system
//! call (about a tenth of the cost for 124-byte records; BENCHMARKS.md, "Global shuffle").
//!
//! A file truncated while mapped makes a load from a page past its new end raise SIGBUS,
//! which would kill the process. [`Mapping::copy_to`] therefore copies under a guard: a
//! process-wide SIGBUS handler, installed once and chaining to the handler that was there
//! before, which for a fault inside the mapping the current thread is copying from maps a
//! page of zeros over the faulting page and notes the fault. The copy then completes and
//! returns [`Faulted`]; the caller reports the file as changed, an error as a short
//! `pread` is. A mapping that faulted is not read again (it holds zeros where the page
//! was): [`Mapping::copy_to`] refuses it and the caller reads the file with `pread`.
//! A fault anywhere else (another mapping, a bug) goes to the previous handler, or to
//! the default action (the process dies of SIGBUS) as if this handler were not there.

use std::cell::Cell;
use std::ffi::c_void;
use std::fmt;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, compiler_fence};

/// A copy touched a page that could not be read: the file was truncated under the map
/// (or the page could not be read from the device).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faulted;

/// A whole file mapped read-only.
pub struct Mapping {
    base: *const u8,
    len: usize,
    faulted: AtomicBool,
}

// SAFETY: the mapping is read-only and owned by this value until it is dropped; any number
// of threads may copy from it at once (the only writer is the kernel, or the SIGBUS
// handler replacing a page that could not be read).
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for Mapping {}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapping").field("len", &self.len).field("faulted", &self.faulted).finish()
    }
}

thread_local! {
    /// The address range the thread is copying from (`(0, 0)` when none).
    static GUARD: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// Set by the handler when it patched a page inside `GUARD`.
    static FAULT: Cell<bool> = const { Cell::new(false) };
}

impl Mapping {
    /// Maps the first `len` bytes of `file`, or `None` when it cannot be: an empty file,
    /// a length beyond the address space, a refused `mmap`, or no SIGBUS handler (the
    /// caller then reads with `pread`).
    pub fn new(file: &File, len: u64) -> Option<Mapping> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0 && l <= isize::MAX as usize)?;
        if !handler_installed() {
            return None;
        }
        // SAFETY: a fresh read-only shared mapping of an open file; the kernel picks the
        // address. Loads from it are guarded against SIGBUS by `copy_to`.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0)
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        Some(Mapping { base: base.cast::<u8>().cast_const(), len, faulted: AtomicBool::new(false) })
    }

    /// Hints the processor to fetch the mapped bytes `offset..offset + len` (their first
    /// 512 and their last) into cache, for a copy a few records later. A hint never
    /// faults, so a page past a cut-short file's end is harmless here.
    #[inline]
    pub fn prefetch(&self, offset: u64, len: u64) {
        let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else { return };
        if len == 0 || offset.saturating_add(len) > self.len {
            return;
        }
        let at = self.base.wrapping_add(offset);
        for line in (0..len.min(512)).step_by(64) {
            prefetch(at.wrapping_add(line));
        }
        prefetch(at.wrapping_add(len - 1));
    }

    /// Whether a copy from this mapping ever faulted (it is then not read again).
    pub fn faulted(&self) -> bool {
        self.faulted.load(Ordering::Relaxed)
    }

    /// Copies the mapped bytes `offset..offset + dst.len()` into `dst`: [`Faulted`] when
    /// a page of them could not be read (the file was cut short under the map), or this
    /// mapping faulted before. Panics when the range is outside the mapping (callers
    /// check their extents against the file's index, which the mapping's length is).
    pub fn copy_to(&self, dst: &mut [u8], offset: u64) -> Result<(), Faulted> {
        let offset = usize::try_from(offset).expect("offset within the mapping");
        assert!(offset.checked_add(dst.len()).is_some_and(|end| end <= self.len), "range within the mapping");
        if self.faulted() {
            return Err(Faulted);
        }
        let base = self.base as usize;
        GUARD.with(|g| g.set((base, base + self.len)));
        FAULT.with(|f| f.set(false));
        // The guard must be in place before the first load and read after the last: the
        // handler runs on this thread, so a compiler fence orders them.
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `offset..offset + dst.len()` lies inside the live mapping (asserted
        // above) and `dst` is a distinct, writable buffer. A page of the source that
        // cannot be read is replaced by zeros by the handler (the guard covers it).
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(offset), dst.as_mut_ptr(), dst.len()) };
        compiler_fence(Ordering::SeqCst);
        GUARD.with(|g| g.set((0, 0)));
        if FAULT.with(Cell::get) {
            self.faulted.store(true, Ordering::Relaxed);
            return Err(Faulted);
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base..base + len` is this value's mapping (pages the handler replaced
        // are part of the same range) and nothing borrows it any more.
        unsafe { libc::munmap(self.base.cast_mut().cast::<c_void>(), self.len) };
    }
}

/// Hints the processor to fetch the cache line holding `addr` (no effect on other
/// targets than x86-64). Never faults, whatever the address.
#[inline]
pub fn prefetch(addr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it does not fault on any address, mapped or not.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// The page size, set when the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(0);
/// The SIGBUS action before ours, to chain to.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Installs the SIGBUS handler once; false when it cannot be.
fn handler_installed() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: `sysconf` and `sigaction` with valid, zero-initialised arguments.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page <= 0 {
                return false;
            }
            PAGE.store(page as usize, Ordering::Relaxed);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                return false;
            }
            let _ = PREVIOUS.set(old);
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) == 0
        }
    })
}

/// The SIGBUS handler: a fault inside the range this thread is copying from gets a page
/// of zeros mapped over it and is noted; any other goes on to the previous action.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (lo, hi) = GUARD.with(Cell::get);
    if lo <= addr && addr < hi {
        let page = PAGE.load(Ordering::Relaxed);
        // SAFETY: replaces one page inside this thread's guarded mapping (which stays
        // mapped for the whole copy) with anonymous zeros; `mmap` is a plain system call.
        let patched = unsafe {
            libc::mmap(
                (addr & !(page - 1)) as *mut c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if patched != libc::MAP_FAILED {
            FAULT.with(|f| f.set(true));
            return;
        }
    }
    let previous = PREVIOUS.get().map(|a| (a.sa_sigaction, a.sa_flags));
    match previous {
        Some((handler, flags)) if handler != libc::SIG_DFL && handler != libc::SIG_IGN => {
            if flags & libc::SA_SIGINFO != 0 {
                // SAFETY: an `SA_SIGINFO` handler has this signature.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                    unsafe { std::mem::transmute(handler) };
                f(sig, info, ctx);
            } else {
                // SAFETY: a plain handler has this signature.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
                f(sig);
            }
        }
        _ => {
            // The default action: restore it and return, so the load faults again and
            // the process dies of SIGBUS as it would without this handler.
            // SAFETY: `sigaction` with a zeroed action whose handler is `SIG_DFL`.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn copies_and_turns_a_truncation_into_a_fault() {
        let page = 4096;
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        let data: Vec<u8> = (0..4 * page).map(|i| (i % 251) as u8).collect();
        tmp.write_all(&data).unwrap();
        tmp.flush().unwrap();
        let file = File::open(tmp.path()).unwrap();
        let map = Mapping::new(&file, data.len() as u64).expect("a mapping");
        let mut buf = vec![0u8; 100];
        map.copy_to(&mut buf, 3 * page as u64 + 5).unwrap();
        assert_eq!(buf, data[3 * page + 5..3 * page + 105]);
        // Cut the file to one page: pages 1.. are gone and a load from them would SIGBUS.
        tmp.as_file().set_len(page as u64).unwrap();
        assert_eq!(map.copy_to(&mut buf, 3 * page as u64 + 5), Err(Faulted));
        assert!(map.faulted());
        // A faulted mapping is not read again, even where its pages are still good.
        assert_eq!(map.copy_to(&mut buf, 0), Err(Faulted));
        // Other mappings of other files are unaffected.
        let other = Mapping::new(&file, page as u64).expect("a mapping");
        other.copy_to(&mut buf, 10).unwrap();
        assert_eq!(buf, data[10..110]);
    }

    #[test]
    fn empty_files_are_not_mapped() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        assert!(Mapping::new(tmp.as_file(), 0).is_none());
    }
}
