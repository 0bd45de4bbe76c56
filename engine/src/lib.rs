//! Sluice's engine: the second backend of the physical plan. Where code generation prints
//! a pipeline's exec nodes as Rust for cargo to build, the engine runs them at once, in
//! this process, with the runtime's own stages and operations over dynamic elements
//! (`value.rs`: typed buffers with shapes, fixed once by the plan). `sluice show` and
//! `sluice run` use it with `--engine interpreted`.
//!
//! ```text
//! driver::Pipeline ─[refusal: every node checked once]─▶ build::chain ─▶ Boxed<Item>
//!   Params::from_args(decls, --set pairs)                    (runtime stages, dynamic fns)
//! ```
//!
//! What it runs so far is [`build::refusal`]'s list; anything else is refused with
//! [`EngineError::Unsupported`] before anything runs, naming the node or operation and
//! saying to run the pipeline compiled. `extern fn` needs code generation:
//! [`EngineError::Extern`].

use std::sync::Arc;

use sluice_compiler::Pipeline;

mod build;
mod eval;
mod num;
mod params;
mod parse;
mod value;

pub use build::{Ds, refusal};
pub use num::Num;
pub use params::{Param, Params};
pub use value::{Columns, Data, Item, Kind, Names, Row, Value};

/// The engine's name in reports (`sluice run`'s report, `--json`'s `engine`).
pub const NAME: &str = "interpreted";

/// Why the engine cannot run a pipeline.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A stage or operation the engine does not run yet.
    #[error(
        "pipeline `{pipeline}`: the engine does not run {what} yet ({node}); run it compiled (`--engine compiled`)"
    )]
    Unsupported {
        /// The pipeline.
        pipeline: String,
        /// The exec node.
        node: &'static str,
        /// The stage or operation, as the user wrote it.
        what: String,
    },
    /// The pipeline calls Rust code of the user's.
    #[error(
        "pipeline `{pipeline}` calls `extern fn {function}`, Rust code of yours that the engine cannot call; \
         compile the file in your crate with `sluice_compiler::build` (build.rs) or `pipeline!` instead"
    )]
    Extern {
        /// The pipeline.
        pipeline: String,
        /// The function's path.
        function: String,
    },
}

/// Whether the engine runs `pipeline`: every exec node (and a device tail) checked, once,
/// before anything runs.
pub fn check(pipeline: &Pipeline) -> Result<(), EngineError> {
    let name = pipeline.name().to_string();
    if let Some(f) = pipeline.decls.externs.first() {
        return Err(EngineError::Extern { pipeline: name, function: f.path.clone() });
    }
    for node in &pipeline.physical.stages {
        if let Some(what) = refusal(&node.exec, &pipeline.decls.schema) {
            return Err(EngineError::Unsupported { pipeline: name, node: node.exec.name(), what });
        }
    }
    if pipeline.physical.tail.is_some() {
        return Err(EngineError::Unsupported {
            pipeline: name,
            node: "DeviceTailExec",
            what: "a `device cuda` tail".into(),
        });
    }
    Ok(())
}

/// The dataset of `pipeline` with `params` (nothing runs until it is iterated); call
/// [`check`] first: a node it refuses is a runtime `Error::Invalid` here.
pub fn dataset(pipeline: &Pipeline, params: &Params) -> sluice_runtime::Result<Ds> {
    let params = Arc::new(params.clone());
    let schema = Arc::new(pipeline.decls.schema.clone());
    build::chain(&pipeline.physical.stages, &params, &schema)
}

/// The parameters of `pipeline` from `--set NAME=VALUE` pairs (what the runner's
/// `params` argument takes).
pub fn params(pipeline: &Pipeline, set: &[(String, String)]) -> Result<Params, String> {
    Params::from_args(&pipeline.decls.params, set)
}
