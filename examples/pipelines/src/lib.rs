//! The benchmark pipelines of `bench/tfdata_bench.py` (`examples/bench/*.pipe`)
//! and the test corpus (`tests/pipes/*.pipe`), compiled by `build.rs` and included here:
//! one module per pipeline, each with `Params`, its record and batch types, and
//! `dataset(&params)`.

sluice::include_pipelines!("read");
sluice::include_pipelines!("parse_tabular");
sluice::include_pipelines!("shuffle_tabular");
sluice::include_pipelines!("image_raw");
sluice::include_pipelines!("jpeg");
sluice::include_pipelines!("augment");

/// Parses TensorFlow-written fixtures (`tests/tf_fixtures.rs`).
pub mod fixtures {
    sluice::include_pipelines!("tf_fixtures");
}

/// Exact sharding by record (`tests/shard.rs`).
pub mod sharding {
    sluice::include_pipelines!("shard");
}

/// `tokenize` and `pack` (`tests/pipes/pack.pipe`, `tests/tokens.rs`).
pub mod tokens {
    sluice::include_pipelines!("pack");
}

/// `bucket_by_length` and `padded_batch(pad_to_multiple)` (`tests/pipes/bucket.pipe`,
/// `tests/bucket.rs`).
pub mod bucket {
    sluice::include_pipelines!("bucket");
}

/// tf.data parity: `unbatch` of fields, `padding_values`, `zip` of batches,
/// `check_finite` (`tests/pipes/parity.pipe`, `tests/parity.rs`).
pub mod parity {
    sluice::include_pipelines!("parity");
}

/// `parse_sequence_example` (`tests/pipes/sequence.pipe`, `tests/sequence.rs`).
pub mod sequence {
    sluice::include_pipelines!("sequence");
}

/// The pipelines of `tests/pipes/`.
pub mod corpus {
    sluice::include_pipelines!("tabular");
    sluice::include_pipelines!("image_train");
    sluice::include_pipelines!("all_ops");
    sluice::include_pipelines!("mixture");
    sluice::include_pipelines!("gpu_augment");
    sluice::include_pipelines!("resume");
    sluice::include_pipelines!("global_shuffle");
    sluice::include_pipelines!("range");
    sluice::include_pipelines!("auto_cycle");
    sluice::include_pipelines!("parse_tensor");
    sluice::include_pipelines!("text");
    sluice::include_pipelines!("csv");
    sluice::include_pipelines!("read_file");
    sluice::include_pipelines!("on_error");
}

/// `tests/pipes/combine.pipe`: `zip`, `concatenate`, `enumerate`, `take_while`
/// (`tests/combine.rs`).
pub mod combine {
    sluice::include_pipelines!("combine");
}

/// `tests/pipes/flat_map.pipe`: `flat_map` over ranges and slices (`tests/flat_map.rs`).
pub mod flat_map {
    sluice::include_pipelines!("flat_map");
}

/// `tests/pipes/window.pipe`: `window` (`tests/window.rs`).
pub mod windows {
    sluice::include_pipelines!("window");
}

/// The user function `augment.pipe` declares (`extern fn augment_fns::brighten`).
pub mod augment_fns {
    use sluice::runtime::column::Tensor;

    /// Adds `amount` to every value.
    pub fn brighten(mut image: Tensor<f32>, amount: f32) -> Tensor<f32> {
        for v in image.as_mut_slice() {
            *v += amount;
        }
        image
    }
}

/// The user function `tests/pipes/image_train.pipe` declares.
pub mod my_augment {
    use sluice::runtime::column::Tensor;

    /// Leaves the image as it is (the corpus only needs it to exist).
    pub fn jitter(image: Tensor<f32>, _seed: u64) -> Tensor<f32> {
        image
    }
}
