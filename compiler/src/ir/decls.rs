//! A pipeline's checked declarations: parameters with their evaluated defaults, the
//! record schema, `budget`, `device` and `extern fn` signatures, every type resolved.
//! Plain data that sema produces ([`sema::decls`](crate::sema::decls) checks them) and the
//! physical plan and code generator read.

use crate::ir::types::{ParamType, TensorType, Value};
use crate::span::Span;

/// Where the tail of a pipeline runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// On CPU threads (the default).
    #[default]
    Cpu,
    /// Lowered to CUDA kernels after `batch`.
    Cuda,
}

/// A checked parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDecl {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: ParamType,
    /// Its default, evaluated and of its type.
    pub default: Option<Value>,
    /// Where it is declared.
    pub span: Span,
}

/// A checked schema field (a `tf.train.Example` feature).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDecl {
    /// The feature's name.
    pub name: String,
    /// Its dtype and shape (fixed dimensions, or `[]` for variable length).
    pub ty: TensorType,
    /// The value used when a record lacks the feature: exactly the shape's values.
    pub default: Option<Value>,
    /// A `SequenceExample` feature list (`sequence name: T[]` or `T[steps, ...]`): one
    /// step per entry of its first dimension; otherwise a feature of an `Example` or of a
    /// `SequenceExample`'s context.
    pub sequence: bool,
    /// Where it is declared.
    pub span: Span,
}

/// A checked `extern fn`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternDecl {
    /// The Rust path of the function.
    pub path: String,
    /// Parameter names and types.
    pub params: Vec<(String, TensorType)>,
    /// The result type.
    pub ret: TensorType,
    /// Where it is declared.
    pub span: Span,
}

/// The checked declarations of one pipeline.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Declarations {
    /// The pipeline's name.
    pub name: String,
    /// Where the pipeline's name is (for diagnostics about the whole pipeline).
    pub span: Span,
    /// Its parameters, in order.
    pub params: Vec<ParamDecl>,
    /// The record schema (empty when the pipeline declares none).
    pub schema: Vec<FieldDecl>,
    /// The memory budget in bytes, if declared.
    pub budget: Option<u64>,
    /// Where the budget is declared (for the error when the plan exceeds it).
    pub budget_span: Span,
    /// The CPU budget, `threads N;`: the most threads the pipeline's stages keep busy at
    /// once (`RuntimeOptions::cores`), if declared.
    pub threads: Option<u32>,
    /// Where the tail runs.
    pub device: Device,
    /// User functions.
    pub externs: Vec<ExternDecl>,
}
