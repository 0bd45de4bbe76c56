//! What the compiler leaves resident, let go before the engine runs a pipeline: the
//! heap's free memory and the tool's code pages.
//!
//! The `sluice` tool is a 20 MB text of code with the compiler, the code generator and
//! the argument parser in it; compiling a `.pipe` file touches about 6 MB of it, and the
//! kernel maps each touched page (and its neighbours, fault-around) into the process for
//! good. A compiled runner never has those pages, so before [`drop_code_pages`] the
//! engine's resident set was the pipeline's plus about 7 MB of code it no longer runs
//! (parse_tabular: 21 MB against the runner's 14). Dropping the mappings
//! (`MADV_DONTNEED`) of the executable's read-only file pages costs nothing in memory
//! or I/O: those pages stay in the page cache, and the run maps again only the code it
//! executes (minor faults, a few milliseconds at most).
//!
//! Only mappings that are provably clean copies of the file are dropped: private ones of
//! this executable, not writable, and with no anonymous (copied-on-write) pages in them.
//! `MADV_DONTNEED` on such a mapping can only bring back the file's bytes that are
//! already there. Elsewhere than Linux this is a no-op.

/// Returns the heap's free memory to the system (`mi_collect`: the compilation's, freed
/// just before) and drops the mappings of the tool's code pages ([`drop_code_pages`]).
/// parse_tabular's peak RSS in the engine: 20.0–21.4 MB before, 15.6–16.8 MB after,
/// against 13.7–14.7 MB for its compiled runner.
pub(super) fn let_go() {
    unsafe extern "C" {
        /// mimalloc's (the global allocator's, src/main.rs): frees what its heaps hold
        /// unused, `force` also what other threads freed.
        fn mi_collect(force: bool);
    }
    // SAFETY: mimalloc is linked as the global allocator; `mi_collect` only gives free
    // memory back and may be called from any thread at any time.
    unsafe { mi_collect(true) };
    drop_code_pages();
}

/// Drops this process's mappings of its own executable's clean, read-only pages (see the
/// module docs); returns how many bytes of mappings it asked the kernel to drop. Errors
/// (no `/proc`, an unexpected format) leave everything as it was.
pub(super) fn drop_code_pages() -> usize {
    #[cfg(target_os = "linux")]
    {
        let (Ok(exe), Ok(smaps)) =
            (std::fs::read_link("/proc/self/exe"), std::fs::read_to_string("/proc/self/smaps"))
        else {
            return 0;
        };
        let Some(exe) = exe.to_str() else { return 0 };
        let mut dropped = 0;
        for (start, end) in clean_mappings(&smaps, exe) {
            // SAFETY: [start, end) is a whole mapping of this process, read-only, private and
            // holding no page of its own (see `clean_mappings`): dropping its pages only makes
            // the next access map the same bytes of the file again.
            let rc = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
            if rc == 0 {
                dropped += end - start;
            }
        }
        dropped
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The `[start, end)` ranges of the mappings in `smaps` (the text of `/proc/PID/smaps`)
/// that are private, not writable, of the file `exe`, and hold no anonymous page.
fn clean_mappings(smaps: &str, exe: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    // The mapping being read: its range, and whether it qualifies so far.
    let mut current: Option<(usize, usize, bool)> = None;
    let mut finish = |current: &mut Option<(usize, usize, bool)>, no_anonymous: bool| {
        if let Some((start, end, true)) = current.take()
            && no_anonymous
        {
            out.push((start, end));
        }
    };
    let mut anonymous_zero = false;
    for line in smaps.lines() {
        if let Some((range, rest)) = header(line) {
            finish(&mut current, anonymous_zero);
            anonymous_zero = false;
            let perms = rest.split_whitespace().next().unwrap_or("");
            // offset, device, inode, then the path (which may hold spaces).
            let path = rest.splitn(5, char::is_whitespace).nth(4).map(str::trim).unwrap_or("");
            let eligible = perms.len() == 4 && !perms.contains('w') && perms.ends_with('p') && path == exe;
            current = Some((range.0, range.1, eligible));
        } else if let Some(kb) = line.strip_prefix("Anonymous:") {
            anonymous_zero = kb.trim().trim_end_matches("kB").trim() == "0";
        }
    }
    finish(&mut current, anonymous_zero);
    out
}

/// A mapping's header line of smaps (`start-end perms offset dev inode path`): its range
/// and the rest after it; `None` for the lines of fields under it.
fn header(line: &str) -> Option<((usize, usize), &str)> {
    let (range, rest) = line.split_once(' ')?;
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    (start < end).then_some(((start, end), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
555ab0d89000-555ab134d000 r--p 00000000 fd:01 1234 /opt/sluice
Rss:                1692 kB
Anonymous:             0 kB
555ab134d000-555ab210e000 r-xp 005c3000 fd:01 1234 /opt/sluice
Rss:                5872 kB
Anonymous:             0 kB
555ab210e000-555ab21d1000 r--p 01383000 fd:01 1234 /opt/sluice
Rss:                 780 kB
Anonymous:           772 kB
555ab21d1000-555ab21d9000 rw-p 01445000 fd:01 1234 /opt/sluice
Anonymous:            32 kB
7fb1dcd79000-7fb1dcecf000 r-xp 00026000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
20000000000-20040000000 rw-p 00000000 00:00 0 
Anonymous:         10208 kB
7fb1dd000000-7fb1dd001000 r-xp 00000000 fd:01 77 /opt/sluice with space
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_private_mappings_of_the_executable_are_dropped() {
        // The RELRO mapping (read-only now, but relocated: anonymous pages), the writable
        // data, libc's text and the heap stay; so does another file whose name starts alike.
        assert_eq!(
            clean_mappings(SMAPS, "/opt/sluice"),
            vec![(0x555ab0d89000, 0x555ab134d000), (0x555ab134d000, 0x555ab210e000)]
        );
        assert_eq!(clean_mappings(SMAPS, "/opt/sluice with space"), vec![(0x7fb1dd000000, 0x7fb1dd001000)]);
    }

    #[test]
    fn a_mapping_without_an_anonymous_line_is_kept() {
        let smaps = "1000-2000 r-xp 00000000 fd:01 1 /opt/sluice\nRss: 4 kB\n";
        assert!(clean_mappings(smaps, "/opt/sluice").is_empty());
    }

    #[test]
    fn the_running_tool_keeps_working_after_its_code_pages_are_dropped() {
        // This test binary's own text: dropped, then run again (this very function).
        let dropped = drop_code_pages();
        #[cfg(target_os = "linux")]
        assert!(dropped > 0, "nothing dropped");
        assert_eq!(header("10-20 r-xp 0 0:0 0 x").map(|(r, _)| r), Some((0x10, 0x20)));
    }
}
