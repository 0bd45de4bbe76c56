//! `flat_map` through generated pipelines (`tests/pipes/flat_map.pipe`): the elements are
//! tf.data's for the same program, a pass resumed at any position (inside an element's
//! inner chain too) gives the rest of an uninterrupted one, and the inner chain's stages
//! (filter, map, take, batch) run per element.

use sluice::runtime::stage::{Ctx, Dataset};
use sluice_examples::flat_map::{per_element, ranges};

fn from<D: Dataset>(ds: &D, skip: u64) -> Vec<D::Item> {
    let ctx = Ctx::new(&Default::default());
    ds.stream_from(&ctx, skip).unwrap().map(|r| r.unwrap()).collect()
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
