//! A type error of the pipeline language (E0401): on the exact token.

sluice::pipeline! {
    pipeline train(files: glob = "data/*.tfrecord") {
        schema { label: i64, x: f32[4] }
        tfrecords(files);
        map { parse_example(); x = x * lable; }
    }
}

fn main() {
    let _ = train::dataset(&train::Params::default());
}
