//! The largest values a stage argument takes, beyond which no machine could honour it:
//! a reader's `cycle` (files open at once) and any stage's `parallel` (threads asked
//! for). A literal above one is E0211 (`sema::stages`); a parameter is held to it when
//! the pipeline is built (`physical::rules`, the generated `Params::check`). The values
//! are the runtime's own, from `runtime/src/defaults.rs` (read as source: the one
//! include of it, which `physical::defaults` reads too).

/// The runtime's `defaults.rs`, compiled here once for the whole compiler
/// (`physical::defaults` reads its buffer sizes from it).
#[path = "../../../runtime/src/defaults.rs"]
pub(crate) mod runtime;

/// The most files an interleave reads at once.
pub const MAX_CYCLE_LENGTH: u64 = runtime::MAX_CYCLE_LENGTH as u64;
/// The most threads a stage may be asked for.
pub const MAX_PARALLEL: u64 = runtime::MAX_PARALLEL as u64;

/// The largest value argument `arg` of any stage takes, when one is set.
pub fn limit(arg: &str) -> Option<u64> {
    match arg {
        "cycle" => Some(MAX_CYCLE_LENGTH),
        "parallel" => Some(MAX_PARALLEL),
        _ => None,
    }
}
