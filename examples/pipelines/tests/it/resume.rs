//! Exact resume, in new processes: `resume-check` runs a pipeline of
//! `tests/pipes/resume.pipe` for two epochs uninterrupted, then stopped after a random
//! number of elements (a property test over the stop point) with its state saved, then
//! resumed from that state in another process. The digests of the stopped run and the
//! resumed one, end to end, must be those of the uninterrupted run: no element repeated,
//! none lost, the same order and the same random augmentation. A state of another
//! pipeline, of the same pipeline over changed files, or a damaged one is refused.

use std::process::{Command, Output};

use proptest::prelude::*;
use sluice::synth::{GenOptions, Kind};
use sluice::tfrecord::Compression;

fn data(kind: Kind, records: u64, shards: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = GenOptions {
        kind,
        records,
        shards,
        out: dir.path().to_path_buf(),
        seed: 1,
        compression: Compression::None,
        threads: 1,
    };
    sluice::synth::generate(&opts, &|_| {}).unwrap();
    dir
}

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resume-check")).args(args).output().unwrap()
}

fn lines(o: &Output) -> Vec<String> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap().lines().map(String::from).collect()
}

/// The whole run, then stopped after `stop` and resumed: the two must agree.
fn stop_and_resume(pipeline: &str, glob: &str, full: &[String], stop: usize) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let state = state.to_str().unwrap();
    let stop_s = stop.to_string();
    let first = lines(&check(&[pipeline, glob, "2", "--stop-after", &stop_s, state]));
    assert_eq!(first.len(), stop.min(full.len()));
    let rest = lines(&check(&[pipeline, glob, "2", "--resume", state]));
    let joined: Vec<&String> = first.iter().chain(&rest).collect();
    let want: Vec<&String> = full.iter().collect();
    assert!(
        joined == want,
        "{pipeline} stopped after {stop}: {} + {} elements differ from the {} of one run",
        first.len(),
        rest.len(),
        full.len()
    );
}

fn tabular() -> (tempfile::TempDir, String, Vec<String>) {
    let dir = data(Kind::Tabular, 2500, 5);
    let glob = format!("{}/*.tfrecord", dir.path().display());
    let full = lines(&check(&["resume_tabular", &glob, "2"]));
    (dir, glob, full)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_shuffled_filtered_batched_pipeline_resumes_exactly(stop in 0usize..600) {
        let (_dir, glob, full) = tabular();
        // 2 epochs of ~2250 kept records in batches of 8: about 560 elements.
        prop_assert!(full.len() > 500 && full.len() < 600, "{}", full.len());
        stop_and_resume("resume_tabular", &glob, &full, stop);
    }
}

#[test]
fn random_augmentation_resumes_with_the_same_draws() {
    let dir = data(Kind::Image, 90, 2);
    let glob = format!("{}/*.tfrecord", dir.path().display());
    let full = lines(&check(&["resume_image", &glob, "2"]));
    assert_eq!(full.len(), 2 * 23, "90 images in batches of 4, two epochs");
    assert_ne!(full[..23], full[23..], "each epoch its own order and draws");
    for stop in [0, 1, 5, 22, 23, 24, 40, 45, 46, 100] {
        stop_and_resume("resume_image", &glob, &full, stop);
    }
}

#[test]
fn the_edges_of_the_run_resume_exactly() {
    let (_dir, glob, full) = tabular();
    let epoch = full.iter().take_while(|l| l.starts_with("0 ")).count();
    for stop in [0, 1, epoch - 1, epoch, epoch + 1, full.len() - 1, full.len(), full.len() + 5] {
        stop_and_resume("resume_tabular", &glob, &full, stop);
    }
}

#[test]
fn a_state_that_does_not_fit_is_refused() {
    let (dir, glob, _) = tabular();
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = state.to_str().unwrap();
    lines(&check(&["resume_tabular", &glob, "2", "--stop-after", "10", s]));
    let refused = |args: &[&str], what: &str| {
        let o = check(args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success() && err.starts_with("error: ") && err.contains(what), "{what}: {err}");
    };
    // Another pipeline.
    refused(&["resume_image", &glob, "2", "--resume", s], "of pipeline `resume_tabular`, not `resume_image`");
    // Damaged.
    let mut bytes = std::fs::read(&state).unwrap();
    let good = bytes.clone();
    bytes[10] ^= 1;
    std::fs::write(&state, &bytes).unwrap();
    refused(&["resume_tabular", &glob, "2", "--resume", s], "checksum");
    std::fs::write(&state, &good[..20]).unwrap();
    refused(&["resume_tabular", &glob, "2", "--resume", s], "not a pipeline state");
    std::fs::write(&state, &good).unwrap();
    // The same pipeline over other files: one file grew.
    let file = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
    let mut more = std::fs::read(&file).unwrap();
    more.extend_from_within(..16);
    std::fs::write(&file, more).unwrap();
    refused(&["resume_tabular", &glob, "2", "--resume", s], "does not match it now");
}
