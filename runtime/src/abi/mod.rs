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

/// A serialized record.
impl Rows for Vec<u8> {
    fn rows(&self) -> u64 {
        1
    }
}

/// A string.
impl Rows for String {
    fn rows(&self) -> u64 {
        1
    }
}

/// A file read whole.
impl Rows for crate::stage::FileContents {
    fn rows(&self) -> u64 {
        1
    }
}

/// A serialized record with its origin.
impl Rows for crate::stage::Record {
    fn rows(&self) -> u64 {
        1
    }
}

/// The error of a stage's function on a record read from `origin`, prefixed with the
/// file and record (`path: record N: ...`) when the origin is known.
pub fn located(origin: crate::stage::Origin, error: crate::BoxError) -> crate::BoxError {
    if origin.is_known() { origin.name_in(error).into() } else { error }
}

/// The error of a stage's function on an element of a file read whole (`read_file`),
/// prefixed with the file (`path: ...`).
pub fn located_file(path: &str, error: crate::BoxError) -> crate::BoxError {
    let file = crate::stage::FileId::of(std::path::Path::new(path));
    located(crate::stage::Origin::file(file), error)
}

impl Rows for std::path::PathBuf {
    fn rows(&self) -> u64 {
        1
    }
}

/// A batch of serialized records (`batch` before `parse_example`).
impl Rows for crate::stage::RecordBatch {
    fn rows(&self) -> u64 {
        self.len() as u64
    }
    fn is_batch(&self) -> bool {
        true
    }
}

/// A batch of elements (`batch` of elements without fields).
impl<T> Rows for Vec<T>
where
    T: Rows,
{
    fn rows(&self) -> u64 {
        self.len() as u64
    }
    fn is_batch(&self) -> bool {
        true
    }
}

pub mod export;
pub mod ops;
pub mod parse;
pub mod py;
pub mod show;
pub mod table;
mod tail;
pub mod text;
pub mod tokenize;

pub use tail::{DeviceTail, TailKernel};

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

/// Parses a size parameter: bytes, or a number with a unit (`512 MiB`, `2GiB`, `64k`).
pub fn size_param(name: &str, text: &str) -> Result<u64, String> {
    let t = text.trim().replace('_', "");
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("parameter `{name}`: expected a size such as `512 MiB`, found `{text}`"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "k" | "K" | "KB" | "kB" => 1_000,
        "KiB" => 1 << 10,
        "M" | "MB" => 1_000_000,
        "MiB" => 1 << 20,
        "G" | "GB" => 1_000_000_000,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        other => return Err(format!("parameter `{name}`: unknown size unit `{other}`")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("parameter `{name}`: `{text}` is too large"))
}

/// A seed for a random stage declared without one: different on every run, as
/// tf.data's unseeded shuffles are.
pub fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// The key of random operations declared without a seed: drawn once per process (a
/// fresh one every run), so the per-element hot path reads it rather than drawing.
pub fn run_seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(fresh_seed)
}

/// The error of generated `Params::check` when the memory bound, computed again with the
/// parameters' values, exceeds the declared `budget`: it names the parameters (each that
/// sizes the bound, as `(name, value, default)`: those set to other than their default,
/// or all when none is), their values, the bound and the budget.
pub fn over_budget(bound: u64, budget: u64, params: &[(&str, u64, Option<u64>)]) -> String {
    let set: Vec<&(&str, u64, Option<u64>)> = params.iter().filter(|(_, v, d)| Some(*v) != *d).collect();
    let shown: Vec<String> = if set.is_empty() { params.iter().collect() } else { set }
        .iter()
        .map(|(name, v, _)| format!("`{name}` = {v}"))
        .collect();
    let (noun, them) = if shown.len() == 1 { ("parameter", "it") } else { ("parameters", "them") };
    format!(
        "{noun} {}: the pipeline may then hold {} in its buffers, more than its `budget` of {}: lower {them} or raise the budget",
        shown.join(", "),
        human_bytes(bound),
        human_bytes(budget)
    )
}

/// `1.5 MiB`-style, as `sluice explain` prints sizes.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size_param("s", "512 MiB"), Ok(512 << 20));
        assert_eq!(size_param("s", "2GiB"), Ok(2 << 30));
        assert_eq!(size_param("s", "100"), Ok(100));
        assert!(size_param("s", "12 parsecs").unwrap_err().contains("unknown size unit"));
        assert!(size_param("s", "lots").is_err());
    }

    #[test]
    fn over_budget_names_the_parameters_and_both_sizes() {
        assert_eq!(
            over_budget(3 << 30, 64 << 20, &[("cycle", 2, Some(2)), ("buf", 1_000_000, Some(100))]),
            "parameter `buf` = 1000000: the pipeline may then hold 3.0 GiB in its buffers, more than its \
             `budget` of 64.0 MiB: lower it or raise the budget"
        );
        let all = over_budget(u64::MAX, 1, &[("a", 1, Some(1)), ("b", 2, None)]);
        assert!(all.starts_with("parameter `b` = 2: "), "{all}");
        let all = over_budget(u64::MAX, 1, &[("a", 1, Some(1)), ("b", 2, Some(2))]);
        assert!(all.starts_with("parameters `a` = 1, `b` = 2: "), "{all}");
    }

    #[test]
    fn params() {
        assert_eq!(param::<u32>("n", "1_000"), Ok(1000));
        assert!(param::<u32>("n", "-1").unwrap_err().contains("parameter `n`"));
        assert_eq!(param::<bool>("b", "true"), Ok(true));
        assert_eq!(param::<f64>("x", "0.5"), Ok(0.5));
    }
}
