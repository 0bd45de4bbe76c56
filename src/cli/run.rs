//! `sluice run FILE.pipe [PIPELINE] [--set NAME=VALUE]... [--epochs N] [--overlap] [--json]
//! [--output DIR [--format tfrecord|parquet|webdataset] [--shards N] [--compression C]
//! [--row-group ROWS]] [--engine auto|compiled|interpreted]`:
//! runs a pipeline, reporting as `sluice::__private::runner` does. `--engine compiled`
//! compiles the file to Rust and builds it into a runner binary (below); `interpreted`
//! runs the plan in this process with `sluice-engine` (`interpret.rs`); `auto`, the
//! default, takes the runner when one is cached for this plan and the engine otherwise
//! ([`backend`]). `sluice build` builds the runner on purpose.
//!
//! The runner is a small crate, `<cache>/run/<hash>/`: the generated code as
//! `src/pipelines.rs`, a `main` over its pipelines, a path dependency on these sluice
//! sources (without the `cli` feature: no compiler) and a copy of their `Cargo.lock`, so
//! it links exactly the runtime this tool was built from. `<hash>` covers the generated code, the sluice version, the path of its
//! sources, this executable's size and time (a rebuilt `sluice` builds afresh) and the
//! profile. Every runner shares one target directory, so the runtime compiles once. The
//! built binary is kept in the crate directory: running an unchanged pipeline again
//! skips cargo and executes it at once.
//!
//! Environment: `SLUICE_CACHE_DIR` (else `$XDG_CACHE_HOME/sluice`, else
//! `$HOME/.cache/sluice`); `SLUICE_TARGET_DIR` for the shared target directory (default
//! `<cache>/target`); `SLUICE_RUN_PROFILE=dev` builds unoptimized (tests); `CARGO`
//! names the cargo binary; `SLUICE_RUN_FEATURES=parquet` turns the feature on in every
//! runner (a test suite: one build of the runtime for all). A runner itself reads `SLUICE_HUGE_PAGES=1`: keep huge pages
//! (its `main` asks for small ones; to measure against).
//!
//! Exit status: as `sluice check` for the file's diagnostics (1), 2 for a bad invocation,
//! 1 when the runner does not build; otherwise the runner's own (1 on a data error, 2 on
//! a bad parameter).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{BufRead as _, IsTerminal as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context as _;
use clap::Args;
use sha2::{Digest, Sha256};

use super::Failure;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The `.pipe` file.
    file: PathBuf,
    /// The pipeline to run; may be left out when the file has one.
    pipeline: Option<String>,
    /// Sets a parameter of the pipeline (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = name_value)]
    set: Vec<String>,
    /// Full passes over the data.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// Start each epoch's pass while the previous one drains (from the second turn on; the
    /// elements and their order are the same; memory: up to one more pipeline's buffers).
    #[arg(long)]
    overlap: bool,
    /// Print one JSON object (records, batches, seconds, records_per_sec, peak_rss_bytes,
    /// stages, bottleneck) instead of the text report.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// RAM (MiB) that AUTOTUNE may spend on buffers.
    #[arg(long, value_name = "MIB")]
    memory_budget_mb: Option<usize>,
    /// The CPU budget: the most threads the pipeline's maps, parsing readers and batch-row
    /// splits keep busy at once, fixed ones and AUTOTUNE's together (default: the pipeline's
    /// declared `threads N;`, else the cores available).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    threads: Option<u64>,
    /// Write the pipeline's elements (records, not batches) as shards
    /// `DIR/PIPELINE-0000k-of-0000n.EXT` instead of running it, in `--format`.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// With `--output`: `tfrecord` (`tf.train.Example`s: one feature per field, tensors
    /// flattened with `FIELD.shape`; `.idx` sidecars), `parquet` (a column per field,
    /// tensors as fixed-size lists) or `webdataset` (tar shards, a member `KEY.FIELD` per
    /// field, lists and tensors as `.npy`). Default: tfrecord.
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,
    /// With `--output`: how many shards; records are dealt to them round-robin.
    #[arg(long, value_name = "N")]
    shards: Option<u32>,
    /// With `--output`: tfrecord and webdataset `none` or `gzip` (`.tfrecord.gz` without
    /// an index, `.tar.gz`); parquet `snappy` (the default), `zstd`, `gzip`, `lz4` or `none`.
    #[arg(long, value_name = "C")]
    compression: Option<String>,
    /// With `--output --format parquet`: the most rows in a row group (default 65536; a
    /// row group also ends at about 64 MiB).
    #[arg(long, value_name = "ROWS")]
    row_group: Option<u64>,
    /// Say where the runner is and whether it was built or reused.
    #[arg(long)]
    verbose: bool,
    /// Which backend runs the pipeline: `auto` (the compiled runner when one is cached for
    /// this plan, else the engine at once; cargo only for a pipeline the engine does not
    /// run yet), `compiled` (generated Rust built by cargo into a cached runner: the
    /// fastest runs) or `interpreted` (the engine in this tool: no cargo).
    /// `SLUICE_ENGINE` sets the default.
    #[arg(long, value_enum, default_value = "auto", env = "SLUICE_ENGINE")]
    engine: super::interpret::Engine,
}

pub(super) fn name_value(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((name, _)) if !name.trim().is_empty() => Ok(s.to_string()),
        _ => Err(format!("expected NAME=VALUE, found `{s}`")),
    }
}

pub fn run(args: RunArgs) -> Result<ExitCode, Failure> {
    // Parquet output needs the runner's `parquet` feature whatever the pipeline reads.
    let features: &[&str] =
        if args.output.is_some() && args.format.as_deref() == Some("parquet") { &["parquet"] } else { &[] };
    let bin = match backend(&args.file, args.pipeline.as_deref(), args.engine, args.verbose, features)? {
        Backend::Runner(bin) => bin,
        Backend::Exit(code) => return Ok(code),
        Backend::Engine => {
            // The runner's flags without the pipeline's name, which `interpret::run` adds.
            let argv = passthrough(&args).into_iter().skip(usize::from(args.pipeline.is_some())).collect();
            return super::interpret::run(&args.file, args.pipeline.as_deref(), argv);
        }
    };
    let mut command = Command::new(&bin);
    command.args(passthrough(&args));
    exec(command, &format!("sluice run {}", args.file.display()))
}

/// Whether [`runner`] builds a runner that is not cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Build {
    /// Build it; with `progress`, cargo's messages are shown as it works (else only when
    /// it fails).
    Yes { progress: bool },
    /// Only look in the cache (`--engine auto`: nothing is compiled behind the user's back).
    No,
}

/// The backend `--engine` picks for `pipeline` of `file`.
#[derive(Debug)]
pub(super) enum Backend {
    /// The compiled runner (cached, or just built).
    Runner(PathBuf),
    /// The engine, in this process.
    Engine,
    /// The file has errors (printed): exit with this status.
    Exit(ExitCode),
}

/// `--engine`'s choice: `compiled` builds the runner when it is not cached; `interpreted`
/// is the engine; `auto` is the cached runner when there is one for this plan, else the
/// engine at once, and cargo only for a pipeline the engine does not run yet (saying why).
pub(super) fn backend(
    file: &Path,
    pipeline: Option<&str>,
    engine: super::interpret::Engine,
    verbose: bool,
    features: &[&str],
) -> Result<Backend, Failure> {
    use super::interpret::Engine;
    let build = match engine {
        Engine::Interpreted => return Ok(Backend::Engine),
        Engine::Compiled => Build::Yes { progress: false },
        Engine::Auto => Build::No,
    };
    match runner(file, pipeline, verbose, build, features)? {
        Err(code) => return Ok(Backend::Exit(code)),
        Ok(Some(bin)) => return Ok(Backend::Runner(bin)),
        Ok(None) => {}
    }
    match super::interpret::refusal(file, pipeline)? {
        None => {
            if verbose {
                sayln!("sluice: no runner is built for this plan: running it in the engine");
            }
            Ok(Backend::Engine)
        }
        // Code of the user's: no runner of this tool can link it either.
        Some(e @ sluice_engine::EngineError::Extern { .. }) => {
            Err(Failure::Data(anyhow::anyhow!("{}: {e}", file.display())))
        }
        Some(why) => {
            sayln!("sluice: {why}; building the runner instead (`sluice build` does it ahead of time)");
            match runner(file, pipeline, verbose, Build::Yes { progress: false }, features)? {
                Ok(bin) => Ok(Backend::Runner(bin.expect("built"))),
                Err(code) => Ok(Backend::Exit(code)),
            }
        }
    }
}

/// The runner binary of `file` (built, or the cached one; `Ok(None)` when it is not
/// cached and `build` is [`Build::No`]), after checking that `pipeline` is one of its
/// pipelines (or that it has one when `None`); `Err(exit status)` when the file has
/// errors, which are printed. The runner has the `sluice` `features` besides those the
/// plan needs. `sluice run`, `show` and `build` share it.
pub(super) fn runner(
    file: &Path,
    pipeline: Option<&str>,
    verbose: bool,
    build: Build,
    features: &[&str],
) -> Result<Result<Option<PathBuf>, ExitCode>, Failure> {
    let source = super::check::read_source(file)?;
    let compilation = sluice_compiler::compile(&source);
    let Some(generated) = super::emit::generate(file, &source, &compilation)? else {
        return Ok(Err(ExitCode::from(1)));
    };
    if build == Build::No && compilation.pipelines.iter().any(|p| !p.decls.externs.is_empty()) {
        // No runner of this file can exist; the engine says why for the pipelines it
        // cannot run either.
        return Ok(Ok(None));
    }
    refuse_externs(file, &source, &compilation.pipelines)?;
    let names = &generated.pipelines;
    match pipeline {
        Some(p) if !names.iter().any(|n| n == p) => {
            return Err(Failure::Usage(format!(
                "{}: no pipeline `{p}` (the file has {})",
                file.display(),
                names.join(", ")
            )));
        }
        None if names.is_empty() => {
            return Err(Failure::Usage(format!("{}: the file has no pipeline to run", file.display())));
        }
        None if names.len() > 1 => {
            return Err(Failure::Usage(format!(
                "{}: name the pipeline to run: {}",
                file.display(),
                names.join(", ")
            )));
        }
        _ => {}
    }
    let mut cache = Cache::from_env()?;
    for f in features {
        if !cache.features.iter().any(|g| g == f) {
            cache.features.push(f.to_string());
        }
    }
    let runner = Runner::new(&cache, &generated.to_pretty_string(), names, file);
    let bin = match (runner.cached(), build) {
        (Some(bin), _) => {
            if verbose {
                sayln!("sluice: running the cached runner {}", bin.display());
            }
            bin
        }
        (None, Build::No) => return Ok(Ok(None)),
        (None, Build::Yes { progress }) => {
            sayln!("sluice: compiling {}", file.display());
            let bin = runner.build(&cache, progress || std::io::stderr().is_terminal())?;
            if verbose {
                sayln!("sluice: built the runner {}", bin.display());
            }
            bin
        }
    };
    Ok(Ok(Some(bin)))
}

/// A runner links no Rust but the generated code and sluice's, so it cannot call the
/// user's `extern fn`s: a file that declares one is compiled in the user's crate
/// (`build.rs`) instead. (Every pipeline of a file is in the one runner, so one `extern
/// fn` anywhere in the file stops them all.)
pub(super) fn refuse_externs(
    file: &Path,
    source: &str,
    pipelines: &[sluice_compiler::Pipeline],
) -> Result<(), Failure> {
    let Some((pipeline, f)) = pipelines.iter().find_map(|c| Some((&c.decls.name, c.decls.externs.first()?)))
    else {
        return Ok(());
    };
    let (line, col) = sluice_compiler::diagnostic::line_col(source, f.span.start);
    Err(Failure::Data(anyhow::anyhow!(
        "{}:{line}:{col}: pipeline `{pipeline}` calls `extern fn {}`, Rust code of yours that `sluice run` \
         cannot link; compile the file in your crate with `sluice_compiler::build` (build.rs) instead",
        file.display(),
        f.path
    )))
}

/// The runner's arguments for the flags of `sluice run`.
fn passthrough(args: &RunArgs) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    out.extend(args.pipeline.iter().map(OsString::from));
    for s in &args.set {
        out.extend(["--set".into(), s.into()]);
    }
    out.extend(["--epochs".into(), args.epochs.to_string().into()]);
    if args.overlap {
        out.push("--overlap".into());
    }
    if args.json {
        out.push("--json".into());
    }
    if args.no_progress {
        out.push("--no-progress".into());
    }
    if let Some(mb) = args.memory_budget_mb {
        out.extend(["--memory-budget-mb".into(), mb.to_string().into()]);
    }
    if let Some(n) = args.threads {
        out.extend(["--threads".into(), n.to_string().into()]);
    }
    if let Some(dir) = &args.output {
        out.extend(["--output".into(), dir.into()]);
    }
    if let Some(n) = args.shards {
        out.extend(["--shards".into(), n.to_string().into()]);
    }
    if let Some(c) = &args.compression {
        out.extend(["--compression".into(), c.into()]);
    }
    if let Some(f) = &args.format {
        out.extend(["--format".into(), f.into()]);
    }
    if let Some(n) = args.row_group {
        out.extend(["--row-group".into(), n.to_string().into()]);
    }
    out
}

/// Replaces this process with the runner (named `arg0` in its messages).
#[cfg(unix)]
pub(super) fn exec(mut command: Command, arg0: &str) -> Result<ExitCode, Failure> {
    use std::os::unix::process::CommandExt;
    let e = command.arg0(arg0).exec();
    Err(Failure::Data(
        anyhow::Error::new(e).context(format!("cannot run {}", command.get_program().display())),
    ))
}

/// Runs the runner and exits as it did.
#[cfg(not(unix))]
pub(super) fn exec(mut command: Command, _arg0: &str) -> Result<ExitCode, Failure> {
    let status = command.status().with_context(|| format!("cannot run {}", command.get_program().display()));
    let code = status.map_err(Failure::Data)?.code().unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The sluice sources runners build against (this package's manifest directory).
pub(super) const SLUICE_SOURCES: &str = env!("CARGO_MANIFEST_DIR");

/// Which cargo profile builds runners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Profile {
    Release,
    /// Unoptimized: quick to build, for tests.
    Dev,
}

impl Profile {
    /// The directory of the target directory cargo builds this profile into.
    pub(super) fn dir(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Dev => "debug",
        }
    }
}

/// Where runners are built and kept, and how.
#[derive(Debug)]
pub(super) struct Cache {
    /// `<cache>/run`: one crate directory per runner.
    pub(super) runs: PathBuf,
    /// The target directory every runner shares.
    pub(super) target: PathBuf,
    pub(super) profile: Profile,
    pub(super) cargo: OsString,
    /// Features of `sluice` every runner turns on besides those its code needs
    /// (`SLUICE_RUN_FEATURES`).
    pub(super) features: Vec<String>,
}

impl Cache {
    pub(super) fn from_env() -> Result<Cache, Failure> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = var("SLUICE_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("sluice")))
            .or_else(|| var("HOME").map(|h| h.join(".cache").join("sluice")))
            .ok_or_else(|| {
                Failure::Usage("no cache directory for the runner: set SLUICE_CACHE_DIR".into())
            })?;
        let absolute = |p: PathBuf| {
            std::path::absolute(&p)
                .map_err(|e| Failure::Usage(format!("cache directory {}: {e}", p.display())))
        };
        let dir = absolute(dir)?;
        let target = absolute(var("SLUICE_TARGET_DIR").unwrap_or_else(|| dir.join("target")))?;
        let profile = match std::env::var("SLUICE_RUN_PROFILE").as_deref() {
            Err(_) | Ok("" | "release") => Profile::Release,
            Ok("dev") => Profile::Dev,
            Ok(other) => {
                return Err(Failure::Usage(format!(
                    "SLUICE_RUN_PROFILE={other}: expected `release` or `dev`"
                )));
            }
        };
        let cargo = std::env::var_os("CARGO").filter(|c| !c.is_empty()).unwrap_or_else(|| "cargo".into());
        let features = run_features(std::env::var("SLUICE_RUN_FEATURES").as_deref().unwrap_or(""))?;
        Ok(Cache { runs: dir.join("run"), target, profile, cargo, features })
    }

    /// The `sluice` features of the runner of generated `code`, as TOML list items: those
    /// it needs (`parquet` when it reads Parquet: the runners of other pipelines do
    /// without its dependencies) and this cache's [`Cache::features`].
    pub(super) fn features_of(&self, code: &str) -> String {
        let mut features: Vec<&str> = Vec::new();
        // The row reader, the columnar one (`ReadColumnsExec`) or the global shuffle of rows.
        if ["__sl::OpenParquet", "__sl::parquet_columns", "__sl::parquet_global_shuffle"]
            .iter()
            .any(|p| code.contains(p))
        {
            features.push("parquet");
        }
        for f in &self.features {
            if !features.contains(&f.as_str()) {
                features.push(f);
            }
        }
        features.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ")
    }

    /// The cache key of a generated crate: a hash of `parts` (its code first), the sluice
    /// version and sources, this executable's build and the profile, in hex.
    pub(super) fn key(&self, parts: &[&str]) -> String {
        let mut h = Sha256::new();
        let build = this_build();
        let features = self.features.join(",");
        let common = [env!("CARGO_PKG_VERSION"), SLUICE_SOURCES, &build, self.profile.dir(), &features];
        for part in parts.iter().chain(&common) {
            h.update(part.as_bytes());
            h.update([0]);
        }
        h.finalize()[..16].iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// Writes a generated crate into `dir` (its `files`, then sluice's `Cargo.lock` and
    /// toolchain, so that it builds with the same dependency versions and compiler) and
    /// returns the `cargo build` of it in this cache's target directory and profile.
    pub(super) fn cargo_build(&self, dir: &Path, files: &[(&str, String)]) -> Result<Command, Failure> {
        let sources = Path::new(SLUICE_SOURCES);
        if !sources.join("Cargo.toml").is_file() {
            return Err(Failure::Data(anyhow::anyhow!(
                "sluice builds pipelines against the sluice sources at {}, which are gone; reinstall sluice",
                sources.display()
            )));
        }
        for (path, text) in files {
            write_if_changed(&dir.join(path), text.as_bytes())?;
        }
        for name in ["Cargo.lock", "rust-toolchain.toml"] {
            if let Ok(bytes) = std::fs::read(sources.join(name)) {
                write_if_changed(&dir.join(name), &bytes)?;
            }
        }
        let mut cargo = Command::new(&self.cargo);
        cargo.arg("build").arg("--manifest-path").arg(dir.join("Cargo.toml"));
        if self.profile == Profile::Release {
            cargo.arg("--release");
        }
        cargo.env("CARGO_TARGET_DIR", &self.target);
        Ok(cargo)
    }

    /// Keeps the artifact cargo built as `file` in the target directory as `kept`,
    /// atomically (the kept file appears complete or not at all): a hard link where both
    /// are on one file system (a debug runner is tens of MB, and a test suite keeps
    /// hundreds), else a copy. A link is safe from the next build: cargo and the linker
    /// replace the built file (a new inode), they never write into it.
    ///
    /// The temporary link is always removed: renaming a link onto a name that is already
    /// a link to the same file does nothing (POSIX), which is what happens when several
    /// processes keep the same build at once (three concurrent first `sluice show`s).
    pub(super) fn keep(&self, file: &str, kept: &Path) -> Result<PathBuf, Failure> {
        let built = self.target.join(self.profile.dir()).join(file);
        let dir = kept.parent().unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".keep.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp); // left by a process of the same id that died
        let kept_it = std::fs::hard_link(&built, &tmp)
            .or_else(|_| std::fs::copy(&built, &tmp).map(drop))
            .and_then(|()| std::fs::rename(&tmp, kept));
        // Gone after a real rename; still there after a no-op one or a failure.
        let _ = std::fs::remove_file(&tmp);
        kept_it
            .with_context(|| format!("cannot keep {} as {}", built.display(), kept.display()))
            .map_err(Failure::Data)?;
        Ok(kept.to_path_buf())
    }
}

/// The runner crate of one generated file.
#[derive(Debug)]
struct Runner {
    /// `<cache>/run/<hash>`.
    dir: PathBuf,
    /// The cargo package (and binary) name, unique per runner so that runners sharing the
    /// target directory never overwrite each other's binary.
    package: String,
    /// The file name of the kept binary: the `.pipe` file's stem.
    bin: String,
    /// The files of the crate: path within it, contents.
    files: Vec<(&'static str, String)>,
}

impl Runner {
    fn new(cache: &Cache, code: &str, pipelines: &[String], file: &Path) -> Runner {
        let hash = cache.key(&[code]);
        let package = format!("sluice-run-{}", &hash[..16]);
        let stem = file.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
        let mut bin: String = stem
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
            .collect();
        if bin.is_empty() {
            bin = "pipeline".into();
        }
        bin.push_str(std::env::consts::EXE_SUFFIX);
        let files = vec![
            ("Cargo.toml", manifest(&package, file, &cache.features_of(code))),
            ("src/main.rs", main_rs(pipelines, file)),
            ("src/pipelines.rs", code.to_string()),
        ];
        Runner { dir: cache.runs.join(hash), package, bin, files }
    }

    /// The kept binary, when an earlier run built it (it appears, complete, only then).
    fn cached(&self) -> Option<PathBuf> {
        let bin = self.dir.join(&self.bin);
        bin.is_file().then_some(bin)
    }

    /// Writes the crate, builds it with cargo (its messages shown as it works with
    /// `progress`, else only on failure) and keeps the binary in the crate directory.
    fn build(&self, cache: &Cache, progress: bool) -> Result<PathBuf, Failure> {
        let mut cargo = cache.cargo_build(&self.dir, &self.files)?;
        let mut child = cargo
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot run cargo ({}): building a runner needs the Rust toolchain; \
                     `--engine interpreted` runs the pipeline without it",
                    cache.cargo.display()
                )
            })
            .map_err(Failure::Data)?;
        // cargo's messages: shown line by line as it works with `progress`, kept for a
        // failure either way.
        let mut messages = String::new();
        if let Some(err) = child.stderr.take() {
            for line in std::io::BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if progress {
                    sayln!("{line}");
                }
                messages.push_str(&line);
                messages.push('\n');
            }
        }
        let status = child.wait().context("waiting for cargo").map_err(Failure::Data)?;
        if !status.success() {
            if !progress {
                say!("{messages}");
            }
            let ours = messages.contains(&format!("could not compile `{}`", self.package));
            let why = if ours {
                "the generated code does not compile: this is a bug in sluice's code generator"
            } else {
                "cargo failed"
            };
            return Err(Failure::Data(anyhow::anyhow!(
                "building the runner in {}: {why}",
                self.dir.display()
            )));
        }
        let built = format!("{}{}", self.package, std::env::consts::EXE_SUFFIX);
        cache.keep(&built, &self.dir.join(&self.bin))
    }
}

/// This executable's identity: its size and modification time, which change whenever
/// it is rebuilt (and with it, maybe, the runtime runners link).
pub(super) fn this_build() -> String {
    let meta = std::env::current_exe().and_then(std::fs::metadata);
    match meta {
        Ok(m) => {
            let mtime = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            format!("{} {}", m.len(), mtime.map_or(0, |d| d.as_nanos()))
        }
        Err(_) => String::new(),
    }
}

/// `SLUICE_RUN_FEATURES`: features of `sluice` (comma- or space-separated) that every
/// runner turns on. A test suite sets `parquet` so that the runners of all its pipelines
/// share one build of the runtime (the runners of pipelines without Parquet would build
/// it a second time, without the feature).
fn run_features(value: &str) -> Result<Vec<String>, Failure> {
    const KNOWN: [&str; 1] = ["parquet"];
    let mut features = Vec::new();
    for f in value.split([',', ' ']).filter(|f| !f.is_empty()) {
        if !KNOWN.contains(&f) {
            return Err(Failure::Usage(format!(
                "SLUICE_RUN_FEATURES={value}: unknown feature `{f}` (known: {})",
                KNOWN.join(", ")
            )));
        }
        if !features.iter().any(|g| g == f) {
            features.push(f.to_string());
        }
    }
    Ok(features)
}

/// The runner's `Cargo.toml`.
fn manifest(package: &str, file: &Path, features: &str) -> String {
    format!(
        r#"# The runner of {file}, generated by `sluice run`; rewritten when it is rebuilt.
[package]
name = "{package}"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
sluice = {{ path = {sources}, default-features = false, features = [{features}] }}

# A workspace of its own, whatever encloses the cache directory.
[workspace]

# Every runner has the same profiles, so the runtime they share compiles once.
[profile.release]
opt-level = 3
debug = "line-tables-only"
incremental = false

[profile.dev]
debug = false
"#,
        file = file.display(),
        sources = toml_string(SLUICE_SOURCES),
    )
}

/// `s` as a TOML basic string.
pub(super) fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The runner's `src/main.rs`: the generated runner `main` over every pipeline.
fn main_rs(pipelines: &[String], file: &Path) -> String {
    let mut entries = String::new();
    for name in pipelines {
        let _ = writeln!(entries, "        ({name:?}, pipelines::r#{name}::run),");
    }
    // 4 KiB pages (`small_pages()`): resident memory close to what the pipeline holds,
    // and no 2 MiB pages to zero (or compact for) on a pass's first touch. On a quiet
    // machine image_raw's one epoch ran at 0.97 of its 3-epoch rate with them and 0.65
    // with huge pages, at the same 3-epoch rate and 102-118 MB against 119-151 MB peak
    // (BENCHMARKS.md, "the quiet rerun after [6/7] III/IV").
    let pages = "    ::sluice::__private::small_pages();\n";
    format!(
        r#"//! The runner of {file}, generated by `sluice run`.

#[global_allocator]
static GLOBAL: ::sluice::__private::MiMalloc = ::sluice::__private::MiMalloc;

mod pipelines;

fn main() -> ::std::process::ExitCode {{
{pages}    ::sluice::__private::runner::main(&[
{entries}    ])
}}
"#,
        file = file.display(),
    )
}

/// Writes `bytes` to `path` (creating directories) unless it holds them already; a new
/// file appears whole (written aside, then renamed), so concurrent runs never see half.
pub(super) fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, bytes))
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("cannot write {}", path.display()))
        .map_err(Failure::Data)
}

#[cfg(test)]
mod tests {
    //! The runner crate built from hand-written code that follows the code generator's
    //! contract (`sluice_compiler::codegen`), so the crate, its cache and the runner binary
    //! are tested apart from the generator. `tests/it/cli_run.rs` runs `sluice run` whole.

    use std::process::Output;

    use super::*;

    /// Two pipelines as the generator writes them: `numbers` (batches of 4 of `n`
    /// records; record 7 fails when `n` is 13) and `evens` (single records).
    const CODE: &str = r#"//! Hand-written pipelines in the generated form.

pub mod numbers {
    use ::sluice::__private::Dataset;
    use ::sluice::runtime::stage::range;

    pub const NAME: &str = "numbers";

    pub struct Params {
        pub n: u64,
    }

    impl Params {
        pub fn from_args(set: &[(String, String)]) -> Result<Params, String> {
            let mut params = Params { n: 10 };
            for (name, value) in set {
                match name.as_str() {
                    "n" => params.n = ::sluice::__private::param("n", value)?,
                    _ => return Err(format!("unknown parameter `{name}`")),
                }
            }
            Ok(params)
        }
    }

    pub type Item = Vec<Vec<u8>>;

    pub fn dataset(params: &Params) -> ::sluice::__private::Result<impl Dataset<Item = Item> + use<>> {
        let n = params.n;
        Ok(range(0..n)
            .try_map(move |i| {
                if n == 13 && i == 7 { Err(format!("record {i} is bad")) } else { Ok(i.to_le_bytes().to_vec()) }
            })
            .named("encode")
            .chunks(4, false))
    }

    pub fn run(args: &::sluice::__private::runner::RunArgs) -> ::std::process::ExitCode {
        ::sluice::__private::runner::run(args, NAME, Params::from_args, dataset)
    }
}

pub mod evens {
    use ::sluice::__private::Dataset;
    use ::sluice::runtime::stage::range;

    pub const NAME: &str = "evens";

    pub struct Params;

    impl Params {
        pub fn from_args(set: &[(String, String)]) -> Result<Params, String> {
            match set.first() {
                Some((name, _)) => Err(format!("unknown parameter `{name}`")),
                None => Ok(Params),
            }
        }
    }

    pub type Item = Vec<u8>;

    pub fn dataset(_: &Params) -> ::sluice::__private::Result<impl Dataset<Item = Item> + use<>> {
        Ok(range(0..10).filter(|i| i % 2 == 0).map(|i: u64| vec![i as u8]))
    }

    pub fn run(args: &::sluice::__private::runner::RunArgs) -> ::std::process::ExitCode {
        ::sluice::__private::runner::run(args, NAME, Params::from_args, dataset)
    }
}
"#;

    /// A cache of its own in `dir`, sharing a target directory with every test run (under
    /// the workspace's `target/tmp`) so the runtime compiles once.
    fn cache(dir: &Path) -> Cache {
        let exe = std::env::current_exe().unwrap();
        // target/debug/deps/sluice-… → target
        let target = exe.ancestors().nth(3).unwrap().join("tmp").join("sluice-run-target");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
        // The features of the suite's runners (tests/it/support.rs), so that the runtime
        // they share is the one the other tests' runners built.
        let features = vec!["parquet".to_string()];
        Cache { runs: dir.join("run"), target, profile: Profile::Dev, cargo, features }
    }

    #[test]
    fn runner_features_are_the_codes_and_the_environments() {
        let parquet = "let f = __sl::OpenParquet::new(x);";
        let mut cache = cache(Path::new("/nonexistent"));
        cache.features = vec![];
        assert_eq!(cache.features_of("fn main() {}"), "");
        assert_eq!(cache.features_of(parquet), "\"parquet\"");
        let columns = "let ds = __sl::parquet_columns(ds, o, 1024, false)?;";
        assert_eq!(cache.features_of(columns), "\"parquet\"", "the columnar reader needs the feature too");
        let plain_key = cache.key(&["code"]);
        cache.features = run_features("parquet, parquet").unwrap();
        assert_eq!(cache.features, ["parquet"]);
        assert_eq!(cache.features_of("fn main() {}"), "\"parquet\"");
        assert_eq!(cache.features_of(parquet), "\"parquet\"");
        assert_ne!(cache.key(&["code"]), plain_key, "the features are part of the runner's key");
        assert!(
            manifest("p", Path::new("x.pipe"), &cache.features_of(parquet))
                .contains("features = [\"parquet\"]")
        );
        let Err(Failure::Usage(e)) = run_features("parquet,torch") else { panic!("torch accepted") };
        assert_eq!(e, "SLUICE_RUN_FEATURES=parquet,torch: unknown feature `torch` (known: parquet)");
    }

    fn names() -> Vec<String> {
        vec!["numbers".into(), "evens".into()]
    }

    fn exec(bin: &Path, args: &[&str]) -> (i32, String, String) {
        let Output { status, stdout, stderr } = Command::new(bin).args(args).output().unwrap();
        (status.code().unwrap(), String::from_utf8(stdout).unwrap(), String::from_utf8(stderr).unwrap())
    }

    #[test]
    fn every_runner_asks_for_small_pages_first() {
        let names = ["p".to_string()];
        let main = main_rs(&names, Path::new("p.pipe"));
        let (small, run) = (main.find("small_pages();").unwrap(), main.find("runner::main(").unwrap());
        assert!(small < run, "{main}");
    }

    #[test]
    fn builds_a_runner_once_then_reuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path());
        let runner = Runner::new(&cache, CODE, &names(), Path::new("dir/my numbers.pipe"));
        assert_eq!(runner.cached(), None);
        let bin = runner.build(&cache, false).unwrap_or_else(|f| panic!("{f:?}"));
        assert_eq!(bin, runner.dir.join(format!("my_numbers{}", std::env::consts::EXE_SUFFIX)));
        assert!(runner.dir.join("Cargo.lock").is_file());
        let again = Runner::new(&cache, CODE, &names(), Path::new("dir/my numbers.pipe"));
        assert_eq!(again.cached(), Some(bin.clone()), "the same code reuses the binary");
        let changed = Runner::new(&cache, &format!("{CODE}\n// changed\n"), &names(), Path::new("x.pipe"));
        assert_ne!(changed.dir, runner.dir);

        let (code, out, err) = exec(&bin, &["numbers", "--set", "n=10", "--json", "--epochs", "2"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (v["pipeline"].as_str(), v["records"].as_u64(), v["batches"].as_u64()),
            (Some("numbers"), Some(20), Some(6))
        );
        let (code, out, err) = exec(&bin, &["evens"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("evens: 5 records in 0 batches, "), "{out}");
        let (code, _, err) = exec(&bin, &["numbers", "--set", "n=ten"]);
        assert_eq!(
            (code, err.lines().next()),
            (2, Some("error: pipeline `numbers`: parameter `n`: expected an unsigned integer, found `ten`"))
        );
        let (code, _, err) = exec(&bin, &["numbers", "--set", "n=13"]);
        assert_eq!((code, err.as_str()), (1, "error: pipeline `numbers`: stage `encode`: record 7 is bad\n"));
        let (code, _, err) = exec(&bin, &[]);
        assert_eq!((code, err.lines().next()), (2, Some("error: name the pipeline to run: numbers, evens")));
    }

    #[test]
    fn a_kept_artifact_is_a_link_that_outlives_the_next_build() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir_all(target.join("debug")).unwrap();
        let cache = Cache { target: target.clone(), ..cache(dir.path()) };
        let built = target.join("debug").join("artifact");
        std::fs::write(&built, b"first build").unwrap();
        std::fs::create_dir_all(dir.path().join("run")).unwrap();
        let kept = dir.path().join("run").join("kept");
        assert_eq!(cache.keep("artifact", &kept).unwrap_or_else(|f| panic!("{f:?}")), kept);
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let (a, b) = (std::fs::metadata(&built).unwrap(), std::fs::metadata(&kept).unwrap());
            assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()), "one file system: a hard link, no copy");
        }
        // The next build replaces the artifact, as cargo and the linker do.
        std::fs::remove_file(&built).unwrap();
        std::fs::write(&built, b"second build").unwrap();
        assert_eq!(std::fs::read(&kept).unwrap(), b"first build");
        assert_eq!(cache.keep("artifact", &kept).unwrap_or_else(|f| panic!("{f:?}")), kept);
        assert_eq!(std::fs::read(&kept).unwrap(), b"second build");

        let nowhere = dir.path().join("missing").join("kept");
        let Err(Failure::Data(e)) = cache.keep("artifact", &nowhere) else {
            panic!("kept into a missing directory")
        };
        assert!(
            e.to_string().starts_with(&format!("cannot keep {} as {}", built.display(), nowhere.display())),
            "{e}"
        );
        let leftovers: Vec<_> =
            std::fs::read_dir(dir.path().join("run")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, ["kept"], "no temporary file is left behind");
    }

    /// Keeping a build that is already kept (several first runs of one pipeline at once,
    /// each keeping the one build) renames a link onto a link to the same file, which
    /// does nothing: the temporary link must still go.
    #[test]
    fn keeping_the_same_build_twice_leaves_no_temporary_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir_all(target.join("debug")).unwrap();
        let cache = Cache { target: target.clone(), ..cache(dir.path()) };
        std::fs::write(target.join("debug").join("artifact"), b"the build").unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let kept = run.join("kept");
        for _ in 0..3 {
            assert_eq!(cache.keep("artifact", &kept).unwrap_or_else(|f| panic!("{f:?}")), kept);
        }
        assert_eq!(std::fs::read(&kept).unwrap(), b"the build");
        let leftovers: Vec<_> = std::fs::read_dir(&run).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, ["kept"], "no `.keep.<pid>` link is left behind");
    }

    #[test]
    fn code_that_does_not_compile_is_a_generator_bug() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path());
        let code = CODE.replace("pub type Item = Vec<u8>;", "pub type Item = Vec<u16>;");
        let runner = Runner::new(&cache, &code, &names(), Path::new("bad.pipe"));
        let Err(Failure::Data(e)) = runner.build(&cache, false) else { panic!("the build fails") };
        assert!(
            e.to_string()
                .ends_with("the generated code does not compile: this is a bug in sluice's code generator"),
            "{e}"
        );
        assert_eq!(runner.cached(), None);
    }

    #[test]
    fn the_crate_names_every_pipeline_and_quotes_paths() {
        let main = main_rs(&names(), Path::new("a.pipe"));
        assert!(
            main.contains(
                "(\"numbers\", pipelines::r#numbers::run),\n        (\"evens\", pipelines::r#evens::run),"
            ),
            "{main}"
        );
        assert_eq!(toml_string(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
        assert_eq!(name_value("a=b=c"), Ok("a=b=c".into()));
        assert!(name_value("=b").is_err() && name_value("ab").is_err());
    }
}
