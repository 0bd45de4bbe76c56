//! The code of `unbatch` of records (`UnbatchFieldsExec`): a generated function splitting
//! one record into its rows, every field along its first dimension (a list into its
//! values, a tensor of one dimension into its values, of more into tensors of the rest),
//! their lengths checked equal (`row_count`), run by the runtime's `unbatch_fields`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::context::{Gen, R};
use super::types::{Repr, field_ident, repr};
use crate::ir::plan::FieldType;
use crate::ir::types::Shape;

impl Gen<'_> {
    /// `let ds = __sl::unbatch_fields(ds, split);` from records `from` to records `to`.
    pub(super) fn unbatch_fields(&mut self, from: &[FieldType], to: &[FieldType]) -> R<TokenStream> {
        let (rec_in, rec_out) = (self.record(from)?, self.record(to)?);
        let name = self.fresh("unbatch");
        let mut lens = Vec::new();
        let mut iters = Vec::new();
        let mut takes = Vec::new();
        let mut sets = Vec::new();
        for (k, f) in from.iter().enumerate() {
            let ty = f.ty.as_ref().ok_or_else(|| format!("untyped field `{}`", f.name))?;
            let (id, s) = (field_ident(&f.name), f.name.as_str());
            let (rows, v) = (format_ident!("__rows{}", k), format_ident!("__v{}", k));
            let (len, iter) = match repr(ty)? {
                Repr::List => (quote!(x.#id.len()), quote!(x.#id.into_iter())),
                Repr::Tensor if matches!(&ty.shape, Shape::Dims(d) if d.len() == 1) => {
                    (quote!(__sl::tensor_len(&x.#id)), quote!(x.#id.into_parts().1.into_iter()))
                }
                Repr::Tensor => {
                    (quote!(__sl::tensor_len(&x.#id)), quote!(__sl::tensor_rows(x.#id)?.into_iter()))
                }
                r => return Err(format!("`unbatch` of field `{}` held as {r:?}", f.name)),
            };
            lens.push(quote!((#s, #len)));
            iters.push(quote!(let mut #rows = #iter;));
            takes.push(quote!(let ::std::option::Option::Some(#v) = #rows.next() else { break };));
            sets.push(quote!(#id: #v));
        }
        self.items.extend(quote! {
            fn #name(x: #rec_in) -> ::std::result::Result<::std::vec::Vec<#rec_out>, __sl::BoxError> {
                let n = __sl::row_count(&[#(#lens),*])?;
                #(#iters)*
                let mut out = ::std::vec::Vec::with_capacity(n);
                for _ in 0..n {
                    #(#takes)*
                    out.push(#rec_out { #(#sets,)* });
                }
                ::std::result::Result::Ok(out)
            }
        });
        Ok(quote!(let ds = __sl::unbatch_fields(ds, #name);))
    }
}
