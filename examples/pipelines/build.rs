//! Compiles the benchmark pipelines (`examples/bench/*.pipe`) and the test corpus
//! (`tests/pipes/*.pipe`) to Rust, as any crate using Sluice does.

fn main() {
    sluice_compiler::build::compile(&[
        "../bench/read.pipe",
        "../bench/parse_tabular.pipe",
        "../bench/shuffle_tabular.pipe",
        "../bench/image_raw.pipe",
        "../bench/jpeg.pipe",
        "../bench/augment.pipe",
        "../../tests/pipes/tabular.pipe",
        "../../tests/pipes/image_train.pipe",
        "../../tests/pipes/all_ops.pipe",
        "../../tests/pipes/mixture.pipe",
        "pipes/tf_fixtures.pipe",
    ]);
}
