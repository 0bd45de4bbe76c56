//! `flat_map { SOURCE; STAGE; ... }` (tf.data's `Dataset.flat_map`): for each input
//! element, a chain of stages over a source made from that element's fields, whose
//! elements come out in order before the next input element is read. The node holds
//! the inner chain as a plan of its own ([`FlatMap::inner`]) whose source is an
//! [`InnerSource`]: `range(start, end, step, keep: [c])` with bounds computed from the
//! element's fields, or `slices(a, b, keep: [c])`, the rows of list or tensor fields
//! (tf.data's `from_tensor_slices`); both repeat the `keep` fields of the element into
//! each of theirs, the way a tf.data lambda's inner chain reads the outer element.
//!
//! `explain` prints the inner chain under the node, between braces, one level deeper:
//!
//! ```text
//! FlatMap: -> {value: i64}
//!   {
//!     Map: fns=[expr], parallel=1, deterministic=true -> {value: i64}
//!       InnerRange: start=0, end=n, step=1 -> {value: i64}
//!   }
//!   Range: start=1, end=8, step=1 -> {value: i64}
//! ```

use std::fmt::Write;

use super::expr::Expr;
use super::plan::{Element, FieldType, Plan, indent};
use super::types::{Shape, TensorType};

/// A chain of stages run on each input element.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatMap {
    /// Input (elements with fields).
    pub input: Box<Plan>,
    /// The chain run per input element, its source an [`InnerSource`]; what it yields
    /// is what the `flat_map` yields.
    pub inner: Box<Plan>,
}

impl FlatMap {
    /// The inner chain's source.
    pub fn source(&self) -> Option<&InnerSource> {
        let mut node = &*self.inner;
        while let Some(input) = node.input() {
            node = input;
        }
        match node {
            Plan::InnerSource(s) => Some(s),
            _ => None,
        }
    }

    /// The input fields the inner source reads (all that the input must keep).
    pub fn reads(&self) -> Vec<String> {
        self.source().map(InnerSource::reads).unwrap_or_default()
    }

    /// The node's line and the inner chain's, between braces one level deeper, at
    /// `depth` (what `explain` prints for it, before its input).
    pub fn explain_lines(&self, line: &str, depth: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}{line}", indent(depth));
        let _ = writeln!(out, "{}{{", indent(depth + 1));
        for l in self.inner.explain().lines() {
            let _ = writeln!(out, "{}{l}", indent(depth + 2));
        }
        let _ = writeln!(out, "{}}}", indent(depth + 1));
        out
    }
}

/// The source of a `flat_map`'s inner chain: made from one input element.
#[derive(Debug, Clone, PartialEq)]
pub struct InnerSource {
    /// What it makes.
    pub kind: InnerKind,
    /// The input element it is made from (the `flat_map`'s input).
    pub outer: Element,
    /// Its elements.
    pub output: Element,
}

/// The kinds of inner sources.
#[derive(Debug, Clone, PartialEq)]
pub enum InnerKind {
    /// `range(start, end, step, keep: [..])`: `{value: i64}` then the kept fields, the
    /// bounds computed from the element.
    Range {
        /// The first value (`0` unless given).
        start: Box<Expr>,
        /// The bound, excluded.
        end: Box<Expr>,
        /// The step (`1` unless given).
        step: Box<Expr>,
        /// The fields copied into every element, after `value`.
        keep: Vec<String>,
    },
    /// `slices(fields..., keep: [..])`: one element per row of the sliced fields (their
    /// first dimension, equal for all of them at run time), each with the row of each
    /// sliced field, then the kept fields repeated.
    Slices {
        /// The fields split into rows.
        fields: Vec<String>,
        /// The fields copied into every row.
        keep: Vec<String>,
    },
}

impl InnerSource {
    /// The input fields it reads.
    pub fn reads(&self) -> Vec<String> {
        let mut out = Vec::new();
        match &self.kind {
            InnerKind::Range { start, end, step, keep } => {
                for r in [start, end, step].into_iter().flat_map(|e| e.reads()).chain(keep.iter().cloned()) {
                    if !out.contains(&r) {
                        out.push(r);
                    }
                }
            }
            InnerKind::Slices { fields, keep } => out.extend(fields.iter().chain(keep).cloned()),
        }
        out
    }

    /// Its `explain` line, without the output type.
    pub fn line(&self) -> String {
        match &self.kind {
            InnerKind::Range { start, end, step, keep } if keep.is_empty() => {
                format!("InnerRange: start={start}, end={end}, step={step}")
            }
            InnerKind::Range { start, end, step, keep } => {
                format!("InnerRange: start={start}, end={end}, step={step}, keep=[{}]", keep.join(", "))
            }
            InnerKind::Slices { fields, keep } => {
                format!("InnerSlices: fields=[{}], keep=[{}]", fields.join(", "), keep.join(", "))
            }
        }
    }
}

/// The type of one row of a sliced field of type `t`: its first dimension taken off
/// (`i64[]` and `i64[8]` give `i64`, `f32[4, 3]` gives `f32[3]`); `None` for a scalar.
pub fn row_type(t: &TensorType) -> Option<TensorType> {
    let shape = match &t.shape {
        Shape::Var => Shape::scalar(),
        Shape::Dims(d) if d.is_empty() => return None,
        Shape::Dims(d) => Shape::Dims(d[1..].to_vec()),
    };
    Some(TensorType { dtype: t.dtype, shape })
}

/// The element of `slices(fields, keep: [keep])` over `outer`'s fields: the rows of the
/// sliced fields, then the kept fields (names already checked).
pub fn slices_element(outer: &[FieldType], fields: &[String], keep: &[String]) -> Element {
    let find = |n: &String| outer.iter().find(|f| &f.name == n);
    let mut out: Vec<FieldType> = fields
        .iter()
        .filter_map(find)
        .map(|f| FieldType { name: f.name.clone(), ty: f.ty.as_ref().and_then(row_type) })
        .collect();
    out.extend(keep.iter().filter_map(find).cloned());
    Element::Fields(out)
}

/// The element of `range(..., keep: [keep])` over `outer`'s fields: `value: i64`, then
/// the kept fields (names already checked).
pub fn range_element(outer: &[FieldType], keep: &[String]) -> Element {
    let value = TensorType { dtype: super::types::DType::I64, shape: Shape::scalar() };
    let mut out = vec![FieldType { name: "value".into(), ty: Some(value) }];
    out.extend(keep.iter().filter_map(|n| outer.iter().find(|f| &f.name == n)).cloned());
    Element::Fields(out)
}
