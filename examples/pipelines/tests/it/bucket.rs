//! `bucket_by_length` and `padded_batch(pad_to_multiple)` through generated pipelines
//! (`tests/pipes/bucket.pipe`) over TFRecords of variable-length `i64[]` token ids: the
//! batches are those of a plain model of tf.data's `bucket_by_sequence_length`
//! (`group_by_window` by bucket, full buckets at once, the rest at the end in bucket
//! order), padded with 0 as it pads; resume from every position gives the rest of an
//! uninterrupted pass.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use sluice::example::feature::Kind;
use sluice::example::{Example, Feature, Features, Int64List};
use sluice::runtime::stage::{Ctx, Dataset};
use sluice::tfrecord::{Compression, create};
use sluice_examples::bucket::{bucketed, bucketed_to_boundary, padded_to_multiple};

/// Record `i`: `tokens` = `[1000 i + 1, …]` of a length in 0..=31, `label` = length - 1.
fn lengths() -> Vec<usize> {
    (0..157usize).map(|i| (i * 13 + i * i / 7) % 32).collect()
}

fn tokens(i: usize, len: usize) -> Vec<i64> {
    (0..len as i64).map(|t| 1000 * i as i64 + t + 1).collect()
}

/// Writes the records in two files (sorted names: read in this order).
fn write(dir: &Path) -> String {
    let examples: Vec<Vec<u8>> = lengths()
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut f = BTreeMap::new();
            let int = |v: Vec<i64>| Feature { kind: Some(Kind::Int64List(Int64List { value: v })) };
            f.insert("tokens".to_string(), int(tokens(i, len)));
            f.insert("label".to_string(), int(vec![len as i64 - 1]));
            Example { features: Some(Features { feature: f }) }.encode_to_vec()
        })
        .collect();
    for (k, part) in examples.chunks(80).enumerate() {
        let mut w = create(dir.join(format!("tokens-{k}.tfrecord")), Compression::None).unwrap();
        for r in part {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
    }
    format!("{}/tokens-*.tfrecord", dir.display())
}

/// The plain model: each batch as the record indices it holds, in order.
fn model(boundaries: &[usize], sizes: &[usize], drop_remainder: bool) -> Vec<Vec<usize>> {
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); sizes.len()];
    let mut out = Vec::new();
    for (i, &len) in lengths().iter().enumerate() {
        let b = boundaries.iter().filter(|&&x| x <= len).count();
        buckets[b].push(i);
        if buckets[b].len() == sizes[b] {
            out.push(std::mem::take(&mut buckets[b]));
        }
    }
    out.extend(buckets.into_iter().filter(|b| !b.is_empty() && !drop_remainder));
    out
}

/// The rows of a padded `[n, width]` batch, each padded with 0 to `width`.
fn padded(rows: &[usize], width: usize) -> Vec<i64> {
    let lengths = lengths();
    rows.iter()
        .flat_map(|&i| {
            let mut t = tokens(i, lengths[i]);
            t.resize(width, 0);
            t
        })
        .collect()
}

fn pass<D: Dataset>(ds: &D, skip: u64) -> Vec<D::Item> {
    let ctx = Ctx::new(&Default::default());
    ds.stream_from(&ctx, skip).unwrap().map(|x| x.unwrap()).collect()
}

#[test]
fn bucketed_batches_are_tf_datas_in_order_padded_to_their_longest() {
    let dir = tempfile::tempdir().unwrap();
    let p = bucketed::Params { files: write(dir.path()) };
    let batches = pass(&bucketed::dataset(&p).unwrap(), 0);
    let want = model(&[8, 16, 32], &[8, 8, 4, 2], false);
    assert_eq!(batches.len(), want.len());
    let lengths = lengths();
    for (b, rows) in batches.iter().zip(&want) {
        let longest = rows.iter().map(|&i| lengths[i]).max().unwrap();
        assert_eq!(b.tokens.shape(), &[rows.len(), longest]);
        assert_eq!(b.tokens.as_slice(), padded(rows, longest).as_slice());
        let labels: Vec<i64> = rows.iter().map(|&i| lengths[i] as i64 - 1).collect();
        assert_eq!(b.label.as_slice(), labels.as_slice());
    }
    // Some partial buckets came out at the end, smallest bucket first.
    assert!(want.iter().any(|r| ![8, 4, 2].contains(&r.len())));
}

#[test]
fn bucketed_to_boundary_pads_to_the_boundary_and_drops_the_partial_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let p = bucketed_to_boundary::Params { files: write(dir.path()) };
    let batches = pass(&bucketed_to_boundary::dataset(&p).unwrap(), 0);
    // `length: n`, n = label + 1 = the sequence's length: lengths up to 31, so no element
    // reaches the last bucket (32 up), which pad_to_bucket_boundary refuses.
    let want = model(&[8, 16, 32], &[4, 4, 2, 1], true);
    assert_eq!(batches.len(), want.len());
    let lengths = lengths();
    for (b, rows) in batches.iter().zip(&want) {
        let bucket = [8, 16, 32].iter().filter(|&&x| x <= lengths[rows[0]]).count();
        let width = [7, 15, 31][bucket];
        assert_eq!(b.tokens.shape(), &[[4, 4, 2][bucket], width]);
        assert_eq!(b.tokens.as_slice(), padded(rows, width).as_slice());
    }
}

#[test]
fn bucketed_resumes_exactly_from_every_position() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path());
    let ds = bucketed::dataset(&bucketed::Params { files: files.clone() }).unwrap();
    let all = pass(&ds, 0);
    for k in 0..=all.len() as u64 + 1 {
        let rest = pass(&ds, k);
        let want = &all[(k as usize).min(all.len())..];
        assert_eq!(rest.len(), want.len(), "from {k}");
        for (a, b) in rest.iter().zip(want) {
            assert_eq!(
                (a.tokens.shape(), a.tokens.as_slice()),
                (b.tokens.shape(), b.tokens.as_slice()),
                "from {k}"
            );
            assert_eq!(a.label.as_slice(), b.label.as_slice(), "from {k}");
        }
    }
    let ds = bucketed_to_boundary::dataset(&bucketed_to_boundary::Params { files }).unwrap();
    let all = pass(&ds, 0);
    for k in 0..=all.len() as u64 {
        let rest = pass(&ds, k);
        let want = &all[k as usize..];
        assert_eq!(rest.len(), want.len(), "from {k}");
        for (a, b) in rest.iter().zip(want) {
            assert_eq!(a.tokens.as_slice(), b.tokens.as_slice(), "from {k}");
        }
    }
}

#[test]
fn padded_to_multiple_rounds_each_batch_up_to_a_multiple_of_8() {
    let dir = tempfile::tempdir().unwrap();
    let p = padded_to_multiple::Params { files: write(dir.path()) };
    let batches = pass(&padded_to_multiple::dataset(&p).unwrap(), 0);
    let lengths = lengths();
    let all: Vec<usize> = (0..lengths.len()).collect();
    assert_eq!(batches.len(), all.chunks(4).count());
    let mut widths = Vec::new();
    for (b, rows) in batches.iter().zip(all.chunks(4)) {
        let longest = rows.iter().map(|&i| lengths[i]).max().unwrap();
        let width = longest.div_ceil(8) * 8;
        assert_eq!(b.tokens.shape(), &[rows.len(), width]);
        assert_eq!(b.tokens.as_slice(), padded(rows, width).as_slice());
        widths.push(width);
    }
    assert!(widths.iter().all(|w| w % 8 == 0) && widths.iter().any(|&w| w != 32), "{widths:?}");
}
