//! The native side of `sluice.Pipeline` (the Python package in `python/`): a small C ABI
//! that the per-pipeline library `sluice python-lib` builds exports, and that the Python
//! extension loads and calls. [`python_module!`](crate::python_module) writes the
//! library's exported functions over its file's pipelines; everything they do is here.
//! The session is generic over what runs ([`Plan`]): a generated pipeline
//! ([`Generated`]), or the engine's plan of one (`python/engine/`, the library the wheel
//! ships, which exports the same functions through [`python_session_abi!`](crate::python_session_abi)
//! and opens its sessions with [`open_c_with`]).
//!
//! What crosses the boundary:
//!
//! - `sluice_python_open(pipeline, set, resume, budget)` makes a session: the parameters
//!   from `NAME=VALUE` pairs (the generated `Params::from_args`, as `sluice run --set`),
//!   the dataset, one runtime context for every pass (the statistics add up), and a
//!   resumed position when `resume` holds `PipelineState` bytes, or the states of every
//!   rank of a run with another number of ranks (`SLSS`, a count and each state's length
//!   and bytes, u32 LE): they are redealt to this run's ranks (the pipeline's `reshard`)
//!   and the session resumes from its own.
//! - `sluice_python_next(session, passes)` pulls the next element (of pass `epoch`, then
//!   the next pass while fewer than `passes` have run): an [`Element`] handle, its fields
//!   by name. The extension calls it with the GIL released; no pipeline thread ever calls
//!   into Python.
//! - A number field crosses as a DLPack `DLManagedTensor` over the very `Vec` the
//!   pipeline built (no copy): the tensor owns it, and its deleter, run by whoever
//!   consumed the capsule last (torch, numpy, JAX), frees it. Byte-string and string
//!   fields cross as bytes and offsets, which the extension copies into Python objects
//!   before it frees the element. Elements without fields cross as their `sluice show`
//!   JSON.
//! - Errors are UTF-8 strings with a kind: 2 for a bad parameter (or a saved state that
//!   does not match), 1 for the data (the runtime's message names the file and record).
//!
//! Every string and byte buffer this side allocates is given back through
//! `sluice_python_free`.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_runtime::abi::Rows;
use sluice_runtime::abi::py::{PyColumn, PyElement, ToPython};
use sluice_runtime::column::Buffer;
use sluice_runtime::stage::{Ctx, Dataset, PipelineState, RuntimeOptions, Stream};

/// The version of this ABI; the extension refuses a library of another.
pub const ABI_VERSION: u32 = 1;

/// DLPack's device (`kDLCPU` = 1).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLDevice {
    /// `kDLCPU` = 1.
    pub device_type: i32,
    /// 0.
    pub device_id: i32,
}

/// DLPack's element type.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLDataType {
    /// `kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2, `kDLBool` 6.
    pub code: u8,
    /// Bits per value.
    pub bits: u8,
    /// 1.
    pub lanes: u16,
}

/// DLPack's tensor (version 0.8 layout, what the `"dltensor"` capsule holds).
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The first value.
    pub data: *mut c_void,
    /// Where the values are.
    pub device: DLDevice,
    /// Dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` sizes.
    pub shape: *mut i64,
    /// Null: compact row-major.
    pub strides: *mut i64,
    /// 0.
    pub byte_offset: u64,
}

/// DLPack's managed tensor: the tensor, and the deleter that frees its buffer.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The [`Owned`] this tensor is the head of.
    pub manager_ctx: *mut c_void,
    /// Frees the buffer; called once by the consumer.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// A managed tensor with the buffer and shape it points into (the tensor first, so a
/// pointer to one is a pointer to the other).
#[repr(C)]
struct Owned {
    tensor: DLManagedTensor,
    buffer: Buffer,
    shape: Vec<i64>,
}

/// The deleter of every tensor made here.
unsafe extern "C" fn delete_owned(t: *mut DLManagedTensor) {
    if !t.is_null() {
        // SAFETY: every tensor with this deleter is the head of an `Owned` leaked by
        // `managed`, and DLPack's contract calls the deleter once.
        drop(unsafe { Box::from_raw(t.cast::<Owned>()) });
    }
}

/// `buffer` with `shape` as a DLPack tensor that owns it (freed by its deleter).
fn managed(shape: &[usize], buffer: Buffer) -> *mut DLManagedTensor {
    let (code, bits) = match &buffer {
        Buffer::Bool(_) => (6, 8),
        Buffer::U8(_) => (1, 8),
        Buffer::U16(_) => (1, 16),
        Buffer::U32(_) => (1, 32),
        Buffer::U64(_) => (1, 64),
        Buffer::I8(_) => (0, 8),
        Buffer::I16(_) => (0, 16),
        Buffer::I32(_) => (0, 32),
        Buffer::I64(_) => (0, 64),
        Buffer::F32(_) => (2, 32),
        Buffer::F64(_) => (2, 64),
    };
    let data = buffer.as_bytes().as_ptr().cast_mut().cast::<c_void>();
    let mut owned = Box::new(Owned {
        tensor: DLManagedTensor {
            dl_tensor: DLTensor {
                data,
                device: DLDevice { device_type: 1, device_id: 0 },
                ndim: shape.len() as i32,
                dtype: DLDataType { code, bits, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_owned),
        },
        buffer,
        shape: shape.iter().map(|&d| d as i64).collect(),
    });
    owned.tensor.dl_tensor.shape = owned.shape.as_mut_ptr();
    let ptr = Box::into_raw(owned);
    // SAFETY: `ptr` was just made from a live box.
    unsafe { (*ptr).tensor.manager_ctx = ptr.cast() };
    ptr.cast()
}

/// One field of an element as the extension reads it (`sluice_python_field`).
#[repr(C)]
#[derive(Debug)]
pub struct FieldView {
    /// The field's name (UTF-8, not NUL-terminated).
    pub name: *const u8,
    /// Its length in bytes.
    pub name_len: usize,
    /// 0: numbers (`tensor`); 1: byte strings; 2: strings (`values` and `offsets`).
    pub kind: u32,
    /// 1 when the field is one record's value (a `bytes`/`str`), 0 for a batch's column.
    pub one: u32,
    /// A number field's tensor, now the caller's: it must run its deleter (or hand it to
    /// a DLPack consumer that will). Null for the other kinds, and when taken already.
    pub tensor: *mut DLManagedTensor,
    /// Byte and string fields: every row's bytes, end to end.
    pub values: *const u8,
    /// Their length.
    pub values_len: usize,
    /// `rows + 1` offsets into `values`.
    pub offsets: *const i64,
    /// `rows + 1`.
    pub offsets_len: usize,
}

/// One element handed to Python.
#[derive(Debug)]
pub struct Element(PyElement);

impl Element {
    /// The number of fields (0 for a JSON element).
    fn fields(&self) -> usize {
        match &self.0 {
            PyElement::Fields(f) => f.len(),
            PyElement::Json(_) => 0,
        }
    }

    /// Field `i`, its tensor taken out (a second call gives a null tensor).
    fn field(&mut self, i: usize) -> Option<FieldView> {
        let PyElement::Fields(fields) = &mut self.0 else { return None };
        let (name, column) = fields.get_mut(i)?;
        let mut view = FieldView {
            name: name.as_ptr(),
            name_len: name.len(),
            kind: 0,
            one: 0,
            tensor: std::ptr::null_mut(),
            values: std::ptr::null(),
            values_len: 0,
            offsets: std::ptr::null(),
            offsets_len: 0,
        };
        match column {
            PyColumn::Tensor { shape, data } => {
                if !shape.is_empty() || data.len() == 1 {
                    let data = std::mem::replace(data, Buffer::U8(Vec::new()));
                    view.tensor = managed(shape, data);
                    shape.clear();
                }
            }
            PyColumn::Bytes { values, offsets, one } | PyColumn::Text { values, offsets, one } => {
                view.kind = 1;
                view.one = u32::from(*one);
                view.values = values.as_ptr();
                view.values_len = values.len();
                view.offsets = offsets.as_ptr();
                view.offsets_len = offsets.len();
            }
        }
        if matches!(column, PyColumn::Text { .. }) {
            view.kind = 2;
        }
        Some(view)
    }
}

/// What a session reports of a failure: its kind (1 data, 2 parameter) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// 1: the data; 2: a parameter or a saved state.
    pub kind: i32,
    /// The message.
    pub message: String,
}

impl Failure {
    fn data(name: &str, e: impl std::fmt::Display) -> Failure {
        Failure { kind: 1, message: format!("pipeline `{name}`: {e}") }
    }

    fn param(name: &str, e: impl std::fmt::Display) -> Failure {
        Failure { kind: 2, message: format!("pipeline `{name}`: {e}") }
    }
}

/// What a session runs: one pipeline, its parameters, dataset and resume state.
pub trait Plan: Send + 'static {
    /// The parameters.
    type Params: Send + 'static;
    /// The dataset.
    type Data: Dataset;
    /// The pipeline's name.
    fn name(&self) -> &str;
    /// The backend, as reports name it: `compiled` or `interpreted`.
    fn engine(&self) -> &'static str;
    /// The parameters from `NAME=VALUE` pairs (as `sluice run --set`).
    fn params(&self, set: &[(String, String)]) -> Result<Self::Params, String>;
    /// The dataset with `params`.
    fn dataset(&self, params: &Self::Params) -> sluice_runtime::Result<Self::Data>;
    /// The state of a run that has consumed `position` elements of pass `epoch`.
    fn state(
        &self,
        params: &Self::Params,
        epoch: u64,
        position: u64,
    ) -> sluice_runtime::Result<PipelineState>;
    /// Checks that `state` was saved by this pipeline with these parameters.
    fn check_state(&self, params: &Self::Params, state: &PipelineState) -> sluice_runtime::Result<()>;
    /// The states of this run's ranks (`params` say how many) from those of every rank of
    /// a run with another number of ranks (the generated `reshard`).
    fn reshard(
        &self,
        params: &Self::Params,
        states: &[PipelineState],
    ) -> sluice_runtime::Result<Vec<PipelineState>>;
    /// The declared memory budget.
    fn budget(&self) -> Option<usize>;
    /// The declared CPU budget (`threads N;`).
    fn threads(&self) -> Option<usize>;
}

/// A running pipeline, its types erased.
pub trait Session: Send {
    /// The next element, running passes until `passes` have run; `None` at the end.
    fn next(&mut self, passes: u64) -> Result<Option<PyElement>, Failure>;
    /// Records, batches, elapsed seconds and the per-stage statistics as JSON.
    fn stats(&self) -> String;
    /// The `PipelineState` bytes of the position reached.
    fn state(&self) -> Result<Vec<u8>, Failure>;
}

/// A generated `Params::from_args`.
pub type ParamsFn<P> = fn(&[(String, String)]) -> Result<P, String>;

/// One pipeline of a generated module: what a session of it needs.
#[derive(Debug)]
pub struct Generated<P, D> {
    /// The pipeline's name.
    pub name: &'static str,
    /// `Params::from_args`.
    pub params: ParamsFn<P>,
    /// `dataset`.
    pub dataset: fn(&P) -> sluice_runtime::Result<D>,
    /// `state`.
    pub state: fn(&P, u64, u64) -> sluice_runtime::Result<PipelineState>,
    /// `check_state`.
    pub check_state: fn(&P, &PipelineState) -> sluice_runtime::Result<()>,
    /// `reshard`.
    pub reshard: fn(&P, &[PipelineState]) -> sluice_runtime::Result<Vec<PipelineState>>,
    /// The declared budget (`BUDGET`).
    pub budget: Option<usize>,
    /// The declared CPU budget (`THREADS`).
    pub threads: Option<usize>,
}

impl<P, D> Clone for Generated<P, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P, D> Copy for Generated<P, D> {}

impl<P: Send + 'static, D: Dataset> Plan for Generated<P, D> {
    type Params = P;
    type Data = D;
    fn name(&self) -> &str {
        self.name
    }
    fn engine(&self) -> &'static str {
        "compiled"
    }
    fn params(&self, set: &[(String, String)]) -> Result<P, String> {
        (self.params)(set)
    }
    fn dataset(&self, params: &P) -> sluice_runtime::Result<D> {
        (self.dataset)(params)
    }
    fn state(&self, params: &P, epoch: u64, position: u64) -> sluice_runtime::Result<PipelineState> {
        (self.state)(params, epoch, position)
    }
    fn check_state(&self, params: &P, state: &PipelineState) -> sluice_runtime::Result<()> {
        (self.check_state)(params, state)
    }
    fn reshard(&self, params: &P, states: &[PipelineState]) -> sluice_runtime::Result<Vec<PipelineState>> {
        (self.reshard)(params, states)
    }
    fn budget(&self) -> Option<usize> {
        self.budget
    }
    fn threads(&self) -> Option<usize> {
        self.threads
    }
}

/// What the extension asks to open.
#[derive(Debug, Default)]
pub struct Request {
    /// `NAME=VALUE` pairs.
    pub set: Vec<(String, String)>,
    /// `PipelineState` bytes to resume from, or a set of them (`SLSS`: see the module doc).
    pub resume: Option<Vec<u8>>,
    /// A memory budget overriding the declared one.
    pub budget: Option<usize>,
}

struct Running<G: Plan> {
    g: G,
    params: G::Params,
    ds: G::Data,
    ctx: Ctx,
    stream: Option<Stream<<G::Data as Dataset>::Iter>>,
    /// The pass being pulled (or to be pulled next) and the elements pulled of it.
    epoch: u64,
    position: u64,
    /// Passes started so far by this session (a resumed one counts its pass).
    started: u64,
    records: u64,
    batches: u64,
    busy: Duration,
}

impl<G> Session for Running<G>
where
    G: Plan,
    <G::Data as Dataset>::Item: ToPython + Rows,
    <G::Data as Dataset>::Iter: Send,
{
    fn next(&mut self, passes: u64) -> Result<Option<PyElement>, Failure> {
        let start = Instant::now();
        let out = loop {
            if self.stream.is_none() {
                if self.started >= passes {
                    break None;
                }
                let stream = self.ds.stream_in(&self.ctx.with_epoch(self.epoch));
                self.stream = Some(stream.map_err(|e| Failure::data(self.g.name(), e))?);
                self.started += 1;
            }
            let Some(stream) = self.stream.as_mut() else { break None };
            match stream.next() {
                Some(Ok(item)) => {
                    self.position += 1;
                    self.records += item.rows();
                    self.batches += u64::from(item.is_batch());
                    break Some(item.to_python());
                }
                Some(Err(e)) => {
                    self.stream = None;
                    return Err(Failure::data(self.g.name(), e));
                }
                None => {
                    self.stream = None;
                    self.epoch += 1;
                    self.position = 0;
                }
            }
        };
        self.busy += start.elapsed();
        Ok(out)
    }

    fn stats(&self) -> String {
        let report = self.ctx.report();
        let secs = self.busy.as_secs_f64();
        json!({
            "pipeline": self.g.name(),
            "engine": self.g.engine(),
            "records": self.records,
            "batches": self.batches,
            "epoch": self.epoch,
            "position": self.position,
            "seconds": secs,
            "records_per_sec": if secs > 0.0 { self.records as f64 / secs } else { 0.0 },
            "stages": crate::runner::stages_json(&report),
            "bottleneck": report.bottleneck().map(|b| b.name.clone()),
        })
        .to_string()
    }

    fn state(&self) -> Result<Vec<u8>, Failure> {
        // With the stage positions of the pass running: the filters' and the shard's (what
        // a resume on another number of ranks redeals from).
        self.g
            .state(&self.params, self.epoch, self.position)
            .map(|s| s.with_stage_positions(&self.ds).to_bytes())
            .map_err(|e| Failure::param(self.g.name(), e))
    }
}

/// Opens a session of pipeline `g`.
pub fn open<G>(g: G, request: &Request) -> Result<Box<dyn Session>, Failure>
where
    G: Plan,
    <G::Data as Dataset>::Item: ToPython + Rows,
    <G::Data as Dataset>::Iter: Send,
{
    let params = g.params(&request.set).map_err(|e| Failure::param(g.name(), e))?;
    let ds = g.dataset(&params).map_err(|e| match e {
        sluice_runtime::Error::Invalid(_) => Failure::param(g.name(), e),
        e => Failure::data(g.name(), e),
    })?;
    let ctx = Ctx::new(&RuntimeOptions { memory_budget: request.budget.or(g.budget()), cores: g.threads() });
    let mut run = Running {
        g,
        params,
        ds,
        ctx,
        stream: None,
        epoch: 0,
        position: 0,
        started: 0,
        records: 0,
        batches: 0,
        busy: Duration::ZERO,
    };
    if let Some(bytes) = &request.resume {
        let name = run.g.name();
        let states = PipelineState::set_from_bytes(bytes, "the states given to resume")
            .map_err(|e| Failure::param(name, e))?;
        let state = resumed(&run.g, &run.params, states).map_err(|e| Failure::param(name, e))?;
        let stream = state.resume(&run.ds, &run.ctx).map_err(|e| Failure::data(name, e))?;
        run.stream = Some(stream);
        run.epoch = state.epoch;
        run.position = state.position;
        run.started = 1;
    }
    Ok(Box::new(run))
}

/// The state this session resumes from: the one given, when it is this run's; else the
/// states of every rank of a run of another size, redealt to this run's ranks (the one
/// that is this rank's).
fn resumed<G: Plan>(
    g: &G,
    params: &G::Params,
    states: Vec<PipelineState>,
) -> sluice_runtime::Result<PipelineState> {
    // One state that does not fit this run: its own reason first, whether or not it is of
    // another number of ranks (a state that names no shard cannot be).
    let mismatch = match states.as_slice() {
        [state] => match g.check_state(params, state) {
            Ok(()) => return Ok(states.into_iter().next().expect("one state")),
            Err(e) if state.shard_position().is_none() => return Err(e),
            Err(e) => Some(e),
        },
        _ => None,
    };
    let redealt = g.reshard(params, &states).and_then(|new| {
        new.into_iter().find(|s| g.check_state(params, s).is_ok()).ok_or_else(|| {
            sluice_runtime::Error::Invalid("no state redealt to this run's ranks is this rank's".into())
        })
    });
    match (redealt, mismatch) {
        (Err(r), Some(e)) => {
            Err(sluice_runtime::Error::Invalid(format!("{e}; nor is it one of another number of ranks: {r}")))
        }
        (redealt, _) => redealt,
    }
}

/// A pipeline's opener, as [`python_module!`](crate::python_module) lists them.
pub type Opener = fn(&Request) -> Result<Box<dyn Session>, Failure>;

/// A session handle, as the C side holds it.
type Handle = Box<dyn Session>;

/// `s` handed to C: `(ptr, len)`, freed by [`free`].
fn give(bytes: Vec<u8>, ptr: *mut *mut u8, len: *mut usize) {
    let mut b = bytes.into_boxed_slice();
    // SAFETY: the caller passes valid out-pointers (the ABI's contract).
    unsafe {
        *len = b.len();
        *ptr = b.as_mut_ptr();
    }
    std::mem::forget(b);
}

/// `(ptr, len)` as a byte slice (empty when null).
///
/// # Safety
/// `ptr` is null or points to `len` readable bytes that outlive the use.
unsafe fn slice<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// `sluice_python_open`: parses the request (`set`: `NAME=VALUE` lines separated by NUL
/// bytes) and opens pipeline `name` among `pipelines`. 0 on success (`*out` the session),
/// else the failure's kind with its message in `*err`/`*err_len`.
///
/// # Safety
/// Every pointer is valid as the ABI says (`python/src/lib.rs` calls it).
#[allow(clippy::too_many_arguments)]
pub unsafe fn open_c(
    pipelines: &[(&str, Opener)],
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
    let open = |name: &str, request: &Request| {
        let Some((_, opener)) = pipelines.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = pipelines.iter().map(|(n, _)| *n).collect();
            return Err(Failure {
                kind: 2,
                message: format!("no pipeline `{name}` (the file has {})", names.join(", ")),
            });
        };
        opener(request)
    };
    // SAFETY: the caller's contract.
    unsafe { open_c_with(open, name, name_len, set, set_len, resume, resume_len, budget, out, err, err_len) }
}

/// [`open_c`] with `open` making the session of a pipeline by name (the engine's library
/// opens the pipelines of a file it compiled at run time).
///
/// # Safety
/// As [`open_c`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn open_c_with(
    open: impl FnOnce(&str, &Request) -> Result<Box<dyn Session>, Failure>,
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
    // SAFETY: the caller's contract.
    let (name, set) = unsafe { (slice(name, name_len), slice(set, set_len)) };
    let name = String::from_utf8_lossy(name);
    let fail = |f: Failure| {
        give(f.message.into_bytes(), err, err_len);
        f.kind
    };
    let mut request = Request { budget: (budget > 0).then_some(budget), ..Request::default() };
    for pair in set.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let pair = String::from_utf8_lossy(pair);
        let (k, v) = pair.split_once('=').unwrap_or((&pair, ""));
        request.set.push((k.to_string(), v.to_string()));
    }
    if resume_len >= 0 {
        // SAFETY: the caller's contract.
        request.resume = Some(unsafe { slice(resume, resume_len as usize) }.to_vec());
    }
    match open(&name, &request) {
        Ok(session) => {
            // SAFETY: the caller's contract.
            unsafe { *out = Box::into_raw(Box::new(session)).cast() };
            0
        }
        Err(f) => fail(f),
    }
}

/// `sluice_python_next`: 1 with `*element` the next element, 0 at the end, else the
/// failure's kind (negated) with its message.
///
/// # Safety
/// `session` came from [`open_c`]; the out-pointers are valid.
pub unsafe fn next_c(
    session: *mut c_void,
    passes: u64,
    element: *mut *mut c_void,
    err: *mut *mut u8,
    err_len: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract.
    let s = unsafe { &mut *session.cast::<Handle>() };
    match s.next(passes) {
        Ok(Some(e)) => {
            // SAFETY: the caller's contract.
            unsafe { *element = Box::into_raw(Box::new(Element(e))).cast() };
            1
        }
        Ok(None) => 0,
        Err(f) => {
            give(f.message.into_bytes(), err, err_len);
            -f.kind
        }
    }
}

/// `sluice_python_element`: the number of fields (`*json`/`*json_len` the JSON text of
/// an element without fields, borrowed from it, else null).
///
/// # Safety
/// `element` came from [`next_c`]; the out-pointers are valid.
pub unsafe fn element_c(element: *mut c_void, json: *mut *const u8, json_len: *mut usize) -> usize {
    // SAFETY: the caller's contract.
    let e = unsafe { &*element.cast::<Element>() };
    let (p, n) = match &e.0 {
        PyElement::Json(s) => (s.as_ptr(), s.len()),
        PyElement::Fields(_) => (std::ptr::null(), 0),
    };
    // SAFETY: the caller's contract.
    unsafe {
        *json = p;
        *json_len = n;
    }
    e.fields()
}

/// `sluice_python_field`: field `i` into `*view`; 0 when there is no such field.
///
/// # Safety
/// `element` came from [`next_c`]; `view` is valid.
pub unsafe fn field_c(element: *mut c_void, i: usize, view: *mut FieldView) -> i32 {
    // SAFETY: the caller's contract.
    let e = unsafe { &mut *element.cast::<Element>() };
    match e.field(i) {
        Some(v) => {
            // SAFETY: the caller's contract.
            unsafe { view.write(v) };
            1
        }
        None => 0,
    }
}

/// `sluice_python_stats` / `sluice_python_state`: the JSON statistics (`which` 0) or
/// the `PipelineState` bytes (`which` 1) into `*out`; 0, or the failure's kind.
///
/// # Safety
/// `session` came from [`open_c`]; the out-pointers are valid.
pub unsafe fn report_c(session: *mut c_void, which: u32, out: *mut *mut u8, out_len: *mut usize) -> i32 {
    // SAFETY: the caller's contract.
    let s = unsafe { &*session.cast::<Handle>() };
    if which == 0 {
        give(s.stats().into_bytes(), out, out_len);
        return 0;
    }
    match s.state() {
        Ok(b) => {
            give(b, out, out_len);
            0
        }
        Err(f) => {
            give(f.message.into_bytes(), out, out_len);
            f.kind
        }
    }
}

/// `sluice_python_free`: frees what `kind` names: 0 a session, 1 an element, 2 bytes
/// this side gave (`len` their length).
///
/// # Safety
/// `ptr` came from this side as `kind` and is freed once.
pub unsafe fn free_c(kind: u32, ptr: *mut c_void, len: usize) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: the caller's contract: each pointer is what `kind` says, freed once.
    unsafe {
        match kind {
            0 => drop(Box::from_raw(ptr.cast::<Handle>())),
            1 => drop(Box::from_raw(ptr.cast::<Element>())),
            _ => drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr.cast::<u8>(), len))),
        }
    }
}

/// Writes the C ABI of a per-pipeline library (`sluice python-lib`) over the modules of
/// `pipelines` (the generated file, a module named `pipelines` in the crate root): one
/// `extern "C"` function per entry point of [`crate::python`], each a thin call.
#[macro_export]
macro_rules! python_module {
    ($($name:ident),* $(,)?) => {
        $crate::python_session_abi!();

        const __SLUICE_PIPELINES: &[(&str, $crate::python::Opener)] = &[
            $((pipelines::$name::NAME, |r| $crate::python::open($crate::python::Generated {
                name: pipelines::$name::NAME,
                params: pipelines::$name::Params::from_args,
                dataset: pipelines::$name::dataset,
                state: pipelines::$name::state,
                check_state: pipelines::$name::check_state,
                reshard: pipelines::$name::reshard,
                budget: pipelines::$name::BUDGET,
                threads: pipelines::$name::THREADS,
            }, r)),)*
        ];

        /// Opens a session.
        ///
        /// # Safety
        /// As `sluice::python::open_c`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_python_open(
            name: *const u8, name_len: usize, set: *const u8, set_len: usize,
            resume: *const u8, resume_len: isize, budget: usize,
            out: *mut *mut ::std::ffi::c_void, err: *mut *mut u8, err_len: *mut usize,
        ) -> i32 {
            // SAFETY: forwarded.
            unsafe {
                $crate::python::open_c(__SLUICE_PIPELINES, name, name_len, set, set_len, resume, resume_len, budget, out, err, err_len)
            }
        }
    };
}

/// Writes the functions of the C ABI that every library exports alike, whatever opens
/// its sessions: `sluice_python_abi`, `_next`, `_element`, `_field`, `_report`, `_free`
/// ([`python_module!`](crate::python_module) adds `sluice_python_open` over generated
/// pipelines; the engine's library its own opener).
#[macro_export]
macro_rules! python_session_abi {
    () => {
        /// The ABI version.
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_python_abi() -> u32 {
            $crate::python::ABI_VERSION
        }

        /// The next element.
        ///
        /// # Safety
        /// As `sluice::python::next_c`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_python_next(
            session: *mut ::std::ffi::c_void,
            passes: u64,
            element: *mut *mut ::std::ffi::c_void,
            err: *mut *mut u8,
            err_len: *mut usize,
        ) -> i32 {
            // SAFETY: forwarded.
            unsafe { $crate::python::next_c(session, passes, element, err, err_len) }
        }

        /// An element's field count (or JSON).
        ///
        /// # Safety
        /// As `sluice::python::element_c`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_python_element(
            element: *mut ::std::ffi::c_void,
            json: *mut *const u8,
            json_len: *mut usize,
        ) -> usize {
            // SAFETY: forwarded.
            unsafe { $crate::python::element_c(element, json, json_len) }
        }

        /// One field of an element.
        ///
        /// # Safety
        /// As `sluice::python::field_c`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_python_field(
            element: *mut ::std::ffi::c_void,
            i: usize,
            view: *mut $crate::python::FieldView,
        ) -> i32 {
            // SAFETY: forwarded.
            unsafe { $crate::python::field_c(element, i, view) }
        }

        /// Statistics (0) or state (1).
        ///
        /// # Safety
        /// As `sluice::python::report_c`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_python_report(
            session: *mut ::std::ffi::c_void,
            which: u32,
            out: *mut *mut u8,
            out_len: *mut usize,
        ) -> i32 {
            // SAFETY: forwarded.
            unsafe { $crate::python::report_c(session, which, out, out_len) }
        }

        /// Frees a session (0), element (1) or bytes (2).
        ///
        /// # Safety
        /// As `sluice::python::free_c`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_python_free(kind: u32, ptr: *mut ::std::ffi::c_void, len: usize) {
            // SAFETY: forwarded.
            unsafe { $crate::python::free_c(kind, ptr, len) }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tensor_owns_its_buffer_until_its_deleter_runs() {
        let v = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let ptr = v.as_ptr();
        let t = managed(&[2, 3], Buffer::F32(v));
        // SAFETY: `t` was just made and is deleted once, below.
        unsafe {
            let d = &(*t).dl_tensor;
            assert_eq!(d.data.cast_const().cast::<f32>(), ptr, "no copy");
            assert_eq!((d.ndim, d.dtype.code, d.dtype.bits), (2, 2, 32));
            assert_eq!(std::slice::from_raw_parts(d.shape, 2), &[2, 3]);
            assert_eq!(*d.data.cast::<f32>().add(5), 6.0);
            ((*t).deleter.unwrap())(t);
        }
    }

    #[test]
    fn fields_give_their_tensor_once_and_strings_as_offsets() {
        let mut e = Element(PyElement::Fields(vec![
            ("x", PyColumn::Tensor { shape: vec![2], data: Buffer::I64(vec![3, 4]) }),
            ("s", PyColumn::Text { values: b"abc".to_vec(), offsets: vec![0, 1, 3], one: false }),
        ]));
        assert_eq!(e.fields(), 2);
        let x = e.field(0).unwrap();
        assert!(!x.tensor.is_null());
        // SAFETY: the tensor is ours and deleted once.
        unsafe { ((*x.tensor).deleter.unwrap())(x.tensor) };
        assert!(e.field(0).unwrap().tensor.is_null(), "taken");
        let s = e.field(1).unwrap();
        // SAFETY: the view borrows `e`, alive here.
        let offsets = unsafe { std::slice::from_raw_parts(s.offsets, s.offsets_len) };
        assert_eq!((s.kind, s.one, s.values_len, offsets), (2, 0, 3, &[0i64, 1, 3][..]));
        assert!(e.field(2).is_none());
    }
}
