//! `eliminate_noops`: drops stages that do nothing — `repeat(1)`, `shuffle(1)`,
//! `skip(0)`, a `map` with no operations, a `select` of every field of its input in
//! order, and a `prefetch` right under another
//! `prefetch` (the outer one, the one the consumer sees, stays).
//!
//! ```text
//! before                         after
//! Prefetch: buffer=auto          Prefetch: buffer=auto
//!   Prefetch: buffer=2             Batch: size=4
//!     Batch: size=4                  Interleave: …
//!       Repeat: count=1
//!         Interleave: …
//! ```

use crate::ir::plan::{ArgValue, Plan, RepeatCount, ShuffleBuffer};
use crate::ir::types::Value;

use super::{Rule, Transformed, rewrite_each_node};

/// Drops stages that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct EliminateNoops;

impl Rule for EliminateNoops {
    fn name(&self) -> &'static str {
        "eliminate_noops"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, eliminate)
    }
}

/// This node's input in its place when the node does nothing.
fn eliminate(plan: Plan) -> Transformed {
    let noop = match &plan {
        Plan::Repeat(r) => matches!(&r.count, RepeatCount::Times(c) if is_int(c, 1)),
        Plan::Skip(s) => is_int(&s.count, 0),
        Plan::Shuffle(s) => matches!(&s.buffer, ShuffleBuffer::Elements(b) if is_int(b, 1)),
        Plan::Map(m) => m.ops.is_empty(),
        // Every field of its input, in order (what `prune_fields` leaves of a `select`
        // whose fields were all the parse read).
        Plan::Select(s) => s.input.output() == plan.output(),
        _ => false,
    };
    if noop {
        let mut plan = plan;
        let input = plan.input_mut().expect("a stage that does nothing has an input");
        return Transformed::yes(std::mem::replace(input, super::placeholder()));
    }
    // A prefetch under a prefetch: keep the outer one and its buffer.
    match plan {
        Plan::Prefetch(mut outer) => match *outer.input {
            Plan::Prefetch(inner) => {
                outer.input = inner.input;
                Transformed::yes(Plan::Prefetch(outer))
            }
            other => {
                outer.input = Box::new(other);
                Transformed::no(Plan::Prefetch(outer))
            }
        },
        other => Transformed::no(other),
    }
}

fn is_int(v: &ArgValue, n: i64) -> bool {
    matches!(v, ArgValue::Const(Value::Int(i)) if *i == n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_each_kind_of_noop() {
        let text = check(
            &EliminateNoops,
            &pipeline(
                "tfrecords(files);
                 repeat(1);
                 skip(0);
                 shuffle(1);
                 map {}
                 batch(4);
                 prefetch(2);
                 prefetch(auto);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Prefetch: buffer=auto -> batch<record>
          Batch: size=4, drop_remainder=false -> batch<record>
            Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_stages_that_do_something() {
        let text = check(
            &EliminateNoops,
            &pipeline(
                "tfrecords(files);
                 repeat(2);
                 skip(1);
                 shuffle(16);
                 map { parse_example(); }
                 prefetch(2);
                 batch(4);
                 prefetch(auto);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Prefetch: buffer=auto -> batch<{x: f32[4], label: i64}>
          Batch: size=4, drop_remainder=false -> batch<{x: f32[4], label: i64}>
            Prefetch: buffer=2 -> {x: f32[4], label: i64}
              Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
                Shuffle: buffer=16, seed=none, reshuffle_each_epoch=true -> record
                  Skip: count=1 -> record
                    Repeat: count=2 -> record
                      Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                        Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
