//! `parse_sequence_example` through generated pipelines (`tests/pipes/sequence.pipe`) on
//! TFRecords of `tf.train.SequenceExample`s written here with the runtime's messages:
//! context features and feature lists decoded and padded by `padded_batch`, a missing
//! list of zero steps, a bad step or record failing with its file, record and step
//! named, the same batches on any thread count, and resume mid-pass.

use std::path::Path;

use sluice::example::{Feature, SequenceExample};
use sluice::runtime::stage::{Ctx, Dataset};
use sluice::tfrecord::{Compression, create};
use sluice_examples::sequence::{clips, context_only, tokens_only};

/// Record `i`: `label = i`, `tags` of `i % 3` values, `i % 4` steps of `frames`
/// (`[i, step, 0.5]`), `tokens` of `i % 5` steps (absent when 0), `mask` as `frames`.
fn record(i: i64) -> SequenceExample {
    let steps = (i % 4) as usize;
    let mut context = vec![("label".to_string(), Feature::int64s([i]))];
    context.push(("tags".into(), Feature::int64s((0..i % 3).collect::<Vec<_>>())));
    if i % 2 == 1 {
        context.push(("weight".into(), Feature::floats([0.25])));
    }
    let mut lists = vec![
        ("frames".to_string(), (0..steps).map(|s| Feature::floats([i as f32, s as f32, 0.5])).collect()),
        ("mask".to_string(), (0..steps).map(|s| Feature::int64s([(s % 2) as i64])).collect()),
        ("unused".to_string(), vec![Feature::floats([1.0]); 2]),
    ];
    if i % 5 != 0 {
        lists.push(("tokens".to_string(), (0..i % 5).map(|t| Feature::int64s([100 * i + t])).collect()));
    }
    SequenceExample::from_parts(context, lists)
}

/// Writes `records` to `dir/name` and returns its path.
fn write(dir: &Path, name: &str, records: impl IntoIterator<Item = SequenceExample>) -> String {
    let path = dir.join(name);
    let mut w = create(&path, Compression::None).unwrap();
    for r in records {
        w.write_record(&r.encode_record()).unwrap();
    }
    w.finish().unwrap();
    path.display().to_string()
}

/// Every element of a pass of `ds` from position `skip`, or the first error's text.
fn pass<D: Dataset>(ds: &D, skip: u64) -> Result<Vec<D::Item>, String> {
    let ctx = Ctx::new(&Default::default());
    ds.stream_from(&ctx, skip).map_err(|e| e.to_string())?.map(|r| r.map_err(|e| e.to_string())).collect()
}

/// A batch as plain rows: (label, weight, tags, frames rows, tokens, mask).
type Row = (i64, f32, Vec<i64>, Vec<Vec<f32>>, Vec<i64>, Vec<u8>);

/// The rows of padded batches, each padded part cut back to the record's own length
/// (checked to be padding, zeros).
fn rows(batches: &[clips::Batch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let n = b.label.as_slice().len();
        let frames = (b.frames.shape().to_vec(), b.frames.as_slice());
        let (tags, tokens, mask) = (b.tags.as_slice(), b.tokens.as_slice(), b.mask.as_slice());
        let (t_w, k_w) = (tags.len() / n, tokens.len() / n);
        assert_eq!(frames.0[0], n);
        let steps = frames.0[1];
        assert_eq!(frames.0[2], 3);
        assert_eq!(b.mask.shape(), [n, steps, 1], "mask pads to the same steps");
        for r in 0..n {
            let label = b.label.as_slice()[r];
            let own = (label % 4) as usize;
            let f = &frames.1[r * steps * 3..(r + 1) * steps * 3];
            assert!(f[own * 3..].iter().all(|&x| x == 0.0), "steps past {own} are padding: {f:?}");
            let tg = &tags[r * t_w..(r + 1) * t_w];
            let tk = &tokens[r * k_w..(r + 1) * k_w];
            let m = &mask[r * steps..(r + 1) * steps];
            out.push((
                label,
                b.weight.as_slice()[r],
                tg[..(label % 3) as usize].to_vec(),
                f[..own * 3].chunks(3).map(<[f32]>::to_vec).collect(),
                tk[..(label % 5) as usize].to_vec(),
                m[..own].to_vec(),
            ));
        }
    }
    out
}

/// What `clips` makes of record `i` (frames doubled by the map).
fn want(i: i64) -> Row {
    let steps = (i % 4) as usize;
    (
        i,
        if i % 2 == 1 { 0.25 } else { 1.0 },
        (0..i % 3).collect(),
        (0..steps).map(|s| vec![2.0 * i as f32, 2.0 * s as f32, 1.0]).collect(),
        (0..i % 5).map(|t| 100 * i + t).collect(),
        (0..steps).map(|s| (s % 2) as u8).collect(),
    )
}

#[test]
fn context_and_feature_lists_are_parsed_and_steps_padded_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path(), "a.tfrecord", (0..9).map(record));
    for par in [1, 3] {
        let p = clips::Params { files: files.clone(), par };
        let batches = pass(&clips::dataset(&p).unwrap(), 0).unwrap();
        assert_eq!(batches.len(), 5);
        // Batch 0 holds records 0 (no steps, no tokens) and 1 (one step): padded to 1.
        assert_eq!(batches[0].frames.shape(), [2, 1, 3]);
        assert_eq!(batches[1].frames.shape(), [2, 3, 3], "records 2 and 3: 2 and 3 steps");
        assert_eq!(rows(&batches), (0..9).map(want).collect::<Vec<_>>(), "parallel: {par}");
    }
}

#[test]
fn only_the_used_feature_lists_are_decoded() {
    let dir = tempfile::tempdir().unwrap();
    // `frames` has steps of the wrong width: `tokens_only` never decodes it.
    let bad = |i| {
        let mut r = record(i);
        let lists = r.feature_lists.as_mut().unwrap();
        lists.feature_list.get_mut("frames").unwrap().feature.push(Feature::floats([1.0]));
        r
    };
    let files = write(dir.path(), "a.tfrecord", (0..5).map(bad));
    let p = tokens_only::Params { files: files.clone() };
    let got: Vec<(i64, Vec<i64>)> = pass(&tokens_only::dataset(&p).unwrap(), 0)
        .unwrap()
        .into_iter()
        .map(|r| (r.label, r.tokens))
        .collect();
    assert_eq!(got, (0..5).map(|i| (i, (0..i % 5).map(|t| 100 * i + t).collect())).collect::<Vec<_>>());
    // `clips` decodes it, and fails naming the file, the record, the list and the step.
    let err = pass(&clips::dataset(&clips::Params { files, par: 1 }).unwrap(), 0).unwrap_err();
    assert!(err.contains("a.tfrecord: record 0"), "{err}");
    assert!(err.contains("feature list `frames`, step 0: expected 3 values, found 1"), "{err}");
}

#[test]
fn bad_records_fail_naming_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = |files: String| clips::Params { files, par: 1 };
    // A step of the wrong width, in record 2.
    let mut r = record(2);
    r.feature_lists.as_mut().unwrap().feature_list.get_mut("frames").unwrap().feature[1] =
        Feature::floats([1.0, 2.0]);
    let files = write(dir.path(), "width.tfrecord", [record(0), record(1), r]);
    let err = pass(&clips::dataset(&p(files)).unwrap(), 0).unwrap_err();
    assert!(err.contains("width.tfrecord: record 2"), "{err}");
    assert!(err.contains("feature list `frames`, step 1: expected 3 values, found 2"), "{err}");
    // `frames` and `mask` share `steps`: a different number of steps is an error.
    let mut r = record(3);
    r.feature_lists.as_mut().unwrap().feature_list.get_mut("mask").unwrap().feature.pop();
    let files = write(dir.path(), "steps.tfrecord", [r]);
    let err = pass(&clips::dataset(&p(files)).unwrap(), 0).unwrap_err();
    assert!(err.contains("steps.tfrecord: record 0"), "{err}");
    assert!(
        err.contains("feature lists `frames` and `mask` share dimension `steps` but have 3 and 2 steps"),
        "{err}"
    );
    // A missing context feature without default.
    let mut r = record(1);
    r.context.as_mut().unwrap().feature.remove("label");
    let files = write(dir.path(), "label.tfrecord", [r]);
    let err = pass(&clips::dataset(&p(files)).unwrap(), 0).unwrap_err();
    assert!(err.contains("label.tfrecord: record 0") && err.contains("feature `label` is missing"), "{err}");
    // A list of the wrong kind, and a record that is not a message.
    let mut r = record(1);
    r.feature_lists.as_mut().unwrap().feature_list.get_mut("tokens").unwrap().feature[0] =
        Feature::floats([1.0]);
    let files = write(dir.path(), "kind.tfrecord", [r]);
    let err = pass(&clips::dataset(&p(files)).unwrap(), 0).unwrap_err();
    assert!(
        err.contains("feature list `tokens`, step 0: expected an int64_list but found a float_list"),
        "{err}"
    );
    let path = dir.path().join("junk.tfrecord");
    let mut w = create(&path, Compression::None).unwrap();
    w.write_record(b"\x12\x20short").unwrap();
    w.finish().unwrap();
    let err = pass(&clips::dataset(&p(path.display().to_string())).unwrap(), 0).unwrap_err();
    assert!(
        err.contains("junk.tfrecord: record 0") && err.contains("malformed tf.train.SequenceExample"),
        "{err}"
    );
}

#[test]
fn a_resumed_pass_is_the_rest_of_the_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = write(dir.path(), "a.tfrecord", (0..9).map(record));
    let p = clips::Params { files: files.clone(), par: 3 };
    let whole = rows(&pass(&clips::dataset(&p).unwrap(), 0).unwrap());
    for k in [1, 3, 4] {
        let state = clips::state(&p, 0, k).unwrap();
        clips::check_state(&p, &state).unwrap();
        let rest = rows(&pass(&clips::dataset(&p).unwrap(), state.position).unwrap());
        assert_eq!(rest, whole[2 * k as usize..], "resumed after {k} batches");
    }
    // The shuffled context-only pipeline resumes too (a field called `sequence`).
    let p = context_only::Params { files };
    let whole: Vec<i64> =
        pass(&context_only::dataset(&p).unwrap(), 0).unwrap().iter().map(|r| r.sequence).collect();
    assert_eq!(whole.len(), 0, "no record has a context feature `sequence`: every one is skipped");
}
