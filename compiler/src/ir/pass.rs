//! The nodes that pass their input's elements through, selecting or buffering them:
//! `repeat`, `take`, `skip`, `shard`, `cache` and `prefetch`, each with its arguments
//! bound by sema into typed fields. Each carries the span of the stage it was written as
//! (empty for a node the physical plan adds).

use super::options::{PrefetchDepth, Remainder, RepeatCount};
use super::plan::{ArgValue, Plan};
use crate::span::Span;

/// `repeat(count)`: the input again and again, `count` times or forever.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeat {
    /// Input.
    pub input: Box<Plan>,
    /// Epochs (`forever` when no count is given).
    pub count: RepeatCount,
    /// The stage it was written as.
    pub span: Span,
}

/// `take(count)`: the first `count` elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Take {
    /// Input.
    pub input: Box<Plan>,
    /// Elements kept.
    pub count: ArgValue,
    /// The stage it was written as.
    pub span: Span,
}

/// `skip(count)`: all but the first `count` elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Skip {
    /// Input.
    pub input: Box<Plan>,
    /// Elements dropped.
    pub count: ArgValue,
    /// The stage it was written as.
    pub span: Span,
}

/// `shard(num_shards, index, remainder)`: this worker's share of the elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    /// Input.
    pub input: Box<Plan>,
    /// Workers.
    pub num_shards: ArgValue,
    /// This worker, from 0.
    pub index: ArgValue,
    /// What happens to the last, partial round (`keep` when not declared).
    pub remainder: Remainder,
    /// The stage it was written as (W0210 names it).
    pub span: Span,
}

/// `cache(file?)`: the first pass's elements kept, in memory or in a file, for the next.
#[derive(Debug, Clone, PartialEq)]
pub struct Cache {
    /// The file (`None`: in memory).
    pub file: Option<ArgValue>,
    /// Input.
    pub input: Box<Plan>,
    /// The stage it was written as.
    pub span: Span,
}

/// `prefetch(buffer)`: elements made ahead on a thread of their own.
#[derive(Debug, Clone, PartialEq)]
pub struct Prefetch {
    /// Input.
    pub input: Box<Plan>,
    /// Elements made ahead.
    pub buffer: PrefetchDepth,
    /// The stage it was written as.
    pub span: Span,
}

impl Prefetch {
    /// Whether AUTOTUNE picks the depth.
    pub fn is_auto(&self) -> bool {
        self.buffer == PrefetchDepth::Auto
    }
}
