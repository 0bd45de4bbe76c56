//! `fuse_map_batch`: a `batch` right on a `map` becomes one `MapBatch` (tf.data's
//! `map_and_batch_fusion`): the map's workers write each element straight into its
//! row of the batch's columns, instead of handing elements one by one to a batching
//! stage that copies them. It yields the batches the two stages did.
//!
//! `padded_batch` is left alone: its column widths depend on the longest element of
//! the batch, known only once every element of it is mapped. So is a `map(on_error:
//! skip)`: a row it drops would leave its batch short, where tf.data's `ignore_errors`
//! (and the unfused stages) drop the element before batching, so every batch but the
//! last is full.
//!
//! ```text
//! before                                    after
//! Batch: size=512, drop_remainder=false     MapBatch: fns=[parse_example], …, size=512, drop_remainder=false
//!   Map: fns=[parse_example], …               Take: …
//!     Take: …
//! ```

use crate::ir::plan::{MapBatch, Plan};

use super::{Rule, Transformed, rewrite_each_node};

/// Fuses `batch` on `map`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FuseMapBatch;

impl Rule for FuseMapBatch {
    fn name(&self) -> &'static str {
        "fuse_map_batch"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, fuse)
    }
}

/// A (non-padded) batch on a map, as one node.
fn fuse(plan: Plan) -> Transformed {
    let Plan::Batch(mut batch) = plan else { return Transformed::no(plan) };
    match *batch.input {
        Plan::Map(map) if batch.padded.is_none() && !map.skip_errors => {
            Transformed::yes(Plan::MapBatch(MapBatch {
                input: map.input,
                ops: map.ops,
                parallel: map.parallel,
                deterministic: map.deterministic,
                map_output: map.output,
                size: batch.size,
                drop_remainder: batch.drop_remainder,
            }))
        }
        other => {
            batch.input = Box::new(other);
            Transformed::no(Plan::Batch(batch))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_batch_on_map() {
        let text = check(
            &FuseMapBatch,
            &pipeline(
                "tfrecords(files); map(parallel: auto) { parse_example(); } batch(512, drop_remainder: true);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        MapBatch: fns=[parse_example], parses=[x, label], parallel=auto, deterministic=true, size=512, drop_remainder=true -> batch<{x: f32[4], label: i64}>
          Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
            Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_padded_batch_or_map_on_batch() {
        let text = check(
            &FuseMapBatch,
            &pipeline(
                "tfrecords(files);
                 batch(64);
                 map { parse_example(); }
                 padded_batch(4);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        PaddedBatch: size=4, drop_remainder=false, pad_to=longest -> batch<batch<{x: f32[4], label: i64}>>
          Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> batch<{x: f32[4], label: i64}>
            Batch: size=64, drop_remainder=false -> batch<record>
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_a_skipping_map() {
        // A row it drops would leave its batch short; apart, every batch but the last is full.
        let text = check(
            &FuseMapBatch,
            &pipeline("tfrecords(files); map(on_error: skip) { parse_example(); } batch(512);"),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Batch: size=512, drop_remainder=false -> batch<{x: f32[4], label: i64}>
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
            &FuseMapBatch,
            &pipeline("tfrecords(files); map { parse_example(); x = x * 2.0; } window(4, shift: 2);"),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Window: size=4, shift=2, stride=1, drop_remainder=false -> batch<{x: f32[4], label: i64}>
          Map: fns=[parse_example, expr], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
            Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
