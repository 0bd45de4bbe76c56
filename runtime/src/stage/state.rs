//! [`PipelineState`]: where a pipeline is, saved so that a new process can go on from
//! there exactly: the pipeline's name, a fingerprint of what it reads and how it was built
//! (its plan, its parameters, its files and their lengths), the epoch, the number of
//! elements of that epoch's pass already consumed, and the input position of each stage
//! whose input count is not a function of its output count (a `filter`: [`StagePosition`],
//! as tf.data checkpoints record each iterator's position). Positions and seeds only, never
//! buffered data: the state is a few dozen bytes plus 16 per such stage, whatever the
//! shuffle buffer, the prefetch depth or the dataset's length. A pass restarts from it with
//! [`PipelineState::resume`] ([`Dataset::stream_from`] in a context that carries the stage
//! positions), which fast-forwards without decoding what it skips: a filter goes straight
//! to its recorded input position instead of testing every element before it again.
//!
//! The file format (`to_bytes`), version 2: `SLST`, a version byte, then the name's length
//! (u16 LE) and bytes, the fingerprint, epoch and position (u64 LE each), the number of
//! stage positions (u16 LE) and each one's output and input counts (u64 LE each), then a
//! masked CRC32C of everything before it. Version 1 states (no stage positions, written
//! before them) are still read: they resume exactly, recomputing each filter's position.
//! Anything else, a bad checksum or a state of another pipeline or fingerprint is an
//! error that says which.

use std::path::Path;

use super::{Dataset, files};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"SLST";
const VERSION: u8 = 2;
/// The version before stage positions: still read.
const VERSION_1: u8 = 1;

/// Where one stage of a pass was when the state was saved: it had delivered `output`
/// elements after consuming `input` elements of its input. Recorded, top-down, for each
/// `filter` on the pipeline's chain from the consumer down to the first stage that does
/// not map output positions to input positions (see [`Dataset::positions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagePosition {
    /// Elements the stage had delivered.
    pub output: u64,
    /// Elements of its input it had consumed to deliver them.
    pub input: u64,
}

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
    /// Each filter's input position at `position`, top-down ([`with_stage_positions`](Self::with_stage_positions));
    /// empty when none was recorded (the resume then recomputes them).
    pub stages: Vec<StagePosition>,
}

impl PipelineState {
    /// The state's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let name = self.pipeline.as_bytes();
        let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
        let stages = &self.stages[..self.stages.len().min(usize::from(u16::MAX))];
        let mut b = Vec::with_capacity(4 + 1 + 2 + name.len() + 24 + 2 + 16 * stages.len() + 4);
        b.extend_from_slice(MAGIC);
        b.push(VERSION);
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&name[..usize::from(len)]);
        for v in [self.fingerprint, self.epoch, self.position] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(stages.len() as u16).to_le_bytes());
        for s in stages {
            b.extend_from_slice(&s.output.to_le_bytes());
            b.extend_from_slice(&s.input.to_le_bytes());
        }
        let crc = crate::tfrecord::mask_crc(crc32c::crc32c(&b));
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// A state from its bytes (version 2, or version 1 without stage positions); `what`
    /// names them in errors (a path, say).
    pub fn from_bytes(b: &[u8], what: &str) -> Result<PipelineState> {
        let bad = |why: &str| Error::Invalid(format!("{what}: not a pipeline state: {why}"));
        if b.len() < 4 + 1 + 2 + 24 + 4 || &b[..4] != MAGIC {
            return Err(bad("no SLST header"));
        }
        if b[4] != VERSION && b[4] != VERSION_1 {
            return Err(bad(&format!(
                "version {} (this sluice reads versions {VERSION_1} and {VERSION})",
                b[4]
            )));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        let crc = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if crate::tfrecord::mask_crc(crc32c::crc32c(body)) != crc {
            return Err(bad("its checksum does not match (damaged)"));
        }
        let len = usize::from(u16::from_le_bytes([b[5], b[6]]));
        let fixed = 7 + len + 24;
        let n = if b[4] == VERSION_1 {
            0
        } else if body.len() >= fixed + 2 {
            usize::from(u16::from_le_bytes([body[fixed], body[fixed + 1]]))
        } else {
            return Err(bad("its length does not match its name's"));
        };
        let want = if b[4] == VERSION_1 { fixed } else { fixed + 2 + 16 * n };
        if body.len() != want {
            return Err(bad("its length does not match its name's and its stage positions'"));
        }
        let pipeline =
            String::from_utf8(body[7..7 + len].to_vec()).map_err(|_| bad("a name that is not UTF-8"))?;
        let u = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
        let stages = (0..n)
            .map(|i| StagePosition { output: u(fixed + 2 + 16 * i), input: u(fixed + 2 + 16 * i + 8) })
            .collect();
        Ok(PipelineState {
            pipeline,
            fingerprint: u(7 + len),
            epoch: u(7 + len + 8),
            position: u(7 + len + 16),
            stages,
        })
    }

    /// The state with the input positions of `dataset`'s filters at this state's epoch and
    /// position, taken from the pass of that epoch now running (or last run) in this
    /// process ([`Dataset::positions`]): a resume then seeks past them instead of running
    /// them again. Call it while that pass is alive, right after consuming `position`
    /// elements. A filter whose position is no longer known (it ran more than 65 536
    /// elements ahead of the consumer) ends the list; the resume recomputes it and what
    /// is below it, exactly but slower.
    pub fn with_stage_positions<D: Dataset>(mut self, dataset: &D) -> Self {
        self.stages.clear();
        dataset.positions(self.epoch, self.position, &mut self.stages);
        self
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
    /// The filters recorded in [`stages`](Self::stages) start at their input positions.
    pub fn resume<D: Dataset>(&self, dataset: &D, ctx: &super::Ctx) -> Result<super::Stream<D::Iter>> {
        dataset.stream_from(&self.ctx(ctx), self.position)
    }

    /// `ctx` at this state's epoch, carrying its stage positions for the pass that
    /// [`Dataset::stream_from`] starts at [`position`](Self::position) in it.
    pub fn ctx(&self, ctx: &super::Ctx) -> super::Ctx {
        ctx.with_epoch(self.epoch).resuming(&self.stages)
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
        PipelineState {
            pipeline: "train".into(),
            fingerprint: 0xfeed,
            epoch: 3,
            position: 12_345,
            stages: vec![StagePosition { output: 98_760, input: 110_003 }],
        }
    }

    #[test]
    fn round_trips_and_stays_small() {
        let b = state().to_bytes();
        assert_eq!(b.len(), 4 + 1 + 2 + 5 + 24 + 2 + 16 + 4);
        assert_eq!(PipelineState::from_bytes(&b, "s").unwrap(), state());
    }

    #[test]
    fn a_version_1_state_is_still_read_and_another_version_is_named() {
        // Version 1 (written before stage positions): no count, no positions.
        let mut b = b"SLST\x01".to_vec();
        b.extend_from_slice(&5u16.to_le_bytes());
        b.extend_from_slice(b"train");
        for v in [0xfeedu64, 3, 12_345] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let crc = crate::tfrecord::mask_crc(crc32c::crc32c(&b));
        b.extend_from_slice(&crc.to_le_bytes());
        let old = PipelineState::from_bytes(&b, "old.state").unwrap();
        assert_eq!(old, PipelineState { stages: Vec::new(), ..state() });
        let mut v3 = state().to_bytes();
        v3[4] = 3;
        let e = PipelineState::from_bytes(&v3, "new.state").unwrap_err().to_string();
        assert!(
            e.contains("new.state") && e.contains("version 3 (this sluice reads versions 1 and 2)"),
            "{e}"
        );
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
