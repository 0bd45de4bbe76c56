//! The CUDA C of Sluice's random generator, for generated kernels to include: Philox4x32-10
//! and the per-element draws of `random_flip` and `random_crop`, bit-identical to
//! [`crate::rng::Philox`] and [`crate::abi::ops::element_rng`], so a kernel and its CPU
//! twin make the same random choices.
//!
//! The text ([`PHILOX_CUDA`], `philox.cuh`) compiles under NVRTC and nvcc and, with
//! `__device__` defined away by its own guard, as host C++: the build script compiles it
//! so (`philox_host.cpp`), and [`host`] exposes that build to the tests, which compare it
//! with the Rust generator bit for bit.
//!
//! What a kernel calls, all `static __device__ inline`:
//!
//! | function | Rust |
//! |---|---|
//! | `sluice_philox_block sluice_philox4x32_10(const unsigned ctr[4], const unsigned key[2])` | [`crate::rng::philox4x32`] |
//! | `sluice_rng sluice_rng_new(seed, stream)`, `sluice_rng_next_u32/_u64/_f32(&r)`, `sluice_rng_below_u32(&r, n)` | [`Philox`](crate::rng::Philox) |
//! | `sluice_rng_below(&r, n)`: one draw when `n` fits 32 bits, else `next_u64 % n` | `image::ops::below` |
//! | `sluice_rng sluice_element_rng(seed, op, epoch, index)` | [`element_rng`](crate::abi::ops::element_rng) |
//! | `int sluice_flip_draw(seed, op, epoch, index)`: nonzero to flip | `random_flip`: `next_f32() < 0.5` |
//! | `void sluice_crop_draw(seed, op, epoch, index, rows, cols, &top, &left)` | `random_crop`: `top = below(rows)`, then `left = below(cols)`, with `rows = height - h + 1`, `cols = width - w + 1` |
//!
//! All integers are `unsigned int` (32 bits) or `unsigned long long` (64 bits).

/// The CUDA C source of the generator (`src/cuda/philox.cuh`): include it at the top of a
/// kernel's source.
pub const PHILOX_CUDA: &str = include_str!("philox.cuh");

/// The host C++ build of [`PHILOX_CUDA`] (for tests): each function calls the same-named
/// CUDA function compiled for the CPU.
#[doc(hidden)]
pub mod host {
    use std::ffi::{c_int, c_uchar, c_uint, c_ulonglong};

    unsafe extern "C" {
        fn sluice_philox_host(ctr: *const c_uint, key: *const c_uint, out: *mut c_uint);
        fn sluice_rng_draws_host(
            seed: c_ulonglong,
            stream: c_ulonglong,
            kinds: *const c_uchar,
            args: *const c_ulonglong,
            n: usize,
            out: *mut c_ulonglong,
        );
        fn sluice_element_words_host(
            seed: c_ulonglong,
            op: c_ulonglong,
            epoch: c_ulonglong,
            index: c_ulonglong,
            out: *mut c_uint,
            n: usize,
        );
        fn sluice_flip_draw_host(
            seed: c_ulonglong,
            op: c_ulonglong,
            epoch: c_ulonglong,
            index: c_ulonglong,
        ) -> c_int;
        fn sluice_crop_draw_host(
            seed: c_ulonglong,
            op: c_ulonglong,
            epoch: c_ulonglong,
            index: c_ulonglong,
            rows: c_ulonglong,
            cols: c_ulonglong,
            top: *mut c_ulonglong,
            left: *mut c_ulonglong,
        );
    }

    /// One draw of [`rng_draws`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Draw {
        /// `sluice_rng_next_u32`.
        U32,
        /// `sluice_rng_next_u64`.
        U64,
        /// `sluice_rng_next_f32`, as its bits.
        F32,
        /// `sluice_rng_below(n)`.
        Below(u64),
    }

    /// `sluice_philox4x32_10(ctr, key)`.
    pub fn philox4x32(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
        let mut out = [0u32; 4];
        // SAFETY: the C function reads 4 and 2 words and writes 4, all in bounds here.
        unsafe { sluice_philox_host(ctr.as_ptr(), key.as_ptr(), out.as_mut_ptr()) };
        out
    }

    /// The values of `draws` taken in order from `sluice_rng_new(seed, stream)`.
    pub fn rng_draws(seed: u64, stream: u64, draws: &[Draw]) -> Vec<u64> {
        let kinds: Vec<u8> = draws
            .iter()
            .map(|d| match d {
                Draw::U32 => 0,
                Draw::U64 => 1,
                Draw::F32 => 2,
                Draw::Below(_) => 3,
            })
            .collect();
        let args: Vec<u64> = draws.iter().map(|d| if let Draw::Below(n) = d { *n } else { 0 }).collect();
        let mut out = vec![0u64; draws.len()];
        // SAFETY: `kinds`, `args` and `out` all hold `draws.len()` values.
        unsafe {
            sluice_rng_draws_host(seed, stream, kinds.as_ptr(), args.as_ptr(), draws.len(), out.as_mut_ptr())
        };
        out
    }

    /// The first `n` words of `sluice_element_rng(seed, op, epoch, index)`.
    pub fn element_words(seed: u64, op: u64, epoch: u64, index: u64, n: usize) -> Vec<u32> {
        let mut out = vec![0u32; n];
        // SAFETY: `out` holds the `n` words the C function writes.
        unsafe { sluice_element_words_host(seed, op, epoch, index, out.as_mut_ptr(), n) };
        out
    }

    /// `sluice_flip_draw(seed, op, epoch, index) != 0`.
    pub fn flip_draw(seed: u64, op: u64, epoch: u64, index: u64) -> bool {
        // SAFETY: plain values in and out.
        unsafe { sluice_flip_draw_host(seed, op, epoch, index) != 0 }
    }

    /// `sluice_crop_draw(seed, op, epoch, index, rows, cols)`: `(top, left)`.
    pub fn crop_draw(seed: u64, op: u64, epoch: u64, index: u64, rows: u64, cols: u64) -> (u64, u64) {
        let (mut top, mut left) = (0u64, 0u64);
        // SAFETY: the C function writes one value through each pointer.
        unsafe { sluice_crop_draw_host(seed, op, epoch, index, rows, cols, &mut top, &mut left) };
        (top, left)
    }
}
