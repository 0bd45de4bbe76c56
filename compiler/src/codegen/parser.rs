//! The schema-specialised `tf.train.Example` parsers: one record into its field values,
//! or a batch of records straight into the batch's column buffers. Each walks a record's
//! feature map once and decodes only the declared features.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use super::context::{Gen, R};
use super::split::SplitColumns;
use super::types::{Repr, field_ident, fixed_dims, repr, scalar};
use crate::ir::plan::FieldType;
use crate::ir::types::{DType, Value};

impl Gen<'_> {
    /// The found-entries walk of a specialised parser: `let mut e_x = None; ...`.
    pub(super) fn entries_walk(fields: &[FieldType]) -> TokenStream {
        let entries: Vec<Ident> = fields.iter().map(|f| format_ident!("e_{}", f.name)).collect();
        let strs: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        quote! {
            #( let mut #entries = ::std::option::Option::None; )*
            for entry in __sl::ExampleView::new(record).entries() {
                let entry = entry.map_err(__sl::parse::malformed)?;
                match entry.name() {
                    #( #strs => #entries = ::std::option::Option::Some(entry), )*
                    _ => {}
                }
            }
        }
    }

    /// The schema default of `field` as `Option<...>` for the parse helpers.
    pub(super) fn default_of(&self, f: &FieldType, for_slice: bool) -> R<TokenStream> {
        let ty = f.ty.as_ref().ok_or("untyped")?;
        let decl = self.decls.schema.iter().find(|d| d.name == f.name);
        let Some(v) = decl.and_then(|d| d.default.as_ref()) else {
            return Ok(quote!(::std::option::Option::None));
        };
        // Defaults are kept as lists of values; a scalar's is one value.
        let v = match v {
            Value::List(items)
                if items.len() == 1 && repr(ty)? != Repr::Tensor && repr(ty)? != Repr::List =>
            {
                &items[0]
            }
            v => v,
        };
        let t = scalar(ty.dtype);
        let lit = |v: &Value| -> R<TokenStream> {
            Ok(match v {
                Value::Int(n) => {
                    let l = Literal::i64_unsuffixed(*n);
                    quote!((#l as #t))
                }
                Value::UInt(n) => {
                    let l = Literal::u64_unsuffixed(*n);
                    quote!((#l as #t))
                }
                Value::Float(x) => {
                    let l = Literal::f64_unsuffixed(*x);
                    quote!((#l as #t))
                }
                Value::Bool(b) => quote!(#b),
                other => return Err(format!("default `{other}` of `{}`", f.name)),
            })
        };
        match (repr(ty)?, v) {
            (Repr::Bytes, Value::Str(s)) => {
                let b = Literal::byte_string(s.as_bytes());
                Ok(quote!(::std::option::Option::Some(&#b[..])))
            }
            (Repr::Str, Value::Str(s)) => Ok(quote!(::std::option::Option::Some(#s))),
            (_, Value::List(items)) => {
                let vals = items.iter().map(lit).collect::<R<Vec<_>>>()?;
                Ok(quote!(::std::option::Option::Some(&[#(#vals),*][..])))
            }
            (_, v) if for_slice => {
                let x = lit(v)?;
                Ok(quote!(::std::option::Option::Some(&[#x][..])))
            }
            (_, v) => {
                let x = lit(v)?;
                Ok(quote!(::std::option::Option::Some(#x)))
            }
        }
    }

    /// `parse_N(record) -> (field values...)`: the schema-specialised parser of one record.
    pub(super) fn parse_fn(&mut self, fields: &[FieldType]) -> R<Ident> {
        // The first parser of a pipeline is public, under a fixed name.
        let first = !self.public_parse;
        self.public_parse = true;
        let name = if first { format_ident!("parse_example") } else { self.fresh("parse") };
        let vis = if first { quote!(pub) } else { quote!() };
        let walk = Self::entries_walk(fields);
        let (tys, values) = self.feature_values(fields)?;
        self.items.extend(quote! {
            /// Parses one serialized `tf.train.Example`: only the declared features, each
            /// straight into its value.
            #vis fn #name<'a>(record: &'a [u8]) -> ::std::result::Result<(#(#tys,)*), __sl::BoxError> {
                #walk
                ::std::result::Result::Ok((#(#values,)*))
            }
        });
        Ok(name)
    }

    /// The types and value expressions of `fields` decoded from the entries `e_NAME` an
    /// [`entries_walk`](Self::entries_walk) found (each expression uses `?`).
    pub(super) fn feature_values(&self, fields: &[FieldType]) -> R<(Vec<TokenStream>, Vec<TokenStream>)> {
        let mut tys = Vec::new();
        let mut values = Vec::new();
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped")?;
            let s = f.name.as_str();
            let e = format_ident!("e_{}", f.name);
            let t = scalar(ty.dtype);
            let r = repr(ty).map_err(|m| format!("field `{s}`: {m}"))?;
            match r {
                Repr::Scalar => {
                    let d = self.default_of(f, false)?;
                    tys.push(t.clone());
                    values.push(quote!(__sl::parse::scalar::<#t>(#s, #e, #d)?));
                }
                Repr::List => {
                    let d = self.default_of(f, true)?;
                    tys.push(quote!(::std::vec::Vec<#t>));
                    values.push(quote!({ let mut v = ::std::vec::Vec::new(); __sl::parse::var::<#t>(#s, #e, #d, &mut v)?; v }));
                }
                Repr::Tensor => {
                    let d = self.default_of(f, true)?;
                    let dims = fixed_dims(ty)
                        .ok_or_else(|| format!("schema field `{s}` has a shape with named sizes"))?;
                    let n: usize = dims.iter().product();
                    tys.push(quote!(__sl::Tensor<#t>));
                    values.push(quote!({
                        let mut v = ::std::vec::Vec::with_capacity(#n);
                        __sl::parse::fixed::<#t>(#s, #e, #n, #d, &mut v)?;
                        __sl::Tensor::new(::std::vec![#(#dims),*], v)?
                    }));
                }
                Repr::Bytes => {
                    let d = self.default_of(f, false)?;
                    tys.push(quote!(&'a [u8]));
                    values.push(quote!(__sl::parse::bytes(#s, #e, #d)?));
                }
                Repr::Str => {
                    let d = self.default_of(f, false)?;
                    tys.push(quote!(::std::string::String));
                    values.push(quote!(__sl::parse::text(#s, #e, #d)?));
                }
            }
        }
        Ok((tys, values))
    }

    /// `parse_columns_N(records) -> Batch`: parses a batch of records straight into the
    /// batch's column buffers; `None` when a field needs the row-by-row path (lists).
    pub(super) fn parse_columns_fn(&mut self, fields: &[FieldType]) -> R<Option<Ident>> {
        let mut decls = Vec::new();
        let mut per_row = Vec::new();
        let mut finish = Vec::new();
        // Records of a layout already walked are read by comparing bytes
        // (`__sl::parse::Layouts`) when every field is `f32`s or `i64`s.
        let mut spans = Vec::new();
        let mut from_spans = Vec::new();
        let mut learnable = true;
        let mut fixed = Vec::new();
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped")?;
            let s = f.name.as_str();
            let id = field_ident(s);
            let e = format_ident!("e_{}", f.name);
            let c = format_ident!("c_{}", f.name);
            let t = scalar(ty.dtype);
            match repr(ty)? {
                Repr::Scalar | Repr::Tensor => {
                    let Some(dims) = fixed_dims(ty) else { return Ok(None) };
                    let n: usize = dims.iter().product();
                    let d = self.default_of(f, true)?;
                    decls.push(quote!(let mut #c: ::std::vec::Vec<#t> = __sl::ops::column(n * #n);));
                    fixed.push((f.name.clone(), quote!(#t), n));
                    per_row.push(quote!(__sl::parse::fixed::<#t>(#s, #e, #n, #d, &mut #c)));
                    finish.push(quote!(#id: __sl::Dense::new(::std::vec![n #(, #dims)*], #c)?));
                    let k = spans.len();
                    learnable &= matches!(ty.dtype, DType::F32 | DType::F16 | DType::Bf16 | DType::I64);
                    spans.push(quote!(__sl::parse::span::<#t>(record, &#e, #n)));
                    from_spans.push(quote!(__sl::parse::from_span::<#t>(record, at[#k], #n, &mut #c)));
                }
                Repr::Bytes => {
                    let d = self.default_of(f, false)?;
                    let o = format_ident!("o_{}", f.name);
                    decls.push(quote!(
                        let mut #c: ::std::vec::Vec<u8> = ::std::vec::Vec::new();
                        let mut #o: ::std::vec::Vec<i64> = ::std::vec::Vec::with_capacity(n + 1);
                        #o.push(0);
                    ));
                    per_row.push(quote!(__sl::parse::bytes(#s, #e, #d).map(|b| {
                        #c.extend_from_slice(b);
                        #o.push(#c.len() as i64);
                    })));
                    finish.push(quote!(#id: __sl::Ragged::new(#c, #o)?));
                    learnable = false;
                }
                // Row by row: lists, and strings (each checked to be UTF-8).
                Repr::List | Repr::Str => return Ok(None),
            }
        }
        let b = self.batch(fields)?;
        let first = !self.public_columns;
        self.public_columns = true;
        let name = self.fresh("parse_columns");
        if first {
            self.items.extend(quote! {
                /// Parses a batch of serialized `tf.train.Example`s straight into the
                /// batch's column buffers (the pipeline's specialised parser).
                pub fn parse_examples<'r>(records: impl ExactSizeIterator<Item = &'r [u8]>) -> ::std::result::Result<#b, __sl::BoxError> {
                    #name(records, |i| format!("record {i} of the batch"))
                }
            });
        }
        let walk = Self::entries_walk(fields);
        let (layouts, fast, learn) = if learnable {
            let k = spans.len();
            (
                quote!(let mut layouts = __sl::parse::Layouts::<#k>::new();),
                quote! {
                    if let ::std::option::Option::Some(at) = layouts.find(record) {
                        #( #from_spans; )*
                        continue;
                    }
                },
                quote!(layouts.learn(record, [#(#spans),*]);),
            )
        } else {
            Default::default()
        };
        // Record `i`, `record`, into the columns.
        let each = quote! {
            #fast
            let mut one = || -> ::std::result::Result<(), __sl::ParseError> {
                #walk
                #( #per_row?; )*
                #learn
                ::std::result::Result::Ok(())
            };
            one().map_err(|e| format!("{}: {e}", at(i)))?;
        };
        // Every column of a fixed size: the rows are parsed by a generic rows function,
        // on this thread or split across the pipeline's pool (`__sl::rows`).
        if fixed.len() == fields.len() {
            let split = SplitColumns::new(fixed);
            let (generics, params) = split.signature();
            let rows_fn = self.fresh("parse_rows");
            let prelude = quote!(let records: ::std::vec::Vec<&[u8]> = records.collect(););
            let fill = split.fill(prelude, |part, c| {
                if part {
                    quote!(#rows_fn(records[rows.clone()].iter().copied(), rows.start, &at, #(#c),*))
                } else {
                    quote!(#rows_fn(records, 0, &at, #(#c),*))
                }
            });
            self.items.extend(quote! {
                /// Parses records `first..` of a batch of serialized `tf.train.Example`s
                /// straight into the batch's columns (or parts of them): only the declared
                /// features, no per-record allocation.
                fn #rows_fn<'r, #(#generics),*>(
                    records: impl Iterator<Item = &'r [u8]>,
                    first: usize,
                    at: &impl Fn(usize) -> ::std::string::String,
                    #(#params),*
                ) -> ::std::result::Result<(), __sl::BoxError> {
                    #layouts
                    for (k, record) in records.enumerate() {
                        let i = first + k;
                        #each
                    }
                    ::std::result::Result::Ok(())
                }
                /// Parses a batch of serialized `tf.train.Example`s straight into the
                /// batch's column buffers.
                fn #name<'r>(
                    records: impl ExactSizeIterator<Item = &'r [u8]>,
                    at: impl Fn(usize) -> ::std::string::String + ::std::marker::Sync,
                ) -> ::std::result::Result<#b, __sl::BoxError> {
                    let n = records.len();
                    #(#decls)*
                    #fill
                    ::std::result::Result::Ok(#b { #(#finish,)* })
                }
            });
            return Ok(Some(name));
        }
        self.items.extend(quote! {
            /// Parses a batch of serialized `tf.train.Example`s straight into the batch's
            /// column buffers: only the declared features, no per-record allocation.
            fn #name<'r>(
                records: impl ExactSizeIterator<Item = &'r [u8]>,
                at: impl Fn(usize) -> ::std::string::String,
            ) -> ::std::result::Result<#b, __sl::BoxError> {
                let n = records.len();
                #(#decls)*
                #layouts
                for (i, record) in records.enumerate() {
                    #each
                }
                ::std::result::Result::Ok(#b { #(#finish,)* })
            }
        });
        Ok(Some(name))
    }
}
