//! The physical plan: the only stage of the compiler that decides threads, queue depths
//! and devices. It mirrors the runtime's defaults ([2/9]) and computes a static upper
//! bound on the memory the pipeline's buffers hold: for each stage, the elements it can
//! hold at once times an upper bound on an element's size.
//!
//! Sizes known at compile time (fixed-shape numeric fields) are exact. Sizes that are not
//! (serialized records, byte strings, variable-length lists, named dimensions such as a
//! decoded image's height) use the stated assumptions below; `explain` says when the
//! bound rests on them. A declared `budget` smaller than the bound is a compile error
//! (E0500) naming the stages that cost most.

use std::fmt::{self, Write};

use crate::ast::Span;
use crate::diagnostic::Diagnostic;
use crate::ir::decls::{Device, ParamDecl};
use crate::ir::plan::{ArgValue, Element, FieldType, Plan};
use crate::ir::types::{DType, Dim, Shape, Value};

/// Assumed size of one serialized record when nothing bounds it.
pub const ASSUMED_RECORD_BYTES: u64 = 64 << 10;
/// Assumed size of one byte string (an image's encoded bytes).
pub const ASSUMED_BYTES_VALUE: u64 = 64 << 10;
/// Assumed size of a named dimension (`H`, `W` of a decoded image) or a variable length.
pub const ASSUMED_DIM: u64 = 1024;
/// Elements a TFRecord reader's parallel interleave buffers per open file (the runtime's
/// `DEFAULT_BUFFER_PER_SLOT`).
pub const INTERLEAVE_BUFFER_PER_SLOT: u64 = 64;
/// The read buffer of one open TFRecord file (the reader's default `buffer_size`).
pub const READ_BUFFER_BYTES: u64 = 1 << 20;
/// The bytes of records in one window of a global shuffle (the runtime's `WINDOW_BYTES`).
pub const GLOBAL_SHUFFLE_WINDOW_BYTES: u64 = 8 << 20;

/// Planning options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Cores assumed for `auto` parallelism (the run-time count may be smaller).
    pub cores: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options { cores: 8 }
    }
}

/// One stage as it will run.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecStage {
    /// `InterleaveExec`, `MapExec`, …
    pub name: &'static str,
    /// Worker threads (`1` runs on the consumer's thread).
    pub threads: String,
    /// Elements it may hold at once.
    pub held: u64,
    /// Bytes those elements (and its own buffers) may take, at most.
    pub bytes: u64,
}

/// The physical plan of one pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PhysicalPlan {
    /// The stages, last first (as `explain` prints plans).
    pub stages: Vec<ExecStage>,
    /// The static memory bound: the sum of the stages' bytes.
    pub memory_bound: u64,
    /// The assumptions the bound rests on (empty when it is exact).
    pub assumptions: Vec<&'static str>,
    /// The declared budget.
    pub budget: Option<u64>,
    /// Where the tail after `batch` runs (`cuda` is lowered to fused kernels by [7/9];
    /// until then, and on machines without a GPU, its CPU twin runs).
    pub device: Device,
}

/// Plans `plan` with the pipeline's parameters (their defaults size the buffers they set);
/// with a declared `budget` the bound exceeds, returns the error.
pub fn plan(
    plan: &Plan,
    params: &[ParamDecl],
    budget: Option<u64>,
    budget_span: Span,
    device: Device,
    options: Options,
) -> Result<PhysicalPlan, Box<Diagnostic>> {
    let mut cx = Cx { assumptions: Vec::new(), options, params, rows: 1 };
    let mut chain = Vec::new();
    let mut node = Some(plan);
    while let Some(n) = node {
        chain.push(n);
        node = n.input();
    }
    // From the source up, so each stage knows how many rows an element holds.
    let mut stages: Vec<ExecStage> = Vec::new();
    let source_first: Vec<&Plan> = chain.iter().rev().copied().collect();
    let mut i = 0;
    while i < source_first.len() {
        let n = source_first[i];
        if let Some(next) = source_first.get(i + 1)
            && reads_batches(n, next)
        {
            // One stage: its readers fill the batches (see `reads_batches`).
            let batch = cx.stage(next);
            stages.push(cx.read_batches(n, next, &batch));
            i += 2;
            continue;
        }
        stages.push(cx.stage(n));
        i += 1;
    }
    stages.reverse();
    let memory_bound = stages.iter().map(|s| s.bytes).fold(0u64, u64::saturating_add);
    cx.assumptions.sort_unstable();
    cx.assumptions.dedup();
    let physical = PhysicalPlan { stages, memory_bound, assumptions: cx.assumptions, budget, device };
    if let Some(b) = budget
        && memory_bound > b
    {
        let mut costly: Vec<&ExecStage> = physical.stages.iter().filter(|s| s.bytes > 0).collect();
        costly.sort_by_key(|s| std::cmp::Reverse(s.bytes));
        let top: Vec<String> = costly
            .iter()
            .take(3)
            .map(|s| format!("{} holds up to {} ({} elements)", s.name, human(s.bytes), s.held))
            .collect();
        let mut d = Diagnostic::error(
            "E0500",
            format!("the pipeline may hold {} in its buffers, more than its budget of {}", human(memory_bound), human(b)),
            budget_span,
            "budget declared here",
        )
        .with_help("shrink the largest buffers (shuffle buffer, batch size, prefetch depth, interleave cycle) or raise the budget");
        for t in top {
            d = d.with_note(t);
        }
        if !physical.assumptions.is_empty() {
            d = d.with_note(format!("the bound assumes {}", physical.assumptions.join(", ")));
        }
        return Err(Box::new(d));
    }
    Ok(physical)
}

/// Whether `interleave` and the `next` node run as one stage (`tfrecord_batches`): a
/// non-deterministic TFRecord interleave straight into a plain `batch` of its records or a
/// fused map + batch. Each reader thread fills its own batch and hands over whole ones.
/// The code generator asks this too, so what `explain` shows is what runs.
pub fn reads_batches(interleave: &Plan, next: &Plan) -> bool {
    let Plan::Interleave(i) = interleave else { return false };
    !i.deterministic
        && match next {
            Plan::Batch(b) => b.padded.is_none(),
            Plan::MapBatch(_) => true,
            _ => false,
        }
}

struct Cx<'a> {
    assumptions: Vec<&'static str>,
    options: Options,
    params: &'a [ParamDecl],
    /// Rows in one element at the current stage (the product of the batch sizes below).
    rows: u64,
}

impl Cx<'_> {
    /// Threads of an argument: a fixed count, or `auto` up to the assumed cores.
    fn threads(&self, v: &ArgValue) -> (String, u64) {
        match v {
            ArgValue::Const(Value::Int(n)) if *n >= 1 => (n.to_string(), *n as u64),
            ArgValue::Auto => (format!("auto(<={})", self.options.cores), self.options.cores),
            ArgValue::Param(p) => (format!("${p}(<={})", self.options.cores), self.options.cores),
            _ => ("1".into(), 1),
        }
    }

    /// A count argument: a constant, a parameter's default, or `fallback`.
    fn count(&mut self, v: &ArgValue, fallback: u64, what: &'static str) -> u64 {
        match v {
            ArgValue::Const(Value::Int(n)) if *n >= 0 => *n as u64,
            ArgValue::Const(Value::UInt(n)) => *n,
            ArgValue::Param(p) => {
                match self.params.iter().find(|q| &q.name == p).and_then(|q| q.default.as_ref()) {
                    Some(Value::Int(n)) if *n >= 0 => {
                        self.assumptions.push("parameters at their defaults");
                        *n as u64
                    }
                    Some(Value::UInt(n)) => {
                        self.assumptions.push("parameters at their defaults");
                        *n
                    }
                    _ => {
                        self.assumptions.push(what);
                        fallback
                    }
                }
            }
            _ => {
                self.assumptions.push(what);
                fallback
            }
        }
    }

    /// The fused reader of `reads_batches`: each worker holds the batch it fills, and the
    /// hand-over queue two finished batches per worker.
    fn read_batches(&mut self, il: &Plan, next: &Plan, batch: &ExecStage) -> ExecStage {
        let Plan::Interleave(i) = il else { return batch.clone() };
        let (threads, workers) = self.threads(&i.parallel);
        let cycle = self.count(&i.cycle_length, 1, "parameters at their defaults' scale (cycle length 1)");
        let workers = workers.min(cycle.max(1));
        let held = workers.saturating_mul(3);
        // A batch's bytes: the batch stage's own figure counts it twice (staging + batch).
        let per_batch = match next {
            Plan::Batch(_) => batch.bytes / 2,
            _ => batch.bytes / batch.held.max(1),
        };
        ExecStage {
            name: "ReadBatchesExec",
            threads,
            held,
            bytes: held.saturating_mul(per_batch).saturating_add(workers.saturating_mul(READ_BUFFER_BYTES)),
        }
    }

    fn stage(&mut self, n: &Plan) -> ExecStage {
        let element = n.output();
        // The rows of this stage's elements: batches multiply, unbatch divides.
        match n {
            Plan::Batch(b) => {
                let size = self.count(&b.size, 1024, "a batch size of 1024 when set without a default");
                self.rows = self.rows.saturating_mul(size.max(1));
            }
            Plan::MapBatch(m) => {
                let size = self.count(&m.size, 1024, "a batch size of 1024 when set without a default");
                self.rows = self.rows.saturating_mul(size.max(1));
            }
            Plan::Unbatch(_) => self.rows = 1,
            _ => {}
        }
        let rows = self.rows;
        let elem = |cx: &mut Cx<'_>| cx.element_bytes(&element).saturating_mul(rows);
        match n {
            Plan::Files(_) => ExecStage { name: "FilesExec", threads: "1".into(), held: 0, bytes: 0 },
            Plan::SampleFrom(_) => {
                self.assumptions.push("the memory of the mixed pipelines on top (see their own plans)");
                ExecStage { name: "SampleFromExec", threads: "1".into(), held: 0, bytes: 0 }
            }
            Plan::Interleave(i) => {
                let (threads, workers) = self.threads(&i.parallel);
                let cycle =
                    self.count(&i.cycle_length, 1, "parameters at their defaults' scale (cycle length 1)");
                let per_slot = if workers > 1 { INTERLEAVE_BUFFER_PER_SLOT } else { 1 };
                let held = cycle.saturating_mul(per_slot);
                let bytes =
                    held.saturating_mul(elem(self)).saturating_add(cycle.saturating_mul(READ_BUFFER_BYTES));
                ExecStage { name: "InterleaveExec", threads, held, bytes }
            }
            Plan::Map(m) => {
                let (threads, workers) = self.threads(&m.parallel);
                let held = window(&m.parallel, workers);
                ExecStage { name: "MapExec", threads, held, bytes: held.saturating_mul(elem(self)) }
            }
            Plan::MapFilter(m) => {
                let (threads, workers) = self.threads(&m.parallel);
                let held = window(&m.parallel, workers);
                ExecStage { name: "MapFilterExec", threads, held, bytes: held.saturating_mul(elem(self)) }
            }
            Plan::MapBatch(m) => {
                // Workers write mapped elements straight into batch columns: the window
                // holds whole batches.
                let (threads, workers) = self.threads(&m.parallel);
                let held = window(&m.parallel, workers);
                ExecStage { name: "MapBatchExec", threads, held, bytes: held.saturating_mul(elem(self)) }
            }
            Plan::ShuffleRepeat(s) => {
                let held = self.count(
                    &s.buffer,
                    10_000,
                    "a shuffle buffer of 10000 elements when set without a default",
                );
                ExecStage {
                    name: "ShuffleRepeatExec",
                    threads: "1".into(),
                    held,
                    bytes: held.saturating_mul(elem(self)),
                }
            }
            Plan::Filter(_) => ExecStage { name: "FilterExec", threads: "1".into(), held: 0, bytes: 0 },
            Plan::Rust(r) => ExecStage {
                name: match r.kind {
                    crate::ir::plan::RustKind::Map => "RustMapExec",
                    crate::ir::plan::RustKind::Filter => "RustFilterExec",
                },
                threads: "1".into(),
                held: 0,
                bytes: 0,
            },
            Plan::Select(_) => ExecStage { name: "SelectExec", threads: "1".into(), held: 0, bytes: 0 },
            Plan::Shuffle(s) if s.is_global() => {
                // Reader threads hold two windows of about 8 MiB of records each; the
                // reader below it does not run.
                let (threads, workers) = self.threads(&ArgValue::Auto);
                let held = workers.saturating_mul(2);
                ExecStage {
                    name: "GlobalShuffleExec",
                    threads,
                    held,
                    bytes: held.saturating_mul(GLOBAL_SHUFFLE_WINDOW_BYTES),
                }
            }
            Plan::Shuffle(s) => {
                let held = self.count(
                    &s.buffer,
                    10_000,
                    "a shuffle buffer of 10000 elements when set by a parameter",
                );
                ExecStage {
                    name: "ShuffleExec",
                    threads: "1".into(),
                    held,
                    bytes: held.saturating_mul(elem(self)),
                }
            }
            Plan::Batch(b) => {
                // The staging vector of one batch's elements and the batch built from it.
                let size = self.count(&b.size, 1024, "a batch size of 1024 when set without a default");
                let bytes = elem(self).saturating_mul(2);
                ExecStage {
                    name: if b.padded.is_some() { "PaddedBatchExec" } else { "BatchExec" },
                    threads: "1".into(),
                    held: size,
                    bytes,
                }
            }
            Plan::Unbatch(_) => ExecStage { name: "UnbatchExec", threads: "1".into(), held: 0, bytes: 0 },
            // The device feed's thread converts and moves up to two batches ahead of the
            // training loop (the CPU twin, where there is no GPU, one at a time).
            Plan::DeviceTail(_) => ExecStage {
                name: "DeviceTailExec",
                threads: "1".into(),
                held: 2,
                bytes: 2u64.saturating_mul(elem(self)),
            },
            Plan::Prefetch(p) => {
                let held = match p.args.first().map(|(_, v)| v) {
                    None | Some(ArgValue::Auto) => 2,
                    Some(v) => self.count(v, 2, "a prefetch depth of 2 when set by a parameter").max(1),
                };
                ExecStage {
                    name: "PrefetchExec",
                    threads: "1".into(),
                    held,
                    bytes: held.saturating_mul(elem(self)),
                }
            }
            Plan::Cache(c) if c.args.is_empty() => {
                self.assumptions
                    .push("an in-memory cache of at most 1024 elements (it holds the whole dataset)");
                ExecStage {
                    name: "CacheExec",
                    threads: "1".into(),
                    held: 1024,
                    bytes: 1024u64.saturating_mul(elem(self)),
                }
            }
            // `remainder: drop` holds back this worker's element of a round; `pad` keeps
            // the elements before the worker's first position, at most `num_shards - 1`.
            Plan::Shard(p) if p.remainder() != "keep" => {
                let held = match (p.remainder(), p.args.iter().find(|(k, _)| *k == "num_shards")) {
                    ("pad", Some((_, n))) => self
                        .count(n, 8, "at most 8 workers for a padded shard's parameter without a default")
                        .saturating_sub(1),
                    _ => 1,
                };
                ExecStage {
                    name: "ShardExec",
                    threads: "1".into(),
                    held,
                    bytes: held.saturating_mul(elem(self)),
                }
            }
            Plan::Repeat(_) | Plan::Take(_) | Plan::Skip(_) | Plan::Shard(_) | Plan::Cache(_) => ExecStage {
                name: match n {
                    Plan::Repeat(_) => "RepeatExec",
                    Plan::Take(_) => "TakeExec",
                    Plan::Skip(_) => "SkipExec",
                    Plan::Shard(_) => "ShardExec",
                    _ => "CacheExec",
                },
                threads: "1".into(),
                held: 0,
                bytes: 0,
            },
        }
    }

    /// An upper bound on one element's size in bytes.
    fn element_bytes(&mut self, e: &Element) -> u64 {
        match e {
            Element::Path => 256,
            Element::Record => {
                self.assumptions.push("records of at most 64 KiB");
                ASSUMED_RECORD_BYTES
            }
            Element::Fields(fields) => {
                fields.iter().map(|f| self.field_bytes(f)).fold(0u64, u64::saturating_add)
            }
            Element::Batch(inner) => self.element_bytes(inner),
        }
    }

    fn field_bytes(&mut self, f: &FieldType) -> u64 {
        let Some(t) = &f.ty else { return 0 };
        let values = match &t.shape {
            Shape::Var => {
                self.assumptions.push("variable-length fields of at most 1024 values");
                ASSUMED_DIM
            }
            Shape::Dims(dims) => dims.iter().fold(1u64, |n, d| {
                n.saturating_mul(match d {
                    Dim::Fixed(k) => *k,
                    Dim::Named(_) => {
                        self.assumptions.push("named dimensions (decoded image sides) of at most 1024");
                        ASSUMED_DIM
                    }
                })
            }),
        };
        let per_value = match t.dtype {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::Bf16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
            DType::Bytes | DType::Str => {
                self.assumptions.push("byte strings of at most 64 KiB");
                ASSUMED_BYTES_VALUE
            }
        };
        values.saturating_mul(per_value)
    }
}

/// Elements a parallel map holds in flight, as the runtime sizes its window: one per
/// worker plus one finished result (`auto`), or two per worker (a fixed count).
fn window(parallel: &ArgValue, workers: u64) -> u64 {
    match parallel {
        _ if workers <= 1 => 1,
        ArgValue::Auto => workers + 1,
        _ => 2 * workers,
    }
}

/// `1.5 MiB`-style.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

impl PhysicalPlan {
    /// The plan as `explain` prints it.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        for (depth, s) in self.stages.iter().enumerate() {
            let _ = writeln!(
                out,
                "{}{}: threads={}, holds={}, memory={}",
                "  ".repeat(depth),
                s.name,
                s.threads,
                s.held,
                human(s.bytes)
            );
        }
        let device = match self.device {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda (the tail after `batch`)",
        };
        let _ = writeln!(out, "device: {device}");
        let _ = write!(out, "memory bound: {}", human(self.memory_bound));
        if let Some(b) = self.budget {
            let _ = write!(out, " (budget {})", human(b));
        }
        if !self.assumptions.is_empty() {
            let _ = write!(out, ", assuming {}", self.assumptions.join(", "));
        }
        out.push('\n');
        out
    }
}

impl fmt::Display for PhysicalPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.explain())
    }
}
