//! Measures what handing a batch to libtorch costs: `TensorBatch::from_batch` (the
//! tensor takes the column's buffer, no copy) against copying the column into a new
//! tensor (`Tensor::from_slice`, what a loader without ownership transfer does), on
//! `image_raw`-sized batches (256 × 64 × 64 × 3 `f32`, 12.6 MB), and the per-replica
//! split. Prints one line per method.
//!
//! ```sh
//! cargo run --release -p sluice-digits --features torch --bin tensor-bench
//! ```

use std::hint::black_box;
use std::time::Instant;

use sluice::runtime::column::{AnyColumn, Dense, IntoAnyColumn, NamedColumns};
use sluice::torch::TensorBatch;
use sluice::torch::tch::Tensor;

const BATCH: usize = 256;
const ROW: usize = 64 * 64 * 3;
const BATCHES: usize = 24;

struct Images(Dense<f32, sluice::runtime::column::Tensor<f32>>);

impl NamedColumns for Images {
    fn into_named_columns(self) -> Vec<(&'static str, AnyColumn)> {
        vec![("image", self.0.into_any_column())]
    }
}

fn batches() -> Vec<Images> {
    (0..BATCHES)
        .map(|b| {
            let data: Vec<f32> = (0..BATCH * ROW).map(|i| (i + b) as f32 * 1e-3).collect();
            Images(Dense::new(vec![BATCH, 64, 64, 3], data).expect("a valid column"))
        })
        .collect()
}

/// Prints the time per batch, and the copy rate for a method that copies.
fn report(what: &str, seconds: f64, copies: bool) {
    let per = seconds / BATCHES as f64;
    let rate =
        if copies { format!("  ({:.2} GB/s)", (BATCH * ROW * 4) as f64 / 1e9 / per) } else { String::new() };
    println!("{what:<44} {:>10.1} µs per 12.6 MB batch{rate}", per * 1e6);
}

fn main() -> sluice::Result<()> {
    // Warm libtorch up (its allocator, thread pools).
    black_box(TensorBatch::from_batch(batches().pop().expect("a batch"))?);

    let input = batches();
    let t = Instant::now();
    let tensors: Vec<TensorBatch> =
        input.into_iter().map(TensorBatch::from_batch).collect::<sluice::Result<_>>()?;
    report("TensorBatch::from_batch (no copy)", t.elapsed().as_secs_f64(), false);

    let input = batches();
    let t = Instant::now();
    let copies: Vec<Tensor> =
        input.iter().map(|b| Tensor::from_slice(b.0.as_slice()).view([BATCH as i64, 64, 64, 3])).collect();
    report("Tensor::from_slice (one copy)", t.elapsed().as_secs_f64(), true);

    let t = Instant::now();
    let parts: Vec<Vec<TensorBatch>> = tensors.iter().map(|b| b.split(4)).collect();
    report("TensorBatch::split(4) (views)", t.elapsed().as_secs_f64(), false);

    let t = Instant::now();
    drop(black_box(parts));
    drop(black_box(tensors));
    report("dropping them (the buffers go back to Rust)", t.elapsed().as_secs_f64(), false);
    drop(copies);
    Ok(())
}
