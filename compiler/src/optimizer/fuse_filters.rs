//! `fuse_filters`: two adjacent `filter`s become one whose predicate is both, the
//! inner one first (tf.data's `filter_fusion`): `(a) && (b)` evaluates `b` only where
//! `a` holds, as the two stages did.
//!
//! ```text
//! before                              after
//! Filter: predicate=weight > 0.0      Filter: predicate=(label >= 0) && (weight > 0.0)
//!   Filter: predicate=label >= 0        Map: …
//!     Map: …
//! ```

use crate::ir::plan::Plan;

use super::{Rule, Transformed, rewrite_each_node};

/// Fuses adjacent filters.
#[derive(Debug, Clone, Copy, Default)]
pub struct FuseFilters;

impl Rule for FuseFilters {
    fn name(&self) -> &'static str {
        "fuse_filters"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, fuse)
    }
}

/// A run of filters, as one filter whose predicate joins theirs, innermost first.
fn fuse(plan: Plan) -> Transformed {
    let Plan::Filter(mut top) = plan else { return Transformed::no(plan) };
    let mut predicates = vec![std::mem::take(&mut top.predicate)];
    let mut conditions = vec![std::mem::take(&mut top.conditions)];
    let mut input = top.input;
    while let Plan::Filter(f) = *input {
        predicates.push(f.predicate);
        conditions.push(f.conditions);
        // The fused predicate reads what each part read (`prune_fields` relies on it).
        for r in f.reads {
            if !top.reads.contains(&r) {
                top.reads.push(r);
            }
        }
        input = f.input;
    }
    let changed = predicates.len() > 1;
    predicates.reverse();
    conditions.reverse();
    top.conditions = conditions.into_iter().flatten().collect();
    top.predicate = if changed {
        predicates.iter().map(|p| format!("({p})")).collect::<Vec<_>>().join(" && ")
    } else {
        predicates.pop().expect("the top filter's predicate")
    };
    top.input = input;
    Transformed { plan: Plan::Filter(top), changed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_adjacent_filters() {
        let text = check(
            &FuseFilters,
            &pipeline(
                "tfrecords(files);
                 map { parse_example(); }
                 filter(label >= 0);
                 filter(label < 10 || label == 99);
                 filter(label != 5);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Filter: predicate=(label >= 0) && (label < 10 || label == 99) && (label != 5) -> {x: f32[4], label: i64}
          Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
            Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_filters_apart() {
        let text = check(
            &FuseFilters,
            &pipeline(
                "tfrecords(files);
                 map { parse_example(); }
                 filter(label >= 0);
                 shuffle(16);
                 filter(label < 10);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Filter: predicate=label < 10 -> {x: f32[4], label: i64}
          Shuffle: buffer=16, seed=none, reshuffle_each_epoch=true -> {x: f32[4], label: i64}
            Filter: predicate=label >= 0 -> {x: f32[4], label: i64}
              Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
