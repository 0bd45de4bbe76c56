//! Fusion: which logical nodes of the optimized plan run as one runtime stage, decided
//! here and nowhere else. The optimizer (`crate::optimizer`) rewrites the logical plan
//! into a cheaper logical plan of the same nodes the user could have written (fewer maps,
//! stages moved, fields pruned); these rules then rewrite it into the fused nodes of the
//! plan (`MapBatch`, `MapFilter`, `ShuffleRepeat`, a `DeviceTail` with kernels) and add
//! the `prefetch` a pipeline ends in, and [`lower`](super::lower) turns the result into
//! exec nodes, fusing further where a fused node meets a reader.
//!
//! Each rule is a struct in its own file, named as the file, run as the optimizer's are
//! ([`crate::ir::rewrite`]) to a fixed point in the order of [`rules`], with the same
//! check that each keeps the plan's output type. `explain --verbose` prints the plan
//! after each rule that changed it.

mod fuse_map_batch;
mod fuse_map_filter;
mod fuse_shuffle_repeat;
mod insert_prefetch;
mod lower_device_tail;

pub use fuse_map_batch::FuseMapBatch;
pub use fuse_map_filter::FuseMapFilter;
pub use fuse_shuffle_repeat::FuseShuffleRepeat;
pub use insert_prefetch::InsertPrefetch;
pub use lower_device_tail::{LowerDeviceTail, kernels};

use crate::ir::plan::Plan;
use crate::ir::rewrite::{Rewritten, Rule, Transformed, placeholder, rewrite_each_node};

/// The fusion rules in the order a pass runs them.
pub fn rules() -> Vec<Box<dyn Rule>> {
    vec![
        // Independent of the others.
        Box::new(FuseShuffleRepeat),
        // Before map+batch fusion, though it also takes from a fused `MapBatch` (on the
        // second pass): a `device cuda` pipeline's trailing row operations move into its
        // device tail, out of the map under the batch or over the batches.
        Box::new(LowerDeviceTail),
        // A map that feeds a batch fuses with the batch (the bigger win) ...
        Box::new(FuseMapBatch),
        // ... and one that feeds a filter, with the filter.
        Box::new(FuseMapFilter),
        // Last: it looks at the plan's final node, which the rules above may change (a
        // parallel map fused with its batch already queues its batches ahead).
        Box::new(InsertPrefetch),
    ]
}

/// The optimized plan with its fused nodes, and the rules that made them.
pub fn fuse(plan: Plan) -> Rewritten {
    crate::ir::rewrite::run(plan, &rules())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_listed_once_and_named_as_its_file() {
        crate::ir::rewrite::tests::assert_named_as_files(&rules(), "physical/fuse");
    }
}
