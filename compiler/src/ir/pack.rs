//! `pack(length: N, fields: [ids, ...], window: W, overflow: split | error)`: the
//! variable-length integer fields of each element packed into rows of `N` tokens (T5's
//! and Grain's packing), with `segment_ids` and `positions` added; the runtime's
//! `stage::pack` has the algorithm (first fit over a window of `W` open rows, rows out in
//! the order they were opened).

use super::plan::{Element, FieldType};
use super::types::{DType, Dim, Shape, TensorType};

/// Rows open at once when `window` is not given: enough for first fit to fill rows
/// well (above 95% on English lines of 256 tokens), few enough to hold little.
pub const DEFAULT_WINDOW: u64 = 8;

/// What `pack` does with a sequence longer than a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackOverflow {
    /// Cut it into rows (the default).
    Split,
    /// Fail at run time.
    Error,
}

impl PackOverflow {
    /// Its word in `.pipe` source.
    pub fn name(self) -> &'static str {
        match self {
            PackOverflow::Split => "split",
            PackOverflow::Error => "error",
        }
    }
}

/// Packs variable-length integer sequences into fixed-length rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Pack {
    /// Input.
    pub input: Box<super::plan::Plan>,
    /// How.
    pub spec: PackSpec,
}

/// What `pack` packs and how (the logical node's choices, which its exec node holds
/// too).
#[derive(Debug, Clone, PartialEq)]
pub struct PackSpec {
    /// Tokens per row.
    pub length: u64,
    /// The fields packed (each `i32[]` in, `i32[length]` out), in lockstep.
    pub fields: Vec<String>,
    /// Rows open at once.
    pub window: u64,
    /// Sequences longer than a row.
    pub overflow: PackOverflow,
}

impl PackSpec {
    /// The names of the fields `pack` adds.
    pub const ADDED: [&'static str; 2] = ["segment_ids", "positions"];

    /// The rows: the packed fields, then `segment_ids` and `positions`, all
    /// `i32[length]`.
    pub fn element(&self) -> Element {
        let ty = TensorType { dtype: DType::I32, shape: Shape::Dims(vec![Dim::Fixed(self.length)]) };
        Element::Fields(
            self.fields
                .iter()
                .map(String::as_str)
                .chain(Self::ADDED)
                .map(|name| FieldType { name: name.to_string(), ty: Some(ty.clone()) })
                .collect(),
        )
    }

    /// The node's `explain` line, before its output type.
    pub fn line(&self) -> String {
        format!(
            "Pack: length={}, fields=[{}], window={}, overflow={}",
            self.length,
            self.fields.join(", "),
            self.window,
            self.overflow.name()
        )
    }
}
