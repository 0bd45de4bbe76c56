//! `bucket_by_length(length: tokens, boundaries: [b1, …, bn], batch_sizes: [s0, …, sn],
//! pad_to_bucket_boundary: false, drop_remainder: false)`: tf.data's
//! `bucket_by_sequence_length`. Elements go to bucket `i` by their length (`b[i-1] ≤ l <
//! b[i]`), each bucket is batched by its own size and padded like `padded_batch` (to the
//! longest of the batch, or to `b[i] - 1`); the runtime's `stage::bucket` has the order
//! (full buckets at once, the partial ones at the end in bucket order).

use std::fmt::Write as _;

use super::plan::{Element, Plan};
use super::types::Value;

/// `padding_values` of `padded_batch` and `bucket_by_length` (tf.data's): the value each
/// field named pads with, a constant of the field's dtype (sema checks it); a field not
/// named pads with 0 (`false`), as without the argument.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PaddingValues(pub Vec<(String, Value)>);

impl PaddingValues {
    /// The value field `name` pads with, when given.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Whether no value is given (every field pads with 0).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `{tokens: -1, mask: false}`, in field order.
impl std::fmt::Display for PaddingValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self.0.iter().map(|(n, v)| format!("{n}: {v}")).collect();
        write!(f, "{{{}}}", items.join(", "))
    }
}

/// What the length of an element is taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthOf {
    /// A `T[]` field: its number of values (`tf.shape(x[field])[0]`).
    Values,
    /// An integer scalar field: its value.
    Value,
}

/// Groups elements into buckets by length and pads each bucket's batches.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketByLength {
    /// Input.
    pub input: Box<Plan>,
    /// How.
    pub spec: BucketSpec,
}

/// What `bucket_by_length` does (the logical node's choices, which its exec node holds
/// too).
#[derive(Debug, Clone, PartialEq)]
pub struct BucketSpec {
    /// The field the length comes from.
    pub length: String,
    /// How it gives the length.
    pub length_of: LengthOf,
    /// The bucket boundaries, positive and strictly increasing.
    pub boundaries: Vec<u64>,
    /// Each bucket's batch size (one more than the boundaries), each at least 1.
    pub batch_sizes: Vec<u64>,
    /// Pad bucket `i`'s batches to `boundaries[i] - 1` instead of their longest.
    pub pad_to_bucket_boundary: bool,
    /// Drop the partial buckets at the end of the input.
    pub drop_remainder: bool,
    /// What each padded field pads with.
    pub padding_values: PaddingValues,
}

impl BucketSpec {
    /// The batches: padded batches of the input's elements, as `padded_batch` makes.
    pub fn element(input: Element) -> Element {
        Element::Batch(Box::new(input))
    }

    /// The node's `explain` line, before its output type.
    pub fn line(&self) -> String {
        let list = |v: &[u64]| v.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        let mut s = String::from("BucketByLength: length=");
        match self.length_of {
            LengthOf::Values => _ = write!(s, "len({})", self.length),
            LengthOf::Value => s.push_str(&self.length),
        }
        _ = write!(
            s,
            ", boundaries=[{}], batch_sizes=[{}], pad_to_bucket_boundary={}, drop_remainder={}",
            list(&self.boundaries),
            list(&self.batch_sizes),
            self.pad_to_bucket_boundary,
            self.drop_remainder
        );
        if !self.padding_values.is_empty() {
            _ = write!(s, ", padding_values={}", self.padding_values);
        }
        s
    }
}
