//! `sluice python-lib FILE.pipe` (hidden; the Python package's `sluice.Pipeline` runs it):
//! compiles a pipeline file with the same code generator `sluice run` uses and builds it
//! into a shared library exporting the C ABI of `sluice::python` (`python_module!` over
//! the file's pipelines), cached like `sluice run`'s runners: `<cache>/python/<hash>/`,
//! `<hash>` over the generated code, the sluice version and sources, this executable and
//! the profile; the target directory is the runners' (the runtime compiles once for
//! both). A first build shows cargo's own progress on stderr.
//!
//! It prints one JSON object on stdout: `{"ok":true,"lib":PATH,"pipelines":[...],"info":
//! {PIPELINE:{"params":[...],"cuda":BOOL}}}`, or
//! `{"ok":false,"kind":"compile"|"usage"|"build"|"toolchain"|"not-cached","message":...,
//! "file":...,"line":...,"column":...,"code":...}` (`line`, `column` and `code` those of
//! the first error, when the failure is the file's), and exits 0 either way unless stdout
//! cannot be written: the Python side raises `CompileError` from it. `--cached` only
//! answers a library already built for this plan (`not-cached` otherwise: what
//! `engine="auto"` asks before it runs the engine instead); a build without cargo or
//! without the sluice sources is `toolchain`, saying which is missing.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};
use sluice_compiler::diagnostic::{line_col, render};

use super::Failure;
use super::run::{Cache, SLUICE_SOURCES, toml_string};

#[derive(Debug, Args)]
pub struct PythonLibArgs {
    /// The `.pipe` file.
    file: PathBuf,
    /// Only a library already built for this plan: never build one.
    #[arg(long)]
    cached: bool,
}

pub fn run(args: PythonLibArgs) -> Result<ExitCode, Failure> {
    let answer = match lib_for(&args.file, args.cached) {
        Ok(v) => v,
        Err(Failure::Usage(m)) => json!({"ok": false, "kind": "usage", "message": m, "file": args.file}),
        Err(Failure::Data(e)) => {
            json!({"ok": false, "kind": "build", "message": format!("{e:#}"), "file": args.file})
        }
        Err(w @ Failure::Write { .. }) => return Err(w),
    };
    outln!("{answer}");
    Ok(ExitCode::SUCCESS)
}

/// The JSON answer for `file`: the built (or cached) library, or the file's first error;
/// with `cached_only`, never a build.
fn lib_for(file: &Path, cached_only: bool) -> Result<Value, Failure> {
    let source = super::check::read_source(file)?;
    let compilation = sluice_compiler::compile(&source);
    let name = file.display().to_string();
    let errors = |diagnostics: Vec<sluice_compiler::Diagnostic>| {
        let errors: Vec<_> = diagnostics.into_iter().filter(|d| d.is_error()).collect();
        let first = errors.first();
        let (line, column) = first.map_or((0, 0), |d| line_col(&source, d.primary.span.start));
        json!({
            "ok": false, "kind": "compile", "message": render(&name, &source, &errors),
            "file": name, "line": line, "column": column, "code": first.map(|d| d.code),
        })
    };
    if compilation.has_errors() {
        return Ok(errors(compilation.diagnostics));
    }
    let generated = match compilation.generate() {
        Ok(g) => g,
        Err(diagnostics) => return Ok(errors(diagnostics)),
    };
    super::run::refuse_externs(file, &source, &compilation.pipelines)?;
    let cache = Cache::from_env()?;
    let lib = PythonLib::new(&cache, &generated.to_pretty_string(), &generated.pipelines, file);
    let path = match lib.cached() {
        Some(p) => p,
        None if cached_only => {
            let message = format!("no Python library of {name} is built for this plan");
            return Ok(json!({"ok": false, "kind": "not-cached", "message": message, "file": name}));
        }
        None => {
            if let Some(missing) = missing_toolchain(&cache) {
                let message = format!(
                    "compiling {name} needs the Rust toolchain and the sluice sources: {missing}; \
                     `engine=\"interpreted\"` runs a pipeline the engine runs without them"
                );
                return Ok(json!({"ok": false, "kind": "toolchain", "message": message, "file": name}));
            }
            sayln!("sluice: compiling {} for Python (cargo's progress follows; later runs reuse it)", name);
            lib.build(&cache)?
        }
    };
    // Each pipeline's parameters (so Python knows whether it takes `workers`/`worker`)
    // and whether it declares `device cuda`.
    let params: serde_json::Map<String, Value> = compilation
        .pipelines
        .iter()
        .map(|p| {
            let names: Vec<&str> = p.decls.params.iter().map(|d| d.name.as_str()).collect();
            let cuda = p.decls.device == sluice_compiler::ir::decls::Device::Cuda;
            (p.decls.name.clone(), json!({"params": names, "cuda": cuda}))
        })
        .collect();
    Ok(json!({"ok": true, "lib": path, "pipelines": generated.pipelines, "info": params}))
}

/// What a build lacks, said plainly: cargo (`$CARGO`, else `cargo` on `PATH`) or the
/// sluice sources this tool was built from.
fn missing_toolchain(cache: &Cache) -> Option<String> {
    let sources = Path::new(SLUICE_SOURCES);
    if !sources.join("Cargo.toml").is_file() {
        return Some(format!("the sources this tool was built from ({}) are not here", sources.display()));
    }
    let cargo = std::process::Command::new(&cache.cargo)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match cargo {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!("`{} --version` failed ({status})", cache.cargo.display())),
        Err(e) => Some(format!("cannot run cargo (`{}`: {e})", cache.cargo.display())),
    }
}

/// The library crate of one generated file.
#[derive(Debug)]
struct PythonLib {
    /// `<cache>/python/<hash>`.
    dir: PathBuf,
    /// The cargo package name (unique per library).
    package: String,
    files: Vec<(&'static str, String)>,
}

impl PythonLib {
    fn new(cache: &Cache, code: &str, pipelines: &[String], file: &Path) -> PythonLib {
        let hash = cache.key(&[code, "python-lib"]);
        let package = format!("sluice_py_{}", &hash[..16]);
        let files = vec![
            ("Cargo.toml", manifest(&package, file, &cache.features_of(code))),
            ("src/lib.rs", lib_rs(pipelines, file)),
            ("src/pipelines.rs", code.to_string()),
        ];
        let dir = cache.runs.with_file_name("python").join(hash);
        PythonLib { dir, package, files }
    }

    /// The kept library's path.
    fn kept(&self) -> PathBuf {
        self.dir.join(library_file(&self.package))
    }

    fn cached(&self) -> Option<PathBuf> {
        let p = self.kept();
        p.is_file().then_some(p)
    }

    /// Writes the crate and builds it (cargo's progress on stderr), keeping the library.
    fn build(&self, cache: &Cache) -> Result<PathBuf, Failure> {
        let mut cargo = cache.cargo_build(&self.dir, &self.files)?;
        // Cargo's progress goes to our stderr (the Python caller's); stdout is our answer.
        let status = cargo
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("cannot run cargo ({})", cache.cargo.display()))
            .map_err(Failure::Data)?;
        if !status.success() {
            return Err(Failure::Data(anyhow::anyhow!(
                "building the Python library in {} failed (cargo's messages above)",
                self.dir.display()
            )));
        }
        cache.keep(&library_file(&self.package), &self.kept())
    }
}

/// The file cargo names a cdylib of `package` (`libNAME.so` on Linux).
fn library_file(package: &str) -> String {
    format!("{}{package}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX)
}

fn manifest(package: &str, file: &Path, features: &str) -> String {
    format!(
        r#"# The Python library of {file}, generated by `sluice python-lib`; rewritten when rebuilt.
[package]
name = "{package}"
version = "0.0.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
sluice = {{ path = {sources}, default-features = false, features = ["python"{extra}] }}

[workspace]

# The runners' profiles, so the runtime they share compiles once.
[profile.release]
opt-level = 3
debug = "line-tables-only"
incremental = false

[profile.dev]
debug = false
"#,
        file = file.display(),
        sources = toml_string(SLUICE_SOURCES),
        extra = if features.is_empty() { String::new() } else { format!(", {features}") },
    )
}

fn lib_rs(pipelines: &[String], file: &Path) -> String {
    let names: Vec<String> = pipelines.iter().map(|n| format!("r#{n}")).collect();
    format!(
        r#"//! The Python library of {file}, generated by `sluice python-lib`. mimalloc as in the
//! runners (big batch buffers are reused, not page-faulted in afresh each time), built
//! with dynamic TLS (sluice's `python` feature) so that many such libraries load into
//! one process.

#[global_allocator]
static GLOBAL: ::sluice::__private::MiMalloc = ::sluice::__private::MiMalloc;

#[allow(clippy::all)]
mod pipelines;

::sluice::python_module!({names});
"#,
        file = file.display(),
        names = names.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crate_lists_every_pipeline() {
        let lib = lib_rs(&["a".into(), "type".into()], Path::new("x.pipe"));
        assert!(lib.contains("::sluice::python_module!(r#a, r#type);"), "{lib}");
        assert!(manifest("p", Path::new("x.pipe"), "").contains("crate-type = [\"cdylib\"]"));
        assert_eq!(
            library_file("p"),
            format!("{}p{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX)
        );
    }
}
