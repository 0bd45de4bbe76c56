//! Spec-driven parsing of serialized `tf.train.Example`s straight into batch columns:
//! the runtime's `tf.io.parse_example`, and the generic parser that generated,
//! schema-specialized parsers are measured against and fall back to.
//!
//! A [`ParseSpec`] declares features (name, [`DType`], [`Shape`], optional default). An
//! [`ExampleParser`] walks each record once with the zero-copy [`view`]
//! walker, matches entry names against the declared names (no hashing or allocation per
//! record), looks into the values of declared features only, and appends them to the
//! [`Columns`] of a batch:
//!
//! - `Fixed(shape)`: exactly `prod(shape)` values per record, dense;
//! - `Var`: any number of values per record, plus `row_splits` (`rows + 1` offsets into
//!   the values, starting at 0, as a `tf.RaggedTensor`'s);
//! - bytes: one contiguous `data` buffer and `offsets` (`values + 1`, starting at 0).
//!
//! Semantics follow TensorFlow's `parse_example`: a missing feature takes its default
//! (an error if it has none); a feature with no kind set counts as present with zero
//! values of any type; a list of the wrong type is an error. When several entries
//! share a name the last one counts (protobuf map semantics). A failed record leaves the
//! columns as they were before it.

use std::fmt;
use std::mem::size_of;

use super::view::{self, EntryLoc, ExampleView, FeatureView, WireError};
use crate::stage::Element;

/// The value type of a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `float_list`, parsed as `f32`.
    F32,
    /// `int64_list`, parsed as `i64`.
    I64,
    /// `bytes_list`, parsed as byte strings.
    Bytes,
}

impl DType {
    /// The name of the matching `tf.train.Feature` list.
    pub fn list_name(self) -> &'static str {
        match self {
            DType::F32 => "float_list",
            DType::I64 => "int64_list",
            DType::Bytes => "bytes_list",
        }
    }

    /// [`list_name`](Self::list_name) with its article, as an error message says it ("an
    /// int64_list").
    pub fn a_list(self) -> &'static str {
        match self {
            DType::F32 => "a float_list",
            DType::I64 => "an int64_list",
            DType::Bytes => "a bytes_list",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::I64 => "i64",
            DType::Bytes => "bytes",
        })
    }
}

/// The shape of one record's value of a feature.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A dense tensor of this shape (`[]` is a scalar): exactly the product of the
    /// dimensions values per record.
    Fixed(Vec<usize>),
    /// Any number of values per record (`tf.io.VarLenFeature`, as a ragged column).
    Var,
}

/// The values a missing feature takes.
#[derive(Debug, Clone, PartialEq)]
pub enum DefaultValue {
    /// Float values.
    F32(Vec<f32>),
    /// Int64 values.
    I64(Vec<i64>),
    /// Byte strings.
    Bytes(Vec<Vec<u8>>),
}

impl DefaultValue {
    /// The value type.
    pub fn dtype(&self) -> DType {
        match self {
            DefaultValue::F32(_) => DType::F32,
            DefaultValue::I64(_) => DType::I64,
            DefaultValue::Bytes(_) => DType::Bytes,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            DefaultValue::F32(v) => v.len(),
            DefaultValue::I64(v) => v.len(),
            DefaultValue::Bytes(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An empty list of `dtype`.
    pub fn empty(dtype: DType) -> Self {
        match dtype {
            DType::F32 => DefaultValue::F32(Vec::new()),
            DType::I64 => DefaultValue::I64(Vec::new()),
            DType::Bytes => DefaultValue::Bytes(Vec::new()),
        }
    }
}

/// One declared feature.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureSpec {
    /// The feature's name in the `Example`'s map.
    pub name: String,
    /// Its value type.
    pub dtype: DType,
    /// Its per-record shape.
    pub shape: Shape,
    /// What a record without the feature gets; `None` makes the feature required.
    pub default: Option<DefaultValue>,
}

impl FeatureSpec {
    /// A required dense feature (`tf.io.FixedLenFeature` without a default).
    pub fn fixed(name: impl Into<String>, dtype: DType, shape: impl Into<Vec<usize>>) -> Self {
        FeatureSpec { name: name.into(), dtype, shape: Shape::Fixed(shape.into()), default: None }
    }

    /// A ragged feature whose absence means no values, as `tf.io.VarLenFeature`.
    pub fn var(name: impl Into<String>, dtype: DType) -> Self {
        FeatureSpec { name: name.into(), dtype, shape: Shape::Var, default: Some(DefaultValue::empty(dtype)) }
    }

    /// The same feature with `default` for records that lack it (`None`: required).
    pub fn with_default(self, default: Option<DefaultValue>) -> Self {
        FeatureSpec { default, ..self }
    }

    /// Values per record for a fixed shape (the product of its dimensions; `None` for
    /// `Var` or when the product overflows).
    pub fn fixed_len(&self) -> Option<usize> {
        match &self.shape {
            Shape::Fixed(dims) => dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)),
            Shape::Var => None,
        }
    }
}

/// The features to parse, in output column order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParseSpec {
    /// The declared features.
    pub features: Vec<FeatureSpec>,
}

impl ParseSpec {
    /// A spec of these features (checked by [`ParseSpec::validate`] when a parser is made).
    pub fn new(features: impl IntoIterator<Item = FeatureSpec>) -> Self {
        ParseSpec { features: features.into_iter().collect() }
    }

    /// Checks that names are unique, fixed shapes have a representable size, and each
    /// default has the feature's type and (for a fixed shape) exactly its size.
    pub fn validate(&self) -> Result<(), SpecError> {
        for (i, f) in self.features.iter().enumerate() {
            if self.features[..i].iter().any(|g| g.name == f.name) {
                return Err(SpecError::DuplicateName { feature: f.name.clone() });
            }
            let fixed = match &f.shape {
                Shape::Fixed(_) => {
                    Some(f.fixed_len().ok_or_else(|| SpecError::ShapeOverflow { feature: f.name.clone() })?)
                }
                Shape::Var => None,
            };
            if let Some(d) = &f.default {
                if d.dtype() != f.dtype {
                    return Err(SpecError::DefaultType {
                        feature: f.name.clone(),
                        expected: f.dtype,
                        actual: d.dtype(),
                    });
                }
                if let Some(n) = fixed.filter(|&n| n != d.len()) {
                    return Err(SpecError::DefaultLength {
                        feature: f.name.clone(),
                        expected: n,
                        actual: d.len(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Why a [`ParseSpec`] is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Two features have the same name.
    #[error("feature `{feature}` is declared twice")]
    DuplicateName {
        /// The name.
        feature: String,
    },
    /// The product of a fixed shape's dimensions does not fit in `usize`.
    #[error("feature `{feature}`: shape is too large")]
    ShapeOverflow {
        /// The feature.
        feature: String,
    },
    /// A default's type is not the feature's.
    #[error("feature `{feature}`: default is {actual} but the feature is {expected}")]
    DefaultType {
        /// The feature.
        feature: String,
        /// The feature's type.
        expected: DType,
        /// The default's type.
        actual: DType,
    },
    /// A fixed-shape feature's default has the wrong number of values.
    #[error("feature `{feature}`: default has {actual} values but the shape needs {expected}")]
    DefaultLength {
        /// The feature.
        feature: String,
        /// Values the shape needs.
        expected: usize,
        /// Values in the default.
        actual: usize,
    },
}

/// Why a record could not be parsed. The caller adds file and record context.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// The record is not a well-formed `tf.train.Example`.
    #[error("malformed tf.train.Example{}: {error}", feature.as_ref().map(|f| format!(" (feature `{f}`)")).unwrap_or_default())]
    Malformed {
        /// The declared feature whose values are malformed, if the damage is there.
        feature: Option<String>,
        /// What is wrong, and where.
        error: WireError,
    },
    /// A required feature is absent.
    #[error("feature `{feature}` is missing and has no default")]
    Missing {
        /// The feature.
        feature: String,
    },
    /// A feature holds a list of another type.
    #[error("feature `{feature}`: expected {} but found {}", expected.a_list(), actual.a_list())]
    WrongKind {
        /// The feature.
        feature: String,
        /// The declared type.
        expected: DType,
        /// The type in the record.
        actual: DType,
    },
    /// A fixed-shape feature has the wrong number of values.
    #[error("feature `{feature}`: expected {expected} values, found {actual}")]
    WrongLength {
        /// The feature.
        feature: String,
        /// Values the shape needs.
        expected: usize,
        /// Values in the record.
        actual: usize,
    },
    /// A value does not fit the declared type (`u8` feature holding 300).
    #[error("feature `{feature}`: value {value} does not fit {dtype}")]
    OutOfRange {
        /// The feature.
        feature: String,
        /// The value in the record.
        value: i64,
        /// The declared type.
        dtype: &'static str,
    },
    /// A `str` feature whose bytes are not UTF-8.
    #[error("feature `{feature}`: not UTF-8 text (invalid byte at offset {at})")]
    NotUtf8 {
        /// The feature.
        feature: String,
        /// Where the first invalid byte is.
        at: usize,
    },
    /// The columns passed in were made for another spec.
    #[error("the output columns were not made by this parser")]
    ColumnsMismatch,
    /// The record is not a well-formed `tf.train.SequenceExample`
    /// (`parse_sequence_example`).
    #[error("malformed tf.train.SequenceExample{}: {error}", feature.as_ref().map(|f| format!(" (feature `{f}`)")).unwrap_or_default())]
    MalformedSequence {
        /// The declared feature (of the context, or a feature list) whose values are
        /// malformed, if the damage is there.
        feature: Option<String>,
        /// What is wrong, and where.
        error: WireError,
    },
    /// A step of a `tf.train.SequenceExample` feature list does not fit its declared
    /// type: the wrong number of values, a list of another kind, a value out of range.
    #[error("feature list `{feature}`, step {step}: {problem}")]
    Step {
        /// The feature list.
        feature: String,
        /// The step (from 0).
        step: usize,
        /// What is wrong.
        problem: String,
    },
}

/// One output column: a batch's values of one feature.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The values of all rows, concatenated.
    pub values: ColumnValues,
    /// For `Var` features, `rows + 1` offsets into the values (counted in values, not
    /// bytes), starting at 0; `None` for fixed shapes, whose rows all hold the same count.
    pub row_splits: Option<Vec<usize>>,
}

/// The values of a column.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValues {
    /// Float values.
    F32(Vec<f32>),
    /// Int64 values.
    I64(Vec<i64>),
    /// Byte strings: value `i` is `data[offsets[i]..offsets[i + 1]]`.
    Bytes {
        /// All byte strings, concatenated.
        data: Vec<u8>,
        /// `values + 1` offsets into `data`, starting at 0.
        offsets: Vec<usize>,
    },
}

impl Column {
    /// An empty column for `dtype`, ragged when `var`.
    pub fn new(dtype: DType, var: bool) -> Self {
        let values = match dtype {
            DType::F32 => ColumnValues::F32(Vec::new()),
            DType::I64 => ColumnValues::I64(Vec::new()),
            DType::Bytes => ColumnValues::Bytes { data: Vec::new(), offsets: vec![0] },
        };
        Column { values, row_splits: var.then(|| vec![0]) }
    }

    /// The float values, if this is an `F32` column.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.values {
            ColumnValues::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The int64 values, if this is an `I64` column.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.values {
            ColumnValues::I64(v) => Some(v),
            _ => None,
        }
    }

    /// Number of values (byte strings count one each).
    pub fn value_count(&self) -> usize {
        match &self.values {
            ColumnValues::F32(v) => v.len(),
            ColumnValues::I64(v) => v.len(),
            ColumnValues::Bytes { offsets, .. } => offsets.len().saturating_sub(1),
        }
    }

    /// Byte string `i`, if this is a bytes column with that many values.
    pub fn bytes_value(&self, i: usize) -> Option<&[u8]> {
        match &self.values {
            ColumnValues::Bytes { data, offsets } => {
                data.get(*offsets.get(i)?..*offsets.get(i.checked_add(1)?)?)
            }
            _ => None,
        }
    }

    /// Keeps the first `values` values.
    fn truncate_values(&mut self, values: usize) {
        match &mut self.values {
            ColumnValues::F32(v) => v.truncate(values),
            ColumnValues::I64(v) => v.truncate(values),
            ColumnValues::Bytes { data, offsets } => {
                offsets.truncate(values.saturating_add(1));
                data.truncate(offsets.last().copied().unwrap_or(0));
            }
        }
    }

    /// Closes a row of a ragged column.
    #[inline]
    fn end_row(&mut self) {
        let n = self.value_count();
        if let Some(splits) = &mut self.row_splits {
            splits.push(n);
        }
    }
}

/// The output of an [`ExampleParser`] for a batch: one [`Column`] per declared
/// feature, in spec order, plus the parser's per-record scratch (reused, so parsing
/// allocates only when a column grows).
#[derive(Debug, Clone)]
pub struct Columns {
    columns: Vec<Column>,
    rows: usize,
    layout: Vec<Layout>,
    found: Vec<Option<EntryLoc>>,
}

impl PartialEq for Columns {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows && self.columns == other.columns
    }
}

impl Columns {
    /// Rows (records) parsed so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The columns, in spec order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Column `i`.
    pub fn column(&self, i: usize) -> Option<&Column> {
        self.columns.get(i)
    }

    /// Takes the columns out.
    pub fn into_columns(self) -> Vec<Column> {
        self.columns
    }

    /// Empties every column, keeping its capacity for the next batch.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps the first `rows` rows.
    pub fn truncate(&mut self, rows: usize) {
        let rows = rows.min(self.rows);
        for (col, layout) in self.columns.iter_mut().zip(&self.layout) {
            let values = match (layout.fixed, &mut col.row_splits) {
                (Some(n), _) => rows.saturating_mul(n),
                (None, Some(splits)) => {
                    splits.truncate(rows + 1);
                    splits.last().copied().unwrap_or(0)
                }
                (None, None) => 0,
            };
            col.truncate_values(values);
        }
        self.rows = rows;
    }
}

impl Element for Columns {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        let col = |c: &Column| {
            let values = match &c.values {
                ColumnValues::F32(v) => v.len() * size_of::<f32>(),
                ColumnValues::I64(v) => v.len() * size_of::<i64>(),
                ColumnValues::Bytes { data, offsets } => data.len() + offsets.len() * size_of::<usize>(),
            };
            size_of::<Column>() + values + c.row_splits.as_ref().map_or(0, |s| s.len() * size_of::<usize>())
        };
        size_of::<Self>() + self.columns.iter().map(col).sum::<usize>()
    }
}

/// What the parser and its columns agree on for each feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    dtype: DType,
    /// Values per record for fixed shapes.
    fixed: Option<usize>,
}

/// Above this many declared features, names are found through a hash table instead of
/// a linear scan.
const LINEAR_LOOKUP_MAX: usize = 8;

/// Finds a declared feature by name.
#[derive(Debug, Clone)]
enum Lookup {
    /// Compare against each declared name (lengths first, so mostly one comparison).
    Linear,
    /// Open addressing over FNV-1a hashes: `slots` hold feature index + 1, 0 is empty.
    Hashed { slots: Vec<u32>, mask: usize },
}

fn fnv1a(bytes: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h as usize
}

/// Parses serialized `tf.train.Example`s by a [`ParseSpec`] into [`Columns`]. Immutable
/// while parsing, so one parser can serve many threads, each with its own columns.
#[derive(Debug, Clone)]
pub struct ExampleParser {
    spec: ParseSpec,
    layout: Vec<Layout>,
    lookup: Lookup,
}

impl ExampleParser {
    /// A parser for `spec`, which must be valid.
    pub fn new(spec: ParseSpec) -> Result<Self, SpecError> {
        spec.validate()?;
        let layout = spec.features.iter().map(|f| Layout { dtype: f.dtype, fixed: f.fixed_len() }).collect();
        let n = spec.features.len();
        let lookup = if n <= LINEAR_LOOKUP_MAX {
            Lookup::Linear
        } else {
            let size = (2 * n).next_power_of_two();
            let mask = size - 1;
            let mut slots = vec![0u32; size];
            for (i, f) in spec.features.iter().enumerate() {
                let mut s = fnv1a(f.name.as_bytes()) & mask;
                while slots[s] != 0 {
                    s = (s + 1) & mask;
                }
                slots[s] = i as u32 + 1;
            }
            Lookup::Hashed { slots, mask }
        };
        Ok(ExampleParser { spec, layout, lookup })
    }

    /// The spec.
    pub fn spec(&self) -> &ParseSpec {
        &self.spec
    }

    /// Empty output columns for this parser's spec.
    pub fn columns(&self) -> Columns {
        Columns {
            columns: self.spec.features.iter().map(|f| Column::new(f.dtype, f.shape == Shape::Var)).collect(),
            rows: 0,
            layout: self.layout.clone(),
            found: vec![None; self.spec.features.len()],
        }
    }

    #[inline]
    fn find(&self, name: &str) -> Option<usize> {
        let name = name.as_bytes();
        match &self.lookup {
            Lookup::Linear => self.spec.features.iter().position(|f| f.name.as_bytes() == name),
            Lookup::Hashed { slots, mask } => {
                let mut s = fnv1a(name) & mask;
                loop {
                    let i = (*slots.get(s)? as usize).checked_sub(1)?;
                    if self.spec.features.get(i)?.name.as_bytes() == name {
                        return Some(i);
                    }
                    s = (s + 1) & mask;
                }
            }
        }
    }

    /// Parses one record and appends it as a row of `out`. On error `out` is left as
    /// it was.
    pub fn parse_into(&self, record: &[u8], out: &mut Columns) -> Result<(), ParseError> {
        if out.layout != self.layout || out.found.len() != self.layout.len() {
            return Err(ParseError::ColumnsMismatch);
        }
        out.found.fill(None);
        for entry in ExampleView::new(record).entries() {
            let entry = entry.map_err(|error| ParseError::Malformed { feature: None, error })?;
            if let Some(slot) = self.find(entry.name()).and_then(|i| out.found.get_mut(i)) {
                *slot = Some(entry.loc());
            }
        }
        let mut result = Ok(());
        for ((spec, found), col) in self.spec.features.iter().zip(&out.found).zip(&mut out.columns) {
            result = write_feature(spec, record, *found, col);
            if result.is_err() {
                break;
            }
        }
        match result {
            Ok(()) => {
                out.rows += 1;
                Ok(())
            }
            Err(e) => {
                let rows = out.rows;
                // Every column up to the failing one may hold part of this row.
                out.rows += 1;
                out.truncate(rows);
                Err(e)
            }
        }
    }

    /// Parses a record into fresh columns holding just that row (a convenience for
    /// tests and one-off use; batches should reuse one [`Columns`]).
    pub fn parse_one(&self, record: &[u8]) -> Result<Columns, ParseError> {
        let mut out = self.columns();
        self.parse_into(record, &mut out)?;
        Ok(out)
    }
}

/// Appends one record's value of one feature to its column.
#[inline]
fn write_feature(
    spec: &FeatureSpec,
    record: &[u8],
    found: Option<EntryLoc>,
    col: &mut Column,
) -> Result<(), ParseError> {
    let Some(range) = found else {
        let Some(default) = &spec.default else {
            return Err(ParseError::Missing { feature: spec.name.clone() });
        };
        match (default, &mut col.values) {
            (DefaultValue::F32(d), ColumnValues::F32(v)) => v.extend_from_slice(d),
            (DefaultValue::I64(d), ColumnValues::I64(v)) => v.extend_from_slice(d),
            (DefaultValue::Bytes(d), ColumnValues::Bytes { data, offsets }) => {
                for b in d {
                    data.extend_from_slice(b);
                    offsets.push(data.len());
                }
            }
            _ => return Err(ParseError::ColumnsMismatch),
        }
        col.end_row();
        return Ok(());
    };
    let feature = view::feature_at(record, range)
        .map_err(|error| ParseError::Malformed { feature: Some(spec.name.clone()), error })?;
    let actual = match feature {
        FeatureView::None => None,
        FeatureView::Floats(_) => Some(DType::F32),
        FeatureView::Int64s(_) => Some(DType::I64),
        FeatureView::Bytes(_) => Some(DType::Bytes),
    };
    if let Some(actual) = actual.filter(|&a| a != spec.dtype) {
        return Err(ParseError::WrongKind { feature: spec.name.clone(), expected: spec.dtype, actual });
    }
    if let Shape::Fixed(_) = spec.shape {
        let expected = spec.fixed_len().unwrap_or(usize::MAX);
        if feature.len() != expected {
            return Err(ParseError::WrongLength {
                feature: spec.name.clone(),
                expected,
                actual: feature.len(),
            });
        }
    }
    match (feature, &mut col.values) {
        (FeatureView::None, _) => {}
        (FeatureView::Floats(f), ColumnValues::F32(v)) => f.extend_into(v),
        (FeatureView::Int64s(f), ColumnValues::I64(v)) => f.extend_into(v),
        (FeatureView::Bytes(f), ColumnValues::Bytes { data, offsets }) => {
            offsets.reserve(f.len());
            for b in f.iter() {
                data.extend_from_slice(b);
                offsets.push(data.len());
            }
        }
        _ => return Err(ParseError::ColumnsMismatch),
    }
    col.end_row();
    Ok(())
}
