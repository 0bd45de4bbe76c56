//! The combining stages end to end, through the pipelines `tests/pipes/combine.pipe`
//! compiles to: `zip`, `concatenate`, `enumerate` and `take_while` yield tf.data's
//! sequences (the same programs `scripts/interop/show_check.py` runs through TensorFlow),
//! resume mid-pass from a saved state, and give the same elements on any thread count.

use sluice::runtime::stage::{Ctx, Dataset};
use sluice_examples::combine::{
    evens, joined, joined_three, numbered, numbered_batches, while_small, zipped, zipped_batches,
    zipped_unseeded, zipped_while,
};

/// Every element of a pass of `ds` from position `skip`.
fn pass<D: Dataset>(ds: &D, skip: u64) -> Vec<D::Item> {
    let ctx = Ctx::new(&Default::default());
    ds.stream_from(&ctx, skip).unwrap().map(|x| x.unwrap()).collect()
}

#[test]
fn zip_merges_fields_and_ends_with_the_shortest_input() {
    // tf.data: zip((range(10).map(x * 2), range(3, 20))) -> (0, 3), (2, 4), ..., (18, 12).
    let p = zipped::Params::default();
    let got: Vec<(i64, i64)> =
        pass(&zipped::dataset(&p).unwrap(), 0).iter().map(|r| (r.twice, r.value)).collect();
    assert_eq!(got, (0..10).map(|i| (2 * i, i + 3)).collect::<Vec<_>>());
    // The shorter input now the other one: range(3, 20) has 17 elements.
    let p = zipped::Params { evens: evens::Params { n: 40, threads: 1 }, ..Default::default() };
    assert_eq!(pass(&zipped::dataset(&p).unwrap(), 0).len(), 17);
    // `--set evens.n=4` reaches the input's parameters.
    let p = zipped::Params::from_args(&[("evens.n".into(), "4".into())]).unwrap();
    assert_eq!(pass(&zipped::dataset(&p).unwrap(), 0).len(), 4);
}

#[test]
fn zip_resumes_mid_pass_from_a_saved_state() {
    let p = zipped::Params::default();
    let whole: Vec<(i64, i64)> =
        pass(&zipped::dataset(&p).unwrap(), 0).iter().map(|r| (r.twice, r.value)).collect();
    for k in [0, 1, 4, 9, 10, 12] {
        let state = zipped::state(&p, 0, k).unwrap();
        zipped::check_state(&p, &state).unwrap();
        let rest: Vec<(i64, i64)> =
            pass(&zipped::dataset(&p).unwrap(), state.position).iter().map(|r| (r.twice, r.value)).collect();
        assert_eq!(rest, whole.iter().skip(k as usize).copied().collect::<Vec<_>>(), "resumed at {k}");
    }
    // Other input parameters are another fingerprint: a state is refused.
    let state = zipped::state(&p, 0, 3).unwrap();
    let other = zipped::Params { evens: evens::Params { n: 11, threads: 1 }, ..Default::default() };
    assert!(zipped::check_state(&other, &state).is_err());
    // Batches of a zip resume by whole batches.
    let p = zipped_batches::Params::default();
    let sums = |b: &zipped_batches::Batch| b.sum.as_slice().to_vec();
    let whole: Vec<Vec<i64>> = pass(&zipped_batches::dataset(&p).unwrap(), 0).iter().map(sums).collect();
    assert_eq!(whole, [vec![3, 6, 9, 12], vec![15, 18, 21, 24], vec![27, 30]]);
    let rest: Vec<Vec<i64>> = pass(&zipped_batches::dataset(&p).unwrap(), 2).iter().map(sums).collect();
    assert_eq!(rest, [vec![27, 30]]);
}

#[test]
fn a_zip_of_an_input_that_cannot_resume_cannot_either() {
    assert_eq!(zipped::RESUME_BLOCKER, None);
    let why = zipped_unseeded::RESUME_BLOCKER.unwrap();
    assert!(why.contains("`shuffle` without a seed"), "{why}");
    let err = zipped_unseeded::state(&zipped_unseeded::Params::default(), 0, 3).unwrap_err();
    assert!(err.to_string().contains("cannot be resumed exactly"), "{err}");
}

#[test]
fn zip_is_the_same_on_any_thread_count() {
    let run = |threads: u32| -> Vec<(i64, i64)> {
        let p = zipped::Params { evens: evens::Params { n: 500, threads }, ..Default::default() };
        pass(&zipped::dataset(&p).unwrap(), 0).iter().map(|r| (r.twice, r.value)).collect()
    };
    let one = run(1);
    assert_eq!(one.len(), 17);
    for threads in [2, 4] {
        assert_eq!(run(threads), one, "{threads} threads");
    }
}

#[test]
fn concatenate_yields_each_input_in_turn_and_resumes_across_the_boundary() {
    // tf.data: range(3).concatenate(range(10, 14)).
    let p = joined::Params::default();
    let values =
        |ds: &_, skip| -> Vec<i64> { pass(ds, skip).iter().map(|r: &joined::Record| r.value).collect() };
    let ds = joined::dataset(&p).unwrap();
    assert_eq!(values(&ds, 0), [0, 1, 2, 10, 11, 12, 13]);
    for k in 0..=8u64 {
        let state = joined::state(&p, 0, k).unwrap();
        let want: Vec<i64> = [0, 1, 2, 10, 11, 12, 13].into_iter().skip(k as usize).collect();
        assert_eq!(values(&joined::dataset(&p).unwrap(), state.position), want, "resumed at {k}");
    }
    let p = joined_three::Params::default();
    let got: Vec<i64> = pass(&joined_three::dataset(&p).unwrap(), 0).iter().map(|r| r.value).collect();
    assert_eq!(got, [0, 1, 2, 10, 11, 12, 13, 0, 1, 2]);
    let got: Vec<i64> = pass(&joined_three::dataset(&p).unwrap(), 6).iter().map(|r| r.value).collect();
    assert_eq!(got, [13, 0, 1, 2]);
}

#[test]
fn enumerate_numbers_positions_from_start_and_resumes() {
    // tf.data: range(5, 10).enumerate(start=100).
    let p = numbered::Params { start: 100 };
    let got: Vec<(i64, i64)> =
        pass(&numbered::dataset(&p).unwrap(), 0).iter().map(|r| (r.index, r.value)).collect();
    assert_eq!(got, [(100, 5), (101, 6), (102, 7), (103, 8), (104, 9)]);
    let got: Vec<(i64, i64)> =
        pass(&numbered::dataset(&p).unwrap(), 3).iter().map(|r| (r.index, r.value)).collect();
    assert_eq!(got, [(103, 8), (104, 9)]);
    let p = numbered::Params { start: -2 };
    let got: Vec<i64> = pass(&numbered::dataset(&p).unwrap(), 0).iter().map(|r| r.index).collect();
    assert_eq!(got, [-2, -1, 0, 1, 2]);
}

#[test]
fn enumerate_after_a_parallel_map_is_the_same_on_any_thread_count() {
    let run = |threads: u32, skip: u64| -> Vec<(Vec<i64>, Vec<i64>)> {
        let p = numbered_batches::Params { threads };
        pass(&numbered_batches::dataset(&p).unwrap(), skip)
            .iter()
            .map(|b| (b.index.as_slice().to_vec(), b.value.as_slice().to_vec()))
            .collect()
    };
    let one = run(1, 0);
    assert_eq!(one.len(), 10);
    for (k, (index, value)) in one.iter().enumerate() {
        let k = k as i64;
        assert_eq!(*index, (100 * k..100 * k + 100).collect::<Vec<_>>());
        assert_eq!(*value, (100 * k..100 * k + 100).map(|i| 3 * i).collect::<Vec<_>>());
    }
    for threads in [2, 4] {
        assert_eq!(run(threads, 0), one, "{threads} threads");
        assert_eq!(run(threads, 7), one[7..].to_vec(), "{threads} threads, resumed at batch 7");
    }
}

#[test]
fn take_while_ends_the_pass_at_the_first_failure_and_resumes() {
    // tf.data: range(20).take_while(x < 7).
    let p = while_small::Params { limit: 7 };
    let got: Vec<i64> = pass(&while_small::dataset(&p).unwrap(), 0).iter().map(|r| r.value).collect();
    assert_eq!(got, (0..7).collect::<Vec<_>>());
    let got: Vec<i64> = pass(&while_small::dataset(&p).unwrap(), 5).iter().map(|r| r.value).collect();
    assert_eq!(got, [5, 6]);
    assert!(pass(&while_small::dataset(&p).unwrap(), 9).is_empty());
    // Over a zip's fields, numbered from 1: twice + value = 3i + 3 < 20 for i < 6.
    let p = zipped_while::Params::default();
    let got: Vec<(i64, i64, i64)> =
        pass(&zipped_while::dataset(&p).unwrap(), 0).iter().map(|r| (r.index, r.twice, r.value)).collect();
    assert_eq!(got, (0..6).map(|i| (i + 1, 2 * i, i + 3)).collect::<Vec<_>>());
    let got: Vec<i64> = pass(&zipped_while::dataset(&p).unwrap(), 4).iter().map(|r| r.index).collect();
    assert_eq!(got, [5, 6]);
}
