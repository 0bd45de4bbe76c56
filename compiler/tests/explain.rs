//! `explain` on the corpus: every `tests/pipes/*.pipe` compiles, and the logical,
//! optimized (with the plan after each rule that changed it, as `sluice explain
//! --verbose` prints) and physical plans of each of its pipelines are the snapshot.

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
            text.push_str(&format!("== {} (physical) ==\n", c.decls.name));
            text.push_str(&c.physical.as_ref().expect("a clean pipeline has a physical plan").explain());
        }
        insta::assert_snapshot!(text);
    });
}
