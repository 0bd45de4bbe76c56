//! The code of `flat_map` (`FlatMapExec`): a closure that makes each input element's
//! inner chain, its statements printed by the same generators as a pipeline's, over the
//! inner source (`InnerSourceExec`) that a generated function makes from the element:
//! `range_step` with bounds computed from its fields (and its `keep` fields cloned into
//! each value), or `from_vec` of the rows of its sliced fields (lengths checked equal,
//! `slice_len`).

use proc_macro2::TokenStream;
use quote::quote;

use super::context::{Gen, R};
use super::expr::{Scope, local};
use super::types::{Repr, field_ident, repr};
use crate::ir::flat_map::{InnerKind, InnerSource};
use crate::ir::plan::{Element, FieldType};
use crate::ir::types::{DType, Shape};
use crate::physical::{Exec, ExecNode};

impl Gen<'_> {
    /// `let ds = __sl::flat_map(ds, move |x| { inner chain });` over elements `from`.
    pub(super) fn flat_map(&mut self, from: &[FieldType], inner: &[ExecNode]) -> R<TokenStream> {
        let rec = self.record(from)?;
        // The inner source reads the element as the flat_map receives it, whose fields
        // may be more than the source's own view of it (`InnerSource::outer`, pruned).
        let stmts = match inner.split_first() {
            Some((first, rest)) if matches!(first.exec, Exec::InnerSource(_)) => {
                let Exec::InnerSource(s) = &first.exec else { unreachable!() };
                let mut stmts = self.inner_source(s, Some(from))?;
                stmts.extend(self.chain(rest)?);
                stmts
            }
            _ => self.chain(inner)?,
        };
        Ok(quote! {
            let ds = {
                let __outer = __params.clone();
                __sl::flat_map(ds, move |x: #rec| -> ::std::result::Result<_, __sl::BoxError> {
                    let __params = __outer.clone();
                    #stmts
                    ::std::result::Result::Ok(ds)
                })
            };
        })
    }

    /// `let ds = ...;` the inner source made from the element `x`, of fields `from` (the
    /// flat_map's input; `None`: the source's own `outer`).
    pub(super) fn inner_source(&mut self, s: &InnerSource, from: Option<&[FieldType]>) -> R<TokenStream> {
        let (Element::Fields(outer), Element::Fields(out)) = (&s.outer, &s.output) else {
            return Err("a flat_map's source is made from fields, into fields".into());
        };
        let outer: &[FieldType] = from.unwrap_or(outer);
        let rec_in = self.record(outer)?;
        let rec_out = self.record(out)?;
        let name = self.fresh("inner");
        match &s.kind {
            InnerKind::Range { start, end, step, keep } => {
                let mut next_rng = self.next_rng;
                let mut scope = Scope::new(outer.to_vec(), self.decls, &mut next_rng);
                let bounds = [
                    scope.scalar(start, DType::I64)?,
                    scope.scalar(end, DType::I64)?,
                    scope.scalar(step, DType::I64)?,
                ];
                self.next_rng = next_rng;
                let reads = s.reads();
                let binds: Vec<TokenStream> = reads
                    .iter()
                    .map(|f| {
                        let (l, id) = (local(f), field_ident(f));
                        quote!(let #l = x.#id.clone();)
                    })
                    .collect();
                let [a, b, c] = bounds;
                self.items.extend(quote! {
                    fn #name(p: &Params, x: &#rec_in) -> ::std::result::Result<(i64, i64, i64), __sl::BoxError> {
                        #(#binds)*
                        ::std::result::Result::Ok((#a, #b, #c))
                    }
                });
                // The kept fields move out of the element, then are cloned into each value.
                let ids: Vec<_> = keep.iter().map(|k| field_ident(k)).collect();
                let locals: Vec<_> = keep.iter().map(|k| local(k)).collect();
                Ok(quote! {
                    let (start, end, step) = #name(&__params, &x)?;
                    #(let #locals = x.#ids;)*
                    let ds = __sl::range_step(start, end, step)
                        .map(move |value: i64| #rec_out { value, #(#ids: #locals.clone(),)* });
                })
            }
            InnerKind::Slices { fields, keep } => {
                let mut lens = Vec::new();
                let mut iters = Vec::new();
                let mut vals = Vec::new();
                for f in fields {
                    let ty = outer
                        .iter()
                        .find(|x| &x.name == f)
                        .and_then(|x| x.ty.clone())
                        .ok_or_else(|| format!("sliced field `{f}` is not in the element"))?;
                    let (id, l) = (field_ident(f), local(f));
                    let (len, rows) = match repr(&ty)? {
                        Repr::List => (quote!(x.#id.len()), quote!(x.#id.into_iter())),
                        Repr::Tensor if matches!(&ty.shape, Shape::Dims(d) if d.len() == 1) => {
                            (quote!(__sl::tensor_len(&x.#id)), quote!(x.#id.into_parts().1.into_iter()))
                        }
                        Repr::Tensor => {
                            (quote!(__sl::tensor_len(&x.#id)), quote!(__sl::tensor_rows(x.#id)?.into_iter()))
                        }
                        r => return Err(format!("`slices` of field `{f}` held as {r:?}")),
                    };
                    lens.push(quote!((#f, #len)));
                    iters.push(quote!(let mut #l = #rows;));
                    vals.push((id, l));
                }
                let takes: Vec<TokenStream> = vals
                    .iter()
                    .map(|(_, l)| quote!(let ::std::option::Option::Some(#l) = #l.next() else { break };))
                    .collect();
                let sets: Vec<TokenStream> = vals.iter().map(|(id, l)| quote!(#id: #l,)).collect();
                let kept: Vec<TokenStream> = keep
                    .iter()
                    .map(|k| {
                        let id = field_ident(k);
                        quote!(#id: x.#id.clone(),)
                    })
                    .collect();
                self.items.extend(quote! {
                    fn #name(p: &Params, x: #rec_in) -> ::std::result::Result<::std::vec::Vec<#rec_out>, __sl::BoxError> {
                        let n = __sl::slice_len(&[#(#lens),*])?;
                        #(#iters)*
                        let mut rows = ::std::vec::Vec::with_capacity(n);
                        for _ in 0..n {
                            #(#takes)*
                            rows.push(#rec_out { #(#sets)* #(#kept)* });
                        }
                        ::std::result::Result::Ok(rows)
                    }
                });
                Ok(quote!(let ds = __sl::from_vec(#name(&__params, x)?);))
            }
        }
    }
}
