//! What a pass of the trainer reports: [`Totals`] (loss and metrics summed over some
//! rows) and [`EpochReport`] (a training epoch's or an evaluation's figures and times).
//!
//! The trainer fills them in, and `CrossRank` (`dist.rs`) adds them up over the ranks
//! of a multi-process job.

use std::time::Duration;

/// What one replica's part of a batch gave: its rows, its mean loss and its metrics'
/// sums.
pub(super) type PartResult = (usize, f64, Vec<(&'static str, f64)>);

/// Loss and metrics summed over some rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Rows seen.
    pub rows: u64,
    /// `Σ loss_mean · rows` over the parts.
    pub loss_sum: f64,
    /// Each metric's sum.
    pub metrics: Vec<(&'static str, f64)>,
}

impl Totals {
    fn add(&mut self, rows: u64, loss_mean: f64, metrics: &[(&'static str, f64)]) {
        self.rows += rows;
        self.loss_sum += loss_mean * rows as f64;
        for &(name, v) in metrics {
            match self.metrics.iter_mut().find(|(n, _)| *n == name) {
                Some((_, sum)) => *sum += v,
                None => self.metrics.push((name, v)),
            }
        }
    }

    /// The sums of each replica's part of a batch (an empty part adds nothing).
    pub(super) fn of_parts(parts: &[PartResult]) -> Totals {
        let mut totals = Totals::default();
        for (rows, loss, metrics) in parts {
            totals.add(*rows as u64, *loss, metrics);
        }
        totals
    }

    /// Adds `other`'s rows, loss and metrics.
    pub fn merge(&mut self, other: &Totals) {
        self.rows += other.rows;
        self.loss_sum += other.loss_sum;
        for &(name, v) in &other.metrics {
            self.add(0, 0.0, &[(name, v)]);
        }
    }

    /// The mean loss per row.
    pub fn loss(&self) -> f64 {
        if self.rows == 0 { f64::NAN } else { self.loss_sum / self.rows as f64 }
    }

    /// Metric `name` per row.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let rows = self.rows.max(1) as f64;
        self.metrics.iter().find(|(n, _)| *n == name).map(|(_, v)| v / rows)
    }

    pub(super) fn summary(&self) -> String {
        let mut s = format!("loss {:.4}", self.loss());
        for (name, _) in &self.metrics {
            s.push_str(&format!(" {name} {:.4}", self.metric(name).unwrap_or(f64::NAN)));
        }
        s
    }
}

/// One pass over a dataset (or several, [`merge`](EpochReport::merge)d): what it
/// computed and where its time went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpochReport {
    /// The epoch (0 for the first).
    pub epoch: u64,
    /// Global batches.
    pub steps: u64,
    /// Loss and metrics.
    pub totals: Totals,
    /// Wall time of the pass.
    pub wall: Duration,
    /// Time the training loop waited for the next batch from the pipeline.
    pub data_wait: Duration,
    /// Time in steps (forward, backward, all-reduce, optimizer).
    pub compute: Duration,
    /// Corrupt records this process's readers skipped in the pass (`on_corrupt: skip` or
    /// `skip_file`): never dropped without a word.
    pub skipped_records: u64,
    /// Files whose rest they skipped (`skip_file`, a damaged compressed stream).
    pub skipped_files: u64,
    /// Elements a `map(on_error: skip)` dropped in the pass (tf.data's `ignore_errors`):
    /// the sum over the pipeline's stages, whose statistics keep the first messages.
    pub skipped_elements: u64,
    /// Whether this pass's pipeline was started before its turn, while the previous
    /// training pass ended ([`Trainer::overlap_epochs`](super::Trainer::overlap_epochs)).
    pub started_ahead: bool,
}

impl EpochReport {
    /// Adds `other`'s steps, rows, loss, metrics and times (the epoch stays this one's).
    pub fn merge(&mut self, other: &EpochReport) {
        self.steps += other.steps;
        self.totals.merge(&other.totals);
        self.wall += other.wall;
        self.data_wait += other.data_wait;
        self.compute += other.compute;
        self.skipped_records += other.skipped_records;
        self.skipped_files += other.skipped_files;
        self.skipped_elements += other.skipped_elements;
    }

    /// Rows per second of wall time.
    pub fn examples_per_sec(&self) -> f64 {
        self.totals.rows as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The share of the loop's time spent waiting for data, in percent.
    pub fn data_stall_pct(&self) -> f64 {
        let total = (self.data_wait + self.compute).as_secs_f64();
        if total > 0.0 { 100.0 * self.data_wait.as_secs_f64() / total } else { 0.0 }
    }
}

impl std::fmt::Display for EpochReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "epoch {}: {} examples in {} steps, {:.2} s, {:.0} examples/s, data stall {:.1}%, {}",
            self.epoch + 1,
            self.totals.rows,
            self.steps,
            self.wall.as_secs_f64(),
            self.examples_per_sec(),
            self.data_stall_pct(),
            self.totals.summary()
        )?;
        if self.skipped_records > 0 || self.skipped_files > 0 {
            let s = if self.skipped_records == 1 { "" } else { "s" };
            write!(f, ", skipped {} corrupt record{s}", self.skipped_records)?;
            if self.skipped_files > 0 {
                write!(
                    f,
                    " ({} file{} cut short)",
                    self.skipped_files,
                    if self.skipped_files == 1 { "" } else { "s" }
                )?;
            }
        }
        if self.skipped_elements > 0 {
            let s = if self.skipped_elements == 1 { "" } else { "s" };
            write!(f, ", skipped {} element{s} whose map failed", self.skipped_elements)?;
        }
        Ok(())
    }
}
