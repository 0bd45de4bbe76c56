//! CUDA C for a chain of per-row operations applied to a batch column: one kernel per
//! chain, each thread [`VALUES_PER_THREAD`] output values, a block's threads writing
//! consecutive values in each round (coalesced stores).
//!
//! A [`Kernel`] is a column's row type (dtype and row shape) and the operations applied to
//! every row in order: value operations (`cast`, `scale`, affine arithmetic with a
//! constant, `normalize` per channel, `clamp`) and layout operations (`transpose` HWC→CHW
//! and back, `center_crop`, `random_crop`, `random_flip`, `one_hot`). The generated
//! kernel works backwards (a gather): for each of its output values a thread maps its
//! coordinates back through the layout operations to the input value it comes from,
//! loads it once, and applies the value operations in order, each at its own stage's
//! coordinates (so `normalize` sees the channel it had at its place in the chain). Fused,
//! the chain reads each input value once and writes each output value once.
//!
//! A random operation's draws belong to the row, not the value: on the device each block
//! draws once for every row its threads cover, into shared memory, and its threads read
//! them after a barrier (two Philox blocks per value made the first kernels compute-bound,
//! at 18–31 % of copy bandwidth on an H100). Coordinates within a row are 32-bit whenever
//! every stage's row has fewer than 2³¹ values. The host build (no `__CUDA_ARCH__`) draws
//! per value, the same numbers.
//!
//! Random operations draw exactly what the runtime's CPU operations draw, through the
//! runtime's `philox.cuh` ([`PHILOX`]): Philox4x32-10 keyed by
//! `element_rng(seed, op, epoch, index)`, `random_crop` a row then a column offset,
//! `random_flip` one uniform float. Row `i` of the pass's batch `b` draws with
//! index `(b << 20) | i`, the key the generated CPU code gives the rows of a map over
//! batches (`codegen::pipeline`), so a row gets the same draw on the CPU and the GPU.
//!
//! The source is plain C++ apart from `__global__`/`__device__` and the thread indices,
//! which [`HOST_PRELUDE`] defines for a host compiler: the tests run generated kernels on
//! the CPU against the runtime's operations, bit for bit.

use std::fmt::Write as _;

use crate::ir::types::DType;

pub use crate::ir::kernel::{Kernel, KernelError, KernelOp, KernelSeed};

/// Makes generated kernels compile as host C++ (tests): the thread indices become
/// globals that a host loop sets ([`PHILOX`] defines `__device__` away by itself).
pub const HOST_PRELUDE: &str = "\
#define __global__
struct sluice_dim3 { unsigned x; };
static sluice_dim3 blockIdx, blockDim, threadIdx;
";

/// Philox4x32-10 and the draws of the runtime's random operations as CUDA device code:
/// the runtime's own `philox.cuh` (tested there bit for bit against `rng.rs`), so the
/// generated kernels and the runtime share one text.
pub const PHILOX: &str = include_str!("../../../runtime/src/cuda/philox.cuh");

/// Output values per thread of the generated kernels: the runtime's
/// `cuda::VALUES_PER_THREAD`, which sizes the launch (a test checks they are equal).
pub const VALUES_PER_THREAD: usize = 4;

/// The C type of a dtype's values in a kernel.
fn c_type(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::Bool => "bool",
        DType::U8 => "unsigned char",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::I64 => "long long",
        DType::U64 => "unsigned long long",
        DType::F32 => "float",
        DType::F64 => "double",
        _ => return None,
    })
}

/// A float literal that C reads back as exactly `v` (f32 or f64).
fn c_float(v: f64, d: DType) -> String {
    if d == DType::F32 { format!("{:?}f", v as f32) } else { format!("{v:?}") }
}

/// A random operation's draws for one row: `random_crop` a top row and a left column,
/// `random_flip` whether it flips.
enum Draw {
    Crop { k: usize, op: u64, seed: usize, rows: usize, cols: usize },
    Flip { k: usize, op: u64, seed: usize },
}

impl Draw {
    fn words(&self) -> usize {
        match self {
            Draw::Crop { .. } => 2,
            Draw::Flip { .. } => 1,
        }
    }

    /// The kernel's variables holding them (`k` is the operation's stage, 1-based).
    fn names(&self) -> Vec<String> {
        match self {
            Draw::Crop { k, .. } => vec![format!("top{k}"), format!("left{k}")],
            Draw::Flip { k, .. } => vec![format!("flip{k}")],
        }
    }
}

impl Kernel {
    /// The kernel's CUDA C source, [`PHILOX`] included:
    ///
    /// ```text
    /// extern "C" __global__ void NAME(const IN* in, OUT* out, unsigned long long n,
    ///     unsigned long long epoch, unsigned long long batch_index,
    ///     unsigned long long row0 [, unsigned long long seed0, ...])
    /// ```
    ///
    /// `in` holds rows `row0..` of the pass's batch `batch_index` (a device's part of a
    /// global batch starts at its `row0`); block `b` of `D` threads writes the `V * D` values
    /// from `V * D * b` below `n`, thread `t` those at `V * D * b + j * D + t` for `j < V`
    /// (V = the runtime's `cuda::VALUES_PER_THREAD`), so `n` is the
    /// number of rows times the output row's size (the runtime's `cuda::GpuTail` ABI:
    /// `in`, `out`, `n`, then the kernel's own arguments).
    pub fn source(&self) -> Result<String, KernelError> {
        let stages = self.stages()?;
        let n = self.ops.len();
        let (in_t, out_t) = (c_type(stages[0].1).expect("checked"), c_type(stages[n].1).expect("checked"));
        let row_len = |s: &[usize]| s.iter().product::<usize>();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "/* {}: {:?} {:?} -> {:?} {:?} */",
            self.name, self.dtype, self.shape, stages[n].1, stages[n].0
        );
        s.push_str(PHILOX);
        let seeds: String = (0..self.seed_count()).map(|k| format!(", unsigned long long seed{k}")).collect();
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void {}(const {in_t}* __restrict__ in, {out_t}* __restrict__ out, unsigned long long n, \
             unsigned long long epoch, unsigned long long batch_index, unsigned long long row0{seeds}) {{",
            self.name
        );
        let out_len = row_len(&stages[n].0);
        // Coordinates within a row in 32 bits when every stage's row fits (64-bit
        // division by a constant costs several times more on a GPU); the row and the
        // input offset stay 64-bit.
        let narrow = stages.iter().all(|(shape, _)| row_len(shape) < 1 << 31);
        let (ct, u) = if narrow { ("unsigned int", "u") } else { ("unsigned long long", "ull") };
        // The random operations' draws: words of one row, the same for all its values.
        let draws = self.draws(&stages);
        let words: usize = draws.iter().map(|d| d.words()).sum();
        // On the device a block draws once for each row it covers, into shared memory,
        // instead of once per value (two Philox blocks per value dominated the kernel):
        // at most 1024 * V / out_len + 2 rows for a block of up to 1024 threads.
        let rows_max = 1024 * VALUES_PER_THREAD / out_len.max(1) + 2;
        let shared = words > 0 && rows_max * words * 4 <= 16 * 1024;
        let v = VALUES_PER_THREAD;
        // A block covers `blockDim.x * V` consecutive output values, `V` rounds of them:
        // in round `j` its threads write `blockDim.x` consecutive values, so each store
        // instruction of a warp writes one contiguous run (a thread writing `V` neighbours
        // of its own made every warp store a strided one: 49 % of copy bandwidth on an H100).
        let _ = writeln!(
            s,
            "    unsigned long long start = (unsigned long long)blockIdx.x * blockDim.x * {v}ull;"
        );
        let _ = writeln!(s, "    unsigned long long base = start + threadIdx.x;");
        let draw_into = |s: &mut String, indent: &str, dst: &dyn Fn(usize) -> String| {
            let mut w = 0;
            for d in &draws {
                match d {
                    Draw::Crop { k, op, seed, rows, cols } => {
                        let _ = writeln!(
                            s,
                            "{indent}{{ unsigned long long top, left; sluice_crop_draw(seed{seed}, {op}ull, epoch, index, \
                             {rows}ull, {cols}ull, &top, &left); {} = ({ct})top; {} = ({ct})left; }} /* op {k} */",
                            dst(w),
                            dst(w + 1)
                        );
                    }
                    Draw::Flip { k, op, seed } => {
                        let _ = writeln!(
                            s,
                            "{indent}{} = ({ct})sluice_flip_draw(seed{seed}, {op}ull, epoch, index); /* op {k} */",
                            dst(w)
                        );
                    }
                }
                w += d.words();
            }
        };
        let names: Vec<String> = draws.iter().flat_map(|d| d.names()).collect();
        if shared {
            let _ = writeln!(s, "#ifdef __CUDA_ARCH__");
            let _ = writeln!(s, "    __shared__ {ct} draws[{rows_max}][{words}];");
            let _ = writeln!(s, "    unsigned long long first = start / {out_len}ull;");
            let _ = writeln!(s, "    if (start < n) {{");
            let _ = writeln!(s, "        unsigned long long span = (unsigned long long)blockDim.x * {v}ull;");
            let _ = writeln!(s, "        unsigned long long end = start + span < n ? start + span : n;");
            let _ = writeln!(s, "        unsigned long long rows = (end - 1) / {out_len}ull - first + 1;");
            let _ =
                writeln!(s, "        for (unsigned long long t = threadIdx.x; t < rows; t += blockDim.x) {{");
            let _ = writeln!(
                s,
                "            unsigned long long index = (batch_index << 20) | (row0 + first + t);"
            );
            draw_into(&mut s, "            ", &|w| format!("draws[t][{w}]"));
            let _ = writeln!(s, "        }}");
            let _ = writeln!(s, "    }}");
            let _ = writeln!(s, "    __syncthreads();");
            let _ = writeln!(s, "#endif");
        }
        let _ = writeln!(s, "    if (base >= n) return;");
        let _ = writeln!(
            s,
            "    unsigned long long row = base / {out_len}ull; {ct} rem = ({ct})(base - row * {out_len}ull);"
        );
        let _ = writeln!(s, "#pragma unroll");
        let _ = writeln!(s, "    for (unsigned int j = 0; j < {v}u; ++j) {{");
        // The loop's body, indented once more at the end.
        let body = s.len();
        let _ = writeln!(s, "    unsigned long long idx = base + (unsigned long long)j * blockDim.x;");
        let _ = writeln!(s, "    if (idx >= n) break;");
        if shared {
            let _ = writeln!(s, "#ifdef __CUDA_ARCH__");
            for (w, name) in names.iter().enumerate() {
                let _ = writeln!(s, "    {ct} {name} = draws[row - first][{w}];");
            }
            let _ = writeln!(s, "#else");
        }
        let _ = writeln!(s, "    unsigned long long index = (batch_index << 20) | (row0 + row);");
        let _ = writeln!(s, "    (void)epoch; (void)index;");
        for name in &names {
            let _ = writeln!(s, "    {ct} {name};");
        }
        draw_into(&mut s, "    ", &|w| names[w].clone());
        if shared {
            let _ = writeln!(s, "#endif");
        }
        // The output coordinates: c{n}_{d}.
        let out_shape = &stages[n].0;
        let _ = writeln!(s, "    {ct} r = rem;");
        for (d, size) in out_shape.iter().enumerate().rev() {
            let _ = writeln!(s, "    {ct} c{n}_{d} = r % {size}{u}; r /= {size}{u};");
        }
        let _ = writeln!(s, "    (void)r;");
        // Backwards through the layout ops: c{k-1} from c{k}.
        for k in (1..=n).rev() {
            let (prev, _) = &stages[k - 1];
            let same = |s: &mut String| {
                for d in 0..prev.len() {
                    let _ = writeln!(s, "    {ct} c{}_{d} = c{k}_{d};", k - 1);
                }
            };
            match &self.ops[k - 1] {
                KernelOp::TransposeChw => {
                    // c{k} = (ch, y, x) over [c, h, w]; c{k-1} = (y, x, ch) over [h, w, c].
                    let _ =
                        writeln!(s, "    {ct} c{p}_0 = c{k}_1, c{p}_1 = c{k}_2, c{p}_2 = c{k}_0;", p = k - 1);
                }
                KernelOp::TransposeHwc => {
                    let _ =
                        writeln!(s, "    {ct} c{p}_0 = c{k}_2, c{p}_1 = c{k}_0, c{p}_2 = c{k}_1;", p = k - 1);
                }
                KernelOp::CenterCrop(h, w) => {
                    let (top, left) = ((prev[0] - h) / 2, (prev[1] - w) / 2);
                    let _ = writeln!(
                        s,
                        "    {ct} c{p}_0 = c{k}_0 + {top}{u}, c{p}_1 = c{k}_1 + {left}{u}, c{p}_2 = c{k}_2;",
                        p = k - 1
                    );
                }
                KernelOp::RandomCrop { .. } => {
                    let _ = writeln!(
                        s,
                        "    {ct} c{p}_0 = c{k}_0 + top{k}, c{p}_1 = c{k}_1 + left{k}, c{p}_2 = c{k}_2;",
                        p = k - 1
                    );
                }
                KernelOp::RandomFlip { .. } => match prev.len() {
                    3 => {
                        let _ = writeln!(
                            s,
                            "    {ct} c{p}_0 = c{k}_0, c{p}_1 = flip{k} ? {} - c{k}_1 : c{k}_1, c{p}_2 = c{k}_2;",
                            prev[1] - 1,
                            p = k - 1
                        );
                    }
                    2 => {
                        let _ = writeln!(
                            s,
                            "    {ct} c{p}_0 = c{k}_0, c{p}_1 = flip{k} ? {} - c{k}_1 : c{k}_1;",
                            prev[1] - 1,
                            p = k - 1
                        );
                    }
                    1 => {
                        let _ = writeln!(
                            s,
                            "    {ct} c{p}_0 = flip{k} ? {} - c{k}_0 : c{k}_0;",
                            prev[0] - 1,
                            p = k - 1
                        );
                    }
                    _ => {
                        let _ = writeln!(s, "    (void)flip{k};");
                        same(&mut s);
                    }
                },
                KernelOp::OneHot(_) => {} // from a scalar: no coordinates before it
                _ => same(&mut s),
            }
        }
        // The input offset, then the values forwards.
        let in_shape = &stages[0].0;
        let mut offset = format!("0{u}");
        for (d, size) in in_shape.iter().enumerate() {
            offset = format!("({offset}) * {size}{u} + c0_{d}");
        }
        let _ = writeln!(s, "    {in_t} v0 = in[row * {}ull + {offset}];", row_len(in_shape));
        for (k, (shape, dtype)) in stages.iter().enumerate().skip(1) {
            let t = c_type(*dtype).expect("checked");
            let p = k - 1;
            let expr = match &self.ops[p] {
                KernelOp::Cast(_) => format!("({t})v{p}"),
                KernelOp::Scale(f) => format!("v{p} * {}", c_float(*f, *dtype)),
                KernelOp::Arith(op, c) => {
                    let c = if matches!(dtype, DType::F32 | DType::F64) {
                        c_float(*c, *dtype)
                    } else {
                        format!("({t}){c}")
                    };
                    format!("v{p} {op} {c}")
                }
                KernelOp::Clamp(lo, hi) => {
                    let (lo, hi) = (c_float(*lo, *dtype), c_float(*hi, *dtype));
                    format!("v{p} < {lo} ? {lo} : (v{p} > {hi} ? {hi} : v{p})")
                }
                KernelOp::Normalize { mean, std } => {
                    let channels = shape.last().copied().unwrap_or(1);
                    let spread = |v: &[f32]| -> Vec<f32> {
                        if v.len() == 1 { vec![v[0]; channels] } else { v.to_vec() }
                    };
                    let (mean, std) = (spread(mean), spread(std));
                    if mean.len() != channels || std.len() != channels {
                        return Err(format!(
                            "normalize: {} mean / {} std values for {channels} channel(s)",
                            mean.len(),
                            std.len()
                        ));
                    }
                    let list = |v: &[f32]| v.iter().map(|x| format!("{x:?}f")).collect::<Vec<_>>().join(", ");
                    let inv: Vec<f32> = std.iter().map(|s| 1.0 / s).collect();
                    let _ = writeln!(s, "    const float mean{k}[{channels}] = {{{}}};", list(&mean));
                    let _ = writeln!(s, "    const float inv{k}[{channels}] = {{{}}};", list(&inv));
                    let ch =
                        if shape.is_empty() { "0".to_string() } else { format!("c{k}_{}", shape.len() - 1) };
                    format!("(v{p} - mean{k}[{ch}]) * inv{k}[{ch}]")
                }
                KernelOp::OneHot(depth) => {
                    format!(
                        "((long long)v{p} >= 0 && (long long)v{p} < {depth}ll && (unsigned long long)v{p} == c{k}_0) ? 1.0f : 0.0f"
                    )
                }
                _ => format!("v{p}"),
            };
            let _ = writeln!(s, "    {t} v{k} = {expr};");
        }
        let _ = writeln!(s, "    out[idx] = v{n};");
        // The next round's value is `blockDim.x` further: past the row's end, a few rows on
        // (a division only then, and in 32 bits when rows are).
        let _ = writeln!(s, "    rem += ({ct})blockDim.x;");
        let _ = writeln!(
            s,
            "    if (rem >= {out_len}{u}) {{ {ct} q = rem / {out_len}{u}; row += q; rem -= q * {out_len}{u}; }}"
        );
        let indented: String = s[body..]
            .lines()
            .map(|l| if l.starts_with('#') { format!("{l}\n") } else { format!("    {l}\n") })
            .collect();
        s.truncate(body);
        s.push_str(&indented);
        s.push_str("    }\n}\n");
        Ok(s)
    }

    /// The draws of the chain's random operations, in chain order (a row's draws do not
    /// depend on each other: each operation has its own generator).
    /// `stages` are the chain's stages ([`Kernel::stages`]).
    fn draws(&self, stages: &[(Vec<usize>, DType)]) -> Vec<Draw> {
        let mut draws = Vec::new();
        for (i, op) in self.ops.iter().enumerate() {
            let (k, prev) = (i + 1, &stages[i].0);
            match *op {
                KernelOp::RandomCrop { h, w, op, seed } => {
                    draws.push(Draw::Crop { k, op, seed, rows: prev[0] - h + 1, cols: prev[1] - w + 1 })
                }
                KernelOp::RandomFlip { op, seed } => draws.push(Draw::Flip { k, op, seed }),
                _ => {}
            }
        }
        draws
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image_kernel() -> Kernel {
        Kernel {
            seeds: Vec::new(),
            field: "image".into(),
            name: "k0_image".into(),
            dtype: DType::U8,
            shape: vec![10, 12, 3],
            ops: vec![
                KernelOp::RandomCrop { h: 8, w: 8, op: 0, seed: 0 },
                KernelOp::RandomFlip { op: 1, seed: 0 },
                KernelOp::Cast(DType::F32),
                KernelOp::Scale(1.0 / 255.0),
                KernelOp::Normalize { mean: vec![0.5, 0.4, 0.3], std: vec![0.2, 0.25, 0.3] },
                KernelOp::TransposeChw,
            ],
        }
    }

    #[test]
    fn shapes_and_types_flow_through_the_chain() {
        let k = image_kernel();
        assert_eq!(k.output().unwrap(), (vec![3, 8, 8], DType::F32));
        assert_eq!(k.seed_count(), 1);
        let src = k.source().unwrap();
        assert!(
            src.contains(
                "extern \"C\" __global__ void k0_image(const unsigned char* __restrict__ in, float* __restrict__ out"
            ),
            "{src}"
        );
        assert!(src.contains("unsigned long long seed0"), "{src}");
        // On the device the draws are made once a row per block (crop: 2 words, flip: 1),
        // at most 1024 * 4 / 192 + 2 = 23 rows; the host draws per value.
        assert!(src.contains("__shared__ unsigned int draws[23][3];"), "{src}");
        assert!(src.contains("unsigned int top1 = draws[row - first][0];"), "{src}");
        assert_eq!(src.matches("sluice_crop_draw(seed0").count(), 2, "{src}"); // device, host
        // Rows this small take 32-bit coordinates.
        assert!(src.contains("unsigned int c6_2 = r % 8u;"), "{src}");
    }

    #[test]
    fn chains_without_draws_share_nothing_and_huge_rows_keep_64_bit_coordinates() {
        let k = Kernel {
            seeds: Vec::new(),
            field: "x".into(),
            name: "k".into(),
            dtype: DType::U8,
            shape: vec![1 << 16, 1 << 16],
            ops: vec![KernelOp::Cast(DType::F32), KernelOp::Scale(0.5)],
        };
        let src = k.source().unwrap();
        assert!(!src.contains("__shared__"), "{src}");
        assert!(src.contains("unsigned long long c2_1 = r % 65536ull;"), "{src}");
    }

    #[test]
    fn impossible_chains_are_errors_not_kernels() {
        let mut k = image_kernel();
        k.ops.insert(0, KernelOp::CenterCrop(11, 4));
        assert!(k.source().unwrap_err().contains("11×4 crop of a 10×12"));
        let k = Kernel {
            seeds: Vec::new(),
            field: "x".into(),
            name: "k".into(),
            dtype: DType::U8,
            shape: vec![4],
            ops: vec![KernelOp::Normalize { mean: vec![0.0], std: vec![1.0] }],
        };
        assert!(k.source().unwrap_err().contains("normalize needs f32"));
        let k = Kernel {
            seeds: Vec::new(),
            field: "x".into(),
            name: "k".into(),
            dtype: DType::F32,
            shape: vec![],
            ops: vec![KernelOp::OneHot(3)],
        };
        assert!(k.source().unwrap_err().contains("one_hot needs a scalar integer"));
    }
}
