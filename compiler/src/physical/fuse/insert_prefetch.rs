//! `insert_prefetch`: a pipeline whose last stage is not a `prefetch` gets
//! `prefetch(auto)` on top, so that producing the next element overlaps the
//! consumer's work on this one (tf.data's `inject_prefetch`). A pipeline that ends in
//! a parallel stage (interleave or map) is left alone: its workers already fill a queue
//! ahead of the consumer, and a prefetch would only add a hand-over per element.
//!
//! ```text
//! before                      after
//! Batch: size=512             Prefetch: buffer=auto
//!   Map: …                      Batch: size=512
//!                                 Map: …
//! ```

use crate::ir::plan::{ArgValue, Plan, Prefetch, PrefetchDepth};
use crate::ir::types::Value;

use super::{Rule, Transformed};

/// Ends the pipeline with a `prefetch`.
#[derive(Debug, Clone, Copy, Default)]
pub struct InsertPrefetch;

impl Rule for InsertPrefetch {
    fn name(&self) -> &'static str {
        "insert_prefetch"
    }

    /// Only the last stage matters: this rule does not walk the chain.
    fn rewrite(&self, plan: Plan) -> Transformed {
        // A device tail runs in the device feed's thread: the prefetch goes under it, at
        // the end of the CPU's part.
        if let Plan::DeviceTail(mut tail) = plan {
            let t = self.rewrite(*tail.input);
            tail.input = Box::new(t.plan);
            return Transformed { plan: Plan::DeviceTail(tail), changed: t.changed };
        }
        let asynchronous = |p: &ArgValue| !matches!(p, ArgValue::Const(Value::Int(1)));
        let done = match &plan {
            Plan::Prefetch(_) => true,
            Plan::Interleave(n) => asynchronous(&n.parallel),
            Plan::Map(n) => asynchronous(&n.parallel),
            Plan::MapFilter(n) => asynchronous(&n.parallel),
            Plan::MapBatch(n) => asynchronous(&n.parallel),
            _ => false,
        };
        if done {
            return Transformed::no(plan);
        }
        Transformed::yes(Plan::Prefetch(Prefetch {
            input: Box::new(plan),
            buffer: PrefetchDepth::Auto,
            span: crate::span::Span::default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_when_the_last_stage_is_not_a_prefetch() {
        let text = check(&InsertPrefetch, &pipeline("tfrecords(files); prefetch(2); batch(4);"));
        insta::assert_snapshot!(text, @r"
        changed=true
        Prefetch: buffer=auto -> batch<record>
          Batch: size=4, drop_remainder=false -> batch<record>
            Prefetch: buffer=2 -> record
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_after_a_parallel_stage() {
        let text = check(&InsertPrefetch, &pipeline("tfrecords(files, cycle: 4, parallel: auto);"));
        insta::assert_snapshot!(text, @r"
        changed=false
        Interleave: reader=tfrecord, cycle_length=4, block_length=1, parallel=auto, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
          Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_when_the_pipeline_ends_with_a_prefetch() {
        let text = check(&InsertPrefetch, &pipeline("tfrecords(files); batch(4); prefetch(2);"));
        insta::assert_snapshot!(text, @r"
        changed=false
        Prefetch: buffer=2 -> batch<record>
          Batch: size=4, drop_remainder=false -> batch<record>
            Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
