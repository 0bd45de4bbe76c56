//! `explain` on the corpus: every `tests/pipes/*.pipe` compiles, and the logical,
//! optimized (with the plan after each rule that changed it, as `sluice explain
//! --verbose` prints) and physical plans of each of its pipelines are the snapshot.

#[test]
fn corpus_plans() {
    insta::glob!("../../tests/pipes", "*.pipe", |path| {
        let source = std::fs::read_to_string(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        let pipelines = sluice_compiler::compile(&source)
            .into_result()
            .unwrap_or_else(|d| panic!("{}", sluice_compiler::diagnostic::render(&name, &source, &d)));
        let text: String = pipelines.iter().map(|p| p.explain(true)).collect();
        insta::assert_snapshot!(text);
    });
}
