//! The `.pipe` front end: the pest grammar (`grammar.pest`) and its lowering to the
//! shared AST. This is the only module that names pest types.

mod lower;

pub use lower::parse;
