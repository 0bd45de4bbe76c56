//! The types of the elements a plan node produces: paths, serialized records, records
//! with named fields, and batches of them.

use std::fmt::{self, Write};

use super::types::{DType, Shape, TensorType};

/// A named field of an element, with its type when known.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldType {
    /// The field's name.
    pub name: String,
    /// Its type; `None` until the per-field operations are typed.
    pub ty: Option<TensorType>,
}

/// The type of the elements a node produces.
#[derive(Debug, Clone, PartialEq)]
pub enum Element {
    /// File paths.
    Path,
    /// Serialized records (bytes).
    Record,
    /// Records with named fields (after `parse_example`).
    Fields(Vec<FieldType>),
    /// Batches of the inner element, columnar.
    Batch(Box<Element>),
}

impl Element {
    /// The named fields of these elements (of a batch's rows), or none for paths and
    /// records.
    pub fn fields(&self) -> &[FieldType] {
        match self {
            Element::Fields(f) => f,
            Element::Batch(inner) => inner.fields(),
            Element::Path | Element::Record => &[],
        }
    }
}

impl Element {
    /// The type of one row of a field of type `t` that `unbatch` splits along its first
    /// dimension (`i64[]` → `i64`, `f32[n, 4]` → `f32[4]`), or `None` when it has no
    /// leading dimension (a scalar) or holds byte strings or text.
    pub fn unbatched(t: &TensorType) -> Option<TensorType> {
        if matches!(t.dtype, DType::Bytes | DType::Str) {
            return None;
        }
        let shape = match &t.shape {
            Shape::Var => Shape::scalar(),
            Shape::Dims(d) if d.is_empty() => return None,
            Shape::Dims(d) => Shape::Dims(d[1..].to_vec()),
        };
        Some(TensorType { dtype: t.dtype, shape })
    }

    /// What `unbatch` makes of these elements: a batch's rows, or records whose fields
    /// each lose their leading dimension ([`Element::unbatched`]; a field without one is
    /// left as it is, which sema refuses).
    pub fn unbatch(self) -> Element {
        match self {
            Element::Batch(inner) => *inner,
            Element::Fields(fields) => Element::Fields(
                fields
                    .into_iter()
                    .map(|f| FieldType {
                        ty: f.ty.map(|t| Element::unbatched(&t).unwrap_or(t)),
                        name: f.name,
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Element::Path => f.write_str("path"),
            Element::Record => f.write_str("record"),
            Element::Fields(fields) => {
                f.write_char('{')?;
                for (i, fl) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match &fl.ty {
                        Some(t) => write!(f, "{}: {t}", fl.name)?,
                        None => write!(f, "{}: ?", fl.name)?,
                    }
                }
                f.write_char('}')
            }
            Element::Batch(inner) => write!(f, "batch<{inner}>"),
        }
    }
}
