//! What the physical plan needs of the parameters that size it: a count set by a
//! parameter (a batch size, a shuffle buffer, a cycle length, threads, a shard count)
//! must be at least 1, and a shard's index below its count. The same literal would be a
//! compile error (E0206); a parameter's value is only known when the pipeline is built,
//! so the generated `Params::check` holds it against these rules first: `--set bs=0` is
//! then a usage error naming the parameter and the stage argument it feeds, not a
//! runtime error from deep inside a stage, nor a value silently accepted.

use super::PhysicalPlan;
use super::amount::Expr;
use super::exec::Exec;
use crate::ir::plan::{ArgValue, ParquetFormat, PrefetchDepth, RecordFormat};

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
    /// Parameter `param`, feeding argument `arg` of stage `stage`, must be at most
    /// `max`: more than any machine can honour (the literal is E0211).
    AtMost {
        /// The parameter.
        param: String,
        /// The stage.
        stage: &'static str,
        /// The argument.
        arg: &'static str,
        /// The largest value taken.
        max: u64,
    },
    /// The memory bound, computed again with the parameters' values, must not exceed
    /// the declared budget (the bound with the literals is E0500).
    WithinBudget {
        /// The bound, an expression of the parameters that size it.
        bound: Expr,
        /// The declared budget, in bytes.
        budget: u64,
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
        let mut at_most = Vec::new();
        let mut limit = |v: &ArgValue, stage: &'static str, arg: &'static str| {
            if let ArgValue::Param(p) = v {
                let max = crate::ir::limits::limit(arg).unwrap_or(u64::MAX);
                let rule = ParamRule::AtMost { param: p.clone(), stage, arg, max };
                if !at_most
                    .iter()
                    .any(|r| matches!(r, ParamRule::AtMost { param, max: m, .. } if param == p && *m == max))
                {
                    at_most.push(rule);
                }
            }
        };
        for node in &self.stages {
            match &node.exec {
                Exec::Range(r) => {
                    if let ArgValue::Param(p) = &r.step {
                        nonzero.push(ParamRule::NonZero { param: p.clone(), stage: "range", arg: "step" });
                    }
                }
                Exec::Interleave { cycle, block, parallel, format, .. } => {
                    if let RecordFormat::Parquet(ParquetFormat { shard: Some(s), .. }) = format {
                        at_least_one(&s.num_shards, "shard", "num_shards");
                        shards.push((s.index.clone(), s.num_shards.clone()));
                    }
                    at_least_one(cycle, "interleave", "cycle");
                    at_least_one(block, "interleave", "block");
                    at_least_one(parallel, "interleave", "parallel");
                    limit(cycle, "interleave", "cycle");
                    limit(parallel, "interleave", "parallel");
                }
                Exec::ReadBatches { cycle, parallel, size, .. } => {
                    at_least_one(cycle, "interleave", "cycle");
                    at_least_one(parallel, "interleave", "parallel");
                    at_least_one(size, "batch", "size");
                    limit(cycle, "interleave", "cycle");
                    limit(parallel, "interleave", "parallel");
                }
                Exec::ReadColumns { format: ParquetFormat { shard: Some(s), .. }, .. } => {
                    at_least_one(&s.num_shards, "shard", "num_shards");
                    shards.push((s.index.clone(), s.num_shards.clone()));
                }
                Exec::GlobalShuffle { shard: Some((count, index, _)), .. } => {
                    at_least_one(count, "shard", "num_shards");
                    shards.push((index.clone(), count.clone()));
                }
                Exec::Map { parallel, .. } => {
                    at_least_one(parallel, "map", "parallel");
                    limit(parallel, "map", "parallel");
                }
                Exec::ChunkedMap { size, parallel, .. } | Exec::MapBatch { size, parallel, .. } => {
                    at_least_one(size, "batch", "size");
                    at_least_one(parallel, "map", "parallel");
                    limit(parallel, "map", "parallel");
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
                Exec::Prefetch(PrefetchDepth::Elements(b)) => at_least_one(b, "prefetch", "buffer"),
                Exec::Window { size, shift, stride, .. } => {
                    at_least_one(size, "window", "size");
                    at_least_one(shift, "window", "shift");
                    at_least_one(stride, "window", "stride");
                }
                _ => {}
            }
        }
        out.extend(nonzero);
        out.extend(at_most);
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
        // Last: the bound is computed with values the rules above have let through.
        if let (Some(budget), Some(bound)) = (self.budget, &self.bound) {
            out.push(ParamRule::WithinBudget { bound: bound.clone(), budget });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn physical(source: &str) -> PhysicalPlan {
        let c = crate::driver::compile(source);
        assert!(!c.has_errors(), "{source}: {:?}", c.diagnostics);
        c.pipelines[0].physical.clone()
    }

    /// A cycle or thread count set by a parameter is held to the largest one taken (the
    /// literal is E0211): `--set c=65537` was exit 1 from inside the interleave, naming
    /// no parameter; `--set p=4294967295` started threads until the process failed.
    #[test]
    fn cycles_and_threads_set_by_parameters_have_a_ceiling() {
        let p = physical(
            "pipeline p(files: glob, c: u32 = 4, t: u32 = 2) { tfrecords(files, cycle: c, parallel: t); \
             map(parallel: t) { } }",
        );
        let at_most: Vec<_> = p
            .param_rules()
            .into_iter()
            .filter_map(|r| match r {
                ParamRule::AtMost { param, stage, arg, max } => Some((param, stage, arg, max)),
                _ => None,
            })
            .collect();
        assert_eq!(
            at_most,
            [
                ("c".to_string(), "interleave", "cycle", 65536),
                ("t".to_string(), "interleave", "parallel", 4096),
            ]
        );
    }

    /// A `shard` moved into a `parquet` reader (by rows or by columns) keeps the shard's
    /// rules: `--set worker=3` of 3 is a usage error naming the `shard`, not a reader that
    /// reads nothing.
    #[test]
    fn a_shard_moved_into_a_parquet_reader_keeps_its_rules() {
        for stages in ["map { y = x; }", "batch(4);"] {
            let p = physical(&format!(
                "pipeline p(files: glob, n: u64 = 2, i: u64 = 0) {{ schema {{ x: f32[4] }} parquet(files); \
                 shard(n, i); {stages} }}"
            ));
            assert!(!p.stages.iter().any(|s| matches!(s.exec, Exec::Shard { .. })), "{stages}: moved");
            let rules = p.param_rules();
            let (n, i) = (ArgValue::Param("n".into()), ArgValue::Param("i".into()));
            assert!(
                rules.contains(&ParamRule::AtLeastOne {
                    param: "n".into(),
                    stage: "shard",
                    arg: "num_shards"
                }),
                "{stages}: {rules:?}"
            );
            assert!(
                rules.contains(&ParamRule::IndexBelowCount { index: i, count: n }),
                "{stages}: {rules:?}"
            );
        }
    }

    /// With a `budget`, the bound of buffers sized by parameters is an expression of them,
    /// checked when their values are known: at their defaults it is the bound `explain`
    /// prints; a buffer of a billion elements is over the budget (before, only the same
    /// literal was refused, E0500, and `--set buf=1000000000` ran past 1.5 GB).
    #[test]
    fn a_budget_binds_the_parameters_that_size_the_buffers() {
        for (source, param) in [
            ("pipeline p(buf: u64 = 100) { budget 64 MiB; range(0, 10); shuffle(buf, seed: 1); }", "buf"),
            ("pipeline p(size: u64 = 4) { budget 64 MiB; range(0, 10); window(size, shift: 1); }", "size"),
            (
                "pipeline p(bs: u32 = 8, buf: u64 = 100) { budget 64 MiB; range(0, 10); batch(bs); \
                 shuffle(buf, seed: 1); prefetch(2); }",
                "bs",
            ),
        ] {
            let p = physical(source);
            let bound = p.bound.clone().expect("sized by parameters");
            assert!(bound.params().contains(&param.to_string()), "{source}: {:?}", bound.params());
            let defaults = |name: &str| match name {
                "buf" => Some(100),
                "size" => Some(4),
                "bs" => Some(8),
                _ => None,
            };
            assert_eq!(bound.eval(&defaults), p.memory_bound, "{source}");
            let big = |name: &str| if name == param { Some(1_000_000_000) } else { defaults(name) };
            assert!(bound.eval(&big) > 64 << 20, "{source}");
            let rules = p.param_rules();
            assert!(
                matches!(rules.last(), Some(ParamRule::WithinBudget { budget, .. }) if *budget == 64 << 20),
                "{source}: {rules:?}"
            );
            let code = crate::driver::compile(source).generate().unwrap().to_pretty_string();
            assert!(code.contains("__sl::abi::over_budget("), "{code}");
        }
        // Without a budget, or with no parameter sizing a buffer, nothing to check.
        let none = physical("pipeline p(buf: u64 = 100) { range(0, 10); shuffle(buf, seed: 1); }");
        assert!(!none.param_rules().iter().any(|r| matches!(r, ParamRule::WithinBudget { .. })));
        let fixed =
            physical("pipeline p(n: i64 = 10) { budget 64 MiB; range(0, n); shuffle(100, seed: 1); }");
        assert_eq!(fixed.bound, None);
    }
}
