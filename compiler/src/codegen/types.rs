//! Rust types of pipeline values, and the record and batch structs generated for each
//! element type with fields (with their `Element`, `Rows`, `Show`, `ToPython`, `Batchable`, `Columns`
//! and `ColumnBuilder` impls, written field by field as `runtime/src/column/mod.rs`
//! describes).

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use crate::ir::plan::FieldType;
use crate::ir::types::{DType, Dim, Shape, TensorType};

/// How a value is held in generated code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    /// A number: `T`.
    Scalar,
    /// A variable-length list: `Vec<T>`.
    List,
    /// A tensor of one or more dimensions: `Tensor<T>`.
    Tensor,
    /// One byte string: `Vec<u8>` in a record, `&[u8]` while parsing.
    Bytes,
    /// One UTF-8 string: `String`.
    Str,
}

/// How `ty` is held, or why it cannot be yet.
pub fn repr(ty: &TensorType) -> Result<Repr, String> {
    match ty.dtype {
        DType::F16 | DType::Bf16 => {
            return Err(format!("`{}` values are not supported by the code generator yet", ty.dtype.name()));
        }
        DType::Bytes | DType::Str => {
            return match (ty.shape == Shape::scalar(), ty.dtype) {
                (true, DType::Bytes) => Ok(Repr::Bytes),
                (true, _) => Ok(Repr::Str),
                (false, DType::Bytes) => {
                    Err("lists of byte strings are not supported by the code generator yet".into())
                }
                (false, _) => Err("lists of strings are not supported by the code generator yet".into()),
            };
        }
        _ => {}
    }
    Ok(match &ty.shape {
        Shape::Var => Repr::List,
        Shape::Dims(d) if d.is_empty() => Repr::Scalar,
        Shape::Dims(_) => Repr::Tensor,
    })
}

/// The Rust scalar type of a numeric dtype.
pub fn scalar(dtype: DType) -> TokenStream {
    match dtype {
        DType::Bool => quote!(bool),
        DType::U8 | DType::Bytes | DType::Str => quote!(u8),
        DType::I32 => quote!(i32),
        DType::U32 => quote!(u32),
        DType::I64 => quote!(i64),
        DType::U64 => quote!(u64),
        DType::F32 | DType::F16 | DType::Bf16 => quote!(f32),
        DType::F64 => quote!(f64),
    }
}

/// The Rust type of a value of `ty` in a record.
pub fn rust(ty: &TensorType) -> TokenStream {
    let t = scalar(ty.dtype);
    match repr(ty) {
        Ok(Repr::Scalar) => t,
        Ok(Repr::List) => quote!(::std::vec::Vec<#t>),
        Ok(Repr::Tensor) => quote!(__sl::Tensor<#t>),
        Ok(Repr::Str) => quote!(::std::string::String),
        Ok(Repr::Bytes) | Err(_) => quote!(::std::vec::Vec<u8>),
    }
}

/// The fixed dimensions of `ty`, when all are fixed.
pub fn fixed_dims(ty: &TensorType) -> Option<Vec<usize>> {
    match &ty.shape {
        Shape::Var => None,
        Shape::Dims(d) => d
            .iter()
            .map(|d| match d {
                Dim::Fixed(k) => usize::try_from(*k).ok(),
                Dim::Named(_) => None,
            })
            .collect(),
    }
}

/// The keywords of Rust 2024, strict and reserved, that a raw identifier can be: `gen`
/// is one since 2024 (syn, which knows no editions, takes it for a plain identifier), and
/// the generated code is compiled as 2024 (`sluice run`'s runner crate).
const RAW_KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "do", "dyn", "else",
    "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro",
    "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return", "static", "struct", "trait",
    "true", "try", "type", "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// A user's name (field, parameter, pipeline) as a Rust identifier: raw when it is a
/// keyword. (`self`, `Self`, `crate`, `super` and `_`, which no identifier can be, are
/// E0119 in sema.)
pub fn field_ident(name: &str) -> Ident {
    if RAW_KEYWORDS.contains(&name) {
        return Ident::new_raw(name, Span::call_site());
    }
    syn::parse_str::<Ident>(name).unwrap_or_else(|_| Ident::new_raw(name, Span::call_site()))
}

/// The generated structs of one record type: `Record{k}` and, when batched,
/// `Batch{k}`, `BatchBuilder{k}`, `PaddedBuilder{k}`, `Padding{k}`.
pub fn record_items(k: usize, fields: &[FieldType], batched: bool, cached: bool) -> TokenStream {
    let rec = format_ident!("Record{}", k);
    let names: Vec<Ident> = fields.iter().map(|f| field_ident(&f.name)).collect();
    let strs: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    let tys: Vec<TensorType> = fields.iter().map(|f| f.ty.clone().unwrap_or_else(scalar_u8)).collect();
    let rust_tys: Vec<TokenStream> = tys.iter().map(rust).collect();
    // `sluice show`: each field by how it is held (a `Vec<u8>` is bytes or a `u8[]` list).
    let show_fields: Vec<TokenStream> = tys
        .iter()
        .zip(&names)
        .map(|(t, n)| match repr(t).unwrap_or(Repr::Bytes) {
            Repr::Scalar => quote!(__sl::abi::show::scalar(out, &self.#n)),
            Repr::List => quote!(__sl::abi::show::list(out, &self.#n)),
            Repr::Tensor => quote!(__sl::abi::show::tensor(out, &self.#n)),
            Repr::Bytes => quote!(__sl::abi::show::bytes(out, &self.#n)),
            Repr::Str => quote!(__sl::abi::show::Show::show(&self.#n, out)),
        })
        .collect();
    // `sluice.Pipeline` (Python): each field's buffer moved out (`abi::py`).
    let py_fields: Vec<TokenStream> = tys
        .iter()
        .zip(&names)
        .map(|(t, n)| match repr(t).unwrap_or(Repr::Bytes) {
            Repr::Scalar => quote!(__sl::abi::py::scalar(self.#n)),
            Repr::List => quote!(__sl::abi::py::list(self.#n)),
            Repr::Tensor => quote!(__sl::abi::py::tensor(self.#n)),
            Repr::Bytes => quote!(__sl::abi::py::bytes(self.#n)),
            Repr::Str => quote!(__sl::abi::py::text(self.#n)),
        })
        .collect();
    // `sluice run --output`: one feature per field (`abi::export`).
    let export_fields: Vec<TokenStream> = tys
        .iter()
        .zip(&names)
        .zip(&strs)
        .map(|((t, n), s)| match repr(t).unwrap_or(Repr::Bytes) {
            Repr::Scalar => quote!(__sl::abi::export::scalar(f, #s, &self.#n)),
            Repr::List => quote!(__sl::abi::export::list(f, #s, &self.#n)),
            Repr::Tensor => quote!(__sl::abi::export::tensor(f, #s, &self.#n)),
            Repr::Bytes => quote!(__sl::abi::export::bytes(f, #s, &self.#n)),
            Repr::Str => quote!(__sl::abi::export::text(f, #s, &self.#n)),
        })
        .collect();
    let doc = format!(
        " One element: {}.",
        fields
            .iter()
            .map(|f| format!("`{}: {}`", f.name, f.ty.as_ref().map_or("?".into(), ToString::to_string)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut out = quote! {
        #[doc = #doc]
        #[derive(Debug, Clone, PartialEq)]
        pub struct #rec { #( pub #names: #rust_tys, )* }

        impl __sl::Element for #rec {
            const FLAT: bool = false;
            fn byte_size(&self) -> usize {
                0 #( + __sl::Element::byte_size(&self.#names) )*
            }
        }

        impl __sl::Rows for #rec {
            fn rows(&self) -> u64 { 1 }
        }

        impl __sl::abi::show::Show for #rec {
            fn show(&self, out: &mut __sl::abi::show::Json) {
                out.begin_object();
                #( out.key(#strs); #show_fields; )*
                out.end_object();
            }
        }

        impl __sl::abi::py::ToPython for #rec {
            fn to_python(self) -> __sl::abi::py::PyElement {
                __sl::abi::py::PyElement::Fields(::std::vec![ #( (#strs, #py_fields), )* ])
            }
        }

        impl __sl::abi::export::ToExample for #rec {
            fn fields(&self, f: &mut __sl::abi::export::Features) -> ::std::result::Result<(), &'static str> {
                #( #export_fields; )*
                ::std::result::Result::Ok(())
            }
        }
    };
    if cached {
        out.extend(quote! {
            impl __sl::CacheCodec for #rec {
                fn encode(&self, out: &mut ::std::vec::Vec<u8>) {
                    #( __sl::CacheCodec::encode(&self.#names, out); )*
                }
                fn decode(bytes: &mut &[u8]) -> ::std::result::Result<Self, ::std::string::String> {
                    ::std::result::Result::Ok(#rec { #( #names: __sl::CacheCodec::decode(bytes)?, )* })
                }
            }
        });
    }
    if !batched {
        return out;
    }
    let batch = format_ident!("Batch{}", k);
    let builder = format_ident!("BatchBuilder{}", k);
    let padded = format_ident!("PaddedBuilder{}", k);
    let padding = format_ident!("Padding{}", k);
    let reprs: Vec<Repr> = tys.iter().map(|t| repr(t).unwrap_or(Repr::Bytes)).collect();
    // Columns: variable-length numbers only batch padded (plain `batch` refuses them).
    let col_tys: Vec<TokenStream> = rust_tys
        .iter()
        .zip(&reprs)
        .map(|(t, r)| match r {
            Repr::List => quote!(<#t as __sl::Batchable>::Padded),
            _ => quote!(<#t as __sl::Batchable>::Columns),
        })
        .collect();
    let plain_b: Vec<TokenStream> = rust_tys
        .iter()
        .zip(&reprs)
        .map(|(t, r)| match r {
            Repr::List => quote!(<#t as __sl::Batchable>::PaddedBuilder),
            _ => quote!(<#t as __sl::Batchable>::Builder),
        })
        .collect();
    let plain_new: Vec<TokenStream> = rust_tys
        .iter()
        .zip(&reprs)
        .map(|(t, r)| match r {
            Repr::List => {
                quote!(<#t as __sl::Batchable>::padded_builder(n, &__sl::PadLen::longest(::core::default::Default::default())))
            }
            _ => quote!(<#t as __sl::Batchable>::builder(n)),
        })
        .collect();
    let padded_b: Vec<TokenStream> = rust_tys
        .iter()
        .zip(&reprs)
        .map(|(t, r)| match r {
            Repr::List | Repr::Tensor => quote!(<#t as __sl::Batchable>::PaddedBuilder),
            _ => quote!(<#t as __sl::Batchable>::Builder),
        })
        .collect();
    let padded_new: Vec<TokenStream> = rust_tys
        .iter()
        .zip(&reprs)
        .zip(&names)
        .map(|((t, r), n)| match r {
            Repr::List | Repr::Tensor => quote!(<#t as __sl::Batchable>::padded_builder(n, &padding.#n)),
            _ => quote!(<#t as __sl::Batchable>::builder(n)),
        })
        .collect();
    let pad_fields: Vec<(Ident, TokenStream)> = rust_tys
        .iter()
        .zip(&reprs)
        .zip(&names)
        .filter(|((_, r), _)| matches!(r, Repr::List | Repr::Tensor))
        .map(|((t, _), n)| (n.clone(), quote!(<#t as __sl::Batchable>::Padding)))
        .collect();
    let (pad_names, pad_tys): (Vec<Ident>, Vec<TokenStream>) = pad_fields.into_iter().unzip();
    // The plain and the padded builder differ only in their fields' builders.
    let mut builders = TokenStream::new();
    for (doc, name, field_builders) in
        [(" Builds a plain batch.", &builder, &plain_b), (" Builds a padded batch.", &padded, &padded_b)]
    {
        builders.extend(quote! {
            #[doc = #doc]
            #[derive(Debug)]
            pub struct #name { #( #names: #field_builders, )* }

            impl __sl::ColumnBuilder for #name {
                type Item = #rec;
                type Columns = #batch;
                fn push(&mut self, x: #rec) -> ::std::result::Result<(), __sl::ColumnError> {
                    #( __sl::ColumnBuilder::push(&mut self.#names, x.#names).map_err(|e| e.in_field(#strs))?; )*
                    ::std::result::Result::Ok(())
                }
                fn finish(self) -> #batch {
                    #batch { #( #names: __sl::ColumnBuilder::finish(self.#names), )* }
                }
            }
        });
    }
    let batch_doc = format!(" A batch of [`{rec}`]: one column per field.");
    out.extend(quote! {
        #[doc = #batch_doc]
        #[derive(Debug, Clone)]
        pub struct #batch { #( pub #names: #col_tys, )* }

        impl __sl::Element for #batch {
            const FLAT: bool = false;
            fn byte_size(&self) -> usize {
                0 #( + __sl::Element::byte_size(&self.#names) )*
            }
        }

        impl __sl::Rows for #batch {
            fn rows(&self) -> u64 {
                __sl::Columns::num_rows(self).unwrap_or(0) as u64
            }
            fn is_batch(&self) -> bool { true }
        }

        impl __sl::abi::show::Show for #batch {
            fn show(&self, out: &mut __sl::abi::show::Json) {
                out.begin_object();
                #( out.key(#strs); __sl::abi::show::Show::show(&self.#names, out); )*
                out.end_object();
            }
        }

        impl __sl::abi::py::ToPython for #batch {
            fn to_python(self) -> __sl::abi::py::PyElement {
                __sl::abi::py::PyElement::Fields(::std::vec![
                    #( (#strs, __sl::abi::py::IntoPyColumn::into_py_column(self.#names)), )*
                ])
            }
        }

        impl __sl::abi::export::ToExample for #batch {
            fn fields(&self, _: &mut __sl::abi::export::Features) -> ::std::result::Result<(), &'static str> {
                ::std::result::Result::Err(__sl::abi::export::BATCH)
            }
        }

        impl __sl::Columns for #batch {
            type Row = #rec;
            fn num_rows(&self) -> ::std::result::Result<usize, __sl::ColumnError> {
                __sl::check_rows(&[ #( (#strs, __sl::Columns::num_rows(&self.#names)?), )* ])
            }
            fn row(&self, i: usize) -> #rec {
                #rec { #( #names: __sl::Columns::row(&self.#names, i), )* }
            }
        }

        impl __sl::NamedColumns for #batch {
            fn into_named_columns(self) -> ::std::vec::Vec<(&'static str, __sl::AnyColumn)> {
                ::std::vec![ #( (#strs, __sl::IntoAnyColumn::into_any_column(self.#names)), )* ]
            }
        }

        #builders

        /// How `padded_batch` pads the fields whose size varies.
        #[derive(Debug, Clone)]
        pub struct #padding { #( pub #pad_names: #pad_tys, )* }

        impl __sl::Batchable for #rec {
            type Columns = #batch;
            type Builder = #builder;
            type Padding = #padding;
            type Padded = #batch;
            type PaddedBuilder = #padded;
            fn builder(n: usize) -> #builder {
                #builder { #( #names: #plain_new, )* }
            }
            fn padded_builder(n: usize, padding: &#padding) -> #padded {
                #padded { #( #names: #padded_new, )* }
            }
        }
    });
    out
}

fn scalar_u8() -> TensorType {
    TensorType { dtype: DType::U8, shape: Shape::scalar() }
}
