//! The runner of generated pipelines: what `sluice run` executes. A generated module's
//! `run` is `runner::run(args, NAME, Params::from_args, dataset)`, and the `main` of a
//! generated runner binary is [`main`] over the file's pipelines.
//!
//! A run makes the parameters from `--set NAME=VALUE` pairs, builds the dataset once and
//! pulls `--epochs` full passes from it (a fresh stream each; with `--overlap` each turn
//! overlapped: `runner/epochs.rs`), then reports records, batches, time (and each
//! epoch's), throughput, peak RSS and the per-stage statistics with the bottleneck named:
//! as text, or as one JSON object on stdout with `--json`.
//!
//! With `--show N` (`sluice show`) it prints the first `N` elements of one pass as JSON
//! lines instead (`runner/show.rs`: the `Show` impls of `abi::show`), then stops pulling.
//! With `--output DIR [--format tfrecord|parquet|webdataset] [--shards N] [--compression C]
//! [--row-group N]` it writes one pass as shards instead (`runner/export.rs`: TFRecord of
//! `tf.train.Example`s, Parquet or WebDataset tars, from the `ToExample` impls of
//! `abi::export`).
//!
//! Exit status: 0 on success, 1 when the pipeline fails on its data (the runtime's error
//! names the file and record), 2 for a bad invocation or a bad parameter. Nothing here
//! panics on user input.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use sluice_runtime::abi::Rows;
use sluice_runtime::abi::export::ToExample;
use sluice_runtime::abi::show::Show;
use sluice_runtime::output::Format;
use sluice_runtime::stage::{Ctx, Dataset, RuntimeOptions, StatsReport};
use sluice_runtime::tfrecord::ReaderStats;

mod epochs;
mod export;
mod show;

pub use export::Export;

/// How to run a pipeline: the runner binary's command line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunArgs {
    /// `--set NAME=VALUE` pairs, in order, for the pipeline's `Params::from_args`.
    pub set: Vec<(String, String)>,
    /// Full passes over the dataset.
    pub epochs: u64,
    /// Start each epoch's pass before the last one ends (`--overlap`).
    pub overlap: bool,
    /// Print one JSON object on stdout instead of the text report.
    pub json: bool,
    /// Show a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// RAM (bytes) that AUTOTUNE may spend on buffers; unlimited when `None`.
    pub memory_budget: Option<usize>,
    /// The CPU budget: the most threads the pipeline's maps, parsing readers and batch-row
    /// splits keep busy at once
    /// (`--threads N`, else the pipeline's declared `threads N;`; the cores available when `None`).
    pub threads: Option<usize>,
    /// Print the first this many elements of one pass as JSON lines instead of running
    /// (`u64::MAX`: every one); `--show N|all`.
    pub show: Option<u64>,
    /// With `--show`: print each element whole, not abbreviated for a terminal
    /// (`--full`; a `run` whose stdout is not a terminal sets it).
    pub full: bool,
    /// Write one pass as shards instead of running (`--output DIR`, `--format F`,
    /// `--shards N`, `--compression C`, `--row-group N`).
    pub export: Option<Export>,
    /// The backend that runs the pipeline, as the report names it: `compiled` (a generated
    /// runner), or `interpreted` (`sluice-engine`, in the `sluice` tool itself).
    pub engine: &'static str,
}

impl RunArgs {
    /// The runtime options these arguments ask for (memory budget, CPU budget).
    pub fn options(&self) -> RuntimeOptions {
        RuntimeOptions { memory_budget: self.memory_budget, cores: self.threads }
    }

    /// These arguments, with `budget` (the pipeline's declared one) when they set none
    /// (`--memory-budget-mb` overrides the declaration).
    pub fn or_budget(&self, budget: Option<usize>) -> RunArgs {
        RunArgs { memory_budget: self.memory_budget.or(budget), ..self.clone() }
    }

    /// These arguments, with `threads` (the pipeline's declared `threads N;`) when they
    /// set none (`--threads` overrides the declaration).
    pub fn or_threads(&self, threads: Option<usize>) -> RunArgs {
        RunArgs { threads: self.threads.or(threads), ..self.clone() }
    }
}

impl Default for RunArgs {
    fn default() -> Self {
        RunArgs {
            set: Vec::new(),
            epochs: 1,
            overlap: false,
            json: false,
            progress: true,
            memory_budget: None,
            threads: None,
            show: None,
            full: false,
            export: None,
            engine: "compiled",
        }
    }
}

/// Exit status of a bad invocation or parameter.
const USAGE: u8 = 2;
/// Exit status of a pipeline that failed on its data.
const FAILED: u8 = 1;

/// Runs pipeline `name`: parameters from `args.set` through `params`, the dataset from
/// `build`, `args.epochs` passes, then the report on stdout. Diagnostics go to stderr.
/// What a `device cuda` pipeline's `run` says first: the runner runs its device tail as
/// the CPU twin (the GPU path is the trainer's device feed, `sluice::torch::TailFeed`).
pub fn note_cpu_twin(name: &str) {
    eprintln!(
        "sluice: `{name}` declares `device cuda`: the runner runs its tail after `batch` as the CPU twin \
         (a training loop runs it on the GPU through sluice::torch::TailFeed)"
    );
}

pub fn run<P, D>(
    args: &RunArgs,
    name: &str,
    params: impl FnOnce(&[(String, String)]) -> Result<P, String>,
    build: impl FnOnce(&P) -> sluice_runtime::Result<D>,
) -> ExitCode
where
    D: Dataset,
    D::Item: Rows + Show + ToExample,
{
    let progress = args.progress && std::io::stderr().is_terminal();
    // Elements are abbreviated only for a person reading a terminal.
    let args = &RunArgs { full: args.full || !std::io::stdout().is_terminal(), ..args.clone() };
    ExitCode::from(run_to(
        args,
        name,
        params,
        build,
        progress,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ))
}

/// [`run`] writing to `out` and `err`; gives the exit status.
fn run_to<P, D>(
    args: &RunArgs,
    name: &str,
    params: impl FnOnce(&[(String, String)]) -> Result<P, String>,
    build: impl FnOnce(&P) -> sluice_runtime::Result<D>,
    progress: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8
where
    D: Dataset,
    D::Item: Rows + Show + ToExample,
{
    let params = match params(&args.set) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(err, "error: pipeline `{name}`: {e}");
            return USAGE;
        }
    };
    if let Some(n) = args.show {
        return show::show(&params, build, args, n, name, out, err);
    }
    if let Some(to) = &args.export {
        return export::export(&params, build, args, to, name, out, err);
    }
    let bar = progress.then(|| progress_bar(name));
    let outcome = build(&params).and_then(|ds| run_epochs(&ds, args, bar.as_ref()));
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(err, "error: pipeline `{name}`: {e}");
            return FAILED;
        }
    };
    let peak_rss = peak_rss_bytes();
    let written = if args.json {
        writeln!(out, "{}", outcome.json(name, peak_rss))
    } else {
        write!(out, "{}", outcome.text(name, peak_rss))
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => 0,
        // Stdout closed early (`| head`): the run itself succeeded, but say so.
        Err(e) => {
            let _ = writeln!(err, "error: cannot write the report: {e}");
            FAILED
        }
    }
}

/// A spinner with the records so far and their rate.
fn progress_bar(name: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {prefix}{msg} {elapsed} {human_pos} records ({per_sec:0})")
    {
        bar.set_style(style);
    }
    bar.set_prefix(name.to_string());
    bar
}

/// What a run gave.
#[derive(Debug)]
struct Outcome {
    epochs: u64,
    records: u64,
    batches: u64,
    elapsed: Duration,
    /// Each epoch's seconds, turn to turn (they add up to `elapsed`).
    epoch_seconds: Vec<f64>,
    report: StatsReport,
    /// What the TFRecord readers delivered and skipped (`on_corrupt: skip|skip_file`).
    io: ReaderStats,
    /// The corrupt records skipped in each epoch.
    epoch_skipped: Vec<u64>,
    /// The memory budget AUTOTUNE ran within, in bytes (`None`: unlimited).
    budget: Option<usize>,
    /// The CPU budget (threads) and the most threads it had given out at once (maps,
    /// parsing readers, batch-row splits; `peak_map_workers` in `--json`, its first name).
    threads: (usize, usize),
    /// The backend that ran it (`RunArgs::engine`).
    engine: &'static str,
}

/// Pulls `args.epochs` full passes from `ds` ([`epochs::each_pass`]). With a `bar`, a
/// thread redraws it ten times a second from a counter the passes store to, so the bar
/// costs a plain store per element.
fn run_epochs<D>(ds: &D, args: &RunArgs, bar: Option<&ProgressBar>) -> sluice_runtime::Result<Outcome>
where
    D: Dataset,
    D::Item: Rows,
{
    let position = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let ticker = bar.map(|bar| {
            s.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    bar.set_position(position.load(Ordering::Relaxed));
                    std::thread::park_timeout(Duration::from_millis(100));
                }
            })
        });
        let outcome = passes(ds, args, bar, &position);
        done.store(true, Ordering::Release);
        if let Some(t) = ticker {
            t.thread().unpark();
        }
        outcome
    })
}

/// The passes of [`run_epochs`], storing the records so far to `position`.
fn passes<D>(
    ds: &D,
    args: &RunArgs,
    bar: Option<&ProgressBar>,
    position: &AtomicU64,
) -> sluice_runtime::Result<Outcome>
where
    D: Dataset,
    D::Item: Rows,
{
    let ctx = Ctx::new(&args.options());
    let start = Instant::now();
    let (mut records, mut batches) = (0u64, 0u64);
    let mut current = u64::MAX;
    // One context for every pass: each is its own epoch (a reshuffling `shuffle` or a
    // random op sees a new one) and the statistics add up over them.
    let passes = epochs::each_pass(ds, &ctx, args.epochs, args.overlap, |epoch, item| {
        if let Some(bar) = bar
            && args.epochs > 1
            && epoch != current
        {
            current = epoch;
            bar.set_message(format!(" epoch {}/{}", epoch + 1, args.epochs));
        }
        records += item.rows();
        batches += u64::from(item.is_batch());
        position.store(records, Ordering::Relaxed);
    })?;
    let elapsed = start.elapsed();
    let mut report = ctx.report();
    report.wall = elapsed;
    let io = ctx.reader_stats();
    Ok(Outcome {
        epochs: args.epochs,
        records,
        batches,
        elapsed,
        epoch_seconds: passes.iter().map(|p| p.seconds).collect(),
        report,
        io,
        epoch_skipped: (0..args.epochs).map(|e| ctx.reader_stats_of(e).skipped_records).collect(),
        budget: args.memory_budget,
        threads: (ctx.threads().limit(), ctx.threads().peak()),
        engine: args.engine,
    })
}

/// What the readers skipped, for the text report: nothing when nothing was; else a
/// count and the first events, each naming file, record and byte offset.
fn skipped_text(io: &ReaderStats) -> String {
    if io.skipped_records == 0 {
        return String::new();
    }
    let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut out = format!(
        "skipped {} ({} bytes){}; {} delivered\n",
        plural(io.skipped_records, "corrupt record"),
        io.skipped_bytes,
        match io.skipped_files {
            0 => String::new(),
            n => format!(", the rest of {}", plural(n, "file")),
        },
        plural(io.records, "record"),
    );
    for e in &io.events {
        let rest = if e.rest_of_file { ", rest of file skipped" } else { "" };
        out.push_str(&format!(
            "  {}: record {} at byte offset {}: {}{rest}\n",
            e.path.display(),
            e.record,
            e.offset,
            e.kind
        ));
    }
    if io.skipped_records as usize > io.events.len() {
        out.push_str(&format!("  … and {} more\n", io.skipped_records as usize - io.events.len()));
    }
    out
}

/// What the readers skipped, for `--json`: always there, zeros when nothing was;
/// `per_epoch` counts each epoch's skipped records.
fn skipped_json(io: &ReaderStats, per_epoch: &[u64]) -> Value {
    let events: Vec<Value> = io
        .events
        .iter()
        .map(|e| {
            json!({
                "path": e.path.display().to_string(),
                "record": e.record,
                "offset": e.offset,
                "kind": e.kind.to_string(),
                "rest_of_file": e.rest_of_file,
            })
        })
        .collect();
    json!({
        "records": io.skipped_records,
        "bytes": io.skipped_bytes,
        "files": io.skipped_files,
        "per_epoch": per_epoch,
        "events": events,
    })
}

impl Outcome {
    fn records_per_sec(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 { self.records as f64 / s } else { 0.0 }
    }

    /// The text report: a summary line, then the stage table (which names the bottleneck).
    fn text(&self, name: &str, peak_rss: u64) -> String {
        let epochs = if self.epochs == 1 { String::new() } else { format!(" over {} epochs", self.epochs) };
        let budget = match self.budget {
            Some(b) => format!(" (AUTOTUNE budget {:.1} MB)", b as f64 / 1e6),
            None => String::new(),
        };
        let threads = match self.threads {
            (_, 0) => String::new(),
            (limit, peak) => format!(", threads busy at most {peak} of {limit}"),
        };
        let each = match self.epoch_seconds.as_slice() {
            [] | [_] => String::new(),
            s => format!(" ({} s)", s.iter().map(|s| format!("{s:.2}")).collect::<Vec<_>>().join(" + ")),
        };
        let mut text = format!(
            "{name}: {} records in {} batches{epochs}, {:.2} s{each}: {:.0} records/s, peak RSS {:.1} MB{budget}{threads}, engine {}\n{}\n",
            self.records,
            self.batches,
            self.elapsed.as_secs_f64(),
            self.records_per_sec(),
            peak_rss as f64 / 1e6,
            self.engine,
            self.report,
        );
        text.push_str(&skipped_text(&self.io));
        if self.io.pruned_row_groups > 0 {
            let n = self.io.pruned_row_groups;
            text.push_str(&format!(
                "skipped {n} Parquet row group{} whose statistics showed the filter after the reader passes none of its rows\n",
                if n == 1 { "" } else { "s" }
            ));
        }
        text
    }

    /// The JSON report (one object).
    fn json(&self, name: &str, peak_rss: u64) -> Value {
        json!({
            "pipeline": name,
            "engine": self.engine,
            "epochs": self.epochs,
            "records": self.records,
            "batches": self.batches,
            "seconds": self.elapsed.as_secs_f64(),
            "epoch_seconds": self.epoch_seconds,
            "records_per_sec": self.records_per_sec(),
            "peak_rss_bytes": peak_rss,
            "memory_budget_bytes": self.budget,
            "threads": self.threads.0,
            "peak_map_workers": self.threads.1,
            "stages": stages_json(&self.report),
            "bottleneck": self.report.bottleneck().map(|b| b.name.clone()),
            "skipped": skipped_json(&self.io, &self.epoch_skipped),
            "pruned_row_groups": self.io.pruned_row_groups,
        })
    }
}

/// The per-stage statistics as a JSON array, upstream first: `name`, `elements`, `bytes`,
/// `parallelism`, `busy_s`, `wait_input_s`, `wait_output_s`, and `skipped_errors` (the
/// elements a `map(on_error: skip)` dropped) with `first_skipped_errors` (their first
/// messages) per stage; `tokens`, `token_slots` and `packing_efficiency` for a `pack` stage.
pub fn stages_json(report: &StatsReport) -> Value {
    report
        .stages
        .iter()
        .map(|s| {
            let mut stage = json!({
                "name": s.name, "elements": s.elements, "bytes": s.bytes, "parallelism": s.parallelism,
                "busy_s": s.busy.as_secs_f64(), "wait_input_s": s.wait_input.as_secs_f64(),
                "wait_output_s": s.wait_output.as_secs_f64(),
                "skipped_errors": s.skipped_errors, "first_skipped_errors": s.first_skipped,
            });
            // A stage making fixed-length token rows (`pack`): its packing efficiency.
            if let Some(e) = s.packing_efficiency() {
                stage["tokens"] = json!(s.tokens);
                stage["token_slots"] = json!(s.token_slots);
                stage["packing_efficiency"] = json!(e);
            }
            stage
        })
        .collect()
}

/// Peak resident set size of this process (`VmHWM` of `/proc/self/status`), in bytes;
/// 0 where there is no such file.
pub fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    kib * 1024
}

/// A generated pipeline's `run`.
pub type Pipeline = fn(&RunArgs) -> ExitCode;

/// The `main` of a generated runner binary over its file's pipelines (name and `run`):
/// `[PIPELINE] [--set NAME=VALUE]... [--epochs N] [--overlap] [--json] [--no-progress]
/// [--memory-budget-mb N] [--threads N] [--show N|all [--full]]`. PIPELINE may be left out when there is one.
pub fn main(pipelines: &[(&str, Pipeline)]) -> ExitCode {
    let mut argv = std::env::args_os();
    let program = argv.next().map_or_else(|| "runner".into(), |p| p.to_string_lossy().into_owned());
    let names: Vec<&str> = pipelines.iter().map(|(n, _)| *n).collect();
    match parse(argv, &names) {
        Ok(Command::Help) => {
            print!("{}", usage(&program, &names));
            ExitCode::SUCCESS
        }
        Ok(Command::Run(i, args)) => (pipelines[i].1)(&args),
        Err(e) => {
            eprintln!("error: {e}");
            eprint!("{}", usage(&program, &names));
            ExitCode::from(USAGE)
        }
    }
}

/// Parses a runner's command line after the program name (`[PIPELINE] [--set
/// NAME=VALUE]... [--epochs N] ...`, as [`main`] does) for a file whose pipelines are
/// `names`: the pipeline's index and its arguments, or `None` for `--help`. `sluice run
/// --engine interpreted` parses the flags it passes a compiled runner with it, so both
/// backends take (and refuse) the same ones.
pub fn parse_args(argv: Vec<OsString>, names: &[&str]) -> Result<Option<(usize, RunArgs)>, String> {
    match parse(argv, names)? {
        Command::Help => Ok(None),
        Command::Run(i, args) => Ok(Some((i, args))),
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
enum Command {
    Help,
    /// Run the pipeline at this index.
    Run(usize, RunArgs),
}

fn usage(program: &str, names: &[&str]) -> String {
    format!(
        "usage: {program} [PIPELINE] [--set NAME=VALUE]... [--epochs N] [--overlap] [--json] [--no-progress] \
         [--memory-budget-mb N] [--show N|all [--full]] [--output DIR [--format tfrecord|parquet|webdataset] [--shards N] [--compression C] [--row-group N]]\npipelines: {}\n",
        names.join(", ")
    )
}

/// Parses the arguments after the program name; `names` are the file's pipelines.
fn parse(argv: impl IntoIterator<Item = OsString>, names: &[&str]) -> Result<Command, String> {
    let mut args = RunArgs::default();
    let mut pipeline: Option<String> = None;
    let (mut output, mut shards, mut compression, mut format, mut row_group) = (None, None, None, None, None);
    let mut argv = argv.into_iter();
    while let Some(arg) = argv.next() {
        let arg =
            arg.into_string().map_err(|a| format!("argument `{}` is not UTF-8", a.to_string_lossy()))?;
        // `--flag=value` or `--flag value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => argv
                    .next()
                    .ok_or_else(|| format!("`{flag}` needs {what}"))?
                    .into_string()
                    .map_err(|a| format!("argument `{}` is not UTF-8", a.to_string_lossy())),
            }
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--set" => {
                let v = value("NAME=VALUE")?;
                let (n, x) = v.split_once('=').ok_or_else(|| format!("`--set {v}`: expected NAME=VALUE"))?;
                args.set.push((n.trim().to_string(), x.to_string()));
            }
            "--epochs" => {
                let v = value("a number")?;
                args.epochs = match v.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("`--epochs {v}`: expected a positive integer")),
                };
            }
            "--memory-budget-mb" => {
                let v = value("a number of MiB")?;
                let mb: usize = v.parse().map_err(|_| format!("`--memory-budget-mb {v}`: expected MiB"))?;
                let bytes =
                    mb.checked_mul(1 << 20).ok_or_else(|| format!("`--memory-budget-mb {v}`: too large"))?;
                args.memory_budget = Some(bytes);
            }
            "--threads" => {
                let v = value("a number")?;
                args.threads = Some(match v.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("`--threads {v}`: expected a positive integer")),
                });
            }
            "--show" => {
                let v = value("a number or `all`")?;
                args.show = Some(match v.parse() {
                    Ok(n) if n > 0 => n,
                    _ if v == "all" => u64::MAX,
                    _ => return Err(format!("`--show {v}`: expected a positive integer or `all`")),
                });
            }
            "--output" => output = Some(PathBuf::from(value("a directory")?)),
            "--shards" => {
                let v = value("a number")?;
                shards = Some(match v.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("`--shards {v}`: expected a positive integer")),
                });
            }
            "--compression" => compression = Some(value("a compression")?),
            "--format" => format = Some(value("`tfrecord`, `parquet` or `webdataset`")?),
            "--row-group" => {
                let v = value("a number of rows")?;
                row_group = Some(match v.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(format!("`--row-group {v}`: expected a positive number of rows")),
                });
            }
            "--json" | "--no-progress" | "--overlap" | "--full" if inline.is_some() => {
                return Err(format!("`{flag}` takes no value"));
            }
            "--json" => args.json = true,
            "--overlap" => args.overlap = true,
            "--full" => args.full = true,
            "--no-progress" => args.progress = false,
            f if f.starts_with('-') && f.len() > 1 => return Err(format!("unknown flag `{f}`")),
            _ if pipeline.is_some() => return Err(format!("unexpected argument `{arg}`")),
            _ => pipeline = Some(arg),
        }
    }
    match output {
        Some(dir) if args.show.is_none() => {
            let format =
                Format::parse(format.as_deref().unwrap_or("tfrecord"), compression.as_deref(), row_group)?;
            args.export = Some(Export { dir, shards: shards.unwrap_or(1), format });
        }
        Some(_) => return Err("`--show` and `--output` cannot be combined".into()),
        None if shards.is_some() || compression.is_some() || format.is_some() || row_group.is_some() => {
            return Err(
                "`--shards`, `--format`, `--compression` and `--row-group` need `--output DIR`".into()
            );
        }
        None => {}
    }
    let index = match pipeline {
        Some(p) => names
            .iter()
            .position(|n| *n == p)
            .ok_or_else(|| format!("no pipeline `{p}` (the file has {})", names.join(", ")))?,
        None if names.len() == 1 => 0,
        None if names.is_empty() => return Err("the file has no pipeline".into()),
        None => return Err(format!("name the pipeline to run: {}", names.join(", "))),
    };
    Ok(Command::Run(index, args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_runtime::output::ParquetCompression;
    use sluice_runtime::stage::range;
    use sluice_runtime::tfrecord::Compression;

    fn parse_strs(args: &[&str], names: &[&str]) -> Result<Command, String> {
        parse(args.iter().map(OsString::from), names)
    }

    #[test]
    fn parses_every_flag_in_both_forms() {
        let c = parse_strs(
            &[
                "b",
                "--set",
                "n=3",
                "--set=files=a=b",
                "--epochs=2",
                "--json",
                "--no-progress",
                "--overlap",
                "--memory-budget-mb",
                "4",
                "--threads",
                "3",
                "--show=all",
                "--full",
            ],
            &["a", "b"],
        );
        let expected = RunArgs {
            set: vec![("n".into(), "3".into()), ("files".into(), "a=b".into())],
            epochs: 2,
            overlap: true,
            json: true,
            progress: false,
            memory_budget: Some(4 << 20),
            threads: Some(3),
            show: Some(u64::MAX),
            full: true,
            export: None,
            engine: "compiled",
        };
        assert_eq!(c, Ok(Command::Run(1, expected)));
        assert_eq!(parse_strs(&[], &["only"]), Ok(Command::Run(0, RunArgs::default())));
        assert_eq!(parse_strs(&["--help"], &["a"]), Ok(Command::Help));
        let c = parse_strs(&["--output", "d", "--shards=3", "--compression", "gzip"], &["a"]);
        let export = Export { dir: "d".into(), shards: 3, format: Format::TfRecord(Compression::Gzip) };
        assert_eq!(c, Ok(Command::Run(0, RunArgs { export: Some(export), ..RunArgs::default() })));
        let c = parse_strs(
            &["--output", "d", "--format=parquet", "--compression", "zstd", "--row-group", "100"],
            &["a"],
        );
        let format = Format::Parquet { compression: ParquetCompression::Zstd, row_group: 100 };
        let export = Export { dir: "d".into(), shards: 1, format };
        assert_eq!(c, Ok(Command::Run(0, RunArgs { export: Some(export), ..RunArgs::default() })));
        let c = parse_strs(&["--output", "d", "--format", "webdataset", "--compression", "gzip"], &["a"]);
        let export = Export { dir: "d".into(), shards: 1, format: Format::WebDataset { gzip: true } };
        assert_eq!(c, Ok(Command::Run(0, RunArgs { export: Some(export), ..RunArgs::default() })));
    }

    #[test]
    fn bad_command_lines_say_why() {
        let err = |args: &[&str]| parse_strs(args, &["a", "b"]).unwrap_err();
        assert_eq!(err(&["c"]), "no pipeline `c` (the file has a, b)");
        assert_eq!(err(&[]), "name the pipeline to run: a, b");
        assert_eq!(err(&["a", "--set", "n"]), "`--set n`: expected NAME=VALUE");
        assert_eq!(err(&["a", "--set"]), "`--set` needs NAME=VALUE");
        assert_eq!(err(&["a", "--epochs", "0"]), "`--epochs 0`: expected a positive integer");
        assert_eq!(err(&["a", "--frobnicate"]), "unknown flag `--frobnicate`");
        assert_eq!(err(&["a", "b"]), "unexpected argument `b`");
        assert_eq!(err(&["a", "--json=yes"]), "`--json` takes no value");
        assert_eq!(err(&["a", "--show", "0"]), "`--show 0`: expected a positive integer or `all`");
        assert_eq!(err(&["a", "--threads=0"]), "`--threads 0`: expected a positive integer");
        assert_eq!(err(&["a", "--show"]), "`--show` needs a number or `all`");
        assert_eq!(
            err(&["a", "--output", "d", "--shards", "0"]),
            "`--shards 0`: expected a positive integer"
        );
        assert_eq!(
            err(&["a", "--shards", "2"]),
            "`--shards`, `--format`, `--compression` and `--row-group` need `--output DIR`"
        );
        assert_eq!(
            err(&["a", "--output=d", "--compression=zlib"]),
            "`--compression zlib` with `--format tfrecord`: expected `none` or `gzip`"
        );
        assert_eq!(
            err(&["a", "--output=d", "--format=csv"]),
            "`--format csv`: expected `tfrecord`, `parquet` or `webdataset`"
        );
        assert_eq!(
            err(&["a", "--output=d", "--row-group=10"]),
            "`--row-group` is for `--format parquet`, not `tfrecord`"
        );
        assert_eq!(
            err(&["a", "--output=d", "--format=parquet", "--compression=brotli"]),
            "`--compression brotli` with `--format parquet`: expected `none`, `snappy`, `zstd`, `gzip` or `lz4`"
        );
        assert_eq!(err(&["a", "--output=d", "--show=1"]), "`--show` and `--output` cannot be combined");
    }

    /// Params of the test pipeline: `n` records.
    fn params(set: &[(String, String)]) -> Result<u64, String> {
        let mut n = 10;
        for (k, v) in set {
            match k.as_str() {
                "n" => n = sluice_runtime::abi::param("n", v)?,
                _ => return Err(format!("unknown parameter `{k}`")),
            }
        }
        Ok(n)
    }

    /// `n` records of 8 bytes in batches of 4; record 7 fails when `n` is 13.
    // `use<>`: the dataset must not borrow the parameters (edition 2024 captures `&u64`).
    fn dataset(n: &u64) -> sluice_runtime::Result<impl Dataset<Item = Vec<Vec<u8>>> + use<>> {
        let fail = *n == 13;
        Ok(range(0..*n)
            .try_map(move |i| {
                if fail && i == 7 { Err(format!("record {i} is bad")) } else { Ok(i.to_le_bytes().to_vec()) }
            })
            .named("encode")
            .chunks(4, false))
    }

    fn run_test(args: &RunArgs) -> (u8, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_to(args, "test", params, dataset, false, &mut out, &mut err);
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    }

    fn with_set(n: &str) -> RunArgs {
        RunArgs { set: vec![("n".into(), n.into())], ..RunArgs::default() }
    }

    #[test]
    fn json_report_counts_records_and_batches_over_epochs() {
        let args = RunArgs { epochs: 3, json: true, ..with_set("10") };
        let (code, out, err) = run_test(&args);
        assert_eq!((code, err.as_str()), (0, ""));
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert_eq!(v["pipeline"], "test");
        assert_eq!(v["epochs"], 3);
        assert_eq!(v["records"], 30);
        assert_eq!(v["batches"], 9);
        for key in ["seconds", "records_per_sec", "peak_rss_bytes"] {
            assert!(v[key].as_f64().is_some(), "{key}: {out}");
        }
        let stages = v["stages"].as_array().unwrap();
        let names: Vec<&str> = stages.iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["encode", "chunks"]);
        assert_eq!(stages[0]["elements"], 30, "counters add up over the epochs");
        for key in ["bytes", "parallelism", "busy_s", "wait_input_s", "wait_output_s"] {
            assert!(stages[0][key].is_number(), "{key}: {out}");
        }
        assert!(v.get("bottleneck").is_some());
        let each = v["epoch_seconds"].as_array().unwrap();
        assert_eq!(each.len(), 3, "{out}");
        assert!(each.iter().all(|s| s.as_f64().is_some_and(|s| s >= 0.0)), "{out}");
        assert_eq!(v["skipped"]["per_epoch"], json!([0, 0, 0]), "{out}");
    }

    #[test]
    fn text_report_has_the_summary_and_the_stage_table() {
        let (code, out, _) = run_test(&with_set("10"));
        assert_eq!(code, 0);
        assert!(out.starts_with("test: 10 records in 3 batches, "), "{out}");
        assert!(out.contains("records/s, peak RSS "), "{out}");
        assert!(out.contains("\nstage "), "{out}");
        assert!(out.contains("\nencode "), "{out}");
    }

    #[test]
    fn a_bad_parameter_is_a_usage_error() {
        let (code, out, err) = run_test(&with_set("many"));
        assert_eq!(code, 2);
        assert_eq!(out, "");
        assert_eq!(
            err,
            "error: pipeline `test`: parameter `n`: expected an unsigned integer, found `many`\n"
        );
    }

    #[test]
    fn a_failing_record_is_a_data_error() {
        let (code, out, err) = run_test(&with_set("13"));
        assert_eq!(code, 1);
        assert_eq!(out, "");
        assert_eq!(err, "error: pipeline `test`: stage `encode`: record 7 is bad\n");
    }
}
