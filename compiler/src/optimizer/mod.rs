//! The optimizer: rewrites of the logical plan that keep what a pipeline yields (its
//! element type, checked after every rule) and make it cheaper to run.
//!
//! Each rule is a struct in its own file, named as the file and as its
//! [`OptimizerRule::name`]; [`rules`] is their order. [`optimize`] runs the whole list
//! until a pass changes nothing and records each rule that changed the plan, with the
//! plan as it left that rule, for `explain --verbose`.
//!
//! The optimizer never produces diagnostics: a rule that changes the plan's output type
//! is a bug in the rule, and panics (in debug builds and tests) naming it.

mod eliminate_noops;
mod fuse_filters;
mod fuse_map_batch;
mod fuse_map_filter;
mod fuse_maps;
mod fuse_shuffle_repeat;
mod insert_prefetch;
mod lower_device_tail;
mod prune_fields;
mod push_shard_down;
mod push_take_down;
mod simplify_windows;
mod skip_row_groups;
mod vectorize_past_batch;

pub use eliminate_noops::EliminateNoops;
pub use fuse_filters::FuseFilters;
pub use fuse_map_batch::FuseMapBatch;
pub use fuse_map_filter::FuseMapFilter;
pub use fuse_maps::FuseMaps;
pub use fuse_shuffle_repeat::FuseShuffleRepeat;
pub use insert_prefetch::InsertPrefetch;
pub use lower_device_tail::LowerDeviceTail;
pub use prune_fields::PruneFields;
pub use push_shard_down::PushShardDown;
pub use push_take_down::PushTakeDown;
pub use simplify_windows::SimplifyWindows;
pub use skip_row_groups::SkipRowGroups;
pub use vectorize_past_batch::VectorizePastBatch;

use crate::ir::plan::{ArgValue, Files, Plan};

/// The plan after a rule, and whether the rule changed it.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Transformed {
    /// The plan (the input itself when nothing changed).
    pub plan: Plan,
    /// The rule rewrote something.
    pub changed: bool,
}

impl Transformed {
    /// A rewritten plan.
    pub fn yes(plan: Plan) -> Self {
        Transformed { plan, changed: true }
    }

    /// The plan as it was.
    pub fn no(plan: Plan) -> Self {
        Transformed { plan, changed: false }
    }
}

/// One rewrite of the logical plan.
pub trait OptimizerRule {
    /// The rule's name, equal to its file's (`fuse_maps`).
    fn name(&self) -> &'static str;

    /// Rewrites the whole plan (the rule chooses where: most rewrite every node through
    /// [`rewrite_each_node`]).
    fn rewrite(&self, plan: Plan) -> Transformed;
}

/// The rules in the order a pass runs them.
pub fn rules() -> Vec<Box<dyn OptimizerRule>> {
    vec![
        // First, so that a stage doing nothing does not keep two stages that could be
        // fused or moved past each other apart.
        Box::new(EliminateNoops),
        // Early too: a window that is a batch becomes one before the rules that move or
        // fuse batches (`vectorize_past_batch`, `fuse_map_batch`) look for batches.
        Box::new(SimplifyWindows),
        // Early, while each `parse_example` still sits in its own map: it only narrows
        // what is parsed, and never moves a stage.
        Box::new(PruneFields),
        // Structural moves before fusions: shard the file list while the `Interleave`
        // still sits right on `Files`.
        Box::new(PushShardDown),
        // Before map fusion and map+batch fusion: a `Take` pushed below two maps lets
        // them meet and fuse, and a fused `MapBatch` would stop the `Take`.
        Box::new(PushTakeDown),
        // Filter fusion and map fusion are independent of each other; both come before
        // map+batch fusion so that it fuses the one map left.
        Box::new(FuseFilters),
        Box::new(FuseMaps),
        // Independent of the others; before `InsertPrefetch` like every fusion.
        Box::new(FuseShuffleRepeat),
        // After map fusion (the map before the batch is whole) and before map+batch
        // fusion (which would hide the batch behind the map).
        Box::new(VectorizePastBatch),
        // After vectorization (whose map over batches it may empty) and before map+batch
        // fusion, though it also takes from a fused `MapBatch`: a `device cuda`
        // pipeline's trailing row operations move into its device tail.
        Box::new(LowerDeviceTail),
        // After map fusion, so that the batch takes the whole fused map.
        Box::new(FuseMapBatch),
        // After map+batch fusion: a map that feeds a batch fuses with the batch (the
        // bigger win); one that feeds a filter fuses with the filter.
        Box::new(FuseMapFilter),
        // After map+filter fusion: the filter on a `parquet` reader's parse sits in one
        // `MapFilter` with it.
        Box::new(SkipRowGroups),
        // Last: it looks at the plan's final node, which the rules above may change.
        Box::new(InsertPrefetch),
    ]
}

/// A rule that changed the plan, and the plan as it left it.
#[derive(Debug, Clone, PartialEq)]
pub struct Application {
    /// The rule's name.
    pub rule: &'static str,
    /// The plan after the rule (its `explain` text is made when asked for: a deep plan's
    /// text grows with the square of its depth, its indentation does).
    pub after: Plan,
}

/// The optimized plan and how it came about.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimized {
    /// The plan after every rule.
    pub plan: Plan,
    /// The rules that changed it, in the order they ran.
    pub applied: Vec<Application>,
}

/// Passes over the rule list at most. Every rule but `insert_prefetch` shrinks the plan
/// or moves a node down, and that one adds a single node once, so a fixed point comes
/// within a few passes; the bound only guards against a future rule that would undo
/// another's work.
const MAX_PASSES: usize = 16;

/// Runs [`rules`] over the plan until a pass changes nothing.
pub fn optimize(plan: Plan) -> Optimized {
    optimize_with(plan, &rules())
}

/// Runs the given rules, in order, until a pass changes nothing.
pub fn optimize_with(mut plan: Plan, rules: &[Box<dyn OptimizerRule>]) -> Optimized {
    let mut applied = Vec::new();
    for _ in 0..MAX_PASSES {
        let mut changed = false;
        for rule in rules {
            let t = apply(rule.as_ref(), plan);
            plan = t.plan;
            if t.changed {
                changed = true;
                applied.push(Application { rule: rule.name(), after: plan.clone() });
            }
        }
        if !changed {
            break;
        }
    }
    Optimized { plan, applied }
}

/// Runs one rule and, in debug builds and tests, checks that it kept the plan's output
/// type.
fn apply(rule: &dyn OptimizerRule, plan: Plan) -> Transformed {
    let before = cfg!(debug_assertions).then(|| plan.output());
    let t = rule.rewrite(plan);
    if let Some(before) = before {
        let after = t.plan.output();
        assert!(
            before == after,
            "optimizer rule `{}` changed the plan's output from {before} to {after}",
            rule.name()
        );
    }
    t
}

/// Applies a node-local rewrite at every depth, from the last stage down to the
/// source. At each node it is applied again while it changes something (each rule
/// shrinks the plan or moves a node down, so this ends), then the walk goes on to the
/// node's input.
pub fn rewrite_each_node(mut plan: Plan, rewrite: impl Fn(Plan) -> Transformed) -> Transformed {
    let mut changed = false;
    let mut node = &mut plan;
    loop {
        loop {
            let t = rewrite(std::mem::replace(node, placeholder()));
            *node = t.plan;
            if !t.changed {
                break;
            }
            changed = true;
        }
        match node.input_mut() {
            Some(input) => node = input,
            None => break,
        }
    }
    Transformed { plan, changed }
}

/// A node to leave in a slot while its owner is rewritten.
fn placeholder() -> Plan {
    Plan::Files(Files { pattern: ArgValue::Auto, shuffle_seed: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Compiles the one pipeline of `source`, runs `rule` over its plan once, and gives
    /// the plan's `explain` text, after a line saying whether the rule changed it.
    pub(crate) fn check(rule: &dyn OptimizerRule, source: &str) -> String {
        let checked = crate::compile(source)
            .into_result()
            .unwrap_or_else(|d| panic!("{}", crate::diagnostic::render("test.pipe", source, &d)));
        assert_eq!(checked.len(), 1, "one pipeline");
        let plan = checked.into_iter().next().unwrap().logical;
        let t = apply(rule, plan);
        format!("changed={}\n{}", t.changed, t.plan.explain())
    }

    const SCHEMA: &str = "schema { x: f32[4], label: i64 }";

    /// A pipeline with the schema above and these stages.
    pub(crate) fn pipeline(stages: &str) -> String {
        format!("pipeline p(files: glob = \"d/*.tfrecord\") {{\n{SCHEMA}\n{stages}\n}}\n")
    }

    #[test]
    fn every_rule_is_listed_once_and_named_as_its_file() {
        let names: Vec<&str> = rules().iter().map(|r| r.name()).collect();
        let mut files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/optimizer"))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_string_lossy().strip_suffix(".rs").map(String::from))
            .filter(|n| n != "mod")
            .collect();
        files.sort();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, files);
    }

    #[test]
    fn optimize_reaches_a_fixed_point_and_records_each_application() {
        let source = pipeline(
            "tfrecords(files);
             repeat(1);
             map { parse_example(); }
             map { x = x * 2.0; }
             take(10);
             batch(4);",
        );
        let checked = crate::compile(&source).into_result().unwrap();
        let plan = checked.into_iter().next().unwrap().logical;
        let o = optimize(plan);
        let rules: Vec<&str> = o.applied.iter().map(|a| a.rule).collect();
        assert_eq!(
            rules,
            [
                "eliminate_noops",
                "push_take_down",
                "fuse_maps",
                "vectorize_past_batch",
                "fuse_map_batch",
                "insert_prefetch"
            ]
        );
        assert_eq!(o.applied.last().unwrap().after, o.plan);
        insta::assert_snapshot!(o.plan.explain(), @r"
        Prefetch: buffer=auto -> batch<{x: f32[4], label: i64}>
          Map: fns=[expr], parallel=1, deterministic=true -> batch<{x: f32[4], label: i64}>
            MapBatch: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true, size=4, drop_remainder=false -> batch<{x: f32[4], label: i64}>
              Take: count=10 -> record
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
        // Optimizing again changes nothing.
        assert!(optimize(o.plan).applied.is_empty());
    }

    #[test]
    fn fused_filters_keep_every_field_their_predicates_read() {
        // `weight` is read only by the inner filter: after fusion, `prune_fields` must
        // still parse it.
        let source = "pipeline p(files: glob = \"d/*\") {
            schema { x: f32[4], label: i64, weight: f32 }
            tfrecords(files);
            map { parse_example(); }
            filter(weight > 0.0);
            filter(label >= 0);
            select(x);
        }";
        let plan = crate::compile(source).into_result().unwrap().into_iter().next().unwrap().logical;
        let text = optimize(plan).plan.explain();
        assert!(text.contains("parses=[x, label, weight]"), "{text}");
    }

    /// A rule that breaks the output type, to show the check catches it.
    struct Unbatching;

    impl OptimizerRule for Unbatching {
        fn name(&self) -> &'static str {
            "unbatching"
        }

        fn rewrite(&self, plan: Plan) -> Transformed {
            Transformed::yes(Plan::Unbatch(Box::new(plan)))
        }
    }

    // The check runs in debug builds only.
    #[cfg(debug_assertions)]
    #[test]
    fn a_rule_that_changes_the_output_type_is_caught() {
        let source = pipeline("tfrecords(files); batch(4);");
        let plan = crate::compile(&source).into_result().unwrap().into_iter().next().unwrap().logical;
        let caught = std::panic::catch_unwind(|| apply(&Unbatching, plan));
        let message = caught.expect_err("the check panics");
        let message = message.downcast_ref::<String>().expect("a formatted message");
        assert_eq!(
            message,
            "optimizer rule `unbatching` changed the plan's output from batch<record> to record"
        );
    }
}
