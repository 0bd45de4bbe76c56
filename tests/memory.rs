//! Memory stays bounded by buffer sizes, not by data size: the same pipeline
//! (interleave → parse → shuffle(10 000) → batch) streams 2 GB and then 4 GB of TFRecords
//! made by `sluice gen`, each in a child process, and the two peak RSS figures are within
//! 10 % of each other.

use std::path::Path;
use std::process::Command;

fn sluice(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("sluice runs");
    assert!(out.status.success(), "sluice {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn peak_rss_mb(dir: &Path) -> (f64, u64) {
    let json = sluice(&["bench", "pipeline", "memory", "--json", "--warmup", "0", dir.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    (v["peak_rss_mb"].as_f64().unwrap(), v["records"].as_u64().unwrap())
}

#[test]
fn peak_rss_does_not_depend_on_data_size() {
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all");
    // 340 000 image records of 12.3 KB: 4.2 GB in 32 shards.
    sluice(&["gen", "image", "--records", "340000", "--shards", "32", "--out", all.to_str().unwrap()]);
    // The first half of the shards, by symbolic link: 2.1 GB.
    let half = dir.path().join("half");
    std::fs::create_dir(&half).unwrap();
    let mut shards: Vec<_> = std::fs::read_dir(&all).unwrap().map(|e| e.unwrap().path()).collect();
    shards.sort();
    for s in &shards[..16] {
        std::os::unix::fs::symlink(s, half.join(s.file_name().unwrap())).unwrap();
    }
    let (small, n_small) = peak_rss_mb(&half);
    let (large, n_large) = peak_rss_mb(&all);
    assert_eq!((n_small, n_large), (170_000, 340_000), "every record streamed");
    eprintln!("peak RSS: {small:.1} MB for 2.1 GB, {large:.1} MB for 4.2 GB");
    assert!((large - small).abs() <= 0.10 * small, "peak RSS {small:.1} MB (2 GB) vs {large:.1} MB (4 GB)");
    // The bound itself: the shuffle buffer (10 000 × 12.3 KB) plus queues, far below the data.
    assert!(large < 400.0, "{large:.1} MB");
}
