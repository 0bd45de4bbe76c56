//! What generated code needs from the runtime besides the stages: the traits every
//! generated pipeline implements, and the helpers its specialised `tf.train.Example`
//! parser and per-field operations call. Generated code reaches this module through
//! `::sluice::__private` only (see the facade).

/// Counts the records in one element of a pipeline: 1 for a record, the rows of a
/// batch. `sluice run` reports records and batches with it.
pub trait Rows {
    /// Records in this element.
    fn rows(&self) -> u64;
    /// Whether the element is a batch.
    fn is_batch(&self) -> bool {
        false
    }
}

impl Rows for Vec<u8> {
    fn rows(&self) -> u64 {
        1
    }
}

impl Rows for std::path::PathBuf {
    fn rows(&self) -> u64 {
        1
    }
}

/// A batch of serialized records (`batch` before `parse_example`).
impl Rows for Vec<Vec<u8>> {
    fn rows(&self) -> u64 {
        self.len() as u64
    }
    fn is_batch(&self) -> bool {
        true
    }
}

pub mod ops;
pub mod parse;

/// A pipeline parameter's value, parsed from the text given on the command line
/// (`sluice run --set NAME=VALUE`).
pub trait FromParam: Sized {
    /// Parses `text`; the error says what was expected.
    fn from_param(text: &str) -> Result<Self, String>;
}

macro_rules! from_param_number {
    ($($t:ty => $what:literal),* $(,)?) => {
        $(impl FromParam for $t {
            fn from_param(text: &str) -> Result<Self, String> {
                let t = text.trim().replace('_', "");
                t.parse().map_err(|_| format!("expected {}, found `{text}`", $what))
            }
        })*
    };
}
from_param_number!(u32 => "an unsigned 32-bit integer", u64 => "an unsigned integer", i64 => "an integer", f64 => "a number");

impl FromParam for bool {
    fn from_param(text: &str) -> Result<Self, String> {
        match text.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(format!("expected `true` or `false`, found `{text}`")),
        }
    }
}

impl FromParam for String {
    fn from_param(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }
}

/// Parses parameter `name` from `text` (for generated `Params::from_args`).
pub fn param<T: FromParam>(name: &str, text: &str) -> Result<T, String> {
    T::from_param(text).map_err(|e| format!("parameter `{name}`: {e}"))
}
