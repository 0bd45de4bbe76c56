//! The compiler's shape, checked on its source (the root `tests/tidy.rs` checks the
//! crates' edges and the `//!` lines): every file stays under 800 lines; the modules depend on each other in one direction only (no
//! circle), `syntax/` alone names pest, the IR names no parser or token type, and each
//! stage after sema names only what comes before it (`codegen/` the IR and the physical
//! plan, never `sema`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a compiler source file may have.
const MAX_LINES: usize = 800;

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
        &["crate::ast", "crate::syntax", "crate::sema", "crate::physical", "crate::codegen", "crate::driver"],
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
    ("sema", &["crate::optimizer", "crate::physical", "crate::codegen", "crate::driver"]),
];

fn sources() -> Vec<(PathBuf, String)> {
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
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out.sort();
    out
}

/// The file's code outside its test module, without comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The top-level module of a file under `src/` (`ir` for `src/ir/plan.rs`).
fn module(path: &Path) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rel = path.strip_prefix(&src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn every_file_stays_under_the_line_limit() {
    let mut bad = Vec::new();
    for (path, text) in sources() {
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
    for (path, text) in sources() {
        let m = module(&path);
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

#[test]
fn the_modules_depend_on_each_other_without_a_circle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in sources() {
        let m = module(&path);
        let code = code(&text);
        let deps = graph.entry(m.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            let name: String =
                code[i + 7..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if name != m && !name.is_empty() && name.chars().next().is_some_and(char::is_lowercase) {
                deps.insert(name);
            }
        }
    }
    // Depth-first search for a back edge.
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
    for m in graph.keys() {
        if let Some(circle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!("a circle among the compiler's modules: {}", circle.join(" → "));
        }
    }
    assert!(graph["driver"].contains("codegen") && !graph["codegen"].contains("driver"), "{graph:?}");
}
