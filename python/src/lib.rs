//! `sluice._native`: the extension module of the Python package. It loads the shared
//! library `sluice python-lib` built for a `.pipe` file (the C ABI of the facade's
//! `sluice::python`, found with `libloading`), opens sessions of its pipelines and pulls
//! their elements with the GIL released, handing number fields to Python as
//! [`Tensor`]s: DLPack producers over the buffers the pipeline built, never copied.
//! [`Engine`] loads the engine's library the wheel ships (`python/engine/`: the same ABI,
//! plus `sluice_engine_compile`/`_open`/`_drop`), which compiles a `.pipe` file at run
//! time into a [`Program`] whose sessions are driven exactly as a compiled library's.
//!
//! Ownership: a tensor's buffer belongs to the `DLManagedTensor` the library made. The
//! [`Tensor`] holds it until `__dlpack__` hands it out in a `"dltensor"` capsule; the
//! consumer (torch, numpy, JAX) then runs its deleter when its last array over it goes.
//! A capsule never consumed runs the deleter itself, and so does a [`Tensor`] dropped
//! before export. Libraries are never unloaded (their deleters must outlive every
//! tensor), so each is loaded once per process.

use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::sync::{Mutex, OnceLock};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

pyo3::create_exception!(_native, SluiceError, PyException, "A Sluice pipeline failed.");
pyo3::create_exception!(
    _native,
    CompileError,
    SluiceError,
    "A `.pipe` file has errors: the rendered diagnostics, with `file`, `line`, `column` and `code` of the first."
);
pyo3::create_exception!(
    _native,
    ParameterError,
    SluiceError,
    "A pipeline parameter (or a saved state to resume from) is not valid for the pipeline."
);
pyo3::create_exception!(
    _native,
    DataError,
    SluiceError,
    "The pipeline failed on its data: the message names the file and record."
);

/// The ABI version of `sluice::python` this module speaks.
const ABI_VERSION: u32 = 1;

/// DLPack's tensor (0.8 layout), as `sluice::python` lays it out.
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device_type: i32,
    device_id: i32,
    ndim: i32,
    code: u8,
    bits: u8,
    lanes: u16,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// DLPack's managed tensor.
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `sluice::python::FieldView`.
#[repr(C)]
struct FieldView {
    name: *const u8,
    name_len: usize,
    kind: u32,
    one: u32,
    tensor: *mut DLManagedTensor,
    values: *const u8,
    values_len: usize,
    offsets: *const i64,
    offsets_len: usize,
}

type OpenFn = unsafe extern "C" fn(
    *const u8,
    usize,
    *const u8,
    usize,
    *const u8,
    isize,
    usize,
    *mut *mut c_void,
    *mut *mut u8,
    *mut usize,
) -> i32;
type NextFn = unsafe extern "C" fn(*mut c_void, u64, *mut *mut c_void, *mut *mut u8, *mut usize) -> i32;
type ElementFn = unsafe extern "C" fn(*mut c_void, *mut *const u8, *mut usize) -> usize;
type FieldFn = unsafe extern "C" fn(*mut c_void, usize, *mut FieldView) -> i32;
type ReportFn = unsafe extern "C" fn(*mut c_void, u32, *mut *mut u8, *mut usize) -> i32;
type FreeFn = unsafe extern "C" fn(u32, *mut c_void, usize);
type CompileFn = unsafe extern "C" fn(*const u8, usize, *mut *mut c_void, *mut *mut u8, *mut usize) -> i32;
type EngineOpenFn = unsafe extern "C" fn(
    *const c_void,
    *const u8,
    usize,
    *const u8,
    usize,
    *const u8,
    isize,
    usize,
    *mut *mut c_void,
    *mut *mut u8,
    *mut usize,
) -> i32;
type DropFn = unsafe extern "C" fn(*mut c_void);

/// A loaded pipeline library: its entry points (`open` a compiled library's, `engine`
/// the engine library's).
#[derive(Debug)]
struct Abi {
    open: Option<OpenFn>,
    engine: Option<(CompileFn, EngineOpenFn, DropFn)>,
    next: NextFn,
    element: ElementFn,
    field: FieldFn,
    report: ReportFn,
    free: FreeFn,
}

/// Loads `path` once per process (never unloaded).
fn load(path: &str) -> Result<&'static Abi, String> {
    static LOADED: OnceLock<Mutex<HashMap<String, &'static Abi>>> = OnceLock::new();
    let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(abi) = loaded.get(path) {
        return Ok(abi);
    }
    // SAFETY: the library is one `sluice python-lib` built: loading it runs no
    // initialisers but Rust's, and the symbols below have the types written here
    // (checked by `sluice_python_abi`).
    let abi = unsafe {
        let lib = libloading::Library::new(path).map_err(|e| format!("cannot load {path}: {e}"))?;
        let version: libloading::Symbol<'_, unsafe extern "C" fn() -> u32> = lib
            .get(b"sluice_python_abi")
            .map_err(|e| format!("{path} is not a Sluice pipeline library: {e}"))?;
        if version() != ABI_VERSION {
            return Err(format!(
                "{path} speaks ABI {} and this sluice package {ABI_VERSION}: rebuild it (delete the cache)",
                version()
            ));
        }
        macro_rules! sym {
            ($name:literal) => {
                *lib.get($name).map_err(|e| format!("{path}: {e}"))?
            };
        }
        let engine = match lib.get::<CompileFn>(b"sluice_engine_compile") {
            Ok(compile) => Some((*compile, sym!(b"sluice_engine_open"), sym!(b"sluice_engine_drop"))),
            Err(_) => None,
        };
        let abi = Abi {
            open: lib.get::<OpenFn>(b"sluice_python_open").ok().map(|f| *f),
            engine,
            next: sym!(b"sluice_python_next"),
            element: sym!(b"sluice_python_element"),
            field: sym!(b"sluice_python_field"),
            report: sym!(b"sluice_python_report"),
            free: sym!(b"sluice_python_free"),
        };
        std::mem::forget(lib);
        abi
    };
    let abi: &'static Abi = Box::leak(Box::new(abi));
    loaded.insert(path.to_string(), abi);
    Ok(abi)
}

/// Bytes the library gave, copied out and freed.
fn take_bytes(abi: &Abi, ptr: *mut u8, len: usize) -> Vec<u8> {
    if ptr.is_null() {
        return Vec::new();
    }
    // SAFETY: the library gave `len` bytes at `ptr`, freed once, here.
    unsafe {
        let v = std::slice::from_raw_parts(ptr, len).to_vec();
        (abi.free)(2, ptr.cast(), len);
        v
    }
}

/// The exception of a failure of `kind` (1 data, 2 parameter, 3 a pipeline the engine
/// does not run).
fn failure(kind: i32, message: String) -> PyErr {
    match kind.abs() {
        2 => ParameterError::new_err(message),
        3 => SluiceError::new_err(message),
        _ => DataError::new_err(message),
    }
}

/// A pointer that crosses into a `detach`ed closure or sits in a pyclass: its pointee is
/// used by one thread at a time (`&mut self` methods, which PyO3's borrow flag guards).
struct Ptr<T>(T);
// SAFETY: see the type's doc: the pointee is used by one thread at a time.
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as above; shared references never reach the pointee concurrently.
unsafe impl<T> Sync for Ptr<T> {}

/// A pipeline library.
#[pyclass(module = "sluice._native", frozen)]
#[derive(Debug)]
struct Library {
    abi: &'static Abi,
}

#[pymethods]
impl Library {
    /// Loads the library at `path` (once per process).
    #[new]
    fn new(path: &str) -> PyResult<Library> {
        load(path).map(|abi| Library { abi }).map_err(SluiceError::new_err)
    }

    /// Opens a session of pipeline `name` with `set` (`NAME=VALUE` strings), resuming
    /// from `resume` (`PipelineState` bytes) when given, within `budget` bytes (0: the
    /// declared budget).
    #[pyo3(signature = (name, set, resume=None, budget=0))]
    fn open(
        &self,
        py: Python<'_>,
        name: &str,
        set: Vec<String>,
        resume: Option<Vec<u8>>,
        budget: usize,
    ) -> PyResult<Session> {
        let open = self
            .abi
            .open
            .ok_or_else(|| SluiceError::new_err("the engine's library opens through `Engine.compile`"))?;
        // SAFETY: `open` is the library's `sluice_python_open`, called as its ABI says.
        open_session(py, self.abi, name, set, resume, budget, move |a| unsafe {
            open(a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7, a.8, a.9)
        })
    }
}

/// The arguments of `sluice_python_open` after the program (pointers valid for the call).
type OpenArgs =
    (*const u8, usize, *const u8, usize, *const u8, isize, usize, *mut *mut c_void, *mut *mut u8, *mut usize);

/// Opens a session through `call` (a library's `open`, with the GIL released): `set`
/// joined with NUL bytes, `resume` or none (-1), the failure's exception.
fn open_session(
    py: Python<'_>,
    abi: &'static Abi,
    name: &str,
    set: Vec<String>,
    resume: Option<Vec<u8>>,
    budget: usize,
    call: impl FnOnce(OpenArgs) -> i32 + Send,
) -> PyResult<Session> {
    let mut joined = Vec::new();
    for s in &set {
        joined.extend_from_slice(s.as_bytes());
        joined.push(0);
    }
    let name = name.as_bytes().to_vec();
    let (code, handle, err, err_len) = py.detach(move || {
        let (mut out, mut err, mut err_len) = (std::ptr::null_mut(), std::ptr::null_mut(), 0usize);
        let (rp, rl) = match &resume {
            Some(r) => (r.as_ptr(), r.len() as isize),
            None => (std::ptr::null(), -1),
        };
        let code = call((
            name.as_ptr(),
            name.len(),
            joined.as_ptr(),
            joined.len(),
            rp,
            rl,
            budget,
            &mut out,
            &mut err,
            &mut err_len,
        ));
        (code, Ptr(out), Ptr(err), err_len)
    });
    if code != 0 {
        let message = String::from_utf8_lossy(&take_bytes(abi, err.0, err_len)).into_owned();
        return Err(failure(code, message));
    }
    Ok(Session { abi, handle: handle.0, last: Vec::new() })
}

/// The engine's library (`libsluice_engine_py`, shipped in the wheel): compiles `.pipe`
/// files at run time.
#[pyclass(module = "sluice._native", frozen)]
#[derive(Debug)]
struct Engine {
    abi: &'static Abi,
    compile: CompileFn,
    open: EngineOpenFn,
    drop: DropFn,
}

#[pymethods]
impl Engine {
    /// Loads the engine's library at `path` (once per process).
    #[new]
    fn new(path: &str) -> PyResult<Engine> {
        let abi = load(path).map_err(SluiceError::new_err)?;
        let (compile, open, drop) =
            abi.engine.ok_or_else(|| SluiceError::new_err(format!("{path} is not the engine's library")))?;
        Ok(Engine { abi, compile, open, drop })
    }

    /// Compiles the `.pipe` file at `path`: `(program, answer)`, the answer the JSON text
    /// `sluice python-lib` would print (with each pipeline's `refusal`), the program
    /// `None` when the file does not compile.
    fn compile(&self, py: Python<'_>, path: &str) -> (Option<Program>, String) {
        let compile = self.compile;
        let path = path.as_bytes().to_vec();
        let (code, program, answer, len) = py.detach(move || {
            let (mut program, mut answer, mut len) = (std::ptr::null_mut(), std::ptr::null_mut(), 0usize);
            // SAFETY: the path is valid for the call; the out-pointers too.
            let code = unsafe { compile(path.as_ptr(), path.len(), &mut program, &mut answer, &mut len) };
            (code, Ptr(program), Ptr(answer), len)
        });
        let answer = String::from_utf8_lossy(&take_bytes(self.abi, answer.0, len)).into_owned();
        let program = (code == 0).then(|| Program {
            abi: self.abi,
            open: self.open,
            drop: self.drop,
            handle: Ptr(program.0),
        });
        (program, answer)
    }
}

/// A `.pipe` file the engine compiled: its pipelines' sessions.
#[pyclass(module = "sluice._native", frozen)]
#[derive(Debug)]
struct Program {
    abi: &'static Abi,
    open: EngineOpenFn,
    drop: DropFn,
    /// Read only after it is made (sessions keep their own share of the pipelines).
    handle: Ptr<*mut c_void>,
}

impl std::fmt::Debug for Ptr<*mut c_void> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:p}", self.0)
    }
}

#[pymethods]
impl Program {
    /// Opens a session of pipeline `name`, as `Library.open`.
    #[pyo3(signature = (name, set, resume=None, budget=0))]
    fn open(
        &self,
        py: Python<'_>,
        name: &str,
        set: Vec<String>,
        resume: Option<Vec<u8>>,
        budget: usize,
    ) -> PyResult<Session> {
        let (open, program) = (self.open, Ptr(self.handle.0.cast_const()));
        open_session(py, self.abi, name, set, resume, budget, move |a| {
            let program = program;
            // SAFETY: the program is live (dropped only with `self`), the rest as the ABI asks.
            unsafe { open(program.0, a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7, a.8, a.9) }
        })
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program came from `compile` and is dropped once, here.
        unsafe { (self.drop)(self.handle.0) };
    }
}

/// A running pipeline: its elements, statistics and position.
#[pyclass(module = "sluice._native")]
#[derive(Debug)]
struct Session {
    abi: &'static Abi,
    handle: *mut c_void,
    /// The data pointers of the last element's tensors, by field (for the tests of
    /// zero copy).
    last: Vec<(String, usize)>,
}

// SAFETY: the handle is a `Box<dyn sluice::python::Session>` (which is `Send`), used
// through `&mut self` only (or `&self` for the statistics and state, which the session
// reads without changing).
unsafe impl Send for Session {}
// SAFETY: as above.
unsafe impl Sync for Session {}

#[pymethods]
impl Session {
    /// The next element, pulling until `passes` passes have run; `None` at the end. A
    /// dict of fields (numbers as [`Tensor`]s, byte strings and strings as `bytes`/`str`
    /// or lists of them), or a `str` of JSON for an element without fields.
    fn next(&mut self, py: Python<'_>, passes: u64) -> PyResult<Option<Py<PyAny>>> {
        let abi = self.abi;
        let handle = Ptr(self.handle);
        let (code, element, err, err_len) = py.detach(move || {
            let handle = handle;
            let (mut element, mut err, mut err_len) = (std::ptr::null_mut(), std::ptr::null_mut(), 0usize);
            // SAFETY: the handle is live (freed only in `drop`) and the out-pointers valid.
            let code = unsafe { (abi.next)(handle.0, passes, &mut element, &mut err, &mut err_len) };
            (code, Ptr(element), Ptr(err), err_len)
        });
        match code {
            0 => return Ok(None),
            1 => {}
            k => {
                let message = String::from_utf8_lossy(&take_bytes(abi, err.0, err_len)).into_owned();
                return Err(failure(k, message));
            }
        }
        let element = element.0;
        let out = self.convert(py, element);
        // SAFETY: the element came from `next` and is freed once, here.
        unsafe { (abi.free)(1, element, 0) };
        out.map(Some)
    }

    /// Records, batches, seconds and per-stage statistics as JSON text.
    fn stats(&self) -> String {
        let (mut p, mut n) = (std::ptr::null_mut(), 0usize);
        // SAFETY: the handle is live; the out-pointers valid.
        unsafe { (self.abi.report)(self.handle, 0, &mut p, &mut n) };
        String::from_utf8_lossy(&take_bytes(self.abi, p, n)).into_owned()
    }

    /// The `PipelineState` bytes of the position reached.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let (mut p, mut n) = (std::ptr::null_mut(), 0usize);
        // SAFETY: the handle is live; the out-pointers valid.
        let code = unsafe { (self.abi.report)(self.handle, 1, &mut p, &mut n) };
        let bytes = take_bytes(self.abi, p, n);
        if code != 0 {
            return Err(failure(code, String::from_utf8_lossy(&bytes).into_owned()));
        }
        Ok(PyBytes::new(py, &bytes))
    }

    /// The data pointers of the last element's tensors, by field, as the pipeline's
    /// buffers had them: a test of zero copy compares them with the arrays'.
    fn last_pointers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in &self.last {
            d.set_item(k, v)?;
        }
        Ok(d)
    }
}

impl Session {
    fn convert(&mut self, py: Python<'_>, element: *mut c_void) -> PyResult<Py<PyAny>> {
        let abi = self.abi;
        let (mut json, mut json_len) = (std::ptr::null(), 0usize);
        // SAFETY: the element is live until the caller frees it.
        let fields = unsafe { (abi.element)(element, &mut json, &mut json_len) };
        if !json.is_null() {
            // SAFETY: the JSON text is borrowed from the live element.
            let text = unsafe { std::slice::from_raw_parts(json, json_len) };
            return Ok(PyString::new(py, &String::from_utf8_lossy(text)).into_any().unbind());
        }
        self.last.clear();
        let dict = PyDict::new(py);
        for i in 0..fields {
            let mut view = std::mem::MaybeUninit::<FieldView>::uninit();
            // SAFETY: `i` is below the field count; `view` is written on success.
            if unsafe { (abi.field)(element, i, view.as_mut_ptr()) } == 0 {
                break;
            }
            // SAFETY: written by the call above.
            let view = unsafe { view.assume_init() };
            // SAFETY: the name is borrowed from the live element.
            let name =
                String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(view.name, view.name_len) })
                    .into_owned();
            let value: Py<PyAny> = match view.kind {
                0 => {
                    // SAFETY: a non-null tensor is now ours (its deleter ours to run).
                    let data = unsafe { view.tensor.as_ref().map_or(0, |t| t.dl_tensor.data as usize) };
                    self.last.push((name.clone(), data));
                    Py::new(py, Tensor { managed: Ptr(view.tensor) })?.into_any()
                }
                kind => {
                    // SAFETY: borrowed from the live element, `offsets_len` offsets into
                    // `values_len` bytes.
                    let (values, offsets) = unsafe {
                        (
                            std::slice::from_raw_parts(view.values, view.values_len),
                            std::slice::from_raw_parts(view.offsets, view.offsets_len),
                        )
                    };
                    let row = |w: &[i64]| &values[w[0] as usize..w[1] as usize];
                    let item = |r: &[u8]| -> Py<PyAny> {
                        if kind == 1 {
                            PyBytes::new(py, r).into_any().unbind()
                        } else {
                            PyString::new(py, &String::from_utf8_lossy(r)).into_any().unbind()
                        }
                    };
                    if view.one == 1 {
                        item(offsets.windows(2).next().map_or(&[][..], row))
                    } else {
                        PyList::new(py, offsets.windows(2).map(|w| item(row(w))))?.into_any().unbind()
                    }
                }
            };
            dict.set_item(name, value)?;
        }
        Ok(dict.into_any().unbind())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: the handle came from `open` and is freed once, here.
        unsafe { (self.abi.free)(0, self.handle, 0) };
    }
}

/// One number field: a DLPack producer over the pipeline's buffer (`torch.from_dlpack`,
/// `numpy.from_dlpack`, `jax.dlpack.from_dlpack` take it without a copy).
#[pyclass(module = "sluice._native")]
struct Tensor {
    managed: Ptr<*mut DLManagedTensor>,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor").field("exported", &self.managed.0.is_null()).finish()
    }
}

/// The capsule's name before and after a consumer takes it.
const DLTENSOR: &CStr = c"dltensor";

/// Runs the deleter of a capsule no consumer took.
unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule; only a `"dltensor"` one is still ours.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, DLTENSOR.as_ptr()) == 1 {
            let t = pyo3::ffi::PyCapsule_GetPointer(capsule, DLTENSOR.as_ptr()).cast::<DLManagedTensor>();
            if let Some(d) = t.as_ref().and_then(|t| t.deleter) {
                d(t);
            }
        } else {
            pyo3::ffi::PyErr_Clear();
        }
    }
}

#[pymethods]
impl Tensor {
    /// The DLPack capsule (once: the buffer moves to its consumer).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &mut self,
        py: Python<'_>,
        stream: Option<Py<PyAny>>,
        max_version: Option<Py<PyAny>>,
        dl_device: Option<Py<PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (stream, max_version, dl_device);
        if copy == Some(true) {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "sluice tensors are exported without a copy",
            ));
        }
        let t = std::mem::replace(&mut self.managed.0, std::ptr::null_mut());
        if t.is_null() {
            return Err(pyo3::exceptions::PyBufferError::new_err("this tensor was exported already"));
        }
        // SAFETY: `t` is a live managed tensor; the capsule owns it from here (its
        // destructor deletes it unless a consumer renamed it).
        let capsule =
            unsafe { pyo3::ffi::PyCapsule_New(t.cast(), DLTENSOR.as_ptr(), Some(capsule_destructor)) };
        if capsule.is_null() {
            // SAFETY: not handed out: ours to delete.
            unsafe {
                if let Some(d) = (*t).deleter {
                    d(t);
                }
            }
            return Err(PyErr::fetch(py));
        }
        // SAFETY: a new reference.
        Ok(unsafe { Py::from_owned_ptr(py, capsule) })
    }

    /// `(kDLCPU, 0)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    /// The shape (while not exported).
    #[getter]
    fn shape(&self) -> Vec<i64> {
        // SAFETY: a non-null tensor is live and ours.
        match unsafe { self.managed.0.as_ref() } {
            Some(t) => (0..t.dl_tensor.ndim as usize)
                // SAFETY: `ndim` sizes.
                .map(|i| unsafe { *t.dl_tensor.shape.add(i) })
                .collect(),
            None => Vec::new(),
        }
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        let t = self.managed.0;
        // SAFETY: never exported: ours to delete, once.
        unsafe {
            if let Some(d) = t.as_ref().and_then(|t| t.deleter) {
                d(t);
            }
        }
    }
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Library>()?;
    m.add_class::<Engine>()?;
    m.add_class::<Program>()?;
    m.add_class::<Session>()?;
    m.add_class::<Tensor>()?;
    m.add("SluiceError", py.get_type::<SluiceError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("ParameterError", py.get_type::<ParameterError>())?;
    m.add("DataError", py.get_type::<DataError>())?;
    m.add("ABI_VERSION", ABI_VERSION)?;
    Ok(())
}
