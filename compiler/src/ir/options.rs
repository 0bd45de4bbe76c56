//! The enumeration words of stage arguments as typed values (`compression: gzip`,
//! `on_corrupt: skip_file`, `remainder: drop`, …), bound once by sema from the words of
//! the stage table and matched on by every stage after it. Each type is the one table of
//! its words: [`Display`](fmt::Display) prints the word `explain` shows, `from_word`
//! reads it, `WORDS` lists them in the order the stage checks suggest them.

use std::fmt;

use super::plan::ArgValue;

/// An enumeration of words with its one table: the enum, `WORDS`, `from_word` and a
/// `Display` that prints the word.
macro_rules! words {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $word:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// The words, in the order the stage table lists them.
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            /// The value a word names (`None`: not one of [`Self::WORDS`]).
            pub fn from_word(word: &str) -> Option<Self> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The word as written (and as `explain` prints it).
            pub fn word(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.word())
            }
        }
    };
}

words! {
    /// Whole-file compression of a reader's files (`compression`; `auto` when not given).
    Compression {
        /// From the file name, else from the first bytes.
        Auto => "auto",
        /// None.
        None => "none",
        /// GZIP.
        Gzip => "gzip",
        /// ZLIB.
        Zlib => "zlib",
    }
}

words! {
    /// What a corrupt record (a TFRecord reader's `on_corrupt`) or an unreadable file
    /// (`read_file`'s `on_error`) does; `fail` when not given.
    CorruptPolicy {
        /// The pass fails, naming file, record and offset.
        Fail => "fail",
        /// The record is skipped and counted.
        Skip => "skip",
        /// The rest of the file is skipped and counted.
        SkipFile => "skip_file",
    }
}

words! {
    /// How a `shard` deals out a pass's elements (`remainder`; `keep` when not given).
    Remainder {
        /// Every `num_shards`-th element; the last round may be partial.
        Keep => "keep",
        /// Equal counts: the last partial round dropped.
        Drop => "drop",
        /// Equal counts: the last partial round padded with the pass's first elements.
        Pad => "pad",
    }
}

words! {
    /// How `read_file` labels each file (`labels`; `none` when not given).
    Labels {
        /// `label: i64`, the index of the file's folder name among the sorted distinct
        /// folder names of the files listed.
        Dir => "dir",
        /// No label.
        None => "none",
    }
}

words! {
    /// What a `map` or a text source does with an element it fails on (`on_error`;
    /// `fail` when not given).
    OnError {
        /// The pass fails.
        Fail => "fail",
        /// The element is dropped and counted (tf.data's `ignore_errors`).
        Skip => "skip",
    }
}

/// A `shuffle`'s buffer: a number of elements, or `global`.
#[derive(Debug, Clone, PartialEq)]
pub enum ShuffleBuffer {
    /// This many elements (a constant or a parameter).
    Elements(ArgValue),
    /// `global`: every record of the indexed files in a seeded permutation per epoch.
    Global,
}

impl ShuffleBuffer {
    /// The word of [`ShuffleBuffer::Global`].
    pub const GLOBAL: &'static str = "global";
}

impl fmt::Display for ShuffleBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShuffleBuffer::Elements(v) => write!(f, "{v}"),
            ShuffleBuffer::Global => f.write_str(Self::GLOBAL),
        }
    }
}

/// How many times `repeat` (or a fused `shuffle` + `repeat`) goes over its input.
#[derive(Debug, Clone, PartialEq)]
pub enum RepeatCount {
    /// This many epochs (a constant or a parameter).
    Times(ArgValue),
    /// `forever`: no count given.
    Forever,
}

impl RepeatCount {
    /// The count, `None` for forever.
    pub fn times(&self) -> Option<&ArgValue> {
        match self {
            RepeatCount::Times(v) => Some(v),
            RepeatCount::Forever => None,
        }
    }
}

impl fmt::Display for RepeatCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepeatCount::Times(v) => write!(f, "{v}"),
            RepeatCount::Forever => f.write_str("forever"),
        }
    }
}

/// How many elements a `prefetch` makes ahead.
#[derive(Debug, Clone, PartialEq)]
pub enum PrefetchDepth {
    /// `auto`, or no depth given: AUTOTUNE picks it within the budget.
    Auto,
    /// This many elements (a constant or a parameter).
    Elements(ArgValue),
}

impl PrefetchDepth {
    /// The depth of a `prefetch` written with `buffer` (`None`: not given).
    pub fn of(buffer: Option<ArgValue>) -> PrefetchDepth {
        match buffer {
            None | Some(ArgValue::Auto) => PrefetchDepth::Auto,
            Some(v) => PrefetchDepth::Elements(v),
        }
    }
}

impl fmt::Display for PrefetchDepth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefetchDepth::Auto => f.write_str("auto"),
            PrefetchDepth::Elements(v) => write!(f, "{v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_to_its_value() {
        for w in Compression::WORDS {
            assert_eq!(Compression::from_word(w).map(Compression::word), Some(*w));
        }
        for w in CorruptPolicy::WORDS {
            assert_eq!(CorruptPolicy::from_word(w).map(|p| p.to_string()).as_deref(), Some(*w));
        }
        assert_eq!(Remainder::WORDS, ["keep", "drop", "pad"]);
        assert_eq!(Labels::from_word("dir"), Some(Labels::Dir));
        assert_eq!(OnError::from_word("skip_file"), None);
        assert_eq!(ShuffleBuffer::Global.to_string(), "global");
        assert_eq!(RepeatCount::Forever.to_string(), "forever");
    }
}
