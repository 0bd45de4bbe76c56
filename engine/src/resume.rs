//! A pipeline's position, saved and restored as the generated code does it
//! (`compiler/src/codegen/module.rs`'s `resume_items`): the same `PipelineState`, the same
//! fingerprint (name, the optimized plan's `explain` text, the generated `Params`'
//! `Debug` text, the files the globs match), the same refusals. A state saved by one
//! backend resumes in the other.

use sluice_compiler::Pipeline;
use sluice_compiler::ir::plan::{ArgValue, Plan};
use sluice_compiler::ir::types::Value;
use sluice_runtime::stage::{PipelineState, available_cores, fingerprint as hash};
use sluice_runtime::{Error, Result};

use crate::params::{Params, takes};

/// Why `pipeline`'s position cannot be saved and restored exactly, or `None`: its own
/// plan's blocker, else the first of the pipelines it zips or concatenates (`all`: the
/// file's pipelines).
pub fn blocker(pipeline: &Pipeline, all: &[Pipeline]) -> Option<String> {
    let plan = &pipeline.optimized.plan;
    if let Some(why) = sluice_compiler::ir::plan::resume_blocker(plan) {
        return Some(why);
    }
    let inputs = sluice_compiler::ir::combine::passes_beneath(plan);
    inputs.iter().find_map(|name| all.iter().find(|p| p.name() == *name).and_then(|p| blocker(p, all)))
}

/// The fingerprint of `pipeline` with `params`: the generated `fingerprint(params)`.
pub fn fingerprint(pipeline: &Pipeline, all: &[Pipeline], params: &Params) -> Result<u64> {
    let plan = &pipeline.optimized.plan;
    let mut globs = Vec::new();
    let mut auto_cycle = false;
    let mut node = Some(plan);
    while let Some(n) = node {
        match n {
            Plan::Files(f) => globs.push(match &f.pattern {
                ArgValue::Const(Value::Str(s)) => s.clone(),
                p @ ArgValue::Param(_) => params.text(p).map_err(Error::Invalid)?,
                other => return Err(Error::Invalid(format!("`{other}` where a path or glob is needed"))),
            }),
            Plan::Interleave(il) => auto_cycle |= il.cycle_length == ArgValue::Auto,
            _ => {}
        }
        node = n.input();
    }
    let text = if takes(plan).is_empty() {
        params.debug_text(&pipeline.decls.params)
    } else {
        params.debug_text_in(&pipeline.decls.params, all)
    };
    // An `auto` cycle reads in an order that depends on the cores.
    let text = if auto_cycle { format!("{text} cores={}", available_cores()) } else { text };
    let globs: Vec<&str> = globs.iter().map(String::as_str).collect();
    hash(pipeline.name(), &plan.explain(), &text, &globs)
}

/// The state of a run that has consumed `position` elements of pass `epoch` (the
/// generated `state`); an error when the pipeline cannot be resumed exactly.
pub fn state(
    pipeline: &Pipeline,
    all: &[Pipeline],
    params: &Params,
    epoch: u64,
    position: u64,
) -> Result<PipelineState> {
    if let Some(why) = blocker(pipeline, all) {
        return Err(Error::Invalid(format!(
            "pipeline `{}` cannot be resumed exactly: {why}",
            pipeline.name()
        )));
    }
    Ok(PipelineState {
        pipeline: pipeline.name().to_string(),
        fingerprint: fingerprint(pipeline, all, params)?,
        epoch,
        position,
        stages: Vec::new(),
        redeal: Vec::new(),
    })
}

/// Checks that `state` was saved by this pipeline with these parameters over the same
/// files (the generated `check_state`).
pub fn check_state(
    pipeline: &Pipeline,
    all: &[Pipeline],
    params: &Params,
    state: &PipelineState,
) -> Result<()> {
    state.check(pipeline.name(), fingerprint(pipeline, all, params)?)
}

/// The states of the ranks of a run with `params` that go on from `states`, saved by every
/// rank of a run with another number of ranks (the generated `reshard`): an error when the
/// pipeline is not elastic or the states do not belong together.
pub fn reshard(
    pipeline: &Pipeline,
    all: &[Pipeline],
    params: &Params,
    states: &[PipelineState],
) -> Result<Vec<PipelineState>> {
    let r = pipeline.physical.resumption();
    let Some((n, i)) = r.shard_params.clone().filter(|_| r.is_elastic()) else {
        return Err(Error::Invalid(format!(
            "pipeline `{}` cannot resume on another number of ranks: elastic: {}",
            pipeline.name(),
            r.elastic
        )));
    };
    let ranks = params
        .u64(&ArgValue::Param(n.clone()))
        .map_err(|_| Error::Invalid(format!("parameter `{n}` is not a number of ranks")))?;
    PipelineState::reshard(states, ranks, |a, b| {
        let p = params.with_count(&n, a).and_then(|p| p.with_count(&i, b)).map_err(Error::Invalid)?;
        fingerprint(pipeline, all, &p)
    })
}
