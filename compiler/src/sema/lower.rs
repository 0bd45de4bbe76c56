//! Lowering a checked pipeline to the logical plan ([`ir::plan`](crate::ir::plan)):
//! stages in order become nodes, each on top of the previous one, with the element type
//! tracked from the source (paths) through reading (records), `parse_example` (the
//! schema's fields) and `batch`.
//!
//! Codes: E0300 a pipeline without stages, E0301 a stage before the source, E0302 a
//! second source, E0303 `tfrecord` with no files to read, E0304 `interleave` not reading
//! files, E0305 `parse_example` without records or without a schema, E0306 `unbatch` of
//! elements that are neither batches nor fields each with a leading dimension
//! ([`unbatch`](super::unbatch)), E0307 an `interleave` block without exactly one
//! reader, E0308 `batch` of fields whose size varies, E0407 a `filter` predicate that is not one bool;
//! `select` of an unknown field is E0401; E0309 a pipeline that mixes itself (directly or
//! through others), E0310 `sample_from` of an unknown pipeline, E0311 mixed pipelines of
//! different element types, E0312 bad weights, E0313 Rust code in `map`/`filter`
//! (`pipeline!`) on elements without fields, E0314 `shuffle(global)` anywhere but right
//! after the reader of the files (`tfrecords` or `parquet`: [`shuffle`](super::shuffle)); E0315 (`sema::check_file`, before any lowering) a
//! pipeline of more than `MAX_STAGES` stages; E0320/E0321 a `range` without an end or
//! with a bound that is not an i64 (or a step of 0); E0322 `csv` without a schema or with
//! a schema field that is not one value per row; E0323 `read_file` not reading file
//! paths; E0330–E0333 the stages of [`combine`](super::combine) (`zip`, `concatenate`,
//! `enumerate`); E0350–E0353 and W0354: `pack` ([`pack`](super::pack)); E0360–E0364:
//! `flat_map` ([`flat_map`](super::flat_map)); E0365/E0366 `window`
//! ([`window`](super::window)). (W0210, a `shard` whose workers read whole files, is
//! a check on the optimized plan: see the [`driver`](crate::driver).)
//!
//! Per-field operations and `filter` predicates are typed here ([`ops`](super::ops)):
//! the plan holds them as typed IR expressions. Rust code (`pipeline!`) stays text in the
//! plan; its tokens go to a table beside it.

use crate::ast::{self, ExprKind, Span};
use crate::diagnostic::Diagnostic;
use crate::ir::plan::*;
use crate::ir::types::Value;

use super::decls::Declarations;
use super::sources::{csv_format, parquet_format, range, webdataset_format};
use super::stages::{StageKind, StageSig, stage};

/// The pipelines of the file a `sample_from` may mix: name → output element (`None` for
/// a pipeline that had errors).
pub type Pipelines = std::collections::HashMap<String, Option<Element>>;

/// The pipelines a pipeline takes with `sample_from`, `zip` or `concatenate` (its
/// dependencies).
pub fn sample_inputs(p: &ast::Pipeline) -> Vec<String> {
    p.items
        .iter()
        .filter_map(|i| match i {
            ast::Item::Stage(s) if stage(&s.name.name).is_some_and(|sig| sig.kind.takes_pipelines()) => {
                Some(s)
            }
            _ => None,
        })
        .flat_map(|s| s.args.iter().filter(|a| a.name.is_none()).map(|a| a.value.to_string()))
        .collect()
}

/// Lowers one pipeline; `None` (with diagnostics) when its structure is wrong.
/// `pipelines` holds the other pipelines of the file lowered so far; the tokens of the
/// pipeline's Rust code go to `rust_code` (a [`RustStage`] holds its index there).
pub fn lower(
    p: &ast::Pipeline,
    decls: &Declarations,
    pipelines: &Pipelines,
    rust_code: &mut Vec<proc_macro2::TokenStream>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let stages: Vec<&ast::Stage> = p
        .items
        .iter()
        .filter_map(|i| match i {
            ast::Item::Stage(s) => Some(s),
            _ => None,
        })
        .collect();
    if stages.is_empty() {
        diags.push(
            Diagnostic::error(
                "E0300",
                format!("pipeline `{}` has no stages", p.name),
                p.name.span,
                "reads nothing",
            )
            .with_help("start it with a source: `tfrecords(files);` or `files(pattern);`"),
        );
        return None;
    }
    chain(p, &stages, None, decls, pipelines, rust_code, diags)
}

/// Lowers `stages` in order on top of `plan` (`None`: the first is the source): a
/// pipeline's stages, or those of a `flat_map` block over its inner source.
pub(super) fn chain(
    p: &ast::Pipeline,
    stages: &[&ast::Stage],
    mut plan: Option<Plan>,
    decls: &Declarations,
    pipelines: &Pipelines,
    rust_code: &mut Vec<proc_macro2::TokenStream>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    for s in stages.iter().copied() {
        // Unknown stages were reported by the stage checks.
        let sig = stage(&s.name.name)?;
        // A `map`'s Rust code is not one of its options (see `stages`).
        let options: Vec<ast::Arg>;
        let stage_args = if sig.kind == StageKind::Map {
            options = s.args.iter().filter(|a| !super::stages::is_rust(&a.value)).cloned().collect();
            &options
        } else {
            &s.args
        };
        let args = bind(sig, stage_args);
        // An argument's expression, its value as the plan keeps it, its enumeration word.
        let arg = |name: &str| sig.args.iter().position(|x| x.name == name).and_then(|i| args[i]);
        let a = |name: &str| arg(name).and_then(|e| value(e, decls).ok());
        // An integer of `range` or `enumerate`, which may be below the smallest i64.
        let int = |name: &str| arg(name).map(|e| value(e, decls));
        let w = |name: &str| arg(name).and_then(word);
        let flag = |name: &str, default: bool| match a(name) {
            Some(ArgValue::Const(Value::Bool(b))) => b,
            _ => default,
        };
        let is_source = sig.kind.is_source();
        let Some(input) = plan.take() else {
            if !is_source {
                diags.push(
                    Diagnostic::error(
                        "E0301",
                        format!("`{}` comes before the pipeline's source", sig.name),
                        s.name.span,
                        "nothing to read from yet",
                    )
                    .with_help("start the pipeline with `tfrecords(files);` or `files(pattern);`"),
                );
                return None;
            }
            if sig.kind == StageKind::SampleFrom {
                plan = Some(sample_from(s, p, decls, pipelines, diags)?);
                continue;
            }
            if sig.kind == StageKind::Zip {
                plan = Some(super::combine::zip(s, p, pipelines, diags)?);
                continue;
            }
            if sig.kind == StageKind::Concatenate {
                plan = Some(super::combine::concatenate(s, p, pipelines, diags)?);
                continue;
            }
            if sig.kind == StageKind::Range {
                plan = Some(range(s, int("start"), int("end"), int("step"), diags)?);
                continue;
            }
            let files = Plan::Files(Files {
                pattern: a(if sig.kind == StageKind::Files { "pattern" } else { "files" })
                    .unwrap_or(ArgValue::Auto),
                shuffle_seed: if flag("shuffle", false) {
                    Some(a("seed").unwrap_or(ArgValue::Const(Value::Int(0))))
                } else {
                    None
                },
            });
            let format = match sig.kind {
                StageKind::Tfrecords => RecordFormat::TfRecord,
                StageKind::TextLines => RecordFormat::Lines,
                StageKind::Csv => {
                    RecordFormat::Csv(csv_format(s, a("delimiter"), flag("header", true), decls, diags)?)
                }
                StageKind::Parquet => RecordFormat::Parquet(parquet_format(s, decls, diags)?),
                StageKind::WebDataset => RecordFormat::WebDataset(webdataset_format(s, decls, diags)?),
                _ => {
                    plan = Some(files);
                    continue;
                }
            };
            let parse = match &format {
                RecordFormat::TfRecord => None,
                RecordFormat::Lines => Some(MapOp::Parse {
                    format: ParseFormat::Line,
                    fields: vec![FieldType {
                        name: "line".into(),
                        ty: Some(crate::ir::types::TensorType {
                            dtype: crate::ir::types::DType::Str,
                            shape: crate::ir::types::Shape::scalar(),
                        }),
                    }],
                }),
                RecordFormat::Parquet(p) | RecordFormat::WebDataset(p) => {
                    Some(MapOp::Parse { format: ParseFormat::Table, fields: p.columns.clone() })
                }
                RecordFormat::Csv(_) => Some(MapOp::Parse {
                    format: ParseFormat::Csv,
                    fields: decls
                        .schema
                        .iter()
                        .map(|f| FieldType { name: f.name.clone(), ty: Some(f.ty.clone()) })
                        .collect(),
                }),
            };
            let read = Plan::Interleave(Interleave {
                input: Box::new(files),
                format,
                cycle_length: a("cycle").unwrap_or(ArgValue::Const(Value::Int(1))),
                block_length: a("block").unwrap_or(ArgValue::Const(Value::Int(1))),
                parallel: a("parallel").unwrap_or(ArgValue::Const(Value::Int(1))),
                deterministic: flag("deterministic", true),
                compression: w("compression").and_then(Compression::from_word).unwrap_or(Compression::Auto),
                on_corrupt: w("on_corrupt").and_then(CorruptPolicy::from_word).unwrap_or(CorruptPolicy::Fail),
                verify_crc: flag("verify_crc", true),
            });
            // Text sources give fields at once: the parse is a map of its own, which the
            // optimizer fuses with the user's maps.
            plan = Some(match parse {
                None => read,
                Some(op) => {
                    let output = op.apply(&Element::Record);
                    Plan::Map(Map {
                        input: Box::new(read),
                        ops: vec![op],
                        parallel: ArgValue::Const(Value::Int(1)),
                        deterministic: true,
                        // `on_error: skip`: a line or row whose values do not parse is
                        // dropped and counted, as `ignore_errors()` after the source.
                        skip_errors: w("on_error").and_then(OnError::from_word) == Some(OnError::Skip),
                        output,
                    })
                }
            });
            continue;
        };
        if is_source {
            diags.push(
                Diagnostic::error("E0302", "a pipeline has one source", s.name.span, "a second source")
                    .with_help("to mix datasets, use several pipelines (sample_from arrives with the IR)"),
            );
            return None;
        }
        let input = Box::new(input);
        let node = match sig.kind {
            StageKind::Tfrecord | StageKind::Interleave => {
                if input.output() != Element::Path {
                    let (code, what) = if sig.kind == StageKind::Tfrecord {
                        ("E0303", "files to read")
                    } else {
                        ("E0304", "file paths")
                    };
                    diags.push(
                        Diagnostic::error(
                            code,
                            format!("`{}` needs {what}", sig.name),
                            s.name.span,
                            format!("its input is {}", input.output()),
                        )
                        .with_help("put it right after `files(pattern)`"),
                    );
                    return None;
                }
                // The reader: this `tfrecord`, or the one in the `interleave` block.
                let reader = if sig.kind == StageKind::Tfrecord {
                    Some((sig, args.clone()))
                } else {
                    reader_of(s, diags)?
                };
                let (rsig, rargs) = reader.expect("a reader");
                let r = |name: &str| rsig.args.iter().position(|x| x.name == name).and_then(|i| rargs[i]);
                let interleave = sig.kind == StageKind::Interleave;
                Plan::Interleave(Interleave {
                    input,
                    format: RecordFormat::TfRecord,
                    cycle_length: if interleave { a("cycle") } else { None }
                        .unwrap_or(ArgValue::Const(Value::Int(1))),
                    block_length: if interleave { a("block") } else { None }
                        .unwrap_or(ArgValue::Const(Value::Int(1))),
                    parallel: if interleave { a("parallel") } else { None }
                        .unwrap_or(ArgValue::Const(Value::Int(1))),
                    deterministic: !interleave || flag("deterministic", true),
                    compression: r("compression")
                        .and_then(word)
                        .and_then(Compression::from_word)
                        .unwrap_or(Compression::Auto),
                    on_corrupt: r("on_corrupt")
                        .and_then(word)
                        .and_then(CorruptPolicy::from_word)
                        .unwrap_or(CorruptPolicy::Fail),
                    verify_crc: match r("verify_crc").map(|e| value(e, decls)) {
                        Some(Ok(ArgValue::Const(Value::Bool(b)))) => b,
                        _ => true,
                    },
                })
            }
            StageKind::Map | StageKind::Filter if s.args.iter().any(|a| super::stages::is_rust(&a.value)) => {
                rust_stage(s, input, rust_code, diags)?
            }
            StageKind::Map => {
                let mut element = input.output();
                let mut ops = Vec::new();
                for st in s.body.iter().flat_map(|b| &b.stmts) {
                    let op = map_op(st, &element, decls, diags)?;
                    element = op.apply(&element);
                    ops.push(op);
                }
                Plan::Map(Map {
                    input,
                    ops,
                    parallel: a("parallel").unwrap_or(ArgValue::Const(Value::Int(1))),
                    deterministic: flag("deterministic", true),
                    skip_errors: w("on_error").and_then(OnError::from_word) == Some(OnError::Skip),
                    output: element,
                })
            }
            StageKind::Filter => {
                let pred = args[0]?;
                let condition = super::ops::predicate("filter", s, pred, &input.output(), decls, diags)?;
                Plan::Filter(Filter {
                    input,
                    predicate: pred.to_string(),
                    reads: condition.reads(),
                    conditions: vec![condition],
                })
            }
            StageKind::TakeWhile => super::combine::take_while(s, args[0]?, input, decls, diags)?,
            StageKind::FlatMap => super::flat_map::lower(s, p, input, decls, pipelines, rust_code, diags)?,
            StageKind::Enumerate => super::combine::enumerate(s, input, int("start"), diags)?,
            StageKind::ReadFile => {
                if input.output() != Element::Path {
                    diags.push(
                        Diagnostic::error(
                            "E0323",
                            "`read_file` needs file paths",
                            s.name.span,
                            format!("its input is {}", input.output()),
                        )
                        .with_help("put it right after `files(pattern)`"),
                    );
                    return None;
                }
                Plan::ReadFile(ReadFile {
                    input,
                    labels: w("labels").and_then(Labels::from_word).unwrap_or(Labels::None),
                    on_error: w("on_error").and_then(CorruptPolicy::from_word).unwrap_or(CorruptPolicy::Fail),
                })
            }
            StageKind::Pack => super::pack::lower(s, arg, input, diags)?,
            StageKind::Select => {
                let element = input.output();
                let fields: Vec<String> = element.fields().iter().map(|x| x.name.clone()).collect();
                let mut kept = Vec::new();
                for a in &s.args {
                    let name = a.value.to_string();
                    if !fields.contains(&name) {
                        let known: Vec<&str> = fields.iter().map(String::as_str).collect();
                        let d = Diagnostic::error(
                            "E0401",
                            format!("unknown field `{name}`"),
                            a.span,
                            "not a field of the element here",
                        );
                        diags.push(match super::decls::closest(&name, &known) {
                            Some(c) => d.with_help(format!("did you mean `{c}`?")),
                            None => d.with_note(format!("the fields here: {}", fields.join(", "))),
                        });
                        return None;
                    }
                    kept.push(name);
                }
                Plan::Select(Select { input, fields: kept })
            }
            StageKind::Shuffle => super::shuffle::lower(
                s,
                a,
                w("buffer") == Some(ShuffleBuffer::GLOBAL),
                flag("reshuffle_each_epoch", true),
                input,
                diags,
            )?,
            StageKind::Batch if !batchable(&input.output(), "batch", s.name.span, diags) => return None,
            StageKind::PaddedBatch
                if !super::bucket::check_pad_to_multiple(s, arg, &input.output(), diags) =>
            {
                return None;
            }
            StageKind::Batch | StageKind::PaddedBatch => Plan::Batch(Batch {
                padding_values: super::bucket::padding_values(
                    arg("padding_values"),
                    input.output().fields(),
                    diags,
                )?,
                input,
                size: a("size").unwrap_or(ArgValue::Const(Value::Int(1))),
                drop_remainder: flag("drop_remainder", false),
                padded: (sig.kind == StageKind::PaddedBatch).then(|| a("pad_to")),
                pad_to_multiple: a("pad_to_multiple"),
            }),
            StageKind::BucketByLength => {
                let flags = (flag("pad_to_bucket_boundary", false), flag("drop_remainder", false));
                super::bucket::lower(s, arg, flags, input, diags)?
            }
            StageKind::Window => super::window::lower(s, a, flag("drop_remainder", false), input, diags)?,
            StageKind::Unbatch => super::unbatch::lower(s, input, diags)?,
            // Required arguments were checked present by the stage checks.
            StageKind::Repeat => Plan::Repeat(Repeat {
                input,
                count: a("count").map_or(RepeatCount::Forever, RepeatCount::Times),
                span: s.span,
            }),
            StageKind::Take => Plan::Take(Take { input, count: a("count")?, span: s.span }),
            StageKind::Skip => Plan::Skip(Skip { input, count: a("count")?, span: s.span }),
            StageKind::Shard => Plan::Shard(Shard {
                input,
                num_shards: a("num_shards")?,
                index: a("index")?,
                remainder: w("remainder").and_then(Remainder::from_word).unwrap_or(Remainder::Keep),
                span: s.span,
            }),
            StageKind::Cache => Plan::Cache(Cache { input, file: a("file"), span: s.span }),
            StageKind::Prefetch => {
                Plan::Prefetch(Prefetch { input, buffer: PrefetchDepth::of(a("buffer")), span: s.span })
            }
            // Sources were lowered (or refused, E0302) above.
            StageKind::Files
            | StageKind::Range
            | StageKind::Tfrecords
            | StageKind::TextLines
            | StageKind::Csv
            | StageKind::Parquet
            | StageKind::WebDataset
            | StageKind::SampleFrom
            | StageKind::Zip
            | StageKind::Concatenate => return None,
        };
        plan = Some(node);
    }
    plan
}

/// `map(code)` / `filter(code)` with Rust code: records with fields in, the same out.
/// The code's tokens go to `rust_code`.
fn rust_stage(
    s: &ast::Stage,
    input: Box<Plan>,
    rust_code: &mut Vec<proc_macro2::TokenStream>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let code = s.args.iter().find_map(|a| match &a.value.kind {
        ExprKind::Rust(code) => Some(code.clone()),
        _ => None,
    })?;
    let element = input.output();
    if !matches!(element, Element::Fields(_)) {
        diags.push(
            Diagnostic::error(
                "E0313",
                format!("Rust code in `{}` takes records with fields", s.name),
                s.span,
                format!("its input is {element}"),
            )
            .with_help("put it after `map { parse_example(); }` and before `batch`"),
        );
        return None;
    }
    let map = stage(&s.name.name).is_some_and(|sig| sig.kind == StageKind::Map);
    let kind = if map { RustKind::Map } else { RustKind::Filter };
    rust_code.push(code.tokens);
    Some(Plan::Rust(RustStage { input, kind, code: code.text, code_index: rust_code.len() - 1 }))
}

/// `sample_from(a, b, weights: [...], seed: s)`: checks the pipelines mixed and the
/// weights.
fn sample_from(
    s: &ast::Stage,
    p: &ast::Pipeline,
    decls: &Declarations,
    pipelines: &Pipelines,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let mut inputs = Vec::new();
    let mut output: Option<(Element, Span)> = None;
    for (name, element, span) in super::combine::input_pipelines(s, p, pipelines, "mixes", diags)? {
        match &output {
            None => output = Some((element, span)),
            Some((first, first_span)) if *first != element => {
                diags.push(
                    Diagnostic::error(
                        "E0311",
                        "`sample_from` mixes pipelines of one element type",
                        span,
                        format!("this one makes {element}"),
                    )
                    .with_label(*first_span, format!("this one makes {first}")),
                );
                return None;
            }
            Some(_) => {}
        }
        inputs.push(name);
    }
    let (output, _) = output?;
    let named = |n: &str| s.args.iter().find(|a| a.name.as_ref().is_some_and(|x| x.name == n));
    let weights_arg = named("weights")?;
    let weights: Option<Vec<f64>> = match &weights_arg.value.kind {
        ExprKind::List(items) => items
            .iter()
            .map(|e| match &e.kind {
                ExprKind::Int(n) => Some(*n as f64),
                ExprKind::Float(x) => Some(*x),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    let bad =
        |why: String| Diagnostic::error("E0312", "bad `sample_from` weights", weights_arg.value.span, why);
    let Some(weights) = weights else {
        diags.push(bad("a list of non-negative numbers".into()));
        return None;
    };
    if weights.len() != inputs.len() {
        diags.push(bad(format!("{} weight(s) for {} pipeline(s)", weights.len(), inputs.len())));
        return None;
    }
    if weights.iter().all(|w| *w == 0.0) {
        diags.push(bad("all weights are zero: nothing would be drawn".into()));
        return None;
    }
    let seed = named("seed").and_then(|a| value(&a.value, decls).ok());
    let stop_on_empty = matches!(named("stop_on_empty").map(|a| &a.value.kind), Some(ExprKind::Bool(true)));
    Some(Plan::SampleFrom(SampleFrom { inputs, weights, seed, stop_on_empty, output }))
}

/// Whether plain `batch` (or `window`: `stage`) can stack these elements into dense
/// columns: fields of fixed shape (a scalar byte string is one ragged value, fine).
/// Reports the first field that needs `padded_batch`.
pub(super) fn batchable(element: &Element, stage: &str, span: Span, diags: &mut Vec<Diagnostic>) -> bool {
    let Element::Fields(fields) = element else { return true };
    for f in fields {
        let Some(t) = &f.ty else { continue };
        let fixed = match &t.shape {
            crate::ir::types::Shape::Var => false,
            crate::ir::types::Shape::Dims(d) => {
                d.iter().all(|x| matches!(x, crate::ir::types::Dim::Fixed(_)))
            }
        };
        if !fixed {
            diags.push(
                Diagnostic::error("E0308", format!("`{stage}` cannot stack field `{}` of type `{t}`", f.name), span, "its size varies from record to record")
                    .with_help(match t.shape {
                        _ if stage != "batch" => "give it a fixed size first (a fixed shape in the schema, `resize`, `center_crop`, `random_crop`)".to_string(),
                        crate::ir::types::Shape::Var => "use `padded_batch(size, pad_to: N)`, or a fixed shape in the schema".to_string(),
                        _ => "give it a fixed size first (`resize`, `center_crop`, `random_crop`), or use `padded_batch`".to_string(),
                    }),
            );
            return false;
        }
    }
    true
}

/// The argument expressions of a stage, by the signature's slots. (Invalid calls were
/// reported by the stage checks.)
fn bind<'a>(sig: &StageSig, args: &'a [ast::Arg]) -> Vec<Option<&'a ast::Expr>> {
    let params: Vec<&str> = sig.args.iter().map(|a| a.name).collect();
    super::args::bind(&params, args).0.into_iter().map(|a| a.map(|a| &a.value)).collect()
}

/// The word an argument is (an enumeration's, `global`), if it is one.
fn word(e: &ast::Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Path(p) if p.segments.len() == 1 => Some(p.segments[0].name.as_str()),
        _ => None,
    }
}

/// An argument as the plan keeps it: a constant, a parameter or `auto`. `Err` with the
/// argument as written for what is none of them: an enumeration word (read by [`word`]
/// into its typed value instead) or a negative integer below the smallest i64 (which
/// `range` and `enumerate` report).
fn value(e: &ast::Expr, decls: &Declarations) -> Result<ArgValue, String> {
    Ok(match &e.kind {
        ExprKind::Int(n) => ArgValue::Const(i64::try_from(*n).map_or(Value::UInt(*n), Value::Int)),
        ExprKind::Unary(ast::UnaryOp::Neg, inner) if matches!(inner.kind, ExprKind::Int(_)) => {
            let ExprKind::Int(n) = inner.kind else { unreachable!("matched above") };
            ArgValue::Const(Value::Int(i64::try_from(-i128::from(n)).map_err(|_| e.to_string())?))
        }
        ExprKind::Float(x) => ArgValue::Const(Value::Float(*x)),
        ExprKind::Bool(b) => ArgValue::Const(Value::Bool(*b)),
        ExprKind::Str(s) => ArgValue::Const(Value::Str(s.clone())),
        ExprKind::Path(p) if p.segments.len() == 1 => {
            let name = &p.segments[0].name;
            if name == "auto" {
                ArgValue::Auto
            } else if decls.params.iter().any(|q| &q.name == name) {
                ArgValue::Param(name.clone())
            } else {
                return Err(name.clone());
            }
        }
        _ => return Err(e.to_string()),
    })
}

type Reader<'a> = (&'static StageSig, Vec<Option<&'a ast::Expr>>);

/// The one `tfrecord(...)` reader in an `interleave` block.
fn reader_of<'a>(s: &'a ast::Stage, diags: &mut Vec<Diagnostic>) -> Option<Option<Reader<'a>>> {
    let readers: Vec<Reader<'a>> = s
        .body
        .iter()
        .flat_map(|b| &b.stmts)
        .filter_map(|st| match &st.value.kind {
            ExprKind::Call { callee, args, .. } => {
                let sig = stage(&callee.to_string()).filter(|sig| sig.kind == StageKind::Tfrecord)?;
                Some((sig, bind(sig, args)))
            }
            _ => None,
        })
        .collect();
    if readers.len() != 1 {
        let span = s.body.as_ref().map_or(s.span, |b| b.span);
        diags.push(
            Diagnostic::error(
                "E0307",
                "an `interleave` block has exactly one reader",
                span,
                format!("{} readers here", readers.len()),
            )
            .with_help("write `interleave(...) { tfrecord(); }`"),
        );
        return None;
    }
    Some(readers.into_iter().next())
}

/// One statement of a `map` block as a typed operation.
fn map_op(
    st: &ast::Stmt,
    element: &Element,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<MapOp> {
    let parse = match &st.value.kind {
        ExprKind::Call { callee, .. } => match callee.to_string().as_str() {
            "parse_example" => Some(ParseFormat::Example),
            "parse_sequence_example" => Some(ParseFormat::SequenceExample),
            _ => None,
        },
        _ => None,
    };
    if let (Some(format), None) = (parse, &st.target) {
        return parse_example(st.span, format, element, decls, diags);
    }
    let Some(target) = &st.target else {
        diags.push(
            Diagnostic::error(
                "E0400",
                "a statement of `map` assigns a field",
                st.span,
                "the value is not kept",
            )
            .with_help("write `field = ...;`"),
        );
        return None;
    };
    if let Some(d) = super::decls::reserved(target, "field") {
        diags.push(d);
        return None;
    }
    let value = super::ops::Typer { fields: element.fields(), decls, diags }.value(&st.value)?;
    Some(MapOp::Assign {
        target: target.name.clone(),
        ty: value.tensor().expect("a value is a tensor").clone(),
        reads: value.reads(),
        value,
    })
}

/// `parse_example()` / `parse_sequence_example()`: the schema's features (and feature
/// lists) out of each record.
fn parse_example(
    span: Span,
    format: ParseFormat,
    element: &Element,
    decls: &Declarations,
    diags: &mut Vec<Diagnostic>,
) -> Option<MapOp> {
    let verb = match format {
        ParseFormat::SequenceExample => "parse_sequence_example",
        _ => "parse_example",
    };
    // One record, or a batch of them (tf.data's vectorized `parse_example`).
    let records = match element {
        Element::Batch(inner) => **inner == Element::Record,
        other => *other == Element::Record,
    };
    if !records {
        diags.push(
            Diagnostic::error(
                "E0305",
                format!("`{verb}` parses serialized records"),
                span,
                format!("the elements here are {element}"),
            )
            .with_help("parse the records read (or a batch of them) once"),
        );
        return None;
    }
    if decls.schema.is_empty() {
        diags.push(
            Diagnostic::error("E0305", format!("`{verb}` needs a `schema`"), span, "no schema declared")
                .with_help(match format {
                    ParseFormat::SequenceExample => {
                        "declare the context features and the feature lists: `schema { label: i64, sequence frames: f32[steps, 3] }`"
                    }
                    _ => "declare the features: `schema { image: bytes, label: i64 }`",
                }),
        );
        return None;
    }
    if format == ParseFormat::Example
        && let Some(list) = decls.schema.iter().find(|f| f.sequence)
    {
        diags.push(
            Diagnostic::error(
                "E0383",
                format!("`parse_example` reads no feature lists, but `{}` is one", list.name),
                span,
                "a `tf.train.Example` has features only",
            )
            .with_label(list.span, "a feature list")
            .with_help("parse `tf.train.SequenceExample` records with `parse_sequence_example();`"),
        );
        return None;
    }
    let fields =
        decls.schema.iter().map(|f| FieldType { name: f.name.clone(), ty: Some(f.ty.clone()) }).collect();
    Some(MapOp::Parse { format, fields })
}

/// A `device cuda` pipeline that yields batches of fields ends in a [`DeviceTail`]
/// (empty: `lower_device_tail` moves operations into it), the part that runs on the GPU.
/// Anything else is returned as it is.
pub fn device_tail(plan: Plan, device: super::Device) -> Plan {
    let output = plan.output();
    match (&output, device) {
        (Element::Batch(inner), super::Device::Cuda) if matches!(**inner, Element::Fields(_)) => {
            Plan::DeviceTail(crate::ir::plan::DeviceTail {
                input: Box::new(plan),
                ops: Vec::new(),
                kernels: Vec::new(),
                output,
            })
        }
        _ => plan,
    }
}
