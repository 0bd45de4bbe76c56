//! Rewrites of a plan by rules, run to a fixed point: the machinery the optimizer's rules
//! (`crate::optimizer`) and the physical plan's fusion rules (`crate::physical`'s `fuse`)
//! share. Each rule keeps what the plan yields (its element type, checked after every
//! rule in debug builds and tests); a rule that changes it is a bug in the rule, and
//! panics naming it.

use super::plan::{ArgValue, Files, Plan};

/// The plan after a rule, and whether the rule changed it.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Transformed {
    /// The plan (the input itself when nothing changed).
    pub plan: Plan,
    /// The rule rewrote something.
    pub changed: bool,
}

impl Transformed {
    /// A rewritten plan.
    pub fn yes(plan: Plan) -> Self {
        Transformed { plan, changed: true }
    }

    /// The plan as it was.
    pub fn no(plan: Plan) -> Self {
        Transformed { plan, changed: false }
    }
}

/// One rewrite of the plan.
pub trait Rule {
    /// The rule's name, equal to its file's (`fuse_maps`).
    fn name(&self) -> &'static str;

    /// Rewrites the whole plan (the rule chooses where: most rewrite every node through
    /// [`rewrite_each_node`]).
    fn rewrite(&self, plan: Plan) -> Transformed;
}

/// A rule that changed the plan, and the plan as it left it.
#[derive(Debug, Clone, PartialEq)]
pub struct Application {
    /// The rule's name.
    pub rule: &'static str,
    /// The plan after the rule (its `explain` text is made when asked for: a deep plan's
    /// text grows with the square of its depth, its indentation does).
    pub after: Plan,
}

/// A plan after its rules, and the rules that changed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewritten {
    /// The plan after every rule.
    pub plan: Plan,
    /// The rules that changed it, in the order they ran.
    pub applied: Vec<Application>,
}

/// Passes over the rule list at most. Every rule, the optimizer's and fusion's, but
/// `insert_prefetch` shrinks the plan or moves a node down, and that one adds a
/// single node once, so a fixed point comes within a few passes; the bound only guards
/// against a future rule that would undo another's work.
const MAX_PASSES: usize = 16;

/// Runs the given rules, in order, until a pass changes nothing.
pub fn run(mut plan: Plan, rules: &[Box<dyn Rule>]) -> Rewritten {
    let mut applied = Vec::new();
    for _ in 0..MAX_PASSES {
        let mut changed = false;
        for rule in rules {
            let t = apply(rule.as_ref(), plan);
            plan = t.plan;
            if t.changed {
                changed = true;
                applied.push(Application { rule: rule.name(), after: plan.clone() });
            }
        }
        if !changed {
            break;
        }
    }
    Rewritten { plan, applied }
}

/// Runs one rule and, in debug builds and tests, checks that it kept the plan's output
/// type.
pub fn apply(rule: &dyn Rule, plan: Plan) -> Transformed {
    let before = cfg!(debug_assertions).then(|| plan.output());
    let t = rule.rewrite(plan);
    if let Some(before) = before {
        let after = t.plan.output();
        assert!(
            before == after,
            "optimizer rule `{}` changed the plan's output from {before} to {after}",
            rule.name()
        );
    }
    t
}

/// Applies a node-local rewrite at every depth, from the last stage down to the
/// source. At each node it is applied again while it changes something (each rule
/// shrinks the plan or moves a node down, so this ends), then the walk goes on to the
/// node's input.
pub fn rewrite_each_node(mut plan: Plan, rewrite: impl Fn(Plan) -> Transformed) -> Transformed {
    let mut changed = false;
    let mut node = &mut plan;
    loop {
        loop {
            let t = rewrite(std::mem::replace(node, placeholder()));
            *node = t.plan;
            if !t.changed {
                break;
            }
            changed = true;
        }
        match node.input_mut() {
            Some(input) => node = input,
            None => break,
        }
    }
    Transformed { plan, changed }
}

/// A node to leave in a slot while its owner is rewritten.
pub fn placeholder() -> Plan {
    Plan::Files(Files { pattern: ArgValue::Auto, shuffle_seed: None })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::Rule;

    /// Asserts that `rules` holds one rule per file of `src/{dir}` (besides `mod.rs`), each
    /// named as its file.
    pub(crate) fn assert_named_as_files(rules: &[Box<dyn Rule>], dir: &str) {
        let mut names: Vec<&str> = rules.iter().map(|r| r.name()).collect();
        let mut files: Vec<String> = std::fs::read_dir(format!("{}/src/{dir}", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_string_lossy().strip_suffix(".rs").map(String::from))
            .filter(|n| n != "mod")
            .collect();
        files.sort();
        names.sort_unstable();
        assert_eq!(names, files);
    }
}
