//! The sequential stages and sources: exact element sequences on data made in the test.

use std::collections::BTreeSet;

use sluice_runtime::Error;
use sluice_runtime::stage::{Dataset, Files, from_vec, range, sample_from, tfrecord_file, tfrecords};
use sluice_runtime::tfrecord::{self, Compression, CorruptPolicy, ReaderOptions};

fn collect<D: Dataset>(d: &D) -> Vec<D::Item> {
    d.stream().unwrap().map(|r| r.unwrap()).collect()
}

/// The elements before the first error, and the error.
fn until_error<D: Dataset>(d: &D) -> (Vec<D::Item>, Option<Error>) {
    let mut out = Vec::new();
    for r in d.stream().unwrap() {
        match r {
            Ok(x) => out.push(x),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

#[test]
fn sources() {
    assert_eq!(collect(&range(3..7)), [3, 4, 5, 6]);
    assert_eq!(collect(&range(5..5)), Vec::<u64>::new());
    assert_eq!(collect(&from_vec(vec!["a".to_string(), "b".to_string()])), ["a", "b"]);
}

#[test]
fn map_filter_take_skip_shard() {
    let d = range(0..20).map(|x| x * 10).filter(|x| x % 20 == 0).skip(2).take(5);
    assert_eq!(collect(&d), [40, 60, 80, 100, 120]);
    assert_eq!(collect(&range(0..10).shard(3, 1).unwrap()), [1, 4, 7]);
    assert_eq!(collect(&range(0..10).take(0)), Vec::<u64>::new());
    assert_eq!(collect(&range(0..3).skip(10)), Vec::<u64>::new());
    assert!(matches!(range(0..3).shard(2, 2), Err(Error::Invalid(_))));
    assert!(matches!(range(0..3).shard(0, 0), Err(Error::Invalid(_))));
    // Shards partition the input exactly.
    let all: BTreeSet<u64> = (0..4).flat_map(|i| collect(&range(0..103).shard(4, i).unwrap())).collect();
    assert_eq!(all, (0..103).collect());
}

#[test]
fn user_errors_and_panics_name_the_stage() {
    let d = range(0..10)
        .try_map(|x| if x == 4 { Err(format!("bad element {x}")) } else { Ok(x) })
        .named("decode");
    let (got, err) = until_error(&d);
    assert_eq!(got, [0, 1, 2, 3]);
    let err = err.unwrap();
    assert!(matches!(&err, Error::Stage { stage, .. } if stage == "decode"), "{err}");
    assert_eq!(err.to_string(), "stage `decode`: bad element 4");

    let d = range(0..10).map(|x| if x == 2 { panic!("boom at {x}") } else { x });
    let (got, err) = until_error(&d);
    assert_eq!(got, [0, 1]);
    assert_eq!(err.unwrap().to_string(), "stage `map`: user function panicked: boom at 2");

    let d = range(0..5).try_filter(|x| if *x == 3 { Err("no threes") } else { Ok(true) });
    let (got, err) = until_error(&d);
    assert_eq!(got, [0, 1, 2]);
    assert_eq!(err.unwrap().to_string(), "stage `filter`: no threes");
}

#[test]
fn shuffle_is_a_seeded_permutation_per_epoch() {
    let d = range(0..1000).shuffle(100, 7);
    let a = collect(&d);
    assert_eq!(a, collect(&range(0..1000).shuffle(100, 7)), "same seed, same order");
    assert_ne!(a, collect(&range(0..1000).shuffle(100, 8)), "another seed");
    assert_ne!(a, (0..1000).collect::<Vec<_>>());
    assert_eq!(a.iter().copied().collect::<BTreeSet<_>>(), (0..1000).collect());
    // A buffer of 100 moves an element at most ~100 places earlier.
    assert!(a.iter().enumerate().all(|(i, x)| *x as usize <= i + 100));

    // Each epoch of a repeat reshuffles, unless told not to.
    let e = collect(&range(0..50).shuffle(50, 1).repeat(Some(2)));
    assert_ne!(e[..50], e[50..]);
    assert_eq!(e[..50].iter().collect::<BTreeSet<_>>(), e[50..].iter().collect::<BTreeSet<_>>());
    let same = collect(&range(0..50).shuffle(50, 1).reshuffle_each_epoch(false).repeat(Some(2)));
    assert_eq!(same[..50], same[50..]);
    assert_eq!(same[..50], e[..50], "epoch 0 is the same either way");
}

#[test]
fn repeat_counts_and_stops_on_empty() {
    assert_eq!(collect(&range(0..3).repeat(Some(3))), [0, 1, 2, 0, 1, 2, 0, 1, 2]);
    assert_eq!(collect(&range(0..3).repeat(Some(0))), Vec::<u64>::new());
    assert_eq!(collect(&range(0..3).repeat(None).take(7)), [0, 1, 2, 0, 1, 2, 0]);
    // Forever over nothing ends instead of spinning.
    assert_eq!(collect(&range(0..0).repeat(None)), Vec::<u64>::new());
}

#[test]
fn sample_from_mixes_by_weight_and_drains_every_input() {
    let mix = || sample_from(vec![range(0..300), range(1000..1100)], vec![3.0, 1.0], 5).unwrap();
    let a = collect(&mix());
    assert_eq!(a, collect(&mix()), "seeded");
    assert_eq!(a.len(), 400);
    let first = a.iter().filter(|x| **x < 1000).count();
    assert_eq!(first, 300);
    // Each input keeps its own order.
    assert!(a.iter().filter(|x| **x < 1000).is_sorted() && a.iter().filter(|x| **x >= 1000).is_sorted());
    // Early on, the 3:1 weights show: ~75 of the first 100 come from the first input.
    let early = a[..100].iter().filter(|x| **x < 1000).count();
    assert!((60..=90).contains(&early), "{early}");
    let stop = sample_from(vec![range(0..10), range(100..1000)], vec![1.0, 1.0], 2)
        .unwrap()
        .stop_on_empty_dataset(true);
    assert!(collect(&stop).len() < 100);
    assert!(sample_from(vec![range(0..1)], vec![], 0).is_err());
    assert!(sample_from(vec![range(0..1)], vec![f64::NAN], 0).is_err());
}

fn write_shards(dir: &std::path::Path, shards: usize, per: usize) -> Vec<std::path::PathBuf> {
    (0..shards)
        .map(|s| {
            let p = dir.join(format!("part-{s}.tfrecord"));
            let mut w = tfrecord::create(&p, Compression::None).unwrap();
            for i in 0..per {
                w.write_record(format!("{s}:{i}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
            p
        })
        .collect()
}

#[test]
fn files_are_sorted_or_shuffled_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = write_shards(dir.path(), 6, 1);
    paths.sort();
    let pattern = format!("{}/*.tfrecord", dir.path().display());
    let files = sluice_runtime::stage::files(&pattern).unwrap();
    assert_eq!(collect(&files), paths);
    let shuffled = collect(&files.clone().shuffled(3).repeat(Some(2)));
    assert_ne!(shuffled[..6], shuffled[6..], "a new order each epoch");
    assert_eq!(shuffled[..6].iter().collect::<BTreeSet<_>>(), paths.iter().collect::<BTreeSet<_>>());
    let err = sluice_runtime::stage::files(&format!("{}/*.nothing", dir.path().display())).unwrap_err();
    assert!(err.to_string().contains("no files match"), "{err}");
    // A pattern matching only what is not a regular file says so.
    let err = sluice_runtime::stage::files("/dev/zero").unwrap_err().to_string();
    assert!(err.contains("matches /dev/zero, which is not a regular file"), "{err}");
    assert!(sluice_runtime::stage::files("[").is_err());
    assert_eq!(Files::from_paths(paths.clone()).paths(), &paths[..]);
    // Indexes beside the files are not data files.
    sluice_runtime::tfrecord::write_index(&paths[0]).unwrap();
    let all = sluice_runtime::stage::files(&format!("{}/*", dir.path().display())).unwrap();
    assert_eq!(all.paths(), &paths[..]);
}

/// A glob match that cannot be read (a dangling symbolic link, a link loop) is never
/// dropped: the reader of every file fails naming it, and a folder is not a file to
/// read. Before, `files` kept only regular files: a shard whose link dangled vanished
/// from the records without a word.
#[cfg(unix)]
#[test]
fn an_unreadable_glob_match_is_an_error_naming_it_never_dropped() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let mut paths = write_shards(dir.path(), 3, 2);
    let dangling = dir.path().join("part-3.tfrecord");
    symlink(dir.path().join("gone.tfrecord"), &dangling).unwrap();
    let looping = dir.path().join("part-4.tfrecord");
    symlink(&looping, &looping).unwrap();
    std::fs::create_dir(dir.path().join("part-5.tfrecord")).unwrap();

    let pattern = format!("{}/part-*.tfrecord", dir.path().display());
    let listed = sluice_runtime::stage::files(&pattern).unwrap();
    paths.extend([dangling.clone(), looping.clone()]);
    assert_eq!(listed.paths(), &paths[..], "links are listed, the folder is not");

    // Every file read in turn: the records of the good shards, then the first link.
    let records = tfrecords(listed, ReaderOptions::default(), 1);
    let (got, err) = until_error(&records);
    assert_eq!(got.len(), 6);
    let err = err.expect("the dangling shard is an error");
    assert!(matches!(&err, Error::Io { path, .. } if *path == dangling), "{err}");
    assert!(err.to_string().contains("part-3.tfrecord"), "{err}");
    let err = until_error(&tfrecords(Files::from_paths([looping.clone()]), ReaderOptions::default(), 1)).1;
    assert!(err.is_some_and(|e| e.to_string().contains("part-4.tfrecord")), "the loop is named");

    // A device or a FIFO beside data files is named at once (reading it could wait forever).
    let fifo = dir.path().join("part-6.tfrecord");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let err = sluice_runtime::stage::files(&pattern).unwrap_err().to_string();
    assert!(err.contains("part-6.tfrecord, which is not a regular file"), "{err}");
}

/// `read_file(on_error: skip)` counts and names a glob match it cannot read (a link
/// loop), as it does a file deleted since it was listed. Before, `files` dropped the
/// loop: one element and no skip counted.
#[cfg(unix)]
#[test]
fn read_file_skips_an_unreadable_glob_match_counted_and_named() {
    use sluice_runtime::error::CorruptKind;
    use sluice_runtime::stage::{Ctx, ReadFileOptions, RuntimeOptions, read_files};
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::create_dir(&a).unwrap();
    std::fs::write(a.join("good.jpg"), b"good").unwrap();
    let looping = a.join("loop.jpg");
    std::os::unix::fs::symlink(&looping, &looping).unwrap();

    let list = sluice_runtime::stage::files(&format!("{}/*", a.display())).unwrap();
    let options = ReadFileOptions { labels: false, on_error: CorruptPolicy::Skip };
    let ctx = Ctx::new(&RuntimeOptions::default());
    let got: Vec<_> =
        read_files(list.clone(), options).stream_in(&ctx).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(got.iter().map(|f| f.contents.clone()).collect::<Vec<_>>(), [b"good".to_vec()]);
    let io = ctx.reader_stats();
    assert_eq!((io.records, io.skipped_records, io.skipped_files), (1, 1, 1));
    assert_eq!(io.events.len(), 1);
    assert_eq!(io.events[0].path, looping);
    assert!(matches!(io.events[0].kind, CorruptKind::Unreadable(_)), "{:?}", io.events[0]);

    // Under `fail`, it is the error, naming it.
    let (got, err) = until_error(&read_files(list, ReadFileOptions::default()));
    assert_eq!(got.len(), 1);
    assert!(err.is_some_and(|e| e.to_string().contains("loop.jpg")), "the loop is named");
}

#[test]
fn tfrecord_source_counts_skipped_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_shards(dir.path(), 1, 5).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    let second = 16 + 3; // after the first record ("0:0")
    bytes[second + 12] ^= 1; // payload of record 1
    std::fs::write(&path, bytes).unwrap();

    let d = tfrecord_file(&path, ReaderOptions::default());
    let (got, err) = until_error(&d);
    assert_eq!(got, [b"0:0".to_vec()]);
    assert!(matches!(err, Some(Error::Corrupt { record: 1, .. })));

    let d =
        tfrecord_file(&path, ReaderOptions { on_corrupt: CorruptPolicy::Skip, ..ReaderOptions::default() });
    let mut s = d.stream().unwrap();
    let got: Vec<Vec<u8>> = s.by_ref().map(|r| Vec::from(r.unwrap())).collect();
    assert_eq!(got.len(), 4);
    let stats = s.reader_stats();
    assert_eq!((stats.records, stats.skipped_records), (4, 1));

    let missing = tfrecord_file(dir.path().join("nope.tfrecord"), ReaderOptions::default());
    assert!(matches!(missing.stream(), Err(Error::Io { .. })));
}

#[test]
fn stats_name_every_registered_stage() {
    let d = range(0..10_000).map(|x| x * 2).filter(|x| x % 3 == 0).shuffle(64, 1);
    let mut s = d.stream().unwrap();
    assert_eq!(s.by_ref().count(), 3334);
    let report = s.report();
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["map", "filter", "shuffle"]);
    assert_eq!(report.stages[0].elements, 10_000);
    assert_eq!(report.stages[1].elements, 3334);
    assert!(report.stages[2].mean_queue_fill.is_some());
    assert!(report.to_string().contains("bottleneck: map"), "{report}");
}

#[test]
fn memory_cache_replays_the_first_complete_pass() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let d = range(0..5)
        .map(move |x| {
            c.fetch_add(1, Ordering::Relaxed);
            x * 3
        })
        .cache()
        .repeat(Some(3));
    assert_eq!(collect(&d), [0, 3, 6, 9, 12, 0, 3, 6, 9, 12, 0, 3, 6, 9, 12]);
    assert_eq!(calls.load(Ordering::Relaxed), 5, "the map ran once");
}

#[test]
fn file_cache_is_written_on_completion_and_reused() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.bin");
    let calls = Arc::new(AtomicUsize::new(0));
    let make = |calls: Arc<AtomicUsize>| {
        range(0..4).map(move |x| {
            calls.fetch_add(1, Ordering::Relaxed);
            (x, format!("item {x}"), vec![x as f32; x as usize])
        })
    };
    // An interrupted pass leaves nothing behind.
    let mut s = make(calls.clone()).cache_file(&path).stream().unwrap();
    s.next().unwrap().unwrap();
    drop(s);
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no partial file left");
    // Partials left by processes that died mid-pass (a signal does not unwind) are
    // removed by the next pass that writes the cache; a live process's are its own.
    let dead = dir.path().join("cache.bin.partial-4000000000");
    let live = dir.path().join("cache.bin.partial-1");
    std::fs::write(&dead, b"half a cache").unwrap();
    std::fs::write(&live, b"pid 1 is alive").unwrap();
    // A complete pass writes it; a new pipeline replays it without running the map.
    let first = collect(&make(calls.clone()).cache_file(&path));
    assert!(!dead.exists(), "a dead process's partial cache is removed");
    assert!(live.exists(), "a live process's partial cache is left alone");
    std::fs::remove_file(&live).unwrap();
    assert!(path.is_file());
    let before = calls.load(Ordering::Relaxed);
    let second = collect(&make(calls.clone()).cache_file(&path));
    assert_eq!(first, second);
    assert_eq!(calls.load(Ordering::Relaxed), before, "replayed from the file");
    assert_eq!(second[3], (3, "item 3".to_string(), vec![3.0; 3]));
    // A damaged cache file is a corrupt-record error naming it, not garbage.
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 6] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (_, err) = until_error(&make(calls.clone()).cache_file(&path));
    let err = err.unwrap();
    assert!(err.is_corrupt() && err.to_string().contains("cache.bin"), "{err}");
}

/// A cache file made by another pipeline (another fingerprint: plan, parameters, files)
/// or holding no fingerprint is stale: it is rebuilt, never replayed as if it were this
/// pipeline's; an entry with bytes left over after it is corrupt, not silently decoded.
#[test]
fn a_stale_file_cache_is_rebuilt_and_entries_must_decode_exactly() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.bin");
    let calls = Arc::new(AtomicUsize::new(0));
    let make = |n: u64, calls: Arc<AtomicUsize>| {
        range(0..n).map(move |x| {
            calls.fetch_add(1, Ordering::Relaxed);
            x * 10
        })
    };
    let runs = || calls.load(Ordering::Relaxed);
    assert_eq!(collect(&make(4, calls.clone()).cache_file(&path).fingerprint(1)), [0, 10, 20, 30]);
    assert_eq!(runs(), 4);
    // The same fingerprint replays.
    assert_eq!(collect(&make(4, calls.clone()).cache_file(&path).fingerprint(1)), [0, 10, 20, 30]);
    assert_eq!(runs(), 4, "replayed");
    // Another one (the files changed: now 3 elements) rebuilds, then replays that.
    assert_eq!(collect(&make(3, calls.clone()).cache_file(&path).fingerprint(2)), [0, 10, 20]);
    assert_eq!(runs(), 7, "rebuilt");
    assert_eq!(collect(&make(3, calls.clone()).cache_file(&path).fingerprint(2)), [0, 10, 20]);
    assert_eq!(runs(), 7);
    // A cache file without the header (an older Sluice's) is rebuilt too.
    let mut w = tfrecord::create(&path, Compression::None).unwrap();
    w.write_record(&99u64.to_le_bytes()).unwrap();
    w.finish().unwrap();
    assert_eq!(collect(&make(3, calls.clone()).cache_file(&path).fingerprint(2)), [0, 10, 20]);
    assert_eq!(runs(), 10, "rebuilt");
    // An entry longer than its value is corrupt, named by file and record.
    let mut w = tfrecord::create(&path, Compression::None).unwrap();
    let mut header = b"SLUICE-CACHE".to_vec();
    header.extend_from_slice(&2u64.to_le_bytes());
    w.write_record(&header).unwrap();
    let mut entry = 5u64.to_le_bytes().to_vec();
    entry.extend_from_slice(b"junk");
    w.write_record(&entry).unwrap();
    w.finish().unwrap();
    let (got, err) = until_error(&make(3, calls.clone()).cache_file(&path).fingerprint(2));
    assert!(got.is_empty());
    let err = err.expect("a corrupt entry").to_string();
    assert!(
        err.contains("cache.bin") && err.contains("record 1") && err.contains("4 bytes left over"),
        "{err}"
    );
}

#[test]
fn chunks_group_whole_elements() {
    assert_eq!(collect(&range(0..7).chunks(3, false)), [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
    assert_eq!(collect(&range(0..7).chunks(3, true)), [vec![0, 1, 2], vec![3, 4, 5]]);
    assert_eq!(collect(&range(0..0).chunks(3, false)), Vec::<Vec<u64>>::new());
    assert!(matches!(range(0..3).chunks(0, false).stream(), Err(Error::Invalid(_))));
    let (got, err) =
        until_error(&range(0..10).try_map(|x| if x == 5 { Err("five") } else { Ok(x) }).chunks(4, false));
    assert_eq!(got, [vec![0, 1, 2, 3]]);
    assert!(err.is_some());
}
