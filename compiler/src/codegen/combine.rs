//! The generators of the combining stages: `enumerate` (the runtime's `enumerate` and a
//! map adding `index`), and the sources of other pipelines `zip` (nested pairs of the
//! inputs' elements, their fields moved into one record, or their columns into one
//! batch) and `concatenate` (each input converted to this module's record type,
//! chained).

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::context::{Gen, R, arg_tokens};
use super::types::field_ident;
use crate::ir::plan::{ArgValue, Concatenate, Element, FieldType, Zip};

impl Gen<'_> {
    /// `enumerate`: `index` is the pass position plus `start`, wrapping as i64 arithmetic.
    pub(super) fn enumerate(
        &mut self,
        from: &[FieldType],
        to: &[FieldType],
        start: &ArgValue,
    ) -> R<TokenStream> {
        let (a, b) = (self.record(from)?, self.record(to)?);
        let names: Vec<Ident> = from.iter().map(|f| field_ident(&f.name)).collect();
        let start = arg_tokens(start, quote!(i64))?;
        Ok(quote! {
            let ds = {
                let start: i64 = #start;
                ds.enumerate()
                    .map(move |x: __sl::Indexed<#a>| #b { #(#names: x.value.#names,)* index: start.wrapping_add(x.index as i64) })
                    .named("enumerate")
            };
        })
    }

    /// `zip(a, b, c)`: `zip(zip(a, b), c)`, each element `((x0, x1), x2)` moved into one
    /// record; of batches, `zip_batches` (equal sizes checked), the columns moved into one
    /// batch.
    pub(super) fn zip(&mut self, z: &Zip) -> R<TokenStream> {
        let batched = matches!(z.output, Element::Batch(_));
        let zip_fn = if batched { quote!(__sl::zip_batches) } else { quote!(__sl::zip) };
        let mut chain: Option<(TokenStream, TokenStream)> = None;
        let mut moves = Vec::new();
        for (k, (name, element)) in z.inputs.iter().zip(&z.elements).enumerate() {
            let id = field_ident(name);
            let x = format_ident!("x{}", k);
            let d = quote!(super::#id::dataset(&__params.#id)?);
            chain = Some(match chain {
                None => (d, quote!(#x)),
                Some((ds, pat)) => (quote!(#zip_fn(#ds, #d)), quote!((#pat, #x))),
            });
            for f in element.fields() {
                let f = field_ident(&f.name);
                moves.push(quote!(#f: #x.#f));
            }
        }
        let (ds, pat) = chain.ok_or("a zip of no pipelines")?;
        let rec = if batched { self.batch(z.output.fields())? } else { self.record(z.output.fields())? };
        Ok(quote!(let ds = #ds.map(|#pat| #rec { #(#moves,)* }).named("zip");))
    }

    /// `concatenate(a, b, c)`: `concatenate(concatenate(a, b), c)`.
    pub(super) fn concatenate(&mut self, c: &Concatenate) -> R<TokenStream> {
        let mut chain: Option<TokenStream> = None;
        for name in &c.inputs {
            let id = field_ident(name);
            let conv = self.convert_from(name, &c.output)?;
            let d = quote!(super::#id::dataset(&__params.#id)? #conv);
            chain = Some(match chain {
                None => d,
                Some(ds) => quote!(__sl::concatenate(#ds, #d)),
            });
        }
        let ds = chain.ok_or("a concatenation of no pipelines")?;
        Ok(quote!(let ds = #ds;))
    }
}
