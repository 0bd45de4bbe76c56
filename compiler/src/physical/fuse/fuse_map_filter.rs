//! `fuse_map_filter`: a `filter` directly on a `map` joins it: each worker maps an
//! element and tests it in the same pass, so rejected elements never cross a queue or
//! wait for their turn in the reorder buffer (tf.data's `map_and_filter_fusion`).
//!
//! ```text
//! before                                  after
//! Filter: predicate=label >= 0            MapFilter: fns=[parse_example, decode_jpeg],
//!   Map: fns=[parse_example, decode_jpeg]            predicate=label >= 0
//! ```

use crate::ir::plan::{MapFilter, Plan};

use super::{Rule, Transformed, rewrite_each_node};

/// Fuses a filter into the map below it.
#[derive(Debug, Clone, Copy, Default)]
pub struct FuseMapFilter;

impl Rule for FuseMapFilter {
    fn name(&self) -> &'static str {
        "fuse_map_filter"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, fuse)
    }
}

fn fuse(plan: Plan) -> Transformed {
    let Plan::Filter(filter) = plan else { return Transformed::no(plan) };
    match *filter.input {
        Plan::Map(m) => Transformed::yes(Plan::MapFilter(MapFilter {
            input: m.input,
            ops: m.ops,
            parallel: m.parallel,
            deterministic: m.deterministic,
            skip_errors: m.skip_errors,
            output: m.output,
            predicate: filter.predicate,
            reads: filter.reads,
            conditions: filter.conditions,
        })),
        other => Transformed::no(Plan::Filter(crate::ir::plan::Filter { input: Box::new(other), ..filter })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_a_filter_on_a_map() {
        let text = check(
            &FuseMapFilter,
            &pipeline("tfrecords(files); map(parallel: auto) { parse_example(); } filter(label >= 0);"),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        MapFilter: fns=[parse_example], parses=[x, label], predicate=label >= 0, parallel=auto, deterministic=true -> {x: f32[4], label: i64}
          Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
            Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_a_filter_on_anything_else() {
        let text = check(
            &FuseMapFilter,
            &pipeline("tfrecords(files); map { parse_example(); } shuffle(8); filter(label >= 0);"),
        );
        assert!(text.starts_with("changed=false"), "{text}");
    }
}
