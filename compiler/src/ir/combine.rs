//! The stages that combine or number whole streams, as plan nodes: tf.data's
//! `Dataset.enumerate`, `take_while`, `concatenate` and `Dataset.zip`. `zip` and
//! `concatenate` are sources made of other pipelines of the same file (as `sample_from`
//! is): their inputs are planned and explained as pipelines of their own.

use super::expr::Expr;
use super::plan::{ArgValue, Element, FieldType, Plan};
use super::types::{DType, Shape, TensorType};

/// `enumerate(start: N)`: each element gets a field `index: i64`, its position in the
/// pass plus `start` (tf.data's `Dataset.enumerate`).
#[derive(Debug, Clone, PartialEq)]
pub struct Enumerate {
    /// Input (elements with fields, no `index` among them).
    pub input: Box<Plan>,
    /// The first index.
    pub start: ArgValue,
}

impl Enumerate {
    /// The field it adds.
    pub fn field() -> FieldType {
        FieldType { name: "index".into(), ty: Some(TensorType { dtype: DType::I64, shape: Shape::scalar() }) }
    }

    /// Its element: the input's fields, then `index`.
    pub fn output(input: Element) -> Element {
        match input {
            Element::Fields(mut fields) => {
                fields.push(Self::field());
                Element::Fields(fields)
            }
            other => other,
        }
    }
}

/// `take_while(predicate)`: the elements up to the first for which the predicate does
/// not hold; the pass ends there (tf.data's `take_while`). The predicate is typed as a
/// `filter`'s.
#[derive(Debug, Clone, PartialEq)]
pub struct TakeWhile {
    /// Input.
    pub input: Box<Plan>,
    /// The predicate as written.
    pub predicate: String,
    /// The fields it reads.
    pub reads: Vec<String>,
    /// The predicate, one scalar `bool` (a list of one, as a filter's parts).
    pub conditions: Vec<Expr>,
}

/// `zip(a, b, ...)`: element `i` of each input pipeline, their fields merged into one
/// element (tf.data's `Dataset.zip`, with named fields in place of a tuple); ends with
/// the shortest input.
#[derive(Debug, Clone, PartialEq)]
pub struct Zip {
    /// The pipelines zipped, by name.
    pub inputs: Vec<String>,
    /// Each input's element (elements with fields), in order.
    pub elements: Vec<Element>,
    /// The merged element: every input's fields, in order (no name twice).
    pub output: Element,
}

/// `concatenate(a, b, ...)`: all of `a`, then all of `b`, … (tf.data's
/// `a.concatenate(b)`); the inputs have one element type.
#[derive(Debug, Clone, PartialEq)]
pub struct Concatenate {
    /// The pipelines, in order, by name.
    pub inputs: Vec<String>,
    /// Their (common) element type.
    pub output: Element,
}

/// The `explain` name and keys of a node of this file (`Enumerate: start=0`).
pub(super) fn explain(plan: &Plan) -> (&'static str, Vec<(&'static str, String)>) {
    let inputs = |names: &[String]| vec![("inputs", format!("[{}]", names.join(", ")))];
    match plan {
        Plan::Enumerate(n) => ("Enumerate:", vec![("start", n.start.to_string())]),
        Plan::TakeWhile(n) => ("TakeWhile:", vec![("predicate", n.predicate.clone())]),
        Plan::Zip(n) => ("Zip:", inputs(&n.inputs)),
        Plan::Concatenate(n) => ("Concatenate:", inputs(&n.inputs)),
        other => unreachable!("not a combining node: {other:?}"),
    }
}

/// The pipelines `plan` takes (`sample_from`, `zip`, `concatenate`), each once, in the
/// order met from the plan's root: the order the generated `Params` holds their
/// parameters in, and the engine's (`--set INPUT.NAME=VALUE`).
pub fn taken(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut node = Some(plan);
    while let Some(n) = node {
        let inputs = match n {
            Plan::SampleFrom(s) => &s.inputs[..],
            Plan::Zip(z) => &z.inputs[..],
            Plan::Concatenate(c) => &c.inputs[..],
            _ => &[],
        };
        for i in inputs {
            if !out.contains(i) {
                out.push(i.clone());
            }
        }
        node = n.input();
    }
    out
}

/// The pipelines `plan` zips or concatenates, in the order met from its root (a name as
/// often as it is taken): those whose passes run beneath it, so whose resume blockers are
/// its own (the generated `RESUME_BLOCKER`, the engine's `resume::blocker`); not
/// `sample_from`'s.
pub fn passes_beneath(plan: &Plan) -> Vec<&str> {
    let mut inputs = Vec::new();
    let mut node = Some(plan);
    while let Some(n) = node {
        match n {
            Plan::Zip(z) => inputs.extend(z.inputs.iter().map(String::as_str)),
            Plan::Concatenate(c) => inputs.extend(c.inputs.iter().map(String::as_str)),
            _ => {}
        }
        node = n.input();
    }
    inputs
}
