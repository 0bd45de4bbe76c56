//! The front ends: the `.pipe` text front end (the pest grammar, `grammar.pest`, and its
//! lowering to the shared AST; the only module that names pest types) and the token
//! front end of `pipeline!` ([`tokens`], syn), which build the same AST.

mod lower;
pub mod tokens;

pub use lower::parse;
pub use tokens::{SpanMap, parse_tokens};
