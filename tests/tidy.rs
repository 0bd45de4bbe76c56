//! Tidy checks on the source tree: every Rust file starts with a `//!` line, the crates
//! depend on each other only in the direction ARCHITECTURE.md allows, and ARCHITECTURE.md
//! says what is, with no roadmap marker (`[4/7]`).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "fixtures" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "compiler", "runtime", "engine", "macros", "examples", "python"] {
        if root().join(dir).is_dir() {
            rust_files(&root().join(dir), &mut files);
        }
    }
    assert!(files.len() > 10, "found the sources");
    let missing: Vec<_> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .map(|f| f.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a `//!` first line: {missing:?}");
}

/// The `[dependencies]` section of a manifest (not dev- or build-dependencies).
fn dependencies(manifest: &str) -> String {
    let text = std::fs::read_to_string(root().join(manifest)).unwrap();
    let start = text.find("\n[dependencies]").expect("a [dependencies] section");
    let rest = &text[start + 1..];
    let end = rest[1..].find("\n[").map_or(rest.len(), |i| i + 1);
    rest[..end].to_string()
}

#[test]
fn dependencies_point_one_way() {
    let runtime = dependencies("runtime/Cargo.toml");
    assert!(
        !runtime.contains("sluice-compiler")
            && !runtime.contains("sluice-macros")
            && !runtime.contains("sluice-engine"),
        "runtime is standalone"
    );
    let compiler = dependencies("compiler/Cargo.toml");
    assert!(!compiler.contains("sluice-runtime") && !compiler.contains("sluice-macros"));
    assert!(!compiler.contains("sluice-engine"), "the compiler knows no backend but its code generator");
    let macros = dependencies("macros/Cargo.toml");
    assert!(macros.contains("sluice-compiler") && !macros.contains("sluice-runtime"));
    // The engine runs plans: the compiler's and the runtime's, never the macros' or the
    // facade's (the `sluice` tool depends on it, not the other way round).
    let engine = dependencies("engine/Cargo.toml");
    assert!(engine.contains("sluice-compiler") && engine.contains("sluice-runtime"));
    assert!(!engine.contains("sluice-macros") && !engine.contains("\nsluice ="));
    let facade = dependencies("Cargo.toml");
    assert!(
        facade.contains("sluice-engine = { workspace = true, optional = true }"),
        "the engine is the tool's only"
    );
}

/// What the README's commands write into the clone (`--out DIR`, `--output DIR`,
/// `cat > FILE`): each relative path, as its first component.
fn readme_outputs() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut out = Vec::new();
    for line in readme.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if matches!(pair[0], "--out" | "--output" | ">") {
                let path = pair[1].trim_matches(|c| c == '`' || c == '\'' || c == '"');
                // Placeholders (`DIR`), absolute paths and URLs write outside the clone.
                let first = path.split('/').next().unwrap_or("");
                if first.is_empty()
                    || path.contains("://")
                    || first.chars().all(|c| c.is_ascii_uppercase())
                    || !first.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                {
                    continue;
                }
                out.push(first.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A user who follows the README in the clone is not left with untracked files: what its
/// commands write is git-ignored.
#[test]
fn what_the_readme_s_commands_write_is_ignored() {
    let outputs = readme_outputs();
    assert!(outputs.iter().any(|o| o == "data"), "found the README's outputs: {outputs:?}");
    let ignore = std::fs::read_to_string(root().join(".gitignore")).unwrap();
    let patterns: Vec<&str> = ignore.lines().map(str::trim).filter(|l| !l.starts_with('#')).collect();
    let missing: Vec<_> =
        outputs.iter().filter(|o| !patterns.iter().any(|p| p.trim_matches('/') == o.as_str())).collect();
    assert!(missing.is_empty(), "README commands write {missing:?}, which .gitignore does not list");
}

/// Whether `line` holds a roadmap marker: `[N/M]`, the place of an issue in its series.
fn has_roadmap_marker(line: &str) -> bool {
    line.match_indices('[').any(|(i, _)| {
        let rest = &line[i + 1..];
        let Some((n, rest)) = rest.split_once('/') else { return false };
        let Some((m, _)) = rest.split_once(']') else { return false };
        [n, m].iter().all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
    })
}

/// ARCHITECTURE.md says what is, not the order it was built in: it names no issue of a
/// series (`[4/7]`).
#[test]
fn the_architecture_holds_no_roadmap_marker() {
    assert!(has_roadmap_marker("the engine ([2/7]) runs") && !has_roadmap_marker("x[i] / y[j]"));
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let marked: Vec<_> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| has_roadmap_marker(line))
        .map(|(i, line)| format!("ARCHITECTURE.md:{}: {line}", i + 1))
        .collect();
    assert!(marked.is_empty(), "roadmap markers:\n{}", marked.join("\n"));
}
