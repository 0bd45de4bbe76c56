//! Whether a pipeline's position can be saved and restored exactly: [`resume_blocker`]
//! walks the plan for what makes a pass differ from run to run (an order left to timing,
//! randomness without a seed).

use super::plan::{
    ArgValue, DeviceTail, Map, MapBatch, MapFilter, MapOp, Plan, SampleFrom, Shuffle, ShuffleRepeat,
};
use super::types::Value;

/// Why an interleave that keeps no order blocks resumption.
pub const UNORDERED_INTERLEAVE: &str =
    "`interleave(deterministic: false)` delivers records in the order they are read";
/// Why a map that keeps no order blocks resumption.
pub const UNORDERED_MAP: &str = "`map(deterministic: false)` delivers results in the order they complete";
/// Why a shuffle without a seed blocks resumption.
pub const UNSEEDED_SHUFFLE: &str = "`shuffle` without a seed draws a new order on every run";
/// Why a `sample_from` without a seed blocks resumption.
pub const UNSEEDED_SAMPLE_FROM: &str = "`sample_from` without a seed draws anew on every run";

/// Whether a `parallel` argument may run more than one worker.
pub fn is_parallel(p: &ArgValue) -> bool {
    !matches!(p, ArgValue::Const(Value::Int(1)))
}

/// Why a map's operations block resumption: the first random one without a seed.
pub fn unseeded_ops(ops: &[MapOp]) -> Option<String> {
    ops.iter().find_map(|op| match op {
        MapOp::Assign { value, .. } => value.nodes().into_iter().find_map(|e| {
            let op = e.op().filter(|op| op.is_random() && op.seed().is_none())?;
            Some(format!("`{}` without a seed draws anew on every run", op.name()))
        }),
        MapOp::Parse { .. } => None,
    })
}

/// Why the position of this plan's pass cannot be saved and restored exactly (a resumed
/// pass yields what an uninterrupted one would), or `None` when it can: every stage must
/// give the same elements in the same order on every run, so no order left to timing
/// (`deterministic: false` with several workers) and no randomness without a seed.
pub fn resume_blocker(plan: &Plan) -> Option<String> {
    let mut node = Some(plan);
    while let Some(n) = node {
        let why = match n {
            Plan::Interleave(i) if !i.deterministic && is_parallel(&i.parallel) => {
                Some(UNORDERED_INTERLEAVE.to_string())
            }
            Plan::Map(Map { deterministic: false, parallel: p, .. })
            | Plan::MapFilter(MapFilter { deterministic: false, parallel: p, .. })
            | Plan::MapBatch(MapBatch { deterministic: false, parallel: p, .. })
                if is_parallel(p) =>
            {
                Some(UNORDERED_MAP.to_string())
            }
            Plan::Map(Map { ops, .. })
            | Plan::MapFilter(MapFilter { ops, .. })
            | Plan::MapBatch(MapBatch { ops, .. })
            | Plan::DeviceTail(DeviceTail { ops, .. }) => unseeded_ops(ops),
            Plan::Shuffle(Shuffle { seed: None, .. })
            | Plan::ShuffleRepeat(ShuffleRepeat { seed: None, .. }) => Some(UNSEEDED_SHUFFLE.to_string()),
            Plan::SampleFrom(SampleFrom { seed: None, .. }) => Some(UNSEEDED_SAMPLE_FROM.to_string()),
            // Its inner chain runs again, per element, in a resumed pass.
            Plan::FlatMap(f) => resume_blocker(&f.inner),
            _ => None,
        };
        if why.is_some() {
            return why;
        }
        node = n.input();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocker(stages: &str) -> Option<String> {
        let source = format!(
            "pipeline p(files: glob = \"d/*\", seed: u64 = 1) {{
                schema {{ image: bytes, label: i64 }}
                {stages}
            }}"
        );
        let checked = crate::compile(&source).into_result().unwrap_or_else(|d| panic!("{d:?}"));
        resume_blocker(&checked[0].optimized.plan)
    }

    #[test]
    fn seeded_ordered_pipelines_resume_and_others_say_why() {
        let map = "map(parallel: auto) { parse_example(); image = decode_raw(image, u8); image = reshape(image, [4, 4, 3]);";
        assert_eq!(
            blocker(&format!(
                "tfrecords(files); shuffle(100, seed: seed); {map} image = random_crop(image, 2, 2, seed: seed); \
                 image = random_flip(image, seed: 3); }} batch(4);"
            )),
            None
        );
        for (stages, why) in [
            ("tfrecords(files); shuffle(100); batch(4);", "`shuffle` without a seed"),
            ("tfrecords(files); shuffle(100); repeat(); batch(4);", "`shuffle` without a seed"),
            (
                &format!("tfrecords(files); {map} image = random_flip(image); }} batch(4);"),
                "`random_flip` without a seed",
            ),
            (
                &format!("tfrecords(files); {map} image = random_crop(image, 2, 2); }} batch(4);"),
                "`random_crop` without a seed",
            ),
            (
                "files(files); interleave(cycle: 4, parallel: 2, deterministic: false) { tfrecord(); } batch(4);",
                "`interleave(deterministic: false)`",
            ),
            (
                "tfrecords(files); map(parallel: 4, deterministic: false) { parse_example(); } batch(4);",
                "`map(deterministic: false)`",
            ),
        ] {
            let got = blocker(stages);
            assert!(got.as_deref().is_some_and(|g| g.contains(why)), "{stages}: {got:?}");
        }
        // One worker keeps the order whatever `deterministic` says.
        assert_eq!(
            blocker(
                "tfrecords(files); map(parallel: 1, deterministic: false) { parse_example(); } batch(4);"
            ),
            None
        );
    }
}
