//! `flat_map` through generated pipelines (`tests/pipes/flat_map.pipe`): the elements are
//! tf.data's for the same program, a pass resumed at any position (inside an element's
//! inner chain too) gives the rest of an uninterrupted one, and the inner chain's stages
//! (filter, map, take, batch) run per element. The `slices` pipelines read TFRecord files
//! written here: their values are exact, a record whose sliced fields differ in length
//! fails with an error naming it, a parallel map before the `flat_map` changes nothing,
//! and a resumed pass goes on inside a record's rows.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use sluice::example::feature::Kind;
use sluice::example::{Example, Feature, Features, FloatList, Int64List};
use sluice::runtime::stage::{Ctx, Dataset};
use sluice::tfrecord::{Compression, create};
use sluice_examples::flat_map::{labelled, per_element, ranges, ranges_plus, rows, tokens};

fn from<D: Dataset>(ds: &D, skip: u64) -> Vec<D::Item> {
    let ctx = Ctx::new(&Default::default());
    ds.stream_from(&ctx, skip).unwrap().map(|r| r.unwrap()).collect()
}

fn int(v: Vec<i64>) -> Feature {
    Feature { kind: Some(Kind::Int64List(Int64List { value: v })) }
}

/// Writes `records` (each a map of features) into files of `per_file` records,
/// `NAME-{k}.tfrecord` (sorted names: read in this order); their glob.
fn write(dir: &Path, name: &str, records: Vec<BTreeMap<String, Feature>>, per_file: usize) -> String {
    let encoded: Vec<Vec<u8>> = records
        .into_iter()
        .map(|feature| Example { features: Some(Features { feature }) }.encode_to_vec())
        .collect();
    for (k, part) in encoded.chunks(per_file).enumerate() {
        let mut w = create(dir.join(format!("{name}-{k}.tfrecord")), Compression::None).unwrap();
        for r in part {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
    }
    format!("{}/{name}-*.tfrecord", dir.display())
}

/// Record `i` of the token files: `tokens` (0 to 5 of them), `labels` as many (some 0),
/// `id` = `i`.
struct Rec {
    tokens: Vec<i64>,
    labels: Vec<i64>,
    id: i64,
}

fn records(n: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| {
            let len = (i * 7 + i * i / 3) % 6;
            let tokens = (0..len as i64).map(|t| 100 * i as i64 + t - 2).collect();
            let labels = (0..len as i64).map(|t| (i as i64 + t) % 4).collect();
            Rec { tokens, labels, id: i as i64 }
        })
        .collect()
}

fn write_tokens(dir: &Path, name: &str, recs: &[Rec]) -> String {
    let maps = recs
        .iter()
        .map(|r| {
            let mut f = BTreeMap::new();
            f.insert("tokens".to_string(), int(r.tokens.clone()));
            f.insert("labels".to_string(), int(r.labels.clone()));
            f.insert("id".to_string(), int(vec![r.id]));
            f
        })
        .collect();
    write(dir, name, maps, 40)
}

#[test]
fn ranges_yield_what_tf_data_yields() {
    // tf: Dataset.range(1, 8).flat_map(lambda x: Dataset.range(x).map(lambda y: y * 10))
    let ds = ranges::dataset(&ranges::Params::default()).unwrap();
    let got: Vec<i64> = from(&ds, 0).into_iter().map(|r| r.value).collect();
    let want: Vec<i64> = (1..8).flat_map(|x| (0..x).map(|y| y * 10)).collect();
    assert_eq!(got, want);
}

#[test]
fn range_keeps_outer_fields_into_each_element() {
    // tf: Dataset.range(1, end).flat_map(lambda x: Dataset.range(x).map(lambda y: y * 10 + x))
    for end in [8, 1, 12] {
        let ds = ranges_plus::dataset(&ranges_plus::Params { end }).unwrap();
        let got: Vec<i64> = from(&ds, 0).into_iter().map(|r| r.value).collect();
        let want: Vec<i64> = (1..end).flat_map(|x| (0..x).map(move |y| y * 10 + x)).collect();
        assert_eq!(got, want, "end {end}");
    }
}

#[test]
fn a_resumed_pass_goes_on_inside_an_element() {
    let ds = ranges::dataset(&ranges::Params::default()).unwrap();
    let whole: Vec<i64> = from(&ds, 0).into_iter().map(|r| r.value).collect();
    assert_eq!(whole.len(), 28);
    for k in 0..=whole.len() as u64 {
        let rest: Vec<i64> = from(&ds, k).into_iter().map(|r| r.value).collect();
        assert_eq!(rest, whole[k as usize..], "resumed at {k}");
    }
}

#[test]
fn stages_inside_run_per_element() {
    let ds = per_element::dataset(&per_element::Params { lengths: 2 }).unwrap();
    let got: Vec<Vec<i64>> = from(&ds, 0).into_iter().map(|b| b.value.as_slice().to_vec()).collect();
    // For each n in 2..8: range(0, n, 2), not multiples of 3, plus 1, the first 4, in 2s.
    let mut want = Vec::new();
    for n in 2..8i64 {
        let kept: Vec<i64> = (0..n).step_by(2).filter(|v| v % 3 != 0).map(|v| v + 1).take(4).collect();
        want.extend(kept.chunks(2).map(<[i64]>::to_vec));
    }
    assert_eq!(got, want);
}

#[test]
fn slices_of_records_yield_each_token_with_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(57);
    let files = write_tokens(dir.path(), "tokens", &recs);
    let ds = tokens::dataset(&tokens::Params { files }).unwrap();
    let got: Vec<(Vec<i64>, Vec<i64>)> =
        from(&ds, 0).into_iter().map(|b| (b.tokens.as_slice().to_vec(), b.id.as_slice().to_vec())).collect();
    // tf: .flat_map(lambda e: from_tensor_slices({"tokens": e["tokens"], "id": fill(...)})).batch(5)
    let flat: Vec<(i64, i64)> = recs.iter().flat_map(|r| r.tokens.iter().map(|&t| (t, r.id))).collect();
    assert!(recs.iter().any(|r| r.tokens.is_empty()), "some records have no tokens");
    let want: Vec<(Vec<i64>, Vec<i64>)> =
        flat.chunks(5).map(|c| (c.iter().map(|x| x.0).collect(), c.iter().map(|x| x.1).collect())).collect();
    assert_eq!(got, want);
    assert_eq!(got.last().unwrap().0.len(), flat.len() % 5, "the last batch is partial");
}

#[test]
fn slices_of_a_tensor_yield_its_rows_numbered_per_record() {
    let dir = tempfile::tempdir().unwrap();
    let grid = |i: usize| -> Vec<f32> { (0..12).map(|j| i as f32 + 0.25 * j as f32 - 1.5).collect() };
    let maps = (0..9)
        .map(|i| {
            let mut f = BTreeMap::new();
            f.insert(
                "grid".to_string(),
                Feature { kind: Some(Kind::FloatList(FloatList { value: grid(i) })) },
            );
            f.insert("labels".to_string(), int((0..4).map(|r| 10 * i as i64 + r).collect()));
            f
        })
        .collect();
    let files = write(dir.path(), "grids", maps, 4);
    let ds = rows::dataset(&rows::Params { files }).unwrap();
    let got = from(&ds, 0);
    assert_eq!(got.len(), 9 * 4);
    for (k, e) in got.iter().enumerate() {
        let (i, r) = (k / 4, k % 4);
        assert_eq!(e.index, r as i64, "enumerate runs per record");
        assert_eq!(e.labels, 10 * i as i64 + r as i64);
        assert_eq!(e.grid.shape(), &[3]);
        assert_eq!(e.grid.as_slice(), &grid(i)[3 * r..3 * r + 3]);
    }
}

/// A batch of `labelled` as columns: tokens, labels, ids, weights.
type Columns = (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>);

/// The model of `labelled`: each token whose label is not 0, with its record's id and
/// weight, in batches of 4.
fn labelled_model(recs: &[Rec]) -> Vec<Columns> {
    let rows: Vec<(i64, i64, i64)> = recs
        .iter()
        .flat_map(|r| r.tokens.iter().zip(&r.labels).filter(|(_, l)| **l != 0).map(|(&t, &l)| (t, l, r.id)))
        .collect();
    rows.chunks(4)
        .map(|c| {
            let col = |f: fn(&(i64, i64, i64)) -> i64| c.iter().map(f).collect::<Vec<i64>>();
            (col(|x| x.0), col(|x| x.1), col(|x| x.2), col(|x| 2 * x.2 + 1))
        })
        .collect()
}

fn labelled_batches(ds: &impl Dataset<Item = labelled::Batch>, skip: u64) -> Vec<Columns> {
    from(ds, skip)
        .into_iter()
        .map(|b| {
            (
                b.tokens.as_slice().to_vec(),
                b.labels.as_slice().to_vec(),
                b.id.as_slice().to_vec(),
                b.weight.as_slice().to_vec(),
            )
        })
        .collect()
}

#[test]
fn a_parallel_map_before_it_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(203);
    let files = write_tokens(dir.path(), "labelled", &recs);
    let want = labelled_model(&recs);
    assert!(want.len() > 50);
    for threads in [1, 2, 3, 8] {
        let ds = labelled::dataset(&labelled::Params { files: files.clone(), threads }).unwrap();
        assert_eq!(labelled_batches(&ds, 0), want, "{threads} threads");
    }
}

#[test]
fn a_resumed_slices_pass_goes_on_inside_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(61);
    let files = write_tokens(dir.path(), "labelled", &recs);
    let ds = labelled::dataset(&labelled::Params { files, threads: 3 }).unwrap();
    let whole = labelled_batches(&ds, 0);
    assert_eq!(whole, labelled_model(&recs));
    // Batches of 4 rows cut records' rows: many positions resume inside a record (the
    // record of a batch's last row goes on in the next batch).
    let inside = whole.windows(2).filter(|w| w[0].2.last() == w[1].2.first()).count();
    assert!(inside > 5, "{inside} positions inside a record");
    for k in 0..=whole.len() as u64 + 1 {
        assert_eq!(labelled_batches(&ds, k), whole[(k as usize).min(whole.len())..], "resumed at {k}");
    }
}

#[test]
fn unequal_slice_lengths_fail_naming_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut recs = records(12);
    // Record 7: three tokens, two labels.
    recs[7].tokens = vec![1, 2, 3];
    recs[7].labels = vec![1, 1];
    let files = write_tokens(dir.path(), "bad", &recs);
    let ds = labelled::dataset(&labelled::Params { files, threads: 2 }).unwrap();
    let ctx = Ctx::new(&Default::default());
    let mut pass = ds.stream_from(&ctx, 0).unwrap();
    // The full batches of the records before it come out, then the error.
    let mut before = labelled_model(&recs[..7]);
    before.retain(|b| b.0.len() == 4);
    for (k, want) in before.iter().enumerate() {
        let b = pass.next().expect("a batch").unwrap_or_else(|e| panic!("batch {k}: {e}"));
        assert_eq!(&b.tokens.as_slice().to_vec(), &want.0, "batch {k}");
    }
    let msg = match pass.next() {
        Some(Err(e)) => e.to_string(),
        other => panic!("expected the error of record 7, got {:?}", other.map(|r| r.map(|b| b.id))),
    };
    assert!(msg.contains("flat_map"), "{msg}");
    assert!(msg.contains("input element 7"), "{msg}");
    assert!(msg.contains("`tokens` has 3, `labels` has 2"), "{msg}");
}
