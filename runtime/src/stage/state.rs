//! [`PipelineState`]: where a pipeline is, saved so that a new process can go on from
//! there exactly: the pipeline's name, a fingerprint of what it reads and how it was built
//! (its plan, its parameters, its files and their lengths), the epoch, and the number of
//! elements of that epoch's pass already consumed. Positions and seeds only, never
//! buffered data: the state is the same few dozen bytes whatever the shuffle buffer or
//! prefetch depth. A pass restarts from it with [`Dataset::stream_from`]
//! (`Dataset::iter_from`), which fast-forwards without decoding what it skips.
//!
//! The file format (`to_bytes`): `SLST`, a version byte, then the name's length (u16 LE)
//! and bytes, the fingerprint, epoch and position (u64 LE each), then a masked CRC32C of
//! everything before it. Anything else, a bad checksum or a state of another pipeline or
//! fingerprint is an error that says which.

use std::path::Path;

use super::{Dataset, files};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"SLST";
const VERSION: u8 = 1;

/// Where a pipeline is: see the [module doc](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineState {
    /// The pipeline's name.
    pub pipeline: String,
    /// What it was built from ([`fingerprint`]): another value is another pipeline.
    pub fingerprint: u64,
    /// The epoch of the pass it is in.
    pub epoch: u64,
    /// Elements of that pass already consumed.
    pub position: u64,
}

impl PipelineState {
    /// The state's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let name = self.pipeline.as_bytes();
        let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
        let mut b = Vec::with_capacity(4 + 1 + 2 + name.len() + 24 + 4);
        b.extend_from_slice(MAGIC);
        b.push(VERSION);
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&name[..usize::from(len)]);
        for v in [self.fingerprint, self.epoch, self.position] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let crc = crate::tfrecord::mask_crc(crc32c::crc32c(&b));
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// A state from its bytes; `what` names them in errors (a path, say).
    pub fn from_bytes(b: &[u8], what: &str) -> Result<PipelineState> {
        let bad = |why: &str| Error::Invalid(format!("{what}: not a pipeline state: {why}"));
        if b.len() < 4 + 1 + 2 + 24 + 4 || &b[..4] != MAGIC {
            return Err(bad("no SLST header"));
        }
        if b[4] != VERSION {
            return Err(bad(&format!("version {} (this sluice reads version {VERSION})", b[4])));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        let crc = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if crate::tfrecord::mask_crc(crc32c::crc32c(body)) != crc {
            return Err(bad("its checksum does not match (damaged)"));
        }
        let len = usize::from(u16::from_le_bytes([b[5], b[6]]));
        if body.len() != 7 + len + 24 {
            return Err(bad("its length does not match its name's"));
        }
        let pipeline =
            String::from_utf8(body[7..7 + len].to_vec()).map_err(|_| bad("a name that is not UTF-8"))?;
        let u =
            |at: usize| u64::from_le_bytes(body[7 + len + at..7 + len + at + 8].try_into().expect("8 bytes"));
        Ok(PipelineState { pipeline, fingerprint: u(0), epoch: u(8), position: u(16) })
    }

    /// Writes the state to `path` (a temporary file renamed into place: a crash leaves the
    /// old state or the new one, never half of one).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        let tmp = path.with_extension("state-tmp");
        std::fs::write(&tmp, self.to_bytes()).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads a state written by [`save`](Self::save).
    pub fn load(path: impl AsRef<Path>) -> Result<PipelineState> {
        let path = path.as_ref();
        let b = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        PipelineState::from_bytes(&b, &path.display().to_string())
    }

    /// Checks that the state is of pipeline `name` as built now (`fingerprint`): a state
    /// of another pipeline, or of this one over other files or parameters, is an error.
    pub fn check(&self, name: &str, fingerprint: u64) -> Result<()> {
        if self.pipeline != name {
            return Err(Error::Invalid(format!(
                "the saved state is of pipeline `{}`, not `{name}`",
                self.pipeline
            )));
        }
        if self.fingerprint != fingerprint {
            return Err(Error::Invalid(format!(
                "the saved state of `{name}` does not match it now: its parameters, its files \
                 (their names or lengths) or its plan changed since (fingerprint {:016x}, now {fingerprint:016x})",
                self.fingerprint
            )));
        }
        Ok(())
    }

    /// Pulls the rest of this state's pass of `dataset`: its epoch, after its position.
    pub fn resume<D: Dataset>(&self, dataset: &D, ctx: &super::Ctx) -> Result<super::Stream<D::Iter>> {
        dataset.stream_from(&ctx.with_epoch(self.epoch), self.position)
    }
}

/// FNV-1a, 64 bits: a hash that is the same on every machine and Rust version.
#[derive(Debug, Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Lengths delimit fields: ("ab", "c") and ("a", "bc") differ.
        for &x in &(b.len() as u64).to_le_bytes() {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The fingerprint of a pipeline: its name, its plan (`plan`: the compiler's text of it),
/// its parameters (`params`: their `Debug` text) and the files its `globs` match now,
/// names and lengths (a file added, removed, grown or cut changes it).
pub fn fingerprint(name: &str, plan: &str, params: &str, globs: &[&str]) -> Result<u64> {
    let mut h = Fnv::new();
    for part in [name, plan, params] {
        h.bytes(part.as_bytes());
    }
    for glob in globs {
        h.bytes(glob.as_bytes());
        for path in files(glob)?.paths() {
            let len =
                std::fs::metadata(path).map_err(|source| Error::Io { path: path.clone(), source })?.len();
            h.bytes(path.to_string_lossy().as_bytes());
            h.bytes(&len.to_le_bytes());
        }
    }
    Ok(h.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> PipelineState {
        PipelineState { pipeline: "train".into(), fingerprint: 0xfeed, epoch: 3, position: 12_345 }
    }

    #[test]
    fn round_trips_and_stays_small() {
        let b = state().to_bytes();
        assert_eq!(b.len(), 4 + 1 + 2 + 5 + 24 + 4);
        assert_eq!(PipelineState::from_bytes(&b, "s").unwrap(), state());
    }

    #[test]
    fn every_damage_is_an_error() {
        let b = state().to_bytes();
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut d = b.clone();
                d[i] ^= 1 << bit;
                assert!(PipelineState::from_bytes(&d, "s").is_err(), "byte {i} bit {bit}");
            }
        }
        for n in 0..b.len() {
            assert!(PipelineState::from_bytes(&b[..n], "s").is_err(), "cut to {n}");
        }
    }

    #[test]
    fn another_pipeline_or_fingerprint_is_refused() {
        let s = state();
        assert!(s.check("train", 0xfeed).is_ok());
        assert!(s.check("eval", 0xfeed).unwrap_err().to_string().contains("of pipeline `train`, not `eval`"));
        assert!(s.check("train", 1).unwrap_err().to_string().contains("does not match"));
    }
}
