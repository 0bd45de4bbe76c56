//! `explain` on the corpus: every `tests/pipes/*.pipe` compiles, and the logical and
//! optimized plans of each of its pipelines, with the plan after each optimizer rule
//! that changed it (`sluice explain --verbose`), are the snapshot.

#[test]
fn corpus_plans() {
    insta::glob!("../../tests/pipes", "*.pipe", |path| {
        let source = std::fs::read_to_string(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        let checked = sluice_compiler::compile(&source)
            .unwrap_or_else(|d| panic!("{}", sluice_compiler::diagnostic::render(&name, &source, &d)));
        let mut text = String::new();
        for c in &checked {
            let plan = c.plan.as_ref().expect("a clean pipeline has a plan");
            text.push_str(&sluice_compiler::optimizer::explain(&c.decls.name, plan, true));
        }
        insta::assert_snapshot!(text);
    });
}
