//! `window(size, shift: size, stride: 1, drop_remainder: false)`: tf.data's
//! `Dataset.window` followed by the batch of each window (`.flat_map(lambda w:
//! w.batch(size))`), as a plan node. Window `k` holds the input elements `k × shift + j
//! × stride` for `j` in `0..size` (those that exist), as one columnar batch: its
//! element type is a `batch`'s. The runtime's `stage::window` has the algorithm.

use super::plan::{ArgValue, Plan};

/// Groups elements into overlapping (or spaced) windows, each a columnar batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Input (elements with fields of fixed shape).
    pub input: Box<Plan>,
    /// Elements per window.
    pub size: ArgValue,
    /// Elements from one window's first to the next one's (`size` when not given).
    pub shift: ArgValue,
    /// Elements from one row of a window to the next (1 when not given).
    pub stride: ArgValue,
    /// Yield only full windows.
    pub drop_remainder: bool,
}

impl Window {
    /// The node's `explain` line, before its output type.
    pub fn line(&self) -> String {
        format!(
            "Window: size={}, shift={}, stride={}, drop_remainder={}",
            self.size, self.shift, self.stride, self.drop_remainder
        )
    }
}
