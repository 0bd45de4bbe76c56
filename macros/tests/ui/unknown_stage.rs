//! An unknown stage: one error, on the stage's name, with a suggestion.

sluice::pipeline! {
    pipeline train(files: glob = "data/*.tfrecord") {
        schema { label: i64 }
        tfrecords(files);
        map { parse_example(); }
        batchh(32);
    }
}

fn main() {
    // The fallback module keeps this from adding errors.
    let _ = train::dataset(&train::Params::default());
}
