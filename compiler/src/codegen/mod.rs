//! Code generation: Rust source (a `proc_macro2::TokenStream`) from the checked,
//! optimized and physically planned pipelines of a file.
//!
//! # What is generated (the contract `build.rs` users, `sluice run` and `pipeline!` rely on)
//!
//! For each pipeline `NAME` of a file, one module:
//!
//! ```text
//! pub mod NAME {
//!     pub const NAME: &str = "NAME";
//!     /// The pipeline's parameters, one field each (declared type → Rust type:
//!     /// glob/path/str → String, bool, u32, u64, i64, f64, size → u64 bytes).
//!     pub struct Params { pub files: String, ... }
//!     impl Params {
//!         /// From `NAME=VALUE` pairs (`--set`); defaults fill the rest; a parameter
//!         /// without a default must be set; an unknown name is an error; then `check`.
//!         pub fn from_args(set: &[(String, String)]) -> Result<Params, String>;
//!         /// The values against what the stages they size need (the physical plan's
//!         /// `param_rules`: a count at least 1, a shard's index below its count).
//!         pub fn check(&self) -> Result<(), String>;
//!     }
//!     impl Default for Params  // only when every parameter has a default
//!     pub struct Record { ... }   // when the elements have fields: one Rust field each
//!     pub struct Batch { ... }    // when the elements are batches of fields: one column each;
//!                                 // `NamedColumns` gives the columns by field name (tensors)
//!     pub type Item = ...;        // the element type: Record, Batch, __sl::Record (a
//!                                 // serialized record and its origin), RecordBatch, PathBuf
//!     pub fn dataset(params: &Params) -> ::sluice::__private::Result<impl Dataset<Item = Item>>;
//!     /// Runs the pipeline to the end with the runner of `sluice run`.
//!     pub fn run(args: &::sluice::__private::runner::RunArgs) -> ::std::process::ExitCode;
//! }
//! ```
//!
//! `Item` implements `::sluice::__private::Rows`, `abi::show::Show` (what `sluice show`
//! prints), `abi::export::ToExample` (what `sluice run --output` writes) and
//! `abi::py::ToPython` (what `sluice.Pipeline` hands Python): each record
//! and batch struct's impls are written field by field. Generated code names
//! `::sluice::__private` only, plus the paths of the user's `extern fn`s.

mod bucket;
mod combine;
mod context;
pub mod cuda;
mod device_tail;
mod expr;
mod flat_map;
mod maps;
mod module;
mod pack;
mod params;
mod parser;
mod sequence;
mod split;
mod stages;
mod tokenize;
mod types;
mod unbatch;

use proc_macro2::TokenStream;

use crate::diagnostic::Diagnostic;
use crate::ir::decls::Declarations;
use crate::physical::PhysicalPlan;

/// The Rust generated for one `.pipe` file.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The pipelines, in file order (each is a module of that name).
    pub pipelines: Vec<String>,
    /// The code: one module per pipeline.
    pub tokens: TokenStream,
    /// The CUDA kernels of the `device cuda` pipelines' tails, as generated (their names
    /// start with their pipeline's; their sources are in the code too).
    pub kernels: Vec<cuda::Kernel>,
}

impl Generated {
    /// The code as formatted Rust source (prettyplease).
    pub fn to_pretty_string(&self) -> String {
        pretty(&self.tokens)
    }
}

/// Formats generated tokens as Rust source.
pub fn pretty(tokens: &TokenStream) -> String {
    match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        // Only on a code generator bug: show the raw tokens rather than nothing.
        Err(_) => tokens.to_string(),
    }
}

/// What the code generator prints of one pipeline.
#[derive(Debug, Clone, Copy)]
pub struct Unit<'a> {
    /// Its declarations (parameters, schema, user functions).
    pub decls: &'a Declarations,
    /// What runs: the chain of exec nodes and the device tail, and what the module needs
    /// of the optimized logical plan (its `explain` text, output, resume blocker:
    /// [`Logical`](crate::physical::Logical)).
    pub physical: &'a PhysicalPlan,
    /// The tokens of its Rust code (`pipeline!`), by a Rust stage's `code_index`.
    pub rust_code: &'a [TokenStream],
}

/// The Rust of a file's pipelines (checked and planned by the
/// [`driver`](crate::driver)): one module each, or `E0600` for each pipeline the code
/// generator cannot handle.
pub fn generate(pipelines: &[Unit<'_>]) -> Result<Generated, Vec<Diagnostic>> {
    let mut tokens = TokenStream::new();
    let mut names = Vec::new();
    let mut diags = Vec::new();
    let mut kernels = Vec::new();
    for p in pipelines {
        match module::generate(p, pipelines) {
            Ok((t, k)) => {
                tokens.extend(t);
                kernels.extend(k);
            }
            Err(msg) => diags.push(
                Diagnostic::error(
                    "E0600",
                    format!("pipeline `{}` cannot be compiled to Rust: {msg}", p.decls.name),
                    p.decls.span,
                    "in this pipeline",
                )
                .with_note("the checker accepts it, but the code generator does not handle it yet"),
            ),
        }
        names.push(p.decls.name.clone());
    }
    if diags.is_empty() { Ok(Generated { pipelines: names, tokens, kernels }) } else { Err(diags) }
}
