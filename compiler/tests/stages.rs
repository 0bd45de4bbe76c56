//! The add-a-stage checklist, as a test: every stage of the language (`STAGES`) has a row
//! in `docs/STAGES.md`, and every row's stage exists, lowers to the logical node the row
//! names, runs as the exec node it names, and is used by a pipeline of `tests/pipes/`
//! whose `explain` text is a snapshot. A new stage that misses any of these fails here,
//! naming what is missing.

use std::path::{Path, PathBuf};

use sluice_compiler::sema::stages::STAGES;

/// One row of `docs/STAGES.md`: the stage, its logical node and its exec node.
struct Row {
    stage: String,
    logical: String,
    exec: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The rows of the stage table (the first word of each cell, without backquotes).
fn rows() -> Vec<Row> {
    let text = std::fs::read_to_string(root().join("docs/STAGES.md")).expect("docs/STAGES.md");
    let word = |cell: &str| {
        cell.trim()
            .trim_start_matches('`')
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("")
            .to_string()
    };
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').collect();
            Row { stage: word(cells[0]), logical: word(cells[1]), exec: word(cells[2]) }
        })
        .collect()
}

/// The corpus: each `tests/pipes/*.pipe` file's name, source and `explain` text.
fn corpus() -> Vec<(String, String, String)> {
    let dir = root().join("tests/pipes");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "pipe") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&path).unwrap();
        let pipelines = sluice_compiler::compile(&source).into_result().unwrap_or_else(|d| {
            panic!("{name}: {}", sluice_compiler::diagnostic::render(&name, &source, &d))
        });
        let explain = pipelines.iter().map(|p| p.explain(false)).collect();
        out.push((name, source, explain));
    }
    out
}

/// The lines of the `explain` text under every `== NAME (kind) ==` header of `kind`.
fn section(explain: &str, kind: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in explain.lines() {
        if line.starts_with("== ") {
            inside = line.ends_with(&format!("({kind}) =="));
        } else if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Whether `source` calls stage `name` (`name(` as a whole word).
fn calls(source: &str, name: &str) -> bool {
    // `name(...)`, or `name { ... }` for a stage whose block is all it takes (`flat_map`).
    [format!("{name}("), format!("{name} {{")].iter().any(|call| {
        source
            .match_indices(call.as_str())
            .any(|(i, _)| !source[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.'))
    })
}

#[test]
fn every_stage_has_a_row_a_lowering_an_exec_node_and_an_example() {
    let rows = rows();
    let corpus = corpus();
    let mut missing = Vec::new();
    for sig in STAGES {
        let Some(row) = rows.iter().find(|r| r.stage == sig.name) else {
            missing.push(format!("`{}` has no row in docs/STAGES.md", sig.name));
            continue;
        };
        let users: Vec<&(String, String, String)> =
            corpus.iter().filter(|(_, s, _)| calls(s, sig.name)).collect();
        if users.is_empty() {
            missing.push(format!("`{}` is used by no pipeline of tests/pipes/", sig.name));
            continue;
        }
        for (name, _, _) in &users {
            let snap = root().join(format!("compiler/tests/snapshots/explain__corpus_plans@{name}.snap"));
            if !snap.exists() {
                missing.push(format!("tests/pipes/{name} (using `{}`) has no explain snapshot", sig.name));
            }
        }
        if !users.iter().any(|(_, _, e)| section(e, "logical").contains(&format!("{}:", row.logical))) {
            missing.push(format!(
                "`{}` lowers to no `{}` node in the plans of its examples",
                sig.name, row.logical
            ));
        }
        if !users.iter().any(|(_, _, e)| section(e, "physical").contains(&format!("{}:", row.exec))) {
            missing.push(format!(
                "`{}` runs as no `{}` in the physical plans of its examples",
                sig.name, row.exec
            ));
        }
    }
    for row in &rows {
        if !STAGES.iter().any(|s| s.name == row.stage) {
            missing.push(format!("docs/STAGES.md has a row for `{}`, which is not a stage", row.stage));
        }
    }
    assert!(missing.is_empty(), "the stage checklist:\n{}", missing.join("\n"));
}

/// The checklist is not vacuous: a stage without a row, or whose example does not run
/// as the exec node its row names, is caught.
#[test]
fn the_checklist_catches_what_is_missing() {
    let rows = rows();
    assert_eq!(rows.len(), STAGES.len(), "one row per stage");
    let corpus = corpus();
    let take = rows.iter().find(|r| r.stage == "take").expect("a row for take");
    assert_eq!((take.logical.as_str(), take.exec.as_str()), ("Take", "TakeExec"));
    assert!(!corpus.iter().any(|(_, _, e)| e.contains("NoSuchExec:")));
    let explain = "== p (logical) ==\nTake: count=1\n== p (physical) ==\nTakeExec: threads=1\n";
    assert!(
        section(explain, "logical").contains("Take:") && !section(explain, "logical").contains("TakeExec:")
    );
    assert!(section(explain, "physical").contains("TakeExec:"));
    assert!(calls("tfrecords(files);", "tfrecords") && !calls("tfrecords(files);", "tfrecord"));
    assert!(!calls("x = my.take(3);", "take"));
}
