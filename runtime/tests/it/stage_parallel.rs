//! Parallel `map`, `prefetch` and AUTOTUNE: exact sequences, errors, cancellation,
//! bounded memory and budgets, on data made in the test.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sluice_runtime::Error;
use sluice_runtime::stage::{Buffer, Dataset, Element, Parallelism, RuntimeOptions, range};

fn collect<D: Dataset>(d: &D) -> Vec<D::Item> {
    d.stream().unwrap().map(|r| r.unwrap()).collect()
}

/// The elements before the first error, the error, and whether the stream then ended.
fn until_error<D: Dataset>(d: &D) -> (Vec<D::Item>, Option<Error>, bool) {
    let mut s = d.stream().unwrap();
    let mut out = Vec::new();
    for r in s.by_ref() {
        match r {
            Ok(x) => out.push(x),
            Err(e) => {
                let ended = s.next().is_none();
                return (out, Some(e), ended);
            }
        }
    }
    (out, None, true)
}

/// Busy-waits for `micros` microseconds (work whose length varies per element).
fn spin(micros: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(micros) {
        std::hint::spin_loop();
    }
}

/// A user function whose run time varies per element.
fn uneven(x: u64) -> u64 {
    spin(x % 7);
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (x >> 3)
}

const THREADS: [Parallelism; 5] = [
    Parallelism::Fixed(1),
    Parallelism::Fixed(2),
    Parallelism::Fixed(3),
    Parallelism::Fixed(8),
    Parallelism::Auto,
];

#[test]
fn deterministic_map_equals_the_sequential_map() {
    let expected: Vec<u64> = (0..600).map(uneven).collect();
    for p in THREADS {
        let d = range(0..600).map(uneven).num_parallel(p);
        assert_eq!(collect(&d), expected, "{p:?}");
        // A second pass of the same dataset gives the same sequence.
        assert_eq!(collect(&d), expected, "{p:?}, second pass");
    }
    for p in THREADS {
        assert_eq!(collect(&range(0..0).map(uneven).num_parallel(p)), Vec::<u64>::new(), "{p:?}");
        assert_eq!(collect(&range(5..6).map(uneven).num_parallel(p)), [uneven(5)], "{p:?}");
    }
}

#[test]
fn nondeterministic_map_gives_the_same_multiset() {
    let mut expected: Vec<u64> = (0..600).map(|x| uneven(x % 50)).collect();
    expected.sort_unstable();
    for p in THREADS {
        let d = range(0..600).map(|x| uneven(x % 50)).num_parallel(p).deterministic(false);
        let mut got = collect(&d);
        got.sort_unstable();
        assert_eq!(got, expected, "{p:?}");
    }
}

#[test]
fn user_error_arrives_at_its_position_then_the_stream_ends() {
    for p in THREADS {
        let d = range(0..200)
            .try_map(|x| {
                spin(x % 5);
                if x == 37 { Err(format!("bad element {x}")) } else { Ok(x * 2) }
            })
            .named("decode")
            .num_parallel(p);
        let (got, err, ended) = until_error(&d);
        assert_eq!(got, (0..37).map(|x| x * 2).collect::<Vec<_>>(), "{p:?}");
        let err = err.unwrap();
        assert!(matches!(&err, Error::Stage { stage, .. } if stage == "decode"), "{p:?}: {err}");
        assert_eq!(err.to_string(), "stage `decode`: bad element 37");
        assert!(ended, "{p:?}");
    }
}

#[test]
fn panic_in_the_user_function_becomes_an_error() {
    for p in THREADS {
        let d = range(0..100).map(|x| if x == 11 { panic!("boom at {x}") } else { x }).num_parallel(p);
        let (got, err, ended) = until_error(&d);
        assert_eq!(got, (0..11).collect::<Vec<_>>(), "{p:?}");
        let err = err.unwrap();
        assert!(matches!(&err, Error::Panic { stage, message } if stage == "map" && message == "boom at 11"));
        assert!(ended, "{p:?}");
    }
}

#[test]
fn upstream_error_propagates_in_order() {
    for p in THREADS {
        let d = range(0..100)
            .try_map(|x| if x == 50 { Err("truncated record") } else { Ok(x) })
            .named("parse")
            .map(uneven)
            .num_parallel(p);
        let (got, err, ended) = until_error(&d);
        assert_eq!(got, (0..50).map(uneven).collect::<Vec<_>>(), "{p:?}");
        let err = err.unwrap();
        assert_eq!(err.to_string(), "stage `parse`: truncated record", "{p:?}");
        assert!(ended, "{p:?}");
    }
}

#[test]
fn nondeterministic_errors_end_the_stream() {
    for p in [Parallelism::Fixed(3), Parallelism::Auto] {
        let d = range(0..200)
            .try_map(|x| if x == 60 { Err("bad") } else { Ok(x) })
            .num_parallel(p)
            .deterministic(false);
        let (got, err, ended) = until_error(&d);
        assert!(matches!(err, Some(Error::Stage { .. })), "{p:?}");
        assert!(ended, "{p:?}");
        // Whatever came before the error is distinct elements of the input.
        let mut sorted = got.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), got.len());
        assert!(got.iter().all(|x| *x < 200 && *x != 60));
    }
}

#[test]
fn dropping_mid_stream_joins_the_workers() {
    for p in [Parallelism::Fixed(2), Parallelism::Fixed(8), Parallelism::Auto] {
        for deterministic in [true, false] {
            let probe = Arc::new(());
            let captured = probe.clone();
            let d = range(0..u64::MAX)
                .map(move |x| {
                    let _ = &captured;
                    uneven(x)
                })
                .num_parallel(p)
                .deterministic(deterministic);
            let mut s = d.stream().unwrap();
            for _ in 0..25 {
                s.next().unwrap().unwrap();
            }
            // The closure now lives only in the workers' share of the stage.
            drop(d);
            assert_eq!(Arc::strong_count(&probe), 2);
            // Dropping the stream joins the workers, which frees the closure.
            drop(s);
            assert_eq!(Arc::strong_count(&probe), 1, "{p:?}, deterministic={deterministic}");
        }
    }
}

/// Counts values alive now, and the most ever alive at once.
#[derive(Debug, Default)]
struct Alive {
    now: AtomicUsize,
    max: AtomicUsize,
}

/// An element that is counted in [`Alive`] from creation to drop.
#[derive(Debug)]
struct Tracked {
    value: u64,
    alive: Arc<Alive>,
}

impl Tracked {
    fn new(value: u64, alive: &Arc<Alive>) -> Self {
        let now = alive.now.fetch_add(1, Ordering::SeqCst) + 1;
        alive.max.fetch_max(now, Ordering::SeqCst);
        Tracked { value, alive: alive.clone() }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.alive.now.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Element for Tracked {}

/// The window bounds what a parallel map holds: `2 × workers` elements when each takes
/// 50 µs or more (handed over one by one), `2 × workers` micro-batches of at most
/// `MAP_MICRO_BATCH` when they are cheap.
#[test]
fn the_in_flight_window_bounds_memory() {
    use sluice_runtime::defaults::MAP_MICRO_BATCH;
    for (cost, bound) in [(60, 2 * 4 + 1), (1, 2 * 4 * MAP_MICRO_BATCH + 1)] {
        for deterministic in [true, false] {
            let alive = Arc::new(Alive::default());
            let counter = alive.clone();
            let d = range(0..u64::MAX)
                .map(move |x| {
                    spin(cost);
                    Tracked::new(uneven(x), &counter)
                })
                .num_parallel(4)
                .deterministic(deterministic);
            let mut s = d.stream().unwrap();
            for i in 0..300 {
                let t = s.next().unwrap().unwrap();
                if deterministic {
                    assert_eq!(t.value, uneven(i));
                }
                // A slow consumer.
                spin(20 + cost);
            }
            drop(s);
            // Four workers, a window of eight in flight, and the one the consumer held.
            let max = alive.max.load(Ordering::SeqCst);
            assert!((1..=bound).contains(&max), "max alive {max} > {bound}, cost {cost} µs, {deterministic}");
            assert_eq!(alive.now.load(Ordering::SeqCst), 0);
        }
    }
}

#[test]
fn parallel_map_statistics() {
    let d = range(0..300).map(uneven).num_parallel(3).named("work");
    let mut s = d.stream().unwrap();
    assert_eq!(s.by_ref().count(), 300);
    let report = s.report();
    let stage = report.stages.iter().find(|st| st.name == "work").unwrap();
    // A window of 6 micro-batches (of 1 to MAP_MICRO_BATCH elements: these are cheap).
    let micro = sluice_runtime::defaults::MAP_MICRO_BATCH;
    assert_eq!((stage.elements, stage.parallelism), (300, 3));
    assert!(stage.queue_capacity % 6 == 0 && (6..=6 * micro).contains(&stage.queue_capacity), "{stage:?}");
    assert!(stage.mean_queue_fill.is_some_and(|q| q <= stage.queue_capacity as f64));
}

#[test]
fn prefetch_keeps_order_and_statistics() {
    for buffer in [Buffer::Fixed(0), Buffer::Fixed(1), Buffer::Fixed(4), Buffer::Auto] {
        let d = range(0..500).map(uneven).prefetch(buffer);
        assert_eq!(collect(&d), (0..500).map(uneven).collect::<Vec<_>>(), "{buffer:?}");
    }
    assert_eq!(collect(&range(0..0).prefetch(3)), Vec::<u64>::new());
    // Prefetch behind a parallel map, and a map behind a prefetch.
    let d = range(0..300).prefetch(2).map(uneven).num_parallel(3).prefetch(Buffer::Auto);
    assert_eq!(collect(&d), (0..300).map(uneven).collect::<Vec<_>>());

    let d = range(0..100).prefetch(4usize).named("ahead");
    let mut s = d.stream().unwrap();
    assert_eq!(s.by_ref().count(), 100);
    let report = s.report();
    let stage = report.stages.iter().find(|st| st.name == "ahead").unwrap();
    assert_eq!((stage.elements, stage.parallelism, stage.queue_capacity), (100, 1, 4));
}

#[test]
fn prefetch_forwards_errors_in_order() {
    let d = range(0..50).try_map(|x| if x == 17 { Err("bad") } else { Ok(x) }).named("parse").prefetch(4);
    let (got, err, ended) = until_error(&d);
    assert_eq!(got, (0..17).collect::<Vec<_>>());
    assert_eq!(err.unwrap().to_string(), "stage `parse`: bad");
    assert!(ended);

    let d = range(0..50).map(|x| if x == 3 { panic!("boom") } else { x }).prefetch(Buffer::Auto);
    let (got, err, ended) = until_error(&d);
    assert_eq!(got, [0, 1, 2]);
    assert!(matches!(err, Some(Error::Panic { message, .. }) if message == "boom"));
    assert!(ended);
}

#[test]
fn dropping_a_prefetch_joins_its_producer() {
    for buffer in [Buffer::Fixed(3), Buffer::Auto] {
        let probe = Arc::new(());
        let captured = probe.clone();
        let d = range(0..u64::MAX)
            .map(move |x| {
                let _ = &captured;
                x
            })
            .prefetch(buffer);
        let mut s = d.stream().unwrap();
        for i in 0..20 {
            assert_eq!(s.next().unwrap().unwrap(), i);
        }
        drop(d);
        assert_eq!(Arc::strong_count(&probe), 2);
        drop(s);
        assert_eq!(Arc::strong_count(&probe), 1, "{buffer:?}");
    }
}

#[test]
fn prefetch_bounds_memory() {
    let alive = Arc::new(Alive::default());
    let counter = alive.clone();
    let d = range(0..u64::MAX).map(move |x| Tracked::new(x, &counter)).prefetch(3);
    let mut s = d.stream().unwrap();
    for i in 0..200 {
        assert_eq!(s.next().unwrap().unwrap().value, i);
        spin(20);
    }
    drop(s);
    // Three queued and the one the consumer held.
    let max = alive.max.load(Ordering::SeqCst);
    assert!((1..=4).contains(&max), "max alive {max}");
    assert_eq!(alive.now.load(Ordering::SeqCst), 0);
}

#[test]
fn auto_parallelism_rises_under_a_cpu_heavy_function() {
    let options = RuntimeOptions { cores: Some(4), ..RuntimeOptions::default() };
    let d = range(0..400).map(|x| {
        spin(200);
        x
    });
    let d = d.num_parallel(Parallelism::Auto).named("heavy");
    let mut s = d.stream_with(&options).unwrap();
    let mut max_parallelism = 0;
    let mut n = 0;
    while let Some(r) = s.next() {
        assert_eq!(r.unwrap(), n);
        n += 1;
        let report = s.report();
        let stage = report.stages.iter().find(|st| st.name == "heavy").unwrap();
        max_parallelism = max_parallelism.max(stage.parallelism);
    }
    assert_eq!(n, 400);
    assert!((2..=4).contains(&max_parallelism), "parallelism {max_parallelism}");
}

#[test]
fn auto_prefetch_stays_within_the_memory_budget() {
    // Elements of 1024 bytes (24 + 1000); the first two slots are free.
    for (budget, max_depth) in [(2000, 2), (7000, 8)] {
        let options = RuntimeOptions { memory_budget: Some(budget), ..RuntimeOptions::default() };
        // A bursty producer and a bursty consumer: the kind of pair a deeper queue helps.
        let d = range(0..300)
            .map(|x| {
                spin(if x % 16 < 4 { 100 } else { 2 });
                vec![x as u8; 1000]
            })
            .prefetch(Buffer::Auto)
            .named("ahead");
        let mut s = d.stream_with(&options).unwrap();
        let ctx = s.ctx().clone();
        let mut n = 0u64;
        for r in s.by_ref() {
            assert_eq!(r.unwrap(), vec![n as u8; 1000]);
            assert!(ctx.budget().used() <= budget);
            if n.is_multiple_of(16) {
                spin(300);
            }
            n += 1;
        }
        assert_eq!(n, 300);
        let report = s.report();
        let stage = report.stages.iter().find(|st| st.name == "ahead").unwrap();
        assert!((2..=max_depth).contains(&stage.queue_capacity), "depth {}", stage.queue_capacity);
        drop(s);
        assert_eq!(ctx.budget().used(), 0, "the reservation is released");
    }
}

/// A map asked for 100000 threads starts at most `THREADS_PER_CORE` per core, with the
/// same results in the same order (it ended with "cannot start worker thread 32731" or
/// an abort).
#[test]
fn a_map_asked_for_more_threads_than_can_run_starts_what_can() {
    let d = range(0..1000).map(uneven).num_parallel(100_000).named("wide");
    let mut s = d.stream().unwrap();
    assert_eq!(s.by_ref().map(Result::unwrap).collect::<Vec<_>>(), (0..1000).map(uneven).collect::<Vec<_>>());
    let report = s.report();
    let stage = report.stages.iter().find(|st| st.name == "wide").unwrap();
    let most = sluice_runtime::stage::available_cores() * sluice_runtime::defaults::THREADS_PER_CORE;
    assert!((2..=most).contains(&stage.parallelism), "{stage:?}");
}
