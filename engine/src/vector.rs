//! Elementwise expressions over whole buffers: what [`Eval::scalar`] computes value by
//! value (walking the expression once per value), computed node by node over every value
//! at once, with typed loops for floats and the very same [`Num`] operations otherwise.
//! The values are the scalar path's, bit for bit: each node in the dtype the scalar path
//! computes it in, `as` conversions, IEEE float operations in the same order, integers
//! wrapping. When a node is not one this module computes (`&&`/`||`, which evaluate
//! their right side only when it decides), or any value fails (a division by zero), the
//! caller falls back to the scalar path, which then gives its own value or error.
//!
//! [`Eval::scalar`]: crate::eval::Eval::scalar

use sluice_compiler::ir::expr::{BinaryOp, Expr, ExprKind, ExprType, UnaryOp};
use sluice_compiler::ir::op::Op;
use sluice_compiler::ir::types::{DType, ParamType};

use crate::eval::{Eval, common, dtype_of};
use crate::num::Num;
use crate::params::Param;
use crate::value::{Data, Kind};

/// A node's values: one broadcast to every position, or one per position.
enum Vals {
    One(Num),
    Many(Data),
}

/// Why this module leaves a node to the scalar path.
struct Fallback;

type V<T> = Result<T, Fallback>;

impl From<String> for Fallback {
    fn from(_: String) -> Self {
        Fallback
    }
}

/// The `n` values of `e` as `want`, or `None` to leave `e` to the scalar path.
pub fn values(ev: &Eval<'_>, e: &Expr, want: DType, n: usize) -> Option<Data> {
    #[cfg(test)]
    if tests::SCALAR_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    if n == 0 {
        return None;
    }
    let data = match vals(ev, e, want).ok()? {
        Vals::Many(d) if d.len() == n => Some(d),
        Vals::Many(_) => None,
        Vals::One(x) => broadcast(x, n),
    };
    #[cfg(test)]
    if data.is_some() {
        tests::VECTORED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    data
}

/// Appends the values of `e` as `want` to `out`, a batch column of `want` (`f32` or
/// `f64`), with no buffer per node: `e` is a chain over one field (`cast(image, f32) /
/// 255.0 - 0.5`: each operation's other operand one value), computed a block of values
/// at a time (the field's values converted, then each operation in a typed loop over the
/// block), each node in the dtype [`values`] computes it in, so with the same bits.
/// `false`, `out` as it was, when `e` is not such a chain (the caller then computes the
/// value).
pub fn append(ev: &Eval<'_>, e: &Expr, want: DType, out: &mut Data) -> bool {
    #[cfg(test)]
    if tests::SCALAR_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    let done = match (&mut *out, want) {
        (Data::F32(v), DType::F32) => run_chain(ev, e, v),
        (Data::F64(v), DType::F64) => run_chain(ev, e, v),
        _ => false,
    };
    #[cfg(test)]
    if done {
        tests::VECTORED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    done
}

/// One operation of a chain over its running value `x`.
#[derive(Debug, Clone, Copy)]
enum Step<T> {
    /// `-x`.
    Neg,
    /// `x op c`.
    Right(BinaryOp, T),
    /// `c op x`.
    Left(BinaryOp, T),
}

/// Values computed a block at a time (kept in the L1 cache between operations).
const BLOCK: usize = 512;

/// A float dtype a chain is computed in.
trait Lane: Copy + Default + std::ops::Neg<Output = Self> {
    const DTYPE: DType;
    fn of(x: Num) -> Option<Self>;
    /// `d`'s values `from..from + out.len()` converted (`as`, `abi::ops::cast`).
    fn convert(d: &Data, from: usize, out: &mut [Self]);
    /// `step` of every value of `xs`.
    fn apply(step: Step<Self>, xs: &mut [Self]);
    /// `d`'s values converted, then `step` of each (when given), appended to `out` in
    /// one pass (`abi::ops::extend_mapped`: the generated code's own loop), for a `u8`
    /// or float field and one arithmetic step; `false` for any other.
    fn single(d: &Data, step: Option<Step<Self>>, out: &mut Vec<Self>) -> bool;
}

macro_rules! lane {
    ($t:ty, $dtype:ident) => {
        impl Lane for $t {
            const DTYPE: DType = DType::$dtype;
            fn of(x: Num) -> Option<Self> {
                match x.cast(DType::$dtype).ok()? {
                    Num::$dtype(v) => Some(v),
                    _ => None,
                }
            }
            #[inline(always)]
            fn convert(d: &Data, from: usize, out: &mut [Self]) {
                use sluice_runtime::abi::ops::cast;
                let r = from..from + out.len();
                macro_rules! each {
                    ($v:expr) => {
                        out.iter_mut().zip(&$v[r]).for_each(|(o, &x)| *o = cast::<_, $t>(x))
                    };
                }
                match d {
                    Data::Bool(v) => each!(v),
                    Data::U8(v) => each!(v),
                    Data::I32(v) => each!(v),
                    Data::U32(v) => each!(v),
                    Data::I64(v) => each!(v),
                    Data::U64(v) => each!(v),
                    Data::F32(v) => each!(v),
                    Data::F64(v) => each!(v),
                    Data::Bytes(_) | Data::Str(_) => {}
                }
            }
            #[inline(always)]
            fn apply(step: Step<Self>, xs: &mut [Self]) {
                // One typed loop per operation (the match outside it), which vectorizes.
                macro_rules! each {
                    ($x:ident => $e:expr) => {
                        xs.iter_mut().for_each(|v| {
                            let $x = *v;
                            *v = $e;
                        })
                    };
                }
                match step {
                    Step::Neg => each!(x => -x),
                    Step::Right(BinaryOp::Add, c) => each!(x => x + c),
                    Step::Right(BinaryOp::Sub, c) => each!(x => x - c),
                    Step::Right(BinaryOp::Mul, c) => each!(x => x * c),
                    Step::Right(BinaryOp::Div, c) => each!(x => x / c),
                    Step::Right(_, c) => each!(x => x % c),
                    Step::Left(BinaryOp::Add, c) => each!(x => c + x),
                    Step::Left(BinaryOp::Sub, c) => each!(x => c - x),
                    Step::Left(BinaryOp::Mul, c) => each!(x => c * x),
                    Step::Left(BinaryOp::Div, c) => each!(x => c / x),
                    Step::Left(_, c) => each!(x => c % x),
                }
            }
            fn single(d: &Data, step: Option<Step<Self>>, out: &mut Vec<Self>) -> bool {
                use sluice_runtime::abi::ops::{cast, extend_mapped};
                macro_rules! with_step {
                    ($v:expr, $s:ty) => {
                        match step {
                            None => extend_mapped(out, $v, |x: $s| cast::<_, $t>(x)),
                            Some(Step::Neg) => extend_mapped(out, $v, |x: $s| -cast::<_, $t>(x)),
                            Some(Step::Right(BinaryOp::Add, c)) => extend_mapped(out, $v, |x: $s| cast::<_, $t>(x) + c),
                            Some(Step::Right(BinaryOp::Sub, c)) => extend_mapped(out, $v, |x: $s| cast::<_, $t>(x) - c),
                            Some(Step::Right(BinaryOp::Mul, c)) => extend_mapped(out, $v, |x: $s| cast::<_, $t>(x) * c),
                            Some(Step::Right(BinaryOp::Div, c)) => extend_mapped(out, $v, |x: $s| cast::<_, $t>(x) / c),
                            Some(Step::Left(BinaryOp::Sub, c)) => extend_mapped(out, $v, |x: $s| c - cast::<_, $t>(x)),
                            Some(Step::Left(BinaryOp::Div, c)) => extend_mapped(out, $v, |x: $s| c / cast::<_, $t>(x)),
                            _ => return false,
                        }
                    };
                }
                match d {
                    Data::U8(v) => with_step!(v, u8),
                    Data::F32(v) => with_step!(v, f32),
                    _ => return false,
                }
                true
            }
        }
    };
}
lane!(f32, F32);
lane!(f64, F64);

/// `e`'s chain computed into `out` (appended), when it is one.
fn run_chain<T: Lane>(ev: &Eval<'_>, e: &Expr, out: &mut Vec<T>) -> bool {
    let mut steps = Vec::new();
    let Ok(leaf) = chain::<T>(ev, e, &mut steps) else { return false };
    if steps.len() <= 1 && T::single(leaf, steps.first().copied(), out) {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (checked just above).
        unsafe { blocks_avx2(leaf, &steps, out) };
        return true;
    }
    blocks(leaf, &steps, out);
    true
}

/// `steps` over `leaf`'s values, appended to `out` a block at a time.
#[inline(always)]
fn blocks<T: Lane>(leaf: &Data, steps: &[Step<T>], out: &mut Vec<T>) {
    let n = leaf.len();
    out.reserve(n);
    let mut block = [T::default(); BLOCK];
    for from in (0..n).step_by(BLOCK) {
        let xs = &mut block[..BLOCK.min(n - from)];
        T::convert(leaf, from, xs);
        for s in steps {
            T::apply(*s, xs);
        }
        // Streamed into a big column, as the generated code's values are.
        sluice_runtime::abi::ops::extend_mapped(out, xs, |x| x);
    }
}

/// [`blocks`] compiled for AVX2 (its loops inlined: 8 `f32` lanes, as the generated
/// code's own loops run through `abi::ops::extend_mapped`).
///
/// # Safety
///
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn blocks_avx2<T: Lane>(leaf: &Data, steps: &[Step<T>], out: &mut Vec<T>) {
    blocks(leaf, steps, out);
}

/// Whether `e` has one value for the whole element (no field of many values in it).
fn is_one(ev: &Eval<'_>, e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Param { .. } => true,
        ExprKind::Field(name) => ev.row.get(name).is_some_and(|v| v.kind == Kind::Scalar),
        ExprKind::Unary(_, x) => is_one(ev, x),
        ExprKind::Binary(_, l, r) => is_one(ev, l) && is_one(ev, r),
        ExprKind::Op(op) => match &**op {
            Op::Cast { x, .. } => is_one(ev, x),
            _ => false,
        },
        _ => false,
    }
}

/// The field whose values `e` (of dtype `T`) computes from, its operations pushed to
/// `steps` in the order they apply.
fn chain<'r, T: Lane>(ev: &Eval<'r>, e: &Expr, steps: &mut Vec<Step<T>>) -> V<&'r Data> {
    // The one field's values, read as `T`: as [`vals`] converts a field read as `T`.
    let leaf = |x: &Expr| -> V<&'r Data> {
        let name = x.field().ok_or(Fallback)?;
        let v = ev.row.get(name).ok_or(Fallback)?;
        if v.kind == Kind::Scalar || matches!(v.data, Data::Bytes(_) | Data::Str(_)) {
            return Err(Fallback);
        }
        Ok(&v.data)
    };
    // `x` read as `T` by a cast or `scale` from its own dtype: a field holding its own
    // dtype converted straight to `T` (as `vals` converts it to its dtype, then to `T`),
    // or a chain already in `T`.
    let operand = |x: &Expr, steps: &mut Vec<Step<T>>| -> V<&'r Data> {
        match x.field() {
            Some(name) if ev.row.get(name).is_some_and(|v| Some(data_dtype(&v.data)) == dtype_of(x)) => {
                leaf(x)
            }
            Some(_) => Err(Fallback),
            None if dtype_of(x) == Some(T::DTYPE) => chain(ev, x, steps),
            None => Err(Fallback),
        }
    };
    match &e.kind {
        ExprKind::Field(_) => leaf(e),
        ExprKind::Unary(UnaryOp::Neg, x) => {
            let d = chain(ev, x, steps)?;
            steps.push(Step::Neg);
            Ok(d)
        }
        ExprKind::Binary(
            op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem),
            l,
            r,
        ) if matches!(&e.ty, ExprType::Tensor(t) if t.dtype == T::DTYPE) => {
            let one = |x: &Expr| match vals(ev, x, T::DTYPE)? {
                Vals::One(c) => T::of(c).ok_or(Fallback),
                Vals::Many(_) => Err(Fallback),
            };
            if is_one(ev, r) && !is_one(ev, l) {
                let c = one(r)?;
                let d = chain(ev, l, steps)?;
                steps.push(Step::Right(*op, c));
                Ok(d)
            } else if is_one(ev, l) && !is_one(ev, r) {
                let c = one(l)?;
                let d = chain(ev, r, steps)?;
                steps.push(Step::Left(*op, c));
                Ok(d)
            } else {
                Err(Fallback)
            }
        }
        ExprKind::Op(op) => match &**op {
            Op::Cast { x, dtype } if *dtype == T::DTYPE => operand(x, steps),
            Op::Scale { x, factor } if dtype_of(e) == Some(T::DTYPE) => {
                let f = match vals(ev, factor, T::DTYPE)? {
                    Vals::One(f) => f,
                    Vals::Many(d) => Num::at(&d, 0).ok_or(Fallback)?,
                };
                let f = T::of(f).ok_or(Fallback)?;
                let d = operand(x, steps)?;
                steps.push(Step::Right(BinaryOp::Mul, f));
                Ok(d)
            }
            _ => Err(Fallback),
        },
        _ => Err(Fallback),
    }
}

/// The dtype of `d`'s values.
fn data_dtype(d: &Data) -> DType {
    match d {
        Data::Bool(_) => DType::Bool,
        Data::U8(_) => DType::U8,
        Data::I32(_) => DType::I32,
        Data::U32(_) => DType::U32,
        Data::I64(_) => DType::I64,
        Data::U64(_) => DType::U64,
        Data::F32(_) => DType::F32,
        Data::F64(_) => DType::F64,
        Data::Bytes(_) => DType::Bytes,
        Data::Str(_) => DType::Str,
    }
}

fn broadcast(x: Num, n: usize) -> Option<Data> {
    Some(match x {
        Num::Bool(v) => Data::Bool(vec![v; n]),
        Num::U8(v) => Data::U8(vec![v; n]),
        Num::I32(v) => Data::I32(vec![v; n]),
        Num::U32(v) => Data::U32(vec![v; n]),
        Num::I64(v) => Data::I64(vec![v; n]),
        Num::U64(v) => Data::U64(vec![v; n]),
        Num::F32(v) => Data::F32(vec![v; n]),
        Num::F64(v) => Data::F64(vec![v; n]),
    })
}

fn vals(ev: &Eval<'_>, e: &Expr, want: DType) -> V<Vals> {
    Ok(match &e.kind {
        ExprKind::Int(v) if want.is_float() => Vals::One(Num::F64(*v as f64).cast(want)?),
        ExprKind::Int(v) => Vals::One(Num::U64(*v).cast(want)?),
        ExprKind::Float(x) => Vals::One(Num::F64(*x).cast(want)?),
        ExprKind::Bool(b) => Vals::One(Num::Bool(*b).cast(want)?),
        ExprKind::Field(name) => {
            let v = ev.row.get(name).ok_or(Fallback)?;
            if v.kind == Kind::Scalar {
                Vals::One(Num::at(&v.data, 0).ok_or(Fallback)?.cast(want)?)
            } else {
                Vals::Many(cast(&v.data, want)?)
            }
        }
        ExprKind::Param { name, ty } => {
            let from = match ty {
                ParamType::U32 => DType::U32,
                ParamType::U64 | ParamType::Size => DType::U64,
                ParamType::I64 => DType::I64,
                ParamType::F64 => DType::F64,
                ParamType::Bool => DType::Bool,
                _ => return Err(Fallback),
            };
            match ev.params.get(name) {
                Some(Param::Num(x)) => Vals::One(x.cast(from)?.cast(want)?),
                _ => return Err(Fallback),
            }
        }
        ExprKind::Unary(UnaryOp::Not, x) => {
            let v = vals(ev, x, DType::Bool)?;
            map(v, &|a| Num::Bool(!a.truth()).cast(want))?
        }
        ExprKind::Unary(UnaryOp::Neg, x) => {
            let v = vals(ev, x, want)?;
            match v {
                Vals::Many(Data::F32(mut d)) => {
                    d.iter_mut().for_each(|x| *x = -*x);
                    Vals::Many(Data::F32(d))
                }
                v => map(v, &|a| Ok(a.negated()))?,
            }
        }
        ExprKind::Binary(BinaryOp::And | BinaryOp::Or, ..) => return Err(Fallback),
        ExprKind::Binary(op, l, r) if op.is_comparison() => {
            let c = common(l, r);
            let (a, b) = (vals(ev, l, c)?, vals(ev, r, c)?);
            zip(a, b, &|a, b| Num::Bool(Num::compare(*op, a, b)?).cast(want))?
        }
        ExprKind::Binary(op, l, r) => {
            let own = match &e.ty {
                ExprType::Tensor(t) => t.dtype,
                ExprType::Float => DType::F64,
                _ => DType::I64,
            };
            let (a, b) = (vals(ev, l, own)?, vals(ev, r, own)?);
            let v = match float_arith(*op, &a, &b) {
                Some(v) => v,
                None => zip(a, b, &|a, b| Num::arith(*op, a, b))?,
            };
            into(v, want)?
        }
        ExprKind::Op(op) => match &**op {
            Op::Cast { x, dtype } => {
                let from = dtype_of(x).ok_or(Fallback)?;
                into(into(vals(ev, x, from)?, *dtype)?, want)?
            }
            Op::Scale { x, factor } => {
                let to = dtype_of(e).ok_or(Fallback)?;
                let from = dtype_of(x).ok_or(Fallback)?;
                let v = into(vals(ev, x, from)?, to)?;
                let f = match vals(ev, factor, to)? {
                    Vals::One(f) => Vals::One(f),
                    Vals::Many(d) => Vals::One(Num::at(&d, 0).ok_or(Fallback)?),
                };
                let v = match float_arith(BinaryOp::Mul, &v, &f) {
                    Some(v) => v,
                    None => zip(v, f, &|a, b| Num::arith(BinaryOp::Mul, a, b))?,
                };
                into(v, want)?
            }
            _ => return Err(Fallback),
        },
        _ => return Err(Fallback),
    })
}

/// `v` as `dtype`.
fn into(v: Vals, dtype: DType) -> V<Vals> {
    Ok(match v {
        Vals::One(x) => Vals::One(x.cast(dtype)?),
        Vals::Many(d) => Vals::Many(cast(&d, dtype)?),
    })
}

/// Every value of `d` as `to` (`as`), the float and byte conversions images take in
/// typed loops.
fn cast(d: &Data, to: DType) -> V<Data> {
    Ok(match (d, to) {
        (Data::Bool(_), DType::Bool)
        | (Data::U8(_), DType::U8)
        | (Data::I32(_), DType::I32)
        | (Data::U32(_), DType::U32)
        | (Data::I64(_), DType::I64)
        | (Data::U64(_), DType::U64)
        | (Data::F32(_), DType::F32)
        | (Data::F64(_), DType::F64) => d.clone(),
        (Data::U8(v), DType::F32) => Data::F32(v.iter().map(|&x| f32::from(x)).collect()),
        (Data::U8(v), DType::F64) => Data::F64(v.iter().map(|&x| f64::from(x)).collect()),
        (Data::F32(v), DType::F64) => Data::F64(v.iter().map(|&x| f64::from(x)).collect()),
        (Data::F64(v), DType::F32) => Data::F32(v.iter().map(|&x| x as f32).collect()),
        (Data::I64(v), DType::F32) => Data::F32(v.iter().map(|&x| x as f32).collect()),
        (Data::I64(v), DType::F64) => Data::F64(v.iter().map(|&x| x as f64).collect()),
        (Data::F32(v), DType::U8) => Data::U8(v.iter().map(|&x| x as u8).collect()),
        _ => {
            let nums = (0..d.len()).map(|i| Num::at(d, i).ok_or(Fallback)).collect::<V<Vec<Num>>>()?;
            Num::collect(to, &nums)?
        }
    })
}

/// `f` of each value.
fn map(v: Vals, f: &dyn Fn(Num) -> Result<Num, String>) -> V<Vals> {
    Ok(match v {
        Vals::One(x) => Vals::One(f(x)?),
        Vals::Many(d) => {
            let nums =
                (0..d.len()).map(|i| Ok(f(Num::at(&d, i).ok_or(Fallback)?)?)).collect::<V<Vec<Num>>>()?;
            Vals::Many(collect(&nums)?)
        }
    })
}

/// `f` of each pair of values (a single value paired with every other).
fn zip(a: Vals, b: Vals, f: &dyn Fn(Num, Num) -> Result<Num, String>) -> V<Vals> {
    let at = |v: &Vals, i: usize| match v {
        Vals::One(x) => Some(*x),
        Vals::Many(d) => Num::at(d, i),
    };
    let n = match (&a, &b) {
        (Vals::One(x), Vals::One(y)) => return Ok(Vals::One(f(*x, *y)?)),
        (Vals::Many(d), Vals::One(_)) | (Vals::One(_), Vals::Many(d)) => d.len(),
        (Vals::Many(d), Vals::Many(e)) if d.len() == e.len() => d.len(),
        _ => return Err(Fallback),
    };
    let nums = (0..n)
        .map(|i| Ok(f(at(&a, i).ok_or(Fallback)?, at(&b, i).ok_or(Fallback)?)?))
        .collect::<V<Vec<Num>>>()?;
    Ok(Vals::Many(collect(&nums)?))
}

/// Numbers of one dtype as a buffer of it.
fn collect(nums: &[Num]) -> V<Data> {
    let dtype = nums.first().map_or(DType::F32, |x| x.dtype());
    Ok(Num::collect(dtype, nums)?)
}

/// Float arithmetic in a typed loop: `None` when the operands are not floats of one
/// dtype with at least one buffer.
fn float_arith(op: BinaryOp, a: &Vals, b: &Vals) -> Option<Vals> {
    macro_rules! apply {
        ($x:expr, $y:expr) => {
            match op {
                BinaryOp::Add => $x + $y,
                BinaryOp::Sub => $x - $y,
                BinaryOp::Mul => $x * $y,
                BinaryOp::Div => $x / $y,
                _ => $x % $y,
            }
        };
    }
    macro_rules! typed {
        ($variant:ident) => {
            match (a, b) {
                (Vals::Many(Data::$variant(x)), Vals::One(Num::$variant(y))) => {
                    Some(Vals::Many(Data::$variant(x.iter().map(|&x| apply!(x, *y)).collect())))
                }
                (Vals::One(Num::$variant(x)), Vals::Many(Data::$variant(y))) => {
                    Some(Vals::Many(Data::$variant(y.iter().map(|&y| apply!(*x, y)).collect())))
                }
                (Vals::Many(Data::$variant(x)), Vals::Many(Data::$variant(y))) if x.len() == y.len() => {
                    Some(Vals::Many(Data::$variant(x.iter().zip(y).map(|(&x, &y)| apply!(x, y)).collect())))
                }
                _ => None,
            }
        };
    }
    if !matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem) {
        return None;
    }
    typed!(F32).or_else(|| typed!(F64))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use sluice_runtime::abi::show::{Json, Show};
    use sluice_runtime::stage::Dataset;

    /// Leave every expression to the scalar path (the map's workers are other threads;
    /// another test that runs meanwhile gets the scalar path's values, which are the same).
    pub(crate) static SCALAR_ONLY: AtomicBool = AtomicBool::new(false);

    /// Expressions computed node by node so far.
    pub(crate) static VECTORED: AtomicUsize = AtomicUsize::new(0);

    /// Every element of `name` shown, node by node or (`scalar_only`) value by value.
    fn shown(source: &str, name: &str, scalar_only: bool) -> Result<Vec<String>, String> {
        let c = sluice_compiler::compile(source);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let p = c.pipelines.iter().find(|p| p.name() == name).unwrap();
        crate::check(p).unwrap();
        SCALAR_ONLY.store(scalar_only, Ordering::Relaxed);
        let ds = crate::dataset(p, &crate::params(p, &[]).unwrap()).unwrap();
        let out = ds
            .stream()
            .unwrap()
            .map(|x| {
                let mut out = Json::new();
                x.map_err(|e| e.to_string())?.show(&mut out);
                Ok(out.as_str().to_string())
            })
            .collect();
        SCALAR_ONLY.store(false, Ordering::Relaxed);
        out
    }

    #[test]
    fn node_by_node_is_value_by_value_bit_for_bit() {
        let source = r#"
            pipeline p() {
                range(-7, 13);
                map { h = one_hot((value + 9) % 3, 3); }
                map {
                    a = h * cast(value, f32) - 1.5;
                    b = cast(a * 40.0, u8);
                    c = -a / 3.0 + h;
                    d = a > 0.5;
                    e = cast(value, f64) * 2.5 % 7.0;
                    f = value * 3 / 2 - 9;
                    g = scale(h, 0.1);
                    i = !(value > 2);
                    j = cast(b, f32) / 255.0;
                    k = value * 9223372036854775807;
                    m = cast(a, i64) * 3;
                }
                batch(4);
            }
            pipeline divided() {
                range(5);
                map { h = one_hot(value % 2, 2); }
                map { q = cast(h, i64) / (value - 3); }
            }
        "#;
        let before = VECTORED.load(Ordering::Relaxed);
        let vector = shown(source, "p", false);
        // 11 statements of 20 rows, nearly all node by node.
        assert!(VECTORED.load(Ordering::Relaxed) - before >= 20 * 10, "the node-by-node path ran");
        let scalar = shown(source, "p", true);
        assert!(vector.as_ref().is_ok_and(|v| v.len() == 5), "{vector:?}");
        assert_eq!(vector, scalar);
        // A division by zero: the scalar path's error, after the same elements.
        let (vector, scalar) = (shown(source, "divided", false), shown(source, "divided", true));
        assert!(vector.as_ref().is_err_and(|e| e.contains("division by zero")), "{vector:?}");
        assert_eq!(vector, scalar);
    }
}
