//! The compiler's typed intermediate representation. It names no pest, syn or quote type:
//! both front ends lower into it, and the optimizer and code generator work on it.
//!
//! So far: the types of values that flow through a pipeline ([`types`]). The logical and
//! physical plans follow ([3/9]).

pub mod kernel;
pub mod plan;
pub mod types;
