//! The device tail of a `device cuda` pipeline: its CPU twin (a map over the batches)
//! and its kernels, with the `DeviceTail` value the runtime's feed launches them from.

use proc_macro2::TokenStream;
use quote::quote;

use super::context::{Gen, R, u64_arg};
use crate::ir::plan::ArgValue;
use crate::physical::DeviceTailExec;

/// The code of a device tail: the host batches' type, the CPU twin's stage and the
/// `DeviceTail` value.
pub(super) struct DeviceCode {
    pub(super) host_item: TokenStream,
    pub(super) twin: TokenStream,
    pub(super) tail: TokenStream,
}

impl Gen<'_> {
    /// The device tail of pipeline `name` on the host's batches: its CPU twin (a map over
    /// the batches running the tail's operations as generated Rust) and its kernels,
    /// whose random operations draw as the twin's (the same ids, in the same order).
    pub(super) fn device_tail(
        &mut self,
        name: &str,
        t: &DeviceTailExec,
    ) -> R<(DeviceCode, Vec<crate::ir::kernel::Kernel>)> {
        let host_item = self.item_type(&t.input)?;
        let base = self.next_rng;
        let twin = if t.ops.is_empty() {
            TokenStream::new()
        } else {
            let f = self.map_fn(&t.input, &t.ops, &t.output)?;
            self.apply(&f, &ArgValue::Auto, true, None, false)?
        };
        let (mut kernels, mut generated) = (Vec::new(), Vec::new());
        for k in &t.kernels {
            let mut k = k.clone();
            k.name = format!("{name}_{}", k.name);
            for op in &mut k.ops {
                if let crate::ir::kernel::KernelOp::RandomCrop { op, .. }
                | crate::ir::kernel::KernelOp::RandomFlip { op, .. } = op
                {
                    *op += base;
                }
            }
            let source = k.source().map_err(|e| format!("the kernel of `{}`: {e}", k.field))?;
            let (out_shape, out_dtype) = k.output()?;
            let seeds = k
                .seeds
                .iter()
                .map(|s| match s {
                    crate::ir::kernel::KernelSeed::Const(v) => Ok(quote!(#v)),
                    crate::ir::kernel::KernelSeed::Param(p) => u64_arg(&ArgValue::Param(p.clone())),
                    crate::ir::kernel::KernelSeed::Run => Ok(quote!(__sl::abi::run_seed())),
                })
                .collect::<R<Vec<_>>>()?;
            let (kname, field, in_dtype, out_dtype) = (&k.name, &k.field, k.dtype.name(), out_dtype.name());
            let (in_shape, out_shape) = (&k.shape, &out_shape);
            let in_range =
                match k.ops.iter().find(|op| !matches!(op, crate::ir::kernel::KernelOp::RandomFlip { .. })) {
                    Some(crate::ir::kernel::KernelOp::OneHot(depth)) => {
                        let depth = *depth as i64;
                        quote!(::std::option::Option::Some((0, #depth)))
                    }
                    _ => quote!(::std::option::Option::None),
                };
            generated.push(k.clone());
            kernels.push(quote! {
                __sl::abi::TailKernel {
                    name: #kname,
                    field: #field,
                    source: #source,
                    in_dtype: #in_dtype,
                    in_shape: &[#(#in_shape),*],
                    out_dtype: #out_dtype,
                    out_shape: &[#(#out_shape),*],
                    seeds: ::std::vec![#(#seeds),*],
                    in_range: #in_range,
                }
            });
        }
        let tail = quote!(__sl::abi::DeviceTail { pipeline: NAME, kernels: ::std::vec![#(#kernels),*] });
        Ok((DeviceCode { host_item, twin, tail }, generated))
    }
}
