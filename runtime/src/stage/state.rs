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
//! A state also names the shard it was saved on (its [`ShardOf`]: how many shards, which
//! one, how they are dealt) with the count that shard had delivered, so that the states of
//! every rank of a run can be redealt to another number of ranks
//! ([`PipelineState::reshard`], `reshard.rs`); a resharded state carries the redeal
//! ([`Layer`]s) its first epoch applies.
//!
//! The file format (`to_bytes`), version 3: `SLST`, a version byte, then the name's length
//! (u16 LE) and bytes, the fingerprint, epoch and position (u64 LE each), the number of
//! stage positions (u16 LE) and each one's kind (a byte: 0 a filter's, 1 a shard's), output
//! and input counts (u64 LE each) and, for a shard's, the number of shards and its index
//! (u64 LE each) and its deal (a byte), then the number of redeal layers (u16 LE) and each
//! one's deal (a byte), number of ranks (u32 LE) and their counts (u64 LE each), then a
//! masked CRC32C of everything before it. Version 2 states (a filter's positions only, no
//! redeal) and version 1 states (no stage positions: they resume exactly, recomputing each
//! filter's position) are still read. Anything else, a bad checksum or a state of another
//! pipeline or fingerprint is an error that says which.

use std::path::Path;

use super::{Dataset, files};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"SLST";
/// The magic of a set of states, one per rank ([`PipelineState::set_to_bytes`]).
const SET_MAGIC: &[u8; 4] = b"SLSS";
const VERSION: u8 = 3;
/// The versions before: stage positions of filters only (2), none (1). Still read.
const VERSION_2: u8 = 2;
const VERSION_1: u8 = 1;

/// What [`Shard`](super::Shard) does with the last, partial round of a pass: the `N mod num_shards`
/// elements left when the `N` elements of the pass are dealt out in rounds of
/// `num_shards`, one to each worker in turn (worker `index` gets positions `index`,
/// `index + num_shards`, …).
///
/// The length `N` is not known in advance: every worker reads the whole input and
/// decides as the pass streams by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Remainder {
    /// Deal the partial round out too: across all workers each element once, and the
    /// counts differ by at most one (`ceil(N / n)` or `floor(N / n)`).
    #[default]
    Keep,
    /// Drop the partial round: every worker gets exactly `floor(N / n)` elements, and
    /// together the first `n · floor(N / n)` of the pass, each once. A worker's element
    /// of a round is delivered only once the round is complete (it holds back one
    /// element).
    Drop,
    /// Pad the partial round: every worker gets exactly `ceil(N / n)` elements. A worker
    /// whose position `p` in the last round is past the end (`p >= N`) gets, when the
    /// input ends, the element at position `p mod N` (`p - N` when `N >= n`): the
    /// padding repeats the first elements of the pass, as PyTorch's `DistributedSampler`
    /// does. That position is always below `index`, so worker `index` keeps the first
    /// `min(index, N)` elements of the pass (never its own: moved, not copied).
    Pad,
}

impl std::fmt::Display for Remainder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Remainder::Keep => "keep",
            Remainder::Drop => "drop",
            Remainder::Pad => "pad",
        })
    }
}

/// How a shard stage deals its input to `n` workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deal {
    /// In rounds: worker `i` gets elements `i`, `i + n`, `i + 2n`, … (`shard`), the last
    /// partial round kept, dropped or padded.
    Rounds(Remainder),
    /// In contiguous blocks of the pass (a sharded `shuffle(global)`'s permutation);
    /// `drop`: the last `len mod n` positions go to none, else the first `len mod n`
    /// blocks are one longer.
    Blocks {
        /// Whether the remainder goes to none.
        drop: bool,
    },
}

impl Deal {
    /// Its byte in a saved state.
    pub(crate) fn byte(self) -> u8 {
        match self {
            Deal::Rounds(Remainder::Keep) => 0,
            Deal::Rounds(Remainder::Drop) => 1,
            Deal::Rounds(Remainder::Pad) => 2,
            Deal::Blocks { drop: false } => 3,
            Deal::Blocks { drop: true } => 4,
        }
    }

    /// The deal of a byte of a saved state.
    pub(crate) fn from_byte(b: u8) -> Option<Deal> {
        Some(match b {
            0 => Deal::Rounds(Remainder::Keep),
            1 => Deal::Rounds(Remainder::Drop),
            2 => Deal::Rounds(Remainder::Pad),
            3 => Deal::Blocks { drop: false },
            4 => Deal::Blocks { drop: true },
            _ => return None,
        })
    }
}

impl std::fmt::Display for Deal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Deal::Rounds(r) => write!(f, "rounds, remainder {r}"),
            Deal::Blocks { drop: true } => f.write_str("blocks, remainder dropped"),
            Deal::Blocks { drop: false } => f.write_str("blocks"),
        }
    }
}

/// Which shard a stage position is of: worker `index` of `shards`, dealt as `deal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardOf {
    /// The number of shards.
    pub shards: u64,
    /// This worker's.
    pub index: u64,
    /// How the stage deals.
    pub deal: Deal,
}

/// What the ranks of one topology had taken of the stream dealt to them when their states
/// were resharded: rank `i` had taken `taken[i]` elements (`taken.len()` ranks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// How they were dealt.
    pub deal: Deal,
    /// Each rank's count.
    pub taken: Vec<u64>,
}

impl Layer {
    /// The number of ranks.
    pub fn ranks(&self) -> u64 {
        self.taken.len() as u64
    }
}

/// Where one stage of a pass was when the state was saved: it had delivered `output`
/// elements after consuming `input` elements of its input. Recorded, top-down, for each
/// `filter` and `shard` on the pipeline's chain from the consumer down to the first stage
/// that does not map output positions to input positions (see [`Dataset::positions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagePosition {
    /// Elements the stage had delivered.
    pub output: u64,
    /// Elements of its input it had consumed to deliver them.
    pub input: u64,
    /// A shard's position: which shard (`None`: a filter's).
    pub shard: Option<ShardOf>,
}

impl StagePosition {
    /// A filter's position.
    pub fn filter(output: u64, input: u64) -> StagePosition {
        StagePosition { output, input, shard: None }
    }
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
    /// Each filter's input position at `position`, top-down ([`with_stage_positions`](Self::with_stage_positions)),
    /// and the shard's count; empty when none was recorded (the resume then recomputes them).
    pub stages: Vec<StagePosition>,
    /// What the ranks before a reshard had taken of this epoch ([`reshard`](Self::reshard)):
    /// the pass of `epoch` deals only the rest. Empty for a state that was not resharded.
    pub redeal: Vec<Layer>,
}

impl PipelineState {
    /// The state's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let name = self.pipeline.as_bytes();
        let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
        let stages = &self.stages[..self.stages.len().min(usize::from(u16::MAX))];
        let mut b = Vec::with_capacity(4 + 1 + 2 + name.len() + 24 + 2 + 34 * stages.len() + 2 + 4);
        b.extend_from_slice(MAGIC);
        b.push(VERSION);
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&name[..usize::from(len)]);
        for v in [self.fingerprint, self.epoch, self.position] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(stages.len() as u16).to_le_bytes());
        for s in stages {
            b.push(u8::from(s.shard.is_some()));
            b.extend_from_slice(&s.output.to_le_bytes());
            b.extend_from_slice(&s.input.to_le_bytes());
            if let Some(of) = s.shard {
                b.extend_from_slice(&of.shards.to_le_bytes());
                b.extend_from_slice(&of.index.to_le_bytes());
                b.push(of.deal.byte());
            }
        }
        // Every layer is kept: a redeal cut short would deal taken elements again.
        b.extend_from_slice(&(self.redeal.len() as u16).to_le_bytes());
        for layer in &self.redeal {
            b.push(layer.deal.byte());
            b.extend_from_slice(&(layer.taken.len() as u32).to_le_bytes());
            for t in &layer.taken {
                b.extend_from_slice(&t.to_le_bytes());
            }
        }
        let crc = crate::tfrecord::mask_crc(crc32c::crc32c(&b));
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// A state from its bytes (version 3, 2 or 1); `what` names them in errors (a path,
    /// say).
    pub fn from_bytes(b: &[u8], what: &str) -> Result<PipelineState> {
        let bad = |why: &str| Error::Invalid(format!("{what}: not a pipeline state: {why}"));
        if b.len() < 4 + 1 + 2 + 24 + 4 || &b[..4] != MAGIC {
            return Err(bad("no SLST header"));
        }
        let version = b[4];
        if !(VERSION_1..=VERSION).contains(&version) {
            return Err(bad(&format!(
                "version {version} (this sluice reads versions {VERSION_1} to {VERSION})"
            )));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        let crc = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if crate::tfrecord::mask_crc(crc32c::crc32c(body)) != crc {
            return Err(bad("its checksum does not match (damaged)"));
        }
        let short = || bad("it ends inside a field (its lengths do not match)");
        let mut r = Cursor { b: body, at: 5 };
        let len = usize::from(r.u16().ok_or_else(short)?);
        let name = r.take(len).ok_or_else(short)?;
        let pipeline = String::from_utf8(name.to_vec()).map_err(|_| bad("a name that is not UTF-8"))?;
        let (fingerprint, epoch, position) =
            (r.u64().ok_or_else(short)?, r.u64().ok_or_else(short)?, r.u64().ok_or_else(short)?);
        let mut stages = Vec::new();
        let mut redeal = Vec::new();
        if version >= VERSION_2 {
            let n = r.u16().ok_or_else(short)?;
            for _ in 0..n {
                let kind = if version == VERSION { r.u8().ok_or_else(short)? } else { 0 };
                let (output, input) = (r.u64().ok_or_else(short)?, r.u64().ok_or_else(short)?);
                let shard = match kind {
                    0 => None,
                    1 => {
                        let (shards, index) = (r.u64().ok_or_else(short)?, r.u64().ok_or_else(short)?);
                        let deal = Deal::from_byte(r.u8().ok_or_else(short)?)
                            .ok_or_else(|| bad("an unknown deal"))?;
                        if index >= shards {
                            return Err(bad(&format!("shard {index} of {shards}")));
                        }
                        Some(ShardOf { shards, index, deal })
                    }
                    k => return Err(bad(&format!("a stage position of unknown kind {k}"))),
                };
                stages.push(StagePosition { output, input, shard });
            }
        }
        if version == VERSION {
            for _ in 0..r.u16().ok_or_else(short)? {
                let deal =
                    Deal::from_byte(r.u8().ok_or_else(short)?).ok_or_else(|| bad("an unknown deal"))?;
                let ranks = r.u32().ok_or_else(short)? as usize;
                if ranks == 0 || ranks > (body.len() - r.at) / 8 {
                    return Err(short());
                }
                let taken = (0..ranks).map(|_| r.u64().ok_or_else(short)).collect::<Result<_>>()?;
                redeal.push(Layer { deal, taken });
            }
        }
        if r.at != body.len() {
            return Err(bad("its length does not match its fields'"));
        }
        Ok(PipelineState { pipeline, fingerprint, epoch, position, stages, redeal })
    }

    /// The state with the input positions of `dataset`'s filters at this state's epoch and
    /// position, taken from the pass of that epoch now running (or last run) in this
    /// process ([`Dataset::positions`]): a resume then seeks past them instead of running
    /// them again. Call it while that pass is alive, right after consuming `position`
    /// elements. A filter whose position is no longer known (it ran more than 65 536
    /// elements ahead of the consumer) ends the list; the resume recomputes it and what
    /// is below it, exactly but slower. For a pass redealt after a reshard, the state
    /// also takes the pass's redeal ([`Dataset::redeal_of`]): resumed without it, the
    /// pass would deal again what the ranks before the reshard had taken.
    pub fn with_stage_positions<D: Dataset>(mut self, dataset: &D) -> Self {
        self.stages.clear();
        dataset.positions(self.epoch, self.position, &mut self.stages);
        self.redeal = dataset.redeal_of(self.epoch);
        self
    }

    /// The bytes of the states of every rank of a job, in rank order: `SLSS`, their count,
    /// then each state's length and [`to_bytes`](Self::to_bytes) (u32 LE). A checkpoint
    /// of a job of several ranks holds them in one file, and Python's `resume` takes them.
    pub fn set_to_bytes(states: &[PipelineState]) -> Result<Vec<u8>> {
        let too_many = |what: String| Error::Invalid(format!("a set of pipeline states: {what} over u32"));
        let count = u32::try_from(states.len()).map_err(|_| too_many(format!("{} states", states.len())))?;
        let mut b = SET_MAGIC.to_vec();
        b.extend_from_slice(&count.to_le_bytes());
        for s in states {
            let one = s.to_bytes();
            let len =
                u32::try_from(one.len()).map_err(|_| too_many(format!("a state of {} bytes", one.len())))?;
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&one);
        }
        Ok(b)
    }

    /// The states `b` holds: a set of [`set_to_bytes`](Self::set_to_bytes), or one state
    /// of [`to_bytes`](Self::to_bytes) (a set of one). `what` names them in errors; a set
    /// cut short or with bytes after its last state is refused.
    pub fn set_from_bytes(b: &[u8], what: &str) -> Result<Vec<PipelineState>> {
        let Some(mut rest) = b.strip_prefix(SET_MAGIC) else {
            return Ok(vec![PipelineState::from_bytes(b, what)?]);
        };
        let bad = |why: &str| Error::Invalid(format!("{what}: a set of pipeline states {why}"));
        let u32_at = |rest: &mut &[u8]| -> Result<usize> {
            let (n, tail) = rest.split_first_chunk::<4>().ok_or_else(|| bad("cut short"))?;
            *rest = tail;
            Ok(u32::from_le_bytes(*n) as usize)
        };
        let count = u32_at(&mut rest)?;
        let mut states = Vec::with_capacity(count.min(1 << 16));
        for k in 0..count {
            let len = u32_at(&mut rest)?;
            let (one, tail) = rest.split_at_checked(len).ok_or_else(|| bad("cut short"))?;
            states.push(PipelineState::from_bytes(one, &format!("{what}, state {k} of {count}"))?);
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(bad("with bytes after its last state"));
        }
        Ok(states)
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
        ctx.with_epoch(self.epoch).resuming(&self.stages, &self.redeal)
    }
}

/// Little-endian fields read in turn; `None` past the end.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
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
            stages: vec![
                StagePosition::filter(98_760, 110_003),
                StagePosition {
                    output: 33,
                    input: 100,
                    shard: Some(ShardOf { shards: 3, index: 1, deal: Deal::Rounds(Remainder::Drop) }),
                },
            ],
            redeal: vec![Layer { deal: Deal::Blocks { drop: false }, taken: vec![7, 9] }],
        }
    }

    #[test]
    fn round_trips_and_stays_small() {
        let b = state().to_bytes();
        assert_eq!(b.len(), 4 + 1 + 2 + 5 + 24 + 2 + 17 + (17 + 17) + 2 + (1 + 4 + 16) + 4);
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
        assert_eq!(old, PipelineState { stages: Vec::new(), redeal: Vec::new(), ..state() });
        // Version 2: filter positions (output, input), no kinds and no redeal.
        let mut b = b"SLST\x02".to_vec();
        b.extend_from_slice(&5u16.to_le_bytes());
        b.extend_from_slice(b"train");
        for v in [0xfeedu64, 3, 12_345] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1u16.to_le_bytes());
        for v in [98_760u64, 110_003] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let crc = crate::tfrecord::mask_crc(crc32c::crc32c(&b));
        b.extend_from_slice(&crc.to_le_bytes());
        let v2 = PipelineState::from_bytes(&b, "v2.state").unwrap();
        assert_eq!(
            v2,
            PipelineState {
                stages: vec![StagePosition::filter(98_760, 110_003)],
                redeal: Vec::new(),
                ..state()
            }
        );
        let mut v4 = state().to_bytes();
        v4[4] = 4;
        let e = PipelineState::from_bytes(&v4, "new.state").unwrap_err().to_string();
        assert!(
            e.contains("new.state") && e.contains("version 4 (this sluice reads versions 1 to 3)"),
            "{e}"
        );
    }

    /// `b` with its checksum made right again (a well-formed state with bad fields).
    fn resealed(mut b: Vec<u8>) -> Vec<u8> {
        let n = b.len() - 4;
        let crc = crate::tfrecord::mask_crc(crc32c::crc32c(&b[..n]));
        b[n..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn a_checksummed_state_with_bad_fields_says_which() {
        let b = state().to_bytes();
        // The second stage position (the shard's): its kind byte, then its fields.
        let shard_at = 4 + 1 + 2 + 5 + 24 + 2 + 17;
        let why = |b: Vec<u8>| PipelineState::from_bytes(&resealed(b), "s").unwrap_err().to_string();
        let mut kind = b.clone();
        kind[shard_at] = 7;
        assert!(why(kind).contains("a stage position of unknown kind 7"));
        let mut index = b.clone();
        index[shard_at + 25..shard_at + 33].copy_from_slice(&9u64.to_le_bytes());
        assert!(why(index).contains("shard 9 of 3"));
        let mut deal = b.clone();
        deal[shard_at + 33] = 5;
        assert!(why(deal).contains("an unknown deal"));
        let mut ranks = b.clone();
        let layer_at = shard_at + 34 + 2;
        ranks[layer_at + 1..layer_at + 5].copy_from_slice(&1000u32.to_le_bytes());
        assert!(why(ranks).contains("it ends inside a field"));
        let mut longer = b.clone();
        longer.insert(b.len() - 4, 0);
        assert!(why(longer).contains("its length does not match its fields'"));
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

    #[test]
    fn a_set_of_states_is_read_whole_or_refused() {
        let (a, mut b) = (state(), state());
        b.position = 7;
        assert_eq!(PipelineState::set_from_bytes(&a.to_bytes(), "x").unwrap(), std::slice::from_ref(&a));
        let set = PipelineState::set_to_bytes(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(PipelineState::set_from_bytes(&set, "x").unwrap(), [a, b]);
        let e = PipelineState::set_from_bytes(&set[..set.len() - 1], "ckpt.state").unwrap_err().to_string();
        assert!(e.contains("ckpt.state: a set of pipeline states cut short"), "{e}");
        let e = PipelineState::set_from_bytes(&set[..10], "x").unwrap_err().to_string();
        assert!(e.contains("cut short"), "{e}");
        let mut longer = set.clone();
        longer.push(0);
        let e = PipelineState::set_from_bytes(&longer, "x").unwrap_err().to_string();
        assert!(e.contains("bytes after its last state"), "{e}");
        // A damaged state inside is named by its place in the set.
        let mut damaged = set.clone();
        let last = damaged.len() - 10;
        damaged[last] ^= 1;
        let e = PipelineState::set_from_bytes(&damaged, "ckpt.state").unwrap_err().to_string();
        assert!(e.contains("ckpt.state, state 1 of 2"), "{e}");
        assert_eq!(
            PipelineState::set_from_bytes(&PipelineState::set_to_bytes(&[]).unwrap(), "x").unwrap(),
            []
        );
    }
}
