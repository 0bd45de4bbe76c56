//! The device tail of a `device cuda` pipeline as generated code describes it: for each
//! batch column the tail changes, the CUDA C kernel the compiler generated (the chain of
//! per-row operations it fused), the column's row type before and after, and the values
//! of the kernel's seed arguments. The device feed (`torch::TailFeed`, features `torch`
//! and `cuda`) compiles and launches them; where it cannot, the generated CPU twin runs.
//!
//! The kernel ABI: `NAME(const IN* in, OUT* out, unsigned long long n,
//! unsigned long long epoch, unsigned long long batch_index, unsigned long long row0,
//! unsigned long long seed0, ...)`: `in` holds rows `row0..` of the pass's batch
//! `batch_index` (a device's part of a global batch), thread `i < n` writes `out[i]`.

/// The device tail of one pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceTail {
    /// The pipeline's name.
    pub pipeline: &'static str,
    /// One kernel per column the tail changes; other columns are only copied.
    pub kernels: Vec<TailKernel>,
}

/// One generated kernel of a device tail.
#[derive(Debug, Clone, PartialEq)]
pub struct TailKernel {
    /// The kernel's C name (unique in the program: the pipeline's name first).
    pub name: &'static str,
    /// The batch column it computes from the same column of the host batch.
    pub field: &'static str,
    /// Its CUDA C source, Philox included: NVRTC compiles it as it is.
    pub source: &'static str,
    /// The host column's value type (`u8`, `f32`, … as in `.pipe` files).
    pub in_dtype: &'static str,
    /// One host row's shape.
    pub in_shape: &'static [usize],
    /// The output column's value type.
    pub out_dtype: &'static str,
    /// One output row's shape.
    pub out_shape: &'static [usize],
    /// The `seed{k}` arguments, in order.
    pub seeds: Vec<u64>,
    /// For a kernel starting with `one_hot(depth)`: every host value must lie in
    /// `0..depth`. The kernel cannot report an error, so the device feed checks the host
    /// column before the copy and fails as the CPU twin does.
    pub in_range: Option<(i64, i64)>,
}

impl DeviceTail {
    /// The kernel computing column `field`, if the tail changes it.
    pub fn kernel(&self, field: &str) -> Option<&TailKernel> {
        self.kernels.iter().find(|k| k.field == field)
    }
}

impl TailKernel {
    /// Values in one input row.
    pub fn in_row_len(&self) -> usize {
        self.in_shape.iter().product()
    }

    /// Values in one output row.
    pub fn out_row_len(&self) -> usize {
        self.out_shape.iter().product()
    }
}
