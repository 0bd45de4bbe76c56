//! The operations of a `map` ([`MapOp`]): parsing a record into fields and assigning a
//! typed value to a field, the element type each gives, and their `explain` keys.

use super::element::{Element, FieldType};
use super::expr::Expr;
use super::formats::ParseFormat;
use super::op::Op;
use super::types::TensorType;

/// One operation of a `map`, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum MapOp {
    /// Decode the record into fields: a `tf.train.Example` into the schema's fields
    /// (`parse_example`), a line of text into `line: str`, a CSV row into the schema's columns.
    Parse {
        /// How the record is read.
        format: ParseFormat,
        /// The fields parsed (all of the schema, until `prune_fields` narrows them).
        fields: Vec<FieldType>,
    },
    /// `target = value`: the typed value, assigned to a field.
    Assign {
        /// The field written.
        target: String,
        /// The value.
        value: Expr,
        /// The value's type (the field's type after the assignment).
        ty: TensorType,
        /// The fields the value reads.
        reads: Vec<String>,
    },
}

/// The keys every map-like node starts with: its operations and what it parses.
pub(super) fn map_pairs(ops: &[MapOp]) -> Vec<(&'static str, String)> {
    let fns: Vec<String> = ops
        .iter()
        .map(|op| match op {
            MapOp::Assign { value, .. } => match value.op().and_then(Op::explain_options) {
                Some(options) => format!("{}({options})", op.name()),
                None => op.name().to_string(),
            },
            MapOp::Parse { .. } => op.name().to_string(),
        })
        .collect();
    let mut pairs = vec![("fns", format!("[{}]", fns.join(", ")))];
    pairs.extend(parses(ops));
    pairs
}

/// `parses=[...]`: the features a map's `parse_example` decodes (what `prune_fields`
/// narrows), when it has one.
pub(super) fn parses(ops: &[MapOp]) -> Option<(&'static str, String)> {
    ops.iter().find_map(|op| match op {
        MapOp::Parse { fields, .. } => {
            let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            Some(("parses", format!("[{}]", names.join(", "))))
        }
        MapOp::Assign { .. } => None,
    })
}

/// `element` with only `names` kept, in that order (through batches).
pub fn select_fields(element: &Element, names: &[String]) -> Element {
    match element {
        Element::Fields(fields) => Element::Fields(
            names.iter().filter_map(|n| fields.iter().find(|f| &f.name == n).cloned()).collect(),
        ),
        Element::Batch(inner) => Element::Batch(Box::new(select_fields(inner, names))),
        other => other.clone(),
    }
}

/// The element after applying `ops` to `input` in order.
pub fn apply_ops(input: &Element, ops: &[MapOp]) -> Element {
    ops.iter().fold(input.clone(), |e, op| op.apply(&e))
}

impl MapOp {
    /// The element after this operation: `parse_example` makes fields of records (of a
    /// batch of records: a batch of fields); an assignment sets (or adds) its field. On
    /// a batch of batches, each inner batch's rows.
    pub fn apply(&self, element: &Element) -> Element {
        if let Element::Batch(inner) = element
            && matches!(**inner, Element::Batch(_))
        {
            return Element::Batch(Box::new(self.apply(inner)));
        }
        match self {
            MapOp::Parse { fields, .. } => match element {
                Element::Batch(_) => Element::Batch(Box::new(Element::Fields(fields.clone()))),
                _ => Element::Fields(fields.clone()),
            },
            MapOp::Assign { target, ty, .. } => {
                let assign = |fields: &[FieldType]| {
                    let mut fields = fields.to_vec();
                    match fields.iter_mut().find(|f| &f.name == target) {
                        Some(f) => f.ty = Some(ty.clone()),
                        None => fields.push(FieldType { name: target.clone(), ty: Some(ty.clone()) }),
                    }
                    Element::Fields(fields)
                };
                match element {
                    Element::Fields(f) => assign(f),
                    Element::Batch(inner) => match &**inner {
                        Element::Fields(f) => Element::Batch(Box::new(assign(f))),
                        _ => Element::Batch(Box::new(assign(&[]))),
                    },
                    _ => assign(&[]),
                }
            }
        }
    }

    /// Whether the operation works value by value (`cast`, `scale`, `normalize`,
    /// arithmetic): the same on a row as on a whole batch column.
    pub fn is_elementwise(&self) -> bool {
        matches!(self, MapOp::Assign { value, .. } if value.is_elementwise())
    }

    /// Whether the operation draws random numbers (`random_crop`, `random_flip`): its
    /// result depends on the element's position and epoch, not only on its value.
    pub fn is_random(&self) -> bool {
        matches!(self, MapOp::Assign { value, .. } if value.is_random())
    }

    /// Its name in `explain`: the operation called, or `expr` for anything else.
    pub fn name(&self) -> &str {
        match self {
            MapOp::Parse { format: ParseFormat::Example, .. } => "parse_example",
            MapOp::Parse { format: ParseFormat::Line, .. } => "parse_line",
            MapOp::Parse { format: ParseFormat::Csv, .. } => "parse_csv",
            MapOp::Parse { format: ParseFormat::Table, .. } => "parse_parquet",
            MapOp::Parse { format: ParseFormat::SequenceExample, .. } => "parse_sequence_example",
            MapOp::Assign { value, .. } => value.op().map_or("expr", Op::name),
        }
    }
}
