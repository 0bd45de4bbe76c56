//! The compiler's typed intermediate representation. It names no pest, syn or quote type:
//! both front ends lower into it, and the optimizer and code generator work on it.
//!
//! The types of values that flow through a pipeline ([`types`]), a pipeline's checked
//! declarations ([`decls`]), the typed expressions of `map` and `filter` ([`expr`]) with
//! their bound operations ([`op`]), the operations of a map ([`map_op`]) and the runs of them
//! both backends fuse ([`fusion`]), the logical plan ([`plan`]; the combining stages in
//! [`combine`], `window` in [`window`], `repeat`, `take`, `skip`, `shard`, `cache` and
//! `prefetch` in [`pass`]; the enumeration words of stage arguments as
//! typed values in [`options`]), whether a plan's
//! position can be resumed ([`resume`]) and the per-column kernels of a device tail
//! ([`kernel`]).

pub mod bucket;
pub mod combine;
pub mod decls;
pub mod element;
pub mod expr;
pub mod flat_map;
pub mod formats;
pub mod fusion;
pub mod kernel;
pub mod limits;
pub mod map_op;
pub mod op;
pub mod options;
pub mod pack;
pub mod pass;
pub mod plan;
pub mod range;
pub mod read_file;
pub mod resume;
pub mod rewrite;
pub mod types;
pub mod window;
