//! `push_shard_down`: a `shard` right on an `interleave` that reads the files of a
//! `files` source moves onto the file list: each worker reads its share of the files
//! instead of reading every file and keeping every `num_shards`-th record (tf.data's
//! `AutoShardPolicy.FILE`). Together the workers still see every record once per
//! epoch, and each reads `1 / num_shards` of the bytes instead of all of them.
//!
//! Two things differ, as with tf.data's policy: which worker gets which record, and
//! the balance — shards hold whole files, so a worker may get more records than
//! another, and none when there are fewer files than shards. A shuffled file list is
//! sharded after shuffling; every worker shuffles with the same seed, so the shards
//! still partition the files each epoch.
//!
//! Only when the interleave reads exactly a `Files` node: anything between them could
//! change which paths there are. And only for `remainder: keep`: `drop` and `pad` even
//! out record counts, which needs every record's position, so such a shard stays on the
//! records (every worker reads every file). Sema warns about the shards this rule moves
//! (W0210), since it cannot produce diagnostics itself.
//!
//! A `shard` right on a `read_file` of `files` moves onto the file list too, and there it
//! changes nothing but the bytes read: each file is one element, so a worker's share of
//! the paths is its share of the elements, with any remainder policy (for `drop` and
//! `pad` only when no file is skipped, `on_error: fail`, so that positions stay 1:1).
//!
//! ```text
//! before                                        after
//! Shard: num_shards=8, index=0, remainder=keep  Interleave: …
//!   Interleave: …                                 Shard: num_shards=8, index=0, remainder=keep
//!     Files: pattern=…                              Files: pattern=…
//! ```

use crate::ir::plan::{CorruptPolicy, Plan, Remainder};

use super::{Rule, Transformed, rewrite_each_node};

/// Shards files, not records.
#[derive(Debug, Clone, Copy, Default)]
pub struct PushShardDown;

impl Rule for PushShardDown {
    fn name(&self) -> &'static str {
        "push_shard_down"
    }

    fn rewrite(&self, plan: Plan) -> Transformed {
        rewrite_each_node(plan, push)
    }
}

/// A shard on an interleave of files, moved between the two.
fn push(plan: Plan) -> Transformed {
    let Plan::Shard(mut shard) = plan else { return Transformed::no(plan) };
    let keep = shard.remainder == Remainder::Keep;
    match *shard.input {
        Plan::Interleave(mut interleave) if keep && matches!(*interleave.input, Plan::Files(_)) => {
            shard.input = interleave.input;
            interleave.input = Box::new(Plan::Shard(shard));
            Transformed::yes(Plan::Interleave(interleave))
        }
        Plan::ReadFile(mut read)
            if matches!(*read.input, Plan::Files(_)) && (keep || read.on_error == CorruptPolicy::Fail) =>
        {
            shard.input = read.input;
            read.input = Box::new(Plan::Shard(shard));
            Transformed::yes(Plan::ReadFile(read))
        }
        other => {
            shard.input = Box::new(other);
            Transformed::no(Plan::Shard(shard))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::{check, pipeline};

    #[test]
    fn applies_to_shard_on_read_file_of_files() {
        let text =
            check(&PushShardDown, &pipeline("files(files); read_file(); shard(4, 1, remainder: drop);"));
        assert!(text.starts_with("changed=true\nReadFile:"), "{text}");
        let text = check(
            &PushShardDown,
            &pipeline("files(files); read_file(on_error: skip); shard(4, 1, remainder: pad);"),
        );
        assert!(text.starts_with("changed=false\nShard:"), "{text}");
    }

    #[test]
    fn applies_to_shard_on_interleave_of_files() {
        let text = check(
            &PushShardDown,
            &pipeline(
                "files(files, shuffle: true, seed: 7);
                 interleave(cycle: 4) { tfrecord(); }
                 shard(8, 3);
                 map { parse_example(); }",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Map: fns=[parse_example], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
          Interleave: reader=tfrecord, cycle_length=4, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
            Shard: num_shards=8, index=3, remainder=keep -> path
              Files: pattern=$files, shuffle_seed=7 -> path
        ");
    }

    #[test]
    fn does_not_apply_when_the_remainder_is_dropped_or_padded() {
        let shard = |remainder: &str| {
            check(
                &PushShardDown,
                &pipeline(&format!(
                    "files(files);
                     interleave(cycle: 4) {{ tfrecord(); }}
                     shard(8, 3, remainder: {remainder});"
                )),
            )
        };
        insta::assert_snapshot!(shard("drop"), @r"
        changed=false
        Shard: num_shards=8, index=3, remainder=drop -> record
          Interleave: reader=tfrecord, cycle_length=4, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
            Files: pattern=$files, shuffle_seed=none -> path
        ");
        insta::assert_snapshot!(shard("pad"), @r"
        changed=false
        Shard: num_shards=8, index=3, remainder=pad -> record
          Interleave: reader=tfrecord, cycle_length=4, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
            Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_when_the_interleave_does_not_read_files_directly() {
        let text = check(
            &PushShardDown,
            &pipeline(
                "files(files);
                 shard(2, 0);
                 interleave(cycle: 4) { tfrecord(); }
                 shard(8, 3);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=false
        Shard: num_shards=8, index=3, remainder=keep -> record
          Interleave: reader=tfrecord, cycle_length=4, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
            Shard: num_shards=2, index=0, remainder=keep -> path
              Files: pattern=$files, shuffle_seed=none -> path
        ");
    }
}
