//! How a pipeline resumes from a saved position: [`classify`] says, per exec node, how the
//! runtime stage it runs as gets to the position p of its pass (its `Dataset::iter_from`),
//! what resuming at p costs the whole pipeline, and whether a state saved by N shards
//! could be redealt to M (**elastic**). `explain` prints it under the physical plan.
//!
//! The kinds, from what each runtime stage does (`runtime/src/stage/`):
//!
//! - **seek**: the stage computes where p is and reads nothing before it: `range`, a
//!   `shuffle(global)` permutation (`on_corrupt: fail`; a skipping policy pulls).
//! - **fast-forward**: the stage hands the position to its input, computing nothing for
//!   what it skips: maps (one result per input), `batch` (p × size), `window` (p × shift),
//!   `take`/`skip`/`enumerate` (counts), `prefetch`, `zip`, a `shard` that keeps or drops
//!   its last round (about p × num_shards: exactly `index + (p - 1)·num_shards + 1`, or
//!   `p·num_shards`); a `filter` (and a map that drops elements) goes to the input
//!   position the state recorded for it; a reader reads the records before p and delivers
//!   them to no one (`interleave`, the file list).
//! - **replay**: the stage pulls its first p elements again, and everything beneath it
//!   computes them again: a local `shuffle` buffer, a padding `shard` (it keeps the first
//!   elements for its padding), `repeat`, `cache`, `pack`,
//!   `bucket_by_length`, `unbatch`, `flat_map`, `take_while`, `sample_from`, `concatenate`,
//!   the batched reader (`ReadBatchesExec`, which runs its maps).
//! - **blocked**: the position cannot be saved exactly (what `resume_blocker` reports:
//!   no seed, or an order left to timing); the reason is printed.
//!
//! Elastic: a `shard` must exist, its count and index parameters (the generated `reshard`
//! sets them for each rank of the old and the new run). It is elastic when the stream it
//! deals from is the same for any number of shards and the stages after it only map,
//! filter or batch its share (their positions lead the saved state down to the shard's
//! count): `shuffle(global)` dealt by blocks of its permutation, or a record-level `shard`
//! over readers, `range` and maps. A local shuffle buffer before the shard mixes records of
//! every shard; a shard of the file list deals whole files; a shard moved into a
//! `parquet` reader deals whole row groups of a list whose deal depends on the number of
//! shards, and the runtime's redeal knows elements, not row groups: it is refused with
//! that reason (`remainder: drop` keeps the shard on the rows, which is elastic). The
//! runtime's `PipelineState::reshard` redeals the states of an elastic pipeline
//! (`reshard.rs`).

use std::fmt;

use super::exec::{CorruptPolicy, Exec, MapFn};
use super::{ExecNode, PhysicalPlan};
use crate::ir::plan::{ArgValue, RecordFormat, RustKind};
use crate::ir::resume::{
    UNORDERED_INTERLEAVE, UNORDERED_MAP, UNSEEDED_SAMPLE_FROM, UNSEEDED_SHUFFLE, is_parallel, unseeded_ops,
};
use crate::ir::types::Value;

/// How one stage gets to a position of its pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// By arithmetic, reading nothing before it.
    Seek,
    /// By handing the position to its input, computing nothing for what it skips.
    FastForward,
    /// By pulling the elements before it again (everything beneath computes them).
    Replay,
    /// Not at all: the reason.
    Blocked(String),
}

impl Resume {
    /// Its word in `explain` (`seek`, `fast-forward`, `replay`, `blocked`).
    pub fn word(&self) -> &'static str {
        match self {
            Resume::Seek => "seek",
            Resume::FastForward => "fast-forward",
            Resume::Replay => "replay",
            Resume::Blocked(_) => "blocked",
        }
    }
}

/// Whether a state saved by N shards could be redealt to M.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elastic {
    /// The pipeline has no `shard`.
    NoShard,
    /// Yes, and why.
    Yes(String),
    /// No: the stage that prevents it and why.
    No(String),
}

/// How a pipeline resumes: see the [module doc](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumption {
    /// Each stage's kind, in the order of [`PhysicalPlan::stages`] (source first).
    pub stages: Vec<Resume>,
    /// The device tail's (a map over the batches).
    pub tail: Option<Resume>,
    /// The pipeline's: the kind of the stage where resuming at p stops going down.
    pub pipeline: Resume,
    /// What resuming at position p costs, as a short formula.
    pub cost: String,
    /// Whether a state saved by N shards could be redealt to M.
    pub elastic: Elastic,
    /// When elastic: the parameters the shard's count and index are.
    pub shard_params: Option<(String, String)>,
}

impl Resumption {
    /// The two lines `explain` prints (`resume at p: …`, `elastic: …`).
    pub fn explain(&self) -> String {
        let kind = match &self.pipeline {
            Resume::Blocked(why) => format!("blocked: {why}"),
            k => format!("{}, {}", k.word(), self.cost),
        };
        format!("resume at p (elements delivered): {kind}\nelastic: {}\n", self.elastic)
    }

    /// Whether a state saved by N shards could be redealt to M.
    pub fn is_elastic(&self) -> bool {
        matches!(self.elastic, Elastic::Yes(_))
    }
}

impl fmt::Display for Elastic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elastic::NoShard => f.write_str("n/a (no shard)"),
            Elastic::Yes(why) => write!(f, "yes ({why})"),
            Elastic::No(why) => write!(f, "no: {why}"),
        }
    }
}

/// How `plan` resumes: each stage's kind, the pipeline's cost at p, and elasticity.
pub fn classify(plan: &PhysicalPlan) -> Resumption {
    let stages: Vec<Resume> = plan.stages.iter().map(|s| stage(&s.exec)).collect();
    let tail =
        plan.tail.as_ref().map(|(t, _)| unseeded_ops(&t.ops).map_or(Resume::FastForward, Resume::Blocked));
    let (pipeline, cost) = walk(plan, &stages, tail.as_ref());
    let (elastic, shard_params) = elastic(&plan.stages, &pipeline);
    Resumption { stages, tail, pipeline, cost, elastic, shard_params }
}

/// Why a map blocks resumption, if it does.
fn map_blocker(f: &MapFn, parallel: &ArgValue, deterministic: bool) -> Option<String> {
    if !deterministic && is_parallel(parallel) {
        return Some(UNORDERED_MAP.to_string());
    }
    unseeded_ops(&f.ops)
}

/// How the runtime stage of `exec` gets to a position (module doc).
fn stage(exec: &Exec) -> Resume {
    let blocked = |why: Option<String>, kind: Resume| why.map_or(kind, Resume::Blocked);
    let unseeded = |seed: &Option<ArgValue>, kind: Resume| {
        if seed.is_none() { Resume::Blocked(UNSEEDED_SHUFFLE.to_string()) } else { kind }
    };
    match exec {
        Exec::Range(_) => Resume::Seek,
        Exec::GlobalShuffle { seed, reader, .. } => {
            // A skipping policy makes an element no position: the runtime pulls them.
            unseeded(
                seed,
                if reader.on_corrupt == CorruptPolicy::Fail { Resume::Seek } else { Resume::Replay },
            )
        }
        Exec::Files { .. } | Exec::ReadColumns { .. } => Resume::FastForward,
        Exec::Interleave { parallel, deterministic, .. } => blocked(
            (!deterministic && is_parallel(parallel)).then(|| UNORDERED_INTERLEAVE.to_string()),
            Resume::FastForward,
        ),
        // Under `fail` each element is one path: the paths are skipped, no file read.
        Exec::ReadFile { on_error, .. } if *on_error == CorruptPolicy::Fail => Resume::FastForward,
        Exec::ReadFile { .. } => Resume::Replay,
        // Its reader threads run the maps on every batch they deliver.
        Exec::ReadBatches { parallel, maps, .. } => {
            let ops = maps.iter().find_map(|m| match m {
                super::ReaderMap::MapBatch(f) | super::ReaderMap::Map(f) => unseeded_ops(&f.ops),
            });
            let order = is_parallel(parallel).then(|| UNORDERED_INTERLEAVE.to_string());
            blocked(order.or(ops), Resume::Replay)
        }
        Exec::Map { f, parallel, deterministic, .. }
        | Exec::ChunkedMap { f, parallel, deterministic, .. }
        | Exec::MapBatch { f, parallel, deterministic, .. } => {
            blocked(map_blocker(f, parallel, *deterministic), Resume::FastForward)
        }
        Exec::Filter { .. }
        | Exec::Rust { .. }
        | Exec::Select { .. }
        | Exec::Batch { .. }
        | Exec::Take(_)
        | Exec::Skip(_)
        | Exec::Prefetch(_)
        | Exec::Enumerate { .. }
        | Exec::Zip(_)
        | Exec::Window { .. } => Resume::FastForward,
        // Its input position is arithmetic unless it pads (it keeps the first elements).
        Exec::Shard { remainder, .. } if *remainder != super::exec::Remainder::Pad => Resume::FastForward,
        Exec::Shuffle { seed, .. } | Exec::ShuffleBatches { seed, .. } | Exec::ShuffleRepeat { seed, .. } => {
            unseeded(seed, Resume::Replay)
        }
        Exec::SampleFrom(s) => {
            if s.seed.is_none() {
                Resume::Blocked(UNSEEDED_SAMPLE_FROM.to_string())
            } else {
                Resume::Replay
            }
        }
        Exec::FlatMap { inner, .. } => {
            // Its inner chain runs again for every element it replays.
            inner
                .iter()
                .find_map(|n| match stage(&n.exec) {
                    Resume::Blocked(why) => Some(Resume::Blocked(why)),
                    _ => None,
                })
                .unwrap_or(Resume::Replay)
        }
        Exec::Pack { .. }
        | Exec::BucketByLength { .. }
        | Exec::Unbatch
        | Exec::UnbatchFields { .. }
        | Exec::Repeat(_)
        | Exec::Shard { .. }
        | Exec::Cache { .. }
        | Exec::TakeWhile { .. }
        | Exec::Concatenate(_)
        | Exec::InnerSource(_) => Resume::Replay,
    }
}

/// A count as the formula prints it: a constant, or the parameter's name.
fn arg(v: &ArgValue) -> String {
    match v {
        ArgValue::Param(p) => format!("`{p}`"),
        v => v.to_string(),
    }
}

/// The position a stage is asked for, as a formula of p.
struct Position {
    text: String,
    /// The last operation was a sum (a product of it needs parentheses).
    sum: bool,
}

impl Position {
    fn times(&mut self, n: &ArgValue) {
        if matches!(n, ArgValue::Const(Value::Int(1) | Value::UInt(1))) {
            return;
        }
        if self.sum {
            self.text = format!("({})", self.text);
        }
        self.text = format!("{} × {}", self.text, arg(n));
        self.sum = false;
    }

    fn plus(&mut self, n: &ArgValue) {
        self.text = format!("{} + {}", self.text, arg(n));
        self.sum = true;
    }
}

/// Goes down from the consumer with the position, each stage translating it, to the
/// stage that stops it (a seek, a reader, a replay, a blocker): the pipeline's kind and
/// cost at p.
fn walk(plan: &PhysicalPlan, stages: &[Resume], tail: Option<&Resume>) -> (Resume, String) {
    let mut pos = Position { text: "p".into(), sum: false };
    if let Some(Resume::Blocked(why)) = tail {
        return (Resume::Blocked(why.clone()), String::new());
    }
    // A blocker anywhere blocks the pipeline: the first from the consumer, as
    // `resume_blocker` finds it.
    if let Some(b) = stages.iter().rev().find(|k| matches!(k, Resume::Blocked(_))) {
        return (b.clone(), String::new());
    }
    // The lowest filter's saved input position, by name: what the stages beneath go to.
    let mut recorded: Option<&str> = None;
    let filters = |recorded: Option<&str>| {
        recorded.map_or(String::new(), |name| format!(" (q: the input position the state saved for {name})"))
    };
    for (node, kind) in plan.stages.iter().zip(stages).rev() {
        let name = node.exec.name();
        match (&node.exec, kind) {
            (_, Resume::Seek) => {
                return (
                    Resume::Seek,
                    format!("O(1): {name} starts at {}, reading nothing before it", pos.text),
                );
            }
            (_, Resume::Replay) => {
                // A shard pulls `num_shards` inputs for each element it delivers.
                let input = match &node.exec {
                    Exec::Shard { num_shards, .. } => {
                        let mut input = Position { text: pos.text.clone(), sum: pos.sum };
                        input.times(num_shards);
                        format!(" ({} of its input)", input.text)
                    }
                    _ => String::new(),
                };
                return (
                    Resume::Replay,
                    format!(
                        "replays {} elements of {name}{input}, every stage beneath it computing them again{}",
                        pos.text,
                        filters(recorded)
                    ),
                );
            }
            (Exec::Interleave { format, .. }, _) => {
                let what = match format {
                    RecordFormat::TfRecord => "records",
                    RecordFormat::Lines => "lines",
                    RecordFormat::Csv(_) | RecordFormat::Parquet(_) => "rows",
                    RecordFormat::WebDataset(_) => "samples",
                };
                return (
                    Resume::FastForward,
                    format!("reads {} {what}, decodes none{}", pos.text, filters(recorded)),
                );
            }
            (Exec::ReadColumns { size, .. }, _) => {
                pos.times(size);
                return (
                    Resume::FastForward,
                    format!(
                        "passes {} rows by the row counts of the files' footers, decodes none{}",
                        pos.text,
                        filters(recorded)
                    ),
                );
            }
            (Exec::Files { .. }, _) => {
                return (
                    Resume::FastForward,
                    format!("passes {} paths, reads none of their files{}", pos.text, filters(recorded)),
                );
            }
            (Exec::Zip(_), _) => {
                return (
                    Resume::FastForward,
                    format!("each zipped pipeline resumes at {}, as its own explain says", pos.text),
                );
            }
            // A filter (a map that drops elements: fused filter, `on_error: skip`) goes
            // to the input position saved for it.
            (Exec::Filter { .. } | Exec::Rust { kind: RustKind::Filter, .. }, _) => {
                recorded = Some(name);
                pos = Position { text: "q".into(), sum: false };
            }
            (Exec::Map { f, filter, .. }, _) if filter.is_some() || f.skip_errors => {
                recorded = Some(name);
                pos = Position { text: "q".into(), sum: false };
            }
            (Exec::ChunkedMap { f, size, .. }, _) if f.skip_errors => {
                // The chunks under its dropping map: q chunks of `size` records.
                recorded = Some(name);
                pos = Position { text: "q".into(), sum: false };
                pos.times(size);
            }
            (Exec::Batch { size, .. } | Exec::ChunkedMap { size, .. }, _) => pos.times(size),
            (Exec::Shard { num_shards, .. }, _) => pos.times(num_shards),
            (Exec::MapBatch { size, batched: false, .. }, _) => pos.times(size),
            (Exec::Window { shift, .. }, _) => pos.times(shift),
            (Exec::Skip(n), _) => pos.plus(n),
            _ => {}
        }
    }
    (Resume::FastForward, format!("reaches {}{}", pos.text, filters(recorded)))
}

/// Whether a state saved by N shards could be redealt to M (module doc), and then the
/// parameters of the shard's count and index.
fn elastic(stages: &[ExecNode], pipeline: &Resume) -> (Elastic, Option<(String, String)>) {
    let Some(at) = stages.iter().position(|s| {
        matches!(s.exec, Exec::Shard { .. } | Exec::GlobalShuffle { shard: Some(_), .. })
            || row_group_shard(&s.exec)
    }) else {
        return (Elastic::NoShard, None);
    };
    let why = elastic_why(stages, at, pipeline);
    let params = match &stages[at].exec {
        Exec::Shard { num_shards, index, .. }
        | Exec::GlobalShuffle { shard: Some((num_shards, index, _)), .. } => match (num_shards, index) {
            (ArgValue::Param(n), ArgValue::Param(i)) => Some((n.clone(), i.clone())),
            _ => None,
        },
        _ => None,
    };
    match (why, params) {
        (Elastic::Yes(_), None) => (
            Elastic::No(format!(
                "the count and index of {} are not both parameters: another number of ranks is another pipeline",
                stages[at].exec.name()
            )),
            None,
        ),
        (yes @ Elastic::Yes(_), params) => (yes, params),
        (no, _) => (no, None),
    }
}

/// [`elastic`] of the shard at `at`, its parameters aside.
fn elastic_why(stages: &[ExecNode], at: usize, pipeline: &Resume) -> Elastic {
    if let Resume::Blocked(_) = pipeline {
        return Elastic::No("its position cannot be saved exactly (resume: blocked)".into());
    }
    let shard = &stages[at].exec;
    if row_group_shard(shard) {
        return Elastic::No(format!(
            "{} reads whole Parquet row groups of its shard (a `shard` right on `parquet`): what a worker \
             reads depends on the number of shards; `remainder: drop` keeps the shard on the rows",
            shard.name()
        ));
    }
    if matches!(shard, Exec::Shard { .. }) && at > 0 && matches!(stages[at - 1].exec, Exec::Files { .. }) {
        return Elastic::No(
            "ShardExec deals whole files: what a worker reads depends on the number of shards".into(),
        );
    }
    if let Some(s) = stages[..at].iter().find(|s| {
        matches!(s.exec, Exec::Shuffle { .. } | Exec::ShuffleBatches { .. } | Exec::ShuffleRepeat { .. })
    }) {
        return Elastic::No(format!(
            "{} before the shard: its buffer mixes the records of every shard",
            s.exec.name()
        ));
    }
    for s in &stages[at + 1..] {
        let why = match &s.exec {
            Exec::Map { .. }
            | Exec::ChunkedMap { .. }
            | Exec::MapBatch { .. }
            | Exec::Filter { .. }
            | Exec::Rust { .. }
            | Exec::Select { .. }
            | Exec::Batch { .. }
            | Exec::Prefetch(_) => continue,
            Exec::Repeat(_) => "passes over the shard again within one position: each pass would be redealt",
            Exec::Unbatch | Exec::UnbatchFields { .. } => {
                "delivers parts of its input's elements: the state does not lead down to the shard's count"
            }
            Exec::Shuffle { .. } | Exec::ShuffleBatches { .. } | Exec::ShuffleRepeat { .. } => {
                "holds this shard's records in its buffer"
            }
            Exec::Pack { .. } | Exec::BucketByLength { .. } | Exec::Cache { .. } => {
                "holds this shard's elements across positions"
            }
            Exec::Take(_) | Exec::Skip(_) | Exec::Enumerate { .. } | Exec::TakeWhile { .. } => {
                "counts the elements of one shard"
            }
            _ => "is not known to redeal",
        };
        return Elastic::No(format!("{} after the shard {why}", s.exec.name()));
    }
    Elastic::Yes(match shard {
        Exec::GlobalShuffle { .. } => "the permutation is global: shards are blocks of it".into(),
        _ => "the shard deals from one stream, the same for any number of shards".into(),
    })
}

/// Whether `exec` is a `parquet` reader a `shard` moved into (it reads its row groups).
fn row_group_shard(exec: &Exec) -> bool {
    match exec {
        Exec::Interleave { format: RecordFormat::Parquet(p), .. } | Exec::ReadColumns { format: p, .. } => {
            p.shard.is_some()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resumption(stages: &str) -> Resumption {
        let source = format!(
            "pipeline p(files: glob = \"d/*\", seed: u64 = 1, n: u32 = 4, i: u32 = 0) {{
                schema {{ image: bytes, label: i64 }}
                {stages}
            }}"
        );
        let compiled = crate::compile(&source).into_result().unwrap_or_else(|d| panic!("{d:?}"));
        let r = compiled[0].physical.resumption();
        // The pipeline is blocked exactly when `resume_blocker` (the generated
        // `RESUME_BLOCKER`) says why, and for the same reason.
        let blocker = crate::ir::resume::resume_blocker(&compiled[0].optimized.plan);
        match &r.pipeline {
            Resume::Blocked(why) => assert_eq!(Some(why), blocker.as_ref(), "{stages}"),
            _ => assert_eq!(blocker, None, "{stages}"),
        }
        r
    }

    const PARSE: &str = "map { parse_example(); }";

    #[test]
    fn a_global_shuffle_seeks_and_its_shards_are_elastic() {
        let r = resumption(&format!(
            "tfrecords(files); shuffle(global, seed: seed); shard(n, i); {PARSE} batch(8);"
        ));
        assert_eq!(r.pipeline, Resume::Seek);
        assert!(r.cost.starts_with("O(1)") && r.cost.contains("p × 8"), "{}", r.cost);
        assert!(r.is_elastic(), "{}", r.elastic);
        assert!(r.elastic.to_string().contains("permutation is global"), "{}", r.elastic);
    }

    #[test]
    fn a_local_shuffle_before_the_shard_replays_and_is_not_elastic() {
        let r = resumption(&format!(
            "tfrecords(files); shuffle(100, seed: seed); shard(n, i); {PARSE} batch(8);"
        ));
        assert_eq!(r.pipeline, Resume::Replay);
        // The shard hands about p × n to the shuffle, which replays them.
        assert!(r.cost.contains("replays p × 8 × `n` elements of ShuffleExec"), "{}", r.cost);
        let Elastic::No(why) = &r.elastic else { panic!("{}", r.elastic) };
        assert!(why.contains("ShuffleExec before the shard"), "{why}");
        // A record-level shard over the reader is.
        let r = resumption(&format!("tfrecords(files); shard(n, i, remainder: pad); {PARSE} batch(8);"));
        assert!(r.is_elastic(), "{}", r.elastic);
        // A shuffle after it holds one shard's records.
        let r = resumption(&format!(
            "tfrecords(files); shard(n, i, remainder: drop); shuffle(10, seed: seed); {PARSE}"
        ));
        let Elastic::No(why) = &r.elastic else { panic!("{}", r.elastic) };
        assert!(why.contains("ShuffleExec after the shard"), "{why}");
    }

    #[test]
    fn range_seeks_and_readers_fast_forward() {
        let range = "pipeline r() { range(100); map { value = value * 2; } batch(4); }";
        let compiled = crate::compile(range).into_result().unwrap_or_else(|d| panic!("{d:?}"));
        let r = compiled[0].physical.resumption();
        assert_eq!(r.pipeline, Resume::Seek);
        assert!(r.cost.contains("RangeExec starts at p × 4"), "{}", r.cost);
        assert_eq!(r.elastic, Elastic::NoShard);
        assert_eq!(r.elastic.to_string(), "n/a (no shard)");

        let r = resumption(&format!("tfrecords(files); {PARSE} batch(32);"));
        assert_eq!(r.pipeline, Resume::FastForward);
        assert_eq!(r.cost, "reads p × 32 records, decodes none");
        assert!(r.stages.iter().all(|k| *k == Resume::FastForward), "{:?}", r.stages);
    }

    #[test]
    fn a_filter_fast_forwards_to_its_saved_position() {
        let r = resumption(&format!("tfrecords(files); {PARSE} filter(label > 0); batch(4);"));
        assert_eq!(r.pipeline, Resume::FastForward);
        assert!(r.cost.starts_with("reads q records, decodes none (q: the input position"), "{}", r.cost);
    }

    #[test]
    fn unseeded_and_unordered_stages_are_blocked_with_the_reason() {
        let r = resumption("tfrecords(files); shuffle(100); batch(4);");
        assert_eq!(r.pipeline, Resume::Blocked(UNSEEDED_SHUFFLE.into()));
        assert!(r.stages.contains(&Resume::Blocked(UNSEEDED_SHUFFLE.into())));
        assert!(r.explain().contains("resume at p (elements delivered): blocked: `shuffle` without a seed"));
        let r = resumption(
            "tfrecords(files); map(parallel: 4, deterministic: false) { parse_example(); } batch(4);",
        );
        assert_eq!(r.pipeline, Resume::Blocked(UNORDERED_MAP.into()));
        let r = resumption("tfrecords(files); shard(n, i); shuffle(100); batch(4);");
        assert!(matches!(r.elastic, Elastic::No(_)), "{}", r.elastic);
    }

    #[test]
    fn a_shard_fast_forwards_unless_it_pads_and_its_parameters_are_named() {
        let r = resumption(&format!("tfrecords(files); shard(n, i, remainder: drop); {PARSE} batch(8);"));
        assert_eq!(r.pipeline, Resume::FastForward);
        assert_eq!(r.cost, "reads p × 8 × `n` records, decodes none");
        assert_eq!(r.shard_params, Some(("n".into(), "i".into())));
        let r = resumption(&format!("tfrecords(files); shard(n, i, remainder: pad); {PARSE} batch(8);"));
        assert_eq!(r.pipeline, Resume::Replay);
        assert!(
            r.cost.contains("replays p × 8 elements of ShardExec (p × 8 × `n` of its input)"),
            "{}",
            r.cost
        );
    }

    #[test]
    fn a_constant_shard_a_repeat_or_an_unbatch_after_it_is_not_elastic() {
        let r = resumption(&format!("tfrecords(files); shard(4, i, remainder: drop); {PARSE} batch(8);"));
        let Elastic::No(why) = &r.elastic else { panic!("{}", r.elastic) };
        assert!(why.contains("count and index of ShardExec are not both parameters"), "{why}");
        assert_eq!(r.shard_params, None);
        let r = resumption("range(100); shard(n, i); repeat(2); batch(8);");
        let Elastic::No(why) = &r.elastic else { panic!("{}", r.elastic) };
        assert!(why.contains("RepeatExec after the shard passes over the shard again"), "{why}");
        let r = resumption("range(100); shard(n, i); batch(8); unbatch();");
        let Elastic::No(why) = &r.elastic else { panic!("{}", r.elastic) };
        assert!(why.contains("after the shard delivers parts"), "{why}");
    }

    #[test]
    fn a_shard_of_parquet_row_groups_is_not_elastic() {
        for stages in ["map { y = x; }", "batch(4);"] {
            let source = format!(
                "pipeline p(files: glob, n: u64 = 2, i: u64 = 0) {{ schema {{ x: f32[4] }} parquet(files); \
                 shard(n, i); {stages} }}"
            );
            let c = crate::driver::compile(&source);
            assert!(!c.has_errors(), "{source}: {:?}", c.diagnostics);
            let r = classify(&c.pipelines[0].physical);
            let Elastic::No(why) = &r.elastic else { panic!("{}", r.elastic) };
            assert!(why.contains("reads whole Parquet row groups of its shard"), "{why}");
            assert_eq!(r.pipeline, Resume::FastForward, "{stages}");
        }
    }

    #[test]
    fn a_shard_of_the_file_list_is_not_elastic() {
        let r = resumption(
            "files(files, shuffle: true, seed: seed); shard(n, i); interleave(cycle: 2) { tfrecord(); } batch(4);",
        );
        let Elastic::No(why) = &r.elastic else { panic!("{}", r.elastic) };
        assert!(why.contains("deals whole files"), "{why}");
    }
}
