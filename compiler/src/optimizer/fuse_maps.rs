//! `fuse_maps`: two adjacent `map`s that agree on `deterministic` and `on_error` become
//! one, running the first's operations then the second's in one worker pass (tf.data's
//! `map_fusion`). The fused map keeps the parallelism both had, or `auto` when they
//! differ. A `fail` map and a `skip` one stay apart: fused, the one policy would either
//! drop elements the `fail` map must fail on or fail on those the `skip` map drops.
//!
//! ```text
//! before                                          after
//! Map: fns=[normalize], parallel=4                Map: fns=[parse_example, normalize], parallel=auto
//!   Map: fns=[parse_example], parallel=auto         Interleave: …
//!     Interleave: …
//! ```

use crate::ir::plan::{ArgValue, Plan};

use super::{Rule, Transformed, rewrite_each_node};

/// Fuses adjacent maps with the same determinism and error policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct FuseMaps;

impl Rule for FuseMaps {
    fn name(&self) -> &'static str {
        "fuse_maps"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, fuse)
    }
}

/// A map on a map with the same determinism, as one map.
fn fuse(plan: Plan) -> Transformed {
    let Plan::Map(mut second) = plan else { return Transformed::no(plan) };
    match *second.input {
        Plan::Map(mut first)
            if first.deterministic == second.deterministic && first.skip_errors == second.skip_errors =>
        {
            first.ops.append(&mut second.ops);
            if first.parallel != second.parallel {
                first.parallel = ArgValue::Auto;
            }
            first.output = second.output;
            Transformed::yes(Plan::Map(first))
        }
        other => {
            second.input = Box::new(other);
            Transformed::no(Plan::Map(second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_adjacent_maps() {
        let text = check(
            &FuseMaps,
            &pipeline(
                "tfrecords(files);
                 map(parallel: auto) { parse_example(); }
                 map(parallel: 4) { x = x * 2.0; }
                 map(parallel: 4) { x = x + 1.0; }",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Map: fns=[parse_example, expr, expr], parses=[x, label], parallel=auto, deterministic=true -> {x: f32[4], label: i64}
          Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
            Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_across_determinism_or_other_stages() {
        let text = check(
            &FuseMaps,
            &pipeline(
                "tfrecords(files);
                 map { parse_example(); }
                 map(deterministic: false) { x = x * 2.0; }
                 filter(label >= 0);
                 map(deterministic: false) { x = x + 1.0; }",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Map: fns=[expr], parallel=1, deterministic=false -> {x: f32[4], label: i64}
          Filter: predicate=label >= 0 -> {x: f32[4], label: i64}
            Map: fns=[expr], parallel=1, deterministic=false -> {x: f32[4], label: i64}
              Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn fuses_only_maps_of_one_error_policy() {
        // Fused, one policy would drop what the `fail` map must fail on, or fail on what
        // the `skip` map drops; two `skip` maps fuse.
        let text = check(
            &FuseMaps,
            &pipeline(
                "tfrecords(files);
                 map { parse_example(); }
                 map(on_error: skip) { x = x * 2.0; }
                 map(on_error: skip) { x = x + 1.0; }",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Map: fns=[expr, expr], parallel=1, deterministic=true, on_error=skip -> {x: f32[4], label: i64}
          Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
            Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
