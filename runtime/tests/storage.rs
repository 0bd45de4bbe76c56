//! Reading from a real S3 server (s3s-fs on 127.0.0.1, `support/s3.rs`): globs over a
//! bucket, TFRecord files (plain and GZIP), whole files and text read from `s3://` equal
//! their local copies record for record; through a fault-injection proxy (resets, 503s,
//! mid-body stalls on a seeded schedule) every record still arrives once and in order; a
//! missing object or bucket fails at once naming the URL; an object replaced mid-read
//! fails naming it. Skips without s3s-fs unless `SLUICE_REQUIRE_S3=1`.
//!
//! One server and one proxy per test binary: the storage layer reads its endpoint and
//! credentials from the process environment once, so every test goes through the proxy,
//! which faults only the `faulty-*` buckets.

#[path = "support/objects.rs"]
mod objects;
#[path = "support/s3.rs"]
mod s3;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use objects::{drain, records, urls, write_shards};
use s3::{FaultProxy, S3Server};
use sluice_runtime::storage;
use sluice_runtime::tfrecord::{self, ReaderOptions};

struct Fixture {
    server: S3Server,
    proxy: FaultProxy,
    /// Local copies of what the buckets hold.
    local: tempfile::TempDir,
}

/// The shared server, proxy and data, or `None` (skip) without s3s-fs.
fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = S3Server::start()?;
        let proxy = FaultProxy::start(server.port, 20, "faulty", 300, Duration::from_millis(1500));
        for (k, v) in S3Server::env_for(proxy.port) {
            // SAFETY: set once, before any test reads the environment: every test calls
            // `fixture()` first and waits here while it runs.
            unsafe { std::env::set_var(k, v) };
        }
        for (k, v) in [
            ("SLUICE_STORAGE_CHUNK", "65536"),
            ("SLUICE_STORAGE_IN_FLIGHT", "3"),
            ("SLUICE_STORAGE_TIMEOUT_MS", "400"),
            ("SLUICE_STORAGE_BACKOFF_MS", "5"),
            ("SLUICE_STORAGE_RETRIES", "40"),
        ] {
            // SAFETY: as above.
            unsafe { std::env::set_var(k, v) };
        }
        let local = tempfile::tempdir().unwrap();
        write_shards(local.path());
        for bucket in ["data", "faulty-data"] {
            server.bucket(bucket);
            server.put_dir(bucket, "train", local.path());
        }
        Some(Fixture { server, proxy, local })
    })
    .as_ref()
}

#[test]
fn a_bucket_reads_as_its_local_copy() {
    let Some(f) = fixture() else { return };
    let got = urls("s3://data/train/part-*.tfrecord*");
    let want: Vec<PathBuf> = ["part-0.tfrecord", "part-1.tfrecord", "part-2.tfrecord.gz"]
        .iter()
        .map(|n| PathBuf::from(format!("s3://data/train/{n}")))
        .collect();
    assert_eq!(got, want);
    for url in &got {
        let name = url.file_name().unwrap();
        assert_eq!(records(url), records(&f.local.path().join(name)), "{}", url.display());
    }
    // `?` and classes match as locally; `*` stays within one component.
    assert_eq!(urls("s3://data/train/part-[01].tfrecord").len(), 2);
    assert_eq!(urls("s3://data/*/part-?.tfrecord").len(), 2);
    assert!(sluice_runtime::stage::files("s3://data/*.tfrecord").is_err());
    // Whole files and sizes.
    let notes = Path::new("s3://data/train/notes.txt");
    assert_eq!(storage::read(notes).unwrap(), b"alpha\nbeta\ngamma\n");
    assert_eq!(storage::size(notes).unwrap(), 17);
}

#[test]
fn faults_are_retried_and_every_record_arrives_once_in_order() {
    let Some(f) = fixture() else { return };
    for url in urls("s3://faulty-data/train/part-*.tfrecord*") {
        let name = url.file_name().unwrap();
        assert_eq!(records(&url), records(&f.local.path().join(name)), "{}", url.display());
    }
    let c = &f.proxy.counts;
    let (resets, throttles, stalls) =
        (c.resets.load(SeqCst), c.throttles.load(SeqCst), c.stalls.load(SeqCst));
    assert!(
        resets > 0 && throttles > 0 && stalls > 0,
        "faults injected: {resets} resets, {throttles} 503s, {stalls} stalls"
    );
}

#[test]
fn a_missing_object_or_bucket_fails_at_once_naming_the_url() {
    let Some(f) = fixture() else { return };
    let err = tfrecord::open("s3://data/train/missing.tfrecord", &ReaderOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("s3://data/train/missing.tfrecord"), "{msg}");
    assert!(
        matches!(&err, sluice_runtime::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );
    assert_eq!(
        f.proxy.requests_for("HEAD /data/train/missing.tfrecord"),
        1,
        "one request, no retry loop on a 404"
    );

    let err = sluice_runtime::stage::files("s3://no-such-bucket/train/*.tfrecord").unwrap_err().to_string();
    assert!(err.contains("s3://no-such-bucket/train/*.tfrecord"), "{err}");
    assert_eq!(f.proxy.requests_for("GET /no-such-bucket"), 1, "one request, no retry loop on a 404");
}

#[test]
fn an_object_replaced_mid_read_fails_naming_it() {
    let Some(f) = fixture() else { return };
    let src = f.local.path().join("part-1.tfrecord");
    let original = std::fs::read(&src).unwrap();
    // Same length, other bytes (a new ETag); and a shorter object, whose later ranges no
    // longer exist (a store may say so, 416, before it checks the ETag).
    let mut flipped = original.clone();
    *flipped.last_mut().unwrap() ^= 0xff;
    let shorter = original[..1000].to_vec();
    f.server.bucket("mutable");
    for (key, replacement) in
        [("changing/same-length.tfrecord", flipped), ("changing/shorter.tfrecord", shorter)]
    {
        f.server.put("mutable", key, &src);
        let url = format!("s3://mutable/{key}");
        let mut r = tfrecord::open(Path::new(&url), &ReaderOptions::default()).unwrap();
        r.next_owned().unwrap().unwrap();
        // As a store replaces an object: whole, at once (written aside, then renamed), so
        // no GET sees it half written.
        let served = f.server.root.path().join("mutable").join(key);
        let aside = served.with_extension("new");
        std::fs::write(&aside, &replacement).unwrap();
        std::fs::rename(&aside, &served).unwrap();
        let err = loop {
            match r.next_owned() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the whole object was read although it changed: {url}"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(err.contains(&url) && err.contains("changed"), "{err}");
        assert!(err.contains("while reading record "), "the record is named: {err}");
    }
}

#[test]
fn an_upload_appears_whole_on_finish_and_never_when_dropped() {
    let Some(f) = fixture() else { return };
    f.server.bucket("out");
    let data: Vec<u8> = (0..(12 << 20)).map(|i: u32| (i * 7 % 251) as u8).collect();
    let done = Path::new("s3://out/done.bin");
    let mut w = storage::ObjectWriter::create(done).unwrap();
    for part in data.chunks(1 << 20) {
        std::io::Write::write_all(&mut w, part).unwrap();
    }
    assert!(!storage::exists(done).unwrap(), "nothing shows before the upload completes");
    w.finish().unwrap();
    assert_eq!(storage::read(done).unwrap(), data);

    let dropped = Path::new("s3://out/dropped.bin");
    let mut w = storage::ObjectWriter::create(dropped).unwrap();
    std::io::Write::write_all(&mut w, &data).unwrap();
    drop(w);
    assert!(!storage::exists(dropped).unwrap(), "an unfinished upload leaves no object");
}

/// Every record of a global shuffle's epoch, as bytes.
fn shuffled(paths: &[PathBuf], seed: u64) -> Vec<Vec<u8>> {
    use sluice_runtime::stage::{Ctx, Dataset, RuntimeOptions, global_shuffle};
    let ds = global_shuffle(paths, seed).unwrap().window(64);
    let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(1);
    ds.stream_in(&ctx).unwrap().map(|r| r.unwrap().as_bytes().to_vec()).collect()
}

#[test]
fn a_global_shuffle_over_objects_is_the_one_over_their_local_copies() {
    let Some(f) = fixture() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut local = Vec::new();
    for k in 0..2 {
        let name = format!("part-{k}.tfrecord");
        std::fs::copy(f.local.path().join(&name), dir.path().join(&name)).unwrap();
        tfrecord::write_index(dir.path().join(&name)).unwrap();
        local.push(dir.path().join(&name));
    }
    for bucket in ["data", "faulty-data"] {
        // The indexes written by `sluice index` of the objects themselves.
        for p in &local {
            let url =
                PathBuf::from(format!("s3://{bucket}/train/{}", p.file_name().unwrap().to_str().unwrap()));
            tfrecord::write_index(&url).unwrap();
            let idx = std::fs::read(tfrecord::index_path(p)).unwrap();
            assert_eq!(storage::read(&tfrecord::index_path(&url)).unwrap(), idx, "{}", url.display());
        }
        let urls = urls(&format!("s3://{bucket}/train/part-[01].tfrecord"));
        let want = shuffled(&local, 9);
        assert_eq!(want.len(), 1200);
        assert_eq!(shuffled(&urls, 9), want, "{bucket}");
    }
    // No index beside an object: the error says to run `sluice index`, naming it.
    let err = sluice_runtime::stage::global_shuffle([Path::new("s3://data/train/part-2.tfrecord.gz")], 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("s3://data/train/part-2.tfrecord.gz.idx") && err.contains("sluice index"), "{err}");
}

#[test]
fn a_parallel_interleave_and_text_lines_read_a_bucket_as_local_files() {
    use sluice_runtime::stage::{Dataset, OpenTfRecord, files};
    use sluice_runtime::text::{TextOptions, lines_file};
    let Some(f) = fixture() else { return };
    let local = format!("{}/part-*.tfrecord*", f.local.path().display());
    for bucket in ["data", "faulty-data"] {
        let remote = format!("s3://{bucket}/train/part-*.tfrecord*");
        let open = || OpenTfRecord::new(ReaderOptions::default());
        let want = drain(&files(&local).unwrap().interleave(open(), 3, 4).num_parallel(2));
        let got = drain(&files(&remote).unwrap().interleave(open(), 3, 4).num_parallel(2));
        assert_eq!(want.len(), 1800);
        assert!(got == want, "{bucket}: the interleave of objects differs from the local one");
    }
    let lines = drain(&lines_file("s3://data/train/notes.txt", TextOptions::default()));
    assert_eq!(lines, [b"alpha".to_vec(), b"beta".to_vec(), b"gamma".to_vec()]);
}
