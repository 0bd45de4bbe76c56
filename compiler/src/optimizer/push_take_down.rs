//! `push_take_down`: a `take` right on a `map` moves below it, so that only the
//! elements kept are mapped. A map yields exactly one element per input, so the first
//! `n` mapped elements are the mapped first `n`. (A map with `deterministic=false` may
//! reorder; taking before it yields one of the outcomes it already allowed.)
//!
//! Repeated, the `take` sinks through a chain of maps. It does not move past
//! `filter`, `shuffle`, `batch`, a `map(on_error: skip)` (which drops the elements it
//! fails on) or any stage that does not keep one element for one.
//!
//! ```text
//! before                                after
//! Take: count=10                        Map: fns=[parse_example]
//!   Map: fns=[parse_example]              Take: count=10
//!     Interleave: …                         Interleave: …
//! ```

use crate::ir::plan::Plan;

use super::{Rule, Transformed, rewrite_each_node};

/// Moves `take` below 1:1 maps.
#[derive(Debug, Clone, Copy, Default)]
pub struct PushTakeDown;

impl Rule for PushTakeDown {
    fn name(&self) -> &'static str {
        "push_take_down"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, push)
    }
}

/// A take on a map, swapped.
fn push(plan: Plan) -> Transformed {
    let Plan::Take(mut take) = plan else { return Transformed::no(plan) };
    match *take.input {
        Plan::Map(mut map) if !map.skip_errors => {
            take.input = map.input;
            map.input = Box::new(Plan::Take(take));
            Transformed::yes(Plan::Map(map))
        }
        other => {
            take.input = Box::new(other);
            Transformed::no(Plan::Take(take))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_through_a_chain_of_maps() {
        let text = check(
            &PushTakeDown,
            &pipeline(
                "tfrecords(files);
                 shuffle(100);
                 map { parse_example(); }
                 map { x = x * 2.0; }
                 take(10);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Map: fns=[expr], parallel=1, deterministic=true -> {x: f32[4], label: i64}
          Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
            Take: count=10 -> record
              Shuffle: buffer=100, seed=none, reshuffle_each_epoch=true -> record
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_past_filter_shuffle_or_batch() {
        for stage in ["filter(label >= 0);", "shuffle(100);", "batch(4);"] {
            let text = check(
                &PushTakeDown,
                &pipeline(&format!("tfrecords(files); map {{ parse_example(); }} {stage} take(10);")),
            );
            assert!(text.starts_with("changed=false\nTake: count=10"), "{text}");
        }
        let text = check(
            &PushTakeDown,
            &pipeline("tfrecords(files); map { parse_example(); } filter(label >= 0); take(10);"),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Take: count=10 -> {x: f32[4], label: i64}
          Filter: predicate=label >= 0 -> {x: f32[4], label: i64}
            Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_a_skipping_map() {
        // It drops the elements it fails on: the first 10 mapped are not the mapped first 10.
        let text = check(
            &PushTakeDown,
            &pipeline("tfrecords(files); map(on_error: skip) { parse_example(); } take(10);"),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Take: count=10 -> {x: f32[4], label: i64}
          Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true, on_error=skip -> {x: f32[4], label: i64}
            Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_across_a_window() {
        // A window is not a batch: its rows overlap (shift < size) or skip elements, so
        // nothing fuses with it or moves across it.
        let text = check(
            &PushTakeDown,
            &pipeline("tfrecords(files); map { parse_example(); } window(4, shift: 2); take(3);"),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Take: count=3 -> batch<{x: f32[4], label: i64}>
          Window: size=4, shift=2, stride=1, drop_remainder=false -> batch<{x: f32[4], label: i64}>
            Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
