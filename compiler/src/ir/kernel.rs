//! Fused chains of per-row operations on a batch column: what a `device cuda` pipeline's
//! tail becomes ([`crate::physical::fuse`]'s `lower_device_tail` builds them) and what
//! `codegen::cuda` prints as one CUDA C kernel each. Plain data: no syntax, no code.

use crate::ir::types::DType;

/// One operation of a chain, applied to each row.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelOp {
    /// `cast(x, dtype)`: C conversion (floats to integers truncate, as Rust's `as`
    /// saturating casts do within range).
    Cast(DType),
    /// `x * factor` (`scale`).
    Scale(f64),
    /// `x + c`, `x - c`, `x * c`, `x / c` with a constant `c` (`op` is `+ - * /`).
    Arith(char, f64),
    /// `(x - mean[c]) * (1 / std[c])`, `c` the position in the last dimension.
    Normalize {
        /// One value, or one per channel.
        mean: Vec<f32>,
        /// One value, or one per channel.
        std: Vec<f32>,
    },
    /// `min(max(x, lo), hi)`.
    Clamp(f64, f64),
    /// `[h, w, c]` → `[c, h, w]`.
    TransposeChw,
    /// `[c, h, w]` → `[h, w, c]`.
    TransposeHwc,
    /// The centre `h × w` window of `[H, W, C]` (offsets rounded down, as the runtime).
    CenterCrop(usize, usize),
    /// A random `h × w` window; `op` is the op's id in `element_rng`, `seed` the index of
    /// the kernel's seed argument.
    RandomCrop {
        /// Height.
        h: usize,
        /// Width.
        w: usize,
        /// The random op's id.
        op: u64,
        /// Which `seed{k}` argument keys it.
        seed: usize,
    },
    /// Mirrors `[H, W, C]` left to right (a list: reversed) with probability ½.
    RandomFlip {
        /// The random op's id.
        op: u64,
        /// Which `seed{k}` argument keys it.
        seed: usize,
    },
    /// A scalar integer label → `f32[depth]`.
    OneHot(usize),
}

/// A chain of operations on one batch column, compiled to one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// The kernel's C name.
    pub name: String,
    /// The batch column it computes (its input is the same column before the chain).
    pub field: String,
    /// The column's value type.
    pub dtype: DType,
    /// One row's shape.
    pub shape: Vec<usize>,
    /// Applied in order.
    pub ops: Vec<KernelOp>,
    /// The `seed{k}` arguments' values, in order (what keys the random operations).
    pub seeds: Vec<KernelSeed>,
}

/// Where a random operation's seed comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelSeed {
    /// A constant.
    Const(u64),
    /// The pipeline parameter of this name.
    Param(String),
    /// No seed was given: the run's seed (different on every run, as an unseeded
    /// `shuffle`).
    Run,
}

/// Whether kernels handle values of this type: those with a C type that libtorch has too
/// (the device feed reads kernels' inputs from tensors and writes their outputs into
/// tensors): not `i8`, `i16`, the unsigned types but `u8`, the 16-bit floats, strings or
/// bytes.
pub fn supported(d: DType) -> bool {
    matches!(d, DType::Bool | DType::U8 | DType::I32 | DType::I64 | DType::F32 | DType::F64)
}

/// Why a chain cannot become a kernel.
pub type KernelError = String;

/// The stages' shapes and dtypes: `stages[0]` is the input row, `stages[k]` after op `k`.
fn stages(k: &Kernel) -> Result<Vec<(Vec<usize>, DType)>, KernelError> {
    let mut out = vec![(k.shape.clone(), k.dtype)];
    for op in &k.ops {
        let (shape, dtype) = out.last().cloned().expect("the input stage");
        let hwc = |what: &str| -> Result<[usize; 3], KernelError> {
            match shape[..] {
                [a, b, c] => Ok([a, b, c]),
                _ => Err(format!("{what} needs a value of rank 3, not shape {shape:?}")),
            }
        };
        let next = match op {
            KernelOp::Cast(d) => (shape, *d),
            KernelOp::Scale(_) | KernelOp::Arith(..) | KernelOp::Clamp(..) => (shape, dtype),
            KernelOp::Normalize { .. } => {
                if dtype != DType::F32 {
                    return Err(format!("normalize needs f32 values, not {dtype:?}"));
                }
                (shape, dtype)
            }
            KernelOp::TransposeChw => {
                let [h, w, c] = hwc("transpose")?;
                (vec![c, h, w], dtype)
            }
            KernelOp::TransposeHwc => {
                let [c, h, w] = hwc("transpose")?;
                (vec![h, w, c], dtype)
            }
            KernelOp::CenterCrop(ch, cw) | KernelOp::RandomCrop { h: ch, w: cw, .. } => {
                let [h, w, c] = hwc("a crop")?;
                if *ch > h || *cw > w {
                    return Err(format!("a {ch}×{cw} crop of a {h}×{w} image"));
                }
                (vec![*ch, *cw, c], dtype)
            }
            KernelOp::RandomFlip { .. } => {
                if shape.len() > 3 {
                    return Err(format!("random_flip of a value of rank {} (at most 3)", shape.len()));
                }
                (shape, dtype)
            }
            KernelOp::OneHot(depth) => {
                if !shape.is_empty() || matches!(dtype, DType::F32 | DType::F64) {
                    return Err(format!("one_hot needs a scalar integer, not {dtype:?} {shape:?}"));
                }
                (vec![*depth], DType::F32)
            }
        };
        if !supported(next.1) {
            return Err(format!("no kernel for values of type {:?}", next.1));
        }
        out.push(next);
    }
    Ok(out)
}

impl Kernel {
    /// The shape and dtype of a row at each stage: `[0]` is the input row, `[k]` after op
    /// `k`; an error says why the chain is impossible.
    pub fn stages(&self) -> Result<Vec<(Vec<usize>, DType)>, KernelError> {
        stages(self)
    }

    /// The output row's shape and dtype.
    pub fn output(&self) -> Result<(Vec<usize>, DType), KernelError> {
        Ok(stages(self)?.pop().expect("at least the input stage"))
    }

    /// The number of `seed{k}` arguments the kernel takes.
    pub fn seed_count(&self) -> usize {
        self.ops
            .iter()
            .filter_map(|op| match op {
                KernelOp::RandomCrop { seed, .. } | KernelOp::RandomFlip { seed, .. } => Some(seed + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}
