//! `explain` on the corpus: every `tests/pipes/*.pipe` compiles, and the logical plan of
//! each of its pipelines is the snapshot.

#[test]
fn corpus_logical_plans() {
    insta::glob!("../../tests/pipes", "*.pipe", |path| {
        let source = std::fs::read_to_string(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy();
        let checked = sluice_compiler::compile(&source)
            .unwrap_or_else(|d| panic!("{}", sluice_compiler::diagnostic::render(&name, &source, &d)));
        let mut text = String::new();
        for c in &checked {
            text.push_str(&format!("== {} (logical) ==\n", c.decls.name));
            text.push_str(&c.plan.as_ref().expect("a clean pipeline has a plan").explain());
            text.push_str(&format!("== {} (physical) ==\n", c.decls.name));
            text.push_str(&c.physical.as_ref().expect("a clean pipeline has a physical plan").explain());
        }
        insta::assert_snapshot!(text);
    });
}
