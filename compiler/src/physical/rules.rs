//! What the physical plan needs of the parameters that size it: a count set by a
//! parameter (a batch size, a shuffle buffer, a cycle length, threads, a shard count)
//! must be at least 1, and a shard's index below its count. The same literal would be a
//! compile error (E0206); a parameter's value is only known when the pipeline is built,
//! so the generated `Params::check` holds it against these rules first: `--set bs=0` is
//! then a usage error naming the parameter and the stage argument it feeds, not a
//! runtime error from deep inside a stage, nor a value silently accepted.

use super::PhysicalPlan;
use super::exec::Exec;
use crate::ir::plan::ArgValue;

/// One rule on the pipeline's parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamRule {
    /// Parameter `param`, feeding argument `arg` of stage `stage`, must be at least 1.
    AtLeastOne {
        /// The parameter.
        param: String,
        /// The stage (as the user wrote it: `batch`, `shuffle`, …).
        stage: &'static str,
        /// The argument.
        arg: &'static str,
    },
    /// Parameter `param`, the step of a `range`, must not be 0.
    NonZero {
        /// The parameter.
        param: String,
        /// The stage.
        stage: &'static str,
        /// The argument.
        arg: &'static str,
    },
    /// A shard's index must be below its count (at least one of them a parameter).
    IndexBelowCount {
        /// The index: a parameter or a constant.
        index: ArgValue,
        /// The count: a parameter or a constant.
        count: ArgValue,
    },
}

impl PhysicalPlan {
    /// The rules its stages put on the pipeline's parameters, each once, in the order of
    /// the stages (source first).
    pub fn param_rules(&self) -> Vec<ParamRule> {
        let mut out: Vec<ParamRule> = Vec::new();
        let mut at_least_one = |v: &ArgValue, stage: &'static str, arg: &'static str| {
            if let ArgValue::Param(p) = v {
                let rule = ParamRule::AtLeastOne { param: p.clone(), stage, arg };
                if !out.iter().any(|r| matches!(r, ParamRule::AtLeastOne { param, .. } if param == p)) {
                    out.push(rule);
                }
            }
        };
        let mut shards = Vec::new();
        let mut nonzero = Vec::new();
        for node in &self.stages {
            match &node.exec {
                Exec::Range(r) => {
                    if let ArgValue::Param(p) = &r.step {
                        nonzero.push(ParamRule::NonZero { param: p.clone(), stage: "range", arg: "step" });
                    }
                }
                Exec::Interleave { cycle, block, parallel, .. } => {
                    at_least_one(cycle, "interleave", "cycle");
                    at_least_one(block, "interleave", "block");
                    at_least_one(parallel, "interleave", "parallel");
                }
                Exec::ReadBatches { cycle, parallel, size, .. } => {
                    at_least_one(cycle, "interleave", "cycle");
                    at_least_one(parallel, "interleave", "parallel");
                    at_least_one(size, "batch", "size");
                }
                Exec::GlobalShuffle { shard: Some((count, index, _)), .. } => {
                    at_least_one(count, "shard", "num_shards");
                    shards.push((index.clone(), count.clone()));
                }
                Exec::Map { parallel, .. } => at_least_one(parallel, "map", "parallel"),
                Exec::ChunkedMap { size, parallel, .. } | Exec::MapBatch { size, parallel, .. } => {
                    at_least_one(size, "batch", "size");
                    at_least_one(parallel, "map", "parallel");
                }
                Exec::Shuffle { buffer, .. } => at_least_one(buffer, "shuffle", "buffer"),
                Exec::ShuffleBatches { buffer, size, .. } => {
                    at_least_one(buffer, "shuffle", "buffer");
                    at_least_one(size, "batch", "size");
                }
                Exec::ShuffleRepeat { buffer, count, .. } => {
                    at_least_one(buffer, "shuffle", "buffer");
                    if let Some(c) = count {
                        at_least_one(c, "repeat", "count");
                    }
                }
                Exec::Batch { size, padded, pad_to_multiple, .. } => {
                    at_least_one(size, if padded.is_some() { "padded_batch" } else { "batch" }, "size");
                    if let Some(Some(pad_to)) = padded {
                        at_least_one(pad_to, "padded_batch", "pad_to");
                    }
                    if let Some(k) = pad_to_multiple {
                        at_least_one(k, "padded_batch", "pad_to_multiple");
                    }
                }
                Exec::Repeat(Some(c)) => at_least_one(c, "repeat", "count"),
                Exec::Shard { num_shards, index, .. } => {
                    at_least_one(num_shards, "shard", "num_shards");
                    shards.push((index.clone(), num_shards.clone()));
                }
                Exec::Prefetch(Some(b)) => at_least_one(b, "prefetch", "buffer"),
                Exec::Window { size, shift, stride, .. } => {
                    at_least_one(size, "window", "size");
                    at_least_one(shift, "window", "shift");
                    at_least_one(stride, "window", "stride");
                }
                _ => {}
            }
        }
        out.extend(nonzero);
        for (index, count) in shards {
            let param = |v: &ArgValue| matches!(v, ArgValue::Param(_));
            let rule = ParamRule::IndexBelowCount { index, count };
            if let ParamRule::IndexBelowCount { index, count } = &rule
                && (param(index) || param(count))
                && !out.contains(&rule)
            {
                out.push(rule);
            }
        }
        out
    }
}
