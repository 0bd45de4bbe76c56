//! The front ends: the `.pipe` text front end (the pest grammar, `grammar.pest`, and its
//! lowering to the shared AST; the only module that names pest types) and the token
//! front end of `pipeline!` ([`tokens`], syn), which build the same AST.

mod lower;
pub mod tokens;

pub use lower::parse;
pub use tokens::{SpanMap, parse_tokens};

use crate::ast::Span;
use crate::diagnostic::Diagnostic;

/// `E0002` for an integer literal above `u64::MAX` (both front ends).
fn int_out_of_range(span: Span) -> Diagnostic {
    Diagnostic::error("E0002", "integer literal out of range", span, "larger than 2^64 - 1")
        .with_help("integers in a pipeline are unsigned 64-bit")
}

/// `E0002` for a float literal that is not a finite `f64` (both front ends).
fn float_out_of_range(span: Span) -> Diagnostic {
    Diagnostic::error("E0002", "number literal out of range", span, "not a finite 64-bit float")
        .with_help("write a smaller number")
}
