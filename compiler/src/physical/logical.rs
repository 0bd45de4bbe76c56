//! What code generation needs to know of the optimized logical plan besides its exec
//! nodes, taken from it once when the physical plan is made: so that `codegen::Unit`
//! reads the physical plan alone.

use crate::ir::expr::Expr;
use crate::ir::op::Op;
use crate::ir::plan::{ArgValue, Element, MapOp, Plan};

/// The logical plan's facts a generated module embeds (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Logical {
    /// The optimized plan as `sluice explain` prints it: the generated `PLAN`, part of the
    /// resume fingerprint.
    pub explain: String,
    /// What the pipeline yields.
    pub output: Element,
    /// Why a stage of its own keeps it from resuming exactly, if one does
    /// (`ir::resume::resume_blocker`).
    pub resume_blocker: Option<String>,
    /// The pipelines whose passes run beneath it (`zip`, `concatenate`), whose blockers it
    /// inherits at run time, in plan order.
    pub passes_beneath: Vec<String>,
    /// The pipelines it takes (`sample_from`, `zip`, `concatenate`), each once.
    pub taken: Vec<String>,
    /// Its file patterns, the source's first (`files(...)`): the fingerprint's globs.
    pub globs: Vec<ArgValue>,
    /// Whether an interleave reads `cycle: auto` (its order depends on the cores).
    pub auto_cycle: bool,
    /// The tokenizers its maps load, each once (by the path as written), in source order:
    /// (path, `add_bos`, `add_eos`).
    pub tokenizers: Vec<(Expr, bool, bool)>,
}

impl Logical {
    /// The facts of the optimized `plan`.
    pub fn of(plan: &Plan) -> Logical {
        let mut nodes = Vec::new();
        let mut node = Some(plan);
        while let Some(n) = node {
            nodes.push(n);
            node = n.input();
        }
        let mut globs = Vec::new();
        let mut auto_cycle = false;
        for n in &nodes {
            match n {
                Plan::Files(f) => globs.push(f.pattern.clone()),
                Plan::Interleave(il) => auto_cycle |= il.cycle_length == ArgValue::Auto,
                _ => {}
            }
        }
        let mut tokenizers: Vec<(Expr, bool, bool)> = Vec::new();
        for n in nodes.iter().rev() {
            let ops: &[MapOp] = match n {
                Plan::Map(m) => &m.ops,
                Plan::MapFilter(m) => &m.ops,
                Plan::MapBatch(m) => &m.ops,
                Plan::DeviceTail(t) => &t.ops,
                _ => continue,
            };
            for op in ops {
                let MapOp::Assign { value, .. } = op else { continue };
                for e in value.nodes() {
                    let Some(Op::Tokenize { tokenizer, add_bos, add_eos, .. }) = e.op() else { continue };
                    let same = |(t, b, e): &(Expr, bool, bool)| {
                        t.to_string() == tokenizer.to_string() && *b == *add_bos && *e == *add_eos
                    };
                    if !tokenizers.iter().any(same) {
                        tokenizers.push(((*tokenizer).clone(), *add_bos, *add_eos));
                    }
                }
            }
        }
        Logical {
            explain: plan.explain(),
            output: plan.output(),
            resume_blocker: crate::ir::plan::resume_blocker(plan),
            passes_beneath: crate::ir::combine::passes_beneath(plan)
                .into_iter()
                .map(str::to_string)
                .collect(),
            taken: crate::ir::combine::taken(plan),
            globs,
            auto_cycle,
            tokenizers,
        }
    }
}
