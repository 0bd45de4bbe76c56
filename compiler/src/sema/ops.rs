//! Typing per-field operations: each statement `field = expr;` of a `map` block gets the
//! type of its value from the operations' signatures and the types of the fields,
//! parameters and constants it uses.
//!
//! Codes: E0400 unknown operation, E0401 unknown field, E0402 wrong number of arguments,
//! E0403 wrong dtype (such as `normalize` on bytes), E0404 wrong shape or rank, E0405 bad
//! constant argument, E0406 user function called with the wrong arguments.

use crate::ast::{self, BinaryOp, ExprKind};
use crate::diagnostic::Diagnostic;
use crate::ir::plan::FieldType;
use crate::ir::types::{DType, Dim, Shape, TensorType};

use super::args::BindError;
use super::decls::{Declarations, closest};

/// The built-in per-field operations: name, parameters in order, how many are required.
/// Typing and code generation bind arguments with this one table.
pub const SIGNATURES: &[(&str, &[&str], usize)] = &[
    ("decode_raw", &["bytes", "dtype"], 2),
    ("decode_jpeg", &["bytes", "channels"], 1),
    ("decode_png", &["bytes", "channels"], 1),
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
];

/// The names of the built-in operations.
pub fn op_names() -> impl Iterator<Item = &'static str> {
    SIGNATURES.iter().map(|(n, _, _)| *n)
}

/// The parameters of built-in operation `name` and how many are required.
pub fn signature(name: &str) -> Option<(&'static [&'static str], usize)> {
    SIGNATURES.iter().find(|(n, _, _)| *n == name).map(|(_, p, r)| (*p, *r))
}

/// What an argument expression is.
#[derive(Debug, Clone)]
pub(crate) enum Ty {
    /// A value of a field (or computed from fields).
    Tensor(TensorType),
    /// An integer constant (literal or integer parameter; `None` when only known at run time).
    Int(Option<u64>),
    /// A float constant.
    Float,
    /// A list of number constants, with its length.
    List(usize),
    /// A bare word (`f32`, `chw`).
    Word(String),
    /// Anything else (strings, bools).
    Other,
}

/// Types expressions against the current fields.
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
    /// The type of a statement's value, which must be a tensor.
    pub fn value(&mut self, e: &ast::Expr) -> Option<TensorType> {
        match self.ty(e)? {
            Ty::Tensor(t) => Some(t),
            other => {
                self.diags.push(Diagnostic::error(
                    "E0404",
                    "a field is assigned a value computed from fields",
                    e.span,
                    format!("this is {}", describe(&other)),
                ));
                None
            }
        }
    }

    /// The type of any (already checked) expression: for code generation.
    pub(crate) fn type_of(&mut self, e: &ast::Expr) -> Option<Ty> {
        self.ty(e)
    }

    fn ty(&mut self, e: &ast::Expr) -> Option<Ty> {
        Some(match &e.kind {
            ExprKind::Int(n) => Ty::Int(Some(*n)),
            ExprKind::Float(_) => Ty::Float,
            ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::Quantity(..) => Ty::Other,
            ExprKind::List(items) => Ty::List(items.len()),
            ExprKind::Unary(_, inner) => self.ty(inner)?,
            ExprKind::Path(p) if p.segments.len() == 1 => {
                let name = &p.segments[0].name;
                if let Some(f) = self.fields.iter().find(|f| &f.name == name) {
                    match &f.ty {
                        Some(t) => Ty::Tensor(t.clone()),
                        // Untyped only after an earlier error on this field.
                        None => return None,
                    }
                } else if let Some(param) = self.decls.params.iter().find(|q| &q.name == name) {
                    match param.ty {
                        crate::ir::types::ParamType::U32 | crate::ir::types::ParamType::U64 => Ty::Int(None),
                        crate::ir::types::ParamType::I64 => Ty::Int(None),
                        crate::ir::types::ParamType::F64 => Ty::Float,
                        _ => Ty::Other,
                    }
                } else if DType::from_name(name).is_some() || matches!(name.as_str(), "chw" | "hwc") {
                    Ty::Word(name.clone())
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
            ExprKind::Path(p) => Ty::Word(p.to_string()),
            ExprKind::Binary(op, l, r) => self.binary(*op, l, r, e)?,
            ExprKind::Call { callee, args, .. } => Ty::Tensor(self.call(callee, args, e)?),
            ExprKind::Rust(_) => {
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
        })
    }

    fn binary(&mut self, op: BinaryOp, l: &ast::Expr, r: &ast::Expr, e: &ast::Expr) -> Option<Ty> {
        let (lt, rt) = (self.ty(l), self.ty(r));
        let (lt, rt) = (lt?, rt?);
        let comparison = matches!(
            op,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        );
        let tensor = |t: &Ty| match t {
            Ty::Tensor(t) => Some(t.clone()),
            _ => None,
        };
        let (a, b) = (tensor(&lt), tensor(&rt));
        let Some(base) = a.clone().or(b.clone()) else {
            return Some(if matches!(lt, Ty::Float) || matches!(rt, Ty::Float) {
                Ty::Float
            } else {
                Ty::Int(None)
            });
        };
        for t in [&a, &b].into_iter().flatten() {
            if matches!(t.dtype, DType::Bytes | DType::Str)
                || (t.dtype == DType::Bool && !matches!(op, BinaryOp::And | BinaryOp::Or))
            {
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
        let dtype = if comparison || matches!(op, BinaryOp::And | BinaryOp::Or) {
            DType::Bool
        } else if [&a, &b].into_iter().flatten().any(|t| t.dtype.is_float())
            || matches!(lt, Ty::Float)
            || matches!(rt, Ty::Float)
        {
            if [&a, &b].into_iter().flatten().any(|t| t.dtype == DType::F64) {
                DType::F64
            } else {
                DType::F32
            }
        } else {
            base.dtype
        };
        Some(Ty::Tensor(TensorType { dtype, shape }))
    }

    /// The arguments of built-in `op` bound to its parameters ([`SIGNATURES`]).
    fn bind_op<'e>(
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

    /// The tensor argument `e` of `op`, checked with `ok` (dtype) and `rank` (None: any).
    fn tensor_arg(
        &mut self,
        op: &str,
        e: &ast::Expr,
        ok: fn(DType) -> bool,
        want: &str,
        rank: Option<usize>,
    ) -> Option<TensorType> {
        let t = match self.ty(e)? {
            Ty::Tensor(t) => t,
            other => {
                self.diags.push(Diagnostic::error(
                    "E0404",
                    format!("`{op}` works on a field"),
                    e.span,
                    format!("this is {}", describe(&other)),
                ));
                return None;
            }
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
        Some(t)
    }

    /// A constant count argument (at least 1), or `None` when only known at run time.
    fn count_arg(&mut self, op: &str, what: &str, e: &ast::Expr) -> Option<Option<u64>> {
        match self.ty(e)? {
            Ty::Int(Some(0)) => {
                self.diags.push(Diagnostic::error(
                    "E0405",
                    format!("`{what}` of `{op}` is zero"),
                    e.span,
                    "zero",
                ));
                None
            }
            Ty::Int(n) => Some(n),
            other => {
                self.diags.push(Diagnostic::error(
                    "E0405",
                    format!("`{what}` of `{op}` must be a count"),
                    e.span,
                    format!("this is {}", describe(&other)),
                ));
                None
            }
        }
    }

    fn word_arg(&mut self, op: &str, what: &str, e: &ast::Expr, allowed: &[&str]) -> Option<String> {
        match self.ty(e)? {
            Ty::Word(w) if allowed.contains(&w.as_str()) => Some(w),
            other => {
                let found = match &other {
                    Ty::Word(w) => format!("`{w}`"),
                    o => describe(o).to_string(),
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

    fn call(&mut self, callee: &ast::Path, args: &[ast::Arg], e: &ast::Expr) -> Option<TensorType> {
        let name = callee.to_string();
        let numeric = |d: DType| !matches!(d, DType::Bytes | DType::Str);
        let bytes = |d: DType| d == DType::Bytes;
        let any = |_: DType| true;
        let dims3 = |t: &TensorType| match &t.shape {
            Shape::Dims(d) if d.len() == 3 => Some((d[0].clone(), d[1].clone(), d[2].clone())),
            _ => None,
        };
        let fixed = |n: Option<u64>, named: &str| n.map_or(Dim::Named(named.to_string()), Dim::Fixed);
        match name.as_str() {
            "decode_raw" => {
                let a = self.bind_op(&name, args, e)?;
                self.tensor_arg(&name, a[0]?, bytes, "bytes", Some(0))?;
                let numeric_names: Vec<&str> =
                    DType::ALL.iter().filter(|d| d.is_int() || d.is_float()).map(|d| d.name()).collect();
                let d = self.word_arg(&name, "dtype", a[1]?, &numeric_names)?;
                Some(TensorType { dtype: DType::from_name(&d)?, shape: Shape::Var })
            }
            "decode_jpeg" | "decode_png" => {
                let a = self.bind_op(&name, args, e)?;
                self.tensor_arg(&name, a[0]?, bytes, "bytes", Some(0))?;
                let channels = match a[1] {
                    None => 3,
                    Some(c) => match self.count_arg(&name, "channels", c)? {
                        Some(n @ (1 | 3)) => n,
                        Some(4) if name == "decode_png" => 4,
                        other => {
                            self.diags.push(Diagnostic::error(
                                "E0405",
                                format!(
                                    "`channels` of `{name}` must be 1 or 3{}",
                                    if name == "decode_png" { " or 4" } else { "" }
                                ),
                                c.span,
                                format!(
                                    "found {}",
                                    other.map_or("a run-time value".into(), |n| n.to_string())
                                ),
                            ));
                            return None;
                        }
                    },
                };
                Some(TensorType {
                    dtype: DType::U8,
                    shape: Shape::Dims(vec![
                        Dim::Named("H".into()),
                        Dim::Named("W".into()),
                        Dim::Fixed(channels),
                    ]),
                })
            }
            "reshape" => {
                let a = self.bind_op(&name, args, e)?;
                let t = self.tensor_arg(&name, a[0]?, numeric, "numbers", None)?;
                let shape = a[1]?;
                let dims: Option<Vec<u64>> = match &shape.kind {
                    ExprKind::List(items) if !items.is_empty() => items
                        .iter()
                        .map(|i| match i.kind {
                            ExprKind::Int(n) if n > 0 => Some(n),
                            _ => None,
                        })
                        .collect(),
                    _ => None,
                };
                let Some(dims) = dims else {
                    self.diags.push(Diagnostic::error(
                        "E0405",
                        "`shape` of `reshape` is a list of positive integer sizes",
                        shape.span,
                        "such as `[64, 64, 3]`",
                    ));
                    return None;
                };
                let count = dims.iter().try_fold(1u64, |n, d| n.checked_mul(*d));
                if let (Shape::Dims(src), Some(count)) = (&t.shape, count) {
                    let fixed: Option<u64> = src.iter().try_fold(1u64, |n, d| match d {
                        Dim::Fixed(k) => n.checked_mul(*k),
                        Dim::Named(_) => None,
                    });
                    if let Some(have) = fixed.filter(|&h| h != count) {
                        self.diags.push(
                            Diagnostic::error(
                                "E0404",
                                format!("`reshape` of {have} values into a shape of {count}"),
                                shape.span,
                                "the sizes must multiply to the number of values",
                            )
                            .with_label(a[0]?.span, format!("`{t}`")),
                        );
                        return None;
                    }
                }
                Some(TensorType {
                    dtype: t.dtype,
                    shape: Shape::Dims(dims.into_iter().map(Dim::Fixed).collect()),
                })
            }
            "resize" | "center_crop" | "random_crop" => {
                let a = self.bind_op(&name, args, e)?;
                let t =
                    self.tensor_arg(&name, a[0]?, numeric, "numbers (decode the image first)", Some(3))?;
                let h = self.count_arg(&name, "height", a[1]?)?;
                let w = self.count_arg(&name, "width", a[2]?)?;
                let (_, _, c) = dims3(&t)?;
                let dtype = if name == "resize" { DType::F32 } else { t.dtype };
                Some(TensorType { dtype, shape: Shape::Dims(vec![fixed(h, "h"), fixed(w, "w"), c]) })
            }
            "random_flip" => {
                let a = self.bind_op(&name, args, e)?;
                self.tensor_arg(&name, a[0]?, any, "a value", None)
            }
            "cast" => {
                let a = self.bind_op(&name, args, e)?;
                let t = self.tensor_arg(&name, a[0]?, numeric, "numbers", None)?;
                let numeric_names: Vec<&str> = DType::ALL
                    .iter()
                    .filter(|d| d.is_int() || d.is_float() || **d == DType::Bool)
                    .map(|d| d.name())
                    .collect();
                let d = self.word_arg(&name, "dtype", a[1]?, &numeric_names)?;
                Some(TensorType { dtype: DType::from_name(&d)?, shape: t.shape })
            }
            "scale" => {
                let a = self.bind_op(&name, args, e)?;
                let t = self.tensor_arg(&name, a[0]?, numeric, "numbers", None)?;
                match self.ty(a[1]?)? {
                    Ty::Int(_) | Ty::Float => {}
                    other => {
                        self.diags.push(Diagnostic::error(
                            "E0405",
                            "`factor` of `scale` must be a number",
                            a[1]?.span,
                            format!("this is {}", describe(&other)),
                        ));
                        return None;
                    }
                }
                let dtype = if t.dtype == DType::F64 { DType::F64 } else { DType::F32 };
                Some(TensorType { dtype, shape: t.shape })
            }
            "normalize" => {
                let a = self.bind_op(&name, args, e)?;
                let t = self.tensor_arg(&name, a[0]?, numeric, "numbers (decode and cast first)", None)?;
                let channels = match &t.shape {
                    Shape::Dims(d) => match d.last() {
                        Some(Dim::Fixed(c)) => Some(*c as usize),
                        Some(Dim::Named(_)) => None,
                        None => Some(1),
                    },
                    Shape::Var => None,
                };
                for (what, arg) in [("mean", a[1]?), ("std", a[2]?)] {
                    let n = match self.ty(arg)? {
                        Ty::List(n) => n,
                        Ty::Int(_) | Ty::Float => 1,
                        other => {
                            self.diags.push(Diagnostic::error(
                                "E0405",
                                format!("`{what}` of `normalize` must be numbers"),
                                arg.span,
                                format!("this is {}", describe(&other)),
                            ));
                            return None;
                        }
                    };
                    if let Some(c) = channels
                        && n != c
                        && n != 1
                    {
                        self.diags.push(
                            Diagnostic::error(
                                "E0405",
                                format!("`{what}` has {n} values for {c} channel(s)"),
                                arg.span,
                                "one value per channel",
                            )
                            .with_label(a[0]?.span, format!("`{t}`")),
                        );
                        return None;
                    }
                }
                Some(TensorType { dtype: DType::F32, shape: t.shape })
            }
            "transpose" => {
                let a = self.bind_op(&name, args, e)?;
                let t = self.tensor_arg(&name, a[0]?, any, "a value", Some(3))?;
                let layout = self.word_arg(&name, "layout", a[1]?, &["chw", "hwc"])?;
                let (d0, d1, d2) = dims3(&t)?;
                let dims = if layout == "chw" { vec![d2, d0, d1] } else { vec![d1, d2, d0] };
                Some(TensorType { dtype: t.dtype, shape: Shape::Dims(dims) })
            }
            "one_hot" => {
                let a = self.bind_op(&name, args, e)?;
                self.tensor_arg(&name, a[0]?, |d| d.is_int(), "an integer label", Some(0))?;
                let depth = self.count_arg(&name, "depth", a[1]?)?;
                Some(TensorType { dtype: DType::F32, shape: Shape::Dims(vec![fixed(depth, "depth")]) })
            }
            "parse_example" => {
                self.diags.push(
                    Diagnostic::error(
                        "E0400",
                        "`parse_example` is a statement of its own",
                        e.span,
                        "not a value",
                    )
                    .with_help("write `parse_example();` on its own line"),
                );
                None
            }
            _ => self.user_fn(callee, &name, args, e),
        }
    }

    fn user_fn(
        &mut self,
        callee: &ast::Path,
        name: &str,
        args: &[ast::Arg],
        e: &ast::Expr,
    ) -> Option<TensorType> {
        let Some(decl) = self.decls.externs.iter().find(|x| x.path == name) else {
            let d = Diagnostic::error(
                "E0400",
                format!("unknown operation `{name}`"),
                callee.span,
                "not an operation",
            );
            let ops: Vec<&str> = op_names().collect();
            self.diags.push(match closest(name, &ops) {
                Some(c) => d.with_help(format!("did you mean `{c}`?")),
                None if name.contains("::") => {
                    d.with_help(format!("declare it: `extern fn {name}(x: f32[N]) -> f32[N];`"))
                }
                None => d.with_note(format!("the operations: {}", ops.join(", "))),
            });
            return None;
        };
        if args.len() != decl.params.len() || args.iter().any(|a| a.name.is_some()) {
            self.diags.push(
                Diagnostic::error(
                    "E0406",
                    format!("`{name}` takes {} positional argument(s)", decl.params.len()),
                    e.span,
                    format!("{} given", args.len()),
                )
                .with_label(decl.span, "declared here"),
            );
            return None;
        }
        // Named dimensions bind on first use and must agree after.
        let mut bound: Vec<(String, Dim)> = Vec::new();
        for (a, (pname, pty)) in args.iter().zip(&decl.params) {
            let t = match self.ty(&a.value)? {
                Ty::Tensor(t) => t,
                Ty::Int(_) if pty.dtype.is_int() && pty.shape == Shape::scalar() => continue,
                Ty::Float if pty.dtype.is_float() && pty.shape == Shape::scalar() => continue,
                other => {
                    self.diags.push(
                        Diagnostic::error(
                            "E0406",
                            format!("argument `{pname}` of `{name}` must be `{pty}`"),
                            a.value.span,
                            format!("this is {}", describe(&other)),
                        )
                        .with_label(decl.span, "declared here"),
                    );
                    return None;
                }
            };
            let shapes_agree = match (&pty.shape, &t.shape) {
                (Shape::Var, Shape::Var) => true,
                (Shape::Dims(want), Shape::Dims(have)) if want.len() == have.len() => {
                    want.iter().zip(have).all(|(w, h)| match w {
                        Dim::Fixed(_) => w == h,
                        Dim::Named(n) => match bound.iter().find(|(b, _)| b == n) {
                            Some((_, d)) => d == h,
                            None => {
                                bound.push((n.clone(), h.clone()));
                                true
                            }
                        },
                    })
                }
                _ => false,
            };
            if t.dtype != pty.dtype || !shapes_agree {
                self.diags.push(
                    Diagnostic::error(
                        "E0406",
                        format!("argument `{pname}` of `{name}` must be `{pty}`"),
                        a.value.span,
                        format!("this is `{t}`"),
                    )
                    .with_label(decl.span, "declared here"),
                );
                return None;
            }
        }
        let shape = match &decl.ret.shape {
            Shape::Dims(d) => Shape::Dims(
                d.iter()
                    .map(|x| match x {
                        Dim::Named(n) => {
                            bound.iter().find(|(b, _)| b == n).map_or(x.clone(), |(_, v)| v.clone())
                        }
                        other => other.clone(),
                    })
                    .collect(),
            ),
            s => s.clone(),
        };
        Some(TensorType { dtype: decl.ret.dtype, shape })
    }
}

fn describe(t: &Ty) -> &'static str {
    match t {
        Ty::Tensor(_) => "a field value",
        Ty::Int(_) => "an integer",
        Ty::Float => "a float",
        Ty::List(_) => "a list",
        Ty::Word(_) => "a word",
        Ty::Other => "a constant",
    }
}
