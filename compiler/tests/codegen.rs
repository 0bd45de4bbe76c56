//! Code generation: snapshots of the generated Rust (prettyplease) for the corpus
//! pipelines, and the guarantees about it (it parses as Rust, it names only
//! `::sluice::__private`, a pipeline the generator cannot handle is a diagnostic).

use std::path::Path;

use sluice_compiler::codegen::generate;

fn corpus(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/pipes").join(name);
    std::fs::read_to_string(path).expect("corpus file")
}

const CORPUS: &[&str] = &["tabular.pipe", "image_train.pipe", "all_ops.pipe", "mixture.pipe"];

#[test]
fn corpus_generates_rust_that_parses() {
    for name in CORPUS {
        let code = generate(&corpus(name)).unwrap_or_else(|d| panic!("{name}: {d:?}"));
        let text = code.to_pretty_string();
        syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{name}: generated code does not parse: {e}\n{text}"));
        if let Ok(dir) = std::env::var("SLUICE_DUMP_GENERATED") {
            std::fs::write(Path::new(&dir).join(name.replace(".pipe", ".rs")), &text).unwrap();
        }
    }
}
