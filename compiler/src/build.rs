//! The `build.rs` API: compiles `.pipe` files into Rust modules under `$OUT_DIR/sluice/`.
//!
//! ```no_run
//! // build.rs, in `fn main()`:
//! sluice_compiler::build::compile(&["pipes/train.pipe"]);
//! ```
//!
//! ```ignore
//! // src/lib.rs: one module per pipeline of the file (`train::dataset(&params)`, ...)
//! sluice::include_pipelines!("train");
//! ```
//!
//! Each file's code goes to `$OUT_DIR/sluice/<file stem>.rs`, and cargo is told to
//! rebuild when the file changes. A file with errors fails the build with the rendered
//! diagnostics (`file:line:col`, as `sluice check` prints them); warnings do not fail it,
//! they are shown as `cargo:warning=` lines.
//!
//! With sluice's `torch` feature on, [`compile`] also links libtorch into the crate's
//! binaries and tests (an rpath to it, and `--no-as-needed` so that `libtorch_cuda` is
//! kept): sluice's build script passes the directory on as `DEP_SLUICE_LIBTORCH_LIB`.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::diagnostic::render;

/// Why a `.pipe` file could not be compiled.
#[derive(Debug)]
pub enum BuildError {
    /// The file could not be read, or the output not written.
    Io {
        /// The file.
        path: PathBuf,
        /// What happened.
        error: std::io::Error,
    },
    /// The file is not valid UTF-8.
    Utf8 {
        /// The file.
        path: PathBuf,
    },
    /// The file has errors: the rendered diagnostics.
    Diagnostics {
        /// The file.
        path: PathBuf,
        /// Every diagnostic, rendered.
        rendered: String,
    },
    /// `$OUT_DIR` is not set (not running in a build script).
    NoOutDir,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            BuildError::Utf8 { path } => write!(f, "{}: not valid UTF-8", path.display()),
            BuildError::Diagnostics { path, rendered } => {
                write!(f, "{rendered}error: could not compile `{}`", path.display())
            }
            BuildError::NoOutDir => f.write_str("OUT_DIR is not set: call this from a build script"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Compiles each `.pipe` file into `$OUT_DIR/sluice/<stem>.rs` (and tells cargo to
/// rerun when it changes), and links libtorch when sluice's `torch` feature is on. On an
/// error, prints it (with every diagnostic, rendered) and exits the build script with
/// status 1, which fails the build.
pub fn compile(paths: &[impl AsRef<Path>]) {
    if let Err(e) = try_compile(paths) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    link_libtorch_if_enabled();
}

/// Links libtorch into this crate's binaries and tests when sluice was built with its
/// `torch` feature (its build script then sets `DEP_SLUICE_LIBTORCH_LIB` for crates that
/// depend on it directly); otherwise does nothing.
pub fn link_libtorch_if_enabled() {
    println!("cargo:rerun-if-env-changed=DEP_SLUICE_LIBTORCH_LIB");
    if let Some(lib) = std::env::var_os("DEP_SLUICE_LIBTORCH_LIB") {
        libtorch::link_libtorch(Path::new(&lib));
    }
}

/// The link arguments shared with the runtime's and the facade's build scripts.
#[allow(dead_code)]
#[path = "../../runtime/build/libtorch.rs"]
mod libtorch;

/// [`compile`], returning the error instead of exiting; the paths written.
pub fn try_compile(paths: &[impl AsRef<Path>]) -> Result<Vec<PathBuf>, BuildError> {
    let out = std::env::var_os("OUT_DIR").ok_or(BuildError::NoOutDir)?;
    let dir = Path::new(&out).join("sluice");
    let mut written = Vec::new();
    for p in paths {
        let p = p.as_ref();
        println!("cargo:rerun-if-changed={}", p.display());
        written.push(compile_file(p, &dir)?);
    }
    Ok(written)
}

/// Compiles one `.pipe` file into `dir/<stem>.rs`; returns the path written.
pub fn compile_file(path: &Path, dir: &Path) -> Result<PathBuf, BuildError> {
    let io = |error| BuildError::Io { path: path.to_path_buf(), error };
    let bytes = std::fs::read(path).map_err(io)?;
    let source = String::from_utf8(bytes).map_err(|_| BuildError::Utf8 { path: path.to_path_buf() })?;
    let compilation = crate::driver::compile(&source);
    let name = path.display().to_string();
    let code = compilation.generate().map_err(|d| BuildError::Diagnostics {
        path: path.to_path_buf(),
        rendered: render(&name, &source, &d),
    })?;
    // A clean file may still have warnings: cargo shows them, one `cargo:warning=` line
    // per rendered line.
    let warnings: Vec<_> = compilation.warnings().cloned().collect();
    for line in render(&name, &source, &warnings).trim_end().lines() {
        println!("cargo:warning={line}");
    }
    let stem = path.file_stem().map_or_else(|| "pipelines".into(), |s| s.to_string_lossy().into_owned());
    std::fs::create_dir_all(dir).map_err(|error| BuildError::Io { path: dir.to_path_buf(), error })?;
    let target = dir.join(format!("{stem}.rs"));
    let text = format!(
        "// Generated by Sluice {} from {}. Do not edit.\n{}",
        crate::VERSION,
        path.display(),
        code.to_pretty_string()
    );
    // Unchanged output keeps its timestamp, so cargo does not recompile the crate.
    if std::fs::read_to_string(&target).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(&target, text).map_err(|error| BuildError::Io { path: target.clone(), error })?;
    }
    Ok(target)
}
