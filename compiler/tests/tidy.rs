//! The compiler's shape, checked on its source (the root `tests/tidy.rs` checks the
//! crates' edges and the `//!` lines): every file stays under 800 lines, as do the
//! runtime's and the engine's; the modules depend on each other in one direction only (no
//! circle), `syntax/` alone names pest, the IR names no parser or token type, and each
//! stage after sema names only what comes before it (`codegen/` the IR and the physical
//! plan, never `sema`), and neither sema nor the optimizer names a fused plan node (the
//! physical plan alone fuses).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a source file of the compiler, the runtime or the engine may have.
const MAX_LINES: usize = 800;

/// The crates (directories beside `compiler/`) whose files the line limit applies to.
const LIMITED: &[&str] = &["compiler", "runtime", "engine"];

/// What each top-level module may not name (beyond the circle check).
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "ir",
        &[
            "crate::ast",
            "crate::syntax",
            "crate::sema",
            "crate::optimizer",
            "crate::physical",
            "crate::codegen",
            "crate::driver",
            "proc_macro2",
            "syn::",
            "quote::",
            "pest",
        ],
    ),
    (
        "optimizer",
        &[
            "crate::ast",
            "crate::syntax",
            "crate::sema",
            "crate::physical",
            "crate::codegen",
            "crate::driver",
            // Fusion is decided in one layer: the fused nodes are `physical/fuse/`'s.
            "MapBatch",
            "MapFilter",
            "ShuffleRepeat",
            "Kernel",
        ],
    ),
    (
        "physical",
        &[
            "crate::ast",
            "crate::syntax",
            "crate::sema",
            "crate::optimizer",
            "crate::codegen",
            "crate::driver",
        ],
    ),
    ("codegen", &["crate::ast", "crate::syntax", "crate::sema", "crate::optimizer", "crate::driver"]),
    (
        "sema",
        &[
            "crate::optimizer",
            "crate::physical",
            "crate::codegen",
            "crate::driver",
            // Sema puts an empty `DeviceTail` on top; the fused nodes are `physical/fuse/`'s.
            "MapBatch",
            "MapFilter",
            "ShuffleRepeat",
            "Kernel",
        ],
    ),
];

/// The `src/` directory of the workspace's crate in directory `krate`.
fn src(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src")
}

/// The Rust files under `krate`'s `src/`, with their text.
fn sources(krate: &str) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&src(krate), &mut out);
    out.sort();
    out
}

/// The file's code outside its test module, without comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The module directly under `dir` that a file under `dir` belongs to (`ir` for
/// `src/ir/plan.rs` and `dir` `src/`).
fn module(dir: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(dir).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn every_file_stays_under_the_line_limit() {
    let mut bad = Vec::new();
    let files: Vec<_> = LIMITED.iter().flat_map(|krate| sources(krate)).collect();
    assert!(
        LIMITED.iter().all(|krate| files.iter().any(|(p, _)| p.starts_with(src(krate)))),
        "found the sources"
    );
    for (path, text) in files {
        let n = text.lines().count();
        if n > MAX_LINES {
            bad.push(format!("{}: {n} lines (at most {MAX_LINES})", path.display()));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn modules_name_only_what_comes_before_them() {
    let mut bad = Vec::new();
    for (path, text) in sources("compiler") {
        let m = module(&src("compiler"), &path);
        let code = code(&text);
        if m != "syntax" && code.contains("pest::") {
            bad.push(format!("{}: names pest outside `syntax/`", path.display()));
        }
        for (module, forbidden) in FORBIDDEN {
            if m != *module {
                continue;
            }
            for f in *forbidden {
                if code.contains(f) {
                    bad.push(format!("{}: `{m}` names `{f}`", path.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Which module names which: the modules directly under `sub` of `krate`'s `src/` (`""`:
/// the top-level ones), each with the lowercase names that follow `crate::` and `sub`'s
/// path (`crate::stage::`) in its files, or, within `sub`, the `super::`s that lead up
/// to `sub`. Test modules and comments do not count.
fn module_graph(krate: &str, sub: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = src(krate).join(sub);
    let own = format!(
        "crate::{}",
        sub.split('/').filter(|s| !s.is_empty()).map(|s| format!("{s}::")).collect::<String>()
    );
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in sources(krate) {
        let Ok(rel) = path.strip_prefix(&dir) else { continue };
        if rel == Path::new("lib.rs") || rel == Path::new("main.rs") || rel == Path::new("mod.rs") {
            continue;
        }
        let m = module(&dir, &path);
        let mut prefixes = vec![own.clone()];
        if !sub.is_empty() {
            prefixes.push("super::".repeat(rel.components().count()));
        }
        let code = code(&text);
        let deps = graph.entry(m.clone()).or_default();
        for prefix in &prefixes {
            for (i, _) in code.match_indices(prefix.as_str()) {
                let name: String = code[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let is_module =
                    name.chars().next().is_some_and(char::is_lowercase) && name != "super" && name != "self";
                if is_module && name != m {
                    deps.insert(name);
                }
            }
        }
    }
    graph
}

/// A circle in `graph`, found by a depth-first search for a back edge.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut circle = path[at..].to_vec();
            circle.push(m.to_string());
            return Some(circle);
        }
        if !done.insert(m.to_string()) {
            return None;
        }
        path.push(m.to_string());
        for d in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_modules_depend_on_each_other_without_a_circle() {
    let graph = module_graph("compiler", "");
    if let Some(circle) = circle(&graph) {
        panic!("a circle among the compiler's modules: {}", circle.join(" → "));
    }
    assert!(graph["driver"].contains("codegen") && !graph["codegen"].contains("driver"), "{graph:?}");
}

/// The runtime's top-level modules, and the stages' modules within `stage/`, depend on
/// each other in one direction: the columns know no stage (`Element`, what both name,
/// is the columns'), and the `prefetch` stage uses AUTOTUNE's buffer policy, not the
/// other way round (`Buffer`, what both name, is `autotune`'s).
#[test]
fn the_runtime_s_modules_depend_on_each_other_without_a_circle() {
    let top = module_graph("runtime", "");
    if let Some(circle) = circle(&top) {
        panic!("a circle among the runtime's modules: {}", circle.join(" → "));
    }
    assert!(top["stage"].contains("column") && !top["column"].contains("stage"), "{top:?}");
    let stages = module_graph("runtime", "stage");
    if let Some(circle) = circle(&stages) {
        panic!("a circle among the runtime's stage modules: {}", circle.join(" → "));
    }
    assert!(
        stages["prefetch"].contains("autotune") && !stages["autotune"].contains("prefetch"),
        "{stages:?}"
    );
}
