//! `Amount`: a figure of the memory bound (elements, bytes) as its value with the
//! parameters at their defaults and, when parameters size it, the expression of those
//! parameters that computes it again once their values are known. The bound of a
//! pipeline with a declared `budget` is such an amount: the generated `Params::check`
//! evaluates its expression ([`Expr::eval`] is the same arithmetic, for tests), so
//! `--set buf=1000000000` is refused against the budget as the literal is (E0500).
//!
//! The arithmetic is `u64` and saturating, as the bound's own: a value no machine has
//! stays above any budget rather than wrapping.

use std::fmt;
use std::sync::Arc;

/// An expression of the pipeline's parameters (each a `u64`: a count or a size).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant.
    Const(u64),
    /// A parameter's value.
    Param(String),
    /// Saturating `a + b`.
    Add(Arc<Expr>, Arc<Expr>),
    /// Saturating `a - b`.
    Sub(Arc<Expr>, Arc<Expr>),
    /// Saturating `a × b`.
    Mul(Arc<Expr>, Arc<Expr>),
    /// `a / b` (0 when `b` is 0).
    Div(Arc<Expr>, Arc<Expr>),
    /// `a / b` rounded up (0 when `b` is 0).
    DivCeil(Arc<Expr>, Arc<Expr>),
    /// The smaller.
    Min(Arc<Expr>, Arc<Expr>),
    /// The larger.
    Max(Arc<Expr>, Arc<Expr>),
    /// `then` when `a < b`, else `otherwise`.
    IfBelow { a: Arc<Expr>, b: Arc<Expr>, then: Arc<Expr>, otherwise: Arc<Expr> },
}

impl Expr {
    /// The value with `param`'s values (a parameter it does not know counts as 0).
    pub fn eval(&self, param: &dyn Fn(&str) -> Option<u64>) -> u64 {
        let e = |x: &Arc<Expr>| x.eval(param);
        match self {
            Expr::Const(n) => *n,
            Expr::Param(p) => param(p).unwrap_or(0),
            Expr::Add(a, b) => e(a).saturating_add(e(b)),
            Expr::Sub(a, b) => e(a).saturating_sub(e(b)),
            Expr::Mul(a, b) => e(a).saturating_mul(e(b)),
            Expr::Div(a, b) => e(a).checked_div(e(b)).unwrap_or(0),
            Expr::DivCeil(a, b) => match e(b) {
                0 => 0,
                d => e(a).div_ceil(d),
            },
            Expr::Min(a, b) => e(a).min(e(b)),
            Expr::Max(a, b) => e(a).max(e(b)),
            Expr::IfBelow { a, b, then, otherwise } => {
                if e(a) < e(b) {
                    e(then)
                } else {
                    e(otherwise)
                }
            }
        }
    }

    /// The parameters it reads, each once, in the order first read.
    pub fn params(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Param(p) = e
                && !out.contains(p)
            {
                out.push(p.clone());
            }
        });
        out
    }

    fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Const(_) | Expr::Param(_) => {}
            Expr::Add(a, b)
            | Expr::Sub(a, b)
            | Expr::Mul(a, b)
            | Expr::Div(a, b)
            | Expr::DivCeil(a, b)
            | Expr::Min(a, b)
            | Expr::Max(a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::IfBelow { a, b, then, otherwise } => {
                for x in [a, b, then, otherwise] {
                    x.walk(f);
                }
            }
        }
    }
}

/// A count or a byte size of the bound: its value with the parameters at their
/// defaults, and its expression when parameters size it.
#[derive(Debug, Clone, PartialEq)]
pub struct Amount {
    value: u64,
    expr: Option<Arc<Expr>>,
}

impl Amount {
    /// A constant.
    pub fn of(value: u64) -> Amount {
        Amount { value, expr: None }
    }

    /// Parameter `name`, `value` at its default (or the size assumed for it).
    pub fn param(name: &str, value: u64) -> Amount {
        Amount { value, expr: Some(Arc::new(Expr::Param(name.to_string()))) }
    }

    /// Its value with the parameters at their defaults.
    pub fn value(&self) -> u64 {
        self.value
    }

    /// Its expression of the parameters, when parameters size it.
    pub fn expr(&self) -> Option<&Expr> {
        self.expr.as_deref()
    }

    fn node(&self) -> Arc<Expr> {
        self.expr.clone().unwrap_or_else(|| Arc::new(Expr::Const(self.value)))
    }

    /// `value` computed from the operands, the expression `make` of theirs when either
    /// has one.
    fn combine(&self, other: &Amount, value: u64, make: fn(Arc<Expr>, Arc<Expr>) -> Expr) -> Amount {
        let expr =
            (self.expr.is_some() || other.expr.is_some()).then(|| Arc::new(make(self.node(), other.node())));
        Amount { value, expr }
    }

    /// Saturating `self + other`.
    #[must_use]
    pub fn saturating_add(&self, other: impl Into<Amount>) -> Amount {
        let o = other.into();
        self.combine(&o, self.value.saturating_add(o.value), Expr::Add)
    }

    /// Saturating `self - other`.
    #[must_use]
    pub fn saturating_sub(&self, other: impl Into<Amount>) -> Amount {
        let o = other.into();
        self.combine(&o, self.value.saturating_sub(o.value), Expr::Sub)
    }

    /// Saturating `self × other`.
    #[must_use]
    pub fn saturating_mul(&self, other: impl Into<Amount>) -> Amount {
        let o = other.into();
        self.combine(&o, self.value.saturating_mul(o.value), Expr::Mul)
    }

    /// `self / other` (0 when `other` is 0).
    #[must_use]
    pub fn div(&self, other: impl Into<Amount>) -> Amount {
        let o = other.into();
        self.combine(&o, self.value.checked_div(o.value).unwrap_or(0), Expr::Div)
    }

    /// `self / other` rounded up (0 when `other` is 0).
    #[must_use]
    pub fn div_ceil(&self, other: impl Into<Amount>) -> Amount {
        let o = other.into();
        let value = if o.value == 0 { 0 } else { self.value.div_ceil(o.value) };
        self.combine(&o, value, Expr::DivCeil)
    }

    /// The smaller.
    #[must_use]
    pub fn min(&self, other: impl Into<Amount>) -> Amount {
        let o = other.into();
        self.combine(&o, self.value.min(o.value), Expr::Min)
    }

    /// The larger.
    #[must_use]
    pub fn max(&self, other: impl Into<Amount>) -> Amount {
        let o = other.into();
        self.combine(&o, self.value.max(o.value), Expr::Max)
    }

    /// At least `lo`, at most `hi` (`lo <= hi`).
    #[must_use]
    pub fn clamp(&self, lo: u64, hi: u64) -> Amount {
        self.max(lo).min(hi)
    }

    /// `then` while `self < limit`, else `otherwise`.
    #[must_use]
    pub fn if_below(&self, limit: u64, then: impl Into<Amount>, otherwise: impl Into<Amount>) -> Amount {
        let (then, otherwise) = (then.into(), otherwise.into());
        let value = if self.value < limit { then.value } else { otherwise.value };
        if self.expr.is_none() {
            return if self.value < limit { then } else { otherwise };
        }
        let expr = Expr::IfBelow {
            a: self.node(),
            b: Arc::new(Expr::Const(limit)),
            then: then.node(),
            otherwise: otherwise.node(),
        };
        Amount { value, expr: Some(Arc::new(expr)) }
    }
}

impl From<u64> for Amount {
    fn from(value: u64) -> Amount {
        Amount::of(value)
    }
}

impl From<&Amount> for Amount {
    fn from(a: &Amount) -> Amount {
        a.clone()
    }
}

impl PartialEq<u64> for Amount {
    fn eq(&self, other: &u64) -> bool {
        self.value == *other
    }
}

/// Its value with the parameters at their defaults.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_fold_and_parameters_keep_their_expression() {
        let c = Amount::of(3).saturating_mul(4u64).saturating_add(1u64);
        assert_eq!((c.value(), c.expr()), (13, None));
        let buf = Amount::param("buf", 10);
        let bytes = buf.saturating_mul(8u64).saturating_add(&c).clamp(1, 1000);
        assert_eq!(bytes.value(), 93);
        let e = bytes.expr().expect("sized by `buf`");
        assert_eq!(e.params(), ["buf"]);
        let at = |v: u64| e.eval(&|p| (p == "buf").then_some(v));
        assert_eq!((at(10), at(20), at(1 << 40)), (93, 173, 1000));
    }

    #[test]
    fn branches_and_division_follow_the_values() {
        let n = Amount::param("n", 4);
        let x = n.saturating_mul(2u64).if_below(10, 0u64, Amount::of(100).div_ceil(&n));
        assert_eq!(x.value(), 0);
        let e = x.expr().expect("sized by `n`");
        let at = |v: u64| e.eval(&|_| Some(v));
        assert_eq!((at(4), at(5), at(30), at(0)), (0, 20, 4, 0));
        assert_eq!(Amount::of(7).div(0u64).value(), 0);
        assert_eq!(Amount::of(5).saturating_sub(9u64).value(), 0);
    }
}
