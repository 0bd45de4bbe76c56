// Sluice's counter-based generator for CUDA kernels: Philox4x32-10 and the per-element
// draws of the random operations, bit-identical to runtime/src/rng.rs (`Philox`),
// runtime/src/abi/ops.rs (`element_rng`, `random_flip`) and runtime/src/image/ops.rs
// (`random_crop`). The same text compiles as CUDA C++ (NVRTC, nvcc) and as host C++,
// where the guard below defines `__device__` away; only `unsigned int` (32 bits) and
// `unsigned long long` (64 bits) are used, so no header is needed.
#ifndef SLUICE_PHILOX_CUH
#define SLUICE_PHILOX_CUH

#if !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#define __device__
#endif

#define SLUICE_PHILOX_M0 0xD2511F53u
#define SLUICE_PHILOX_M1 0xCD9E8D57u
#define SLUICE_PHILOX_W0 0x9E3779B9u
#define SLUICE_PHILOX_W1 0xBB67AE85u

// Four 32-bit words: one Philox block.
typedef struct {
    unsigned int w[4];
} sluice_philox_block;

// One Philox4x32-10 block for counter `ctr` and key `key` (rng.rs `philox4x32`).
static __device__ inline sluice_philox_block sluice_philox4x32_10(const unsigned int ctr[4],
                                                                   const unsigned int key[2]) {
    unsigned int c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    unsigned int k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += SLUICE_PHILOX_W0;
            k1 += SLUICE_PHILOX_W1;
        }
        unsigned long long p0 = (unsigned long long)SLUICE_PHILOX_M0 * c0;
        unsigned long long p1 = (unsigned long long)SLUICE_PHILOX_M1 * c2;
        unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
        unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
        unsigned int n0 = hi1 ^ c1 ^ k0;
        unsigned int n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    sluice_philox_block out;
    out.w[0] = c0;
    out.w[1] = c1;
    out.w[2] = c2;
    out.w[3] = c3;
    return out;
}

// A sequential view of one Philox stream (rng.rs `Philox`): block `i` of stream `s`
// under seed `k` is philox4x32_10([i_lo, i_hi, s_lo, s_hi], [k_lo, k_hi]).
typedef struct {
    unsigned int key[2];
    unsigned long long stream;
    unsigned long long block;
    unsigned int words[4];
    unsigned int next;
} sluice_rng;

// The stream `stream` of generator `seed`, from its start (`Philox::new`).
static __device__ inline sluice_rng sluice_rng_new(unsigned long long seed, unsigned long long stream) {
    sluice_rng r;
    r.key[0] = (unsigned int)seed;
    r.key[1] = (unsigned int)(seed >> 32);
    r.stream = stream;
    r.block = 0;
    r.words[0] = r.words[1] = r.words[2] = r.words[3] = 0;
    r.next = 4;
    return r;
}

// The next 32 random bits (`Philox::next_u32`).
static __device__ inline unsigned int sluice_rng_next_u32(sluice_rng *r) {
    if (r->next == 4) {
        unsigned int ctr[4];
        ctr[0] = (unsigned int)r->block;
        ctr[1] = (unsigned int)(r->block >> 32);
        ctr[2] = (unsigned int)r->stream;
        ctr[3] = (unsigned int)(r->stream >> 32);
        sluice_philox_block b = sluice_philox4x32_10(ctr, r->key);
        r->words[0] = b.w[0];
        r->words[1] = b.w[1];
        r->words[2] = b.w[2];
        r->words[3] = b.w[3];
        r->block += 1;
        r->next = 0;
    }
    unsigned int w = r->words[r->next];
    r->next += 1;
    return w;
}

// The next 64 random bits, low word drawn first (`Philox::next_u64`).
static __device__ inline unsigned long long sluice_rng_next_u64(sluice_rng *r) {
    unsigned long long lo = sluice_rng_next_u32(r);
    unsigned long long hi = sluice_rng_next_u32(r);
    return lo | (hi << 32);
}

// A uniform float in [0, 1) with 24 random bits (`Philox::next_f32`); exact in IEEE
// single precision whatever the rounding mode or contraction.
static __device__ inline float sluice_rng_next_f32(sluice_rng *r) {
    return (float)(sluice_rng_next_u32(r) >> 8) * (1.0f / 16777216.0f);
}

// A uniform integer in [0, n) from one 32-bit draw, Lemire's multiply-shift
// (`Philox::below`).
static __device__ inline unsigned int sluice_rng_below_u32(sluice_rng *r, unsigned int n) {
    return (unsigned int)(((unsigned long long)sluice_rng_next_u32(r) * n) >> 32);
}

// A uniform integer in [0, n) as image/ops.rs `below` draws it: one 32-bit draw
// (multiply-shift) when n fits in 32 bits, else two (`next_u64() % n`).
static __device__ inline unsigned long long sluice_rng_below(sluice_rng *r, unsigned long long n) {
    if (n <= 0xFFFFFFFFull) {
        return sluice_rng_below_u32(r, (unsigned int)n);
    }
    return sluice_rng_next_u64(r) % n;
}

// The generator of random operation number `op` (with seed `seed`) on element `index`
// of epoch `epoch` (abi/ops.rs `element_rng`).
static __device__ inline sluice_rng sluice_element_rng(unsigned long long seed, unsigned long long op,
                                                       unsigned long long epoch, unsigned long long index) {
    unsigned long long key = seed ^ ((op + 1ull) * 0x9E3779B97F4A7C15ull);
    return sluice_rng_new(key, (epoch << 40) ^ index);
}

// `random_flip(x, seed)` of one element: nonzero when it is flipped (one draw, a
// uniform float below 0.5), whatever the value's shape.
static __device__ inline int sluice_flip_draw(unsigned long long seed, unsigned long long op,
                                              unsigned long long epoch, unsigned long long index) {
    sluice_rng r = sluice_element_rng(seed, op, epoch, index);
    return sluice_rng_next_f32(&r) < 0.5f;
}

// `random_crop(x, h, w, seed)` of one element: the window's top row and left column,
// drawn in that order from `rows = height - h + 1` and `cols = width - w + 1` positions.
static __device__ inline void sluice_crop_draw(unsigned long long seed, unsigned long long op,
                                               unsigned long long epoch, unsigned long long index,
                                               unsigned long long rows, unsigned long long cols,
                                               unsigned long long *top, unsigned long long *left) {
    sluice_rng r = sluice_element_rng(seed, op, epoch, index);
    *top = sluice_rng_below(&r, rows);
    *left = sluice_rng_below(&r, cols);
}

#endif // SLUICE_PHILOX_CUH
