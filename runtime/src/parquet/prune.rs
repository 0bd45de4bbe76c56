//! Row groups a `filter` right after the reader can skip: each test `column OP value`
//! (all must hold for a row to pass) is checked against the row group's statistics, and a
//! row group none of whose rows can pass is not read. The filter still runs on every row
//! read, so the tests only ever drop row groups it would have emptied.
//!
//! A row group is skipped only when that is exact: the tested column has statistics
//! (min, max and a null count of 0: a null would take the schema default, which the
//! statistics do not bound), and every column read has a null count of 0 or a schema
//! default (a null without one would have failed the pass, which skipping must not hide).
//! Only signed integer and floating columns are tested (the statistics of unsigned and
//! other logical types order differently); NaNs are outside min/max and never pass a
//! comparison other than `!=`, which is not a test.

use ::parquet::file::metadata::RowGroupMetaData;
use ::parquet::file::statistics::Statistics;

use crate::abi::table::TableColumn;

/// A comparison of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `==`.
    Eq,
}

/// A test's constant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
}

/// `column OP value`, a conjunct of the filter after the reader.
#[derive(Debug, Clone, PartialEq)]
pub struct RowGroupTest {
    /// The column (a scalar field the reader reads).
    pub column: String,
    /// The comparison.
    pub op: Cmp,
    /// The constant.
    pub value: Bound,
}

impl Eq for RowGroupTest {}

/// The largest integer every f64 holds exactly (beyond it, a test is not decided).
const EXACT: i64 = 1 << 53;

fn as_f64(b: Bound) -> Option<f64> {
    match b {
        Bound::Float(x) => Some(x),
        Bound::Int(i) if i.abs() <= EXACT => Some(i as f64),
        Bound::Int(_) => None,
    }
}

/// Whether some value in `[min, max]` can pass `op value` (`true` when undecided).
fn can_pass(min: Bound, max: Bound, op: Cmp, value: Bound) -> bool {
    use std::cmp::Ordering;
    let cmp = |a: Bound, b: Bound| -> Option<Ordering> {
        match (a, b) {
            (Bound::Int(x), Bound::Int(y)) => Some(x.cmp(&y)),
            _ => as_f64(a)?.partial_cmp(&as_f64(b)?),
        }
    };
    let (Some(lo), Some(hi)) = (cmp(min, value), cmp(max, value)) else { return true };
    match op {
        Cmp::Lt => lo == Ordering::Less,
        Cmp::Le => lo != Ordering::Greater,
        Cmp::Gt => hi == Ordering::Greater,
        Cmp::Ge => hi != Ordering::Less,
        Cmp::Eq => lo != Ordering::Greater && hi != Ordering::Less,
    }
}

/// The min and max of a column chunk's statistics, when it has no nulls and its type is
/// one a test decides on.
fn range(s: &Statistics) -> Option<(Bound, Bound)> {
    if s.null_count_opt() != Some(0) {
        return None;
    }
    Some(match s {
        Statistics::Int32(v) => (Bound::Int(i64::from(*v.min_opt()?)), Bound::Int(i64::from(*v.max_opt()?))),
        Statistics::Int64(v) => (Bound::Int(*v.min_opt()?), Bound::Int(*v.max_opt()?)),
        Statistics::Float(v) => {
            (Bound::Float(f64::from(*v.min_opt()?)), Bound::Float(f64::from(*v.max_opt()?)))
        }
        Statistics::Double(v) => (Bound::Float(*v.min_opt()?), Bound::Float(*v.max_opt()?)),
        _ => return None,
    })
}

/// Whether row group `g` can be skipped: some test no row can pass, decided exactly (see
/// the [module](self)). `leaf` gives a column's leaf index in the file (`None`: not a
/// plain top-level column) and `signed` whether its Arrow type is a signed integer or a
/// float.
pub(super) fn skippable(
    g: &RowGroupMetaData,
    tests: &[RowGroupTest],
    columns: &[TableColumn],
    leaf: &dyn Fn(&str) -> Option<usize>,
    signed: &dyn Fn(&str) -> bool,
) -> bool {
    if tests.is_empty() {
        return false;
    }
    // A null the parse would fail on must still fail the pass.
    for c in columns {
        if c.has_default {
            continue;
        }
        let nulls = leaf(&c.name).and_then(|i| g.column(i).statistics()).and_then(Statistics::null_count_opt);
        if nulls != Some(0) {
            return false;
        }
    }
    tests.iter().any(|t| {
        if !signed(&t.column) {
            return false;
        }
        let Some(stats) = leaf(&t.column).and_then(|i| g.column(i).statistics()) else { return false };
        let Some((min, max)) = range(stats) else { return false };
        !can_pass(min, max, t.op, t.value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_passes_a_comparison_when_some_value_in_it_does() {
        let (i, f) = (Bound::Int, Bound::Float);
        assert!(!can_pass(i(0), i(9), Cmp::Lt, i(0)));
        assert!(can_pass(i(0), i(9), Cmp::Le, i(0)));
        assert!(!can_pass(i(0), i(9), Cmp::Gt, i(9)));
        assert!(can_pass(i(0), i(9), Cmp::Ge, i(9)));
        assert!(!can_pass(i(0), i(9), Cmp::Eq, i(10)));
        assert!(can_pass(i(0), i(9), Cmp::Eq, i(4)));
        assert!(!can_pass(f(0.5), f(1.5), Cmp::Gt, i(2)));
        assert!(can_pass(f(0.5), f(1.5), Cmp::Gt, f(1.25)));
        assert!(!can_pass(i(1), i(3), Cmp::Lt, f(0.5)));
        // Undecided beyond 2^53 against a float, and with a NaN constant.
        assert!(can_pass(i(i64::MAX - 1), i(i64::MAX), Cmp::Lt, f(1.0)));
        assert!(can_pass(f(0.0), f(1.0), Cmp::Gt, f(f64::NAN)));
    }
}
