//! `skip_row_groups`: a filter right after a `parquet` reader's parse hands the reader the
//! conjuncts its row groups' statistics can decide (`column OP constant` on a numeric
//! column the map does not assign), so that a row group none of whose rows can pass is
//! never read. The filter stays: it still tests every row read (the statistics only
//! bound a row group). `explain` shows the tests on the reader, the report counts the
//! row groups skipped (`pruned_row_groups`).
//!
//! ```text
//! before                                   after
//! Filter: predicate=id >= 100              Filter: predicate=id >= 100
//!   Map: fns=[parse_parquet]                 Map: fns=[parse_parquet]
//!     Interleave: reader=parquet(              Interleave: reader=parquet(columns: [id, x],
//!                 columns: [id, x])                        skip_row_groups: [id >= 100])
//! ```

use crate::ir::expr::{BinaryOp, Expr, ExprKind, UnaryOp};
use crate::ir::formats::{ColumnTest, ParseFormat, RecordFormat, TestValue};
use crate::ir::plan::{MapOp, Plan};
use crate::ir::types::{DType, Shape};

use super::{Rule, Transformed, rewrite_each_node};

/// Gives a `parquet` reader the tests of the filter on its rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkipRowGroups;

impl Rule for SkipRowGroups {
    fn name(&self) -> &'static str {
        "skip_row_groups"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, give_tests)
    }
}

fn give_tests(mut plan: Plan) -> Transformed {
    let Plan::Filter(filter) = &mut plan else { return Transformed::no(plan) };
    let Plan::Map(m) = filter.input.as_mut() else { return Transformed::no(plan) };
    let Some(MapOp::Parse { format: ParseFormat::Table, fields }) = m.ops.first() else {
        return Transformed::no(plan);
    };
    // The fields the map assigns after the parse are not the columns any more.
    let assigned: Vec<&str> = m.ops[1..]
        .iter()
        .filter_map(|op| match op {
            MapOp::Assign { target, .. } => Some(target.as_str()),
            _ => None,
        })
        .collect();
    let numeric = |name: &str| {
        !assigned.contains(&name)
            && fields.iter().any(|f| {
                f.name == name
                    && f.ty.as_ref().is_some_and(|t| {
                        t.shape == Shape::scalar()
                            && matches!(t.dtype, DType::I32 | DType::I64 | DType::F32 | DType::F64)
                    })
            })
    };
    let mut conjuncts = Vec::new();
    for c in &filter.conditions {
        and_parts(c, &mut conjuncts);
    }
    let tests: Vec<ColumnTest> = conjuncts.into_iter().filter_map(|c| test_of(c, &numeric)).collect();
    let Plan::Interleave(i) = m.input.as_mut() else { return Transformed::no(plan) };
    let RecordFormat::Parquet(p) = &mut i.format else { return Transformed::no(plan) };
    if p.tests == tests {
        return Transformed::no(plan);
    }
    p.tests = tests;
    Transformed::yes(plan)
}

/// The parts of `a && b && ...`, each of which must hold.
fn and_parts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match &e.kind {
        ExprKind::Binary(BinaryOp::And, l, r) => {
            and_parts(l, out);
            and_parts(r, out);
        }
        _ => out.push(e),
    }
}

/// `field OP constant` (or `constant OP field`) on a column `numeric` accepts.
fn test_of(c: &Expr, numeric: &dyn Fn(&str) -> bool) -> Option<ColumnTest> {
    let ExprKind::Binary(op, l, r) = &c.kind else { return None };
    let flip = |op: BinaryOp| match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        other => other,
    };
    let (op, field, constant) = match (&l.kind, &r.kind) {
        (ExprKind::Field(f), _) => (*op, f, r),
        (_, ExprKind::Field(f)) => (flip(*op), f, l),
        _ => return None,
    };
    if !matches!(op, BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq)
        || !numeric(field)
    {
        return None;
    }
    Some(ColumnTest { column: field.clone(), op, value: constant_of(constant)? })
}

fn constant_of(e: &Expr) -> Option<TestValue> {
    match &e.kind {
        ExprKind::Int(n) => i64::try_from(*n).ok().map(TestValue::Int),
        ExprKind::Float(x) => Some(TestValue::Float(*x)),
        ExprKind::Unary(UnaryOp::Neg, inner) => match constant_of(inner)? {
            TestValue::Int(n) => n.checked_neg().map(TestValue::Int),
            TestValue::Float(x) => Some(TestValue::Float(-x)),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    fn reader_of(source: &str) -> String {
        let p = crate::compile(source).into_result().unwrap_or_else(|d| panic!("{d:?}"));
        let text = p[0].explain(false);
        text.lines().rfind(|l| l.contains("reader=parquet")).unwrap_or_default().trim().to_string()
    }

    #[test]
    fn comparisons_of_plain_columns_with_constants_become_tests() {
        let head = "pipeline p(files: glob = \"d/*\") {
            schema { id: i64, x: f32, s: str, v: f32[], k: i32 = 0 }
            parquet(files);";
        let r = reader_of(&format!("{head} filter(id >= 100 && 2.5 > x && cast(k, f32) > 1.0); }}"));
        assert!(r.contains("skip_row_groups: [id >= 100, x < 2.5]"), "{r}");
        let r = reader_of(&format!("{head} filter(k == -3 && id != 4); }}"));
        assert!(r.contains("skip_row_groups: [k == -3]"), "{r}");
        // A field the map assigns before the filter is not the column.
        let r = reader_of(&format!("{head} map {{ id = id * 2; }} filter(id > 5 && x <= 0.0); }}"));
        assert!(r.contains("skip_row_groups: [x <= 0.0]"), "{r}");
        let r = reader_of(&format!("{head} filter(id + 1 > 5); }}"));
        assert!(!r.contains("skip_row_groups"), "{r}");
    }
}
