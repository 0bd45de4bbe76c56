//! Typing per-field operations: each statement `field = expr;` of a `map` block (and
//! each `filter` predicate) becomes a typed IR expression ([`ir::expr`](crate::ir::expr)),
//! the type of its value from the operations' signatures and the types of the fields,
//! parameters and constants it uses. Calls are typed in [`calls`](super::calls).
//!
//! Codes: E0400 unknown operation, E0401 unknown field, E0402 wrong number of arguments,
//! E0403 wrong dtype (such as `normalize` on bytes), E0404 wrong shape or rank, E0405 bad
//! constant argument, E0406 user function called with the wrong arguments, E0409 a
//! `max_pixels` of `decode_jpeg`/`decode_png` that is not a constant from 1 to 67108864;
//! E0410–E0412 `tokenize`'s text, tokenizer file and flags ([`tokenize`](super::tokenize)).

use crate::ast::{self, ExprKind as A};
use crate::diagnostic::Diagnostic;
use crate::ir::expr::{BinaryOp, Expr, ExprKind, ExprType};
use crate::ir::op::Layout;
use crate::ir::plan::FieldType;
use crate::ir::types::{DType, ParamType, Shape, TensorType};

use super::args::BindError;
use super::decls::{Declarations, closest};

/// The built-in per-field operations: name, parameters in order, how many are required.
/// Typing binds arguments with this one table, once: the IR's operations hold them bound.
pub const SIGNATURES: &[(&str, &[&str], usize)] = &[
    ("decode_raw", &["bytes", "dtype"], 2),
    ("parse_tensor", &["bytes", "dtype", "shape"], 2),
    ("decode_jpeg", &["bytes", "channels", "max_pixels"], 1),
    ("decode_png", &["bytes", "channels", "max_pixels"], 1),
    ("reshape", &["x", "shape"], 2),
    ("resize", &["image", "height", "width"], 3),
    ("center_crop", &["image", "height", "width"], 3),
    ("random_crop", &["image", "height", "width", "seed"], 3),
    ("random_flip", &["image", "seed"], 1),
    ("cast", &["x", "dtype"], 2),
    ("scale", &["x", "factor"], 2),
    ("normalize", &["x", "mean", "std"], 3),
    ("transpose", &["x", "layout"], 2),
    ("one_hot", &["label", "depth"], 2),
    ("tokenize", &["text", "tokenizer", "add_bos", "add_eos"], 2),
    ("check_finite", &["x"], 1),
];

/// The names of the built-in operations.
pub fn op_names() -> impl Iterator<Item = &'static str> {
    SIGNATURES.iter().map(|(n, _, _)| *n)
}

/// The parameters of built-in operation `name` and how many are required.
pub fn signature(name: &str) -> Option<(&'static [&'static str], usize)> {
    SIGNATURES.iter().find(|(n, _, _)| *n == name).map(|(_, p, r)| (*p, *r))
}

/// Types expressions against the current fields, producing typed IR expressions
/// ([`ir::expr`](crate::ir::expr)): names resolved, calls bound to
/// [`Op`](crate::ir::op::Op)s.
#[derive(Debug)]
pub struct Typer<'a> {
    /// The fields of the element.
    pub fields: &'a [FieldType],
    /// The pipeline's declarations (parameters, user functions).
    pub decls: &'a Declarations,
    /// Where problems go.
    pub diags: &'a mut Vec<Diagnostic>,
}

impl Typer<'_> {
    /// A statement's value, which must be a tensor.
    pub fn value(&mut self, e: &ast::Expr) -> Option<Expr> {
        let v = self.ty(e)?;
        if v.tensor().is_none() {
            self.diags.push(Diagnostic::error(
                "E0404",
                "a field is assigned a value computed from fields",
                e.span,
                format!("this is {}", v.ty.describe()),
            ));
            return None;
        }
        Some(v)
    }

    /// An expression that no check reads (a random operation's seed, the items of a
    /// list), typed without reporting problems: a problem leaves it a word as written,
    /// which code generation refuses.
    pub(super) fn quiet(&mut self, e: &ast::Expr) -> Expr {
        let mut scratch = Vec::new();
        Typer { fields: self.fields, decls: self.decls, diags: &mut scratch }
            .ty(e)
            .unwrap_or_else(|| Expr::new(ExprKind::Word(e.to_string()), ExprType::Other, e.span))
    }

    pub(super) fn ty(&mut self, e: &ast::Expr) -> Option<Expr> {
        let (kind, ty) = match &e.kind {
            A::Int(n) => (ExprKind::Int(*n), ExprType::Int(Some(*n))),
            A::Float(x) => (ExprKind::Float(*x), ExprType::Float),
            A::Str(s) => (ExprKind::Str(s.clone()), ExprType::Other),
            A::Bool(b) => (ExprKind::Bool(*b), ExprType::Other),
            A::Quantity(n, unit) => (ExprKind::Quantity(*n, unit.name.clone()), ExprType::Other),
            A::List(items) => {
                (ExprKind::List(items.iter().map(|i| self.quiet(i)).collect()), ExprType::List(items.len()))
            }
            A::Unary(op, inner) => {
                let x = self.ty(inner)?;
                let ty = x.ty.clone();
                (ExprKind::Unary(*op, Box::new(x)), ty)
            }
            A::Path(p) if p.segments.len() == 1 => {
                let name = &p.segments[0].name;
                if let Some(f) = self.fields.iter().find(|f| &f.name == name) {
                    match &f.ty {
                        Some(t) => (ExprKind::Field(name.clone()), ExprType::Tensor(t.clone())),
                        // Untyped only after an earlier error on this field.
                        None => return None,
                    }
                } else if let Some(param) = self.decls.params.iter().find(|q| &q.name == name) {
                    let ty = match param.ty {
                        ParamType::U32 | ParamType::U64 | ParamType::I64 => ExprType::Int(None),
                        ParamType::F64 => ExprType::Float,
                        _ => ExprType::Other,
                    };
                    (ExprKind::Param { name: name.clone(), ty: param.ty }, ty)
                } else if DType::from_name(name).is_some() || Layout::from_name(name).is_some() {
                    (ExprKind::Word(name.clone()), ExprType::Word)
                } else {
                    let names: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
                    let d = Diagnostic::error(
                        "E0401",
                        format!("unknown field `{name}`"),
                        e.span,
                        "not a field of the element here",
                    );
                    self.diags.push(match closest(name, &names) {
                        Some(c) => d.with_help(format!("did you mean `{c}`?")),
                        None => d.with_note(format!("the fields here: {}", names.join(", "))),
                    });
                    return None;
                }
            }
            A::Path(p) => (ExprKind::Word(p.to_string()), ExprType::Word),
            A::Binary(op, l, r) => return self.binary(*op, l, r, e),
            A::Call { callee, args, .. } => {
                let (op, t) = self.call(callee, args, e)?;
                (ExprKind::Op(Box::new(op)), ExprType::Tensor(t))
            }
            A::Rust(_) => {
                self.diags.push(
                    Diagnostic::error(
                        "E0408",
                        "Rust code is a whole `map` or `filter` argument, not part of an expression",
                        e.span,
                        "Rust code here",
                    )
                    .with_help("write `filter(|r| ...)` or `map(|r| ...)`"),
                );
                return None;
            }
        };
        Some(Expr::new(kind, ty, e.span))
    }

    fn binary(&mut self, op: BinaryOp, l: &ast::Expr, r: &ast::Expr, e: &ast::Expr) -> Option<Expr> {
        let (l, r) = (self.ty(l), self.ty(r));
        let (l, r) = (l?, r?);
        let (lt, rt) = (&l.ty, &r.ty);
        let (a, b) = (l.tensor().cloned(), r.tensor().cloned());
        let node =
            |ty| Some(Expr::new(ExprKind::Binary(op, Box::new(l.clone()), Box::new(r.clone())), ty, e.span));
        let Some(base) = a.clone().or(b.clone()) else {
            return node(if matches!(lt, ExprType::Float) || matches!(rt, ExprType::Float) {
                ExprType::Float
            } else {
                ExprType::Int(None)
            });
        };
        for t in [&a, &b].into_iter().flatten() {
            if matches!(t.dtype, DType::Bytes | DType::Str) || (t.dtype == DType::Bool && !op.is_logical()) {
                self.diags.push(Diagnostic::error(
                    "E0403",
                    format!("`{}` needs numbers", op.symbol()),
                    e.span,
                    format!("an operand is `{t}`"),
                ));
                return None;
            }
        }
        if let (Some(x), Some(y)) = (&a, &b)
            && x.shape != y.shape
            && x.shape != Shape::scalar()
            && y.shape != Shape::scalar()
        {
            self.diags.push(Diagnostic::error(
                "E0404",
                format!("`{}` of values with different shapes", op.symbol()),
                e.span,
                format!("`{x}` and `{y}`"),
            ));
            return None;
        }
        let shape = [&a, &b]
            .into_iter()
            .flatten()
            .map(|t| t.shape.clone())
            .find(|s| *s != Shape::scalar())
            .unwrap_or_else(Shape::scalar);
        let dtype = if op.is_comparison() || op.is_logical() {
            DType::Bool
        } else if [&a, &b].into_iter().flatten().any(|t| t.dtype.is_float())
            || matches!(lt, ExprType::Float)
            || matches!(rt, ExprType::Float)
        {
            if [&a, &b].into_iter().flatten().any(|t| t.dtype == DType::F64) {
                DType::F64
            } else {
                DType::F32
            }
        } else {
            base.dtype
        };
        node(ExprType::Tensor(TensorType { dtype, shape }))
    }

    /// The arguments of built-in `op` bound to its parameters ([`SIGNATURES`]).
    pub(super) fn bind_op<'e>(
        &mut self,
        op: &str,
        args: &'e [ast::Arg],
        e: &ast::Expr,
    ) -> Option<Vec<Option<&'e ast::Expr>>> {
        let (params, required) = signature(op)?;
        self.bind(op, params, required, args, e)
    }

    /// Positional then named arguments by name, as the op's parameter list `params`.
    fn bind<'e>(
        &mut self,
        op: &str,
        params: &[&str],
        required: usize,
        args: &'e [ast::Arg],
        e: &ast::Expr,
    ) -> Option<Vec<Option<&'e ast::Expr>>> {
        let signature = || format!("signature: `{op}({})`", params.join(", "));
        let (bound, errors) = super::args::bind(params, args);
        if let Some(e) = errors.first() {
            self.diags.push(match *e {
                BindError::Unknown(n) => Diagnostic::error(
                    "E0402",
                    format!("`{op}` has no argument `{n}`"),
                    n.span,
                    "unknown argument",
                )
                .with_note(signature()),
                BindError::TooMany(a) => Diagnostic::error(
                    "E0402",
                    format!("`{op}` takes at most {} argument(s)", params.len()),
                    a.span,
                    "one too many",
                )
                .with_note(signature()),
                BindError::Twice { first, again, slot } => Diagnostic::error(
                    "E0402",
                    format!("argument `{}` of `{op}` is given twice", params[slot]),
                    again.span,
                    "again here",
                )
                .with_label(first.span, "first here"),
            });
            return None;
        }
        let out: Vec<Option<&ast::Expr>> = bound.into_iter().map(|a| a.map(|a| &a.value)).collect();
        if let Some(missing) = params[..required].iter().zip(&out).find(|(_, v)| v.is_none()) {
            self.diags.push(
                Diagnostic::error(
                    "E0402",
                    format!("`{op}` needs its `{}` argument", missing.0),
                    e.span,
                    "missing argument",
                )
                .with_note(signature()),
            );
            return None;
        }
        Some(out)
    }

    /// The tensor argument `e` of `op`, checked with `ok` (dtype) and `rank` (None: any),
    /// and its type.
    pub(super) fn tensor_arg(
        &mut self,
        op: &str,
        e: &ast::Expr,
        ok: fn(DType) -> bool,
        want: &str,
        rank: Option<usize>,
    ) -> Option<(Expr, TensorType)> {
        let x = self.ty(e)?;
        let Some(t) = x.tensor().cloned() else {
            self.diags.push(Diagnostic::error(
                "E0404",
                format!("`{op}` works on a field"),
                e.span,
                format!("this is {}", x.ty.describe()),
            ));
            return None;
        };
        if !ok(t.dtype) {
            self.diags.push(
                Diagnostic::error("E0403", format!("`{op}` needs {want}"), e.span, format!("this is `{t}`"))
                    .with_help(match t.dtype {
                        DType::Bytes => {
                            "decode bytes first, e.g. with `decode_jpeg` or `decode_raw`".to_string()
                        }
                        _ => "convert it first with `cast`".to_string(),
                    }),
            );
            return None;
        }
        if let Some(r) = rank {
            let actual = match &t.shape {
                Shape::Dims(d) => Some(d.len()),
                Shape::Var => Some(1),
            };
            if actual != Some(r) {
                self.diags.push(Diagnostic::error(
                    "E0404",
                    format!("`{op}` needs a value of rank {r} ([height, width, channels])"),
                    e.span,
                    format!("this is `{t}`"),
                ));
                return None;
            }
        }
        Some((x, t))
    }

    /// A count argument (at least 1) and its value, `None` when only known at run time.
    pub(super) fn count_arg(&mut self, op: &str, what: &str, e: &ast::Expr) -> Option<(Expr, Option<u64>)> {
        // A negated literal keeps the literal's type (`Int(Some(3))` for `-3`): refuse
        // it here, or `channels: -3` would pass as 3.
        if matches!(e.kind, A::Unary(ast::UnaryOp::Neg, _)) {
            self.diags.push(Diagnostic::error(
                "E0405",
                format!("`{what}` of `{op}` is negative"),
                e.span,
                "negative",
            ));
            return None;
        }
        let x = self.ty(e)?;
        match x.ty {
            ExprType::Int(Some(0)) => {
                self.diags.push(Diagnostic::error(
                    "E0405",
                    format!("`{what}` of `{op}` is zero"),
                    e.span,
                    "zero",
                ));
                None
            }
            ExprType::Int(n) => Some((x, n)),
            ref other => {
                self.diags.push(Diagnostic::error(
                    "E0405",
                    format!("`{what}` of `{op}` must be a count"),
                    e.span,
                    format!("this is {}", other.describe()),
                ));
                None
            }
        }
    }

    /// A word argument, one of `allowed`.
    pub(super) fn word_arg(
        &mut self,
        op: &str,
        what: &str,
        e: &ast::Expr,
        allowed: &[&str],
    ) -> Option<String> {
        let x = self.ty(e)?;
        match (&x.ty, &x.kind) {
            (ExprType::Word, ExprKind::Word(w)) if allowed.contains(&w.as_str()) => Some(w.clone()),
            (ty, kind) => {
                let found = match (ty, kind) {
                    (ExprType::Word, ExprKind::Word(w)) => format!("`{w}`"),
                    (o, _) => o.describe().to_string(),
                };
                self.diags.push(Diagnostic::error(
                    "E0405",
                    format!("`{what}` of `{op}` must be one of {}", allowed.join(", ")),
                    e.span,
                    format!("found {found}"),
                ));
                None
            }
        }
    }
}

/// The predicate of `filter` or `take_while` (`stage`) on elements of type `element`:
/// one scalar `bool` per element with fields, not batches (E0407).
pub(super) fn predicate(
    stage: &str,
    s: &ast::Stage,
    pred: &ast::Expr,
    element: &crate::ir::plan::Element,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<Expr> {
    if matches!(element, crate::ir::plan::Element::Batch(_)) {
        let message = match stage {
            "filter" => "`filter` keeps or drops elements, not batches".to_string(),
            _ => format!("`{stage}` tests elements, not batches"),
        };
        diags.push(
            Diagnostic::error("E0407", message, s.name.span, format!("its input is {element}"))
                .with_help(format!("{stage} before `batch`")),
        );
        return None;
    }
    let condition = Typer { fields: element.fields(), decls, diags }.value(pred)?;
    let ty = condition.tensor().expect("a value is a tensor");
    if ty.dtype != DType::Bool || ty.shape != Shape::scalar() {
        diags.push(
            Diagnostic::error(
                "E0407",
                format!("a `{stage}` predicate is one `bool` per element"),
                pred.span,
                format!("this is `{ty}`"),
            )
            .with_help(format!("compare scalar fields, e.g. `{stage}(label >= 0)`")),
        );
        return None;
    }
    Some(condition)
}
