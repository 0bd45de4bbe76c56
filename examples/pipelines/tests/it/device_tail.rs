//! The device tail of a `device cuda` pipeline (`tests/pipes/gpu_augment.pipe`), checked
//! three ways on the same batches, bit for bit:
//!
//! - the CPU twin (`dataset()`: the host batches, then the tail as generated Rust) against
//!   a plain reference: the runtime's operations applied row by row to the host batches
//!   (`host_dataset()`), each row drawing with the tail's key `(batch << 20) | row`;
//! - each generated kernel (`device_tail().kernels`, the CUDA C NVRTC compiles), run on
//!   the host as C++ (`HOST_PRELUDE`) over the same host batches, each batch in two parts
//!   as the device feed splits it between devices (the second from its `row0`), against
//!   the twin;
//! - over two epochs, so the epoch reaches the draws.
//!
//! The host run needs a C++ compiler (`g++`, or `$CXX`); without one that part is skipped
//! with a message.

use std::path::Path;
use std::process::Command;

use sluice::runtime::abi::TailKernel;
use sluice::runtime::abi::ops::{self, Flip};
use sluice::runtime::column::{AnyColumn, NamedColumns, Tensor};
use sluice::runtime::stage::{Ctx, Dataset, RuntimeOptions};
use sluice::synth::{GenOptions, Kind};
use sluice::tfrecord::Compression;
use sluice_examples::corpus::gpu_augment;

const SEED: u64 = 42;
const BATCH: u32 = 16;

fn params(dir: &Path) -> gpu_augment::Params {
    gpu_augment::Params { files: format!("{}/*.tfrecord", dir.display()), batch_size: BATCH, seed: SEED }
}

fn data() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = GenOptions {
        kind: Kind::Image,
        records: 70,
        shards: 2,
        out: dir.path().to_path_buf(),
        seed: 5,
        compression: Compression::None,
        threads: 1,
    };
    sluice::synth::generate(&opts, &|_| {}).unwrap();
    dir
}

fn pass<D: Dataset>(ds: &D, epoch: u64) -> Vec<D::Item> {
    let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(epoch);
    ds.stream_in(&ctx).unwrap().collect::<sluice::Result<Vec<_>>>().unwrap()
}

/// A batch's columns by name: (shape, bytes).
fn columns(batch: impl NamedColumns) -> Vec<(&'static str, Vec<usize>, Vec<u8>)> {
    batch
        .into_named_columns()
        .into_iter()
        .map(|(name, c)| match c {
            AnyColumn::Dense { shape, data } => (name, shape, data.as_bytes().to_vec()),
            AnyColumn::Ragged { .. } => panic!("column {name} is ragged"),
        })
        .collect()
}

fn column<'a>(
    cols: &'a [(&'static str, Vec<usize>, Vec<u8>)],
    name: &str,
) -> &'a (&'static str, Vec<usize>, Vec<u8>) {
    cols.iter().find(|c| c.0 == name).unwrap()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// The tail written out with the runtime's operations, one row at a time.
fn reference(image: &[u8], label: &[u8], rows: usize, epoch: u64, batch: u64) -> (Vec<f32>, Vec<f32>) {
    let (mut images, mut labels) = (Vec::new(), Vec::new());
    for r in 0..rows {
        let index = (batch << 20) | r as u64;
        let px = image[r * 64 * 64 * 3..(r + 1) * 64 * 64 * 3].to_vec();
        let t = Tensor::new(vec![64, 64, 3], px).unwrap();
        // The tail's random operations are the pipeline's first: ids 0 and 1.
        let t = ops::random_crop(&t, 56, 56, &mut ops::element_rng(SEED, 0, epoch, index)).unwrap();
        let t = t.random_flip(&mut ops::element_rng(SEED, 1, epoch, index));
        let f: Vec<f32> = t.as_slice().iter().map(|&v| f32::from(v) * (1.0f32 / 255.0f32)).collect();
        let f = Tensor::new(t.shape().to_vec(), f).unwrap();
        let f = ops::normalize(f, &[0.485, 0.456, 0.406], &[0.229, 0.224, 0.225]).unwrap();
        images.extend_from_slice(ops::transpose_chw(&f).unwrap().as_slice());
        let l = i64::from_le_bytes(label[r * 8..r * 8 + 8].try_into().unwrap());
        labels.extend_from_slice(ops::one_hot(l, 10).unwrap().as_slice());
    }
    (images, labels)
}

#[test]
fn the_cpu_twin_equals_the_runtime_ops_row_by_row() {
    let dir = data();
    let p = params(dir.path());
    for epoch in 0..2 {
        let host = pass(&gpu_augment::host_dataset(&p).unwrap(), epoch);
        let twin = pass(&gpu_augment::dataset(&p).unwrap(), epoch);
        assert_eq!(host.len(), 70 / BATCH as usize, "drop_remainder");
        assert_eq!(host.len(), twin.len());
        for (b, (h, t)) in host.into_iter().zip(twin).enumerate() {
            let (h, t) = (columns(h), columns(t));
            let (image, label) = (column(&h, "image"), column(&h, "label"));
            assert_eq!(image.1, [BATCH as usize, 64, 64, 3]);
            let (want_image, want_label) = reference(&image.2, &label.2, BATCH as usize, epoch, b as u64);
            let (got_image, got_label) = (column(&t, "image"), column(&t, "label"));
            assert_eq!(got_image.1, [BATCH as usize, 3, 56, 56]);
            assert_eq!(got_label.1, [BATCH as usize, 10]);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(bits(&f32s(&got_image.2)) == bits(&want_image), "epoch {epoch} batch {b}: image");
            assert!(bits(&f32s(&got_label.2)) == bits(&want_label), "epoch {epoch} batch {b}: label");
        }
    }
}

#[test]
fn the_tail_draws_differ_between_epochs_and_rows() {
    let dir = data();
    let p = params(dir.path());
    let first = |epoch| columns(pass(&gpu_augment::dataset(&p).unwrap(), epoch).swap_remove(0));
    let (a, b) = (first(0), first(1));
    assert_ne!(column(&a, "image").2, column(&b, "image").2, "a new augmentation each epoch");
    assert_eq!(column(&a, "label").2, column(&b, "label").2, "no shuffle: the same labels");
}

/// The C type of a dtype name.
fn c_type(dtype: &str) -> &'static str {
    match dtype {
        "u8" => "unsigned char",
        "i64" => "long long",
        "f32" => "float",
        other => panic!("no harness type for {other}"),
    }
}

/// Builds a host executable running `k` over a file of input rows: `EXE IN OUT N EPOCH
/// BATCH ROW0` writes the `N` output values.
fn host_kernel(k: &TailKernel, dir: &Path) -> Option<std::path::PathBuf> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    if Command::new(&cxx).arg("--version").output().is_err() {
        eprintln!("skipped the host run of kernel {}: no C++ compiler ({cxx})", k.name);
        return None;
    }
    let seeds: String = k.seeds.iter().map(|s| format!(", {s}ull")).collect();
    let (in_t, out_t) = (c_type(k.in_dtype), c_type(k.out_dtype));
    let program = format!(
        "{prelude}{source}\n#include <cstdio>\n#include <cstdlib>\n#include <vector>\n\
         int main(int argc, char** argv) {{\n\
           if (argc != 7) return 2;\n\
           FILE* f = fopen(argv[1], \"rb\"); if (!f) return 3;\n\
           fseek(f, 0, SEEK_END); long size = ftell(f); fseek(f, 0, SEEK_SET);\n\
           std::vector<unsigned char> in(size > 0 ? size : 1);\n\
           if (size > 0 && fread(in.data(), 1, size, f) != (size_t)size) return 4; fclose(f);\n\
           unsigned long long n = strtoull(argv[3], 0, 10), epoch = strtoull(argv[4], 0, 10),\n\
             batch = strtoull(argv[5], 0, 10), row0 = strtoull(argv[6], 0, 10);\n\
           std::vector<{out_t}> out(n ? n : 1);\n\
           blockDim.x = 256;\n\
           for (unsigned long long t = 0; t < n; ++t) {{\n\
             blockIdx.x = (unsigned)(t / 256); threadIdx.x = (unsigned)(t % 256);\n\
             {name}((const {in_t}*)in.data(), out.data(), n, epoch, batch, row0{seeds});\n\
           }}\n\
           FILE* o = fopen(argv[2], \"wb\"); if (!o) return 5;\n\
           fwrite(out.data(), sizeof({out_t}), n, o); fclose(o);\n\
           return 0;\n\
         }}\n",
        prelude = sluice_compiler::codegen::cuda::HOST_PRELUDE,
        source = k.source,
        name = k.name,
    );
    let (src, exe) = (dir.join(format!("{}.cpp", k.name)), dir.join(k.name));
    std::fs::write(&src, &program).unwrap();
    let built = Command::new(&cxx).args(["-O1", "-std=c++17", "-o"]).arg(&exe).arg(&src).output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    Some(exe)
}

#[test]
fn each_generated_kernel_equals_the_cpu_twin_on_split_batches() {
    let dir = data();
    let p = params(dir.path());
    let tail = gpu_augment::device_tail(&p);
    let names: Vec<&str> = tail.kernels.iter().map(|k| k.field).collect();
    assert_eq!(names, ["image", "label"], "one kernel per column the tail changes");
    assert_eq!(tail.kernel("image").unwrap().seeds, [SEED, SEED]);
    assert_eq!(tail.kernel("label").unwrap().in_range, Some((0, 10)));
    let work = tempfile::tempdir().unwrap();
    let exes: Vec<_> = tail.kernels.iter().map(|k| host_kernel(k, work.path())).collect();
    if exes.iter().any(Option::is_none) {
        return;
    }
    for epoch in 0..2 {
        let host = pass(&gpu_augment::host_dataset(&p).unwrap(), epoch);
        let twin = pass(&gpu_augment::dataset(&p).unwrap(), epoch);
        for (b, (h, t)) in host.into_iter().zip(twin).enumerate() {
            let (h, t) = (columns(h), columns(t));
            for (k, exe) in tail.kernels.iter().zip(&exes) {
                let input = &column(&h, k.field).2;
                let in_row = input.len() / BATCH as usize;
                let out_row = k.out_row_len();
                // Two parts, as the feed splits a batch between two devices.
                let cut = BATCH as usize / 2 + 1;
                let mut got = Vec::new();
                for (row0, rows) in [(0, cut), (cut, BATCH as usize - cut)] {
                    let (i, o) = (work.path().join("in"), work.path().join("out"));
                    std::fs::write(&i, &input[row0 * in_row..(row0 + rows) * in_row]).unwrap();
                    let n = (rows * out_row).to_string();
                    let ran = Command::new(exe.as_ref().unwrap())
                        .arg(&i)
                        .arg(&o)
                        .args([n, epoch.to_string(), b.to_string(), row0.to_string()])
                        .output()
                        .unwrap();
                    assert!(ran.status.success(), "kernel {} exited with {:?}", k.name, ran.status);
                    got.extend(std::fs::read(&o).unwrap());
                }
                assert!(
                    got == column(&t, k.field).2,
                    "epoch {epoch} batch {b}: kernel {} differs from the twin",
                    k.name
                );
            }
        }
    }
}
