//! `simplify_windows`: a `window` whose windows neither overlap nor leave gaps (`shift`
//! equal to `size`, the same constant or parameter, and `stride` 1) is a `batch` of that
//! size: the same batches, the same last partial one (or none with `drop_remainder`),
//! the same resume position (`k × size` elements). As a `Batch` it fuses with the map
//! before it (`fuse_map_batch`) or the reader (`ReadBatchesExec`) and takes operations
//! moved past it (`vectorize_past_batch`), which no rule does across a real window: rows
//! shared by two windows, or elements between windows, make it another stage.
//!
//! ```text
//! before                                          after
//! Window: size=8, shift=8, stride=1,              Batch: size=8, drop_remainder=true
//!         drop_remainder=true                       Map: …
//!   Map: …
//! ```

use crate::ir::plan::{ArgValue, Batch, Plan};
use crate::ir::types::Value;

use super::{Rule, Transformed, rewrite_each_node};

/// Turns windows that are batches into batches.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimplifyWindows;

impl Rule for SimplifyWindows {
    fn name(&self) -> &'static str {
        "simplify_windows"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, simplify)
    }
}

/// A window with `shift == size` and `stride == 1`, as a batch.
fn simplify(plan: Plan) -> Transformed {
    match plan {
        Plan::Window(w) if w.shift == w.size && is_one(&w.stride) => Transformed::yes(Plan::Batch(Batch {
            input: w.input,
            size: w.size,
            drop_remainder: w.drop_remainder,
            padded: None,
            pad_to_multiple: None,
            padding_values: Default::default(),
        })),
        other => Transformed::no(other),
    }
}

fn is_one(v: &ArgValue) -> bool {
    matches!(v, ArgValue::Const(Value::Int(1)) | ArgValue::Const(Value::UInt(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_windows_that_are_batches() {
        let text = check(
            &SimplifyWindows,
            "pipeline p(n: u32 = 4) {
                 range(100);
                 window(3, drop_remainder: true);
                 unbatch();
                 window(n, shift: n, stride: 1);
             }",
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Batch: size=$n, drop_remainder=false -> batch<{value: i64}>
          Unbatch: -> {value: i64}
            Batch: size=3, drop_remainder=true -> batch<{value: i64}>
              Range: start=0, end=100, step=1 -> {value: i64}
        ");
    }

    #[test]
    fn does_not_apply_to_overlaps_gaps_or_strides() {
        let text = check(
            &SimplifyWindows,
            &pipeline(
                "tfrecords(files);
                 map { parse_example(); }
                 window(4, shift: 2);
                 unbatch();
                 window(4, shift: 6);
                 unbatch();
                 window(4, shift: 4, stride: 2);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Window: size=4, shift=4, stride=2, drop_remainder=false -> batch<{x: f32[4], label: i64}>
          Unbatch: -> {x: f32[4], label: i64}
            Window: size=4, shift=6, stride=1, drop_remainder=false -> batch<{x: f32[4], label: i64}>
              Unbatch: -> {x: f32[4], label: i64}
                Window: size=4, shift=2, stride=1, drop_remainder=false -> batch<{x: f32[4], label: i64}>
                  Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
                    Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                      Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
