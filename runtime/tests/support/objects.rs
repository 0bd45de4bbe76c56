//! What the object-store tests share (`storage.rs` for `s3://`, `storage_gcs_az.rs` for
//! `gs://` and `az://`; `#[path]`-included): the local shards a bucket is filled from and
//! compared with, and the readers that turn a file, a pattern or a dataset into bytes to
//! compare.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sluice_runtime::tfrecord::{self, Compression, ReaderOptions};

/// Three shards of records of varied sizes (one GZIP), spanning many 64 KiB chunks, and a
/// text file `notes.txt` ("alpha", "beta", "gamma").
pub fn write_shards(dir: &Path) {
    for k in 0..3u32 {
        let compression = if k == 2 { Compression::Gzip } else { Compression::None };
        let name = format!("part-{k}.tfrecord{}", compression.extension());
        let mut w = tfrecord::create(dir.join(name), compression).unwrap();
        for i in 0..600u32 {
            let len = (i as usize * 7919 + k as usize * 131) % 3000;
            let data: Vec<u8> = (0..len).map(|j| (j as u32 ^ i ^ k) as u8).collect();
            w.write_record(&data).unwrap();
        }
        w.finish().unwrap();
    }
    std::fs::write(dir.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
}

/// Every record of a TFRecord file or object.
pub fn records(path: &Path) -> Vec<Vec<u8>> {
    let mut r = tfrecord::open(path, &ReaderOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_owned().unwrap() {
        out.push(rec);
    }
    out
}

/// The files or objects `pattern` matches.
pub fn urls(pattern: &str) -> Vec<PathBuf> {
    sluice_runtime::stage::files(pattern).unwrap().paths().to_vec()
}

/// Every element of one pass of `ds`, as bytes.
pub fn drain<D>(ds: &D) -> Vec<Vec<u8>>
where
    D: sluice_runtime::stage::Dataset<Item = sluice_runtime::stage::Record>,
{
    use sluice_runtime::stage::{Ctx, DataIter, RuntimeOptions};
    let mut it = ds.iter(&Ctx::new(&RuntimeOptions::default())).unwrap();
    let mut out = Vec::new();
    while let Some(r) = it.next().unwrap() {
        out.push(r.as_bytes().to_vec());
    }
    out
}
