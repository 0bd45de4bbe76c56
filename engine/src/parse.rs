//! `parse_example()` with the schema known only at run time: each declared feature read
//! from the record's `tf.train.Example` through the same helpers the generated parser
//! calls (`abi::parse::{fixed, var, scalar, bytes, text}`), so values and errors are
//! the compiled pipeline's.

use std::sync::Arc;

use sluice_compiler::ir::decls::FieldDecl;
use sluice_compiler::ir::plan::FieldType;
use sluice_compiler::ir::types::{DType, Dim, Shape, TensorType};
use sluice_runtime::BoxError;
use sluice_runtime::abi::parse::{self, ExampleView};

use crate::value::{Data, Kind, Names, Row, Value};

/// One feature to parse.
#[derive(Debug, Clone)]
struct Feature {
    name: String,
    ty: TensorType,
    /// The values of a fixed shape (`None`: a scalar or a list).
    fixed: Option<(usize, Vec<usize>)>,
}

/// A `parse_example` of a schema's fields.
#[derive(Debug, Clone)]
pub struct ExampleParser {
    features: Vec<Feature>,
    names: Names,
}

impl ExampleParser {
    /// The parser of `fields` (typed by sema); refuses what the engine does not parse yet
    /// (defaults, sequence features, named dimensions, half floats, lists of byte
    /// strings).
    pub fn new(fields: &[FieldType], schema: &[FieldDecl]) -> Result<ExampleParser, String> {
        let mut features = Vec::new();
        for f in fields {
            let ty = f.ty.clone().ok_or_else(|| format!("field `{}` has no type", f.name))?;
            if let Some(d) = schema.iter().find(|d| d.name == f.name)
                && (d.default.is_some() || d.sequence)
            {
                return Err(format!("`parse_example` of feature `{}` with a default or a sequence", f.name));
            }
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
            features.push(Feature { name: f.name.clone(), ty, fixed });
        }
        let names: Names = Arc::from(features.iter().map(|f| f.name.clone()).collect::<Vec<_>>());
        Ok(ExampleParser { features, names })
    }

    /// The record's fields.
    pub fn parse(&self, record: &[u8]) -> Result<Row, BoxError> {
        let mut entries = vec![None; self.features.len()];
        for entry in ExampleView::new(record).entries() {
            let entry = entry.map_err(parse::malformed)?;
            if let Some(i) = self.features.iter().position(|f| f.name == entry.name()) {
                entries[i] = Some(entry);
            }
        }
        let mut values = Vec::with_capacity(self.features.len());
        for (f, e) in self.features.iter().zip(entries) {
            let name = f.name.as_str();
            macro_rules! typed {
                ($t:ty, $variant:ident) => {
                    match (&f.ty.shape, &f.fixed) {
                        (Shape::Var, _) => {
                            let mut v: Vec<$t> = Vec::new();
                            let n = parse::var::<$t>(name, e, None, &mut v)?;
                            Value { data: Data::$variant(v), shape: vec![n], kind: Kind::List }
                        }
                        (_, Some((n, dims))) => {
                            let mut v: Vec<$t> = Vec::with_capacity(*n);
                            parse::fixed::<$t>(name, e, *n, None, &mut v)?;
                            Value { data: Data::$variant(v), shape: dims.clone(), kind: Kind::Tensor }
                        }
                        (_, None) => Value::scalar(Data::$variant(vec![parse::scalar::<$t>(name, e, None)?])),
                    }
                };
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
                DType::Bytes => Value::scalar(Data::Bytes(vec![parse::bytes(name, e, None)?.to_vec()])),
                DType::Str => Value::scalar(Data::Str(vec![parse::text(name, e, None)?])),
                DType::F16 | DType::Bf16 => return Err(format!("`{name}`: half floats").into()),
            });
        }
        Ok(Row { names: self.names.clone(), values })
    }
}
