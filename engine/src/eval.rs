//! The statements of a `map` and the conditions of a `filter` on one [`Row`], with the
//! generated code's semantics (`compiler/src/codegen/expr.rs`): each node computed in
//! its own dtype from sema's types, literals and fields converted to the dtype their
//! context wants, arithmetic on tensors value by value (a scalar operand broadcast).
//!
//! [`check`] runs once when the dataset is built: an operation the engine does not run
//! yet is refused there, never met on a value.

use sluice_compiler::ir::expr::{BinaryOp, Expr, ExprKind, ExprType, UnaryOp};
use sluice_compiler::ir::op::Op;
use sluice_compiler::ir::types::{DType, ParamType, Shape, TensorType};
use sluice_runtime::BoxError;
use sluice_runtime::abi::ops;
use sluice_runtime::column::Tensor;

use crate::num::Num;
use crate::ops::is_structural;
use crate::params::{Param, Params};
use crate::value::{Data, Kind, Row, Value};

/// Why an expression cannot run in the engine (the operation's name), or `Ok`.
pub fn check(e: &Expr) -> Result<(), String> {
    if let Some(t) = e.ty.tensor()
        && matches!(t.dtype, DType::F16 | DType::Bf16)
    {
        // Neither backend computes in half floats yet (codegen: E0600).
        return Err(format!("`{}` values", t.dtype.name()));
    }
    match &e.kind {
        ExprKind::Field(_)
        | ExprKind::Param { .. }
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Bool(_) => Ok(()),
        ExprKind::Unary(_, x) => check(x),
        ExprKind::Binary(_, l, r) => check(l).and(check(r)),
        ExprKind::List(items) => items.iter().try_for_each(check),
        ExprKind::Op(op) => match &**op {
            Op::Extern { path, .. } => Err(format!("`extern fn {path}`")),
            // The tokenizer is a file: a string literal or a parameter.
            Op::Tokenize { text, tokenizer, .. } => match &tokenizer.kind {
                ExprKind::Str(_) | ExprKind::Param { .. } => check(text),
                _ => Err(format!("`tokenize` of the tokenizer `{tokenizer}`")),
            },
            op => op.args().into_iter().try_for_each(check),
        },
        ExprKind::Str(_) | ExprKind::Quantity(..) | ExprKind::Word(_) => Err(format!("`{e}`")),
    }
}

/// Evaluates expressions over one row.
pub struct Eval<'a> {
    /// The element's fields, as assigned so far.
    pub row: &'a Row,
    /// The pipeline's parameters.
    pub params: &'a Params,
}

type R<T> = Result<T, BoxError>;

/// Whether an operation inside an expression is computed first as a whole value of its
/// own ([`Eval::hoist`]): the structural ones, and those whose value the elementwise
/// evaluation does not make (`one_hot`, `normalize`, `check_finite`), as in
/// `reshape(cast(one_hot(label, 12), u8), [2, 2, 3])`.
fn hoisted(op: &Op) -> bool {
    is_structural(op) || matches!(op, Op::OneHot { .. } | Op::Normalize { .. } | Op::CheckFinite { .. })
}

impl Eval<'_> {
    /// The value of `e` for the statement `target = e` of type `ty`.
    pub fn value(&self, e: &Expr, ty: &TensorType) -> R<Value> {
        let kind = match &ty.shape {
            Shape::Var => Kind::List,
            Shape::Dims(d) if d.is_empty() => Kind::Scalar,
            Shape::Dims(_) => Kind::Tensor,
        };
        if let ExprKind::Op(op) = &e.kind
            && is_structural(op)
        {
            return self.structural(op, e);
        }
        // A string or byte-string field copied (`key = name;`): its value as it is, as the
        // generated code clones it (the evaluation below computes numbers only).
        if let ExprKind::Field(name) = &e.kind
            && let Some(v) = self.row.get(name)
            && matches!(v.data, Data::Str(_) | Data::Bytes(_))
        {
            return Ok(v.clone());
        }
        if e.nodes().iter().skip(1).any(|n| n.op().is_some_and(hoisted)) {
            // Operations that make whole values inside an expression: each computed once,
            // in the order the generated code computes them, as a field of their own.
            let (mut row, mut e) = (self.row.clone(), e.clone());
            self.hoist_within(&mut e, &mut row)?;
            return Eval { row: &row, params: self.params }.value(&e, ty);
        }
        if let ExprKind::Op(op) = &e.kind {
            match &**op {
                Op::Normalize { x, mean, std } => return self.normalize(x, mean, std, kind),
                Op::OneHot { label, depth } => {
                    let label = self.scalar(label, 0, dtype_of(label).unwrap_or(DType::I64))?;
                    let Num::I64(label) = label.cast(DType::I64)? else { unreachable!("cast to i64") };
                    let Num::U64(depth) = self.scalar(depth, 0, DType::U64)? else { unreachable!("u64") };
                    let t = ops::one_hot(label, depth as usize)?;
                    let (shape, v) = t.into_parts();
                    return Ok(Value { data: Data::F32(v), shape, kind: Kind::Tensor });
                }
                Op::CheckFinite { x } => {
                    let v = self.value(x, ty)?;
                    let what = match &x.kind {
                        ExprKind::Field(name) => name.clone(),
                        _ => x.to_string(),
                    };
                    match &v.data {
                        Data::F32(d) if kind == Kind::Scalar => {
                            ops::check_finite_scalar(d[0], &what)?;
                        }
                        Data::F64(d) if kind == Kind::Scalar => {
                            ops::check_finite_scalar(d[0], &what)?;
                        }
                        Data::F32(d) => {
                            ops::check_finite(d.clone(), &what)?;
                        }
                        Data::F64(d) => {
                            ops::check_finite(d.clone(), &what)?;
                        }
                        _ => {}
                    }
                    return Ok(v);
                }
                _ => {}
            }
        }
        let shape = self.shape(e)?;
        let n: usize = shape.iter().product();
        // Node by node over every value (`vector.rs`), else value by value.
        if let Some(data) = crate::vector::values(self, e, ty.dtype, n) {
            return Ok(Value { data, shape, kind });
        }
        let mut nums = Vec::with_capacity(n);
        for i in 0..n {
            nums.push(self.scalar(e, i, ty.dtype)?);
        }
        Ok(Value { data: Num::collect(ty.dtype, &nums)?, shape, kind })
    }

    /// Whether every condition holds.
    pub fn holds(&self, conditions: &[Expr]) -> R<bool> {
        for c in conditions {
            if !self.scalar(c, 0, DType::Bool)?.truth() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The shape of an elementwise expression: that of its operands that are not
    /// scalars, which must agree.
    fn shape(&self, e: &Expr) -> R<Vec<usize>> {
        let mut found: Option<Vec<usize>> = None;
        self.leaf_shapes(e, &mut found)?;
        Ok(found.unwrap_or_default())
    }

    fn leaf_shapes(&self, e: &Expr, found: &mut Option<Vec<usize>>) -> R<()> {
        match &e.kind {
            ExprKind::Binary(_, l, r) => {
                self.leaf_shapes(l, found)?;
                self.leaf_shapes(r, found)
            }
            ExprKind::Unary(_, x) => self.leaf_shapes(x, found),
            ExprKind::Op(op) => match &**op {
                Op::Cast { x, .. } | Op::Scale { x, .. } => self.leaf_shapes(x, found),
                other => Err(format!("`{}` inside an expression", other.name()).into()),
            },
            ExprKind::Field(name) => {
                let v = self.field(name)?;
                if v.kind == Kind::Scalar {
                    return Ok(());
                }
                match found {
                    Some(s) if *s != v.shape => {
                        Err(format!("`{e}`: shapes {s:?} and {:?} differ", v.shape).into())
                    }
                    Some(_) => Ok(()),
                    None => {
                        *found = Some(v.shape.clone());
                        Ok(())
                    }
                }
            }
            _ => Ok(()),
        }
    }

    fn field(&self, name: &str) -> R<&Value> {
        self.row.get(name).ok_or_else(|| format!("no field `{name}`").into())
    }

    /// The `i`th value of `e` as `want` (a scalar operand gives its one value).
    pub fn scalar(&self, e: &Expr, i: usize, want: DType) -> R<Num> {
        Ok(match &e.kind {
            ExprKind::Int(n) if want.is_float() => Num::F64(*n as f64).cast(want)?,
            ExprKind::Int(n) => Num::U64(*n).cast(want)?,
            ExprKind::Float(x) => Num::F64(*x).cast(want)?,
            ExprKind::Bool(b) => Num::Bool(*b).cast(want)?,
            ExprKind::Field(name) => {
                let v = self.field(name)?;
                let at = if v.kind == Kind::Scalar { 0 } else { i };
                Num::at(&v.data, at).ok_or_else(|| format!("`{name}` is not a number"))?.cast(want)?
            }
            ExprKind::Param { name, ty } => {
                let from = match ty {
                    ParamType::U32 => DType::U32,
                    ParamType::U64 | ParamType::Size => DType::U64,
                    ParamType::I64 => DType::I64,
                    ParamType::F64 => DType::F64,
                    ParamType::Bool => DType::Bool,
                    _ => return Err(format!("parameter `{name}` is not a number").into()),
                };
                match self.params.get(name) {
                    Some(Param::Num(n)) => n.cast(from)?.cast(want)?,
                    _ => return Err(format!("parameter `{name}` has no value").into()),
                }
            }
            ExprKind::Unary(UnaryOp::Not, x) => {
                Num::Bool(!self.scalar(x, i, DType::Bool)?.truth()).cast(want)?
            }
            ExprKind::Unary(UnaryOp::Neg, x) => self.scalar(x, i, want)?.negated(),
            ExprKind::Binary(op, l, r) => {
                let own = match &e.ty {
                    ExprType::Tensor(t) => t.dtype,
                    ExprType::Float => DType::F64,
                    _ => DType::I64,
                };
                let v = if matches!(op, BinaryOp::And | BinaryOp::Or) {
                    let a = self.scalar(l, i, DType::Bool)?.truth();
                    // `&&` and `||`: the right side only when it decides.
                    let v =
                        if (*op == BinaryOp::And) == a { self.scalar(r, i, DType::Bool)?.truth() } else { a };
                    Num::Bool(v)
                } else if op.is_comparison() {
                    let c = common(l, r);
                    Num::Bool(Num::compare(*op, self.scalar(l, i, c)?, self.scalar(r, i, c)?)?)
                } else {
                    Num::arith(*op, self.scalar(l, i, own)?, self.scalar(r, i, own)?)?
                };
                v.cast(want)?
            }
            ExprKind::Op(op) => match &**op {
                Op::Cast { x, dtype } => {
                    let from = dtype_of(x).ok_or("`cast` of a value without a dtype")?;
                    self.scalar(x, i, from)?.cast(*dtype)?.cast(want)?
                }
                Op::Scale { x, factor } => {
                    let to = dtype_of(e).ok_or("`scale` without a dtype")?;
                    let from = dtype_of(x).ok_or("`scale` of a value without a dtype")?;
                    let v = self.scalar(x, i, from)?.cast(to)?;
                    let f = self.scalar(factor, 0, to)?;
                    Num::arith(BinaryOp::Mul, v, f)?.cast(want)?
                }
                op if is_structural(op) => {
                    let v = self.structural(op, e)?;
                    let at = if v.kind == Kind::Scalar { 0 } else { i };
                    Num::at(&v.data, at).ok_or_else(|| format!("`{e}` is not a number"))?.cast(want)?
                }
                other => return Err(format!("`{}` inside an expression", other.name()).into()),
            },
            _ => return Err(format!("`{e}` is not a number").into()),
        })
    }

    /// Replaces each operation of `e` that makes a whole value by a field of `row` that
    /// holds its value, outermost first, left to right (the generated code's order).
    fn hoist(&self, e: &mut Expr, row: &mut Row) -> R<()> {
        if e.op().is_some_and(hoisted) {
            let ExprKind::Op(op) = &e.kind else { unreachable!("an operation") };
            let v = match e.ty.tensor() {
                Some(ty) if !is_structural(op) => self.value(e, ty)?,
                _ => self.structural(op, e)?,
            };
            let name = format!("\u{0}{}", row.values.len());
            let mut names = row.names.to_vec();
            names.push(name.clone());
            row.names = names.into();
            row.values.push(v);
            e.kind = ExprKind::Field(name);
            return Ok(());
        }
        self.hoist_within(e, row)
    }

    /// [`hoist`](Self::hoist) of the operands of `e`, never `e` itself (the expression
    /// being evaluated).
    fn hoist_within(&self, e: &mut Expr, row: &mut Row) -> R<()> {
        match &mut e.kind {
            ExprKind::Op(op) => match &mut **op {
                Op::Cast { x, .. } | Op::CheckFinite { x } => self.hoist(x, row),
                Op::Scale { x, factor } => {
                    self.hoist(x, row)?;
                    self.hoist(factor, row)
                }
                Op::Normalize { x, .. } => self.hoist(x, row),
                Op::OneHot { label, depth } => {
                    self.hoist(label, row)?;
                    self.hoist(depth, row)
                }
                _ => Ok(()),
            },
            ExprKind::Unary(_, x) => self.hoist(x, row),
            ExprKind::Binary(_, l, r) => {
                self.hoist(l, row)?;
                self.hoist(r, row)
            }
            _ => Ok(()),
        }
    }

    /// A list of floats (`normalize`'s `mean`, `std`), or one, as `f32`s.
    pub(crate) fn floats(&self, e: &Expr) -> R<Vec<f32>> {
        let items = match &e.kind {
            ExprKind::List(items) => items.iter().collect(),
            _ => vec![e],
        };
        items
            .into_iter()
            .map(|i| match self.scalar(i, 0, DType::F32)? {
                Num::F32(v) => Ok(v),
                _ => Err("a float".into()),
            })
            .collect()
    }

    fn normalize(&self, x: &Expr, mean: &Expr, std: &Expr, kind: Kind) -> R<Value> {
        let (mean, std) = (self.floats(mean)?, self.floats(std)?);
        let from = dtype_of(x).ok_or("`normalize` of a value without a dtype")?;
        let shape = self.shape(x)?;
        let n: usize = shape.iter().product();
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            let Num::F32(f) = self.scalar(x, i, from)?.cast(DType::F32)? else { unreachable!("f32") };
            v.push(f);
        }
        if kind == Kind::Scalar {
            let f = ops::normalize_scalar(v[0], &mean, &std)?;
            return Ok(Value::scalar(Data::F32(vec![f])));
        }
        let (shape, v) = ops::normalize(Tensor::new(shape, v)?, &mean, &std)?.into_parts();
        Ok(Value { data: Data::F32(v), shape, kind })
    }
}

/// The dtype sema gave `e`, when it is a value of the element.
pub(crate) fn dtype_of(e: &Expr) -> Option<DType> {
    e.ty.tensor().map(|t| t.dtype)
}

/// The dtype two operands of a comparison are compared in (the generated code's rule).
pub(crate) fn common(l: &Expr, r: &Expr) -> DType {
    let (a, b) = (&l.ty, &r.ty);
    let dt = |t: &ExprType| t.tensor().map(|t| t.dtype);
    let floats = [a, b].iter().any(|t| matches!(t, ExprType::Float) || dt(t).is_some_and(DType::is_float));
    if floats {
        if [a, b].iter().any(|t| dt(t) == Some(DType::F64)) { DType::F64 } else { DType::F32 }
    } else {
        dt(a).or(dt(b)).unwrap_or(DType::I64)
    }
}
