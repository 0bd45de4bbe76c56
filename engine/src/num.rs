//! One number of any dtype ([`Num`]) and the arithmetic of the generated code on it: `as`
//! conversions (`abi::ops::cast`), wrapping integer arithmetic, integer division by zero
//! an error (`abi::ops::int_div`), comparisons in one common dtype.

use sluice_compiler::ir::expr::BinaryOp;
use sluice_compiler::ir::types::DType;
use sluice_runtime::abi::ops;

use crate::value::Data;

/// A number of one of the numeric dtypes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// `bool`.
    Bool(bool),
    /// `u8`.
    U8(u8),
    /// `i32`.
    I32(i32),
    /// `u32`.
    U32(u32),
    /// `i64`.
    I64(i64),
    /// `u64`.
    U64(u64),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
}

/// Calls `$body` with `$v` bound to the number inside `$n`.
macro_rules! each {
    ($n:expr, $v:ident => $body:expr) => {
        match $n {
            Num::Bool($v) => $body,
            Num::U8($v) => $body,
            Num::I32($v) => $body,
            Num::U32($v) => $body,
            Num::I64($v) => $body,
            Num::U64($v) => $body,
            Num::F32($v) => $body,
            Num::F64($v) => $body,
        }
    };
}

/// `v` converted to `to` as `abi::ops::cast` converts (Rust's `as`; `bool` is `!= 0`).
macro_rules! to_dtype {
    ($v:expr, $to:expr) => {
        match $to {
            DType::Bool => Some(Num::Bool(ops::cast($v))),
            DType::U8 => Some(Num::U8(ops::cast($v))),
            DType::I32 => Some(Num::I32(ops::cast($v))),
            DType::U32 => Some(Num::U32(ops::cast($v))),
            DType::I64 => Some(Num::I64(ops::cast($v))),
            DType::U64 => Some(Num::U64(ops::cast($v))),
            DType::F32 => Some(Num::F32(ops::cast($v))),
            DType::F64 => Some(Num::F64(ops::cast($v))),
            _ => None,
        }
    };
}

impl Num {
    /// Its dtype.
    pub fn dtype(self) -> DType {
        match self {
            Num::Bool(_) => DType::Bool,
            Num::U8(_) => DType::U8,
            Num::I32(_) => DType::I32,
            Num::U32(_) => DType::U32,
            Num::I64(_) => DType::I64,
            Num::U64(_) => DType::U64,
            Num::F32(_) => DType::F32,
            Num::F64(_) => DType::F64,
        }
    }

    /// The number as `to` (`as` semantics); an error for a dtype that is not a number the
    /// engine computes in (`f16`, `bf16`, `bytes`, `str`).
    pub fn cast(self, to: DType) -> Result<Num, String> {
        if self.dtype() == to {
            return Ok(self);
        }
        each!(self, v => to_dtype!(v, to)).ok_or_else(|| format!("the engine does not compute in `{to}`"))
    }

    /// As a boolean.
    pub fn truth(self) -> bool {
        matches!(self.cast(DType::Bool), Ok(Num::Bool(true)))
    }

    /// `-x`: negation for floats, wrapping for integers.
    pub fn negated(self) -> Num {
        match self {
            Num::F32(v) => Num::F32(-v),
            Num::F64(v) => Num::F64(-v),
            Num::U8(v) => Num::U8(v.wrapping_neg()),
            Num::I32(v) => Num::I32(v.wrapping_neg()),
            Num::U32(v) => Num::U32(v.wrapping_neg()),
            Num::I64(v) => Num::I64(v.wrapping_neg()),
            Num::U64(v) => Num::U64(v.wrapping_neg()),
            Num::Bool(v) => Num::Bool(v),
        }
    }

    /// `a op b` for arithmetic `op`, both of one dtype: wrapping for integers, integer
    /// division or remainder by zero an error.
    pub fn arith(op: BinaryOp, a: Num, b: Num) -> Result<Num, String> {
        macro_rules! float {
            ($a:expr, $b:expr) => {
                match op {
                    BinaryOp::Add => $a + $b,
                    BinaryOp::Sub => $a - $b,
                    BinaryOp::Mul => $a * $b,
                    BinaryOp::Div => $a / $b,
                    _ => $a % $b,
                }
            };
        }
        macro_rules! int {
            ($a:expr, $b:expr) => {
                match op {
                    BinaryOp::Add => $a.wrapping_add($b),
                    BinaryOp::Sub => $a.wrapping_sub($b),
                    BinaryOp::Mul => $a.wrapping_mul($b),
                    BinaryOp::Div => ops::int_div($a, $b).map_err(|e| e.to_string())?,
                    _ => ops::int_rem($a, $b).map_err(|e| e.to_string())?,
                }
            };
        }
        Ok(match (a, b) {
            (Num::F32(a), Num::F32(b)) => Num::F32(float!(a, b)),
            (Num::F64(a), Num::F64(b)) => Num::F64(float!(a, b)),
            (Num::U8(a), Num::U8(b)) => Num::U8(int!(a, b)),
            (Num::I32(a), Num::I32(b)) => Num::I32(int!(a, b)),
            (Num::U32(a), Num::U32(b)) => Num::U32(int!(a, b)),
            (Num::I64(a), Num::I64(b)) => Num::I64(int!(a, b)),
            (Num::U64(a), Num::U64(b)) => Num::U64(int!(a, b)),
            (a, b) => return Err(format!("arithmetic on {} and {}", a.dtype(), b.dtype())),
        })
    }

    /// `a op b` for a comparison `op`, both of one dtype.
    pub fn compare(op: BinaryOp, a: Num, b: Num) -> Result<bool, String> {
        macro_rules! cmp {
            ($a:expr, $b:expr) => {
                match op {
                    BinaryOp::Eq => $a == $b,
                    BinaryOp::Ne => $a != $b,
                    BinaryOp::Lt => $a < $b,
                    BinaryOp::Le => $a <= $b,
                    BinaryOp::Gt => $a > $b,
                    _ => $a >= $b,
                }
            };
        }
        Ok(match (a, b) {
            (Num::Bool(a), Num::Bool(b)) => cmp!(a, b),
            (Num::F32(a), Num::F32(b)) => cmp!(a, b),
            (Num::F64(a), Num::F64(b)) => cmp!(a, b),
            (Num::U8(a), Num::U8(b)) => cmp!(a, b),
            (Num::I32(a), Num::I32(b)) => cmp!(a, b),
            (Num::U32(a), Num::U32(b)) => cmp!(a, b),
            (Num::I64(a), Num::I64(b)) => cmp!(a, b),
            (Num::U64(a), Num::U64(b)) => cmp!(a, b),
            (a, b) => return Err(format!("comparison of {} and {}", a.dtype(), b.dtype())),
        })
    }

    /// The `i`th number of `data` (`None` for bytes and strings, or past the end).
    pub fn at(data: &Data, i: usize) -> Option<Num> {
        Some(match data {
            Data::Bool(v) => Num::Bool(*v.get(i)?),
            Data::U8(v) => Num::U8(*v.get(i)?),
            Data::I32(v) => Num::I32(*v.get(i)?),
            Data::U32(v) => Num::U32(*v.get(i)?),
            Data::I64(v) => Num::I64(*v.get(i)?),
            Data::U64(v) => Num::U64(*v.get(i)?),
            Data::F32(v) => Num::F32(*v.get(i)?),
            Data::F64(v) => Num::F64(*v.get(i)?),
            Data::Bytes(_) | Data::Str(_) => return None,
        })
    }

    /// A buffer of `dtype` holding `nums` (each already of that dtype, or converted).
    pub fn collect(dtype: DType, nums: &[Num]) -> Result<Data, String> {
        macro_rules! gather {
            ($variant:ident) => {{
                let mut out = Vec::with_capacity(nums.len());
                for n in nums {
                    match n.cast(dtype)? {
                        Num::$variant(v) => out.push(v),
                        _ => return Err(format!("a value of {dtype}")),
                    }
                }
                Data::$variant(out)
            }};
        }
        Ok(match dtype {
            DType::Bool => gather!(Bool),
            DType::U8 => gather!(U8),
            DType::I32 => gather!(I32),
            DType::U32 => gather!(U32),
            DType::I64 => gather!(I64),
            DType::U64 => gather!(U64),
            DType::F32 => gather!(F32),
            DType::F64 => gather!(F64),
            other => return Err(format!("the engine does not compute in `{other}`")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_and_arithmetic_are_the_generated_codes() {
        assert_eq!(Num::F64(300.7).cast(DType::U8), Ok(Num::U8(255)));
        assert_eq!(Num::I64(-1).cast(DType::U32), Ok(Num::U32(u32::MAX)));
        assert_eq!(Num::F32(0.5).cast(DType::Bool), Ok(Num::Bool(true)));
        assert_eq!(Num::arith(BinaryOp::Mul, Num::I64(i64::MAX), Num::I64(2)), Ok(Num::I64(-2)));
        assert!(Num::arith(BinaryOp::Div, Num::I64(1), Num::I64(0)).is_err());
        assert_eq!(Num::compare(BinaryOp::Lt, Num::F32(1.0), Num::F32(2.0)), Ok(true));
        assert!(Num::I64(1).cast(DType::F16).is_err());
    }
}
