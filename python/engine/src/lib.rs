//! `libsluice_engine_py`: the engine as the Python package's library (it ships in the
//! wheel beside the extension `sluice._native` and the `sluice` tool). It exports the C
//! ABI of `sluice::python` (`python_session_abi!`: the same elements, tensors, reports
//! and errors as a compiled pipeline's library) and, instead of a compiled library's
//! `sluice_python_open` over pipelines generated ahead of time:
//!
//! - `sluice_engine_compile(path)`: compiles a `.pipe` file here, at run time, into a
//!   program handle, and answers JSON as `sluice python-lib` does (`pipelines`, each
//!   one's `params` and `cuda`, and `refusal`: why the engine does not run it, or null),
//!   or the file's first error with its rendered diagnostics;
//! - `sluice_engine_open(program, name, …)`: a session of one of its pipelines, run by
//!   `sluice_engine` (checked by `sluice_engine::check` first);
//! - `sluice_engine_drop(program)`.
//!
//! No cargo, no generated code, no path of the build tree: what the wheel needs to run
//! a pipeline anywhere.

use std::ffi::c_void;
use std::sync::Arc;

use serde_json::{Value, json};
use sluice::python::{Failure, Plan, Request, Session};
use sluice_compiler::diagnostic::{line_col, render};
use sluice_compiler::{Compilation, Pipeline};
use sluice_runtime::stage::PipelineState;

sluice::python_session_abi!();

/// A compiled file: its pipelines, shared by the sessions opened from it.
#[derive(Debug)]
pub struct Program {
    /// The file as given.
    file: String,
    pipelines: Arc<Pipelines>,
}

/// A file's pipelines, without `pipeline!` Rust code.
#[derive(Debug)]
struct Pipelines(Vec<Pipeline>);

impl Pipelines {
    /// `compilation`'s pipelines, their Rust code tokens dropped (a `.pipe` file has none:
    /// only `pipeline!` keeps the tokens of its Rust stages).
    fn new(compilation: Compilation) -> Pipelines {
        let mut pipelines = compilation.pipelines;
        for p in &mut pipelines {
            p.rust_code = Vec::new();
        }
        Pipelines(pipelines)
    }
}

// SAFETY: a `Pipeline` is plain data but for `rust_code`, proc-macro token streams (`Rc`s
// inside); `Pipelines::new` leaves every one empty, so no `Rc` is reachable from here.
unsafe impl Send for Pipelines {}
// SAFETY: as above.
unsafe impl Sync for Pipelines {}

/// The JSON answer for the file at `path` and, when it compiles, its [`Program`].
pub fn compile(path: &str) -> (Value, Option<Program>) {
    let source = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            let message = format!("cannot read {path}: {e}");
            return (json!({"ok": false, "kind": "usage", "message": message, "file": path}), None);
        }
    };
    let compilation = sluice_compiler::compile(&source);
    if compilation.has_errors() {
        let errors: Vec<_> = compilation.diagnostics.into_iter().filter(|d| d.is_error()).collect();
        let first = errors.first();
        let (line, column) = first.map_or((0, 0), |d| line_col(&source, d.primary.span.start));
        let answer = json!({
            "ok": false, "kind": "compile", "message": render(path, &source, &errors),
            "file": path, "line": line, "column": column, "code": first.map(|d| d.code),
        });
        return (answer, None);
    }
    let names: Vec<&str> = compilation.pipelines.iter().map(Pipeline::name).collect();
    let info: serde_json::Map<String, Value> = compilation
        .pipelines
        .iter()
        .map(|p| {
            let params: Vec<&str> = p.decls.params.iter().map(|d| d.name.as_str()).collect();
            let cuda = p.decls.device == sluice_compiler::ir::decls::Device::Cuda;
            let refusal =
                sluice_engine::check_in(&compilation.pipelines, p).err().map(|e| format!("{path}: {e}"));
            (p.name().to_string(), json!({"params": params, "cuda": cuda, "refusal": refusal}))
        })
        .collect();
    let answer = json!({"ok": true, "engine": sluice_engine::NAME, "pipelines": names, "info": info});
    let program = Program { file: path.to_string(), pipelines: Arc::new(Pipelines::new(compilation)) };
    (answer, Some(program))
}

impl Program {
    /// A session of pipeline `name`, or why not: 2 for a pipeline the file does not have
    /// or a bad parameter, 3 for one the engine does not run.
    pub fn open(&self, name: &str, request: &Request) -> Result<Box<dyn Session>, Failure> {
        let pipelines = &self.pipelines.0;
        let Some(index) = pipelines.iter().position(|p| p.name() == name) else {
            let names: Vec<&str> = pipelines.iter().map(Pipeline::name).collect();
            let message = format!("no pipeline `{name}` (the file has {})", names.join(", "));
            return Err(Failure { kind: 2, message });
        };
        if let Err(e) = sluice_engine::check_in(pipelines, &pipelines[index]) {
            return Err(Failure { kind: 3, message: format!("{}: {e}", self.file) });
        }
        sluice::python::open(Engine { pipelines: self.pipelines.clone(), index }, request)
    }
}

/// One pipeline of a program, run by the engine.
#[derive(Debug)]
struct Engine {
    pipelines: Arc<Pipelines>,
    index: usize,
}

impl Engine {
    fn pipeline(&self) -> &Pipeline {
        &self.pipelines.0[self.index]
    }
}

impl Plan for Engine {
    type Params = sluice_engine::Params;
    type Data = sluice_engine::Ds;

    fn name(&self) -> &str {
        self.pipeline().name()
    }

    fn engine(&self) -> &'static str {
        sluice_engine::NAME
    }

    fn params(&self, set: &[(String, String)]) -> Result<Self::Params, String> {
        sluice_engine::params_in(&self.pipelines.0, self.pipeline(), set)
    }

    fn dataset(&self, params: &Self::Params) -> sluice_runtime::Result<Self::Data> {
        sluice_engine::dataset_in(&self.pipelines.0, self.pipeline(), params)
    }

    fn state(
        &self,
        params: &Self::Params,
        epoch: u64,
        position: u64,
    ) -> sluice_runtime::Result<PipelineState> {
        sluice_engine::resume::state(self.pipeline(), &self.pipelines.0, params, epoch, position)
    }

    fn check_state(&self, params: &Self::Params, state: &PipelineState) -> sluice_runtime::Result<()> {
        sluice_engine::resume::check_state(self.pipeline(), &self.pipelines.0, params, state)
    }

    fn reshard(
        &self,
        params: &Self::Params,
        states: &[PipelineState],
    ) -> sluice_runtime::Result<Vec<PipelineState>> {
        sluice_engine::resume::reshard(self.pipeline(), &self.pipelines.0, params, states)
    }

    fn budget(&self) -> Option<usize> {
        self.pipeline().decls.budget.map(|b| b as usize)
    }

    fn threads(&self) -> Option<usize> {
        self.pipeline().decls.threads.map(|n| n as usize)
    }
}

/// `s` handed to C: `(ptr, len)`, freed by `sluice_python_free(2, ..)`.
fn give(bytes: Vec<u8>, ptr: *mut *mut u8, len: *mut usize) {
    let b = Box::into_raw(bytes.into_boxed_slice());
    // SAFETY: the caller passes valid out-pointers (the ABI's contract).
    unsafe {
        *len = b.len();
        *ptr = b.cast();
    }
}

/// Compiles the file at `path` (`path_len` UTF-8 bytes): `*answer` the JSON answer (freed
/// with `sluice_python_free(2, ..)`), and 0 with `*program` the program when the file
/// compiles, else 1.
///
/// # Safety
/// `path` points to `path_len` readable bytes; the out-pointers are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sluice_engine_compile(
    path: *const u8,
    path_len: usize,
    program: *mut *mut c_void,
    answer: *mut *mut u8,
    answer_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract.
    let path = String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(path, path_len) });
    let (json, compiled) = compile(&path);
    give(json.to_string().into_bytes(), answer, answer_len);
    match compiled {
        Some(p) => {
            // SAFETY: the caller's contract.
            unsafe { *program = Box::into_raw(Box::new(p)).cast() };
            0
        }
        None => 1,
    }
}

/// Opens a session of pipeline `name` of `program`: as `sluice_python_open`.
///
/// # Safety
/// `program` came from `sluice_engine_compile` and is live; the rest as
/// `sluice::python::open_c`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn sluice_engine_open(
    program: *const c_void,
    name: *const u8,
    name_len: usize,
    set: *const u8,
    set_len: usize,
    resume: *const u8,
    resume_len: isize,
    budget: usize,
    out: *mut *mut c_void,
    err: *mut *mut u8,
    err_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract: a live program.
    let program = unsafe { &*program.cast::<Program>() };
    let open = |name: &str, request: &Request| program.open(name, request);
    // SAFETY: forwarded.
    unsafe {
        sluice::python::open_c_with(
            open, name, name_len, set, set_len, resume, resume_len, budget, out, err, err_len,
        )
    }
}

/// Frees a program (its open sessions keep what they need).
///
/// # Safety
/// `program` came from `sluice_engine_compile` and is freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sluice_engine_drop(program: *mut c_void) {
    if !program.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(program.cast::<Program>()) });
    }
}

#[cfg(test)]
mod tests {
    use sluice_runtime::abi::py::{PyColumn, PyElement};
    use sluice_runtime::column::Buffer;

    use super::*;

    fn program(source: &str) -> (Value, Option<Program>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.pipe");
        std::fs::write(&path, source).unwrap();
        let (answer, program) = compile(path.to_str().unwrap());
        (answer, program, dir)
    }

    const SOURCE: &str = r#"
        pipeline evens(n: i64 = 6) { range(n); map { twice = value * 2; } filter(twice != 4); batch(2); }
        pipeline user() { extern fn my::f(x: i64) -> i64; range(3); map { value = my::f(value); } }
    "#;

    #[test]
    fn a_session_runs_in_the_engine_and_says_so() {
        let (answer, program, _dir) = program(SOURCE);
        assert_eq!(answer["pipelines"], json!(["evens", "user"]));
        assert_eq!(answer["info"]["evens"]["params"], json!(["n"]));
        assert_eq!(answer["info"]["evens"]["refusal"], Value::Null);
        let refusal = answer["info"]["user"]["refusal"].as_str().unwrap();
        assert!(refusal.contains("p.pipe: pipeline `user` calls `extern fn my::f`"), "{refusal}");
        let program = program.unwrap();
        let request = Request { set: vec![("n".into(), "5".into())], ..Request::default() };
        let mut s = program.open("evens", &request).unwrap();
        let mut twice = Vec::new();
        while let Some(e) = s.next(1).unwrap() {
            let PyElement::Fields(f) = e else { panic!("fields") };
            let PyColumn::Tensor { data: Buffer::I64(v), .. } = &f[1].1 else { panic!("{f:?}") };
            assert_eq!(f[1].0, "twice");
            twice.extend(v.iter().copied());
        }
        assert_eq!(twice, [0, 2, 6, 8]);
        let stats: Value = serde_json::from_str(&s.stats()).unwrap();
        assert_eq!((stats["engine"].as_str(), stats["records"].as_u64()), (Some("interpreted"), Some(4)));
    }

    #[test]
    fn refusals_bad_parameters_and_bad_files_are_errors() {
        let (_, program, _dir) = program(SOURCE);
        let program = program.unwrap();
        let err = |name: &str, set: &[(&str, &str)]| {
            let set = set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            program.open(name, &Request { set, ..Request::default() }).err().unwrap()
        };
        assert_eq!(err("user", &[]).kind, 3);
        let bad = err("evens", &[("n", "ten")]);
        assert!(bad.kind == 2 && bad.message.contains("parameter `n`"), "{bad:?}");
        assert_eq!(err("nosuch", &[]).kind, 2);
        let (answer, none, _dir) = program_of_bad_file();
        assert!(none.is_none());
        assert_eq!((answer["kind"].as_str(), answer["line"].as_u64()), (Some("compile"), Some(2)));
        assert_eq!(compile("/nonexistent/x.pipe").0["kind"], "usage");
    }

    fn program_of_bad_file() -> (Value, Option<Program>, tempfile::TempDir) {
        program("pipeline p() {\n  range(3); nosuch(1);\n}\n")
    }
}
