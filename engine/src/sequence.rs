//! `parse_sequence_example()` with the schema known only at run time, as the generated
//! parser (`compiler/src/codegen/sequence.rs`) reads a `tf.train.SequenceExample`: the
//! context's map walked once and its declared features decoded as `parse_example`
//! decodes them (errors through `abi::parse::in_sequence_boxed`), then the feature
//! lists' map walked once and each declared list decoded step by step
//! (`abi::parse::steps`): `T[]` one value a step, `T[steps, d, ...]` a tensor; lists that
//! name the same steps dimension must have as many steps.

use sluice_compiler::ir::decls::FieldDecl;
use sluice_compiler::ir::plan::FieldType;
use sluice_compiler::ir::types::{DType, Dim, Shape};
use sluice_runtime::BoxError;
use sluice_runtime::abi::parse::{self, SequenceView};

use crate::parse::ExampleParser;
use crate::value::{Data, Kind, Row, Value};

/// One feature list.
#[derive(Debug, Clone)]
struct List {
    name: String,
    dtype: DType,
    /// Values a step.
    width: usize,
    /// The fixed dimensions after the steps (`None`: `T[]`, a list).
    dims: Option<Vec<usize>>,
    /// The name of its steps dimension.
    steps: Option<String>,
}

/// The feature lists of a `parse_sequence_example`, and where each field comes from.
#[derive(Debug, Clone)]
pub struct Lists {
    lists: Vec<List>,
    /// For each output field in order: a feature list (its index) or a context feature.
    from: Vec<Source>,
}

#[derive(Debug, Clone, Copy)]
enum Source {
    Context,
    List(usize),
}

impl Lists {
    /// The feature lists among `fields`; refuses what the engine does not parse.
    pub fn new(fields: &[FieldType], schema: &[FieldDecl]) -> Result<Lists, String> {
        let (mut lists, mut from) = (Vec::new(), Vec::new());
        for f in fields {
            if !schema.iter().any(|d| d.name == f.name && d.sequence) {
                from.push(Source::Context);
                continue;
            }
            let ty = f.ty.clone().ok_or_else(|| format!("field `{}` has no type", f.name))?;
            if !ty.dtype.is_native() {
                return Err(format!("`parse_sequence_example` of `{}: {ty}`", f.name));
            }
            let (width, dims, steps) = match &ty.shape {
                Shape::Var => (1, None, None),
                Shape::Dims(d) => match d.split_first() {
                    Some((Dim::Named(steps), rest)) => {
                        let dims: Option<Vec<usize>> = rest
                            .iter()
                            .map(|d| match d {
                                Dim::Fixed(n) => Some(*n as usize),
                                Dim::Named(_) => None,
                            })
                            .collect();
                        let dims =
                            dims.ok_or_else(|| format!("`parse_sequence_example` of `{}: {ty}`", f.name))?;
                        (dims.iter().product(), Some(dims), Some(steps.clone()))
                    }
                    _ => return Err(format!("`parse_sequence_example` of `{}: {ty}`", f.name)),
                },
            };
            from.push(Source::List(lists.len()));
            lists.push(List { name: f.name.clone(), dtype: ty.dtype, width, dims, steps });
        }
        Ok(Lists { lists, from })
    }

    /// The fields of one record; `context` parses the context features.
    pub fn parse(&self, context: &ExampleParser, record: &[u8]) -> Result<Row, BoxError> {
        let view = SequenceView::new(record);
        let names: Vec<&str> = context.feature_names().collect();
        let mut entries = vec![None; names.len()];
        for entry in view.context() {
            let entry = entry.map_err(parse::malformed_sequence)?;
            if let Some(i) = names.iter().position(|n| *n == entry.name()) {
                entries[i] = Some(entry);
            }
        }
        let mut context_values = context.decode(entries).map_err(parse::in_sequence_boxed)?.into_iter();
        let mut found = vec![None; self.lists.len()];
        for entry in view.feature_lists() {
            let entry = entry.map_err(parse::malformed_sequence)?;
            if let Some(i) = self.lists.iter().position(|l| l.name == entry.name()) {
                found[i] = Some(entry);
            }
        }
        let mut lists: Vec<Option<Value>> = vec![None; self.lists.len()];
        // The first list of each steps dimension, by index.
        let mut firsts: Vec<usize> = Vec::new();
        for (i, (l, entry)) in self.lists.iter().zip(found).enumerate() {
            macro_rules! steps {
                ($t:ty, $variant:ident) => {{
                    let mut v: Vec<$t> = Vec::new();
                    let n = parse::steps::<$t>(&l.name, entry, l.width, &mut v)?;
                    (Data::$variant(v), n)
                }};
            }
            let (data, n) = match l.dtype {
                DType::Bool => steps!(bool, Bool),
                DType::U8 => steps!(u8, U8),
                DType::I32 => steps!(i32, I32),
                DType::U32 => steps!(u32, U32),
                DType::I64 => steps!(i64, I64),
                DType::U64 => steps!(u64, U64),
                DType::F32 => steps!(f32, F32),
                DType::F64 => steps!(f64, F64),
                other => return Err(format!("a feature list of {other}").into()),
            };
            let value = match &l.dims {
                None => Value { data, shape: vec![n], kind: Kind::List },
                Some(dims) => {
                    let mut shape = vec![n];
                    shape.extend(dims);
                    Value { data, shape, kind: Kind::Tensor }
                }
            };
            if let Some(steps) = &l.steps {
                match firsts.iter().find(|&&f| self.lists[f].steps.as_ref() == Some(steps)) {
                    None => firsts.push(i),
                    Some(&f) => {
                        let (a, b) = (lists[f].as_ref().map_or(0, |v| v.shape[0]), value.shape[0]);
                        if a != b {
                            return Err(format!(
                                "feature lists `{}` and `{}` share dimension `{steps}` but have {a} and {b} steps",
                                self.lists[f].name, l.name
                            )
                            .into());
                        }
                    }
                }
            }
            lists[i] = Some(value);
        }
        let mut values = Vec::with_capacity(self.from.len());
        for s in &self.from {
            values.push(match s {
                Source::Context => context_values.next().ok_or("a context feature")?,
                Source::List(i) => lists[*i].take().ok_or("a feature list")?,
            });
        }
        Ok(Row { names: context.names().clone(), values })
    }
}
