//! A seeded pseudo-random permutation of `0..n` evaluated position by position in O(1)
//! memory: the global shuffle's order.
//!
//! [`Permutation::get`]`(i)` is the element at position `i`. It is a balanced Feistel
//! network over the smallest even-bit power of two `2^(2h) ≥ n` (so at most `4n`), with
//! cycle walking: encrypt `i`, and while the result is `≥ n`, encrypt again. A Feistel
//! network is a bijection of its domain whatever its round function, and cycle walking
//! restricts a bijection of a domain to a bijection of any prefix of it (the walk from
//! `i < n` stays on `i`'s cycle, which comes back below `n`), so `get` is a bijection of
//! `0..n` for every `n` and key. The expected walk is under 4 encryptions (the domain is
//! under `4n`); each is [`ROUNDS`] rounds of a 64-bit mixing function.
//!
//! The round keys come from [`Philox`] keyed by the seed and a stream naming what is
//! permuted (the global shuffle uses its stage tag and the epoch), so an order is a pure
//! function of (seed, stream, n), never of threads or timing. The permutation is
//! statistically well mixed, not cryptographic.

use crate::rng::Philox;

/// Feistel rounds per encryption.
pub const ROUNDS: usize = 6;

/// A keyed bijection of `0..n`; see the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; ROUNDS],
}

impl Permutation {
    /// The permutation of `0..n` keyed by Philox stream `stream` of `seed`.
    pub fn new(n: u64, seed: u64, stream: u64) -> Self {
        let mut rng = Philox::new(seed, stream);
        let keys = std::array::from_fn(|_| rng.next_u64());
        // Bits to hold n - 1, at least 2 so each half has one bit; halves of equal size.
        let bits = if n <= 4 { 2 } else { 64 - (n - 1).leading_zeros() };
        Permutation { n, half_bits: bits.div_ceil(2), keys }
    }

    /// The length `n`.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True when `n == 0`.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The element at position `i`; `i` must be below `n` (positions `≥ n` are returned
    /// unchanged, so the function never loops).
    #[inline]
    pub fn get(&self, i: u64) -> u64 {
        if i >= self.n {
            return i;
        }
        let mut x = i;
        loop {
            x = self.encrypt(x);
            if x < self.n {
                return x;
            }
        }
    }

    /// One pass of the Feistel network over `2^(2h)`.
    #[inline]
    fn encrypt(&self, x: u64) -> u64 {
        let h = self.half_bits;
        let mask = if h >= 64 { u64::MAX } else { (1u64 << h) - 1 };
        let (mut left, mut right) = (x >> h, x & mask);
        for key in self.keys {
            let f = mix(right ^ key) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << h) | right
    }
}

/// A 64-bit finaliser (splitmix64's): every input bit affects every output bit.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_bijection(p: &Permutation) -> bool {
        let n = p.len() as usize;
        let mut seen = vec![false; n];
        for i in 0..p.len() {
            let x = p.get(i) as usize;
            if x >= n || seen[x] {
                return false;
            }
            seen[x] = true;
        }
        true
    }

    #[test]
    fn a_bijection_for_many_lengths_and_keys() {
        let mut lengths: Vec<u64> = (0..=70).collect();
        for k in 3..=17 {
            lengths.extend([(1 << k) - 1, 1 << k, (1 << k) + 1]);
        }
        let mut rng = Philox::new(99, 0);
        lengths.extend((0..20).map(|_| u64::from(rng.below(200_000))));
        for n in lengths {
            for seed in [0, 1, 0xdead_beef] {
                let p = Permutation::new(n, seed, 7);
                assert!(is_bijection(&p), "n = {n}, seed = {seed}");
            }
        }
    }

    #[test]
    fn huge_lengths_stay_in_range() {
        for n in [u64::MAX, (1 << 63) + 1, 1 << 40, (1 << 33) - 3] {
            let p = Permutation::new(n, 5, 1);
            for i in [0, 1, n / 2, n - 1] {
                assert!(p.get(i) < n, "n = {n}, i = {i}");
            }
        }
    }

    #[test]
    fn keys_change_the_order_and_the_same_key_repeats_it() {
        let n = 1000;
        let order =
            |seed, stream| (0..n).map(|i| Permutation::new(n, seed, stream).get(i)).collect::<Vec<_>>();
        assert_eq!(order(1, 2), order(1, 2));
        assert_ne!(order(1, 2), order(1, 3));
        assert_ne!(order(1, 2), order(2, 2));
    }

    #[test]
    fn the_order_is_well_mixed() {
        // Few neighbours stay neighbours, and the first tenth comes from all over.
        let n = 100_000;
        let p = Permutation::new(n, 42, 0);
        let adjacent = (0..n - 1).filter(|&i| p.get(i + 1) == p.get(i) + 1).count();
        assert!(adjacent < 100, "{adjacent} adjacent pairs");
        let mut deciles = [0u32; 10];
        for i in 0..n / 10 {
            deciles[(p.get(i) * 10 / n) as usize] += 1;
        }
        assert!(deciles.iter().all(|&c| (800..1200).contains(&c)), "{deciles:?}");
    }
}
