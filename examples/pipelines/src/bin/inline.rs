//! An inline pipeline (`sluice::pipeline!`) whose `filter` is a Rust closure and whose
//! `map` is a Rust function of this file, feeding a consumer: writes a small TFRecord
//! file of `tf.train.Example`s to a temporary directory, then sums what comes out.
//!
//! ```sh
//! cargo run -p sluice-examples --bin inline
//! ```

use prost::Message;
use sluice::example::{Example, Feature};
use sluice::runtime::stage::Dataset;
use sluice::tfrecord::Compression;

sluice::pipeline! {
    pipeline train(files: glob) {
        schema { x: f32[4], label: i64 }
        tfrecords(files);
        map { parse_example(); x = x * 2.0; }
        filter(|r| r.label % 3 != 0);
        map(relabel);
        batch(4, drop_remainder: false);
    }
}

/// A Rust `map`: a record in, a record of the same type out.
fn relabel(mut r: train::Record) -> train::Record {
    r.label = if r.label % 2 == 0 { 1 } else { 0 };
    r
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("sluice-inline-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("data.tfrecord");
    let mut w = sluice::tfrecord::create(&path, Compression::None)?;
    for i in 0..30i64 {
        let e = Example::from_features([
            ("x".to_string(), Feature::floats(vec![i as f32; 4])),
            ("label".to_string(), Feature::int64s(vec![i])),
        ]);
        w.write_record(&e.encode_to_vec())?;
    }
    w.finish()?;

    let params = train::Params::from_args(&[("files".into(), path.display().to_string())])?;
    let (mut batches, mut rows) = (0, 0);
    for batch in train::dataset(&params)?.stream()? {
        let batch: train::Batch = batch?;
        batches += 1;
        rows += sluice::runtime::abi::Rows::rows(&batch);
    }
    println!("{batches} batches, {rows} records");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
