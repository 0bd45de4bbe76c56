//! `--format webdataset`: each element one sample of a tar shard, as the `webdataset`
//! package's `TarWriter` writes one: a member `KEY.FIELD` per field, in the element's
//! order, so that `webdataset.WebDataset` (and `webdataset(files)`) group them back.
//!
//! - The key is the element's `__key__` field (a `str`; a `webdataset(files)` source
//!   passes it on), else its number in the pass, zero-padded to 9 digits (`000000042`).
//!   A key holding a `.` in its last path segment would split the sample: an error.
//! - `bytes` are the member's bytes as they are; `str` its UTF-8; a number its decimal
//!   text (`cls` holding `3`, as `TarWriter` writes an integer; `bool` as `1`/`0`;
//!   floats in the shortest form that reads back as the same value).
//! - A list or tensor is a NumPy `.npy` file (`KEY.FIELD.npy`: `webdataset` decodes it
//!   into an array of the dtype and shape), little-endian.
//!
//! Members are regular files of mode 0644, owner 0, time 0: the same elements give the
//! same bytes. A gzip'ed shard is one gzip stream over the tar.

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;

use crate::abi::export::{Features, FieldValue, Shape};
use crate::error::{Error, Result};
use crate::storage::PartialFile;

/// One tar shard being written.
pub struct TarShard {
    tar: Option<tar::Builder<Out>>,
    path: PathBuf,
}

impl std::fmt::Debug for TarShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TarShard").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Where the tar goes: the file, or a gzip stream into it.
enum Out {
    Plain(Box<PartialFile>),
    Gzip(Box<GzEncoder<PartialFile>>),
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Out::Plain(f) => f.write(buf),
            Out::Gzip(g) => g.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Plain(f) => f.flush(),
            Out::Gzip(g) => g.flush(),
        }
    }
}

impl TarShard {
    /// Starts the shard `path` (`PATH.partial` until finished).
    pub fn create(path: &Path, gzip: bool) -> Result<TarShard> {
        let file = PartialFile::create(path).map_err(|e| Error::io(path, e))?;
        let out = if gzip {
            Out::Gzip(Box::new(GzEncoder::new(file, flate2::Compression::default())))
        } else {
            Out::Plain(Box::new(file))
        };
        let mut tar = tar::Builder::new(out);
        tar.mode(tar::HeaderMode::Deterministic);
        Ok(TarShard { tar: Some(tar), path: path.to_path_buf() })
    }

    /// Writes the sample of element `index`'s `fields`.
    pub fn write(&mut self, fields: Features, index: u64) -> Result<()> {
        let Some(tar) = &mut self.tar else { return Ok(()) };
        let fail = |message: String| Error::Table { path: self.path.clone(), message };
        let key = match fields.fields.iter().find(|(n, _)| n == "__key__") {
            Some((_, FieldValue::Text(k))) => k.clone(),
            Some((_, v)) => {
                return Err(fail(format!("record {index}: `__key__` is {}, not str", v.type_name())));
            }
            None => format!("{index:09}"),
        };
        let last = key.rsplit('/').next().unwrap_or("");
        if last.is_empty() || last.contains('.') || key.starts_with('/') {
            return Err(fail(format!(
                "record {index}: key `{}` cannot name a sample (its last segment must be non-empty and hold no `.`)",
                key.escape_debug()
            )));
        }
        for (name, value) in &fields.fields {
            if name == "__key__" {
                continue;
            }
            let (member, data) = match value {
                FieldValue::Bytes(b) => (format!("{key}.{name}"), b.clone()),
                FieldValue::Text(t) => (format!("{key}.{name}"), t.as_bytes().to_vec()),
                FieldValue::Nums(n, Shape::Scalar) => (format!("{key}.{name}"), n.text(0).into_bytes()),
                FieldValue::Nums(n, Shape::List) => {
                    (format!("{key}.{name}.npy"), crate::npy::write(n, &[n.len()]))
                }
                FieldValue::Nums(n, Shape::Tensor(dims)) => {
                    (format!("{key}.{name}.npy"), crate::npy::write(n, dims))
                }
            };
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, &member, data.as_slice()).map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Completes the tar (its two zero blocks; the gzip trailer) and renames the shard into
    /// place.
    pub fn finish(mut self) -> Result<()> {
        let Some(tar) = self.tar.take() else { return Ok(()) };
        let io = |e| Error::io(&self.path, e);
        let file = match tar.into_inner().map_err(io)? {
            Out::Plain(f) => *f,
            Out::Gzip(g) => g.finish().map_err(io)?,
        };
        file.finish().map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::export;
    use crate::column::Tensor;

    fn members(path: &Path) -> Vec<(String, Vec<u8>)> {
        let mut a = tar::Archive::new(std::fs::File::open(path).unwrap());
        a.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let name = e.path().unwrap().to_string_lossy().into_owned();
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut data).unwrap();
                (name, data)
            })
            .collect()
    }

    #[test]
    fn samples_are_members_by_key_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tar");
        let mut w = TarShard::create(&path, false).unwrap();
        let mut f = Features::new();
        export::bytes(&mut f, "jpg", b"\xff\xd8");
        export::scalar(&mut f, "cls", &3i64);
        export::text(&mut f, "txt", "héllo");
        export::tensor(&mut f, "x", &Tensor::new(vec![2], vec![0.5f32, 1.5]).unwrap());
        w.write(f, 42).unwrap();
        let mut f = Features::new();
        export::text(&mut f, "__key__", "train/a1");
        export::scalar(&mut f, "flag", &true);
        w.write(f, 43).unwrap();
        assert!(!path.exists(), "the shard appears only when finished");
        w.finish().unwrap();
        let m = members(&path);
        let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["000000042.jpg", "000000042.cls", "000000042.txt", "000000042.x.npy", "train/a1.flag"]
        );
        assert_eq!(m[1].1, b"3");
        assert_eq!(m[2].1, "héllo".as_bytes());
        assert_eq!(m[4].1, b"1");
    }

    #[test]
    fn a_key_with_a_dot_is_an_error_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tar.gz");
        let mut w = TarShard::create(&path, true).unwrap();
        let mut f = Features::new();
        export::text(&mut f, "__key__", "a.b");
        let e = w.write(f, 5).unwrap_err().to_string();
        assert!(e.contains("s.tar.gz: record 5: key `a.b` cannot name a sample"), "{e}");
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the partial file is gone");
    }
}
