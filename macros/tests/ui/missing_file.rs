//! A pipeline file that does not exist: the error is on the path.

sluice::pipeline!(file = "pipes/missing.pipe");

fn main() {}
