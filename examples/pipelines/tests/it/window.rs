//! `window` end to end, through the pipelines `tests/pipes/window.pipe` compiles to: the
//! windows tf.data yields (`range(n).window(size, shift, stride, drop_remainder)`, each
//! window batched: the programs `scripts/interop/show_check.py` runs through
//! TensorFlow), resume from a saved state at every window boundary, and the same windows
//! on any thread count of the parallel map before it.

use sluice::runtime::stage::{Ctx, Dataset};
use sluice_examples::windows::{full_windows, mapped_windows, windows};

/// Every element of a pass of `ds` from position `skip`.
fn pass<D: Dataset>(ds: &D, skip: u64) -> Vec<D::Item> {
    let ctx = Ctx::new(&Default::default());
    ds.stream_from(&ctx, skip).unwrap().map(|x| x.unwrap()).collect()
}

/// tf.data's windows of `range(n)` by their definition: window `k` starts at `k ×
/// shift` while that element exists and holds `k × shift + j × stride < n`, `j < size`.
fn expected(n: i64, size: i64, shift: i64, stride: i64, drop: bool) -> Vec<Vec<i64>> {
    (0..)
        .map(|k| k * shift)
        .take_while(|&s| s < n)
        .map(|s| (0..size).map(|j| s + j * stride).filter(|&x| x < n).collect::<Vec<i64>>())
        .filter(|w| !drop || w.len() as i64 == size)
        .collect()
}

/// The combinations the tests and the interop program run: overlaps, batches, gaps,
/// strides, and windows longer than the input.
const CASES: [(i64, u32, u32, u32); 7] =
    [(10, 3, 1, 1), (10, 3, 3, 1), (10, 2, 4, 1), (10, 3, 2, 2), (11, 4, 5, 3), (3, 5, 1, 1), (0, 2, 1, 1)];

fn values(ds: &impl Dataset<Item = windows::Batch>, skip: u64) -> Vec<Vec<i64>> {
    pass(ds, skip).iter().map(|b| b.value.as_slice().to_vec()).collect()
}

#[test]
fn windows_are_tf_datas() {
    // tf.data: range(10).window(3, shift=1).flat_map(lambda w: w.batch(3)).
    let p = windows::Params::default();
    assert_eq!(
        values(&windows::dataset(&p).unwrap(), 0),
        [
            vec![0, 1, 2],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![3, 4, 5],
            vec![4, 5, 6],
            vec![5, 6, 7],
            vec![6, 7, 8],
            vec![7, 8, 9],
            vec![8, 9],
            vec![9]
        ]
    );
    for (n, size, shift, stride) in CASES {
        let p = windows::Params { n, size, shift, stride };
        let want = expected(n, size.into(), shift.into(), stride.into(), false);
        assert_eq!(values(&windows::dataset(&p).unwrap(), 0), want, "{p:?}");
        let p = full_windows::Params { n, size, shift, stride };
        let want = expected(n, size.into(), shift.into(), stride.into(), true);
        let got: Vec<Vec<i64>> = pass(&full_windows::dataset(&p).unwrap(), 0)
            .iter()
            .map(|b| b.value.as_slice().to_vec())
            .collect();
        assert_eq!(got, want, "{p:?}");
    }
}

#[test]
fn a_zero_parameter_is_refused_naming_it() {
    for (name, p) in [
        ("size", windows::Params { size: 0, ..Default::default() }),
        ("shift", windows::Params { shift: 0, ..Default::default() }),
        ("stride", windows::Params { stride: 0, ..Default::default() }),
    ] {
        let err = windows::dataset(&p).err().unwrap_or_else(|| panic!("{name} = 0 accepted")).to_string();
        assert!(err.contains(name) && err.contains("window"), "{name}: {err}");
    }
}

#[test]
fn resumes_from_a_saved_state_at_every_window_boundary() {
    // Overlaps (shift < size), batches, gaps (shift > size) and strides.
    for (n, size, shift, stride) in CASES {
        let p = windows::Params { n, size, shift, stride };
        let whole = values(&windows::dataset(&p).unwrap(), 0);
        for k in 0..=whole.len() as u64 + 1 {
            let state = windows::state(&p, 0, k).unwrap();
            windows::check_state(&p, &state).unwrap();
            let rest = values(&windows::dataset(&p).unwrap(), state.position);
            assert_eq!(rest, whole.get(k as usize..).unwrap_or_default(), "{p:?}, resumed at window {k}");
        }
    }
    // Another shift is another pipeline: its state is refused.
    let p = windows::Params::default();
    let state = windows::state(&p, 0, 3).unwrap();
    assert!(windows::check_state(&windows::Params { shift: 2, ..p }, &state).is_err());
}

#[test]
fn windows_after_a_parallel_map_are_the_same_on_any_thread_count() {
    // range(1000), tripled, windows of 4 every 3 elements, stride 2, plus 1 per column.
    let run = |threads: u32, skip: u64| -> Vec<(Vec<i64>, Vec<i64>)> {
        let p = mapped_windows::Params { threads };
        pass(&mapped_windows::dataset(&p).unwrap(), skip)
            .iter()
            .map(|b| (b.value.as_slice().to_vec(), b.tripled.as_slice().to_vec()))
            .collect()
    };
    let one = run(1, 0);
    let want: Vec<Vec<i64>> = expected(1000, 4, 3, 2, false);
    assert_eq!(one.len(), want.len());
    for ((value, tripled), w) in one.iter().zip(&want) {
        assert_eq!(value, w);
        assert_eq!(*tripled, w.iter().map(|v| 3 * v + 1).collect::<Vec<_>>());
    }
    for threads in [2, 4] {
        assert_eq!(run(threads, 0), one, "{threads} threads");
        assert_eq!(run(threads, 100), one[100..].to_vec(), "{threads} threads, resumed at window 100");
    }
}
