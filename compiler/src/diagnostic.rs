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
    /// A stable code, `E0001`… (`W…` for warnings), documented in `docs/errors.md` as the language grows.
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
