//! `fuse_shuffle_repeat`: a `repeat` right on a `shuffle` that reshuffles each epoch
//! becomes one `ShuffleRepeat` (tf.data's `shuffle_and_repeat_fusion`). Every epoch
//! is still a new permutation of the same elements, but the buffer no longer drains
//! at the end of an epoch: it is refilled from the next one, so there is no stall
//! between epochs, and an element of epoch `e + 1` may come out before the last ones
//! of epoch `e`.
//!
//! A shuffle with `reshuffle_each_epoch=false` promises the same order every epoch,
//! which a buffer crossing epochs cannot keep: it is left alone.
//!
//! ```text
//! before                                  after
//! Repeat: count=forever                   ShuffleRepeat: buffer=1000, seed=42, count=forever
//!   Shuffle: buffer=1000, seed=42           Interleave: …
//!     Interleave: …
//! ```

use crate::ir::plan::{Plan, Shuffle, ShuffleBuffer, ShuffleRepeat};

use super::{Rule, Transformed, rewrite_each_node};

/// Fuses `repeat` on `shuffle`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FuseShuffleRepeat;

impl Rule for FuseShuffleRepeat {
    fn name(&self) -> &'static str {
        "fuse_shuffle_repeat"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, fuse)
    }
}

/// A repeat on a reshuffling shuffle, as one node.
fn fuse(plan: Plan) -> Transformed {
    let Plan::Repeat(mut repeat) = plan else { return Transformed::no(plan) };
    match *repeat.input {
        // A global shuffle is a reader of its own: nothing to fuse.
        Plan::Shuffle(Shuffle {
            input,
            buffer: ShuffleBuffer::Elements(buffer),
            seed,
            reshuffle_each_epoch: true,
            window: _,
        }) => {
            Transformed::yes(Plan::ShuffleRepeat(ShuffleRepeat { input, buffer, seed, count: repeat.count }))
        }
        other => {
            repeat.input = Box::new(other);
            Transformed::no(Plan::Repeat(repeat))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_repeat_on_shuffle() {
        let text = check(
            &FuseShuffleRepeat,
            &pipeline(
                "tfrecords(files); shuffle(1000, seed: 42); repeat(); batch(4); shuffle(8); repeat(3);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        ShuffleRepeat: buffer=8, seed=none, count=3 -> batch<record>
          Batch: size=4, drop_remainder=false -> batch<record>
            ShuffleRepeat: buffer=1000, seed=42, count=forever -> record
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_without_reshuffling_or_in_the_other_order() {
        let text = check(
            &FuseShuffleRepeat,
            &pipeline(
                "tfrecords(files);
                 shuffle(1000, seed: 42, reshuffle_each_epoch: false);
                 repeat();
                 repeat(2);
                 shuffle(8);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Shuffle: buffer=8, seed=none, reshuffle_each_epoch=true -> record
          Repeat: count=2 -> record
            Repeat: count=forever -> record
              Shuffle: buffer=1000, seed=42, reshuffle_each_epoch=false -> record
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
