//! Per-stage statistics: elements and bytes out, busy time, time blocked on input and on
//! output, queue fill; and a report that names the bottleneck stage.
//!
//! Counters are relaxed atomics updated by the stage's own threads. Stages that do real
//! work per element (map, interleave, batch, shuffle, prefetch) time it; trivial stages
//! (filter, take, skip, shard) only count, so statistics cost little where elements are
//! cheap. Busy time is sampled where calls are short ([`StageStats::time_busy`]): reading
//! the clock twice costs ~40 ns, a tenth of a Parquet row. A `map(on_error: skip)` also
//! counts the elements it dropped because its function failed, keeping the first few
//! messages ([`StageStats::skipped_error`]).

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The counters of one stage.
#[derive(Debug)]
pub struct StageStats {
    name: String,
    elements: AtomicU64,
    bytes: AtomicU64,
    busy_ns: AtomicU64,
    /// Calls of [`time_busy`](Self::time_busy), and how many calls one timed call stands for.
    busy_calls: AtomicU64,
    busy_stride: AtomicU64,
    wait_input_ns: AtomicU64,
    wait_output_ns: AtomicU64,
    queue_fill_sum: AtomicU64,
    queue_samples: AtomicU64,
    queue_capacity: AtomicU64,
    parallelism: AtomicU64,
    skipped_errors: AtomicU64,
    first_skipped: Mutex<Vec<String>>,
    tokens: AtomicU64,
    token_slots: AtomicU64,
    splits: AtomicU64,
    split_parts: AtomicU64,
}

/// A call of [`StageStats::time_busy`] under this is short: timing is sampled.
pub const SHORT_CALL: Duration = Duration::from_micros(20);
/// While calls are short, [`StageStats::time_busy`] times one in this many.
pub const BUSY_STRIDE: u64 = 16;

/// How many messages of skipped errors a stage keeps (the first ones).
pub const KEPT_SKIPPED_ERRORS: usize = 3;

impl StageStats {
    /// Fresh counters for the stage called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        StageStats {
            name: name.into(),
            elements: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            busy_calls: AtomicU64::new(0),
            busy_stride: AtomicU64::new(1),
            wait_input_ns: AtomicU64::new(0),
            wait_output_ns: AtomicU64::new(0),
            queue_fill_sum: AtomicU64::new(0),
            queue_samples: AtomicU64::new(0),
            queue_capacity: AtomicU64::new(0),
            parallelism: AtomicU64::new(1),
            skipped_errors: AtomicU64::new(0),
            first_skipped: Mutex::new(Vec::new()),
            tokens: AtomicU64::new(0),
            token_slots: AtomicU64::new(0),
            splits: AtomicU64::new(0),
            split_parts: AtomicU64::new(0),
        }
    }

    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Counts one element produced, of `bytes` bytes.
    #[inline]
    pub fn produced(&self, bytes: usize) {
        self.elements.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// Adds time spent doing the stage's own work.
    #[inline]
    pub fn add_busy(&self, d: Duration) {
        self.busy_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// Adds time spent waiting for the upstream stage.
    #[inline]
    pub fn add_wait_input(&self, d: Duration) {
        self.wait_input_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// Adds time spent waiting for room in the output queue (downstream is slower).
    #[inline]
    pub fn add_wait_output(&self, d: Duration) {
        self.wait_output_ns.fetch_add(d.as_nanos() as u64, Relaxed);
    }

    /// Records one observation of the output queue: `len` of `capacity` slots used (the
    /// report gives the largest capacity seen: a queue that AUTOTUNE resizes).
    #[inline]
    pub fn sample_queue(&self, len: usize, capacity: usize) {
        self.queue_fill_sum.fetch_add(len as u64, Relaxed);
        self.queue_samples.fetch_add(1, Relaxed);
        self.queue_capacity.fetch_max(capacity as u64, Relaxed);
    }

    /// Records the stage's current degree of parallelism (worker threads).
    pub fn set_parallelism(&self, n: usize) {
        self.parallelism.store(n as u64, Relaxed);
    }

    /// Counts one element dropped because the stage's function failed on it
    /// (`on_error: skip`), keeping the message of the first [`KEPT_SKIPPED_ERRORS`].
    pub fn skipped_error(&self, message: &dyn fmt::Display) {
        if self.skipped_errors.fetch_add(1, Relaxed) < KEPT_SKIPPED_ERRORS as u64 {
            let mut first = self.first_skipped.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if first.len() < KEPT_SKIPPED_ERRORS {
                first.push(message.to_string());
            }
        }
    }

    /// Counts `tokens` real tokens in `slots` places of fixed-length rows (`pack`: its
    /// packing efficiency is tokens / slots).
    #[inline]
    pub fn add_tokens(&self, tokens: usize, slots: usize) {
        self.tokens.fetch_add(tokens as u64, Relaxed);
        self.token_slots.fetch_add(slots as u64, Relaxed);
    }

    /// Times `f` as busy time, sampled: while the calls timed are short (under
    /// [`SHORT_CALL`]), only one call in [`BUSY_STRIDE`] is timed and counts for all of
    /// them; a longer one sets timing back to every call. So the stage's busy time is
    /// exact for expensive calls (a JPEG decode) and an estimate, from every
    /// `BUSY_STRIDE`-th call, for cheap ones (a Parquet row), which the clock would
    /// otherwise slow by a tenth. The first call is always timed.
    #[inline]
    pub fn time_busy<R>(&self, f: impl FnOnce() -> R) -> R {
        let stride = self.busy_stride.load(Relaxed);
        if !self.busy_calls.fetch_add(1, Relaxed).is_multiple_of(stride) {
            return f();
        }
        let t = Instant::now();
        let r = f();
        let took = t.elapsed();
        self.add_busy(took * stride as u32);
        let next = if took < SHORT_CALL { BUSY_STRIDE } else { 1 };
        if next != stride {
            // Calls counted since stay counted: the next timed one is where the count
            // is a multiple of the new stride.
            self.busy_stride.store(next, Relaxed);
        }
        r
    }

    /// Times `f` as time waiting for input.
    #[inline]
    pub fn time_input<R>(&self, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.add_wait_input(t.elapsed());
        r
    }

    /// Counts one batch whose rows were split into `parts` parts on the pipeline's pool
    /// ([`rows`](super::rows)).
    pub fn add_split(&self, parts: usize) {
        self.splits.fetch_add(1, Relaxed);
        self.split_parts.fetch_add(parts as u64, Relaxed);
    }

    /// A snapshot of the counters.
    pub fn snapshot(&self) -> StageReport {
        let samples = self.queue_samples.load(Relaxed);
        StageReport {
            name: self.name.clone(),
            elements: self.elements.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            busy: Duration::from_nanos(self.busy_ns.load(Relaxed)),
            wait_input: Duration::from_nanos(self.wait_input_ns.load(Relaxed)),
            wait_output: Duration::from_nanos(self.wait_output_ns.load(Relaxed)),
            mean_queue_fill: (samples > 0).then(|| self.queue_fill_sum.load(Relaxed) as f64 / samples as f64),
            queue_capacity: self.queue_capacity.load(Relaxed) as usize,
            parallelism: self.parallelism.load(Relaxed).max(1) as usize,
            skipped_errors: self.skipped_errors.load(Relaxed),
            first_skipped: self
                .first_skipped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            tokens: self.tokens.load(Relaxed),
            token_slots: self.token_slots.load(Relaxed),
            splits: self.splits.load(Relaxed),
            split_parts: self.split_parts.load(Relaxed),
        }
    }
}

/// A snapshot of one stage's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct StageReport {
    /// The stage's name.
    pub name: String,
    /// Elements produced.
    pub elements: u64,
    /// Bytes produced (by [`Element::byte_size`](super::Element::byte_size)).
    pub bytes: u64,
    /// Time doing the stage's own work, summed over its threads.
    pub busy: Duration,
    /// Time blocked waiting for input, summed over its threads.
    pub wait_input: Duration,
    /// Time blocked waiting for room downstream, summed over its threads.
    pub wait_output: Duration,
    /// Mean number of elements in the output queue when sampled.
    pub mean_queue_fill: Option<f64>,
    /// Capacity of the output queue (0 when the stage has none).
    pub queue_capacity: usize,
    /// Worker threads.
    pub parallelism: usize,
    /// Elements dropped because the stage's function failed on them (`on_error: skip`).
    pub skipped_errors: u64,
    /// The messages of the first skipped errors (at most [`KEPT_SKIPPED_ERRORS`]; with
    /// several workers, the first to be counted).
    pub first_skipped: Vec<String>,
    /// Real (not padding) tokens in the rows produced (`pack`; 0 for other stages).
    pub tokens: u64,
    /// Places for tokens in the rows produced, padding included (`pack`).
    pub token_slots: u64,
    /// Batches whose rows were split across the pipeline's pool ([`rows`](super::rows)).
    pub splits: u64,
    /// The parts of those batches, in all (each part one thread's rows).
    pub split_parts: u64,
}

impl StageReport {
    /// The line that says what `on_error: skip` dropped: the stage, the count and the
    /// first messages.
    pub fn skipped_line(&self) -> String {
        let n = self.skipped_errors;
        let mut line = format!(
            "{}: skipped {n} element{} whose map failed (on_error: skip)",
            self.name,
            if n == 1 { "" } else { "s" }
        );
        for (i, m) in self.first_skipped.iter().enumerate() {
            line.push_str(if i == 0 { "; first: " } else { "; " });
            line.push_str(m);
        }
        if n > self.first_skipped.len() as u64 {
            line.push_str(&format!("; … and {} more", n - self.first_skipped.len() as u64));
        }
        line
    }

    /// Fraction of the stage's capacity (`wall × parallelism`) spent busy.
    pub fn utilization(&self, wall: Duration) -> f64 {
        let cap = wall.as_secs_f64() * self.parallelism as f64;
        if cap > 0.0 { self.busy.as_secs_f64() / cap } else { 0.0 }
    }

    /// Tokens over token places (padding included) in the rows produced: `pack`'s
    /// packing efficiency; `None` for a stage that makes no token rows.
    pub fn packing_efficiency(&self) -> Option<f64> {
        (self.token_slots > 0).then(|| self.tokens as f64 / self.token_slots as f64)
    }
}

/// The statistics of a whole pipeline run.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsReport {
    /// Wall time since the pipeline started.
    pub wall: Duration,
    /// Time the consumer spent waiting for elements.
    pub consumer_wait: Duration,
    /// One report per stage, upstream first.
    pub stages: Vec<StageReport>,
}

impl StatsReport {
    /// The stage whose threads were busiest relative to their capacity: the one to speed
    /// up (or parallelise) first. `None` when no stage recorded busy time.
    pub fn bottleneck(&self) -> Option<&StageReport> {
        self.stages
            .iter()
            .filter(|s| s.busy > Duration::ZERO)
            .max_by(|a, b| a.utilization(self.wall).total_cmp(&b.utilization(self.wall)))
    }

    /// The elements every `map(on_error: skip)` of the pipeline dropped so far.
    pub fn skipped_errors(&self) -> u64 {
        self.stages.iter().map(|s| s.skipped_errors).sum()
    }
}

impl fmt::Display for StatsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<24} {:>12} {:>10} {:>4} {:>7} {:>9} {:>9} {:>9}",
            "stage", "elements", "MB", "par", "util", "busy s", "in-wait", "out-wait"
        )?;
        for s in &self.stages {
            let queue = match s.mean_queue_fill {
                Some(q) => format!("  queue {q:.1}/{}", s.queue_capacity),
                None => String::new(),
            };
            writeln!(
                f,
                "{:<24} {:>12} {:>10.1} {:>4} {:>6.0}% {:>9.2} {:>9.2} {:>9.2}{queue}",
                s.name,
                s.elements,
                s.bytes as f64 / 1e6,
                s.parallelism,
                100.0 * s.utilization(self.wall),
                s.busy.as_secs_f64(),
                s.wait_input.as_secs_f64(),
                s.wait_output.as_secs_f64(),
            )?;
        }
        for s in &self.stages {
            if let Some(e) = s.packing_efficiency() {
                writeln!(
                    f,
                    "{}: packing efficiency {:.1}% ({} tokens in {} places)",
                    s.name,
                    100.0 * e,
                    s.tokens,
                    s.token_slots
                )?;
            }
        }
        for s in self.stages.iter().filter(|s| s.splits > 0) {
            writeln!(
                f,
                "{}: {} batches' rows split across the pool, {:.1} threads a batch on average",
                s.name,
                s.splits,
                s.split_parts as f64 / s.splits as f64
            )?;
        }
        let wall = self.wall.as_secs_f64();
        let stall = if wall > 0.0 { 100.0 * self.consumer_wait.as_secs_f64() / wall } else { 0.0 };
        for s in self.stages.iter().filter(|s| s.skipped_errors > 0) {
            writeln!(f, "{}", s.skipped_line())?;
        }
        write!(f, "consumer waited {:.2} s of {wall:.2} s ({stall:.0}%)", self.consumer_wait.as_secs_f64())?;
        if let Some(b) = self.bottleneck() {
            write!(f, "; bottleneck: {} ({:.0}% busy)", b.name, 100.0 * b.utilization(self.wall))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short calls are timed one in `BUSY_STRIDE`; a long one sets timing back to every
    /// call, and is counted whole (durations only from below: a sleep lasts at least
    /// what it asks, never asserted from above).
    #[test]
    fn busy_time_is_sampled_while_calls_are_short() {
        let s = StageStats::new("map");
        let stride = || s.busy_stride.load(Relaxed);
        assert_eq!(s.time_busy(|| 7), 7, "the first call is timed");
        // A preempted no-op can take over SHORT_CALL; one of a few hundred does not.
        let mut calls = 1;
        while stride() != BUSY_STRIDE && calls < 500 {
            s.time_busy(|| ());
            calls += 1;
        }
        assert_eq!(stride(), BUSY_STRIDE, "short calls are sampled");
        // Calls up to the next multiple of the stride are not timed, the one there is.
        while !s.busy_calls.load(Relaxed).is_multiple_of(BUSY_STRIDE) {
            s.time_busy(|| ());
        }
        let before = s.snapshot().busy;
        s.time_busy(|| std::thread::sleep(SHORT_CALL * 2));
        assert_eq!(stride(), 1, "a long call times every call again");
        assert!(s.snapshot().busy - before >= SHORT_CALL * 2 * BUSY_STRIDE as u32);
        let before = s.snapshot().busy;
        s.time_busy(|| std::thread::sleep(SHORT_CALL * 2));
        assert!(s.snapshot().busy - before >= SHORT_CALL * 2, "timed, counted once");
    }

    #[test]
    fn bottleneck_is_the_busiest_stage_per_thread() {
        let a = StageStats::new("read");
        a.add_busy(Duration::from_millis(400));
        let b = StageStats::new("map");
        b.set_parallelism(4);
        b.add_busy(Duration::from_millis(1200)); // 30% of 4 threads
        let c = StageStats::new("batch");
        c.add_busy(Duration::from_millis(100));
        let report = StatsReport {
            wall: Duration::from_secs(1),
            consumer_wait: Duration::from_millis(250),
            stages: vec![a.snapshot(), b.snapshot(), c.snapshot()],
        };
        assert_eq!(report.bottleneck().unwrap().name, "read");
        let text = report.to_string();
        assert!(text.contains("bottleneck: read (40% busy)"), "{text}");
        assert!(text.contains("consumer waited 0.25 s of 1.00 s (25%)"), "{text}");
        assert!(!text.contains("skipped"), "{text}");
    }

    #[test]
    fn skipped_errors_are_counted_with_the_first_messages() {
        let m = StageStats::new("map");
        for i in 0..5 {
            m.skipped_error(&format!("bad {i}"));
        }
        let r = m.snapshot();
        assert_eq!(
            (r.skipped_errors, r.first_skipped.clone()),
            (5, vec!["bad 0".into(), "bad 1".into(), "bad 2".into()])
        );
        assert_eq!(
            r.skipped_line(),
            "map: skipped 5 elements whose map failed (on_error: skip); first: bad 0; bad 1; bad 2; … and 2 more"
        );
        let report =
            StatsReport { wall: Duration::from_secs(1), consumer_wait: Duration::ZERO, stages: vec![r] };
        assert!(report.to_string().contains("map: skipped 5 elements"), "{report}");
    }
}
