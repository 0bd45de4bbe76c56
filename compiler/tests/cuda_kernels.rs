//! Generated CUDA kernels, run on the CPU: each kernel's source is compiled as host C++
//! (`codegen::cuda::HOST_PRELUDE` turns the thread indices into a loop's globals) and its
//! output compared, bit for bit, with the runtime's own operations applied row by row
//! (what the CPU path of a pipeline computes), random draws included. Skipped, with a
//! message, where no C++ compiler is installed. Each kernel also compiles to PTX with
//! NVRTC (the runtime's `cuda::compile_ptx`) where NVRTC is found (`scripts/test` puts the
//! pip wheel's on `LD_LIBRARY_PATH`).

use std::process::Command;

use sluice_compiler::codegen::cuda::{HOST_PRELUDE, Kernel, KernelOp};
use sluice_compiler::ir::types::DType;
use sluice_runtime::abi::ops::{self, Flip};
use sluice_runtime::column::Tensor;

/// Compiles `kernel` with NVRTC when it is installed (and says so when it is not).
fn compiles_to_ptx(kernel: &Kernel) {
    if !sluice_runtime::cuda::nvrtc_available() {
        // `scripts/test` provides NVRTC and asks for the check.
        assert!(
            std::env::var_os("SLUICE_REQUIRE_NVRTC").is_none(),
            "SLUICE_REQUIRE_NVRTC is set, but no NVRTC"
        );
        eprintln!("skipped the PTX check of {}: NVRTC (libnvrtc.so.13) not found", kernel.name);
        return;
    }
    let ptx = sluice_runtime::cuda::compile_ptx(&kernel.name, &kernel.source().unwrap())
        .unwrap_or_else(|e| panic!("{e}\n{}", kernel.source().unwrap()));
    assert!(ptx.text().contains(&format!(".entry {}", kernel.name)), "{}", ptx.text());
}

const EPOCH: u64 = 3;
/// The batch's index in its pass: row `i` draws with index `(BATCH << 20) | i`.
const BATCH: u64 = 5;
const SEED: u64 = 42;

/// Runs `kernel` over `rows` rows of `input` (C values written as text) on the host;
/// returns each output value's bits (as printed by the harness).
fn run_on_host(kernel: &Kernel, input_c: &str, in_count: usize, rows: usize) -> Option<Vec<u64>> {
    compiles_to_ptx(kernel);
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    if Command::new(&cxx).arg("--version").output().is_err() {
        eprintln!("skipped: no C++ compiler ({cxx}) to run generated kernels on the host");
        return None;
    }
    let (out_shape, out_dtype) = kernel.output().unwrap();
    let out_len: usize = out_shape.iter().product::<usize>() * rows;
    let (in_t, out_t, print) = match (kernel.dtype, out_dtype) {
        (DType::U8, DType::F32) => {
            ("unsigned char", "float", "unsigned int b; memcpy(&b, &out[i], 4); printf(\"%u\\n\", b);")
        }
        (DType::I64, DType::F32) => {
            ("long long", "float", "unsigned int b; memcpy(&b, &out[i], 4); printf(\"%u\\n\", b);")
        }
        (DType::F32, DType::F32) => {
            ("float", "float", "unsigned int b; memcpy(&b, &out[i], 4); printf(\"%u\\n\", b);")
        }
        (DType::U8, DType::U8) => ("unsigned char", "unsigned char", "printf(\"%u\\n\", (unsigned)out[i]);"),
        other => panic!("no harness for {other:?}"),
    };
    let seeds: String = (0..kernel.seed_count()).map(|_| format!(", {SEED}ull")).collect();
    let program = format!(
        "{HOST_PRELUDE}#include <cstdio>\n#include <cstring>\n{}\n\
         static const {in_t} input[{in_count}] = {{{input_c}}};\nstatic {out_t} out[{out_len}];\n\
         int main() {{\n  blockDim.x = 64;\n  for (unsigned long long t = 0; t < {}ull; ++t) {{\n\
         blockIdx.x = (unsigned)(t / 64); threadIdx.x = (unsigned)(t % 64);\n\
         {}(input, out, {out_len}ull, {EPOCH}ull, {BATCH}ull, 0ull{seeds});\n  }}\n\
         for (int i = 0; i < {out_len}; ++i) {{ {print} }}\n  return 0;\n}}\n",
        kernel.source().unwrap(),
        out_len.div_ceil(64) * 64,
        kernel.name,
    );
    let dir = tempfile::tempdir().unwrap();
    let (src, exe) = (dir.path().join("k.cpp"), dir.path().join("k"));
    std::fs::write(&src, &program).unwrap();
    let built = Command::new(&cxx).args(["-O1", "-std=c++17", "-o"]).arg(&exe).arg(&src).output().unwrap();
    assert!(built.status.success(), "{}\n{program}", String::from_utf8_lossy(&built.stderr));
    let ran = Command::new(&exe).output().unwrap();
    assert!(ran.status.success());
    Some(String::from_utf8(ran.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect())
}

fn pixels(rows: usize, len: usize) -> Vec<u8> {
    (0..rows * len).map(|i| (i * 37 % 251) as u8).collect()
}

fn c_list<T: ToString>(v: &[T]) -> String {
    v.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

#[test]
fn augment_chain_equals_the_runtime_ops_bit_for_bit() {
    let (h, w, c, rows) = (10, 12, 3, 7);
    let kernel = Kernel {
        seeds: Vec::new(),
        field: "x".into(),
        name: "k0_image".into(),
        dtype: DType::U8,
        shape: vec![h, w, c],
        ops: vec![
            KernelOp::RandomCrop { h: 8, w: 7, op: 0, seed: 0 },
            KernelOp::RandomFlip { op: 1, seed: 0 },
            KernelOp::Cast(DType::F32),
            KernelOp::Scale(1.0 / 255.0),
            KernelOp::Normalize { mean: vec![0.485, 0.456, 0.406], std: vec![0.229, 0.224, 0.225] },
            KernelOp::TransposeChw,
        ],
    };
    let input = pixels(rows, h * w * c);
    let Some(got) = run_on_host(&kernel, &c_list(&input), input.len(), rows) else { return };
    let mut want = Vec::new();
    for (r, row) in input.chunks(h * w * c).enumerate() {
        let index = (BATCH << 20) | r as u64;
        let t = Tensor::new(vec![h, w, c], row.to_vec()).unwrap();
        let t = ops::random_crop(&t, 8, 7, &mut ops::element_rng(SEED, 0, EPOCH, index)).unwrap();
        let t = t.random_flip(&mut ops::element_rng(SEED, 1, EPOCH, index));
        let f: Vec<f32> = t.as_slice().iter().map(|&v| f32::from(v) * (1.0 / 255.0) as f32).collect();
        let f = ops::normalize(
            Tensor::new(t.shape().to_vec(), f).unwrap(),
            &[0.485, 0.456, 0.406],
            &[0.229, 0.224, 0.225],
        )
        .unwrap();
        let f = ops::transpose_chw(&f).unwrap();
        want.extend(f.as_slice().iter().map(|v| u64::from(v.to_bits())));
    }
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want, "the kernel computes what the CPU ops compute");
}

#[test]
fn center_crop_hwc_arith_and_clamp_equal_the_runtime() {
    let (c, h, w, rows) = (2, 6, 5, 3);
    let kernel = Kernel {
        seeds: Vec::new(),
        field: "x".into(),
        name: "k1".into(),
        dtype: DType::F32,
        shape: vec![c, h, w],
        ops: vec![
            KernelOp::TransposeHwc,
            KernelOp::CenterCrop(3, 4),
            KernelOp::Arith('*', 2.0),
            KernelOp::Arith('-', 0.5),
            KernelOp::Clamp(-1.0, 100.0),
        ],
    };
    let input: Vec<f32> = (0..rows * c * h * w).map(|i| (i as f32) * 0.75 - 3.0).collect();
    let input_c: Vec<String> = input.iter().map(|v| format!("{v:?}f")).collect();
    let Some(got) = run_on_host(&kernel, &input_c.join(","), input.len(), rows) else { return };
    let mut want = Vec::new();
    for row in input.chunks(c * h * w) {
        let t = ops::transpose_hwc(&Tensor::new(vec![c, h, w], row.to_vec()).unwrap()).unwrap();
        let t = ops::center_crop(&t, 3, 4).unwrap();
        want.extend(t.as_slice().iter().map(|v| u64::from((v * 2.0 - 0.5).clamp(-1.0, 100.0).to_bits())));
    }
    assert_eq!(got, want);
}

#[test]
fn one_hot_equals_the_runtime() {
    let labels: Vec<i64> = vec![0, 3, 9, 4, -1, 12];
    let kernel = Kernel {
        seeds: Vec::new(),
        field: "x".into(),
        name: "k2".into(),
        dtype: DType::I64,
        shape: vec![],
        ops: vec![KernelOp::OneHot(10)],
    };
    let Some(got) = run_on_host(&kernel, &c_list(&labels), labels.len(), labels.len()) else { return };
    let mut want = Vec::new();
    for &l in &labels {
        // The runtime refuses a label outside 0..depth; the kernel writes zeros for it.
        let row = ops::one_hot(l, 10).map(|t| t.as_slice().to_vec()).unwrap_or_else(|_| vec![0.0; 10]);
        want.extend(row.iter().map(|v| u64::from(v.to_bits())));
    }
    assert_eq!(got, want);
}

/// Every `.pipe` file of the repository: the corpus, the benchmark pipelines, the main job.
fn pipe_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["tests/pipes", "examples/bench", "examples/digits", "examples/pipelines/pipes"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "pipe") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_kernel_the_repository_generates_compiles_to_ptx() {
    let mut kernels = Vec::new();
    for path in pipe_files() {
        let source = std::fs::read_to_string(&path).unwrap();
        let generated = sluice_compiler::compile(&source)
            .generate()
            .unwrap_or_else(|d| panic!("{}: {} diagnostics", path.display(), d.len()));
        for k in generated.kernels {
            let name = format!("{}: {}", path.file_name().unwrap().to_string_lossy(), k.name);
            kernels.push((name, k));
        }
    }
    let names: Vec<&str> = kernels.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["gpu_augment.pipe: gpu_augment_tail_image", "digits.pipe: digits_train_gpu_tail_image"] {
        assert!(names.contains(&want), "{want} among {names:?}");
    }
    for (name, k) in &kernels {
        eprintln!("{name}");
        compiles_to_ptx(k);
    }
}

#[test]
fn kernels_and_their_launch_agree_on_the_values_per_thread() {
    // The compiler writes kernels for V values a thread; the runtime sizes the grid for it.
    assert_eq!(sluice_compiler::codegen::cuda::VALUES_PER_THREAD, sluice_runtime::cuda::VALUES_PER_THREAD);
}
