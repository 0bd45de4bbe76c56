//! The abstract syntax tree of the `.pipe` language, shared by both front ends (pest for
//! `.pipe` files, syn for `pipeline!`): it names no parser type. Every node carries the
//! byte span of its source text; spans are for diagnostics only and are ignored by
//! equality (`PartialEq` compares structure), so the same pipeline written in a file or
//! inline gives equal trees.

use std::fmt;

// The operators are plain enums shared with the typed IR, which defines them.
pub use crate::ir::expr::{BinaryOp, UnaryOp};
pub use crate::span::Span;

/// A name, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// The name.
    pub name: String,
    /// Where.
    pub span: Span,
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A `::`-separated path (`decode_jpeg`, `my_crate::augment`).
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    /// The segments, at least one.
    pub segments: Vec<Ident>,
    /// The whole path.
    pub span: Span,
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str("::")?;
            }
            f.write_str(&s.name)?;
        }
        Ok(())
    }
}

/// A parsed `.pipe` file: one or more pipelines.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    /// The pipelines, in order.
    pub pipelines: Vec<Pipeline>,
}

/// `pipeline NAME(params) { items }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Its name.
    pub name: Ident,
    /// Run-time parameters with defaults (`--set NAME=VALUE` overrides them).
    pub params: Vec<Param>,
    /// Declarations and stages, in source order.
    pub items: Vec<Item>,
    /// The whole pipeline.
    pub span: Span,
}

/// `NAME: TYPE [= DEFAULT]` in a pipeline's parameter list.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The parameter's name.
    pub name: Ident,
    /// Its type.
    pub ty: TypeExpr,
    /// Its default, if any (a parameter without one must be set at run time).
    pub default: Option<Expr>,
    /// The whole parameter.
    pub span: Span,
}

/// One item of a pipeline body.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `schema { field: type [= default], ... }`: the features of the records.
    Schema(Schema),
    /// `extern fn path(params) -> type;`: a user Rust function the pipeline may call.
    ExternFn(ExternFn),
    /// `budget EXPR;`: the memory budget.
    Budget(Budget),
    /// `threads EXPR;`: the CPU budget (threads).
    Threads(Threads),
    /// `device NAME;`: where the tail after `batch` runs (`cpu` or `cuda`).
    Device(Device),
    /// A stage: `name(args);` or `name(args) { statements }`.
    Stage(Stage),
}

/// `schema { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    /// The declared features.
    pub fields: Vec<Field>,
    /// The whole schema.
    pub span: Span,
}

/// `name: type [= default]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The feature's name.
    pub name: Ident,
    /// Its type and shape.
    pub ty: TypeExpr,
    /// The value used when a record lacks the feature.
    pub default: Option<Expr>,
    /// `sequence name: ...`: a feature list of a `SequenceExample`, not a context
    /// feature (`parse_sequence_example`).
    pub sequence: bool,
    /// The whole field.
    pub span: Span,
}

/// `extern fn path(name: type, ...) -> type;`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternFn {
    /// The Rust path of the function.
    pub path: Path,
    /// Its parameters.
    pub params: Vec<FnParam>,
    /// What it returns.
    pub ret: TypeExpr,
    /// The whole declaration.
    pub span: Span,
}

/// `name: type` in an `extern fn`.
#[derive(Debug, Clone, PartialEq)]
pub struct FnParam {
    /// The parameter's name.
    pub name: Ident,
    /// Its type.
    pub ty: TypeExpr,
    /// The whole parameter.
    pub span: Span,
}

/// `budget EXPR;`.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The amount (usually a quantity such as `512 MiB`).
    pub value: Expr,
    /// The whole item.
    pub span: Span,
}

/// `threads EXPR;`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threads {
    /// The number of threads (a whole number).
    pub value: Expr,
    /// The whole item.
    pub span: Span,
}

/// `device NAME;`.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// `cpu` or `cuda`.
    pub target: Ident,
    /// The whole item.
    pub span: Span,
}

/// A stage: `name(args);` or, for stages with per-field statements (`map`),
/// `name(args) { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// The stage's name (`tfrecord`, `interleave`, `map`, …).
    pub name: Ident,
    /// Positional then named arguments, in source order.
    pub args: Vec<Arg>,
    /// The statement block, for stages that take one.
    pub body: Option<Block>,
    /// The whole stage.
    pub span: Span,
}

/// An argument: `expr` or `name: expr`.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    /// The name, for a named argument.
    pub name: Option<Ident>,
    /// The value.
    pub value: Expr,
    /// The whole argument.
    pub span: Span,
}

/// `{ statement; ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// The statements, in order.
    pub stmts: Vec<Stmt>,
    /// The whole block.
    pub span: Span,
}

/// `field = expr;` or `expr;`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    /// The field assigned, if any.
    pub target: Option<Ident>,
    /// The value.
    pub value: Expr,
    /// The block after the value, in place of `;`: a stage with its block in a block of
    /// stages (`flat_map { range(0, n); map { ... } }`).
    pub body: Option<Block>,
    /// The whole statement.
    pub span: Span,
}

/// A type: a dtype name, optionally with a shape: `f32`, `f32[4]`, `i64[]`, `u8[H, W, 3]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeExpr {
    /// The element type (or a parameter type such as `glob`).
    pub name: Ident,
    /// The shape, when written with brackets: `Some(vec![])` is `T[]` (variable length).
    pub dims: Option<Vec<Dim>>,
    /// The whole type.
    pub span: Span,
}

/// One dimension of a shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Dim {
    /// A fixed size.
    Fixed(u64, Span),
    /// A named size, bound where first used (`H`, `W`).
    Named(Ident),
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
}

/// The kinds of expression.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// An integer literal.
    Int(u64),
    /// A float literal.
    Float(f64),
    /// A string literal (escapes resolved).
    Str(String),
    /// `true` or `false`.
    Bool(bool),
    /// `512 MiB`: an integer with a unit.
    Quantity(u64, Ident),
    /// A name or path: a field, a parameter, `auto`, an enum value (`gzip`, `chw`).
    Path(Path),
    /// `[a, b, c]`.
    List(Vec<Expr>),
    /// `path(args) [-> type]`.
    Call {
        /// The function.
        callee: Path,
        /// Its arguments.
        args: Vec<Arg>,
        /// The declared result type of an inline user function.
        ret: Option<TypeExpr>,
    },
    /// `op expr`.
    Unary(UnaryOp, Box<Expr>),
    /// `lhs op rhs`.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// A Rust closure or function path, the argument of `map` or `filter` inside
    /// `pipeline!` only (the `.pipe` grammar has no such expression).
    Rust(RustCode),
}

/// Rust code written inside `pipeline!`: a closure (`|r| r.label >= 0`) or a function
/// path (`my_crate::keep`), called directly by the generated code.
#[derive(Clone)]
pub struct RustCode {
    /// The code as text (what equality compares and `explain` prints).
    pub text: String,
    /// The tokens as written, with their spans, so that a type error in the code points
    /// at it.
    pub tokens: proc_macro2::TokenStream,
}

impl fmt::Debug for RustCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RustCode").field(&self.text).finish()
    }
}

/// Compares the text: spans never make two trees different.
impl PartialEq for RustCode {
    fn eq(&self, other: &RustCode) -> bool {
        self.text == other.text
    }
}
