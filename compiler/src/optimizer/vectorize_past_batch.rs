//! `vectorize_past_batch`: the trailing elementwise operations of a `map` right before a
//! plain `batch` (`cast`, `scale`, `normalize`, arithmetic) move after it, into a map
//! over the batch: they then run once per batch, over contiguous columns, instead of once
//! per element (tf.data's map vectorization, decided at compile time).
//!
//! ```text
//! before                                          after
//! Batch: size=256                                 Map: fns=[cast, normalize]  (over batches)
//!   Map: fns=[decode_jpeg, resize, cast,            Batch: size=256
//!             normalize]                              Map: fns=[decode_jpeg, resize]
//! ```
//!
//! Only a suffix moves (nothing left before the batch depends on a moved operation), only
//! deterministic elementwise operations (random ones draw per element), and only past a
//! plain `batch`: past `padded_batch` they would also transform the padding. Nothing moves
//! out of a `map(on_error: skip)`: after the batch, an operation failing on one element
//! would drop the whole batch.

use crate::ir::plan::{ArgValue, Map, Plan, apply_ops};
use crate::ir::types::Value;

use super::{Rule, Transformed, rewrite_each_node};

/// Moves trailing elementwise map operations past a plain batch.
#[derive(Debug, Clone, Copy, Default)]
pub struct VectorizePastBatch;

impl Rule for VectorizePastBatch {
    fn name(&self) -> &'static str {
        "vectorize_past_batch"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, vectorize)
    }
}

fn vectorize(plan: Plan) -> Transformed {
    let Plan::Batch(mut batch) = plan else { return Transformed::no(plan) };
    let movable = match (&batch.padded, &*batch.input) {
        (None, Plan::Map(m)) if !m.skip_errors => {
            m.ops.iter().rev().take_while(|op| op.is_elementwise()).count()
        }
        _ => 0,
    };
    if movable == 0 {
        return Transformed::no(Plan::Batch(batch));
    }
    let Plan::Map(mut pre) = *batch.input else { unreachable!("checked above") };
    let moved = pre.ops.split_off(pre.ops.len() - movable);
    let final_output = pre.output.clone();
    pre.output = apply_ops(&pre.input.output(), &pre.ops);
    let (parallel, deterministic) = (pre.parallel.clone(), pre.deterministic);
    batch.input = Box::new(Plan::Map(pre));
    let batched = Plan::Batch(batch);
    let output = crate::ir::plan::Element::Batch(Box::new(final_output));
    // Once per batch: a single worker is usually enough; keep `auto` if it was.
    let parallel = if parallel == ArgValue::Auto { ArgValue::Auto } else { ArgValue::Const(Value::Int(1)) };
    Transformed::yes(Plan::Map(Map {
        input: Box::new(batched),
        ops: moved,
        parallel,
        deterministic,
        skip_errors: false,
        output,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    const HEAD: &str = "pipeline p(files: glob = \"d/*\") {
        schema { image: bytes, label: i64 }
        tfrecords(files);";

    #[test]
    fn applies_to_trailing_elementwise_ops() {
        let text = check(
            &VectorizePastBatch,
            &format!(
                "{HEAD}
                 map(parallel: auto) {{
                     parse_example();
                     image = decode_jpeg(image);
                     image = resize(image, 8, 8);
                     image = cast(image, f32);
                     image = normalize(image, mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2]);
                 }}
                 batch(32);
             }}"
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Map: fns=[cast, normalize], parallel=auto, deterministic=true -> batch<{image: f32[8, 8, 3], label: i64}>
          Batch: size=32, drop_remainder=false -> batch<{image: f32[8, 8, 3], label: i64}>
            Map: fns=[parse_example, decode_jpeg, resize], parses=[image, label], parallel=auto, deterministic=true -> {image: f32[8, 8, 3], label: i64}
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_random_ops_padded_batches_or_non_trailing_ops() {
        for body in [
            // The last op is random: nothing moves.
            "image = decode_jpeg(image); image = resize(image, 8, 8); image = random_flip(image, seed: 1); } batch(32);",
            // Padding would be normalized too.
            "image = decode_jpeg(image); image = resize(image, 8, 8); image = scale(image, 2.0); } padded_batch(32);",
            // A filter between the map and the batch.
            "image = decode_jpeg(image); image = resize(image, 8, 8); image = scale(image, 2.0); } filter(label > 0); batch(32);",
        ] {
            let text = check(&VectorizePastBatch, &format!("{HEAD} map {{ parse_example(); {body} }}"));
            assert!(text.starts_with("changed=false"), "{text}");
        }
    }

    #[test]
    fn does_not_apply_to_a_skipping_map() {
        // After the batch, an operation failing on one element would drop the whole batch.
        let text = check(
            &VectorizePastBatch,
            &pipeline("tfrecords(files); map(on_error: skip) { parse_example(); x = x * 2.0; } batch(8);"),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Batch: size=8, drop_remainder=false -> batch<{x: f32[4], label: i64}>
          Map: fns=[parse_example, expr], parses=[x, label], parallel=1, deterministic=true, on_error=skip -> {x: f32[4], label: i64}
            Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_across_a_window() {
        // A window is not a batch: its rows overlap (shift < size) or skip elements, so
        // nothing fuses with it or moves across it.
        let text = check(
            &VectorizePastBatch,
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
