//! Transparent huge pages off for a runner process.
//!
//! mimalloc asks the kernel for transparent huge pages on the memory it maps (where THP
//! is `madvise` or `always`), and every first touch of such memory then zeroes 2 MiB at
//! once. A pipeline's working set is a few batches, allocated and freed over and over:
//! in `perf` of `parse_tabular` the kernel's `clear_page_erms` under huge-page faults was
//! 7–9 % of the run (225 faults, 450 MB zeroed for a 40 MB peak), and `shuffle_tabular`
//! peaked at 115–148 MB against 49–53 MB with 4 KiB pages (BENCHMARKS.md, "parse_tabular
//! II"). [`disable_for_process`] turns them off for the whole process, as mimalloc's own
//! `MIMALLOC_ALLOW_THP=0` does; a user who sets that variable keeps what it says.

/// Turns transparent huge pages off for this process (`prctl(PR_SET_THP_DISABLE)`; the
/// kernel checks it at every later fault, so memory mapped before is covered too), unless
/// `MIMALLOC_ALLOW_THP` is set. Returns whether they are off now. Does nothing (false)
/// outside Linux.
pub fn disable_for_process() -> bool {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `prctl` with integer arguments only; it changes a flag of this process.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_process_has_huge_pages_off_afterwards() {
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
            assert!(!super::disable_for_process(), "the user's setting is kept");
            return;
        }
        assert!(super::disable_for_process());
        // SAFETY: `prctl` with integer arguments only; it reads a flag of this process.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }, 1);
    }
}
