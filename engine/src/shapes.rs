//! The engine's shaping stages: `batch` (lists padded to the longest, as the generated
//! batch structs do), `padded_batch`, `window`, `bucket_by_length`, `unbatch` (of batches
//! and of fields), `pack`, `take_while`, `shuffle_batches` and batches of batches, each
//! the runtime's own stage over [`Item`]s.
//!
//! [`Item`] is [`Batchable`] as a generated record is: its builder makes one runtime
//! column builder per field, chosen by how the field is held (the first row's
//! [`Kind`], the plan's types for a padding), exactly those the generated batch struct
//! names (`codegen/types.rs`): a scalar's `Dense`, a tensor's `TensorBuilder` (padded:
//! `PaddedTensorBuilder`), a list's `PaddedVecBuilder` (plain `batch`: to the longest,
//! with 0), byte strings and strings as they come. So a batch's values, its padding and
//! its errors (`ColumnError`, tagged with the field and the batch by the stage) are the
//! compiled runner's. A padded list's column is marked [`Kind::List`], so `unbatch`
//! gives its rows back as lists.
//!
//! A batch of batches (or of other elements without fields) is [`Item::Items`], what the
//! generated `chunks` makes (a `Vec` of batches, shown as a JSON array).

use std::sync::Arc;

use sluice_compiler::ir::bucket::{BucketSpec, LengthOf, PaddingValues};
use sluice_compiler::ir::pack::{PackOverflow, PackSpec};
use sluice_compiler::ir::plan::{ArgValue, Element, FieldType};
use sluice_compiler::ir::types::{DType, Shape, TensorType};
use sluice_runtime::column::{Batchable, ColumnBuilder};
use sluice_runtime::stage::{
    BucketOptions, Dataset, Overflow, PackOptions, PackedRow, RecordBatch, bucket_by_length, pack, row_count,
    shuffle_batches, take_while,
};
use sluice_runtime::{BoxError, Error};

use crate::build::Ds;
use crate::eval::Eval;
use crate::num::Num;
use crate::params::Params;
use crate::value::{Columns, Data, Item, Kind, Names, Row, Value};

mod builder;
mod padding;

use padding::Pad;
pub use padding::Padding;

type R<T> = Result<T, Error>;

fn invalid(e: impl std::fmt::Display) -> Error {
    Error::Invalid(e.to_string())
}

fn usize_arg(p: &Params, v: &ArgValue) -> R<usize> {
    p.u64(v).map(|n| n as usize).map_err(invalid)
}

/// How a value of `ty` is held (the generated code's `Repr`, for numbers).
fn kind_of(ty: &TensorType) -> Kind {
    match &ty.shape {
        Shape::Var => Kind::List,
        Shape::Dims(d) if d.is_empty() => Kind::Scalar,
        Shape::Dims(_) => Kind::Tensor,
    }
}

/// Why the engine does not run a shaping node over these fields (`None`: it does):
/// lists of byte strings or strings, which the generated code does not hold either.
pub(crate) fn refusal(fields: &[FieldType]) -> Option<String> {
    fields.iter().find_map(|f| match &f.ty {
        None => Some(format!("a batch of the untyped `{}`", f.name)),
        Some(t) if matches!(t.dtype, DType::F16 | DType::Bf16) => {
            Some(format!("`{}` values", t.dtype.name()))
        }
        Some(t) if matches!(t.dtype, DType::Bytes | DType::Str) && t.shape != Shape::scalar() => {
            Some(format!("a batch of the list `{}: {t}`", f.name))
        }
        _ => None,
    })
}

/// `batch` (`padded`: `padded_batch`) of elements `input`: rows into columnar batches
/// (the runtime's `batch` / `padded_batch`), other elements into batches of them (the
/// generated `chunks`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn batch(
    ds: Ds,
    input: &Element,
    size: &ArgValue,
    drop_remainder: bool,
    padded: Option<&Option<ArgValue>>,
    pad_to_multiple: Option<&ArgValue>,
    padding_values: &PaddingValues,
    p: &Params,
) -> R<Ds> {
    let size = usize_arg(p, size)?;
    Ok(match (input, padded) {
        (Element::Fields(_), None) => ds.batch(size, drop_remainder).boxed(),
        (Element::Fields(f), Some(pad_to)) => {
            let padding = Padding::batch(f, pad_to.as_ref(), pad_to_multiple, padding_values, p)?;
            ds.padded_batch(size, drop_remainder, padding).boxed()
        }
        _ => ds.chunks(size, drop_remainder).map(|v: Vec<Item>| Item::Items(v)).named("batch").boxed(),
    })
}

/// The rows a map makes of `rows` (`f`), built into one batch as the generated map +
/// batch builds it: a row's error names its element, the batch's columns are `batch`'s.
pub(crate) fn rows_batch(
    rows: Vec<Item>,
    f: impl Fn(Item) -> Result<Row, BoxError>,
) -> Result<Item, BoxError> {
    let mut out = <Item as Batchable>::builder(rows.len());
    for (i, x) in rows.into_iter().enumerate() {
        let r = f(x).map_err(|e| format!("element {i} of the batch: {e}"))?;
        out.push(Item::Row(r))?;
    }
    Ok(out.finish())
}

/// Rows as one batch, as the generated map + batch builds the rows its map makes
/// (`codegen/maps.rs`' `batch_body`): every list and tensor padded to the longest with 0
/// (its padded builder where a field's shape varies; where every shape is fixed its plain
/// builder, whose batch is the same).
pub(crate) fn padded_columns(names: Names, rows: Vec<Row>) -> Result<Columns, String> {
    let Some(first) = rows.first() else { return Err("an empty batch".into()) };
    let zero = Num::Bool(false);
    let padding = Padding(
        first
            .values
            .iter()
            .map(|v| match (&v.data, v.kind) {
                (Data::Bytes(_) | Data::Str(_), _) | (_, Kind::Scalar) => Pad::No,
                (_, Kind::List) => Pad::Len { len: None, multiple: 1, value: zero },
                (_, Kind::Tensor) => Pad::Shape { shape: None, value: zero },
            })
            .collect(),
    );
    let mut b = <Item as Batchable>::padded_builder(rows.len(), &padding);
    for r in rows {
        b.push(Item::Row(r)).map_err(|e| e.to_string())?;
    }
    match b.finish() {
        Item::Batch(mut c) => Ok(Columns { names, columns: std::mem::take(&mut c.columns), rows: c.rows }),
        _ => Err("a batch of rows without fields".into()),
    }
}

/// Each element of `rows` mapped by `f`, a batch of them (a map over the batches of a
/// batch of batches), a failing one named.
pub(crate) fn each_of_batch(
    rows: Vec<Item>,
    f: impl Fn(Item) -> Result<Item, BoxError>,
) -> Result<Item, BoxError> {
    each_of_batch_at(rows, |_, x| f(x))
}

/// [`each_of_batch`] with each element's position in the batch.
pub(crate) fn each_of_batch_at(
    rows: Vec<Item>,
    f: impl Fn(usize, Item) -> Result<Item, BoxError>,
) -> Result<Item, BoxError> {
    let out = rows
        .into_iter()
        .enumerate()
        .map(|(i, x)| f(i, x).map_err(|e| BoxError::from(format!("element {i} of the batch: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Item::Items(out))
}

/// `window(size, shift, stride)`: the runtime's `window`, each window a columnar batch.
pub(crate) fn window(
    ds: Ds,
    size: &ArgValue,
    shift: &ArgValue,
    stride: &ArgValue,
    drop: bool,
    p: &Params,
) -> R<Ds> {
    let (size, shift, stride) = (usize_arg(p, size)?, usize_arg(p, shift)?, usize_arg(p, stride)?);
    Ok(ds.window(size, shift, stride, drop).boxed())
}

/// `bucket_by_length`: the runtime's stage, the length read from field `spec.length` (a
/// list's number of values, or an integer's value `as i64`), one padding per bucket.
pub(crate) fn bucket(ds: Ds, from: &[FieldType], spec: &BucketSpec) -> R<Ds> {
    let i = from
        .iter()
        .position(|f| f.name == spec.length)
        .ok_or_else(|| invalid(format!("no field `{}`", spec.length)))?;
    let of = spec.length_of;
    let length = move |x: &Item| -> i64 {
        let Item::Row(r) = x else { return 0 };
        let Some(v) = r.values.get(i) else { return 0 };
        match of {
            LengthOf::Values => v.data.len() as i64,
            LengthOf::Value => match Num::at(&v.data, 0).map(|n| n.cast(DType::I64)) {
                Some(Ok(Num::I64(n))) => n,
                _ => 0,
            },
        }
    };
    let boundaries = spec
        .boundaries
        .iter()
        .map(|&b| i64::try_from(b).map_err(|_| invalid("a bucket boundary beyond i64")))
        .collect::<R<Vec<_>>>()?;
    let batch_sizes = spec.batch_sizes.iter().map(|&s| s as usize).collect();
    let mut paddings = Vec::new();
    for i in 0..spec.batch_sizes.len() {
        let boundary = spec.boundaries.get(i).copied().filter(|_| spec.pad_to_bucket_boundary);
        paddings.push(Padding::bucket(from, boundary, &spec.padding_values)?);
    }
    let options = BucketOptions {
        boundaries,
        batch_sizes,
        pad_to_bucket_boundary: spec.pad_to_bucket_boundary,
        drop_remainder: spec.drop_remainder,
    };
    Ok(bucket_by_length(ds, length, options, paddings).boxed())
}

/// `unbatch` of batches: the runtime's `unbatch`, a batch's rows (a batch of batches'
/// batches, a batch of records' records).
pub(crate) fn unbatch(ds: Ds) -> Ds {
    ds.unbatch().boxed()
}

/// How `unbatch` splits a field of a record (the generated `unbatch` function).
#[derive(Clone, Copy)]
enum Split {
    /// A list or a tensor of one dimension: its values, as scalars.
    Values,
    /// A tensor of more dimensions: tensors of the rest.
    Rows,
}

/// `unbatch` of records: each record split into the rows of its fields (lists and
/// tensors along their first dimension), their lengths checked by the runtime's
/// `row_count`, run by its `unbatch_fields`.
pub(crate) fn unbatch_fields(ds: Ds, from: &[FieldType], to: &[FieldType]) -> R<Ds> {
    let splits = from
        .iter()
        .map(|f| match f.ty.as_ref().map(|t| (kind_of(t), &t.shape, t.dtype)) {
            Some((_, _, DType::Bytes | DType::Str)) | Some((Kind::Scalar, ..)) | None => {
                Err(invalid(format!("`unbatch` of field `{}`", f.name)))
            }
            Some((Kind::List, ..)) => Ok(Split::Values),
            Some((_, Shape::Dims(d), _)) if d.len() == 1 => Ok(Split::Values),
            Some(_) => Ok(Split::Rows),
        })
        .collect::<R<Vec<_>>>()?;
    let names: Vec<String> = from.iter().map(|f| f.name.clone()).collect();
    let out: Names = Arc::from(to.iter().map(|f| f.name.clone()).collect::<Vec<_>>());
    let f = move |x: Item| -> Result<Vec<Item>, BoxError> {
        let Item::Row(r) = x else { return Err("`unbatch` of fields of an element without them".into()) };
        let lens: Vec<(&str, usize)> = names
            .iter()
            .zip(&r.values)
            .map(|(n, v)| (n.as_str(), v.shape.first().copied().unwrap_or(0)))
            .collect();
        let n = row_count(&lens)?;
        let mut rows: Vec<Row> = (0..n).map(|_| Row { names: out.clone(), values: Vec::new() }).collect();
        for (v, split) in r.values.iter().zip(&splits) {
            let rest = v.shape.get(1..).unwrap_or_default().to_vec();
            let per: usize = rest.iter().product();
            let kind = match split {
                Split::Values => Kind::Scalar,
                Split::Rows => Kind::Tensor,
            };
            for (i, row) in rows.iter_mut().enumerate() {
                row.values.push(Value { data: v.data.slice(i * per, per), shape: rest.clone(), kind });
            }
        }
        Ok(rows.into_iter().map(Item::Row).collect())
    };
    Ok(sluice_runtime::stage::unbatch_fields(ds, f).boxed())
}

/// `take_while`: the runtime's stage, the predicate's parts evaluated as `filter`'s.
pub(crate) fn taking_while(ds: Ds, conditions: &[sluice_compiler::ir::expr::Expr], p: &Arc<Params>) -> Ds {
    let (c, pp) = (Arc::new(conditions.to_vec()), p.clone());
    take_while(ds, move |x: &Item| -> Result<bool, BoxError> {
        match x {
            Item::Row(row) => Eval { row, params: &pp }.holds(&c),
            _ => Err("`take_while` of an element without fields".into()),
        }
    })
    .boxed()
}

/// `shuffle_batches`: the runtime's shuffle of a reader's batches of records straight
/// into batches of them.
pub(crate) fn shuffle_records(
    ds: Ds,
    buffer: usize,
    seed: u64,
    reshuffle_each_epoch: bool,
    size: usize,
    drop_remainder: bool,
) -> Ds {
    let records = ds
        .try_map(|x: Item| -> Result<RecordBatch, BoxError> {
            match x {
                Item::Records(b) => Ok(b),
                _ => Err("`shuffle_batches` of elements that are not batches of records".into()),
            }
        })
        .named("shuffle_batches_input");
    shuffle_batches(records, buffer, seed, size, drop_remainder)
        .reshuffle_each_epoch(reshuffle_each_epoch)
        .map(Item::Records)
        .boxed()
}

/// Why the engine does not run this `pack` (`None`: it does): the packed fields must be
/// `i32[]`, as the generated code takes them.
pub(crate) fn pack_refusal(from: &[FieldType], spec: &PackSpec) -> Option<String> {
    spec.fields.iter().find_map(|name| {
        match from.iter().find(|f| &f.name == name).and_then(|f| f.ty.as_ref()) {
            Some(t) if t.dtype == DType::I32 && t.shape == Shape::Var => None,
            Some(t) => Some(format!("`pack` of `{name}: {t}`")),
            None => Some(format!("`pack` of the untyped `{name}`")),
        }
    })
}

/// `pack`: each element's packed fields (`i32[]`) as the runtime `pack`'s sequences,
/// each packed row a record of `i32[length]` tensors (the fields, `segment_ids`,
/// `positions`).
pub(crate) fn pack_rows(ds: Ds, from: &[FieldType], spec: &PackSpec) -> R<Ds> {
    let at = spec
        .fields
        .iter()
        .map(|n| from.iter().position(|f| &f.name == n).ok_or_else(|| invalid(format!("no field `{n}`"))))
        .collect::<R<Vec<_>>>()?;
    let names: Names = Arc::from(spec.element().fields().iter().map(|f| f.name.clone()).collect::<Vec<_>>());
    let options = PackOptions {
        length: usize::try_from(spec.length).map_err(|_| invalid("a `pack` length beyond this machine"))?,
        window: usize::try_from(spec.window).map_err(|_| invalid("a `pack` window beyond this machine"))?,
        overflow: match spec.overflow {
            PackOverflow::Split => Overflow::Split,
            PackOverflow::Error => Overflow::Error,
        },
    };
    let k = at.len();
    let input = ds
        .try_map(move |x: Item| -> Result<Vec<Vec<i32>>, BoxError> {
            let Item::Row(mut r) = x else { return Err("`pack` of an element without fields".into()) };
            at.iter()
                .map(|&i| match std::mem::replace(&mut r.values[i].data, Data::I32(Vec::new())) {
                    Data::I32(v) => Ok(v),
                    _ => Err("`pack` of a field that is not `i32[]`".into()),
                })
                .collect()
        })
        .named("pack_input");
    let tensor = |v: Vec<i32>| Value { shape: vec![v.len()], data: Data::I32(v), kind: Kind::Tensor };
    Ok(pack(input, k, options)
        .map(move |r: PackedRow| {
            let mut values: Vec<Value> = r.fields.into_iter().map(tensor).collect();
            values.push(tensor(r.segment_ids));
            values.push(tensor(r.positions));
            Item::Row(Row { names: names.clone(), values })
        })
        .named("pack_output")
        .boxed())
}

/// `select` in batches of batches (`depth` ≥ 2): each inner element's, as the generated
/// code maps it element by element.
pub(crate) fn select_in(x: Item, names: &Names, depth: usize) -> Result<Item, BoxError> {
    match x {
        Item::Items(v) if depth > 1 => {
            Ok(Item::Items(v.into_iter().map(|x| select_in(x, names, depth - 1)).collect::<Result<_, _>>()?))
        }
        x => crate::build::select(x, names),
    }
}

/// The CPU twin of a `device cuda` tail, what the compiled runner runs (the GPU path is
/// a training loop's device feed): a map of the tail's operations over the batches, on
/// AUTOTUNE workers, in order (`codegen/device_tail.rs`).
pub(crate) fn twin(t: &sluice_compiler::physical::DeviceTailExec) -> sluice_compiler::physical::Exec {
    sluice_compiler::physical::Exec::Map {
        f: sluice_compiler::physical::MapFn {
            input: t.input.clone(),
            ops: t.ops.clone(),
            output: t.output.clone(),
            skip_errors: false,
        },
        parallel: ArgValue::Auto,
        deterministic: true,
        filter: None,
    }
}

#[cfg(test)]
mod tests {
    use sluice_compiler::ir::types::Value as Const;
    use sluice_runtime::abi::show::{Json, Show};
    use sluice_runtime::stage::from_vec;

    use super::*;

    fn shown(x: &Item) -> String {
        let mut out = Json::new();
        x.show(&mut out);
        out.as_str().to_string()
    }

    /// Every element of pipeline `name` of `source`, as `sluice show` prints it (or the
    /// pass's error).
    fn run(source: &str, name: &str) -> Result<Vec<String>, String> {
        let c = sluice_compiler::compile(source);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let p = c.pipelines.into_iter().find(|p| p.name() == name).unwrap();
        crate::check(&p).unwrap();
        let ds = crate::dataset(&p, &crate::params(&p, &[]).unwrap()).unwrap();
        ds.stream().unwrap().map(|x| x.map(|x| shown(&x)).map_err(|e| e.to_string())).collect()
    }

    const SOURCE: &str = r#"
        pipeline windows() { range(5); window(2, shift: 2, stride: 2); }
        pipeline buckets() {
            range(7);
            bucket_by_length(length: value, boundaries: [3], batch_sizes: [2, 3]);
        }
        pipeline nested() {
            range(5);
            map { twice = value * 2; }
            batch(2);
            batch(2);
            select(twice);
        }
        pipeline back() { range(5); batch(2); batch(2); unbatch(); unbatch(); take_while(value < 3); }
    "#;

    /// What the compiled runner prints of `SOURCE`'s pipelines (`sluice show -n all`).
    #[test]
    fn shaping_stages_give_the_compiled_elements() {
        let v = |values: &str, shape: &str| {
            format!(r#"{{"value":{{"dtype":"i64","shape":[{shape}],"values":[{values}]}}}}"#)
        };
        assert_eq!(run(SOURCE, "windows").unwrap(), [v("0,2", "2"), v("2,4", "2"), v("4", "1")]);
        assert_eq!(
            run(SOURCE, "buckets").unwrap(),
            [v("0,1", "2"), v("3,4,5", "3"), v("2", "1"), v("6", "1")]
        );
        assert_eq!(
            run(SOURCE, "nested").unwrap(),
            [
                r#"[{"twice":{"dtype":"i64","shape":[2],"values":[0,2]}},{"twice":{"dtype":"i64","shape":[2],"values":[4,6]}}]"#,
                r#"[{"twice":{"dtype":"i64","shape":[1],"values":[8]}}]"#,
            ]
        );
        assert_eq!(run(SOURCE, "back").unwrap(), [v("0", ""), v("1", ""), v("2", "")]);
    }

    fn names(n: &[&str]) -> Names {
        Arc::from(n.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    /// A row `{tokens: i64[] = tokens, label: i64 = label}`.
    fn row(tokens: &[i64], label: i64) -> Item {
        Item::Row(Row {
            names: names(&["tokens", "label"]),
            values: vec![
                Value { data: Data::I64(tokens.to_vec()), shape: vec![tokens.len()], kind: Kind::List },
                Value::scalar(Data::I64(vec![label])),
            ],
        })
    }

    fn fields(source: &str) -> Vec<FieldType> {
        let c = sluice_compiler::compile(source);
        c.pipelines[0]
            .physical
            .stages
            .iter()
            .find_map(|n| match &n.exec {
                sluice_compiler::physical::Exec::Batch { input: Element::Fields(f), .. } => Some(f.clone()),
                _ => None,
            })
            .unwrap()
    }

    fn pass(ds: Ds) -> Vec<Result<Item, String>> {
        ds.stream().unwrap().map(|x| x.map_err(|e| e.to_string())).collect()
    }

    #[test]
    fn lists_pad_to_the_longest_or_as_told_and_unbatch_back_into_lists() {
        let f = fields(
            r#"pipeline p() { schema { tokens: i64[], label: i64 } tfrecords("x"); map { parse_example(); } padded_batch(2); }"#,
        );
        let params = Params::default();
        let rows = vec![row(&[1, 2, 3], 0), row(&[4], 1), row(&[], 2)];
        let values = PaddingValues(vec![("tokens".into(), Const::Int(-1))]);
        let ds = from_vec(rows.clone()).boxed();
        let out = batch(
            ds,
            &Element::Fields(f.clone()),
            &ArgValue::Const(Const::Int(2)),
            false,
            Some(&None),
            None,
            &values,
            &params,
        )
        .unwrap();
        let out: Vec<Item> = pass(out).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            shown(&out[0]),
            r#"{"tokens":{"dtype":"i64","shape":[2,3],"values":[1,2,3,4,-1,-1]},"label":{"dtype":"i64","shape":[2],"values":[0,1]}}"#
        );
        assert_eq!(
            shown(&out[1]),
            r#"{"tokens":{"dtype":"i64","shape":[1,0],"values":[]},"label":{"dtype":"i64","shape":[1],"values":[2]}}"#
        );
        // The padded rows come back as lists of the padded length.
        let back = pass(unbatch(from_vec(out).boxed()));
        let Ok(Item::Row(r)) = &back[1] else { panic!("{back:?}") };
        assert_eq!(r.values[0], Value { data: Data::I64(vec![4, -1, -1]), shape: vec![3], kind: Kind::List });
        // A multiple of 4, and a declared length an element is longer than.
        let ds = from_vec(rows.clone()).boxed();
        let m = ArgValue::Const(Const::Int(4));
        let out = batch(
            ds,
            &Element::Fields(f.clone()),
            &ArgValue::Const(Const::Int(3)),
            false,
            Some(&None),
            Some(&m),
            &values,
            &params,
        );
        assert!(shown(pass(out.unwrap())[0].as_ref().unwrap()).contains(r#""shape":[3,4]"#));
        let ds = from_vec(rows).boxed();
        let to = Some(ArgValue::Const(Const::Int(2)));
        let out = pass(
            batch(
                ds,
                &Element::Fields(f),
                &ArgValue::Const(Const::Int(2)),
                false,
                Some(&to),
                None,
                &values,
                &params,
            )
            .unwrap(),
        );
        assert_eq!(
            out[0].as_ref().unwrap_err(),
            "stage `padded_batch`: batch 0, element 0, field `tokens`: shape [3] is longer than the declared padded shape [2]"
        );
    }

    #[test]
    fn tensors_of_other_shapes_do_not_batch_plainly() {
        let t = |n: usize| {
            Item::Row(Row {
                names: names(&["x"]),
                values: vec![Value { data: Data::F32(vec![0.5; n]), shape: vec![n], kind: Kind::Tensor }],
            })
        };
        let out = pass(from_vec(vec![t(2), t(2), t(2), t(3)]).batch(2, false).boxed());
        assert!(out[0].is_ok());
        assert_eq!(
            out[1].as_ref().unwrap_err(),
            "stage `batch`: batch 1, element 1, field `x`: shape [3] differs from the batch's shape [2] \
             (use padded_batch for variable shapes)"
        );
    }

    #[test]
    fn records_unbatch_into_their_fields_rows_or_name_unequal_lengths() {
        let c = sluice_compiler::compile(
            r#"pipeline p() { schema { tokens: i64[], label: i64[] } tfrecords("x"); map { parse_example(); } unbatch(); }"#,
        );
        let Some((from, to)) = c.pipelines[0].physical.stages.iter().find_map(|n| match &n.exec {
            sluice_compiler::physical::Exec::UnbatchFields { from, to } => Some((from.clone(), to.clone())),
            _ => None,
        }) else {
            panic!("no UnbatchFieldsExec")
        };
        let r = |a: &[i64], b: &[i64]| {
            Item::Row(Row {
                names: names(&["tokens", "label"]),
                values: vec![
                    Value { data: Data::I64(a.to_vec()), shape: vec![a.len()], kind: Kind::List },
                    Value { data: Data::I64(b.to_vec()), shape: vec![b.len()], kind: Kind::List },
                ],
            })
        };
        let ds = from_vec(vec![r(&[1, 2], &[3, 4]), r(&[], &[]), r(&[5], &[6, 7])]).boxed();
        let out = pass(unbatch_fields(ds, &from, &to).unwrap());
        let shown: Vec<String> =
            out.iter().map(|x| x.as_ref().map(shown).unwrap_or_else(Clone::clone)).collect();
        assert_eq!(
            shown,
            [
                r#"{"tokens":{"dtype":"i64","shape":[],"values":[1]},"label":{"dtype":"i64","shape":[],"values":[3]}}"#,
                r#"{"tokens":{"dtype":"i64","shape":[],"values":[2]},"label":{"dtype":"i64","shape":[],"values":[4]}}"#,
                "stage `unbatch`: element 2: the fields unbatched have different lengths: `tokens` has 1, `label` has 2",
            ]
        );
    }

    #[test]
    fn pack_fills_rows_of_its_length_with_segments_and_positions() {
        let c = sluice_compiler::compile(
            r#"pipeline p() { schema { ids: i32[] } tfrecords("x"); map { parse_example(); } pack(length: 4, fields: [ids]); }"#,
        );
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let Some((from, spec)) = c.pipelines[0].physical.stages.iter().find_map(|n| match &n.exec {
            sluice_compiler::physical::Exec::Pack { from, spec } => Some((from.clone(), spec.clone())),
            _ => None,
        }) else {
            panic!("no PackExec")
        };
        assert_eq!(pack_refusal(&from, &spec), None);
        let ids = |v: &[i32]| {
            Item::Row(Row {
                names: names(&["ids"]),
                values: vec![Value { data: Data::I32(v.to_vec()), shape: vec![v.len()], kind: Kind::List }],
            })
        };
        let out = pass(
            pack_rows(from_vec(vec![ids(&[1, 2, 3]), ids(&[4]), ids(&[5, 6])]).boxed(), &from, &spec)
                .unwrap(),
        );
        let t = |v: &str| format!(r#"{{"dtype":"i32","shape":[4],"values":[{v}]}}"#);
        assert_eq!(
            out.iter().map(|x| shown(x.as_ref().unwrap())).collect::<Vec<_>>(),
            [
                format!(
                    r#"{{"ids":{},"segment_ids":{},"positions":{}}}"#,
                    t("1,2,3,4"),
                    t("1,1,1,2"),
                    t("0,1,2,0")
                ),
                format!(
                    r#"{{"ids":{},"segment_ids":{},"positions":{}}}"#,
                    t("5,6,0,0"),
                    t("1,1,0,0"),
                    t("0,1,0,0")
                ),
            ]
        );
    }
}
