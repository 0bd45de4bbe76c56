//! The `.pipe` front end on the corpus: every `tests/pipes/*.pipe` parses, prints back in
//! canonical form (snapshot) and reparses to the same tree; every `tests/errors/*.pipe`
//! gives the rendered diagnostics in its snapshot, and nothing panics.

use sluice_compiler::diagnostic::render;
use sluice_compiler::syntax::parse;

#[test]
fn corpus_parses_prints_and_round_trips() {
    insta::glob!("../../tests/pipes", "*.pipe", |path| {
        let source = std::fs::read_to_string(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        let file = parse(&source).unwrap_or_else(|d| panic!("{}", render(&name, &source, &d)));
        let printed = file.to_string();
        let again = parse(&printed)
            .unwrap_or_else(|d| panic!("printed form does not parse:\n{}", render(&name, &printed, &d)));
        assert_eq!(again, file, "print → parse changed the tree");
        assert_eq!(again.to_string(), printed, "printing is stable");
        insta::assert_snapshot!(printed);
    });
}

#[test]
fn syntax_errors_render_with_file_line_and_column() {
    insta::glob!("../../tests/errors", "*.pipe", |path| {
        let source = std::fs::read_to_string(path).unwrap();
        let name = format!("tests/errors/{}", path.file_name().unwrap().to_string_lossy());
        let diagnostics = sluice_compiler::compile(&source).diagnostics;
        assert!(!diagnostics.is_empty(), "{name}: no diagnostic");
        let text = render(&name, &source, &diagnostics);
        assert!(text.contains(&format!("{name}:")), "names the file with line and column:\n{text}");
        insta::assert_snapshot!(text);
    });
}

mod no_input_panics {
    use proptest::prelude::*;

    fn corpus() -> Vec<String> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/pipes");
        std::fs::read_dir(dir).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect()
    }

    proptest! {
        /// Random text never panics the front end.
        #[test]
        fn random_text(s in "\\PC{0,300}") {
            let _ = sluice_compiler::compile(&s).diagnostics;
        }

        /// Mutated valid pipelines (bytes deleted, duplicated or replaced by pipeline
        /// punctuation) never panic the front end, and errors always have a diagnostic.
        #[test]
        fn mutated_pipelines(which in any::<prop::sample::Index>(), edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, prop::sample::select(vec!["(", ")", "{", "}", "[", "]", ";", ",", ":", "::", "=", "->", "\"", "-", "!", "//", "/*", "1e", "0x", "é"])), 1..8)) {
            let corpus = corpus();
            let mut s = corpus[which.index(corpus.len())].clone();
            for (at, op, tok) in edits {
                if s.is_empty() { break; }
                let mut i = at.index(s.len());
                while !s.is_char_boundary(i) { i -= 1; }
                match op {
                    0 => { s.insert_str(i, tok); }
                    1 => { let j = s[i..].chars().next().map_or(i, |c| i + c.len_utf8()); s.replace_range(i..j, ""); }
                    2 => { let j = s[i..].chars().next().map_or(i, |c| i + c.len_utf8()); let c = s[i..j].to_string(); s.insert_str(i, &c); }
                    _ => { let j = s[i..].chars().next().map_or(i, |c| i + c.len_utf8()); s.replace_range(i..j, tok); }
                }
            }
            let diagnostics = sluice_compiler::compile(&s).diagnostics;
            let rendered = sluice_compiler::diagnostic::render("fuzz.pipe", &s, &diagnostics);
            prop_assert_eq!(diagnostics.is_empty(), rendered.is_empty());
        }
    }

    #[test]
    fn hostile_nesting_and_operator_runs_are_errors_not_crashes() {
        for s in [
            format!("pipeline p() {{ take({}1{}); }}", "(".repeat(100_000), ")".repeat(100_000)),
            format!("pipeline p() {{ take({}1); }}", "-".repeat(100_000)),
            format!("pipeline p() {{ take({}1); }}", "- ".repeat(100_000)),
            "[".repeat(1_000_000),
        ] {
            let d = sluice_compiler::compile(&s).diagnostics;
            assert!(d.iter().any(|d| d.code == "E0003"), "{:?}", d.first());
        }
    }
}

/// Hostile sizes are diagnostics, never a stack overflow: an expression of 10 000 terms
/// (E0003) and a pipeline of 100 000 stages (E0315); what stays within the bounds
/// compiles to Rust on a test thread's stack.
#[test]
fn huge_expressions_and_pipelines_are_bounded() {
    let expr = |terms: usize| {
        let sum = vec!["x"; terms].join(" + ");
        format!(
            "pipeline p(files: glob = \"d/*\") {{ schema {{ x: i64 }} tfrecords(files); map {{ parse_example(); y = {sum}; }} }}"
        )
    };
    let d = sluice_compiler::compile(&expr(10_000)).diagnostics;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].code, "E0003");
    assert!(d[0].message.contains("operators in one statement"), "{}", d[0].message);
    sluice_compiler::compile(&expr(200)).generate().expect("200 terms compile");
    let stages = |n: usize| {
        format!("pipeline p(files: glob = \"d/*\") {{ tfrecords(files);\n{}}}", "take(1000);\n".repeat(n))
    };
    let d = sluice_compiler::compile(&stages(100_000)).diagnostics;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].code, "E0315");
    assert!(d[0].message.contains("100001 stages, more than 1024"), "{}", d[0].message);
    let max = sluice_compiler::sema::MAX_STAGES;
    let code = sluice_compiler::compile(&stages(max - 1)).generate().expect("the longest pipeline compiles");
    assert!(code.to_pretty_string().matches(".take(").count() >= 1);
}

/// A byte-order mark at the start of a file (some editors write one) is whitespace, not
/// an invisible token the parser stumbles on.
#[test]
fn a_byte_order_mark_is_whitespace() {
    let source = "\u{FEFF}pipeline p(files: glob = \"d/*\") { tfrecords(files); }\n";
    let c = sluice_compiler::compile(source);
    assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
    assert_eq!(c.pipelines.len(), 1);
}
