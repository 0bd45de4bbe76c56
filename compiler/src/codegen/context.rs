//! What the generators of one pipeline's module share: the record and batch types made
//! so far, the items (functions) generated so far, fresh names, and how arguments are
//! read in `dataset()`.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use super::Unit;
use super::types::{Repr, field_ident, record_items, repr};
use crate::ir::bucket::PaddingValues;
use crate::ir::decls::Declarations;
use crate::ir::plan::{ArgValue, Element, FieldType};
use crate::ir::types::{DType, Dim, Shape, Value};

/// A generator's result: the error is what it cannot handle (`E0600`).
pub(super) type R<T> = Result<T, String>;

/// The generator of one pipeline's module.
pub(super) struct Gen<'a> {
    pub(super) decls: &'a Declarations,
    /// The tokens of the pipeline's Rust code, by a `RustStage`'s `code_index`.
    pub(super) rust_code: &'a [TokenStream],
    pub(super) all: &'a [Unit<'a>],
    /// Distinct record types: fields, whether batched, whether file-cached.
    pub(super) records: Vec<(Vec<FieldType>, bool, bool)>,
    pub(super) items: TokenStream,
    pub(super) next_fn: usize,
    pub(super) next_rng: u64,
    /// Whether the last row body generated draws random numbers.
    pub(super) last_random: bool,
    /// Whether `parse_example` / `parse_examples` (the public parsers) exist yet.
    pub(super) public_parse: bool,
    pub(super) public_columns: bool,
    /// Whether the chain's elements so far are `read_file`'s, their `path` field the file
    /// each came from: a map over them names it in its errors.
    pub(super) from_file: bool,
}

/// How an argument is read in `dataset()`.
pub(super) fn arg_tokens(v: &ArgValue, as_ty: TokenStream) -> R<TokenStream> {
    match v {
        ArgValue::Const(Value::Int(n)) => {
            let l = Literal::i64_unsuffixed(*n);
            Ok(quote!((#l as #as_ty)))
        }
        ArgValue::Const(Value::UInt(n)) | ArgValue::Const(Value::Bytes(n)) => {
            let l = Literal::u64_unsuffixed(*n);
            Ok(quote!((#l as #as_ty)))
        }
        ArgValue::Const(Value::Float(x)) => {
            let l = Literal::f64_unsuffixed(*x);
            Ok(quote!((#l as #as_ty)))
        }
        ArgValue::Const(Value::Bool(b)) => Ok(quote!(#b)),
        ArgValue::Const(Value::Str(s)) => Ok(quote!(#s)),
        ArgValue::Param(p) => {
            let id = field_ident(p);
            Ok(quote!((__params.#id as #as_ty)))
        }
        other => Err(format!("argument `{other}` where a value is needed")),
    }
}

pub(super) fn usize_arg(v: &ArgValue) -> R<TokenStream> {
    arg_tokens(v, quote!(usize))
}

pub(super) fn u64_arg(v: &ArgValue) -> R<TokenStream> {
    arg_tokens(v, quote!(u64))
}

pub(super) fn parallel(v: &ArgValue) -> R<TokenStream> {
    match v {
        ArgValue::Auto => Ok(quote!(__sl::Parallelism::Auto)),
        v => {
            let n = usize_arg(v)?;
            Ok(quote!(__sl::Parallelism::Fixed(#n)))
        }
    }
}

pub(super) fn seed(v: &Option<ArgValue>) -> R<TokenStream> {
    match v {
        Some(v) => u64_arg(v),
        None => Ok(quote!(__sl::abi::fresh_seed())),
    }
}

pub(super) fn string_arg(v: &ArgValue) -> R<TokenStream> {
    match v {
        ArgValue::Const(Value::Str(s)) => Ok(quote!(#s)),
        ArgValue::Param(p) => {
            let id = field_ident(p);
            Ok(quote!(__params.#id.as_str()))
        }
        other => Err(format!("`{other}` where a path or glob is needed")),
    }
}

/// A generated map function and whether it draws random numbers.
pub(super) struct MapFn {
    pub(super) name: Ident,
    pub(super) random: bool,
    /// It takes its input by reference (a serialized record).
    pub(super) by_ref: bool,
}

impl Gen<'_> {
    pub(super) fn record_index(&mut self, fields: &[FieldType]) -> usize {
        if let Some(i) = self.records.iter().position(|(f, _, _)| f == fields) {
            return i;
        }
        self.records.push((fields.to_vec(), false, false));
        self.records.len() - 1
    }

    pub(super) fn record(&mut self, fields: &[FieldType]) -> R<Ident> {
        for f in fields {
            repr(f.ty.as_ref().ok_or("an untyped field")?).map_err(|e| format!("field `{}`: {e}", f.name))?;
        }
        Ok(format_ident!("Record{}", self.record_index(fields)))
    }

    pub(super) fn batch(&mut self, fields: &[FieldType]) -> R<Ident> {
        self.record(fields)?;
        let i = self.record_index(fields);
        self.records[i].1 = true;
        Ok(format_ident!("Batch{}", i))
    }

    /// The Rust type of elements of type `e`.
    pub(super) fn item_type(&mut self, e: &Element) -> R<TokenStream> {
        Ok(match e {
            Element::Path => quote!(::std::path::PathBuf),
            Element::Record => quote!(__sl::Record),
            Element::Fields(f) => {
                let r = self.record(f)?;
                quote!(#r)
            }
            Element::Batch(inner) => match &**inner {
                Element::Record => quote!(__sl::RecordBatch),
                Element::Fields(f) => {
                    let b = self.batch(f)?;
                    quote!(#b)
                }
                other => {
                    let t = self.item_type(other)?;
                    quote!(::std::vec::Vec<#t>)
                }
            },
        })
    }

    pub(super) fn record_defs(&self) -> TokenStream {
        let mut out = TokenStream::new();
        for (k, (fields, batched, cached)) in self.records.iter().enumerate() {
            out.extend(record_items(k, fields, *batched, *cached));
        }
        out
    }

    /// `Record` / `Batch` aliases for the output's types.
    pub(super) fn aliases(&self, out: &Element) -> TokenStream {
        let find = |f: &[FieldType]| self.records.iter().position(|(g, _, _)| g == f);
        match out {
            Element::Fields(f) => find(f).map_or_else(TokenStream::new, |k| {
                let r = format_ident!("Record{}", k);
                quote!(/// The element type. 
                    pub type Record = #r;)
            }),
            Element::Batch(inner) => match &**inner {
                Element::Fields(f) => find(f).map_or_else(TokenStream::new, |k| {
                    let (r, b) = (format_ident!("Record{}", k), format_ident!("Batch{}", k));
                    quote!(/// One row of a batch.
                        pub type Record = #r;
                        /// A batch.
                        pub type Batch = #b;)
                }),
                _ => TokenStream::new(),
            },
            _ => TokenStream::new(),
        }
    }

    pub(super) fn fresh(&mut self, what: &str) -> Ident {
        self.next_fn += 1;
        format_ident!("{}_{}", what, self.next_fn)
    }

    /// `.map(...)` converting the elements of pipeline `name` to this module's types.
    pub(super) fn convert_from(&mut self, name: &str, e: &Element) -> R<TokenStream> {
        let id = field_ident(name);
        Ok(match e {
            Element::Fields(f) => {
                let r = self.record(f)?;
                let names: Vec<Ident> = f.iter().map(|x| field_ident(&x.name)).collect();
                quote!(.map(|x: super::#id::Item| #r { #(#names: x.#names,)* }))
            }
            Element::Batch(inner) if matches!(**inner, Element::Fields(_)) => {
                let Element::Fields(f) = &**inner else { unreachable!() };
                let b = self.batch(f)?;
                let names: Vec<Ident> = f.iter().map(|x| field_ident(&x.name)).collect();
                quote!(.map(|x: super::#id::Item| #b { #(#names: x.#names,)* }))
            }
            _ => TokenStream::new(),
        })
    }

    /// The padding of `padded_batch` for record `fields`.
    pub(super) fn padding(
        &mut self,
        fields: &[FieldType],
        pad_to: Option<&ArgValue>,
        pad_to_multiple: Option<&ArgValue>,
        values: &PaddingValues,
    ) -> R<TokenStream> {
        let k = self.record_index(fields);
        let padding = format_ident!("Padding{}", k);
        let mut inits = Vec::new();
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped field")?;
            let id = field_ident(&f.name);
            let value = pad_value(values.get(&f.name), ty.dtype)?;
            match repr(ty)? {
                Repr::List => inits.push(match (pad_to, pad_to_multiple) {
                    (Some(v), _) => {
                        let n = usize_arg(v)?;
                        quote!(#id: __sl::PadLen::to(#n, #value))
                    }
                    (None, Some(m)) => {
                        let m = usize_arg(m)?;
                        quote!(#id: __sl::PadLen::longest(#value).multiple_of(#m))
                    }
                    (None, None) => quote!(#id: __sl::PadLen::longest(#value)),
                }),
                Repr::Tensor => inits.push(quote!(#id: __sl::PadShape::longest(#value))),
                _ => {}
            }
        }
        Ok(quote!(#padding { #(#inits,)* }))
    }

    /// The padding of `bucket_by_length`'s bucket with `boundary` (`None`: the last
    /// bucket, or without `pad_to_bucket_boundary`): every variable dimension to
    /// `boundary - 1`, as tf.data's `pad_to_bucket_boundary`, or to the longest.
    pub(super) fn bucket_padding(
        &mut self,
        fields: &[FieldType],
        boundary: Option<u64>,
        values: &PaddingValues,
    ) -> R<TokenStream> {
        let k = self.record_index(fields);
        let padding = format_ident!("Padding{}", k);
        let fill =
            boundary.map(|b| usize::try_from(b - 1).map_err(|_| "a bucket boundary beyond this machine"));
        let fill = fill.transpose()?;
        let mut inits = Vec::new();
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped field")?;
            let id = field_ident(&f.name);
            let zero = pad_value(values.get(&f.name), ty.dtype)?;
            match (repr(ty)?, fill, &ty.shape) {
                (Repr::List, Some(n), _) => inits.push(quote!(#id: __sl::PadLen::to(#n, #zero))),
                (Repr::List, None, _) => inits.push(quote!(#id: __sl::PadLen::longest(#zero))),
                (Repr::Tensor, Some(n), Shape::Dims(dims)) => {
                    let dims = dims.iter().map(|d| match d {
                        Dim::Fixed(_) => quote!(::core::option::Option::None),
                        Dim::Named(_) => quote!(::core::option::Option::Some(#n)),
                    });
                    inits.push(quote!(#id: __sl::PadShape::to(::std::vec![#(#dims),*], #zero)))
                }
                (Repr::Tensor, ..) => inits.push(quote!(#id: __sl::PadShape::longest(#zero))),
                _ => {}
            }
        }
        Ok(quote!(#padding { #(#inits,)* }))
    }
}

/// The value a field of `dtype` pads with: the constant given (sema checked it fits the
/// dtype) as a literal of the field's type, or the type's default (0, `false`).
fn pad_value(v: Option<&Value>, dtype: DType) -> R<TokenStream> {
    let t = super::types::scalar(dtype);
    Ok(match v {
        None => quote!(::core::default::Default::default()),
        Some(Value::Bool(b)) => quote!(#b),
        Some(Value::Int(n)) if dtype.is_float() => {
            let l = Literal::f64_unsuffixed(*n as f64);
            quote!((#l as #t))
        }
        Some(Value::Int(n)) => {
            let l = Literal::i64_unsuffixed(*n);
            quote!((#l as #t))
        }
        Some(Value::UInt(n)) => {
            let l = Literal::u64_unsuffixed(*n);
            quote!((#l as #t))
        }
        Some(Value::Float(x)) => {
            let l = Literal::f64_unsuffixed(*x);
            quote!((#l as #t))
        }
        Some(other) => return Err(format!("padding value `{other}` is not a number")),
    })
}
