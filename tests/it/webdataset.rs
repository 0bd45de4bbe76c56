//! `webdataset(files)` through both backends: the `webdataset` package's shards
//! (tests/fixtures/webdataset) read the same by each; a tar cut mid-member and a sample
//! without a declared member fail the same way (exit 1, naming the shard and the key) or
//! are counted under `on_error: skip`, never a panic.

use super::support::{root, show_both, stderr, stdout};

const PIPES: &str = r#"
pipeline strict(files: glob) {
    schema { __key__: str, jpg: bytes, cls: i64, txt: str }
    webdataset(files);
    select(__key__, cls, txt);
}
pipeline skipping(files: glob) {
    schema { __key__: str, cls: i64, txt: str }
    webdataset(files, on_error: skip);
}
"#;

#[test]
fn a_sample_without_a_declared_member_fails_or_is_counted_naming_shard_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("w.pipe");
    std::fs::write(&pipe, PIPES).unwrap();
    let shard = root().join("tests/fixtures/webdataset/shard-000001.tar.gz");
    let o = show_both(dir.path(), &pipe, "strict", &shard);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o).lines().count(), 1, "sample 000004 comes before 000005");
    let want = format!(
        "{}: record 1: column `txt`: sample `000005` has no `txt` member (it has: cls, jpg, json)",
        shard.display()
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    let o = show_both(dir.path(), &pipe, "skipping", &shard);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2, "000005 dropped and counted");
}

#[test]
fn a_tar_cut_mid_member_fails_naming_the_shard_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("w.pipe");
    std::fs::write(&pipe, PIPES).unwrap();
    let good = std::fs::read(root().join("tests/fixtures/webdataset/shard-000000.tar")).unwrap();
    let mut failed = 0;
    for cut in [700, 2000, 5000, 9000, good.len() - 1024 - 10] {
        let shard = dir.path().join(format!("cut-{cut}.tar"));
        std::fs::write(&shard, &good[..cut]).unwrap();
        let o = show_both(dir.path(), &pipe, "skipping", &shard);
        if o.status.code() == Some(1) {
            failed += 1;
            assert!(stderr(&o).contains(shard.to_str().unwrap()), "{}", stderr(&o));
            let err = stderr(&o);
            assert!(
                err.contains("sample `") || err.contains("before the first sample"),
                "names the key: {err}"
            );
        }
    }
    assert!(failed >= 4, "only {failed} cut shards failed");
}
