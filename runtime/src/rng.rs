//! A counter-based random generator: Philox4x32-10 (Salmon et al., "Parallel random
//! numbers: as easy as 1, 2, 3", SC'11).
//!
//! Every random draw in Sluice is a pure function of (seed, stream, position): a stream
//! is named by what it randomises (a dataset kind and record id for `sluice gen`; later a
//! stage, epoch and element position), so results do not depend on thread count or
//! scheduling, and the same numbers can be produced on the CPU and in a CUDA kernel.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

#[inline(always)]
fn mulhilo(a: u32, b: u32) -> (u32, u32) {
    let p = u64::from(a) * u64::from(b);
    ((p >> 32) as u32, p as u32)
}

/// One Philox4x32-10 block: four 32-bit random words for a counter and key.
#[inline]
pub fn philox4x32(mut ctr: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key[0] = key[0].wrapping_add(W0);
            key[1] = key[1].wrapping_add(W1);
        }
        let (hi0, lo0) = mulhilo(M0, ctr[0]);
        let (hi1, lo1) = mulhilo(M1, ctr[2]);
        ctr = [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0];
    }
    ctr
}

/// A sequential view of one Philox stream: block `i` of stream `s` under seed `k` is
/// `philox4x32([i_lo, i_hi, s_lo, s_hi], [k_lo, k_hi])`.
#[derive(Debug, Clone)]
pub struct Philox {
    key: [u32; 2],
    stream: u64,
    block: u64,
    words: [u32; 4],
    next: usize,
}

impl Philox {
    /// The stream `stream` of generator `seed`, from its start.
    pub fn new(seed: u64, stream: u64) -> Self {
        Philox { key: [seed as u32, (seed >> 32) as u32], stream, block: 0, words: [0; 4], next: 4 }
    }

    /// The next 32 random bits.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.next == 4 {
            let ctr = [
                self.block as u32,
                (self.block >> 32) as u32,
                self.stream as u32,
                (self.stream >> 32) as u32,
            ];
            self.words = philox4x32(ctr, self.key);
            self.block += 1;
            self.next = 0;
        }
        let w = self.words[self.next];
        self.next += 1;
        w
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        u64::from(self.next_u32()) | (u64::from(self.next_u32()) << 32)
    }

    /// A uniform float in `[0, 1)` with 24 random bits.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// A uniform integer in `0..n` (Lemire's multiply-shift; bias below 2^-32 · n).
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        ((u64::from(self.next_u32()) * u64::from(n)) >> 32) as u32
    }

    /// A standard normal sample (Box–Muller).
    #[inline]
    pub fn next_normal(&mut self) -> f32 {
        let u1 = ((self.next_u32() >> 8) as f32 + 1.0) * (1.0 / (1u32 << 24) as f32); // (0, 1]
        let u2 = self.next_f32();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers_from_random123() {
        assert_eq!(philox4x32([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        assert_eq!(
            philox4x32([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344], [0xa409_3822, 0x299f_31d0]),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn streams_are_independent_of_draw_order() {
        let mut a = Philox::new(7, 3);
        let first: Vec<u32> = (0..10).map(|_| a.next_u32()).collect();
        let mut b = Philox::new(7, 3);
        assert_eq!(first, (0..10).map(|_| b.next_u32()).collect::<Vec<_>>());
        let mut c = Philox::new(7, 4);
        assert_ne!(first[0], c.next_u32());
    }

    #[test]
    fn uniform_and_normal_are_plausible() {
        let mut r = Philox::new(1, 1);
        let n = 100_000;
        let (mut s, mut s2) = (0.0f64, 0.0f64);
        for _ in 0..n {
            let x = f64::from(r.next_normal());
            s += x;
            s2 += x * x;
        }
        let mean = s / f64::from(n);
        let var = s2 / f64::from(n) - mean * mean;
        assert!(mean.abs() < 0.02 && (var - 1.0).abs() < 0.03, "mean {mean} var {var}");
        assert!((0..1000).all(|_| r.below(10) < 10));
    }
}
