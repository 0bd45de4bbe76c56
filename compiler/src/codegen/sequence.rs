//! The schema-specialised `tf.train.SequenceExample` parser (`parse_sequence_example`):
//! one record into its context features and feature lists. It walks the context's map
//! once (decoding each declared context feature as the `Example` parser does) and the
//! feature lists' map once, then decodes each declared list step by step straight into
//! its value: `T[]` (one value a step) into a `Vec<T>`, `T[steps, d, ...]` into a
//! `Tensor<T>` of shape `[steps, d, ...]`.

use proc_macro2::Ident;
use quote::{format_ident, quote};

use super::context::{Gen, R};
use super::types::{fixed_dims, scalar};
use crate::ir::plan::FieldType;
use crate::ir::types::{Dim, Shape, TensorType};

/// How a feature list's steps are held: values a step, the fixed dimensions after the
/// steps (`None`: `T[]`, a `Vec<T>`), and the name of its steps dimension, if it has one.
type StepShape<'t> = (usize, Option<Vec<usize>>, Option<&'t str>);

/// The [`StepShape`] of a feature list of type `ty`.
fn step_shape(ty: &TensorType) -> R<StepShape<'_>> {
    match &ty.shape {
        Shape::Var => Ok((1, None, None)),
        Shape::Dims(d) => match d.split_first() {
            Some((Dim::Named(steps), rest)) => {
                let step = TensorType { dtype: ty.dtype, shape: Shape::Dims(rest.to_vec()) };
                let dims = fixed_dims(&step).ok_or("a feature list step of named sizes")?;
                Ok((dims.iter().product(), Some(dims), Some(steps)))
            }
            _ => Err(format!("a feature list of type `{ty}`")),
        },
    }
}

impl Gen<'_> {
    /// `parse_sequence_N(record) -> (field values...)`: the parser of one
    /// `tf.train.SequenceExample`.
    pub(super) fn parse_sequence_fn(&mut self, fields: &[FieldType]) -> R<Ident> {
        let name = self.fresh("parse_sequence");
        let is_list = |f: &FieldType| self.decls.schema.iter().any(|d| d.name == f.name && d.sequence);
        let (lists, context): (Vec<FieldType>, Vec<FieldType>) = fields.iter().cloned().partition(is_list);
        // The context: an `Example`'s features (field 1 of both messages), decoded alike.
        let ctx_entries: Vec<Ident> = context.iter().map(|f| format_ident!("e_{}", f.name)).collect();
        let ctx_strs: Vec<&str> = context.iter().map(|f| f.name.as_str()).collect();
        let (_, ctx_values) = self.feature_values(&context)?;
        let ctx_locals: Vec<Ident> = context.iter().map(|f| format_ident!("v_{}", f.name)).collect();
        // The feature lists: one walk of their map, then each declared list's steps.
        let entries: Vec<Ident> = lists.iter().map(|f| format_ident!("l_{}", f.name)).collect();
        let strs: Vec<&str> = lists.iter().map(|f| f.name.as_str()).collect();
        let mut tys = Vec::new();
        let mut decode = Vec::new();
        let mut firsts: Vec<(&str, &str)> = Vec::new();
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped")?;
            let t = scalar(ty.dtype);
            let (s, v) = (f.name.as_str(), format_ident!("v_{}", f.name));
            if !is_list(f) {
                tys.push(self.feature_values(std::slice::from_ref(f))?.0.remove(0));
                continue;
            }
            let l = format_ident!("l_{}", f.name);
            let (width, dims, steps) = step_shape(ty)?;
            let values = quote!(let mut v = ::std::vec::Vec::new(); let n = __sl::parse::steps::<#t>(#s, #l, #width, &mut v)?;);
            match dims {
                None => {
                    tys.push(quote!(::std::vec::Vec<#t>));
                    decode.push(quote!(let #v = { #values let _ = n; v };));
                }
                Some(dims) => {
                    tys.push(quote!(__sl::Tensor<#t>));
                    decode.push(
                        quote!(let #v = { #values __sl::Tensor::new(::std::vec![n #(, #dims)*], v)? };),
                    );
                }
            }
            // Lists that name the same steps dimension have as many steps.
            let Some(steps) = steps else { continue };
            match firsts.iter().find(|(_, d)| *d == steps) {
                None => firsts.push((s, steps)),
                Some((first, _)) => {
                    let w = format_ident!("v_{}", first);
                    decode.push(quote! {
                        if #w.shape()[0] != #v.shape()[0] {
                            return ::std::result::Result::Err(::std::format!(
                                "feature lists `{}` and `{}` share dimension `{}` but have {} and {} steps",
                                #first, #s, #steps, #w.shape()[0], #v.shape()[0]
                            ).into());
                        }
                    });
                }
            }
        }
        let out: Vec<Ident> = fields.iter().map(|f| format_ident!("v_{}", f.name)).collect();
        self.items.extend(quote! {
            /// Parses one serialized `tf.train.SequenceExample`: only the declared context
            /// features and feature lists, each straight into its value.
            fn #name<'a>(record: &'a [u8]) -> ::std::result::Result<(#(#tys,)*), __sl::BoxError> {
                let view = __sl::parse::SequenceView::new(record);
                #( let mut #ctx_entries = ::std::option::Option::None; )*
                for entry in view.context() {
                    let entry = entry.map_err(__sl::parse::malformed_sequence)?;
                    match entry.name() {
                        #( #ctx_strs => #ctx_entries = ::std::option::Option::Some(entry), )*
                        _ => {}
                    }
                }
                let (#(#ctx_locals,)*) = (|| -> ::std::result::Result<_, __sl::BoxError> {
                    ::std::result::Result::Ok((#(#ctx_values,)*))
                })().map_err(__sl::parse::in_sequence_boxed)?;
                #( let mut #entries = ::std::option::Option::None; )*
                for entry in view.feature_lists() {
                    let entry = entry.map_err(__sl::parse::malformed_sequence)?;
                    match entry.name() {
                        #( #strs => #entries = ::std::option::Option::Some(entry), )*
                        _ => {}
                    }
                }
                #(#decode)*
                ::std::result::Result::Ok((#(#out,)*))
            }
        });
        Ok(name)
    }
}
