//! The optimizer: rewrites of the logical plan that keep what a pipeline yields (its
//! element type, checked after every rule) and make it cheaper to run. Its plan is made
//! of the nodes a user could have written (fewer maps, stages moved, fields pruned):
//! which of them then run fused as one stage is the physical plan's choice alone
//! (`crate::physical`'s `fuse` rules, run by the same machinery, [`crate::ir::rewrite`]).
//!
//! Each rule is a struct in its own file, named as the file and as its
//! [`Rule::name`]; [`rules`] is their order. [`optimize`] runs the whole list
//! until a pass changes nothing and records each rule that changed the plan, with the
//! plan as it left that rule, for `explain --verbose`.
//!
//! The optimizer never produces diagnostics: a rule that changes the plan's output type
//! is a bug in the rule, and panics (in debug builds and tests) naming it.

mod eliminate_noops;
mod fuse_filters;
mod fuse_maps;
mod prune_fields;
mod push_shard_down;
mod push_take_down;
mod simplify_windows;
mod skip_row_groups;
mod vectorize_past_batch;

pub use eliminate_noops::EliminateNoops;
pub use fuse_filters::FuseFilters;
pub use fuse_maps::FuseMaps;
pub use prune_fields::PruneFields;
pub use push_shard_down::PushShardDown;
pub use push_take_down::PushTakeDown;
pub use simplify_windows::SimplifyWindows;
pub use skip_row_groups::SkipRowGroups;
pub use vectorize_past_batch::VectorizePastBatch;

use crate::ir::plan::Plan;
use crate::ir::rewrite::placeholder;
pub use crate::ir::rewrite::{Application, Rewritten as Optimized, Rule, Transformed, rewrite_each_node};

/// The rules in the order a pass runs them.
pub fn rules() -> Vec<Box<dyn Rule>> {
    vec![
        // First, so that a stage doing nothing does not keep two stages that could be
        // merged or moved past each other apart.
        Box::new(EliminateNoops),
        // Early too: a window that is a batch becomes one before the rules that move
        // batches (`vectorize_past_batch`) look for batches.
        Box::new(SimplifyWindows),
        // Early, while each `parse_example` still sits in its own map: it only narrows
        // what is parsed, and never moves a stage.
        Box::new(PruneFields),
        // Structural moves before merges: shard the file list while the `Interleave`
        // still sits right on `Files`.
        Box::new(PushShardDown),
        // Before map merging: a `Take` pushed below two maps lets them meet and merge.
        Box::new(PushTakeDown),
        // Filter merging and map merging are independent of each other.
        Box::new(FuseFilters),
        Box::new(FuseMaps),
        // After map merging: the map before the batch is whole.
        Box::new(VectorizePastBatch),
        // After map merging: the filter on a `parquet` reader's parse sits right on its
        // one map.
        Box::new(SkipRowGroups),
    ]
}

/// Runs [`rules`] over the plan until a pass changes nothing.
pub fn optimize(plan: Plan) -> Optimized {
    crate::ir::rewrite::run(plan, &rules())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ir::rewrite::apply;

    /// Compiles the one pipeline of `source`, runs `rule` over its plan once, and gives
    /// the plan's `explain` text, after a line saying whether the rule changed it.
    pub(crate) fn check(rule: &dyn Rule, source: &str) -> String {
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
        crate::ir::rewrite::tests::assert_named_as_files(&rules(), "optimizer");
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
        assert_eq!(rules, ["eliminate_noops", "push_take_down", "fuse_maps", "vectorize_past_batch"]);
        assert_eq!(o.applied.last().unwrap().after, o.plan);
        // The optimizer's plan has no fused node: the physical plan's rules make them.
        let fused = crate::physical::fuse::fuse(o.plan.clone());
        let rules: Vec<&str> = fused.applied.iter().map(|a| a.rule).collect();
        assert_eq!(rules, ["fuse_map_batch", "insert_prefetch"]);
        insta::assert_snapshot!(o.plan.explain(), @r"
        Map: fns=[expr], parallel=1, deterministic=true -> batch<{x: f32[4], label: i64}>
          Batch: size=4, drop_remainder=false -> batch<{x: f32[4], label: i64}>
            Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
              Take: count=10 -> record
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
        insta::assert_snapshot!(fused.plan.explain(), @r"
        Prefetch: buffer=auto -> batch<{x: f32[4], label: i64}>
          Map: fns=[expr], parallel=1, deterministic=true -> batch<{x: f32[4], label: i64}>
            MapBatch: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true, size=4, drop_remainder=false -> batch<{x: f32[4], label: i64}>
              Take: count=10 -> record
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
        // Optimizing or fusing again changes nothing.
        assert!(optimize(o.plan).applied.is_empty());
        assert!(crate::physical::fuse::fuse(fused.plan).applied.is_empty());
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

    impl Rule for Unbatching {
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
