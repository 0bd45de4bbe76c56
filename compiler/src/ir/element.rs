//! The types of the elements a plan node produces: paths, serialized records, records
//! with named fields, and batches of them.

use std::fmt::{self, Write};

use super::types::TensorType;

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
