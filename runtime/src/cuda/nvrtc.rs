//! NVRTC: a kernel's CUDA C source to PTX, compiled once per process and cached.
//!
//! Options: `--gpu-architecture=compute_XY` for device 0's compute capability when there
//! is a GPU, else `compute_90` (the H100/H200 the project runs on; PTX for it JIT-compiles
//! on any later GPU), and `--fmad=false`, so that `a * b + c` rounds twice as in the CPU
//! twin instead of fusing into one rounding: kernels and their twins then agree bit for
//! bit on the elementwise arithmetic Sluice generates.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use cudarc::nvrtc::{CompileError, CompileOptions};

use super::{catch, context, gpu_available, nvrtc_available};
use crate::error::{Error, Result};

/// The architecture when no GPU tells a better one: compute capability 9.0 (Hopper).
const DEFAULT_ARCH: &str = "compute_90";

/// What the cache of compiled kernels is keyed by: the kernel's name and its source.
type Key = (String, String);

/// A kernel compiled to PTX by NVRTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ptx {
    name: String,
    arch: String,
    text: String,
}

impl Ptx {
    /// The kernel's name: its `extern "C" __global__` function, a `.entry` of the PTX.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The virtual architecture it was compiled for, e.g. `compute_90`.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The PTX text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Compiles kernel `name` (an `extern "C" __global__` function of `source`) to PTX with
/// NVRTC, once per process for a given name and source: later calls return the cached
/// result. Errors name the kernel: NVRTC is missing, the source does not compile (with
/// NVRTC's log), or it defines no kernel `name`.
pub fn compile_ptx(name: &str, source: &str) -> Result<Arc<Ptx>> {
    static CACHE: LazyLock<Mutex<HashMap<Key, Arc<Ptx>>>> = LazyLock::new(Default::default);
    let fail = |message: String| Error::Cuda { context: format!("kernel `{name}`"), message };
    if !is_identifier(name) {
        return Err(fail("a kernel's name must be a C identifier".into()));
    }
    if source.contains('\0') {
        return Err(fail("its source contains a NUL character".into()));
    }
    if !nvrtc_available() {
        return Err(fail(
            "NVRTC (libnvrtc.so.13) was not found: install CUDA 13 or the `nvidia-cuda-nvrtc` \
             wheel and put its library folder on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    let key = (name.to_string(), source.to_string());
    // Compiling under the lock: a kernel is compiled once even when threads ask together.
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ptx) = cache.get(&key) {
        return Ok(ptx.clone());
    }
    let arch = target_arch();
    let options = CompileOptions {
        name: Some(format!("{name}.cu")),
        fmad: Some(false),
        options: vec![format!("--gpu-architecture={arch}")],
        ..Default::default()
    };
    let compiled = catch(|| cudarc::nvrtc::compile_ptx_with_opts(source, options))
        .map_err(&fail)?
        .map_err(|e| fail(describe(e)))?;
    let text = catch(|| compiled.to_src()).map_err(&fail)?;
    if !has_entry(&text, name) {
        return Err(fail(format!(
            "the source compiled but defines no kernel `{name}` (it must be `extern \"C\" __global__`)"
        )));
    }
    let ptx = Arc::new(Ptx { name: name.to_string(), arch, text });
    cache.insert(key, ptx.clone());
    Ok(ptx)
}

/// `compute_XY` for device 0 when there is a GPU, else [`DEFAULT_ARCH`].
fn target_arch() -> String {
    static ARCH: OnceLock<String> = OnceLock::new();
    ARCH.get_or_init(|| {
        let device = gpu_available().then(|| context(0).ok()).flatten();
        match device.and_then(|ctx| ctx.compute_capability().ok()) {
            Some((major, minor)) => format!("compute_{major}{minor}"),
            None => DEFAULT_ARCH.to_string(),
        }
    })
    .clone()
}

/// NVRTC's error as a message; a compile error carries the options and NVRTC's log.
fn describe(e: CompileError) -> String {
    match e {
        CompileError::CompileError { nvrtc, options, log } => format!(
            "NVRTC could not compile it ({nvrtc}; options {}):\n{}",
            options.join(" "),
            log.to_string_lossy().trim_end()
        ),
        CompileError::CreationError(e) => format!("NVRTC could not create the program: {e}"),
        CompileError::GetLogError(e) => format!("NVRTC could not return its log: {e}"),
        CompileError::GetPtxError(e) => format!("NVRTC could not return the PTX: {e}"),
        CompileError::DestroyError(e) => format!("NVRTC could not free the program: {e}"),
    }
}

/// Whether `s` is a C identifier (an unmangled `extern "C"` kernel name).
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether the PTX declares an entry point `name` (`.visible .entry name(`).
fn has_entry(ptx: &str, name: &str) -> bool {
    ptx.match_indices(".entry").any(|(at, _)| {
        let rest = ptx[at + ".entry".len()..].trim_start();
        rest.strip_prefix(name)
            .is_some_and(|after| after.starts_with(|c: char| c == '(' || c.is_whitespace()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_entries() {
        assert!(is_identifier("flip_u8") && is_identifier("_k2"));
        assert!(!is_identifier("") && !is_identifier("2k") && !is_identifier("a-b") && !is_identifier("a\0"));
        let ptx = ".visible .entry flip_u8(\n\t.param .u64 a\n)\n.visible .entry flip_u8x(\n";
        assert!(has_entry(ptx, "flip_u8") && has_entry(ptx, "flip_u8x"));
        assert!(!has_entry(ptx, "flip") && !has_entry(ptx, "crop"));
    }
}
