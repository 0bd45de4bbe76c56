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
//! A `remainder: keep` shard right on a `parquet` reader of `files` (the reader's parse
//! map, which the source lowers to, between them) moves *into* the reader instead, which
//! shards row groups, not files: the reader lists every file's row groups, file after
//! file in the order of the paths (the global row-group list), and reads only those whose
//! global index is `index` modulo `num_shards`. Each worker decodes about `1 / num_shards`
//! of the data, balanced to a row group even with a single big file, where file-level
//! sharding would leave every worker but one empty. The workers still see every row once
//! per epoch: the global list is the same for all of them (a shuffled file list is
//! shuffled with the same seed by each). What changes is which worker gets which rows:
//! whole row groups, not every `num_shards`-th row (W0210 says so). The shard is decided
//! on the global index of every row group *before* `skip_row_groups`' statistics skip
//! any, so that the shards partition the rows whatever the statistics say: a row group a
//! test skips is one of exactly one worker's, which then skips it. Only a shard right on
//! the reader's parse (its map holds nothing else yet: the rules that fuse maps run after
//! this one): the parse makes one element per row, so the shard was one of rows.
//!
//! A `shard` (keep or drop) on the parse map of a global shuffle of Parquet rows
//! (`parquet(files); shuffle(global); shard(n, i)`: sema puts the shuffle under the parse)
//! moves under that map, right on the shuffle, which takes it as a block of its
//! permutation: the map gives one element per row (not with `on_error: skip`).
//!
//! ```text
//! before                                        after
//! Shard: num_shards=8, index=0, remainder=keep  Interleave: …
//!   Interleave: …                                 Shard: num_shards=8, index=0, remainder=keep
//!     Files: pattern=…                              Files: pattern=…
//!
//! Shard: num_shards=$n, index=$i, remainder=keep
//!   Map: fns=[parse_parquet], …                 Map: fns=[parse_parquet], …
//!     Interleave: reader=parquet(columns: [x])    Interleave: reader=parquet(columns: [x],
//!       Files: pattern=…                                      shard: row_groups(num_shards: $n, index: $i))
//!                                                   Files: pattern=…
//! ```

use crate::ir::formats::{ParseFormat, RecordFormat, RowGroupShard};
use crate::ir::plan::{CorruptPolicy, MapOp, Plan, Remainder};

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
        // Under the parse of a global shuffle of Parquet rows, which takes it as a block of
        // its permutation: the map gives one element per row.
        Plan::Map(mut map) if shard.remainder != Remainder::Pad && on_parquet_shuffle(&map) => {
            shard.input = map.input;
            map.input = Box::new(Plan::Shard(shard));
            Transformed::yes(Plan::Map(map))
        }
        Plan::Map(mut map) if keep => {
            if let Some(p) = parquet_reader(&mut map) {
                let (num_shards, index, span) = (shard.num_shards, shard.index, shard.span);
                p.shard = Some(RowGroupShard { num_shards, index, span });
                return Transformed::yes(Plan::Map(map));
            }
            shard.input = Box::new(Plan::Map(map));
            Transformed::no(Plan::Shard(shard))
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

/// Whether `map` (dropping no element) is right on a global shuffle of a `parquet`
/// reader's rows.
fn on_parquet_shuffle(map: &crate::ir::plan::Map) -> bool {
    !map.skip_errors
        && matches!(&*map.input, Plan::Shuffle(s) if s.is_global()
            && matches!(&*s.input, Plan::Interleave(i) if matches!(i.format, RecordFormat::Parquet(_))))
}

/// The format of the unsharded `parquet` reader of `files` right under `map`, when `map`
/// is that reader's parse alone.
fn parquet_reader(map: &mut crate::ir::plan::Map) -> Option<&mut crate::ir::formats::ParquetFormat> {
    if !matches!(map.ops.as_slice(), [MapOp::Parse { format: ParseFormat::Table, .. }]) {
        return None;
    }
    let Plan::Interleave(interleave) = map.input.as_mut() else { return None };
    match &mut interleave.format {
        RecordFormat::Parquet(p) if p.shard.is_none() && matches!(*interleave.input, Plan::Files(_)) => {
            Some(p)
        }
        _ => None,
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
    fn applies_to_a_keep_shard_right_on_a_parquet_reader_which_shards_row_groups() {
        let text = check(
            &PushShardDown,
            "pipeline p(files: glob = \"d/*.parquet\", n: u64 = 3, i: u64 = 0) {
                 schema { x: f32[4], label: i64 }
                 parquet(files, cycle: 2);
                 shard(n, i);
             }",
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Map: fns=[parse_parquet], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
          Interleave: reader=parquet(columns: [x, label], shard: row_groups(num_shards: $n, index: $i)), cycle_length=2, block_length=1, parallel=1, deterministic=true, compression=auto -> record
            Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_to_a_parquet_reader_under_a_map_or_with_a_dropped_remainder() {
        let parquet = |stages: &str| {
            check(
                &PushShardDown,
                &format!(
                    "pipeline p(files: glob = \"d/*.parquet\") {{
                         schema {{ x: f32[4], label: i64 }}
                         parquet(files);
                         {stages}
                     }}"
                ),
            )
        };
        insta::assert_snapshot!(parquet("shard(3, 1, remainder: drop);"), @r"
        changed=false
        Shard: num_shards=3, index=1, remainder=drop -> {x: f32[4], label: i64}
          Map: fns=[parse_parquet], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
            Interleave: reader=parquet(columns: [x, label]), cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto -> record
              Files: pattern=$files, shuffle_seed=none -> path
        ");
        let text = parquet("map { label = label + 1; } shard(3, 1);");
        assert!(text.starts_with("changed=false\nShard:"), "{text}");
    }

    #[test]
    fn applies_to_a_shard_on_the_parse_of_a_global_shuffle_of_parquet_rows_unless_it_skips() {
        let parquet = |source: &str| {
            check(
                &PushShardDown,
                &format!(
                    "pipeline p(files: glob = \"d/*.parquet\") {{
                         schema {{ x: f32[4], label: i64 }}
                         {source}
                         shuffle(global, seed: 1);
                         shard(3, 1, remainder: drop);
                     }}"
                ),
            )
        };
        insta::assert_snapshot!(parquet("parquet(files);"), @r"
        changed=true
        Map: fns=[parse_parquet], parses=[x, label], parallel=1, deterministic=true -> {x: f32[4], label: i64}
          Shard: num_shards=3, index=1, remainder=drop -> record
            Shuffle: buffer=global, seed=1, reshuffle_each_epoch=true -> record
              Interleave: reader=parquet(columns: [x, label]), cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
        let text = parquet("parquet(files, on_error: skip);");
        assert!(text.starts_with("changed=false\nShard:"), "{text}");
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
