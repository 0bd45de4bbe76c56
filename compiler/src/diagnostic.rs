//! User diagnostics: plain data (a code, a message, a primary span with its label,
//! secondary labels, notes, help), rendered like rustc's with `file:line:col` by
//! codespan-reporting for files; the macro front end turns them into `syn::Error`s.
//!
//! Messages start lower-case and have no trailing period; a help line is given where a
//! fix is known.

use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::NoColor};

use crate::span::Span;

/// Every code the compiler can report, with a one-line summary, in order: the one table
/// of codes. `compiler/tests/diagnostic_pages.rs` holds it against the codes written in
/// the compiler's sources and against the pages of `docs/guide/src/diagnostics/` (one
/// per code, with a failing example and its fix), which `sluice explain-code` prints.
pub const CODES: &[(&str, &str)] = &[
    ("E0001", "syntax error"),
    ("E0002", "a number literal out of range"),
    ("E0003", "brackets nest too deep"),
    ("E0100", "a pipeline defined twice"),
    ("E0101", "a parameter declared twice"),
    ("E0102", "unknown parameter type"),
    ("E0103", "a default of the wrong type"),
    ("E0104", "a default that is not a constant"),
    ("E0105", "a parameter with a shape"),
    ("E0106", "a constant expression that cannot be evaluated"),
    ("E0110", "a schema field declared twice"),
    ("E0111", "unknown dtype"),
    ("E0112", "a bad dimension"),
    ("E0113", "a feature default that does not fit"),
    ("E0114", "more than one schema"),
    ("E0116", "unknown device"),
    ("E0117", "a budget that is not an amount of memory"),
    ("E0118", "an extern fn declared twice"),
    ("E0119", "a reserved word of Rust as a name"),
    ("E0120", "a parameter named as a pipeline it takes"),
    ("E0121", "a thread budget that is not a whole number of threads"),
    ("E0200", "unknown stage"),
    ("E0201", "unknown argument name"),
    ("E0202", "too many arguments"),
    ("E0203", "a required argument missing"),
    ("E0204", "an argument given twice"),
    ("E0205", "an argument of the wrong kind"),
    ("E0206", "a size that is zero or negative"),
    ("E0207", "not a value of an enum argument"),
    ("E0208", "a block where none is taken, or none where one is needed"),
    ("E0209", "unknown name in an argument"),
    ("E0211", "a cycle or parallelism above its ceiling"),
    ("E0300", "a pipeline with no stages"),
    ("E0301", "a stage before the source"),
    ("E0302", "two sources"),
    ("E0303", "a reader with no files"),
    ("E0304", "an interleave without file paths"),
    ("E0305", "parse_example without records or a schema"),
    ("E0306", "unbatch of elements with no leading dimension"),
    ("E0307", "an interleave block without exactly one reader"),
    ("E0308", "batch of fields whose size varies"),
    ("E0309", "a pipeline that reads itself"),
    ("E0310", "no pipeline of that name"),
    ("E0311", "sample_from of pipelines with different elements"),
    ("E0312", "bad sample_from weights"),
    ("E0313", "Rust code given elements without fields"),
    ("E0314", "shuffle(global) not right after the reader"),
    ("E0315", "a pipeline of too many stages"),
    ("E0320", "range without an end"),
    ("E0321", "range with a step of zero"),
    ("E0322", "csv without a schema or with a field it cannot read"),
    ("E0323", "read_file without file paths"),
    ("E0324", "parquet without a schema or with a field it cannot read"),
    ("E0325", "webdataset without a schema or with a field it cannot read"),
    ("E0330", "zip of pipelines with a field in common"),
    ("E0331", "concatenate of pipelines with different elements"),
    ("E0332", "enumerate of elements without fields"),
    ("E0333", "zip of batches with single elements, or of elements without fields"),
    ("E0350", "pack of batches"),
    ("E0351", "a pack length that is not a constant"),
    ("E0352", "pack of fields that are not i32[]"),
    ("E0353", "a bad pack overflow, or a field named like one pack adds"),
    ("E0360", "an empty flat_map block"),
    ("E0361", "a stage that cannot run inside flat_map"),
    ("E0362", "flat_map of elements without fields"),
    ("E0363", "a flat_map range bound that is not an integer field"),
    ("E0364", "a statement in a flat_map block"),
    ("E0365", "window of elements without fields"),
    ("E0366", "window of batches"),
    ("E0370", "padded_batch with pad_to and pad_to_multiple"),
    ("E0371", "pad_to_multiple of fields that are not T[]"),
    ("E0372", "bucket_by_length of batches"),
    ("E0373", "a bucket length that is not a T[] or integer field"),
    ("E0374", "bucket boundaries not positive and increasing"),
    ("E0375", "bucket batch sizes not one per bucket"),
    ("E0376", "a padding value that does not fit its field"),
    ("E0380", "a feature list without a variable number of steps"),
    ("E0381", "a feature list with a default"),
    ("E0382", "a feature list of bytes"),
    ("E0383", "a feature list read by parse_example"),
    ("E0400", "a map statement that assigns nothing"),
    ("E0401", "unknown field"),
    ("E0402", "bad arguments of an operation"),
    ("E0403", "an operator on values it does not apply to"),
    ("E0404", "an operation on a value of the wrong shape"),
    ("E0405", "an operation argument of the wrong value"),
    ("E0406", "an extern fn argument of the wrong type"),
    ("E0407", "a condition that is not one bool"),
    ("E0408", "Rust code inside an expression"),
    ("E0409", "a bad max_pixels of decode_jpeg/png"),
    ("E0410", "tokenize of a value that is not text"),
    ("E0411", "a tokenizer that is not a file known at start"),
    ("E0412", "a tokenize flag that is not true or false"),
    ("E0500", "over the memory budget"),
    ("E0600", "a pipeline that cannot be compiled to Rust"),
    ("W0210", "sharding by whole files or row groups (warning)"),
    ("W0354", "pack drops an i32[] field (warning)"),
];

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The pipeline cannot be compiled.
    Error,
    /// The pipeline compiles, but probably not as intended.
    Warning,
}

/// A span with a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    /// What is pointed at.
    pub span: Span,
    /// What is said about it (may be empty).
    pub message: String,
}

/// One problem in a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable code, `E0001`… (`W…` for warnings): one of [`CODES`], each explained by a
    /// page of `docs/guide/src/diagnostics/` (`sluice explain-code CODE`).
    pub code: &'static str,
    /// The headline.
    pub message: String,
    /// The main place.
    pub primary: Label,
    /// Related places.
    pub secondary: Vec<Label>,
    /// Extra facts.
    pub notes: Vec<String>,
    /// How to fix it, when known.
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error at `span`.
    pub fn error(
        code: &'static str,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            primary: Label { span, message: label.into() },
            secondary: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// A warning at `span`: the pipeline compiles, but probably not as intended.
    pub fn warning(
        code: &'static str,
        message: impl Into<String>,
        span: Span,
        label: impl Into<String>,
    ) -> Self {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(code, message, span, label) }
    }

    /// Adds a secondary label.
    pub fn with_label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.secondary.push(Label { span, message: message.into() });
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// Sets the help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Renders diagnostics of the file `name` (text `source`) as rustc does, without colour.
pub fn render(name: &str, source: &str, diagnostics: &[Diagnostic]) -> String {
    let file = SimpleFile::new(name, source);
    let config = term::Config::default();
    let mut out = NoColor::new(Vec::new());
    for d in diagnostics {
        let clamp =
            |s: Span| s.start.min(source.len())..s.end.min(source.len()).max(s.start.min(source.len()));
        let mut labels = vec![cs::Label::primary((), clamp(d.primary.span)).with_message(&d.primary.message)];
        labels.extend(
            d.secondary.iter().map(|l| cs::Label::secondary((), clamp(l.span)).with_message(&l.message)),
        );
        let mut notes = d.notes.clone();
        if let Some(help) = &d.help {
            notes.push(format!("help: {help}"));
        }
        let diag = match d.severity {
            Severity::Error => cs::Diagnostic::error(),
            Severity::Warning => cs::Diagnostic::warning(),
        }
        .with_code(d.code)
        .with_message(&d.message)
        .with_labels(labels)
        .with_notes(notes);
        // Writing to memory cannot fail, and every span was clamped into the file.
        term::emit(&mut out, &config, &file, &diag).expect("rendering into memory");
    }
    String::from_utf8(out.into_inner()).expect("codespan writes UTF-8")
}

/// 1-based line and column (in characters) of byte `offset` of `source`.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..source.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
