//! `gs://` uploads for real. object_store writes a `gs://` object through GCS's XML API: a
//! `PUT` of the object, or a multipart upload (`POST …?uploads`, `PUT …?partNumber=&
//! uploadId=`, `POST …?uploadId=` with the parts' list), which Google documents as
//! compatible with Amazon S3's multipart uploads. fake-gcs-server, the GCS emulator of
//! `storage_gcs_az.rs`, implements only the JSON API's uploads, so the uploads are checked
//! here against a server that speaks that XML API: s3s-fs, the S3 server of `storage.rs`
//! (installed by `scripts/setup-s3`), started without credentials, since
//! `GOOGLE_SKIP_SIGNATURE=true` sends requests unsigned, with `GOOGLE_BASE_URL` pointing
//! at it (its own test binary: the storage layer reads the environment once per bucket).
//! The objects are read back from the directory s3s-fs serves. What this cannot show is a
//! difference between GCS and S3 in that API (GCS's own headers, its error bodies).
//! Skips with a message without s3s-fs unless `SLUICE_REQUIRE_S3=1`.

#[path = "support/s3.rs"]
mod s3;

use std::io::Write;
use std::path::Path;

use s3::{FaultProxy, S3Server};
use sluice_runtime::storage::ObjectWriter;

/// A service-account key that needs no token server (`disable_oauth`).
const FAKE_KEY: &str = r#"{"private_key": "private_key", "private_key_id": "id", "client_email": "sluice@test", "disable_oauth": true}"#;

#[test]
fn a_gs_upload_through_the_xml_api_appears_whole_on_finish_and_never_when_dropped() {
    let Some(server) = S3Server::start_anonymous() else { return };
    // The GCS client sends a bearer token (empty, below), which the S3 server refuses.
    let proxy = FaultProxy::stripping(server.port, &["authorization"]);
    let env = [
        ("GOOGLE_BASE_URL", format!("http://127.0.0.1:{}", proxy.port)),
        ("GOOGLE_SKIP_SIGNATURE", "true".to_string()),
        // object_store's PUTs ask for a token even with `skip_signature` (only its
        // multipart initiate and complete honour it): a key with `disable_oauth`, as
        // object_store's own emulator tests use, makes the token a static empty one.
        ("GOOGLE_SERVICE_ACCOUNT_KEY", FAKE_KEY.to_string()),
        ("GOOGLE_ALLOW_HTTP", "true".to_string()),
        ("SLUICE_STORAGE_RETRIES", "0".to_string()),
    ];
    for (k, v) in env {
        // SAFETY: the only test of this binary; set before any request reads them.
        unsafe { std::env::set_var(k, v) };
    }
    server.bucket("out");
    let served = |key: &str| server.root.path().join("out").join(key);
    // Several parts (a multipart upload), and one small object.
    let big: Vec<u8> = (0..(12u32 << 20)).map(|i| (i * 7 % 251) as u8).collect();
    for (key, data) in [("shards/big.bin", &big[..]), ("small.bin", &b"one record"[..])] {
        let url = format!("gs://out/{key}");
        let mut w = ObjectWriter::create(Path::new(&url)).unwrap_or_else(|e| panic!("{url}: {e}"));
        for part in data.chunks(1 << 20) {
            w.write_all(part).unwrap();
        }
        assert!(!served(key).exists(), "{url}: nothing shows before the upload completes");
        w.finish().unwrap_or_else(|e| panic!("{url}: {e}"));
        let got = std::fs::read(served(key)).unwrap_or_else(|e| panic!("{url}: not on the server: {e}"));
        assert!(got == data, "{url}: the object is what was written ({} of {} bytes)", got.len(), data.len());
    }
    // The big object went up in parts, through GCS's XML multipart requests.
    let seen = |what: &str| proxy.counts.requests.lock().unwrap().iter().filter(|r| r.contains(what)).count();
    assert_eq!(seen("?uploads"), 2, "one multipart upload started per object");
    assert!(seen("partNumber=") >= 3, "the 12 MiB object in several parts and the small one in one");
    // Dropped before `finish`: the upload is abandoned and no object appears.
    let mut w = ObjectWriter::create(Path::new("gs://out/dropped.bin")).unwrap();
    w.write_all(&big).unwrap();
    drop(w);
    assert!(!served("dropped.bin").exists(), "an unfinished upload leaves no object");
}
