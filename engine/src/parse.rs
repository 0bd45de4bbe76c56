//! `parse_example()` with the schema known only at run time: each declared feature read
//! from the record's `tf.train.Example` through the same helpers the generated parser
//! calls (`abi::parse::{fixed, var, scalar, bytes, text}`), so values and errors are
//! the compiled pipeline's. Schema defaults are converted once, as the generated
//! parser's literals are.

use std::sync::Arc;

use sluice_compiler::ir::decls::FieldDecl;
use sluice_compiler::ir::plan::FieldType;
use sluice_compiler::ir::types::{DType, Dim, Shape, TensorType, Value as Literal};
use sluice_runtime::BoxError;
use sluice_runtime::abi::parse::{self, ExampleView};
use sluice_runtime::stage::RecordBatch;

use crate::num::Num;
use crate::value::{Columns, Data, Kind, Names, Row, Value};

/// One feature to parse.
#[derive(Debug, Clone)]
struct Feature {
    name: String,
    ty: TensorType,
    /// The values of a fixed shape (`None`: a scalar or a list).
    fixed: Option<(usize, Vec<usize>)>,
    /// The schema's default, of the feature's dtype (all its values).
    default: Option<Data>,
}

/// A `parse_example` of a schema's fields (or, made by [`ExampleParser::sequence`], a
/// `parse_sequence_example`).
#[derive(Debug, Clone)]
pub struct ExampleParser {
    features: Vec<Feature>,
    names: Names,
    /// The feature lists of a `parse_sequence_example` (`features` are its context).
    sequence: Option<Box<crate::sequence::Lists>>,
}

impl ExampleParser {
    /// The parser of `fields` (typed by sema); refuses what the engine does not parse yet
    /// (defaults, sequence features, named dimensions, half floats, lists of byte
    /// strings).
    pub fn new(fields: &[FieldType], schema: &[FieldDecl]) -> Result<ExampleParser, String> {
        let mut features = Vec::new();
        for f in fields {
            let ty = f.ty.clone().ok_or_else(|| format!("field `{}` has no type", f.name))?;
            let decl = schema.iter().find(|d| d.name == f.name);
            if decl.is_some_and(|d| d.sequence) {
                return Err(format!("`parse_example` of the sequence feature `{}`", f.name));
            }
            let default = match decl.and_then(|d| d.default.as_ref()) {
                Some(v) => {
                    Some(default_of(v, ty.dtype).map_err(|e| format!("the default of `{}`: {e}", f.name))?)
                }
                None => None,
            };
            if matches!(ty.dtype, DType::F16 | DType::Bf16) {
                return Err(format!("`parse_example` of `{}: {ty}`", f.name));
            }
            let fixed = match &ty.shape {
                Shape::Var if matches!(ty.dtype, DType::Bytes | DType::Str) => {
                    return Err(format!("`parse_example` of `{}: {ty}`", f.name));
                }
                Shape::Var => None,
                Shape::Dims(d) if d.is_empty() => None,
                Shape::Dims(d) => {
                    let dims: Option<Vec<usize>> = d
                        .iter()
                        .map(|d| match d {
                            Dim::Fixed(n) => Some(*n as usize),
                            Dim::Named(_) => None,
                        })
                        .collect();
                    let dims = dims.ok_or_else(|| format!("`parse_example` of `{}: {ty}`", f.name))?;
                    if matches!(ty.dtype, DType::Bytes | DType::Str) {
                        return Err(format!("`parse_example` of `{}: {ty}`", f.name));
                    }
                    Some((dims.iter().product(), dims))
                }
            };
            features.push(Feature { name: f.name.clone(), ty, fixed, default });
        }
        let names: Names = Arc::from(features.iter().map(|f| f.name.clone()).collect::<Vec<_>>());
        Ok(ExampleParser { features, names, sequence: None })
    }

    /// The parser of `parse_sequence_example()` of `fields`: the context features as
    /// `parse_example` reads them, the feature lists step by step.
    pub fn sequence(fields: &[FieldType], schema: &[FieldDecl]) -> Result<ExampleParser, String> {
        let is_list = |f: &FieldType| schema.iter().any(|d| d.name == f.name && d.sequence);
        let context: Vec<FieldType> = fields.iter().filter(|f| !is_list(f)).cloned().collect();
        let mut p = ExampleParser::new(&context, schema)?;
        p.sequence = Some(Box::new(crate::sequence::Lists::new(fields, schema)?));
        p.names = Arc::from(fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>());
        Ok(p)
    }

    /// The record's fields.
    pub fn parse(&self, record: &[u8]) -> Result<Row, BoxError> {
        if let Some(lists) = &self.sequence {
            return lists.parse(self, record);
        }
        let mut entries = vec![None; self.features.len()];
        for entry in ExampleView::new(record).entries() {
            let entry = entry.map_err(parse::malformed)?;
            if let Some(i) = self.features.iter().position(|f| f.name == entry.name()) {
                entries[i] = Some(entry);
            }
        }
        Ok(Row { names: self.names.clone(), values: self.decode(entries)? })
    }

    /// The context features' names, in order.
    pub(crate) fn feature_names(&self) -> impl Iterator<Item = &str> {
        self.features.iter().map(|f| f.name.as_str())
    }

    /// The values of the features from their entries (one slot a feature, in order).
    pub(crate) fn decode(&self, entries: Vec<Option<parse::Entry<'_>>>) -> Result<Vec<Value>, BoxError> {
        let mut values = Vec::with_capacity(self.features.len());
        for (f, e) in self.features.iter().zip(entries) {
            let name = f.name.as_str();
            macro_rules! typed {
                ($t:ty, $variant:ident) => {{
                    let default: Option<&[$t]> = match &f.default {
                        Some(Data::$variant(v)) => Some(v.as_slice()),
                        _ => None,
                    };
                    match (&f.ty.shape, &f.fixed) {
                        (Shape::Var, _) => {
                            let mut v: Vec<$t> = Vec::new();
                            let n = parse::var::<$t>(name, e, default, &mut v)?;
                            Value { data: Data::$variant(v), shape: vec![n], kind: Kind::List }
                        }
                        (_, Some((n, dims))) => {
                            let mut v: Vec<$t> = Vec::with_capacity(*n);
                            parse::fixed::<$t>(name, e, *n, default, &mut v)?;
                            Value { data: Data::$variant(v), shape: dims.clone(), kind: Kind::Tensor }
                        }
                        (_, None) => {
                            let d = default.and_then(|d| d.first().copied());
                            Value::scalar(Data::$variant(vec![parse::scalar::<$t>(name, e, d)?]))
                        }
                    }
                }};
            }
            values.push(match f.ty.dtype {
                DType::Bool => typed!(bool, Bool),
                DType::U8 => typed!(u8, U8),
                DType::I32 => typed!(i32, I32),
                DType::U32 => typed!(u32, U32),
                DType::I64 => typed!(i64, I64),
                DType::U64 => typed!(u64, U64),
                DType::F32 => typed!(f32, F32),
                DType::F64 => typed!(f64, F64),
                DType::Bytes => {
                    let d = match &f.default {
                        Some(Data::Bytes(b)) => b.first().map(Vec::as_slice),
                        _ => None,
                    };
                    Value::scalar(Data::Bytes(vec![parse::bytes(name, e, d)?.to_vec()]))
                }
                DType::Str => {
                    let d = match &f.default {
                        Some(Data::Str(s)) => s.first().map(String::as_str),
                        _ => None,
                    };
                    Value::scalar(Data::Str(vec![parse::text(name, e, d)?]))
                }
                DType::F16 | DType::Bf16 => return Err(format!("`{name}`: half floats").into()),
            });
        }
        Ok(values)
    }
}

/// A schema default (one value, or a list of them) as values of `dtype`, converted as the
/// generated parser's literals are (`(literal as T)`).
pub(crate) fn default_of(v: &Literal, dtype: DType) -> Result<Data, String> {
    let items: Vec<&Literal> = match v {
        Literal::List(items) => items.iter().collect(),
        v => vec![v],
    };
    match dtype {
        DType::Bytes => items
            .iter()
            .map(|v| match v {
                Literal::Str(s) => Ok(s.as_bytes().to_vec()),
                other => Err(format!("`{other}` for bytes")),
            })
            .collect::<Result<_, _>>()
            .map(Data::Bytes),
        DType::Str => items
            .iter()
            .map(|v| match v {
                Literal::Str(s) => Ok(s.clone()),
                other => Err(format!("`{other}` for a string")),
            })
            .collect::<Result<_, _>>()
            .map(Data::Str),
        _ => {
            let nums: Vec<Num> = items
                .iter()
                .map(|v| match v {
                    Literal::Int(n) => Ok(Num::I64(*n)),
                    Literal::UInt(n) => Ok(Num::U64(*n)),
                    Literal::Float(x) => Ok(Num::F64(*x)),
                    Literal::Bool(b) => Ok(Num::Bool(*b)),
                    other => Err(format!("`{other}` for a number")),
                })
                .collect::<Result<_, _>>()?;
            Num::collect(dtype, &nums)
        }
    }
}

impl ExampleParser {
    /// The records of `batch` parsed straight into the batch's columns, as the generated
    /// parser of a map + batch writes them: the same values and errors as [`parse`]
    /// row by row (an error names the record's file and index), without a row per
    /// record. `None` when a feature is a list (its batch is refused anyway).
    ///
    /// [`parse`]: ExampleParser::parse
    pub fn parse_batch(&self, batch: &RecordBatch) -> Result<Option<Columns>, BoxError> {
        if self.sequence.is_some() || self.features.iter().any(|f| f.ty.shape == Shape::Var) {
            return Ok(None);
        }
        let rows = batch.len();
        // The rows, split across the pipeline's pool when every column has a fixed size
        // (as the generated parser's `parse_rows_*`) and its CPU budget allows.
        let splits = self.features.iter().all(|f| sluice_compiler::ir::fusion::fixed_column(&f.ty));
        let columns = crate::value::columns_of_rows(rows, splits, |range, room| {
            let mut columns: Vec<Data> = self
                .features
                .iter()
                .map(|f| {
                    let n = room * f.fixed.as_ref().map_or(1, |(n, _)| *n);
                    Data::with_capacity(f.ty.dtype, n)
                })
                .collect::<Result<_, _>>()?;
            let mut entries = vec![None; self.features.len()];
            for i in range {
                let record = batch.get(i).ok_or("a record past the batch's end")?;
                self.parse_into(record, &mut entries, &mut columns)
                    .map_err(|e| sluice_runtime::abi::located(batch.origin(i), e))?;
            }
            Ok(columns)
        })?;
        let columns = self
            .features
            .iter()
            .zip(columns)
            .map(|(f, data)| {
                let mut shape = vec![rows];
                let kind = match &f.fixed {
                    Some((_, dims)) => {
                        shape.extend(dims);
                        Kind::Tensor
                    }
                    None => Kind::Tensor,
                };
                Value { data, shape, kind }
            })
            .collect();
        Ok(Some(Columns { names: self.names.clone(), columns, rows }))
    }

    /// One record's features appended to `columns` (`entries`: scratch, one slot a
    /// feature).
    fn parse_into<'a>(
        &self,
        record: &'a [u8],
        entries: &mut [Option<parse::Entry<'a>>],
        columns: &mut [Data],
    ) -> Result<(), BoxError> {
        entries.iter_mut().for_each(|e| *e = None);
        for entry in ExampleView::new(record).entries() {
            let entry = entry.map_err(parse::malformed)?;
            if let Some(i) = self.features.iter().position(|f| f.name == entry.name()) {
                entries[i] = Some(entry);
            }
        }
        for ((f, e), column) in self.features.iter().zip(entries.iter_mut()).zip(columns) {
            let (name, e) = (f.name.as_str(), e.take());
            macro_rules! typed {
                ($t:ty, $variant:ident, $v:ident) => {{
                    let default: Option<&[$t]> = match &f.default {
                        Some(Data::$variant(v)) => Some(v.as_slice()),
                        _ => None,
                    };
                    match &f.fixed {
                        Some((n, _)) => parse::fixed::<$t>(name, e, *n, default, $v)?,
                        None => {
                            $v.push(parse::scalar::<$t>(name, e, default.and_then(|d| d.first().copied()))?)
                        }
                    }
                }};
            }
            match column {
                Data::Bool(v) => typed!(bool, Bool, v),
                Data::U8(v) => typed!(u8, U8, v),
                Data::I32(v) => typed!(i32, I32, v),
                Data::U32(v) => typed!(u32, U32, v),
                Data::I64(v) => typed!(i64, I64, v),
                Data::U64(v) => typed!(u64, U64, v),
                Data::F32(v) => typed!(f32, F32, v),
                Data::F64(v) => typed!(f64, F64, v),
                Data::Bytes(v) => {
                    let d = match &f.default {
                        Some(Data::Bytes(b)) => b.first().map(Vec::as_slice),
                        _ => None,
                    };
                    v.push(parse::bytes(name, e, d)?.to_vec());
                }
                Data::Str(v) => {
                    let d = match &f.default {
                        Some(Data::Str(s)) => s.first().map(String::as_str),
                        _ => None,
                    };
                    v.push(parse::text(name, e, d)?);
                }
            }
        }
        Ok(())
    }
}

impl ExampleParser {
    /// The fields it makes, in order.
    pub fn names(&self) -> &Names {
        &self.names
    }
}

#[cfg(test)]
mod tests {
    use sluice_runtime::abi::export::ToExample;

    use super::*;
    use crate::value::Item;

    /// A record of `x: f32[2]`, `label: i64` (left out when `None`) and `tag: bytes`.
    fn record(x: [f32; 2], label: Option<i64>, tag: &[u8]) -> Vec<u8> {
        let mut names = vec!["x".to_string(), "tag".to_string()];
        let mut values = vec![
            Value { data: Data::F32(x.to_vec()), shape: vec![2], kind: Kind::Tensor },
            Value::scalar(Data::Bytes(vec![tag.to_vec()])),
        ];
        if let Some(l) = label {
            names.push("label".into());
            values.push(Value::scalar(Data::I64(vec![l])));
        }
        let mut out = Vec::new();
        Item::Row(Row { names: Arc::from(names), values }).to_example(&mut out).unwrap();
        out
    }

    fn parser() -> ExampleParser {
        let c = sluice_compiler::compile(
            "pipeline p(files: glob) { schema { x: f32[2], label: i64, tag: bytes } \
             tfrecords(files); batch(4); map { parse_example(); } }",
        );
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let p = &c.pipelines[0];
        let fields =
            p.decls.schema.iter().map(|d| FieldType { name: d.name.clone(), ty: Some(d.ty.clone()) });
        ExampleParser::new(&fields.collect::<Vec<_>>(), &p.decls.schema).unwrap()
    }

    #[test]
    fn a_batch_parses_into_the_columns_its_rows_make() {
        let p = parser();
        let mut batch = RecordBatch::default();
        for i in 0..5 {
            batch.push(&record([i as f32, -0.5], Some(i * 10), format!("t{i}").as_bytes()));
        }
        let columns = p.parse_batch(&batch).unwrap().unwrap();
        let rows: Vec<Row> = batch.iter().map(|r| p.parse(r).unwrap()).collect();
        assert_eq!(columns, Columns::from_rows(p.names().clone(), rows).unwrap());
        assert_eq!((columns.rows, &columns.columns[0].shape[..]), (5, &[5, 2][..]));

        // A record without `label`: the row path's error.
        batch.push(&record([1.0, 2.0], None, b"x"));
        let row_error = p.parse(batch.get(5).unwrap()).unwrap_err().to_string();
        assert_eq!(p.parse_batch(&batch).unwrap_err().to_string(), row_error);
        assert!(row_error.contains("label"), "{row_error}");
    }
}
