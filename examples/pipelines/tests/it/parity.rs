//! tf.data parity through the pipelines `tests/pipes/parity.pipe` compiles to, over
//! TFRecords written here: `unbatch` of list and tensor fields, `padding_values` of
//! `padded_batch` and `bucket_by_length`, `zip` of batched pipelines and `check_finite`
//! in a skipping map, each checked against the exact elements tf.data gives.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use sluice::example::feature::Kind;
use sluice::example::{Example, Feature, Features, FloatList, Int64List};
use sluice::runtime::stage::{Ctx, Dataset};
use sluice::tfrecord::{Compression, create};
use sluice_examples::parity::{
    bucketed_with_values, count_batches, finite, padded_with_values, token_batches, unbatched_lists,
    unbatched_tensors, zipped_token_batches,
};

/// A feature value: integers or floats.
enum V {
    I(Vec<i64>),
    F(Vec<f32>),
}

/// Writes `records` (features by name) to `dir/NAME-0.tfrecord`; the glob of it.
fn write(dir: &Path, name: &str, records: &[Vec<(&str, V)>]) -> String {
    let mut w = create(dir.join(format!("{name}-0.tfrecord")), Compression::None).unwrap();
    for r in records {
        let mut f = BTreeMap::new();
        for (k, v) in r {
            let kind = match v {
                V::I(v) => Kind::Int64List(Int64List { value: v.clone() }),
                V::F(v) => Kind::FloatList(FloatList { value: v.clone() }),
            };
            f.insert(k.to_string(), Feature { kind: Some(kind) });
        }
        w.write_record(&Example { features: Some(Features { feature: f }) }.encode_to_vec()).unwrap();
    }
    w.finish().unwrap();
    format!("{}/{name}-*.tfrecord", dir.display())
}

/// Record `i` of the token files: `i % 4` tokens `10 i + t`, weights `(10 i + t) / 2`.
fn tokens(i: i64) -> Vec<i64> {
    (0..i % 4).map(|t| 10 * i + t).collect()
}

fn weights(i: i64) -> Vec<f32> {
    tokens(i).iter().map(|&t| t as f32 / 2.0).collect()
}

/// Ten records of `tokens`, `weights` and `label = i`.
fn token_files(dir: &Path) -> String {
    let records: Vec<Vec<(&str, V)>> = (0..10)
        .map(|i| vec![("tokens", V::I(tokens(i))), ("weights", V::F(weights(i))), ("label", V::I(vec![i]))])
        .collect();
    write(dir, "tokens", &records)
}

fn pass<D: Dataset>(ds: &D, skip: u64) -> Vec<sluice::Result<D::Item>> {
    let ctx = Ctx::new(&Default::default());
    ds.stream_from(&ctx, skip).unwrap().collect()
}

fn oks<D: Dataset>(ds: &D, skip: u64) -> Vec<D::Item> {
    pass(ds, skip).into_iter().map(|x| x.unwrap()).collect()
}

/// `rows` of variable length padded with `pad` to the longest, row-major.
fn padded<T: Copy>(rows: &[Vec<T>], pad: T) -> (Vec<usize>, Vec<T>) {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let values = rows
        .iter()
        .flat_map(|r| {
            let mut r = r.clone();
            r.resize(width, pad);
            r
        })
        .collect();
    (vec![rows.len(), width], values)
}

#[test]
fn unbatch_of_lists_yields_one_element_per_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = unbatched_lists::Params { files: token_files(dir.path()) };
    let ds = unbatched_lists::dataset(&p).unwrap();
    let got: Vec<(i64, f32)> = oks(&ds, 0).iter().map(|r| (r.tokens, r.weights)).collect();
    // tf.data: the tokens of every record in order, each with its weight.
    let want: Vec<(i64, f32)> = (0..10).flat_map(|i| tokens(i).into_iter().zip(weights(i))).collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 13, "lengths 0, 1, 2, 3, 0, 1, 2, 3, 0, 1");
    // Resumed at every position: the rest of the pass.
    for k in 0..=want.len() + 1 {
        let rest: Vec<(i64, f32)> = oks(&ds, k as u64).iter().map(|r| (r.tokens, r.weights)).collect();
        assert_eq!(rest, want[k.min(want.len())..], "from {k}");
    }
}

#[test]
fn unbatch_of_lists_of_different_lengths_fails_naming_the_element() {
    let dir = tempfile::tempdir().unwrap();
    let records = vec![
        vec![("tokens", V::I(vec![1, 2])), ("weights", V::F(vec![0.5, 1.5]))],
        vec![("tokens", V::I(vec![3, 4])), ("weights", V::F(vec![2.5]))],
    ];
    let p = unbatched_lists::Params { files: write(dir.path(), "bad", &records) };
    let got = pass(&unbatched_lists::dataset(&p).unwrap(), 0);
    assert_eq!(got.len(), 3, "two elements, then the error");
    assert_eq!((got[1].as_ref().unwrap().tokens, got[1].as_ref().unwrap().weights), (2, 1.5));
    let e = got[2].as_ref().map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("unbatch")
            && e.contains(
                "element 1: the fields unbatched have different lengths: `tokens` has 2, `weights` has 1"
            ),
        "{e}"
    );
}

#[test]
fn unbatch_of_tensors_drops_their_first_dimension() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<(&str, V)>> = (0..3)
        .map(|i| {
            let grid: Vec<f32> = (0..6).map(|k| (6 * i + k) as f32).collect();
            vec![("grid", V::F(grid)), ("ids", V::I((0..3).map(|r| 3 * i + r).collect()))]
        })
        .collect();
    let p = unbatched_tensors::Params { files: write(dir.path(), "grid", &records) };
    let got = oks(&unbatched_tensors::dataset(&p).unwrap(), 0);
    assert_eq!(got.len(), 9);
    for (j, r) in got.iter().enumerate() {
        // Row j: record j / 3, row j % 3 of its `[3, 2]` grid.
        assert_eq!(r.ids, j as i64);
        assert_eq!(r.grid.shape(), &[2]);
        assert_eq!(r.grid.as_slice(), &[(2 * j) as f32, (2 * j + 1) as f32]);
    }
}

#[test]
fn padded_batch_pads_each_field_with_its_value() {
    let dir = tempfile::tempdir().unwrap();
    let p = padded_with_values::Params { files: token_files(dir.path()) };
    let batches = oks(&padded_with_values::dataset(&p).unwrap(), 0);
    let rows: Vec<Vec<i64>> = (0..10).collect::<Vec<i64>>().chunks(4).map(<[i64]>::to_vec).collect();
    assert_eq!(batches.len(), rows.len());
    for (b, rows) in batches.iter().zip(&rows) {
        let (shape, values) = padded(&rows.iter().map(|&i| tokens(i)).collect::<Vec<_>>(), -1);
        assert_eq!((b.tokens.shape(), b.tokens.as_slice()), (shape.as_slice(), values.as_slice()));
        let (shape, values) = padded(&rows.iter().map(|&i| weights(i)).collect::<Vec<_>>(), 0.5);
        assert_eq!((b.weights.shape(), b.weights.as_slice()), (shape.as_slice(), values.as_slice()));
        assert_eq!(b.label.as_slice(), rows.as_slice());
    }
    // The first batch, spelled out: lengths 0 to 3.
    assert_eq!(batches[0].tokens.as_slice(), &[-1, -1, -1, 10, -1, -1, 20, 21, -1, 30, 31, 32]);
}

#[test]
fn bucket_by_length_pads_with_the_value_given() {
    let dir = tempfile::tempdir().unwrap();
    let p = bucketed_with_values::Params { files: token_files(dir.path()) };
    let batches = oks(&bucketed_with_values::dataset(&p).unwrap(), 0);
    // tf.data's order: lengths below 3 by 2 as they fill, then the partial bucket of 3s.
    let want: [&[i64]; 5] = [&[0, 1], &[2, 4], &[5, 6], &[8, 9], &[3, 7]];
    assert_eq!(batches.len(), want.len());
    for (b, rows) in batches.iter().zip(want) {
        let (shape, values) = padded(&rows.iter().map(|&i| tokens(i)).collect::<Vec<_>>(), -1);
        assert_eq!((b.tokens.shape(), b.tokens.as_slice()), (shape.as_slice(), values.as_slice()));
        assert_eq!(b.label.as_slice(), rows);
    }
}

#[test]
fn zip_of_batches_gives_batches_with_the_columns_of_both() {
    let dir = tempfile::tempdir().unwrap();
    let files = token_files(dir.path());
    let p = zipped_token_batches::Params {
        token_batches: token_batches::Params { files: files.clone() },
        count_batches: count_batches::Params { n: 10 },
    };
    let ds = zipped_token_batches::dataset(&p).unwrap();
    let batches = oks(&ds, 0);
    assert_eq!(batches.len(), 3);
    for (k, b) in batches.iter().enumerate() {
        let rows: Vec<i64> = (4 * k as i64..(4 * k as i64 + 4).min(10)).collect();
        let (shape, values) = padded(&rows.iter().map(|&i| tokens(i)).collect::<Vec<_>>(), -1);
        assert_eq!((b.tokens.shape(), b.tokens.as_slice()), (shape.as_slice(), values.as_slice()));
        assert_eq!(b.label.as_slice(), rows.as_slice());
        assert_eq!(b.value.as_slice(), rows.as_slice());
    }
    // Resumed after one batch: the other two.
    let rest = oks(&ds, 1);
    assert_eq!(
        rest.iter().map(|b| b.value.as_slice().to_vec()).collect::<Vec<_>>(),
        [vec![4, 5, 6, 7], vec![8, 9]]
    );
    // 12 counts: the third pair is a batch of 2 tokens and one of 4 counts.
    let p = zipped_token_batches::Params {
        token_batches: token_batches::Params { files },
        count_batches: count_batches::Params { n: 12 },
    };
    let got = pass(&zipped_token_batches::dataset(&p).unwrap(), 0);
    assert_eq!(got.len(), 3);
    let e = got[2].as_ref().map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("zip") && e.contains("element 2: batches of 2 and 4 rows"), "{e}");
}

#[test]
fn check_finite_drops_the_elements_with_nan_or_infinities() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<(&str, V)>> = (0..8)
        .map(|i| {
            let w = match i {
                2 => vec![f32::NAN],
                5 => vec![1.0, f32::INFINITY],
                _ => vec![1.0],
            };
            let score = if i == 4 { 0.0 } else { i as f32 + 1.0 };
            vec![
                ("tokens", V::I(vec![i])),
                ("weights", V::F(w)),
                ("label", V::I(vec![i])),
                ("score", V::F(vec![score])),
            ]
        })
        .collect();
    let p = finite::Params { files: write(dir.path(), "finite", &records) };
    let ctx = Ctx::new(&Default::default());
    let got: Vec<(i64, f32)> = finite::dataset(&p)
        .unwrap()
        .stream_in(&ctx)
        .unwrap()
        .map(|r| r.unwrap())
        .map(|r| (r.label, r.inverse))
        .collect();
    // 2 (NaN), 4 (1 / 0 is inf, not an error of its own) and 5 (inf) dropped.
    let want: Vec<(i64, f32)> = [0, 1, 3, 6, 7].iter().map(|&i| (i, 1.0 / (i as f32 + 1.0))).collect();
    assert_eq!(got, want);
    let map = ctx.report().stages.into_iter().find(|s| s.name == "map").unwrap();
    assert_eq!(map.skipped_errors, 3);
    let first = &map.first_skipped;
    assert!(first[0].contains("record 2") && first[0].contains("`weights` has NaN at index 0"), "{first:?}");
    assert!(first[1].contains("record 4") && first[1].contains("is inf"), "{first:?}");
    assert!(first[2].contains("record 5") && first[2].contains("`weights` has inf at index 1"), "{first:?}");
}
