//! A Rust closure of the wrong type: rustc's error points at the closure, not at the
//! macro call.

sluice::pipeline! {
    pipeline train(files: glob = "data/*.tfrecord") {
        schema { label: i64 }
        tfrecords(files);
        map { parse_example(); }
        filter(|r| r.label + 1);
    }
}

fn main() {
    let _ = train::dataset(&train::Params::default());
}
