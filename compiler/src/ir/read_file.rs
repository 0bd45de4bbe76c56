//! The `read_file` stage: tf.data's `list_files` + `tf.io.read_file`, with the labels of
//! Keras' `image_dataset_from_directory`, as a plan node.

use super::options::{CorruptPolicy, Labels};
use super::plan::{Element, FieldType, Plan};
use super::types::{DType, Shape, TensorType};

/// `read_file(labels: dir|none, on_error: fail|skip)` after `files(...)`: each file
/// becomes one element `{contents: bytes, path: str}`, plus `label: i64` with `labels:
/// dir` (the index of the file's folder name among the sorted distinct folder names of
/// the files listed).
#[derive(Debug, Clone, PartialEq)]
pub struct ReadFile {
    /// The file paths.
    pub input: Box<Plan>,
    /// Label each file by its folder (`dir`) or not.
    pub labels: Labels,
    /// What a missing or unreadable file does (`fail`, `skip`; `skip_file` is `skip`).
    pub on_error: CorruptPolicy,
}

impl ReadFile {
    /// The element: `contents`, `path` and, with labels, `label`.
    pub fn element(labels: Labels) -> Element {
        let field = |name: &str, dtype| FieldType {
            name: name.into(),
            ty: Some(TensorType { dtype, shape: Shape::scalar() }),
        };
        let mut fields = vec![field("contents", DType::Bytes), field("path", DType::Str)];
        if labels == Labels::Dir {
            fields.push(field("label", DType::I64));
        }
        Element::Fields(fields)
    }
}
