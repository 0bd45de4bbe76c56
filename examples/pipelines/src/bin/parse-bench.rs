//! The schema-specialised `tf.train.Example` parser that the code generator writes,
//! against generic decoding of the same records, in one run on the same bytes:
//!
//! - `generated`: `parse_tabular::parse_examples` (from `examples/bench/parse_tabular.pipe`):
//!   batches of 1024 records straight into the batch's columns;
//! - `prost`: `Example::decode` (prost) of each record, then `x` and `label` copied into
//!   the same columns (what a generic, message-building decoder costs);
//! - `spec`: the runtime's spec-driven [`ExampleParser`] into its columns.
//!
//! ```sh
//! cargo run --release -p sluice-examples --bin parse-bench -- bench-data/tabular [--json]
//! ```
//!
//! One thread, records read into memory first; median of 5 passes each.

use std::time::Instant;

use prost::Message;
use sluice::example::Example;
use sluice::example::feature::Kind;
use sluice::runtime::example::parse::{DType, ExampleParser, FeatureSpec, ParseSpec};
use sluice::runtime::stage::RecordBatch;
use sluice_examples::parse_tabular;

#[global_allocator]
static ALLOCATOR: sluice::__private::MiMalloc = sluice::__private::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args.iter().find(|a| !a.starts_with("--")).ok_or("usage: parse-bench DIR [--json]")?;
    let json = args.iter().any(|a| a == "--json");
    let mut batches = Vec::new();
    let mut batch = RecordBatch::with_capacity(1024, 0);
    let mut paths: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths.iter().filter(|p| p.to_string_lossy().ends_with(".tfrecord")) {
        let mut r = sluice::tfrecord::open(p, &Default::default())?;
        while let Some(rec) = r.next_record()? {
            batch.push(rec);
            if batch.len() == 1024 {
                batches.push(std::mem::replace(&mut batch, RecordBatch::with_capacity(1024, 0)));
            }
        }
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    let records: usize = batches.iter().map(RecordBatch::len).sum();
    if records == 0 {
        return Err(format!("no records in {dir}/*.tfrecord").into());
    }

    let generated = median(|| {
        let mut rows = 0;
        for b in &batches {
            let cols = parse_tabular::parse_examples(b.iter()).expect("generated parse");
            rows += cols.label.len();
        }
        rows
    });
    let prost = median(|| {
        let mut rows = 0;
        for b in &batches {
            let mut x: Vec<f32> = Vec::with_capacity(b.len() * 16);
            let mut label: Vec<i64> = Vec::with_capacity(b.len());
            for rec in b.iter() {
                let ex = Example::decode(rec).expect("prost decode");
                let f = ex.features.as_ref().expect("features");
                match f.feature.get("x").and_then(|f| f.kind.as_ref()) {
                    Some(Kind::FloatList(l)) if l.value.len() == 16 => x.extend_from_slice(&l.value),
                    _ => panic!("feature x"),
                }
                match f.feature.get("label").and_then(|f| f.kind.as_ref()) {
                    Some(Kind::Int64List(l)) if l.value.len() == 1 => label.push(l.value[0]),
                    _ => panic!("feature label"),
                }
            }
            std::hint::black_box(&x);
            rows += label.len();
        }
        rows
    });
    let parser = ExampleParser::new(ParseSpec::new([
        FeatureSpec::fixed("x", DType::F32, [16]),
        FeatureSpec::fixed("label", DType::I64, []),
    ]))?;
    let spec = median(|| {
        let mut rows = 0;
        for b in &batches {
            let mut cols = parser.columns();
            for rec in b.iter() {
                parser.parse_into(rec, &mut cols).expect("spec parse");
            }
            rows += cols.rows();
        }
        rows
    });
    let rate = |s: f64| records as f64 / s;
    if json {
        println!(
            "{{\"records\": {records}, \"generated_per_sec\": {:.0}, \"prost_per_sec\": {:.0}, \"spec_per_sec\": {:.0}, \"generated_vs_prost\": {:.2}, \"generated_vs_spec\": {:.2}}}",
            rate(generated),
            rate(prost),
            rate(spec),
            prost / generated,
            spec / generated
        );
    } else {
        println!("{records} records, 1 thread, median of 5 passes");
        println!("generated (parse_tabular::parse_examples): {:>12.0} records/s", rate(generated));
        println!("prost Example::decode + copy:              {:>12.0} records/s", rate(prost));
        println!("runtime ExampleParser (spec-driven):       {:>12.0} records/s", rate(spec));
        println!("generated vs prost: {:.2}x, vs spec-driven: {:.2}x", prost / generated, spec / generated);
    }
    Ok(())
}

/// Median seconds of 5 runs of `f` (which returns the rows it parsed, so nothing is
/// optimised away).
fn median(f: impl Fn() -> usize) -> f64 {
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[2]
}
