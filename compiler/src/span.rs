//! Byte spans of source text: where a diagnostic points. The AST and the plans carry
//! them; they never make two trees or plans different.

/// A byte range `start..end` in the source text.
#[derive(Debug, Clone, Copy, Default, Eq)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// The span `start..end`.
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// Spans never make two trees different.
impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}
