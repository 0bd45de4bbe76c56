//! The runtime API end to end: write a small tabular dataset, then read it back through
//! a parallel interleave, shuffle, batch-level Example parsing into columns and prefetch,
//! for three epochs, and print the per-stage statistics.
//!
//! `cargo run --release --example tabular [RECORDS]`

use std::sync::Arc;

use sluice::runtime::BoxError;
use sluice::runtime::example::parse::{DType, ExampleParser, FeatureSpec, ParseSpec};
use sluice::runtime::stage::{Buffer, Dataset, Parallelism, Record, files, tfrecords};
use sluice::runtime::synth::{GenOptions, Kind, generate};
use sluice::runtime::tfrecord::{Compression, ReaderOptions};

fn main() -> anyhow::Result<()> {
    let records: u64 = std::env::args().nth(1).map(|n| n.parse()).transpose()?.unwrap_or(200_000);
    let dir = tempfile::tempdir()?;
    let opts = GenOptions {
        kind: Kind::Tabular,
        records,
        shards: 8,
        out: dir.path().to_path_buf(),
        seed: 1,
        compression: Compression::None,
        threads: 0,
    };
    generate(&opts, &|_| {})?;

    let parser = Arc::new(ExampleParser::new(ParseSpec::new([
        FeatureSpec::fixed("x", DType::F32, [16]),
        FeatureSpec::fixed("label", DType::I64, []),
    ]))?);
    let pattern = format!("{}/*.tfrecord", dir.path().display());
    let train = tfrecords(files(&pattern)?, ReaderOptions::default(), 4)
        .num_parallel(Parallelism::Auto)
        .shuffle(10_000, 42)
        .chunks(1024, false)
        .try_map(move |records: Vec<Record>| {
            let mut cols = parser.columns();
            for r in &records {
                parser.parse_into(r, &mut cols).map_err(|e| r.origin().name_in(e))?;
            }
            Ok::<_, BoxError>(cols)
        })
        .num_parallel(Parallelism::Auto)
        .prefetch(Buffer::Auto)
        .repeat(Some(3));

    let mut stream = train.stream()?;
    let (mut batches, mut rows, mut label_sum) = (0u64, 0u64, 0i64);
    for batch in stream.by_ref() {
        let batch = batch?;
        batches += 1;
        rows += batch.rows() as u64;
        label_sum += batch.column(1).and_then(|c| c.as_i64()).unwrap_or_default().iter().sum::<i64>();
    }
    assert_eq!(rows, 3 * records, "every record once per epoch");
    println!("{batches} batches, {rows} rows, mean label {:.3}", label_sum as f64 / rows as f64);
    println!("{}", stream.report());
    Ok(())
}
