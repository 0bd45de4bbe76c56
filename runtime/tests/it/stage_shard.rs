//! `shard` with each `Remainder`: across all workers the shards partition a pass exactly
//! (keep), give every worker `floor(N / n)` elements (drop) or `ceil(N / n)` elements
//! (pad, repeating the first elements), for every length `N` including `N < n` and 0;
//! input errors surface in order.

use std::collections::BTreeMap;

use proptest::prelude::*;
use sluice_runtime::Error;
use sluice_runtime::stage::{Dataset, Element, Remainder, from_vec, range};

const MODES: [Remainder; 3] = [Remainder::Keep, Remainder::Drop, Remainder::Pad];

/// Worker `index`'s elements of `0..len` split `n` ways.
fn worker(len: u64, n: u64, index: u64, mode: Remainder) -> Vec<u64> {
    let d = range(0..len).shard_with(n, index, mode).unwrap();
    d.stream().unwrap().map(|r| r.unwrap()).collect()
}

/// How many times each element occurs in `xs`.
fn counts(xs: impl IntoIterator<Item = u64>) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for x in xs {
        *m.entry(x).or_insert(0) += 1;
    }
    m
}

/// The properties each remainder promises, for a pass of `len` elements over `n` workers.
fn check_partition(len: u64, n: u64, mode: Remainder) -> Result<(), TestCaseError> {
    let outs: Vec<Vec<u64>> = (0..n).map(|i| worker(len, n, i, mode)).collect();
    let sizes: Vec<usize> = outs.iter().map(Vec::len).collect();
    let all = counts(outs.iter().flatten().copied());
    let (floor, ceil) = (len / n, len.div_ceil(n));
    match mode {
        Remainder::Keep => {
            // Each element exactly once; counts differ by at most one.
            prop_assert_eq!(&all, &counts(0..len));
            let (lo, hi) = (sizes.iter().min().copied(), sizes.iter().max().copied());
            prop_assert!(hi.unwrap_or(0) - lo.unwrap_or(0) <= 1, "sizes {:?}", sizes);
        }
        Remainder::Drop => {
            // Exactly `floor` each: the first `n · floor` elements, each once.
            prop_assert!(sizes.iter().all(|&s| s as u64 == floor), "sizes {:?}", sizes);
            prop_assert_eq!(&all, &counts(0..n * floor));
        }
        Remainder::Pad => {
            // Exactly `ceil` each: every element at least once, and the extra copies are
            // the first `n · ceil - len` elements (cyclically when there are fewer).
            prop_assert!(sizes.iter().all(|&s| s as u64 == ceil), "sizes {:?}", sizes);
            let extra = (len..n * ceil).map(|p| p % len);
            prop_assert_eq!(&all, &counts((0..len).chain(extra)));
        }
    }
    // Each worker's order: its positions `index + n·r`, the padding last.
    for (i, out) in outs.iter().enumerate() {
        let rounds = if mode == Remainder::Drop {
            floor
        } else if mode == Remainder::Pad {
            ceil
        } else {
            0
        };
        let expected: Vec<u64> = match mode {
            Remainder::Keep => (i as u64..len).step_by(n as usize).collect(),
            _ => (0..rounds).map(|r| (i as u64 + n * r) % len.max(1)).collect(),
        };
        prop_assert_eq!(out, &expected, "worker {} of {}", i, n);
    }
    Ok(())
}

proptest! {
    #[test]
    fn shards_partition_exactly(len in 0u64..200, n in 1u64..9, mode in prop::sample::select(MODES.to_vec())) {
        check_partition(len, n, mode)?;
    }
}

#[test]
fn every_small_length_and_worker_count() {
    for len in 0..40 {
        for n in 1..9 {
            for mode in MODES {
                check_partition(len, n, mode).unwrap_or_else(|e| panic!("len {len}, n {n}, {mode}: {e}"));
            }
        }
    }
}

#[test]
fn pad_and_drop_by_example() {
    // 10 elements, 4 workers: rounds [0 1 2 3] [4 5 6 7] [8 9 _ _].
    let by = |mode| (0..4).map(|i| worker(10, 4, i, mode)).collect::<Vec<_>>();
    assert_eq!(by(Remainder::Keep), [vec![0, 4, 8], vec![1, 5, 9], vec![2, 6], vec![3, 7]]);
    assert_eq!(by(Remainder::Drop), [vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
    assert_eq!(by(Remainder::Pad), [vec![0, 4, 8], vec![1, 5, 9], vec![2, 6, 0], vec![3, 7, 1]]);
    // Fewer elements than workers: padding cycles through them.
    let pad: Vec<Vec<u64>> = (0..5).map(|i| worker(2, 5, i, Remainder::Pad)).collect();
    assert_eq!(pad, [vec![0], vec![1], vec![0], vec![1], vec![0]]);
    assert!((0..5).all(|i| worker(2, 5, i, Remainder::Drop).is_empty()));
    assert!((0..3).all(|i| worker(0, 3, i, Remainder::Pad).is_empty()));
}

#[test]
fn every_pass_starts_afresh() {
    let d = range(0..7).shard_with(3, 2, Remainder::Pad).unwrap();
    for _ in 0..2 {
        let got: Vec<u64> = d.stream().unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(got, [2, 5, 1]);
    }
}

#[test]
fn padding_moves_elements_so_they_need_not_be_clone() {
    #[derive(Debug, PartialEq)]
    struct Token(u8);
    impl Element for Token {}
    let d = from_vec((0..5).collect::<Vec<u8>>()).map(Token).shard_with(3, 2, Remainder::Pad).unwrap();
    let got: Vec<Token> = d.stream().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(got, [Token(2), Token(0)]);
}

#[test]
fn input_errors_surface_in_order() {
    // Element 5 fails: the elements before it that the worker has delivered, then the
    // error, whatever the remainder.
    let cases: [(u64, Remainder, &[u64]); 5] = [
        (1, Remainder::Keep, &[1, 4]),
        // Drop delivers 3 only when its round [3 4 5] completes, which it does not.
        (0, Remainder::Drop, &[0]),
        (2, Remainder::Drop, &[2]),
        (2, Remainder::Pad, &[2]),
        (1, Remainder::Pad, &[1, 4]),
    ];
    for (index, mode, before) in cases {
        let d = range(0..10)
            .try_map(|x| if x == 5 { Err(format!("bad element {x}")) } else { Ok(x) })
            .named("decode")
            .shard_with(3, index, mode)
            .unwrap();
        let mut got = Vec::new();
        let mut err = None;
        for r in d.stream().unwrap() {
            match r {
                Ok(x) => got.push(x),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        assert_eq!(got, before, "worker {index}, {mode}");
        let err = err.unwrap_or_else(|| panic!("worker {index}, {mode}: no error"));
        assert!(matches!(&err, Error::Stage { stage, .. } if stage == "decode"), "{err}");
    }
    // An error among the elements a padding worker keeps back surfaces too.
    let d = range(0..4).try_map(|x| if x == 0 { Err("first".to_string()) } else { Ok(x) });
    let mut s = d.shard_with(3, 2, Remainder::Pad).unwrap().stream().unwrap();
    assert!(matches!(s.next(), Some(Err(Error::Stage { .. }))));
}

#[test]
fn out_of_range_index_is_invalid() {
    for mode in MODES {
        assert!(matches!(range(0..3).shard_with(2, 2, mode), Err(Error::Invalid(_))));
        assert!(matches!(range(0..3).shard_with(0, 0, mode), Err(Error::Invalid(_))));
    }
}
