//! Typed expressions: the values of `map` statements and the conditions of `filter`s,
//! resolved once by sema (names bound to fields, parameters or words; calls bound to
//! [`Op`]s with their arguments in place), every node carrying its type. Code generation
//! and the optimizer read the types from the nodes; nothing after sema types an
//! expression again.
//!
//! `Display` prints an expression as canonical `.pipe` text (operations with positional
//! arguments).

use std::fmt::{self, Write};

use super::op::Op;
use super::types::{ParamType, Shape, TensorType};
use crate::span::Span;

/// What an expression is, as the typer classifies it.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprType {
    /// A value of a field, or computed from fields.
    Tensor(TensorType),
    /// An integer constant (a literal, or an integer parameter: `None` when only known at
    /// run time).
    Int(Option<u64>),
    /// A float constant.
    Float,
    /// A list of constants, with its length.
    List(usize),
    /// A bare word (`f32`, `chw`).
    Word,
    /// Anything else (strings, bools, quantities).
    Other,
}

impl ExprType {
    /// The tensor type, for a value of the element.
    pub fn tensor(&self) -> Option<&TensorType> {
        match self {
            ExprType::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// How diagnostics describe this kind of expression.
    pub fn describe(&self) -> &'static str {
        match self {
            ExprType::Tensor(_) => "a field value",
            ExprType::Int(_) => "an integer",
            ExprType::Float => "a float",
            ExprType::List(_) => "a list",
            ExprType::Word => "a word",
            ExprType::Other => "a constant",
        }
    }
}

/// A typed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Its type.
    pub ty: ExprType,
    /// Where it was written (never printed; ignored by equality).
    pub span: Span,
}

/// The kinds of typed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// The value of a field of the element.
    Field(String),
    /// A pipeline parameter, read at run time.
    Param {
        /// Its name.
        name: String,
        /// Its declared type.
        ty: ParamType,
    },
    /// An integer literal.
    Int(u64),
    /// A float literal.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string literal.
    Str(String),
    /// `512 MiB`: an integer with a unit.
    Quantity(u64, String),
    /// A bare word or path that names no field or parameter (`f32`, `chw`), as written.
    Word(String),
    /// `[a, b, c]`.
    List(Vec<Expr>),
    /// `op x`.
    Unary(UnaryOp, Box<Expr>),
    /// `l op r`.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// A built-in operation or a declared `extern fn`, its arguments bound.
    Op(Box<Op>),
}

/// Prefix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-`.
    Neg,
    /// `!`.
    Not,
}

/// Infix operators, by increasing precedence: `||`; `&&`; comparisons; `+ -`; `* / %`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `||`.
    Or,
    /// `&&`.
    And,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Rem,
}

impl BinaryOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        }
    }

    /// Whether the operator compares (`==`, `<`, …): its value is a `bool`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// Whether the operator is `&&` or `||`.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }

    /// Binding strength (higher binds tighter).
    fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 3,
            BinaryOp::Add | BinaryOp::Sub => 4,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 5,
        }
    }
}

impl Expr {
    /// An expression of `kind` and type `ty` written at `span`.
    pub fn new(kind: ExprKind, ty: ExprType, span: Span) -> Expr {
        Expr { kind, ty, span }
    }

    /// The tensor type of a value of the element.
    pub fn tensor(&self) -> Option<&TensorType> {
        self.ty.tensor()
    }

    /// The operation this expression calls, when it is a call.
    pub fn op(&self) -> Option<&Op> {
        match &self.kind {
            ExprKind::Op(op) => Some(op),
            _ => None,
        }
    }

    /// The field this expression is, when it is one.
    pub fn field(&self) -> Option<&str> {
        match &self.kind {
            ExprKind::Field(name) => Some(name),
            _ => None,
        }
    }

    /// The direct sub-expressions, in order.
    pub fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::List(items) => items.iter().collect(),
            ExprKind::Unary(_, x) => vec![x],
            ExprKind::Binary(_, l, r) => vec![l, r],
            ExprKind::Op(op) => op.args(),
            _ => Vec::new(),
        }
    }

    /// The expression and all of its sub-expressions, parents before children.
    pub fn nodes(&self) -> Vec<&Expr> {
        let mut out = vec![self];
        let mut i = 0;
        while i < out.len() {
            let children = out[i].children();
            out.splice(i + 1..i + 1, children);
            i += 1;
        }
        out
    }

    /// The fields the expression reads, each once, in the order first read.
    pub fn reads(&self) -> Vec<String> {
        fn walk(e: &Expr, out: &mut Vec<String>) {
            if let ExprKind::Field(n) = &e.kind
                && !out.contains(n)
            {
                out.push(n.clone());
            }
            e.children().into_iter().for_each(|c| walk(c, out));
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// How often the expression reads field `name`.
    pub fn count_reads(&self, name: &str) -> usize {
        usize::from(self.field() == Some(name))
            + self.children().into_iter().map(|c| c.count_reads(name)).sum::<usize>()
    }

    /// Whether the expression works value by value (arithmetic, `cast`, `scale`,
    /// `normalize`): the same on a row as on a whole batch column.
    pub fn is_elementwise(&self) -> bool {
        self.op().is_none_or(Op::is_elementwise) && self.children().into_iter().all(Expr::is_elementwise)
    }

    /// Whether the expression draws random numbers.
    pub fn is_random(&self) -> bool {
        self.op().is_some_and(Op::is_random) || self.children().into_iter().any(Expr::is_random)
    }

    /// The value of a constant number expression (`1.0 / 255.0`) in `f64`.
    pub fn const_f64(&self) -> Option<f64> {
        match &self.kind {
            ExprKind::Int(n) => Some(*n as f64),
            ExprKind::Float(x) => Some(*x),
            ExprKind::Unary(UnaryOp::Neg, x) => x.const_f64().map(|v| -v),
            ExprKind::Binary(op, l, r) => {
                let (a, b) = (l.const_f64()?, r.const_f64()?);
                match op {
                    BinaryOp::Add => Some(a + b),
                    BinaryOp::Sub => Some(a - b),
                    BinaryOp::Mul => Some(a * b),
                    BinaryOp::Div => Some(a / b),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Whether this is a scalar value of the element (or a constant).
    pub fn is_scalar(&self) -> bool {
        self.tensor().is_none_or(|t| t.shape == Shape::scalar())
    }

    fn precedence(&self) -> u8 {
        match &self.kind {
            ExprKind::Binary(op, ..) => op.precedence(),
            ExprKind::Unary(..) => 6,
            _ => 7,
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Field(n) | ExprKind::Word(n) | ExprKind::Param { name: n, .. } => f.write_str(n),
            ExprKind::Int(n) => write!(f, "{n}"),
            // Always with a fraction or exponent, so it reads back as a float.
            ExprKind::Float(x) => write!(f, "{x:?}"),
            ExprKind::Bool(b) => write!(f, "{b}"),
            ExprKind::Str(s) => write!(f, "{s:?}"),
            ExprKind::Quantity(n, unit) => write!(f, "{n} {unit}"),
            ExprKind::List(items) => {
                f.write_char('[')?;
                write_list(f, items.iter())?;
                f.write_char(']')
            }
            ExprKind::Op(op) => write!(f, "{op}"),
            ExprKind::Unary(op, x) => {
                f.write_str(match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Not => "!",
                })?;
                if x.precedence() < 6 { write!(f, "({x})") } else { write!(f, "{x}") }
            }
            ExprKind::Binary(op, l, r) => {
                let p = self.precedence();
                // Left-associative: the left side may share the precedence, the right not.
                if l.precedence() < p {
                    write!(f, "({l})")?
                } else {
                    write!(f, "{l}")?
                }
                write!(f, " {} ", op.symbol())?;
                if r.precedence() <= p { write!(f, "({r})") } else { write!(f, "{r}") }
            }
        }
    }
}

/// `a, b, c`.
pub(super) fn write_list<'a, T: fmt::Display + 'a>(
    f: &mut fmt::Formatter<'_>,
    items: impl Iterator<Item = &'a T>,
) -> fmt::Result {
    for (i, x) in items.enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{x}")?;
    }
    Ok(())
}
