//! The generator of `PackExec`: each element's packed fields as the runtime `pack`
//! stage's sequences (moved, not copied), and each packed row as the record of the
//! rows' type (`i32[N]` tensors: the packed fields, `segment_ids`, `positions`).

use proc_macro2::{Ident, Literal, TokenStream};
use quote::quote;

use super::context::{Gen, R};
use super::types::field_ident;
use crate::ir::pack::{PackOverflow, PackSpec};
use crate::ir::plan::FieldType;

impl Gen<'_> {
    /// `let ds = __sl::pack(...)` for a `PackExec` over records of `from`.
    pub(super) fn pack(&mut self, from: &[FieldType], spec: &PackSpec) -> R<TokenStream> {
        let a = self.record(from)?;
        let b = self.record(spec.element().fields())?;
        let names: Vec<Ident> = spec.fields.iter().map(|f| field_ident(f)).collect();
        let k = Literal::usize_unsuffixed(names.len());
        let length = usize::try_from(spec.length).map_err(|_| "a `pack` length beyond this machine")?;
        let window = usize::try_from(spec.window).map_err(|_| "a `pack` window beyond this machine")?;
        let overflow = match spec.overflow {
            PackOverflow::Split => quote!(__sl::Overflow::Split),
            PackOverflow::Error => quote!(__sl::Overflow::Error),
        };
        Ok(quote! {
            let ds = __sl::pack(
                ds.map(|x: #a| ::std::vec![#(x.#names),*]).named("pack_input"),
                #k,
                __sl::PackOptions { length: #length, window: #window, overflow: #overflow },
            )
            .map(|r: __sl::PackedRow| {
                let mut f = r.fields.into_iter();
                #b {
                    #(#names: __sl::Tensor::from_vec(f.next().unwrap_or_default()),)*
                    segment_ids: __sl::Tensor::from_vec(r.segment_ids),
                    positions: __sl::Tensor::from_vec(r.positions),
                }
            })
            .named("pack_output");
        })
    }
}
