//! The corpus pipelines that use the remaining stages, run end to end on small data
//! written here: `tests/pipes/all_ops.pipe` (GZIP files, `skip`, `decode_raw`,
//! `decode_png`, `resize`, `center_crop`, arithmetic, `filter`, `cache(file)`,
//! `padded_batch`, `unbatch`) and `tests/pipes/mixture.pipe` (`sample_from` of two
//! pipelines, `shuffle`, `batch(drop_remainder)`).

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;
use sluice::example::feature::Kind;
use sluice::example::{BytesList, Example, Feature, Features, FloatList, Int64List};
use sluice::runtime::stage::Dataset;
use sluice::tfrecord::{Compression, create};
use sluice_examples::corpus::{all_ops, clean, noisy, train};

fn feature(kind: Kind) -> Feature {
    Feature { kind: Some(kind) }
}

fn write(path: &Path, compression: Compression, examples: &[Example]) {
    let mut w = create(path, compression).unwrap();
    for e in examples {
        w.write_record(&e.encode_to_vec()).unwrap();
    }
    w.finish().unwrap();
}

/// Record `i` of the all_ops data: `raw` holds `i % 5 + 1` floats, odd records have no
/// `score` (default -1.5), `id` is `i`.
fn all_ops_record(i: u64, png: &[u8]) -> Example {
    let raw: Vec<u8> = (0..i % 5 + 1).flat_map(|k| (i as f32 + k as f32 * 0.25).to_le_bytes()).collect();
    let mut f = BTreeMap::new();
    f.insert("raw".to_string(), feature(Kind::BytesList(BytesList { value: vec![raw] })));
    f.insert("png".to_string(), feature(Kind::BytesList(BytesList { value: vec![png.to_vec()] })));
    if i.is_multiple_of(2) {
        f.insert("score".to_string(), feature(Kind::FloatList(FloatList { value: vec![i as f32 - 20.0] })));
    }
    f.insert("id".to_string(), feature(Kind::Int64List(Int64List { value: vec![i as i64] })));
    Example { features: Some(Features { feature: f }) }
}

#[test]
fn all_ops_runs_every_stage() {
    let dir = tempfile::tempdir().unwrap();
    let png =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/image/rgba_20x24.png"))
            .unwrap();
    let records: Vec<Example> = (0..60).map(|i| all_ops_record(i, &png)).collect();
    write(&dir.path().join("d-0.tfrecord.gz"), Compression::Gzip, &records[..30]);
    write(&dir.path().join("d-1.tfrecord.gz"), Compression::Gzip, &records[30..]);
    let cache = dir.path().join("cache.bin");
    let params = all_ops::Params {
        files: format!("{}/*.tfrecord.gz", dir.path().display()),
        cache_file: cache.display().to_string(),
    };
    // What the pipeline keeps: skip(10), then score' = score / 2 + 1 (default -1.5), and
    // `score' >= 0 || id % 2 == 0`.
    let kept: Vec<(u64, f64)> = (10..60u64)
        .map(|i| (i, if i.is_multiple_of(2) { f64::from(i as f32 - 20.0) } else { -1.5 } / 2.0 + 1.0))
        .filter(|&(i, s)| s >= 0.0 || i.is_multiple_of(2))
        .collect();
    let run = || -> Vec<all_ops::Batch> {
        all_ops::dataset(&params).unwrap().stream().unwrap().map(|b| b.unwrap()).collect()
    };
    let batches = run();
    assert!(cache.exists(), "the first pass wrote the cache file");
    assert_eq!(batches.len(), kept.len() / 8, "padded_batch(8, drop_remainder) of {} rows", kept.len());
    // `map(parallel: 2, deterministic: false)`: any order, so compare by id.
    let mut seen = std::collections::BTreeSet::new();
    for b in &batches {
        assert_eq!(b.raw.shape(), [8, 64], "raw padded to 64");
        assert_eq!(b.png.shape(), [8, 32, 32, 4]);
        assert_eq!(b.mask.shape(), [8, 8, 8]);
        for r in 0..8 {
            let i = b.id.as_slice()[r];
            assert!(seen.insert(i), "id {i} twice");
            let &(_, score) =
                kept.iter().find(|(k, _)| *k == i).unwrap_or_else(|| panic!("id {i} was filtered out"));
            assert_eq!(b.score.as_slice()[r], score);
            let raw = &b.raw.as_slice()[r * 64..(r + 1) * 64];
            let n = (i % 5 + 1) as usize;
            for (k, v) in raw.iter().enumerate() {
                let want = if k < n { i as f32 + k as f32 * 0.25 } else { 0.0 };
                assert_eq!(*v, want, "raw[{k}] of id {i}");
            }
            assert!(b.mask.as_slice()[r * 64..(r + 1) * 64].iter().all(|&m| m == 0));
        }
    }
    // The second pass reads the cache: the same elements.
    let again = run();
    assert_eq!(again.len(), batches.len());
    for (a, b) in again.iter().zip(&batches) {
        assert_eq!(a.id.as_slice(), b.id.as_slice());
        assert_eq!(a.png.as_slice(), b.png.as_slice());
    }
}

fn tabular(label: i64, n: usize) -> Vec<Example> {
    (0..n)
        .map(|i| {
            let mut f = BTreeMap::new();
            f.insert("x".to_string(), feature(Kind::FloatList(FloatList { value: vec![i as f32; 16] })));
            f.insert("label".to_string(), feature(Kind::Int64List(Int64List { value: vec![label] })));
            Example { features: Some(Features { feature: f }) }
        })
        .collect()
}

#[test]
fn mixture_samples_from_both_pipelines() {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("clean-0.tfrecord"), Compression::None, &tabular(0, 300));
    write(&dir.path().join("noisy-0.tfrecord"), Compression::None, &tabular(1, 300));
    let params = |seed| train::Params {
        seed,
        clean: clean::Params { files: format!("{}/clean-*.tfrecord", dir.path().display()) },
        noisy: noisy::Params { files: format!("{}/noisy-*.tfrecord", dir.path().display()) },
    };
    let run = |seed| -> Vec<(i64, u32)> {
        let batches: Vec<train::Batch> =
            train::dataset(&params(seed)).unwrap().stream().unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(batches.len(), 2, "600 records, batch(256, drop_remainder)");
        batches
            .iter()
            .flat_map(|b| {
                assert_eq!(b.x.shape(), [256, 16]);
                let x = b.x.as_slice().to_vec();
                b.label
                    .as_slice()
                    .iter()
                    .enumerate()
                    .map(move |(r, &l)| (l, x[r * 16].to_bits()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let a = run(7);
    assert_eq!(a, run(7), "the same seed gives the same mixture");
    assert_ne!(a, run(8), "another seed gives another");
    // Every record of both inputs is drawn (the mix goes on after `clean` runs out), then
    // shuffled with a buffer larger than the data: 512 of the 600 come out, about half
    // from each, and none twice.
    let clean_rows = a.iter().filter(|(l, _)| *l == 0).count();
    assert!((200..=312).contains(&clean_rows), "{clean_rows} of 512 from clean");
    assert!(a.iter().all(|(l, _)| *l == 0 || *l == 1));
    let mut distinct = a.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 512, "no record twice");
}

/// `--set` names the mixed pipelines' parameters with their pipeline's name.
#[test]
fn mixture_params_nest() {
    let p = train::Params::from_args(&[
        ("clean.files".into(), "a/*".into()),
        ("noisy.files".into(), "b/*".into()),
        ("seed".into(), "3".into()),
    ])
    .unwrap();
    assert_eq!((p.seed, p.clean.files.as_str(), p.noisy.files.as_str()), (3, "a/*", "b/*"));
    // The mixed pipelines' parameters keep their defaults.
    let d = train::Params::from_args(&[]).unwrap();
    assert_eq!((d.seed, d.clean.files.as_str()), (7, "data/clean-*.tfrecord"));
    let err = train::Params::from_args(&[("clean.nope".into(), "1".into())]).unwrap_err();
    assert!(err.starts_with("clean.") && err.contains("unknown parameter `nope`"), "{err}");
    assert!(
        train::Params::from_args(&[("nope".into(), "1".into())]).unwrap_err().contains("unknown parameter")
    );
}

/// `range` (tests/pipes/range.pipe): tf.data's `Dataset.range` values, mapped, batched,
/// counting down; a resumed pass starts where it left off.
#[test]
fn range_yields_pythons_values() {
    use sluice_examples::corpus::{doubled, down, stepped};
    let values = |b: &stepped::Batch| b.value.as_slice().to_vec();
    let d: Vec<i64> = doubled::dataset(&doubled::Params { n: 10 })
        .unwrap()
        .stream()
        .unwrap()
        .map(|r| r.unwrap().value)
        .collect();
    assert_eq!(d, (0..10).map(|x| x * 2).collect::<Vec<i64>>());
    let s: Vec<Vec<i64>> = stepped::dataset(&stepped::Params { step: 3 })
        .unwrap()
        .stream()
        .unwrap()
        .map(|b| values(&b.unwrap()))
        .collect();
    assert_eq!(s, [vec![-5, -2, 1, 4], vec![7, 10, 13, 16], vec![19]]);
    let down: Vec<i64> =
        down::dataset(&down::Params {}).unwrap().stream().unwrap().map(|r| r.unwrap().value).collect();
    assert_eq!(down, [10, 6, 2]);
    // Resumed after the first batch: the state is positions only.
    let p = stepped::Params { step: 3 };
    let state = stepped::state(&p, 0, 1).unwrap();
    stepped::check_state(&p, &state).unwrap();
    let ctx = sluice::runtime::stage::Ctx::new(&Default::default());
    let rest: Vec<Vec<i64>> = stepped::dataset(&p)
        .unwrap()
        .stream_from(&ctx, state.position)
        .unwrap()
        .map(|b| values(&b.unwrap()))
        .collect();
    assert_eq!(rest, [vec![7, 10, 13, 16], vec![19]]);
    assert_eq!(
        stepped::Params::from_args(&[("step".into(), "0".into())]).unwrap_err(),
        "parameter `step` is 0: the `step` of `range` it sets must not be 0"
    );
}

/// `threads 2;` (tests/pipes/range.pipe's `budgeted`): the generated options carry the CPU
/// budget to the runtime, whose map workers stay within it.
#[test]
fn a_declared_thread_budget_bounds_the_map_workers() {
    use sluice_examples::corpus::budgeted;
    assert_eq!(budgeted::THREADS, Some(2));
    let options = budgeted::options();
    assert_eq!(options.cores, Some(2));
    let ds = budgeted::dataset(&budgeted::Params { n: 5000 }).unwrap();
    let ctx = sluice::runtime::stage::Ctx::new(&options);
    let values: Vec<i64> =
        ds.stream_in(&ctx).unwrap().flat_map(|b| b.unwrap().value.as_slice().to_vec()).collect();
    assert_eq!(values, (0..5000).map(|x| x * 3).collect::<Vec<i64>>());
    assert_eq!(ctx.threads().limit(), 2);
    assert!((1..=2).contains(&ctx.threads().peak()), "{} map workers at once", ctx.threads().peak());
}

/// `cycle: auto` (tests/pipes/auto_cycle.pipe): every record of every file, in the order
/// of a fixed cycle of min(cores, files); a saved position names the core count.
#[test]
fn an_auto_cycle_reads_every_record_in_a_fixed_cycles_order() {
    use sluice_examples::corpus::{auto_interleave, auto_tfrecords, fixed_cycle};
    let dir = tempfile::tempdir().unwrap();
    for (k, n) in [(0, 5), (1, 9), (2, 3)] {
        write(&dir.path().join(format!("part-{k}.tfrecord")), Compression::None, &tabular(k, n));
    }
    let files = format!("{}/*.tfrecord", dir.path().display());
    let got: Vec<(i64, f32)> = auto_tfrecords::dataset(&auto_tfrecords::Params { files: files.clone() })
        .unwrap()
        .stream()
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.label, r.x.as_slice()[0])
        })
        .collect();
    // The order of the same interleave with the cycle auto_cycle picks, given.
    let cycle = sluice::runtime::stage::available_cores().min(3) as u32;
    let expected: Vec<(i64, f32)> =
        fixed_cycle::dataset(&fixed_cycle::Params { files: files.clone(), cycle })
            .unwrap()
            .stream()
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                (r.label, r.x.as_slice()[0])
            })
            .collect();
    assert_eq!(got.len(), 17);
    assert_eq!(got, expected, "cycle {cycle}");
    let batches: usize = auto_interleave::dataset(&auto_interleave::Params { files: files.clone() })
        .unwrap()
        .stream()
        .unwrap()
        .map(|b| b.unwrap().label.as_slice().len())
        .sum();
    assert_eq!(batches, 17);
    let p = auto_tfrecords::Params { files };
    assert!(auto_tfrecords::check_state(&p, &auto_tfrecords::state(&p, 0, 4).unwrap()).is_ok());
}

/// `repeat` after a memory `cache()`, and `shuffle(reshuffle_each_epoch: false)` against
/// the default, through generated pipelines (tests/pipes/range.pipe).
#[test]
fn repeat_cache_and_reshuffling_through_pipe_files() {
    use sluice::runtime::stage::Ctx;
    use sluice_examples::corpus::{new_order, repeated, same_order};
    let r: Vec<i64> = repeated::dataset(&repeated::Params {})
        .unwrap()
        .stream()
        .unwrap()
        .map(|r| r.unwrap().value)
        .collect();
    assert_eq!(r, [0, 1, 2, 3, 4].repeat(3));
    let ctx = Ctx::new(&Default::default());
    let epoch = |ds: &dyn Fn(&Ctx) -> Vec<i64>, e: u64| ds(&ctx.with_epoch(e));
    let same = |c: &Ctx| -> Vec<i64> {
        same_order::dataset(&same_order::Params {})
            .unwrap()
            .stream_in(c)
            .unwrap()
            .map(|r| r.unwrap().value)
            .collect()
    };
    let new = |c: &Ctx| -> Vec<i64> {
        new_order::dataset(&new_order::Params {})
            .unwrap()
            .stream_in(c)
            .unwrap()
            .map(|r| r.unwrap().value)
            .collect()
    };
    let (s0, s1) = (epoch(&same, 0), epoch(&same, 1));
    assert_eq!(s0, s1, "reshuffle_each_epoch: false keeps the order");
    let mut sorted = s0.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<i64>>());
    assert_ne!(s0, sorted, "shuffled");
    let (n0, n1) = (epoch(&new, 0), epoch(&new, 1));
    assert_eq!(n0, s0, "the same seed gives the same first epoch");
    assert_ne!(n0, n1, "the default reshuffles each epoch");
}
