//! The token front end (`pipeline!`'s) against the pest front end on the corpus: every
//! `tests/pipes/*.pipe`, read as a Rust `TokenStream`, parses to the same tree and gives
//! the same `explain` text; and what only the token front end accepts (Rust code in
//! `map`/`filter`).

use std::str::FromStr;

use proc_macro2::TokenStream;
use sluice_compiler::ast::ExprKind;
use sluice_compiler::syntax::{parse, parse_tokens};

/// The `explain` text of every pipeline of a file (logical, optimized with each rule,
/// physical): what `tests/explain.rs` snapshots.
fn explain(file: &sluice_compiler::ast::File) -> String {
    let pipelines = sluice_compiler::compile_ast(file).into_result().expect("the corpus compiles");
    pipelines.iter().map(|p| p.explain(true)).collect()
}

#[test]
fn corpus_parses_the_same_from_tokens() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/pipes");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "pipe") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let from_text = parse(&source).unwrap();
        let tokens = TokenStream::from_str(&source).unwrap();
        let (from_tokens, _) = parse_tokens(tokens);
        let from_tokens = from_tokens.unwrap_or_else(|d| panic!("{}: {d:?}", path.display()));
        assert_eq!(from_tokens, from_text, "{}", path.display());
        assert_eq!(explain(&from_tokens), explain(&from_text), "{}", path.display());
        // `pipeline!` expands to the code `build.rs` generates for the same text.
        let inline = sluice_compiler::compile_ast(&from_tokens).generate().unwrap().to_pretty_string();
        let built = sluice_compiler::compile(&source).generate().unwrap().to_pretty_string();
        assert_eq!(inline, built, "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 4);
}

fn tokens(s: &str) -> Result<sluice_compiler::ast::File, Vec<sluice_compiler::Diagnostic>> {
    parse_tokens(TokenStream::from_str(s).unwrap()).0
}

#[test]
fn threads_is_an_item_before_an_expression_and_else_a_name() {
    // `threads N;` declares the CPU budget; `threads;` and `threads { ... }` are stages
    // (unknown ones), in both front ends alike.
    for src in ["pipeline p() { threads 2; range(3); }", "pipeline p() { threads (1 + 1); range(3); }"] {
        let f = tokens(src).unwrap();
        assert!(matches!(f.pipelines[0].items[0], sluice_compiler::ast::Item::Threads(_)), "{src}");
        assert_eq!(f, parse(src).unwrap(), "{src}");
    }
    for src in ["pipeline p() { threads; }", "pipeline p() { threads { x = 1; } }"] {
        let f = tokens(src).unwrap();
        assert!(matches!(f.pipelines[0].items[0], sluice_compiler::ast::Item::Stage(_)), "{src}");
        assert_eq!(f, parse(src).unwrap(), "{src}");
    }
}

const SCHEMA: &str = "schema { x: f32[4], label: i64 } tfrecords(files); map { parse_example(); }";

#[test]
fn closures_and_paths_are_rust_code() {
    let f = tokens(&format!(
        "pipeline p(files: glob = \"a\") {{ {SCHEMA} filter(|r| r.label > 0); map(my::double); \
         filter(keep); filter(label > 1); map(move |mut r| {{ r.label += 1; r }}); }}"
    ))
    .unwrap();
    let kinds: Vec<String> = f.pipelines[0]
        .items
        .iter()
        .filter_map(|i| match i {
            sluice_compiler::ast::Item::Stage(s) if s.name.name != "map" || s.body.is_none() => {
                s.args.first().map(|a| match &a.value.kind {
                    ExprKind::Rust(c) => format!("rust {}", c.text),
                    other => format!("{other:?}").chars().take(6).collect(),
                })
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "Path(P",
            "rust | r | r . label > 0",
            "rust my :: double",
            "rust keep",
            "Binary",
            "rust move | mut r | { r . label += 1 ; r }"
        ]
    );
    let explained = explain(&f);
    assert!(explained.contains("RustFilter: code=| r | r . label > 0"), "{explained}");
    assert!(explained.contains("RustMap: code=my :: double"), "{explained}");
}

#[test]
fn a_field_named_in_filter_stays_a_field() {
    let f = tokens(
        "pipeline p(files: glob) { schema { ok: i64 } tfrecords(files); \
         map { parse_example(); good = ok > 0; } filter(good); }",
    )
    .unwrap();
    let text = explain(&f);
    assert!(text.contains("Filter: predicate=good"), "{text}");
}

#[test]
fn syntax_errors_are_one_e0001_on_the_token() {
    let (r, map) =
        parse_tokens(TokenStream::from_str("pipeline p() { tfrecords(\"a\") batch(2); }").unwrap());
    let d = r.unwrap_err();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].code, "E0001");
    assert!(d[0].message.contains("expected `;` or `{`"), "{}", d[0].message);
    assert!(d[0].primary.span.start < map.spans.len());
}

#[test]
fn rust_code_outside_map_and_filter_is_an_error() {
    let f = tokens("pipeline p(files: glob) { tfrecords(files); map { parse_example(); } take(|x| x); }")
        .unwrap();
    let d = sluice_compiler::compile_ast(&f).into_result().unwrap_err();
    assert!(d.iter().any(|d| d.code == "E0205"), "{d:?}");
}
