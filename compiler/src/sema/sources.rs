//! The lowering of the sources that make their elements from arguments alone: `range`
//! and the options of `csv` and `parquet` (E0320–E0322, E0324).

use crate::ast;
use crate::diagnostic::Diagnostic;
use crate::ir::plan::{ArgValue, CsvFormat, FieldType, ParquetFormat, Plan};
use crate::ir::types::Value;

use super::decls::Declarations;

/// The options of a `csv` source: every schema field is a column of one value (a number,
/// `bool`, `str` or `bytes`), E0322 otherwise.
pub(super) fn csv_format(
    s: &ast::Stage,
    delimiter: Option<ArgValue>,
    header: bool,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<CsvFormat> {
    use crate::ir::types::DType;
    if decls.schema.is_empty() {
        diags.push(
            Diagnostic::error("E0322", "`csv` needs a `schema`", s.name.span, "no schema declared")
                .with_help("declare the columns it reads: `schema { name: str, age: i64 }`"),
        );
        return None;
    }
    let mut ok = true;
    for f in &decls.schema {
        let why = if f.ty.shape != crate::ir::types::Shape::scalar() {
            Some("a CSV column holds one value per row")
        } else if matches!(f.ty.dtype, DType::F16 | DType::Bf16) {
            Some("read it as `f32` and `cast` it")
        } else {
            None
        };
        if let Some(why) = why {
            diags.push(
                Diagnostic::error(
                    "E0322",
                    format!("`csv` cannot read the schema field `{}: {}`", f.name, f.ty),
                    s.name.span,
                    why,
                )
                .with_label(f.span, "declared here"),
            );
            ok = false;
        }
    }
    let delimiter = match delimiter {
        Some(ArgValue::Const(Value::Str(c))) => *c.as_bytes().first()?,
        _ => b',',
    };
    ok.then(|| CsvFormat {
        header,
        delimiter,
        columns: decls.schema.iter().map(|f| f.name.clone()).collect(),
    })
}

/// The options of a `parquet` source: every schema field is a column, read by name: a
/// number, `bool`, `str` or `bytes`, a list `T[]` or a fixed shape `T[a, b]` of numbers;
/// E0324 otherwise (a `sequence` field, half floats, lists of strings, named sizes).
pub(super) fn parquet_format(
    s: &ast::Stage,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<ParquetFormat> {
    use crate::ir::types::{DType, Shape};
    let help = "declare the columns it reads: `schema { label: i64, x: f32[16], text: str }`";
    table_format(s, decls, diags, ("E0324", "parquet", help), |f| {
        (matches!(f.ty.dtype, DType::Str | DType::Bytes) && f.ty.shape != Shape::scalar())
            .then_some("a column of strings is read one string per row")
    })
}

/// The options of a `webdataset` source: every schema field is a member of each sample
/// by extension (`jpg`, `cls`, `seg_png` for `seg.png`) or the sample's `__key__`: `bytes`,
/// `str`, a number or `bool` read from the member's text or a `.npy`, or a list `T[]` or
/// fixed shape `T[a, b]` of numbers read from a `.npy` (the member `x` or `x.npy`); E0325
/// otherwise.
pub(super) fn webdataset_format(
    s: &ast::Stage,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<ParquetFormat> {
    use crate::ir::types::{DType, Shape};
    let help = "declare the members it reads by extension: `schema { jpg: bytes, cls: i64, __key__: str }`";
    table_format(s, decls, diags, ("E0325", "webdataset", help), |f| {
        if matches!(f.ty.dtype, DType::Str | DType::Bytes) && f.ty.shape != Shape::scalar() {
            Some("a `str` or `bytes` member is one value; a list or tensor of numbers is a `.npy` member")
        } else if f.name == "__key__" && f.ty.dtype != DType::Str {
            Some("`__key__` is the sample's key, a `str`")
        } else {
            None
        }
    })
}

/// The fields of a table source (`parquet`, `webdataset`): the whole schema, which it
/// needs; a `sequence` field, half floats, a shape with named sizes, and any field
/// `refuse` gives a reason for are errors of `code` (`what`: the source's name, `help`:
/// what to declare).
fn table_format(
    s: &ast::Stage,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
    (code, what, help): (&'static str, &str, &str),
    refuse: impl Fn(&crate::ir::decls::FieldDecl) -> Option<&'static str>,
) -> Option<ParquetFormat> {
    use crate::ir::types::{DType, Dim, Shape};
    if decls.schema.is_empty() {
        diags.push(
            Diagnostic::error(code, format!("`{what}` needs a `schema`"), s.name.span, "no schema declared")
                .with_help(help),
        );
        return None;
    }
    let mut ok = true;
    for f in &decls.schema {
        let why = if f.sequence {
            Some("a `sequence` field is a feature list of a SequenceExample")
        } else if matches!(f.ty.dtype, DType::F16 | DType::Bf16) {
            Some("read it as `f32` and `cast` it")
        } else if matches!(&f.ty.shape, Shape::Dims(d) if d.iter().any(|d| matches!(d, Dim::Named(_)))) {
            Some("the sizes of a fixed shape must be numbers (or read a list: `T[]`)")
        } else {
            refuse(f)
        };
        if let Some(why) = why {
            diags.push(
                Diagnostic::error(
                    code,
                    format!("`{what}` cannot read the schema field `{}: {}`", f.name, f.ty),
                    s.name.span,
                    why,
                )
                .with_label(f.span, "declared here"),
            );
            ok = false;
        }
    }
    ok.then(|| ParquetFormat {
        columns: decls
            .schema
            .iter()
            .map(|f| FieldType { name: f.name.clone(), ty: Some(f.ty.clone()) })
            .collect(),
        defaults: decls.schema.iter().filter(|f| f.default.is_some()).map(|f| f.name.clone()).collect(),
        tests: Vec::new(),
        shard: None,
    })
}

/// `range(end)` (one argument: the end), `range(start, end)`, `range(start, end, step)`.
pub(super) fn range(
    s: &ast::Stage,
    start: Option<Result<ArgValue, String>>,
    end: Option<Result<ArgValue, String>>,
    step: Option<Result<ArgValue, String>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let zero = || Ok(ArgValue::Const(Value::Int(0)));
    let (start, end) = match (start, end) {
        (Some(end), None) => (zero(), end),
        (Some(start), Some(end)) => (start, end),
        (None, Some(end)) => (zero(), end),
        (None, None) => {
            diags.push(
                Diagnostic::error("E0320", "`range` needs an end", s.name.span, "no end given")
                    .with_help("`range(10)` is 0 to 9; `range(start, end, step)` as in Python"),
            );
            return None;
        }
    };
    let step = step.unwrap_or(Ok(ArgValue::Const(Value::Int(1))));
    for (what, v) in [("start", &start), ("end", &end), ("step", &step)] {
        let bad = match v {
            Ok(ArgValue::Const(Value::UInt(n))) => Some(format!("{n} is more than the largest i64")),
            Err(w) => Some(format!("`{w}` is not an i64")),
            Ok(ArgValue::Const(Value::Int(0))) if what == "step" => {
                Some("a step of 0 never ends".to_string())
            }
            _ => None,
        };
        if let Some(label) = bad {
            diags.push(Diagnostic::error(
                "E0321",
                format!(
                    "the {what} of `range` must be an i64{}",
                    if what == "step" { " other than 0" } else { "" }
                ),
                s.name.span,
                label,
            ));
            return None;
        }
    }
    // Every `Err` was reported above.
    let (Ok(start), Ok(end), Ok(step)) = (start, end, step) else { return None };
    Some(Plan::Range(crate::ir::plan::Range { start, end, step }))
}
