//! Single-threaded throughput of the spec-driven `Example` parser against prost, on the
//! records of `sluice gen tabular`:
//!
//! ```text
//! cargo run --release -p sluice -- gen tabular --records 200000 --shards 1 --out /tmp/tab
//! cargo run --release -p sluice-runtime --example parse_example_bench -- /tmp/tab/tabular-00000-of-00001.tfrecord
//! ```
//!
//! Records are read into memory first, so only parsing is timed; each figure is the
//! best of five passes. `--view-only` after the file skips the prost runs.

use std::time::{Duration, Instant};

use prost::Message;
use sluice_runtime::example::Example;
use sluice_runtime::example::parse::{DType, ExampleParser, FeatureSpec, ParseSpec};
use sluice_runtime::tfrecord::{self, ReaderOptions};

const BATCH: usize = 1024;

fn best_of(passes: usize, mut f: impl FnMut() -> u64) -> (Duration, u64) {
    let mut best = Duration::MAX;
    let mut check = 0;
    for _ in 0..passes {
        let t = Instant::now();
        check = f();
        best = best.min(t.elapsed());
    }
    (best, check)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: parse_example_bench FILE.tfrecord")?;
    let mut reader = tfrecord::open(&path, &ReaderOptions::default())?;
    let mut records = Vec::new();
    while let Some(r) = reader.next_record()? {
        records.push(r.to_vec());
    }
    let n = records.len() as f64;
    let bytes: usize = records.iter().map(Vec::len).sum();
    println!("{} records, {:.1} bytes each", records.len(), bytes as f64 / n);

    let parser = ExampleParser::new(ParseSpec::new([
        FeatureSpec::fixed("x", DType::F32, vec![16]),
        FeatureSpec::fixed("label", DType::I64, vec![]),
    ]))?;

    let (t, check) = best_of(5, || {
        let mut cols = parser.columns();
        let mut sum = 0u64;
        for chunk in records.chunks(BATCH) {
            cols.clear();
            for r in chunk {
                parser.parse_into(r, &mut cols).expect("valid record");
            }
            sum += cols.columns()[1].as_i64().map_or(0, |l| l.iter().sum::<i64>() as u64);
        }
        sum
    });
    let view_rate = n / t.as_secs_f64();
    println!(
        "view parser into columns: {:>7.2} M records/s ({:.0} MB/s, {:.0} ns/record), check {check}",
        view_rate / 1e6,
        bytes as f64 / t.as_secs_f64() / 1e6,
        t.as_secs_f64() * 1e9 / n
    );
    if std::env::args().nth(2).as_deref() == Some("--view-only") {
        return Ok(());
    }

    let (t, check) = best_of(5, || {
        let mut sum = 0u64;
        for r in &records {
            let ex = Example::decode(&r[..]).expect("valid record");
            sum += ex.feature("label").and_then(|f| f.as_int64s()).map_or(0, |l| l[0] as u64);
        }
        sum
    });
    let prost_rate = n / t.as_secs_f64();
    println!(
        "prost decode:              {:>7.2} M records/s ({:.0} ns/record), check {check}",
        prost_rate / 1e6,
        t.as_secs_f64() * 1e9 / n
    );

    let (t, check) = best_of(5, || {
        let mut x = Vec::with_capacity(BATCH * 16);
        let mut label = Vec::with_capacity(BATCH);
        let mut sum = 0u64;
        for chunk in records.chunks(BATCH) {
            x.clear();
            label.clear();
            for r in chunk {
                let ex = Example::decode(&r[..]).expect("valid record");
                x.extend_from_slice(ex.feature("x").and_then(|f| f.as_floats()).expect("x"));
                label.extend_from_slice(ex.feature("label").and_then(|f| f.as_int64s()).expect("label"));
            }
            sum += label.iter().sum::<i64>() as u64;
        }
        sum
    });
    let prost_cols = n / t.as_secs_f64();
    println!(
        "prost decode into columns: {:>7.2} M records/s ({:.0} ns/record), check {check}",
        prost_cols / 1e6,
        t.as_secs_f64() * 1e9 / n
    );
    println!("speed-up over prost into columns: {:.1}x", view_rate / prost_cols);
    Ok(())
}
