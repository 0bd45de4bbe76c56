//! The `range` source: tf.data's `Dataset.range` as a plan node.

use super::plan::{ArgValue, Element, FieldType};
use super::types::{DType, Shape, TensorType};

/// `range(end)`, `range(start, end)`, `range(start, end, step)`: elements with one field
/// `value: i64` (tf.data's `Dataset.range`).
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    /// The first value.
    pub start: ArgValue,
    /// The end (excluded).
    pub end: ArgValue,
    /// The step (not 0; negative counts down).
    pub step: ArgValue,
}

impl Range {
    /// The element: one field `value: i64`.
    pub fn element() -> Element {
        Element::Fields(vec![FieldType {
            name: "value".into(),
            ty: Some(TensorType { dtype: DType::I64, shape: Shape::Dims(vec![]) }),
        }])
    }
}
