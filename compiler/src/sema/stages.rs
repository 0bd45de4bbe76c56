//! Checking stages against their signatures: each stage of the language, its arguments
//! (positional in order, or by name), their kinds and defaults, and whether it takes a
//! block. Arguments may be literals, `auto` where tf.data has AUTOTUNE, enum words
//! (`gzip`, `skip`), or references to the pipeline's parameters, whose declared types
//! are checked against what the argument needs.
//!
//! Codes: E0200 unknown stage, E0201 unknown argument name, E0202 too many arguments,
//! E0203 missing argument, E0204 argument given twice, E0205 argument of the wrong kind,
//! E0206 zero size, E0207 unknown enum word, E0208 block not allowed or required, E0209
//! unknown name in an argument, E0211 a `cycle` or `parallel` above what any machine can
//! honour (`ir::limits`).
//!
//! The block of `map` (per-field statements) and the predicate of `filter` are typed
//! against the element type by the plan lowering, not here.

use crate::ast::{self, ExprKind};
use crate::diagnostic::Diagnostic;
use crate::ir::options;
use crate::ir::types::{ParamType, Value};

use super::args::{BindError, bind};
use super::decls::{Declarations, closest};
pub use super::stage_kind::StageKind;

/// What an argument must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A count of at least 1 (sizes, lengths).
    Count,
    /// Any unsigned integer (seeds, indices, limits).
    UInt,
    /// Any integer, negative too (the bounds and step of `range`).
    Int,
    /// `true` or `false`.
    Bool,
    /// A count of at least 1, or `auto`.
    CountOrAuto,
    /// A count of at least 1, or `global` (a shuffle of the whole dataset).
    CountOrGlobal,
    /// A file glob (a string, or a `glob`/`path`/`string` parameter).
    Glob,
    /// A file path.
    Path,
    /// `auto`, `none`, `gzip` or `zlib`.
    Compression,
    /// `fail`, `skip` or `skip_file`.
    CorruptPolicy,
    /// `keep`, `drop` or `pad`: what `shard` does with the last, partial round.
    Remainder,
    /// One ASCII character other than a quote or a line break, as a string (`csv`'s
    /// delimiter).
    Char,
    /// `dir` (the label is the index of the file's folder) or `none`.
    Labels,
    /// `fail` or `skip`: what a `map` does with an element its operations fail on.
    OnError,
    /// A boolean or numeric expression over the element's fields (checked later).
    Expr,
}

impl ArgKind {
    fn describe(self) -> &'static str {
        match self {
            ArgKind::Count => "a count of at least 1",
            ArgKind::UInt => "an unsigned integer",
            ArgKind::Int => "an integer",
            ArgKind::Bool => "`true` or `false`",
            ArgKind::CountOrAuto => "a count of at least 1 or `auto`",
            ArgKind::CountOrGlobal => "a buffer size of at least 1 or `global`",
            ArgKind::Glob => "a file glob",
            ArgKind::Path => "a file path",
            ArgKind::Compression => "`auto`, `none`, `gzip` or `zlib`",
            ArgKind::CorruptPolicy => "`fail`, `skip` or `skip_file`",
            ArgKind::Remainder => "`keep`, `drop` or `pad`",
            ArgKind::Char => "one ASCII character other than a quote or a line break, such as \",\"",
            ArgKind::Labels => "`dir` or `none`",
            ArgKind::OnError => "`fail` or `skip`",
            ArgKind::Expr => "an expression",
        }
    }

    fn words(self) -> &'static [&'static str] {
        match self {
            ArgKind::CountOrAuto => &["auto"],
            ArgKind::CountOrGlobal => &[options::ShuffleBuffer::GLOBAL],
            ArgKind::Compression => options::Compression::WORDS,
            ArgKind::CorruptPolicy => options::CorruptPolicy::WORDS,
            ArgKind::Remainder => options::Remainder::WORDS,
            ArgKind::Labels => options::Labels::WORDS,
            ArgKind::OnError => options::OnError::WORDS,
            _ => &[],
        }
    }
}

/// One parameter of a stage.
#[derive(Debug, Clone, Copy)]
pub struct ArgSig {
    /// Its name (for `name: value`).
    pub name: &'static str,
    /// What it must be.
    pub kind: ArgKind,
    /// Whether it must be given.
    pub required: bool,
}

/// What may follow a stage's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// Nothing: the stage ends with `;`.
    None,
    /// Per-field statements (`map`).
    Statements,
    /// The stages that read each input element (`interleave`).
    Stages,
    /// A source made from each element, then stages over it (`flat_map`).
    Chain,
}

/// A stage of the language.
#[derive(Debug, Clone, Copy)]
pub struct StageSig {
    /// Its name.
    pub name: &'static str,
    /// Which stage it is.
    pub kind: StageKind,
    /// Its parameters, positional order first.
    pub args: &'static [ArgSig],
    /// Its block.
    pub block: BlockKind,
}

const fn req(name: &'static str, kind: ArgKind) -> ArgSig {
    ArgSig { name, kind, required: true }
}

const fn opt(name: &'static str, kind: ArgKind) -> ArgSig {
    ArgSig { name, kind, required: false }
}

use ArgKind::*;

/// Every stage, with the options of the runtime's stages ([2/9]).
pub const STAGES: &[StageSig] = &[
    StageSig {
        name: "files",
        kind: StageKind::Files,
        args: &[req("pattern", Glob), opt("shuffle", Bool), opt("seed", UInt)],
        block: BlockKind::None,
    },
    // `range(end)`, `range(start, end)`, `range(start, end, step)`: one argument is the end.
    StageSig {
        name: "range",
        kind: StageKind::Range,
        args: &[opt("start", Int), opt("end", Int), opt("step", Int)],
        block: BlockKind::None,
    },
    StageSig {
        name: "tfrecord",
        kind: StageKind::Tfrecord,
        args: &[opt("compression", Compression), opt("on_corrupt", CorruptPolicy), opt("verify_crc", Bool)],
        block: BlockKind::None,
    },
    StageSig {
        name: "tfrecords",
        kind: StageKind::Tfrecords,
        args: &[
            req("files", Glob),
            opt("cycle", CountOrAuto),
            opt("block", Count),
            opt("parallel", CountOrAuto),
            opt("deterministic", Bool),
            opt("compression", Compression),
            opt("on_corrupt", CorruptPolicy),
            opt("verify_crc", Bool),
        ],
        block: BlockKind::None,
    },
    // `tf.data.TextLineDataset`: one element `{line: str}` per line of each file.
    StageSig {
        name: "text_lines",
        kind: StageKind::TextLines,
        args: &[
            req("files", Glob),
            opt("cycle", CountOrAuto),
            opt("block", Count),
            opt("parallel", CountOrAuto),
            opt("deterministic", Bool),
            opt("compression", Compression),
            opt("on_error", OnError),
        ],
        block: BlockKind::None,
    },
    // `tf.data.experimental.CsvDataset`: one element per row, the schema's columns.
    StageSig {
        name: "csv",
        kind: StageKind::Csv,
        args: &[
            req("files", Glob),
            opt("header", Bool),
            opt("delimiter", Char),
            opt("cycle", CountOrAuto),
            opt("block", Count),
            opt("parallel", CountOrAuto),
            opt("deterministic", Bool),
            opt("compression", Compression),
            opt("on_error", OnError),
        ],
        block: BlockKind::None,
    },
    // Parquet tables (Spark, pyarrow, pandas, `datasets`): one element per row, the
    // schema's columns found by name.
    StageSig {
        name: "parquet",
        kind: StageKind::Parquet,
        args: &[
            req("files", Glob),
            opt("cycle", CountOrAuto),
            opt("block", Count),
            opt("parallel", CountOrAuto),
            opt("deterministic", Bool),
            opt("on_error", OnError),
        ],
        block: BlockKind::None,
    },
    // WebDataset tar shards: one element per sample, the schema's fields its members
    // (by extension) and `__key__`.
    StageSig {
        name: "webdataset",
        kind: StageKind::WebDataset,
        args: &[
            req("files", Glob),
            opt("cycle", CountOrAuto),
            opt("block", Count),
            opt("parallel", CountOrAuto),
            opt("deterministic", Bool),
            opt("compression", Compression),
            opt("on_error", OnError),
        ],
        block: BlockKind::None,
    },
    // `tf.io.read_file` over `files(...)`: `{contents: bytes, path: str}` per file, plus
    // `label: i64` with `labels: dir` (Keras' `image_dataset_from_directory`).
    StageSig {
        name: "read_file",
        kind: StageKind::ReadFile,
        args: &[opt("labels", Labels), opt("on_error", CorruptPolicy)],
        block: BlockKind::None,
    },
    StageSig {
        name: "interleave",
        kind: StageKind::Interleave,
        args: &[
            opt("cycle", CountOrAuto),
            opt("block", Count),
            opt("parallel", CountOrAuto),
            opt("deterministic", Bool),
        ],
        block: BlockKind::Stages,
    },
    StageSig {
        name: "map",
        kind: StageKind::Map,
        // `on_error: skip`: tf.data's `ignore_errors` after the map.
        args: &[opt("parallel", CountOrAuto), opt("deterministic", Bool), opt("on_error", OnError)],
        block: BlockKind::Statements,
    },
    StageSig {
        name: "filter",
        kind: StageKind::Filter,
        args: &[req("predicate", Expr)],
        block: BlockKind::None,
    },
    // Variadic: the fields to keep (checked against the element by the lowering).
    StageSig { name: "select", kind: StageKind::Select, args: &[], block: BlockKind::None },
    // Variadic: the pipelines to mix (checked by the lowering), then named options.
    StageSig {
        name: "sample_from",
        kind: StageKind::SampleFrom,
        args: &[req("weights", Expr), opt("seed", UInt), opt("stop_on_empty", Bool)],
        block: BlockKind::None,
    },
    // Variadic: the pipelines whose elements are merged field by field (`zip`) or
    // yielded one after another (`concatenate`), checked by the lowering.
    StageSig { name: "zip", kind: StageKind::Zip, args: &[], block: BlockKind::None },
    StageSig { name: "concatenate", kind: StageKind::Concatenate, args: &[], block: BlockKind::None },
    // `index: i64` from `start` (tf.data's `Dataset.enumerate`).
    StageSig {
        name: "enumerate",
        kind: StageKind::Enumerate,
        args: &[opt("start", Int)],
        block: BlockKind::None,
    },
    StageSig {
        name: "take_while",
        kind: StageKind::TakeWhile,
        args: &[req("predicate", Expr)],
        block: BlockKind::None,
    },
    StageSig { name: "flat_map", kind: StageKind::FlatMap, args: &[], block: BlockKind::Chain },
    StageSig {
        name: "shuffle",
        kind: StageKind::Shuffle,
        args: &[
            req("buffer", CountOrGlobal),
            opt("seed", UInt),
            opt("reshuffle_each_epoch", Bool),
            opt("window", Count),
        ],
        block: BlockKind::None,
    },
    StageSig {
        name: "batch",
        kind: StageKind::Batch,
        args: &[req("size", Count), opt("drop_remainder", Bool)],
        block: BlockKind::None,
    },
    StageSig {
        name: "padded_batch",
        kind: StageKind::PaddedBatch,
        args: &[
            req("size", Count),
            opt("drop_remainder", Bool),
            opt("pad_to", Count),
            opt("pad_to_multiple", Count),
            opt("padding_values", Expr),
        ],
        block: BlockKind::None,
    },
    StageSig { name: "unbatch", kind: StageKind::Unbatch, args: &[], block: BlockKind::None },
    // tf.data's `bucket_by_sequence_length`: padded batches of each length bucket
    // (`sema/bucket.rs`, `stage::bucket`).
    StageSig {
        name: "bucket_by_length",
        kind: StageKind::BucketByLength,
        args: &[
            req("length", Expr),
            req("boundaries", Expr),
            req("batch_sizes", Expr),
            opt("pad_to_bucket_boundary", Bool),
            opt("drop_remainder", Bool),
            opt("padding_values", Expr),
        ],
        block: BlockKind::None,
    },
    // Token sequences (`i32[]` fields, in lockstep) packed into rows of `length`, first
    // fit over `window` open rows (T5's and Grain's packing; `sema/pack.rs`).
    StageSig {
        name: "pack",
        kind: StageKind::Pack,
        args: &[req("length", Count), req("fields", Expr), opt("window", Count), opt("overflow", Expr)],
        block: BlockKind::None,
    },
    // tf.data's `window(size, shift, stride, drop_remainder)`, each window a columnar
    // batch (`.flat_map(lambda w: w.batch(size))`; `sema/window.rs`).
    StageSig {
        name: "window",
        kind: StageKind::Window,
        args: &[req("size", Count), opt("shift", Count), opt("stride", Count), opt("drop_remainder", Bool)],
        block: BlockKind::None,
    },
    StageSig {
        name: "repeat",
        kind: StageKind::Repeat,
        args: &[opt("count", Count)],
        block: BlockKind::None,
    },
    StageSig { name: "take", kind: StageKind::Take, args: &[req("count", UInt)], block: BlockKind::None },
    StageSig { name: "skip", kind: StageKind::Skip, args: &[req("count", UInt)], block: BlockKind::None },
    // Worker `index` of `num_shards` gets positions `index`, `index + num_shards`, … of
    // each pass; the last, partial round of `N mod num_shards` elements is dealt out
    // (`keep`: each record once, counts differ by at most one), dropped (`drop`: every
    // worker exactly `floor(N / num_shards)`) or padded with the pass's first elements
    // (`pad`: every worker exactly `ceil(N / num_shards)`, as PyTorch's
    // `DistributedSampler`). `drop` and `pad` shard record by record, so every worker
    // reads every file; a `keep` shard of files is file-level (W0210).
    StageSig {
        name: "shard",
        kind: StageKind::Shard,
        args: &[req("num_shards", Count), req("index", UInt), opt("remainder", Remainder)],
        block: BlockKind::None,
    },
    StageSig { name: "cache", kind: StageKind::Cache, args: &[opt("file", Path)], block: BlockKind::None },
    StageSig {
        name: "prefetch",
        kind: StageKind::Prefetch,
        args: &[opt("buffer", CountOrAuto)],
        block: BlockKind::None,
    },
];

/// The signature of the stage called `name`.
pub fn stage(name: &str) -> Option<&'static StageSig> {
    STAGES.iter().find(|s| s.name == name)
}

/// Checks every stage of a pipeline (and the stages in `interleave` blocks).
pub fn check_stages(p: &ast::Pipeline, decls: &Declarations, diags: &mut Vec<Diagnostic>) {
    for item in &p.items {
        if let ast::Item::Stage(s) = item {
            check_stage(s, decls, diags);
        }
    }
}

pub(super) fn check_stage(s: &ast::Stage, decls: &Declarations, diags: &mut Vec<Diagnostic>) {
    let Some(sig) = stage(&s.name.name) else {
        let names: Vec<&str> = STAGES.iter().map(|s| s.name).collect();
        let d = Diagnostic::error("E0200", format!("unknown stage `{}`", s.name), s.name.span, "not a stage");
        diags.push(match closest(&s.name.name, &names) {
            Some(c) => d.with_help(format!("did you mean `{c}`?")),
            None => d.with_note(format!("the stages are: {}", names.join(", "))),
        });
        return;
    };
    if sig.kind == StageKind::Select {
        if s.args.is_empty() {
            diags.push(
                Diagnostic::error("E0203", "`select` needs the fields to keep", s.name.span, "no fields")
                    .with_help("write `select(image, label);`"),
            );
        }
        for a in &s.args {
            let is_name = matches!(&a.value.kind, ExprKind::Path(p) if p.segments.len() == 1);
            if a.name.is_some() || !is_name {
                diags.push(Diagnostic::error(
                    "E0205",
                    "`select` takes field names",
                    a.span,
                    "not a field name",
                ));
            }
        }
        if let Some(b) = &s.body {
            diags.push(Diagnostic::error(
                "E0208",
                "`select` does not take a block",
                b.span,
                "unexpected block",
            ));
        }
        return;
    }
    // `sample_from`: positional arguments name the pipelines mixed (resolved by the
    // lowering); its named options bind like any stage's.
    let options: Vec<ast::Arg>;
    let args: &[ast::Arg] = if sig.kind.takes_pipelines() {
        let (verb, example) = match sig.kind {
            StageKind::Zip => ("zip", "zip(a, b);"),
            StageKind::Concatenate => ("concatenate", "concatenate(a, b);"),
            _ => ("mix", "sample_from(a, b, weights: [0.5, 0.5]);"),
        };
        let names: Vec<&ast::Arg> = s.args.iter().filter(|a| a.name.is_none()).collect();
        if names.is_empty() {
            diags.push(
                Diagnostic::error(
                    "E0203",
                    format!("`{}` needs the pipelines to {verb}", sig.name),
                    s.name.span,
                    "no pipelines",
                )
                .with_help(format!("write `{example}`")),
            );
        }
        if names.len() == 1 && sig.kind != StageKind::SampleFrom {
            diags.push(
                Diagnostic::error(
                    "E0203",
                    format!("`{}` needs at least two pipelines", sig.name),
                    s.name.span,
                    "one pipeline",
                )
                .with_help(format!("write `{example}`")),
            );
        }
        for a in names {
            if !matches!(&a.value.kind, ExprKind::Path(p) if p.segments.len() == 1) {
                diags.push(Diagnostic::error(
                    "E0205",
                    format!(
                        "`{}` {verb}{} pipelines, by name",
                        sig.name,
                        if verb == "mix" { "es" } else { "s" }
                    ),
                    a.span,
                    "not a pipeline name",
                ));
            }
        }
        options = s.args.iter().filter(|a| a.name.is_some()).cloned().collect();
        &options
    } else if sig.kind == StageKind::Map {
        // Rust code (`pipeline!` only) is the map itself, not one of its options.
        let code: Vec<&ast::Arg> = s.args.iter().filter(|a| is_rust(&a.value)).collect();
        if let Some(b) = code.first().and(s.body.as_ref()) {
            diags.push(Diagnostic::error(
                "E0208",
                "a `map` with Rust code does not take a block",
                b.span,
                "unexpected block",
            ));
        }
        for extra in code.iter().skip(1) {
            diags.push(
                Diagnostic::error("E0202", "a `map` calls one Rust function", extra.span, "one too many")
                    .with_help("write a second `map`"),
            );
        }
        options = s.args.iter().filter(|a| !is_rust(&a.value)).cloned().collect();
        &options
    } else {
        &s.args
    };
    // Arguments: positional ones fill the signature in order, then named ones by name.
    let params: Vec<&str> = sig.args.iter().map(|a| a.name).collect();
    let (given, errors) = bind(&params, args);
    for e in errors {
        diags.push(match e {
            BindError::TooMany(arg) => Diagnostic::error(
                "E0202",
                format!("`{}` takes at most {} argument(s)", sig.name, sig.args.len()),
                arg.span,
                "one too many",
            )
            .with_note(signature(sig)),
            BindError::Unknown(name) => {
                let d = Diagnostic::error(
                    "E0201",
                    format!("`{}` has no argument `{}`", sig.name, name),
                    name.span,
                    "unknown argument",
                );
                match closest(&name.name, &params) {
                    Some(c) => d.with_help(format!("did you mean `{c}`?")),
                    None => d.with_note(signature(sig)),
                }
            }
            BindError::Twice { first, again, slot } => Diagnostic::error(
                "E0204",
                format!("argument `{}` of `{}` is given twice", sig.args[slot].name, sig.name),
                again.span,
                "again here",
            )
            .with_label(first.span, "first here"),
        });
    }
    for (a, g) in sig.args.iter().zip(&given) {
        if let Some(arg) = g {
            check_arg(sig, a, &arg.value, decls, diags);
        }
    }
    for (a, g) in sig.args.iter().zip(&given) {
        if a.required && g.is_none() {
            diags.push(
                Diagnostic::error(
                    "E0203",
                    format!("`{}` needs its `{}` argument", sig.name, a.name),
                    s.name.span,
                    format!("missing: {}", a.kind.describe()),
                )
                .with_note(signature(sig)),
            );
        }
    }
    match (sig.block, &s.body) {
        (BlockKind::None, Some(b)) => diags.push(Diagnostic::error(
            "E0208",
            format!("`{}` does not take a block", sig.name),
            b.span,
            "unexpected block",
        )),
        (BlockKind::Statements, None) if s.args.iter().any(|a| is_rust(&a.value)) => {}
        (BlockKind::Statements | BlockKind::Stages | BlockKind::Chain, None) => diags.push(
            Diagnostic::error("E0208", format!("`{}` needs a block", sig.name), s.span, "no block")
                .with_help(match sig.block {
                    BlockKind::Statements => format!("write `{} {{ field = op(field); }}`", sig.name),
                    BlockKind::Chain => format!("write `{} {{ range(0, value); }}`", sig.name),
                    _ => format!("write `{}(...) {{ tfrecord(); }}`", sig.name),
                }),
        ),
        (BlockKind::Chain, Some(b)) => super::flat_map::check_block(b, decls, diags),
        (BlockKind::Statements, Some(b)) => no_nested_blocks(sig, b, diags),
        (BlockKind::Stages, Some(b)) => {
            // The block of `interleave` holds stages, written as statements `name(args);`.
            no_nested_blocks(sig, b, diags);
            for st in &b.stmts {
                match (&st.target, &st.value.kind) {
                    (None, ExprKind::Call { callee, args, ret: None }) if callee.segments.len() == 1 => {
                        let inner = ast::Stage {
                            name: callee.segments[0].clone(),
                            args: args.clone(),
                            body: None,
                            span: st.span,
                        };
                        check_stage(&inner, decls, diags);
                    }
                    _ => diags.push(
                        Diagnostic::error(
                            "E0208",
                            "an `interleave` block holds stages",
                            st.span,
                            "not a stage",
                        )
                        .with_help(
                            "write the stages that read each input, e.g. `tfrecord(compression: gzip);`",
                        ),
                    ),
                }
            }
        }
        _ => {}
    }
}

/// E0208 for each statement of a `map` or `interleave` block written with a block of its
/// own (only the stages of a `flat_map` block take one).
fn no_nested_blocks(sig: &StageSig, b: &ast::Block, diags: &mut Vec<Diagnostic>) {
    for st in &b.stmts {
        if let Some(inner) = &st.body {
            diags.push(
                Diagnostic::error(
                    "E0208",
                    format!("a statement of `{}` does not take a block", sig.name),
                    inner.span,
                    "unexpected block",
                )
                .with_help("end the statement with `;`"),
            );
        }
    }
}

fn signature(sig: &StageSig) -> String {
    let args: Vec<String> = sig
        .args
        .iter()
        .map(|a| format!("{}{}: {}", a.name, if a.required { "" } else { "?" }, a.kind.describe()))
        .collect();
    format!("signature: `{}({})`", sig.name, args.join(", "))
}

/// Checks one argument's value against what it must be.
/// The largest value argument `a` takes, when one is set (`ir::limits`).
fn limit(a: &ArgSig) -> Option<u64> {
    crate::ir::limits::limit(a.name)
}

/// E0211: argument `a` of `sig` above `max`.
fn too_large(sig: &StageSig, a: &ArgSig, max: u64, span: crate::span::Span) -> Diagnostic {
    let help = match a.name {
        "parallel" => format!(
            "at most {max} threads; `auto` picks them from the cores (a stage starts at most 4 per core)"
        ),
        _ => format!("at most {max} files open at once; `auto` reads as many as the cores"),
    };
    Diagnostic::error("E0211", format!("`{}` of `{}` is above {max}", a.name, sig.name), span, "too large")
        .with_help(help)
}

fn check_arg(sig: &StageSig, a: &ArgSig, e: &ast::Expr, decls: &Declarations, diags: &mut Vec<Diagnostic>) {
    if a.kind == ArgKind::Expr {
        return;
    }
    let wrong = |found: String| {
        Diagnostic::error(
            "E0205",
            format!("argument `{}` of `{}` must be {}", a.name, sig.name, a.kind.describe()),
            e.span,
            found,
        )
    };
    match &e.kind {
        ExprKind::Path(p) if p.segments.len() == 1 => {
            let name = &p.segments[0].name;
            if a.kind.words().contains(&name.as_str()) {
                return;
            }
            if let Some(param) = decls.params.iter().find(|q| &q.name == name) {
                let ok = match a.kind {
                    Count | UInt | CountOrAuto | CountOrGlobal => {
                        matches!(param.ty, ParamType::U32 | ParamType::U64)
                    }
                    Int => matches!(param.ty, ParamType::U32 | ParamType::U64 | ParamType::I64),
                    Bool => param.ty == ParamType::Bool,
                    Glob | Path => matches!(param.ty, ParamType::Glob | ParamType::Path | ParamType::Str),
                    _ => false,
                };
                if !ok {
                    diags.push(
                        wrong(format!("parameter `{name}` is a `{}`", param.ty))
                            .with_label(param.span, format!("`{name}` is declared here")),
                    );
                } else if let Some(max) = limit(a)
                    && let Some(n) = match param.default {
                        Some(Value::Int(n)) if n >= 0 => Some(n as u64),
                        Some(Value::UInt(n)) => Some(n),
                        _ => None,
                    }
                    && n > max
                {
                    diags.push(
                        too_large(sig, a, max, e.span)
                            .with_label(param.span, format!("`{name}` defaults to {n} here")),
                    );
                } else if matches!(a.kind, Count | CountOrAuto | CountOrGlobal)
                    && matches!(param.default, Some(Value::Int(0)))
                {
                    diags.push(
                        Diagnostic::error(
                            "E0206",
                            format!("`{}` of `{}` is zero", a.name, sig.name),
                            e.span,
                            "zero",
                        )
                        .with_label(param.span, format!("`{name}` defaults to 0 here")),
                    );
                }
                return;
            }
            if !a.kind.words().is_empty() {
                let d = Diagnostic::error(
                    "E0207",
                    format!("`{name}` is not a value of `{}`", a.name),
                    e.span,
                    format!("expected {}", a.kind.describe()),
                );
                diags.push(match closest(name, a.kind.words()) {
                    Some(c) => d.with_help(format!("did you mean `{c}`?")),
                    None => d,
                });
                return;
            }
            let params: Vec<&str> = decls.params.iter().map(|p| p.name.as_str()).collect();
            let d = Diagnostic::error(
                "E0209",
                format!("unknown name `{name}`"),
                e.span,
                "not a parameter of this pipeline",
            );
            diags.push(match closest(name, &params) {
                Some(c) => d.with_help(format!("did you mean the parameter `{c}`?")),
                None => d.with_help(format!("declare it: `pipeline {}(..., {name}: u64 = ...)`", decls.name)),
            });
        }
        ExprKind::Int(n) => match a.kind {
            Count | CountOrAuto | CountOrGlobal if *n == 0 => diags.push(
                Diagnostic::error("E0206", format!("`{}` of `{}` is zero", a.name, sig.name), e.span, "zero")
                    .with_help("sizes and counts are at least 1"),
            ),
            Count | CountOrAuto | CountOrGlobal if limit(a).is_some_and(|max| *n > max) => {
                diags.push(too_large(sig, a, limit(a).unwrap_or(0), e.span))
            }
            Count | CountOrAuto | CountOrGlobal | UInt | Int => {}
            _ => diags.push(wrong(format!("found the integer `{n}`"))),
        },
        ExprKind::Unary(ast::UnaryOp::Neg, _)
            if matches!(a.kind, Count | CountOrAuto | CountOrGlobal | UInt) =>
        {
            diags.push(
                Diagnostic::error(
                    "E0206",
                    format!("`{}` of `{}` is negative", a.name, sig.name),
                    e.span,
                    "negative",
                )
                .with_help("sizes, counts and seeds are unsigned"),
            )
        }
        ExprKind::Unary(ast::UnaryOp::Neg, inner)
            if a.kind == Int && matches!(inner.kind, ExprKind::Int(_)) => {}
        ExprKind::Bool(_) if a.kind == Bool => {}
        ExprKind::Str(_) if matches!(a.kind, Glob | Path) => {}
        ExprKind::Str(c) if a.kind == Char => {
            if !matches!(c.as_bytes(), [b] if b.is_ascii() && !matches!(b, b'"' | b'\n' | b'\r')) {
                diags.push(wrong(format!("found {c:?}")));
            }
        }
        other => diags.push(wrong(format!("found {}", describe(other)))),
    }
}

/// Whether an argument is Rust code (a closure or function path in `pipeline!`).
pub(crate) fn is_rust(e: &ast::Expr) -> bool {
    matches!(e.kind, ExprKind::Rust(_))
}

fn describe(e: &ExprKind) -> &'static str {
    match e {
        ExprKind::Int(_) => "an integer",
        ExprKind::Float(_) => "a float",
        ExprKind::Str(_) => "a string",
        ExprKind::Bool(_) => "a bool",
        ExprKind::Quantity(..) => "an amount of memory",
        ExprKind::Path(_) => "a path",
        ExprKind::List(_) => "a list",
        ExprKind::Call { .. } => "a call",
        ExprKind::Unary(..) | ExprKind::Binary(..) => "an expression",
        ExprKind::Rust(_) => "Rust code",
    }
}
