//! `interleave`: exact element order against a reference model of tf.data's loop, the
//! same order on worker threads, sloppy mode, TFRecord files with every corruption
//! policy, errors in order, panics, statistics, and prompt shutdown on drop.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use sluice_runtime::Error;
use sluice_runtime::stage::{Dataset, Files, Parallelism, Record, from_vec, range, tfrecords};
use sluice_runtime::tfrecord::{self, Compression, CorruptPolicy, ReaderOptions};

/// tf.data's interleave, written as one visit of the cursor per step: a visit takes up to
/// `block` elements from the slot's dataset (opening the next input there first if the
/// slot is empty); a dataset found exhausted leaves its slot, which is refilled on the
/// cursor's next visit.
fn reference(inners: &[Vec<u64>], cycle: usize, block: usize) -> Vec<u64> {
    let mut inputs = inners.iter();
    let mut slots: Vec<Option<std::slice::Iter<'_, u64>>> = vec![None; cycle];
    let mut end_of_input = false;
    let mut cursor = 0;
    let mut out = Vec::new();
    while !end_of_input || slots.iter().any(Option::is_some) {
        let slot = &mut slots[cursor];
        if slot.is_none() && !end_of_input {
            match inputs.next() {
                Some(v) => *slot = Some(v.iter()),
                None => {
                    end_of_input = true;
                    continue;
                }
            }
        }
        if let Some(it) = slot {
            for _ in 0..block {
                match it.next() {
                    Some(&x) => out.push(x),
                    None => {
                        *slot = None;
                        break;
                    }
                }
            }
        }
        cursor = (cursor + 1) % cycle;
    }
    out
}

/// Inner dataset `i` holds `i * 1000 + j` for `j < lens[i]`, so every element is unique.
fn inners(lens: &[usize]) -> Vec<Vec<u64>> {
    lens.iter().enumerate().map(|(i, &n)| (0..n as u64).map(|j| i as u64 * 1000 + j).collect()).collect()
}

/// Runs an interleave over `inners` (inputs `0..len`, each mapped to its vector).
fn run(inners: &[Vec<u64>], cycle: usize, block: usize, threads: usize, det: bool, buf: usize) -> Vec<u64> {
    let data = Arc::new(inners.to_vec());
    range(0..inners.len() as u64)
        .interleave(move |i: u64| from_vec(data[i as usize].clone()), cycle, block)
        .num_parallel(threads)
        .deterministic(det)
        .buffer_per_slot(buf)
        .stream()
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

#[test]
fn reference_model_matches_tf_data_examples() {
    // tf.data docs: range(1, 6).interleave(lambda x: repeat(x, 6), cycle_length=2, block_length=4).
    let inner: Vec<Vec<u64>> = (1..6).map(|x| vec![x; 6]).collect();
    let expected = [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5];
    assert_eq!(reference(&inner, 2, 4), expected);
    assert_eq!(run(&inner, 2, 4, 1, true, 8), expected);
    // An exhausted slot is refilled on the cursor's next visit, not at once.
    let inner = vec![vec![1], vec![2, 5], vec![3]];
    assert_eq!(reference(&inner, 2, 1), [1, 2, 5, 3]);
    assert_eq!(run(&inner, 2, 1, 1, true, 8), [1, 2, 5, 3]);
    assert_eq!(run(&inner, 2, 1, 3, true, 1), [1, 2, 5, 3]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn order_is_tf_data_for_any_thread_count(
        cycle in 1usize..6,
        block in 1usize..5,
        lens in proptest::collection::vec(0usize..7, 0..14),
        threads in 2usize..5,
        buf in 1usize..4,
    ) {
        let data = inners(&lens);
        let expected = reference(&data, cycle, block);
        prop_assert_eq!(&run(&data, cycle, block, 1, true, 8), &expected);
        prop_assert_eq!(&run(&data, cycle, block, threads, true, buf), &expected);
        prop_assert_eq!(sorted(run(&data, cycle, block, threads, false, buf)), sorted(expected));
    }
}

#[test]
fn parallel_deterministic_equals_sequential() {
    let lens: Vec<usize> = (0..40).map(|i| (i * 7) % 23).collect();
    let data = inners(&lens);
    for (cycle, block) in [(1, 1), (3, 2), (4, 1), (8, 3), (16, 5)] {
        let seq = run(&data, cycle, block, 1, true, 8);
        assert_eq!(seq, reference(&data, cycle, block));
        for threads in [2, 3, 8] {
            for buf in [1, 2, 8] {
                assert_eq!(
                    run(&data, cycle, block, threads, true, buf),
                    seq,
                    "{cycle} {block} {threads} {buf}"
                );
            }
        }
    }
    let auto = Arc::new(data.clone());
    let got: Vec<u64> = range(0..data.len() as u64)
        .interleave(move |i: u64| from_vec(auto[i as usize].clone()), 4, 2)
        .num_parallel(Parallelism::Auto)
        .stream()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got, reference(&data, 4, 2));
}

#[test]
fn sloppy_mode_delivers_the_same_multiset() {
    let lens: Vec<usize> = (0..30).map(|i| (i * 5) % 17).collect();
    let data = inners(&lens);
    for (cycle, block) in [(2, 1), (5, 3), (12, 2)] {
        let expected = sorted(reference(&data, cycle, block));
        for threads in [2, 3, 8] {
            assert_eq!(sorted(run(&data, cycle, block, threads, false, 2)), expected);
        }
    }
}

#[test]
fn invalid_arguments_are_errors_at_iter() {
    let open = |i: u64| range(0..i);
    let cases = [
        range(0..3).interleave(open, 0, 1).stream().map(|_| ()),
        range(0..3).interleave(open, 1, 0).stream().map(|_| ()),
        range(0..3).interleave(open, 1 << 20, 1).stream().map(|_| ()),
        range(0..3).interleave(open, 2, 1).num_parallel(0).stream().map(|_| ()),
        range(0..3).interleave(open, 2, 1).num_parallel(2).buffer_per_slot(0).stream().map(|_| ()),
    ];
    for r in cases {
        assert!(matches!(r, Err(Error::Invalid(_))), "{r:?}");
    }
}

#[test]
fn inner_errors_arrive_in_order_and_end_the_stream() {
    let lens = [5usize, 4, 6, 3, 5, 2];
    let data = inners(&lens);
    let bad = 2003; // The fourth element of input 2.
    let expected = reference(&data, 3, 2);
    let cut = expected.iter().position(|&x| x == bad).unwrap();
    for threads in [1, 2, 3, 8] {
        let shared = Arc::new(data.clone());
        let mut s = range(0..lens.len() as u64)
            .interleave(
                move |i: u64| {
                    from_vec(shared[i as usize].clone())
                        .try_map(move |x| if x == bad { Err(format!("bad element {x}")) } else { Ok(x) })
                },
                3,
                2,
            )
            .num_parallel(threads)
            .stream()
            .unwrap();
        let got: Vec<u64> = s.by_ref().map_while(Result::ok).collect();
        assert_eq!(got, expected[..cut], "threads {threads}");
        assert!(s.next().is_none(), "the stream ends after the error");
    }
    // The error itself is the inner stage's.
    let e = range(0..3)
        .interleave(|i: u64| range(0..3).try_map(move |x| if i == 1 { Err("no") } else { Ok(x) }), 2, 1)
        .num_parallel(2)
        .stream()
        .unwrap()
        .find_map(Result::err)
        .unwrap();
    assert!(matches!(&e, Error::Stage { stage, .. } if stage == "map"), "{e}");
}

#[test]
fn input_errors_arrive_where_the_sequential_loop_meets_them() {
    let make = |threads: usize| {
        range(0..10)
            .try_map(|i| if i == 4 { Err(format!("bad input {i}")) } else { Ok(i) })
            .interleave(|i: u64| range(i * 100..i * 100 + i % 3 + 1), 3, 2)
            .num_parallel(threads)
            .stream()
            .unwrap()
            .collect::<Vec<_>>()
    };
    let seq = make(1);
    assert!(matches!(seq.last(), Some(Err(Error::Stage { .. }))), "{seq:?}");
    let ok = |v: &[Result<u64, Error>]| v.iter().filter_map(|r| r.as_ref().ok().copied()).collect::<Vec<_>>();
    for threads in [2, 3, 8] {
        let par = make(threads);
        assert_eq!(ok(&par), ok(&seq), "threads {threads}");
        assert!(matches!(par.last(), Some(Err(Error::Stage { .. }))));
    }
}

#[test]
fn a_panicking_open_function_is_an_error_naming_the_stage() {
    for threads in [1, 3] {
        let r: Result<Vec<u64>, Error> = range(0..5)
            .interleave(
                |i: u64| {
                    assert!(i != 3, "cannot open input {i}");
                    range(0..2)
                },
                2,
                1,
            )
            .num_parallel(threads)
            .named("read_shards")
            .stream()
            .unwrap()
            .collect();
        match r {
            Err(Error::Panic { stage, message }) => {
                assert_eq!(stage, "read_shards");
                assert!(message.contains("cannot open input 3"), "{message}");
            }
            other => panic!("expected a panic error, got {other:?}"),
        }
    }
}

#[test]
fn statistics_count_the_stage_not_the_inner_datasets() {
    for threads in [1, 4] {
        let s = range(0..6).interleave(|i: u64| range(0..i).map(|x| x * 2), 3, 1).num_parallel(threads);
        let mut stream = s.stream().unwrap();
        let n = stream.by_ref().map(Result::unwrap).count();
        assert_eq!(n, 15);
        let report = stream.report();
        assert_eq!(report.stages.len(), 1, "{report}");
        let st = &report.stages[0];
        assert_eq!((st.name.as_str(), st.elements, st.parallelism), ("interleave", 15, threads));
        if threads > 1 {
            assert!(st.queue_capacity > 0 && st.mean_queue_fill.is_some());
        }
    }
}

#[test]
fn dropping_mid_stream_joins_the_workers() {
    let probe = Arc::new(());
    let p = probe.clone();
    let ds = range(0..64)
        .interleave(
            move |i: u64| {
                let p = p.clone();
                range(i * 1000..i * 1000 + 500).map(move |x| {
                    let _held = &p;
                    x
                })
            },
            4,
            2,
        )
        .num_parallel(4);
    let baseline = Arc::strong_count(&probe);
    for take in [0usize, 1, 37] {
        let mut s = ds.stream().unwrap();
        for _ in 0..take {
            s.next().unwrap().unwrap();
        }
        if take > 0 {
            assert!(Arc::strong_count(&probe) > baseline);
        }
        drop(s);
        assert_eq!(Arc::strong_count(&probe), baseline, "after taking {take}");
    }
    // A finished stream has released everything even before it is dropped.
    let mut s = ds.stream().unwrap();
    assert_eq!(s.by_ref().map(Result::unwrap).count(), 64 * 500);
    assert_eq!(Arc::strong_count(&probe), baseline);
}

#[test]
fn every_epoch_is_a_fresh_pass_and_nesting_works() {
    let lens = [3usize, 0, 5, 2, 4];
    let data = inners(&lens);
    let expected = reference(&data, 2, 2);
    for threads in [1, 3] {
        let shared = Arc::new(data.clone());
        let got: Vec<u64> = range(0..lens.len() as u64)
            .interleave(move |i: u64| from_vec(shared[i as usize].clone()), 2, 2)
            .num_parallel(threads)
            .repeat(Some(3))
            .stream()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got, expected.repeat(3), "threads {threads}");
    }
    // An interleave of parallel interleaves, itself parallel: each inner element i*10+j
    // comes from a dataset opened per (i, j).
    let nested: Vec<u64> = range(0..4)
        .interleave(
            |i: u64| {
                range(0..3)
                    .interleave(move |j: u64| range(0..2).map(move |k| i * 100 + j * 10 + k), 2, 1)
                    .num_parallel(2)
            },
            3,
            1,
        )
        .num_parallel(3)
        .stream()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let inner = |i: u64| {
        reference(&(0..3).map(|j| vec![i * 100 + j * 10, i * 100 + j * 10 + 1]).collect::<Vec<_>>(), 2, 1)
    };
    assert_eq!(nested, reference(&(0..4).map(inner).collect::<Vec<_>>(), 3, 1));
}

// ---- TFRecord files ----

fn record(file: usize, i: usize) -> Vec<u8> {
    format!("file{file:02}-record{i:04}").into_bytes()
}

/// Writes `counts[f]` records to file `f` (all of one size); returns the paths.
fn write_files(dir: &Path, counts: &[usize]) -> Vec<PathBuf> {
    counts
        .iter()
        .enumerate()
        .map(|(f, &n)| {
            let path = dir.join(format!("part-{f:02}.tfrecord"));
            let mut w = tfrecord::create(&path, Compression::None).unwrap();
            for i in 0..n {
                w.write_record(&record(f, i)).unwrap();
            }
            w.finish().unwrap();
            path
        })
        .collect()
}

/// Bytes of one framed record: header, payload and footer.
fn framed() -> usize {
    tfrecord::HEADER_LEN + record(0, 0).len() + tfrecord::FOOTER_LEN
}

/// Flips a payload byte of record `i` of the file at `path`.
fn corrupt(path: &Path, i: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[i * framed() + tfrecord::HEADER_LEN + 5] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

/// The records in tf.data's order when file `f` yields the records numbered `ids[f]`.
fn expected_records(ids: &[Vec<usize>], cycle: usize) -> Vec<Vec<u8>> {
    let keys: Vec<Vec<u64>> =
        ids.iter().enumerate().map(|(f, v)| v.iter().map(|&i| (f * 1000 + i) as u64).collect()).collect();
    reference(&keys, cycle, 1).into_iter().map(|k| record(k as usize / 1000, k as usize % 1000)).collect()
}

/// Record numbers `0..n` of each file.
fn all_ids(counts: &[usize]) -> Vec<Vec<usize>> {
    counts.iter().map(|&n| (0..n).collect()).collect()
}

fn opts(policy: CorruptPolicy) -> ReaderOptions {
    ReaderOptions { on_corrupt: policy, buffer_size: 64, ..ReaderOptions::default() }
}

#[test]
fn tfrecords_reads_every_record_exactly_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let counts = [7, 0, 12, 3, 9, 1, 5];
    let paths = write_files(dir.path(), &counts);
    for cycle in [1, 3, 8] {
        let expected = expected_records(&all_ids(&counts), cycle);
        for threads in [1, 2, 3, 8] {
            let mut s = tfrecords(Files::from_paths(paths.clone()), opts(CorruptPolicy::Fail), cycle)
                .num_parallel(threads)
                .stream()
                .unwrap();
            let got: Vec<Record> = s.by_ref().collect::<Result<_, _>>().unwrap();
            assert_eq!(got, expected, "cycle {cycle}, threads {threads}");
            assert_eq!(s.reader_stats().records, 37);
        }
        let mut sloppy: Vec<Record> =
            tfrecords(Files::from_paths(paths.clone()), opts(CorruptPolicy::Fail), cycle)
                .num_parallel(3)
                .deterministic(false)
                .stream()
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
        sloppy.sort();
        let mut all = expected;
        all.sort();
        assert_eq!(sloppy, all);
    }
}

#[test]
fn corrupt_record_policies_work_through_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let counts = [6, 5, 7, 4];
    let paths = write_files(dir.path(), &counts);
    corrupt(&paths[2], 2);
    let expected = expected_records(&all_ids(&counts), 3);
    let bad = record(2, 2);
    // A skipped record, or the skipped rest of a file, shortens that file: the cycle
    // moves on earlier, so the order is that of the shorter file.
    let mut ids = all_ids(&counts);
    ids[2].remove(2);
    let after_skip = expected_records(&ids, 3);
    ids[2].truncate(2);
    let after_skip_file = expected_records(&ids, 3);
    for threads in [1, 2, 8] {
        let read = |policy| {
            let mut s = tfrecords(Files::from_paths(paths.clone()), opts(policy), 3)
                .num_parallel(threads)
                .stream()
                .unwrap();
            let items: Vec<_> = s.by_ref().collect();
            (items, s.reader_stats())
        };

        // fail: everything before the bad record in order, then an error naming it.
        let (items, _) = read(CorruptPolicy::Fail);
        let cut = expected.iter().position(|r| *r == bad).unwrap();
        let (ok, err): (Vec<_>, Vec<_>) = items.into_iter().partition(Result::is_ok);
        let ok: Vec<Record> = ok.into_iter().map(Result::unwrap).collect();
        assert_eq!(ok, expected[..cut], "threads {threads}");
        assert_eq!(err.len(), 1);
        let e = err.into_iter().next().unwrap().unwrap_err();
        match &e {
            Error::Corrupt { path, record, offset, .. } => {
                assert_eq!((path, *record, *offset), (&paths[2], 2, 2 * framed() as u64));
            }
            other => panic!("expected a corrupt-record error, got {other}"),
        }
        let text = e.to_string();
        let at = format!("corrupt record 2 at byte offset {}", 2 * framed());
        assert!(text.contains("part-02.tfrecord") && text.contains(&at), "{text}");

        // skip: every other record, the bad one counted.
        let (items, stats) = read(CorruptPolicy::Skip);
        let got: Vec<Record> = items.into_iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(got, after_skip, "threads {threads}");
        assert_eq!((stats.records, stats.skipped_records), (21, 1));
        assert_eq!((&stats.events[0].path, stats.events[0].record), (&paths[2], 2));

        // skip_file: the rest of file 2 is skipped, the other files complete.
        let (items, stats) = read(CorruptPolicy::SkipFile);
        let got: Vec<Record> = items.into_iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(got, after_skip_file, "threads {threads}");
        assert_eq!(stats.skipped_records, 1);
        assert!(stats.events[0].rest_of_file);
    }
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = write_files(dir.path(), &[3, 3]);
    let missing = dir.path().join("part-99.tfrecord");
    paths.insert(1, missing.clone());
    for threads in [1, 2, 8] {
        let items: Vec<_> = tfrecords(Files::from_paths(paths.clone()), opts(CorruptPolicy::Fail), 2)
            .num_parallel(threads)
            .stream()
            .unwrap()
            .collect();
        // Slot 0 yields file 0's first record, then slot 1 opens the missing file.
        assert_eq!(items.len(), 2, "threads {threads}");
        assert_eq!(items[0].as_ref().unwrap(), &record(0, 0));
        match &items[1] {
            Err(e @ Error::Io { path, .. }) => {
                assert_eq!(path, &missing);
                assert!(e.to_string().contains("part-99.tfrecord"), "{e}");
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }
}

/// tf.data's AUTOTUNE cycle: the cores, at most the input's elements, at least 1.
#[test]
fn an_auto_cycle_is_the_cores_at_most_the_files() {
    use sluice_runtime::stage::{auto_cycle, available_cores};
    let cores = available_cores();
    assert_eq!(auto_cycle(&from_vec(vec![PathBuf::from("a"); 3])).unwrap(), cores.min(3));
    assert_eq!(auto_cycle(&from_vec(vec![PathBuf::from("a"); 1000])).unwrap(), cores.min(1000));
    assert_eq!(auto_cycle(&from_vec(Vec::<PathBuf>::new())).unwrap(), 1, "no files: a cycle of 1");
}

/// A cycle far wider than the input and more threads than any machine runs (`cycle:
/// 65536, parallel: 65536` over 4 files) reads the 4 inputs in tf.data's order on at most
/// `THREADS_PER_CORE` threads per core, allocating for the inputs opened, not for the
/// cycle (it aborted after about 1 GB: "failed to set up alternative stack guard page").
#[test]
fn a_cycle_and_thread_count_beyond_the_input_start_what_can_run() {
    let cycle = sluice_runtime::defaults::MAX_CYCLE_LENGTH;
    let inners: Vec<Vec<u64>> = (0..4u64).map(|i| (0..i + 2).map(|x| x * 10 + i).collect()).collect();
    let s = range(0..4)
        .interleave(|i: u64| range(0..i + 2).map(move |x| x * 10 + i), cycle, 1)
        .num_parallel(cycle)
        .deterministic(true);
    let mut stream = s.stream().unwrap();
    let got: Vec<u64> = stream.by_ref().map(Result::unwrap).collect();
    assert_eq!(got, reference(&inners, cycle, 1));
    let most = sluice_runtime::stage::available_cores() * sluice_runtime::defaults::THREADS_PER_CORE;
    let report = stream.report();
    assert!((2..=most).contains(&report.stages[0].parallelism), "{report}");
}
