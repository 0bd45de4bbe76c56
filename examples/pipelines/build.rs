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
        "../../tests/pipes/gpu_augment.pipe",
        "../../tests/pipes/resume.pipe",
        "../../tests/pipes/global_shuffle.pipe",
        "../../tests/pipes/range.pipe",
        "../../tests/pipes/auto_cycle.pipe",
        "../../tests/pipes/parse_tensor.pipe",
        "../../tests/pipes/text.pipe",
        "../../tests/pipes/csv.pipe",
        "../../tests/pipes/read_file.pipe",
        "../../tests/pipes/on_error.pipe",
        "../../tests/pipes/combine.pipe",
        "../../tests/pipes/pack.pipe",
        "../../tests/pipes/bucket.pipe",
        "../../tests/pipes/flat_map.pipe",
        "../../tests/pipes/window.pipe",
        "../../tests/pipes/sequence.pipe",
        "../../tests/pipes/parity.pipe",
        "pipes/tf_fixtures.pipe",
        "pipes/shard.pipe",
    ]);
    gpu_bench_kernel();
}

/// The kernel `src/bin/gpu-bench.rs` measures, generated as the compiler generates every
/// post-`batch` chain: `$OUT_DIR/gpu_bench_kernel.cu`.
fn gpu_bench_kernel() {
    use sluice_compiler::codegen::cuda::{Kernel, KernelOp};
    use sluice_compiler::ir::types::DType;
    let kernel = Kernel {
        seeds: Vec::new(),
        field: "x".into(),
        name: "gpu_bench_augment".into(),
        dtype: DType::U8,
        shape: vec![64, 64, 3],
        ops: vec![
            KernelOp::RandomCrop { h: 56, w: 56, op: 0, seed: 0 },
            KernelOp::RandomFlip { op: 1, seed: 0 },
            KernelOp::Cast(DType::F32),
            KernelOp::Scale(1.0 / 255.0),
            KernelOp::Normalize { mean: vec![0.485, 0.456, 0.406], std: vec![0.229, 0.224, 0.225] },
            KernelOp::TransposeChw,
        ],
    };
    let source = kernel.source().unwrap_or_else(|e| panic!("the benchmark kernel: {e}"));
    let out =
        std::path::Path::new(&std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("gpu_bench_kernel.cu");
    std::fs::write(&out, source).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
