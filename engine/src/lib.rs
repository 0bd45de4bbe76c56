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
mod cache;
mod eval;
mod map;
mod num;
mod ops;
mod params;
mod parse;
mod py;
pub mod resume;
mod sequence;
mod shapes;
mod sources;
mod value;
mod vector;

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
        "pipeline `{pipeline}`: the engine does not run {what} yet{}; run it compiled (`--engine compiled`)",
        if what.contains(node) { String::new() } else { format!(" (in {node})") }
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
/// before anything runs. A pipeline that takes others (`zip`, `concatenate`,
/// `sample_from`) needs [`check_in`].
pub fn check(pipeline: &Pipeline) -> Result<(), EngineError> {
    check_in(std::slice::from_ref(pipeline), pipeline)
}

/// [`check`] of a pipeline of a file whose pipelines are `all`: the pipelines it takes
/// are checked too.
pub fn check_in(all: &[Pipeline], pipeline: &Pipeline) -> Result<(), EngineError> {
    for name in params::takes(&pipeline.optimized.plan) {
        match all.iter().find(|p| p.name() == name) {
            Some(input) if input.name() != pipeline.name() => check_in(all, input)?,
            _ => {
                return Err(EngineError::Unsupported {
                    pipeline: pipeline.name().to_string(),
                    node: "ZipExec",
                    what: format!("pipeline `{name}`, which it takes, without the file's other pipelines"),
                });
            }
        }
    }
    check_node(pipeline)
}

fn check_node(pipeline: &Pipeline) -> Result<(), EngineError> {
    let name = pipeline.name().to_string();
    if let Some(f) = pipeline.decls.externs.first() {
        return Err(EngineError::Extern { pipeline: name, function: f.path.clone() });
    }
    // Between `files` and the reader the elements are paths: a file-level `shard`,
    // `take`, `skip`, `repeat`, `shuffle` or `prefetch` (`build::paths_stage`).
    let mut paths = false;
    for node in &pipeline.physical.stages {
        use sluice_compiler::physical::Exec;
        match &node.exec {
            Exec::Files { .. } => paths = true,
            Exec::Interleave { .. }
            | Exec::ReadBatches { .. }
            | Exec::ReadColumns { .. }
            | Exec::ReadFile { .. }
            | Exec::GlobalShuffle { .. } => paths = false,
            Exec::Take(_)
            | Exec::Skip(_)
            | Exec::Repeat(_)
            | Exec::Shuffle { .. }
            | Exec::Shard { .. }
            | Exec::Prefetch(_) => {}
            e if paths => {
                let what = format!("`{}` of file paths, before the reader", e.name());
                return Err(EngineError::Unsupported { pipeline: name, node: e.name(), what });
            }
            _ => {}
        }
        if let Some(what) = refusal(&node.exec, &pipeline.decls.schema) {
            return Err(EngineError::Unsupported { pipeline: name, node: node.exec.name(), what });
        }
    }
    // A `device cuda` tail runs as the compiled runner runs it: its CPU twin, a map.
    if let Some((t, _)) = &pipeline.physical.tail
        && let Some(what) = refusal(&shapes::twin(t), &pipeline.decls.schema)
    {
        return Err(EngineError::Unsupported { pipeline: name, node: "DeviceTailExec", what });
    }
    Ok(())
}

/// The dataset of `pipeline` with `params` (nothing runs until it is iterated); call
/// [`check`] first: a node it refuses is a runtime `Error::Invalid` here.
pub fn dataset(pipeline: &Pipeline, params: &Params) -> sluice_runtime::Result<Ds> {
    dataset_in(std::slice::from_ref(pipeline), pipeline, params)
}

/// [`dataset`] of a pipeline of a file whose pipelines are `all` (those it takes);
/// `params` from [`params_in`].
pub fn dataset_in(all: &[Pipeline], pipeline: &Pipeline, params: &Params) -> sluice_runtime::Result<Ds> {
    // `cache(file)` stamps its file with the pipeline's fingerprint.
    let caches = pipeline
        .physical
        .stages
        .iter()
        .any(|n| matches!(n.exec, sluice_compiler::physical::Exec::Cache { file: Some(_), .. }));
    let fingerprint = if caches { Some(resume::fingerprint(pipeline, all, params)?) } else { None };
    let _fingerprint = cache::Fingerprint::set(fingerprint);
    let params = Arc::new(params.clone());
    let schema = Arc::new(pipeline.decls.schema.clone());
    match &pipeline.physical.tail {
        Some((t, figures)) if !t.ops.is_empty() => {
            let mut stages = pipeline.physical.stages.clone();
            stages.push(sluice_compiler::physical::ExecNode {
                exec: shapes::twin(t),
                figures: figures.clone(),
            });
            build::chain(&stages, &params, &schema, all)
        }
        _ => build::chain(&pipeline.physical.stages, &params, &schema, all),
    }
}

/// The parameters of `pipeline` from `--set NAME=VALUE` pairs (what the runner's
/// `params` argument takes), checked against what its stages need (the generated
/// `Params::check`'s rules and messages).
pub fn params(pipeline: &Pipeline, set: &[(String, String)]) -> Result<Params, String> {
    params_in(std::slice::from_ref(pipeline), pipeline, set)
}

/// [`params`] of a pipeline of a file whose pipelines are `all`: also the parameters of
/// the pipelines it takes (`sample_from`, `zip`, `concatenate`), set as
/// `--set INPUT.NAME=VALUE`.
pub fn params_in(all: &[Pipeline], pipeline: &Pipeline, set: &[(String, String)]) -> Result<Params, String> {
    Params::of_pipeline(all, pipeline, set)
}

#[cfg(test)]
mod tests {
    use sluice_runtime::abi::show::{Json, Show};
    use sluice_runtime::stage::Dataset;

    use super::*;

    /// The pipeline `name` of `source`.
    fn pipeline(source: &str, name: &str) -> Pipeline {
        let c = sluice_compiler::compile(source);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        c.pipelines.into_iter().find(|p| p.name() == name).unwrap()
    }

    /// Every element of one pass as `sluice show` prints it.
    fn shown(p: &Pipeline, set: &[(&str, &str)]) -> Vec<String> {
        check(p).unwrap();
        let set: Vec<(String, String)> = set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let ds = dataset(p, &params(p, &set).unwrap()).unwrap();
        ds.stream()
            .unwrap()
            .map(|x| {
                let mut out = Json::new();
                x.unwrap().show(&mut out);
                out.as_str().to_string()
            })
            .collect()
    }

    const RANGES: &str = r#"
        pipeline evens(n: i64 = 6) {
            range(n);
            map { twice = value * 2; half = cast(value, f32) / 2.0; big = value >= 3; }
            filter(twice != 4);
            select(twice, half, big);
            batch(2);
        }
        pipeline numbered() {
            range(3);
            enumerate(start: 10);
            map { value = -value; }
            skip(1);
        }
        pipeline divided(d: i64 = 0) {
            range(3);
            map { q = value / d; }
        }
    "#;

    #[test]
    fn a_plan_runs_as_the_generated_code_would() {
        let p = pipeline(RANGES, "evens");
        assert_eq!(
            shown(&p, &[("n", "5")]),
            [
                r#"{"twice":{"dtype":"i64","shape":[2],"values":[0,2]},"half":{"dtype":"f32","shape":[2],"values":[0.0,0.5]},"big":{"dtype":"bool","shape":[2],"values":[false,false]}}"#,
                r#"{"twice":{"dtype":"i64","shape":[2],"values":[6,8]},"half":{"dtype":"f32","shape":[2],"values":[1.5,2.0]},"big":{"dtype":"bool","shape":[2],"values":[true,true]}}"#,
            ]
        );
        let p = pipeline(RANGES, "numbered");
        assert_eq!(
            shown(&p, &[]),
            [
                r#"{"value":{"dtype":"i64","shape":[],"values":[-1]},"index":{"dtype":"i64","shape":[],"values":[11]}}"#,
                r#"{"value":{"dtype":"i64","shape":[],"values":[-2]},"index":{"dtype":"i64","shape":[],"values":[12]}}"#,
            ]
        );
    }

    #[test]
    fn a_map_over_a_batch_of_batches_maps_each_inner_batch() {
        let source = "pipeline nested() { range(6); batch(2); batch(2); map { value = value * 2; } }";
        assert_eq!(
            shown(&pipeline(source, "nested"), &[]),
            [
                r#"[{"value":{"dtype":"i64","shape":[2],"values":[0,2]}},{"value":{"dtype":"i64","shape":[2],"values":[4,6]}}]"#,
                r#"[{"value":{"dtype":"i64","shape":[2],"values":[8,10]}}]"#,
            ]
        );
    }

    /// A `shard` moved into a `parquet` reader (`tests/pipes/parquet.pipe`, over the
    /// fixtures' four row groups): every worker's pass resumed at any position is the rest of
    /// its whole pass, by rows (behind a filter) and by columns (the footers' counts of its
    /// own row groups); resharding it is refused, naming why.
    #[test]
    fn a_sharded_parquet_reader_resumes_exactly_and_is_not_redealt() {
        use sluice_runtime::stage::{Ctx, DataIter};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let source = std::fs::read_to_string(root.join("tests/pipes/parquet.pipe")).unwrap();
        let files = root.join("tests/fixtures/parquet/table-*.parquet").display().to_string();
        for name in ["sharded", "sharded_columns"] {
            let p = pipeline(&source, name);
            check(&p).unwrap();
            for worker in ["0", "1", "2"] {
                let set = [("files".to_string(), files.clone()), ("worker".to_string(), worker.to_string())];
                let params = params(&p, &set).unwrap();
                let ds = dataset(&p, &params).unwrap();
                let pass = |skip: u64| -> Vec<String> {
                    let mut it = ds.iter_from(&Ctx::new(&Default::default()), skip).unwrap();
                    let mut out = Vec::new();
                    while let Some(x) = it.next().unwrap() {
                        let mut json = Json::new();
                        x.show(&mut json);
                        out.push(json.as_str().to_string());
                    }
                    out
                };
                let whole = pass(0);
                assert!(!whole.is_empty(), "{name}: worker {worker}");
                for k in 1..=whole.len() {
                    assert_eq!(pass(k as u64), whole[k..], "{name}: worker {worker} resumed at {k}");
                }
                let e = resume::reshard(&p, std::slice::from_ref(&p), &params, &[]).unwrap_err().to_string();
                assert!(e.contains("reads whole Parquet row groups of its shard"), "{e}");
            }
        }
    }

    #[test]
    fn bad_parameters_and_data_errors_are_errors() {
        let p = pipeline(RANGES, "evens");
        assert_eq!(
            params(&p, &[("m".into(), "1".into())]).unwrap_err(),
            "unknown parameter `m` (parameters: n)"
        );
        assert!(params(&p, &[("n".into(), "x".into())]).unwrap_err().starts_with("parameter `n`: "));
        let p = pipeline(RANGES, "divided");
        let ds = dataset(&p, &params(&p, &[]).unwrap()).unwrap();
        let e = ds.stream().unwrap().find_map(Result::err).expect("division by zero fails");
        assert!(e.to_string().contains("division by zero"), "{e}");
    }

    #[test]
    fn what_the_engine_does_not_run_is_refused_by_name() {
        let source = r#"
            pipeline windows() { range(10); window(3, shift: 1); }
            pipeline raw(files: glob = "x") {
                schema { b: f16[2] }
                tfrecords(files);
                map { parse_example(); }
            }
            pipeline user() {
                extern fn my::f(x: i64) -> i64;
                range(3);
                map { value = my::f(value); }
            }
        "#;
        let refused = |name: &str| check(&pipeline(source, name)).unwrap_err().to_string();
        // An exec node it does not run (Rust code, which only `pipeline!` writes) is named.
        let mut windows = pipeline(source, "windows");
        let rust = sluice_compiler::physical::Exec::Rust {
            input: sluice_compiler::ir::plan::Element::Record,
            kind: sluice_compiler::ir::plan::RustKind::Map,
            code: String::new(),
            code_index: 0,
        };
        windows.physical.stages.insert(
            1,
            sluice_compiler::physical::ExecNode {
                exec: rust,
                figures: windows.physical.stages[0].figures.clone(),
            },
        );
        assert_eq!(
            check(&windows).unwrap_err().to_string(),
            "pipeline `windows`: the engine does not run Rust code in a stage (`pipeline!`) yet (in RustMapExec); \
             run it compiled (`--engine compiled`)"
        );
        assert!(
            refused("raw").contains("does not run `parse_example` of `b: f16[2]` yet"),
            "{}",
            refused("raw")
        );
        assert!(refused("user").contains("calls `extern fn my::f`"), "{}", refused("user"));
        assert!(refused("user").contains("build.rs"));
    }
}
