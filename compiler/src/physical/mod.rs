//! The physical plan: what runs. The only stage of the compiler that decides how the
//! optimized plan executes: which logical nodes run fused as one runtime stage — first
//! as fused nodes of the plan ([`fuse`]: a map and its batch, a map and its filter, a
//! shuffle and its repeat, a `device cuda` pipeline's kernels, the `prefetch` it ends
//! in), then as exec nodes (a global shuffle in place of its reader, maps run in the
//! reader threads, a batch gathered by its map's workers) — threads, queue depths and
//! devices ([`lower`]). Each [`Exec`] node
//! is one runtime stage of the generated chain; the code generator prints them and makes
//! no choice of its own. It also computes a static upper bound on the memory the
//! pipeline's buffers hold: for each stage, the elements it can hold at once times an
//! upper bound on an element's size ([`memory`]), with the runtime's defaults read from
//! one place ([`defaults`]).
//!
//! Sizes known at compile time (fixed-shape numeric fields) are exact. Sizes that are not
//! (serialized records, byte strings, variable-length lists, named dimensions such as a
//! decoded image's height) use the stated assumptions below; `explain` says when the
//! bound rests on them. A declared `budget` smaller than the bound is a compile error
//! (E0500) naming the stages that cost most.

use std::fmt::{self, Write};

use crate::diagnostic::Diagnostic;
use crate::ir::decls::{Device, ParamDecl};
use crate::ir::plan::Plan;
use crate::span::Span;

mod amount;
pub mod defaults;
mod exec;
pub mod fuse;
mod logical;
mod lower;
mod memory;
mod resume;
mod rules;

pub use amount::{Amount, Expr};
pub use exec::{
    Compression, CorruptPolicy, DeviceTailExec, Exec, Labels, MapFn, ReaderMap, ReaderOptions, Remainder,
};
pub use logical::Logical;
pub use resume::{Elastic, Resume, Resumption, classify};
pub use rules::ParamRule;

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

/// What a stage costs: its threads, the elements it may hold at once, and the bytes
/// they (and its own buffers) may take at most.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Worker threads (`1` runs on the consumer's thread).
    pub threads: String,
    /// Elements it may hold at once.
    pub held: u64,
    /// Bytes those elements (and its own buffers) may take, at most (with the
    /// parameters that size it: their expression).
    pub bytes: Amount,
}

/// One stage as it runs, and what it costs.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecNode {
    /// The stage.
    pub exec: Exec,
    /// Its threads and memory.
    pub figures: Figures,
}

/// The physical plan of one pipeline: the stages that run, source first, each one
/// runtime stage of the generated chain (a device tail last, on the batches).
#[derive(Debug, Clone, PartialEq)]
pub struct PhysicalPlan {
    /// The stages, source first (the order of the generated chain).
    pub stages: Vec<ExecNode>,
    /// Why a pipeline this one zips or concatenates cannot resume exactly (their passes
    /// run beneath it, so it cannot either): set by the driver once every pipeline of the
    /// file is planned, as the generated `RESUME_BLOCKER` finds it at run time.
    pub inherited_blocker: Option<String>,
    /// The device tail of a `device cuda` pipeline, after the stages.
    pub tail: Option<(DeviceTailExec, Figures)>,
    /// The static memory bound: the sum of the stages' bytes and the idle batch buffers
    /// kept for recycling (with the parameters at their defaults).
    pub memory_bound: u64,
    /// The bound as an expression of the parameters that size it (`None`: none does),
    /// which a declared `budget` binds when their values are known (`Params::check`).
    pub bound: Option<Expr>,
    /// The idle batch buffers the runtime keeps for recycling, at most (counted in the
    /// bound; 0 without batches).
    pub recycled: u64,
    /// The largest batch any stage makes, in bytes, at most (0 without batches; exact
    /// when `assumptions` is empty).
    pub largest_batch: u64,
    /// The assumptions the bound rests on (empty when it is exact).
    pub assumptions: Vec<&'static str>,
    /// The files the readers keep open at once: read from an object store, each adds
    /// `OBJECT_READ_AHEAD_BYTES` of ranged GETs in flight to the bound (which files are
    /// objects is known only at run time, from the patterns' values).
    pub open_files: u64,
    /// The declared budget.
    pub budget: Option<u64>,
    /// The declared CPU budget (`threads N;`): the threads its stages keep busy at once.
    pub threads: Option<u32>,
    /// Where the tail after `batch` runs.
    pub device: Device,
    /// What the generated module needs of the optimized logical plan besides the stages.
    pub logical: Logical,
    /// The fusion rules that changed the optimized plan, each with the plan as it left
    /// the rule (`explain --verbose`).
    pub fusions: Vec<crate::ir::rewrite::Application>,
}

/// Plans the optimized `plan` with the pipeline's parameters (their defaults size the
/// buffers they set): fuses it ([`fuse`]), then lowers it to exec nodes; with a declared
/// `budget` the bound exceeds, returns the error.
pub fn plan(
    plan: &Plan,
    params: &[ParamDecl],
    budget: Option<u64>,
    budget_span: Span,
    device: Device,
    options: Options,
) -> Result<PhysicalPlan, Box<Diagnostic>> {
    let mut cx = memory::Cx {
        assumptions: Vec::new(),
        options,
        params,
        rows: Amount::of(1),
        open_files: 0,
        largest_batch: Amount::of(0),
    };
    let fused = fuse::fuse(plan.clone());
    let (stages, tail) = lower::lower(&fused.plan, &mut cx);
    let recycled = cx.recycled();
    let largest_batch = cx.largest_batch.value();
    let bound = stages
        .iter()
        .map(|s| &s.figures)
        .chain(tail.as_ref().map(|(_, f)| f))
        .fold(recycled.clone(), |sum, f| sum.saturating_add(&f.bytes));
    let memory_bound = bound.value();
    let recycled = recycled.value();
    cx.assumptions.sort_unstable();
    cx.assumptions.dedup();
    let physical = PhysicalPlan {
        stages,
        inherited_blocker: None,
        tail,
        memory_bound,
        bound: bound.expr().cloned(),
        recycled,
        largest_batch,
        assumptions: cx.assumptions,
        open_files: cx.open_files,
        budget,
        threads: None,
        device,
        logical: Logical::of(plan),
        fusions: fused.applied,
    };
    if let Some(b) = budget
        && memory_bound > b
    {
        let mut costly: Vec<(&str, &Figures)> =
            physical.nodes().filter(|(_, f)| f.bytes.value() > 0).collect();
        costly.sort_by_key(|(_, f)| std::cmp::Reverse(f.bytes.value()));
        let top: Vec<String> = costly
            .iter()
            .take(3)
            .map(|(name, f)| format!("{name} holds up to {} ({} elements)", human(f.bytes.value()), f.held))
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
    /// Every node's name (with its detail) and figures, the last stage first, as
    /// `explain` prints them: the device tail, then the stages down to the source.
    pub fn nodes(&self) -> impl Iterator<Item = (&'static str, &Figures)> {
        let tail = self.tail.as_ref().map(|(_, f)| ("DeviceTailExec", f));
        tail.into_iter().chain(self.stages.iter().rev().map(|s| (s.exec.name(), &s.figures)))
    }

    /// The plan as `explain` prints it: one node per line, the last stage first, each
    /// with its threads, the elements it may hold, their memory, and what it fuses.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        let details =
            self.tail.iter().map(|_| String::new()).chain(self.stages.iter().rev().map(|s| s.exec.detail()));
        let resumption = self.resumption();
        let kinds = resumption.tail.iter().chain(resumption.stages.iter().rev());
        for (depth, (((name, f), detail), kind)) in self.nodes().zip(details).zip(kinds).enumerate() {
            let _ = write!(
                out,
                "{}{}: threads={}, holds={}, memory={}",
                crate::ir::plan::indent(depth),
                name,
                f.threads,
                f.held,
                human(f.bytes.value())
            );
            if !detail.is_empty() {
                let _ = write!(out, ", {detail}");
            }
            let _ = writeln!(out, ", resume={}", kind.word());
        }
        let device = match self.device {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda (the tail after `batch`)",
        };
        let _ = writeln!(out, "device: {device}");
        if let Some(n) = self.threads {
            // The generated `THREADS`/`options()` carry it to the runtime.
            let _ = writeln!(
                out,
                "threads: {n} (declared: the most threads its maps, parsing readers and batch-row splits keep busy at \
                 once, fixed ones and AUTOTUNE's together; `--threads` overrides)"
            );
        }
        let splitting: Vec<&str> =
            self.stages.iter().filter(|s| s.exec.splits_rows()).map(|s| s.exec.name()).collect();
        if !splitting.is_empty() {
            // The runtime's `stage/rows.rs`: `rows::split` takes what the budget has left.
            let _ = writeln!(
                out,
                "batch rows: {} may split a batch's rows across the pipeline's pool, with the threads the CPU \
                 budget has to spare ({} rows a part at least; the report counts them)",
                splitting.join(", "),
                defaults::MIN_ROWS_PER_PART
            );
        }
        if self.recycled > 0 {
            let _ = writeln!(out, "recycled batch buffers: up to {} idle", human(self.recycled));
        }
        let _ = write!(out, "memory bound: {}", human(self.memory_bound));
        if let Some(b) = self.budget {
            // The generated `BUDGET`/`options()` carry it to the runtime.
            let _ = write!(
                out,
                " (budget {}: AUTOTUNE's map workers and prefetch depths grow within it at run time)",
                human(b)
            );
        }
        if !self.assumptions.is_empty() {
            let _ = write!(out, ", assuming {}", self.assumptions.join(", "));
        }
        out.push('\n');
        if let (Some(b), Some(e)) = (self.budget, &self.bound) {
            let params: Vec<String> = e.params().iter().map(|p| format!("`{p}`")).collect();
            let _ = writeln!(
                out,
                "budget check: the bound again with the values of {} when the pipeline is built, refused above {}",
                params.join(", "),
                human(b)
            );
        }
        if self.open_files > 0 {
            let ahead = defaults::OBJECT_READ_AHEAD_BYTES;
            let each = self.open_files.saturating_mul(ahead);
            let own = defaults::OBJECT_READ_AHEAD_OWN_BYTES;
            let pooled =
                self.open_files.saturating_mul(own).saturating_add(defaults::OBJECT_READ_AHEAD_SHARED_BYTES);
            let files = format!(
                "{} open file{} at most",
                self.open_files,
                if self.open_files == 1 { "" } else { "s" }
            );
            let _ = if each <= pooled {
                writeln!(
                    out,
                    "from an object store: + {} of read-ahead ({files}, {} of ranged GETs each)",
                    human(each),
                    human(ahead)
                )
            } else {
                writeln!(
                    out,
                    "from an object store: + {} of read-ahead ({files}, {} of ranged GETs each, beyond {} \
                     each from one pool of {})",
                    human(pooled),
                    human(ahead),
                    human(own),
                    human(defaults::OBJECT_READ_AHEAD_SHARED_BYTES)
                )
            };
        }
        out.push_str(&resumption.explain());
        out
    }

    /// How the pipeline resumes from a saved position: each stage's kind, the cost at a
    /// position, whether a sharded state could be redealt ([`classify`]).
    pub fn resumption(&self) -> Resumption {
        let mut r = classify(self);
        if let Some(why) = &self.inherited_blocker
            && !matches!(r.pipeline, Resume::Blocked(_))
        {
            r.pipeline = Resume::Blocked(why.clone());
            r.cost = String::new();
            if matches!(r.elastic, Elastic::Yes(_)) {
                r.elastic = Elastic::No("its position cannot be saved exactly (resume: blocked)".into());
            }
        }
        r
    }
}

impl fmt::Display for PhysicalPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.explain())
    }
}
