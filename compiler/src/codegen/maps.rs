//! The functions of `map` and `filter` stages: a row's statements, maps over batches
//! (column by column, straight into columns, or row by row), fused map + batch, and
//! filter predicates.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};

use super::context::{Gen, MapFn, R};
use super::expr::{Scope, batched, local};
use super::split::SplitColumns;
use super::types::{Repr, field_ident, fixed_dims, repr, scalar};
use crate::ir::expr::Expr;
use crate::ir::fusion::{raw_run, touches};
use crate::ir::plan::{Element, FieldType, MapOp, ParseFormat, RustKind};
use crate::ir::types::DType;

impl Gen<'_> {
    /// A `map` or `filter` with Rust code (`pipeline!`): the code is called as written,
    /// with the tokens' own spans (from the pipeline's table of Rust tokens), so a type
    /// error in it points at it.
    pub(super) fn rust_stage(
        &mut self,
        kind: RustKind,
        code: &str,
        code_index: usize,
        input: &Element,
    ) -> R<TokenStream> {
        let Element::Fields(fields) = input else {
            return Err("Rust code on elements without fields".into());
        };
        let rec = self.record(fields)?;
        let code = match self.rust_code.get(code_index) {
            Some(tokens) if !tokens.is_empty() => tokens.clone(),
            _ => code.parse::<TokenStream>().map_err(|e| format!("Rust code `{code}`: {e}"))?,
        };
        let span = code.clone().into_iter().next().map_or_else(proc_macro2::Span::call_site, |t| t.span());
        Ok(match kind {
            RustKind::Filter => {
                let f = quote::quote_spanned!(span=> __sluice_filter(#code));
                quote! {
                    let ds = {
                        fn __sluice_filter<F: Fn(&#rec) -> bool + Send + Sync + 'static>(f: F) -> F { f }
                        let f = #f;
                        ds.filter(move |x: &#rec| f(x))
                    };
                }
            }
            RustKind::Map => {
                let f = quote::quote_spanned!(span=> __sluice_map(#code));
                quote! {
                    let ds = {
                        fn __sluice_map<F: Fn(#rec) -> #rec + Send + Sync + 'static>(f: F) -> F { f }
                        let f = #f;
                        ds.map(move |x: #rec| f(x)).named("map")
                    };
                }
            }
        })
    }

    /// The predicate function of a filter over elements `e`.
    pub(super) fn predicate(&mut self, e: &Element, conditions: &[Expr]) -> R<Ident> {
        let Element::Fields(fields) = e else { return Err("a filter on elements without fields".into()) };
        let rec = self.record(fields)?;
        let name = self.fresh("keep");
        let mut next_rng = self.next_rng;
        let mut scope = Scope::new(fields.clone(), self.decls, &mut next_rng);
        let mut parts = Vec::new();
        for c in conditions {
            parts.push(scope.scalar(c, DType::Bool)?);
        }
        let reads: Vec<&FieldType> =
            fields.iter().filter(|f| conditions.iter().any(|c| c.count_reads(&f.name) > 0)).collect();
        let binds: Vec<TokenStream> = reads
            .iter()
            .map(|f| {
                let (l, id) = (local(&f.name), field_ident(&f.name));
                quote!(let #l = x.#id.clone();)
            })
            .collect();
        self.next_rng = next_rng;
        self.items.extend(quote! {
            fn #name(p: &Params, x: &#rec) -> ::std::result::Result<bool, __sl::BoxError> {
                #(#binds)*
                ::std::result::Result::Ok(true #(&& #parts)*)
            }
        });
        Ok(name)
    }

    /// The type a row function takes: `&[u8]` for a serialized record, else the element.
    pub(super) fn row_in(&mut self, input: &Element) -> R<TokenStream> {
        match input {
            Element::Record => Ok(quote!(&[u8])),
            other => self.item_type(other),
        }
    }

    /// The function mapping one element (`input`) through `ops` to a record `output`.
    pub(super) fn map_fn(&mut self, input: &Element, ops: &[MapOp], output: &Element) -> R<MapFn> {
        if let (Element::Batch(inner), Element::Batch(out)) = (input, output)
            && matches!(**inner, Element::Batch(_))
        {
            // A map over batches of batches: each inner batch mapped as a batch.
            return self.map_each_fn(inner, ops, out);
        }
        if let (Element::Batch(inner), Element::Batch(out)) = (input, output) {
            // A map over batches: parse straight into columns when that is all it does,
            // else map each row and build the output batch.
            return self.batch_map_fn(inner, ops, out);
        }
        let Element::Fields(out_fields) = output else { return Err(format!("a map producing {output}")) };
        let out = self.record(out_fields)?;
        let in_ty = self.row_in(input)?;
        let name = self.fresh("map");
        let (body, random) = self.row_body(input, ops, out_fields)?;
        self.items.extend(quote! {
            fn #name(p: &Params, __epoch: u64, __index: u64, x: #in_ty) -> ::std::result::Result<#out, __sl::BoxError> {
                #body
            }
        });
        Ok(MapFn { name, random, by_ref: *input == Element::Record })
    }

    /// The statements that read a CSV row `x` (the columns the `csv` reader picked out,
    /// in schema order) into the locals of `fields`: each value parsed as its field's
    /// type, an empty one taking the schema default. Errors name the column; the stage
    /// adds the file and line.
    fn csv_row(&self, fields: &[FieldType]) -> R<TokenStream> {
        let mut out = TokenStream::new();
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped")?;
            let index = self
                .decls
                .schema
                .iter()
                .position(|d| d.name == f.name)
                .ok_or_else(|| format!("CSV column `{}` is not in the schema", f.name))?;
            let t = match repr(ty)? {
                Repr::Scalar => scalar(ty.dtype),
                Repr::Str => quote!(::std::string::String),
                Repr::Bytes => quote!(::std::vec::Vec<u8>),
                r => return Err(format!("CSV column `{}` held as {r:?}", f.name)),
            };
            // The schema default, as `parse_example` takes it (`&[u8]`, `&str` or a number),
            // made the column's type.
            let has_default = self.decls.schema.iter().any(|d| d.name == f.name && d.default.is_some());
            let default = if has_default {
                let d = self.default_of(f, false)?;
                quote!(#d.map(::core::convert::Into::into))
            } else {
                quote!(::std::option::Option::None)
            };
            let (l, name) = (local(&f.name), f.name.as_str());
            out.extend(quote!(let #l: #t = __sl::abi::text::csv_field::<#t>(x, #index, #name, #default)?;));
        }
        Ok(out)
    }

    /// The statements that read a table row `x` (the columns the `parquet` reader read,
    /// in its order: `fields`) into the locals of `fields`, a null taking the schema
    /// default. Errors name the column and row group; the stage adds the file and row.
    fn table_row(&self, fields: &[FieldType]) -> R<TokenStream> {
        let mut out = quote!(let mut __row = __sl::abi::table::RowReader::new(x)?;);
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped")?;
            let (l, name) = (local(&f.name), f.name.as_str());
            let t = scalar(ty.dtype);
            let value = match repr(ty)? {
                Repr::Scalar => {
                    let d = self.default_of(f, false)?;
                    quote!(__row.scalar::<#t>(#name, #d)?)
                }
                Repr::List => {
                    let d = self.default_of(f, true)?;
                    quote!(__row.list::<#t>(#name, #d)?)
                }
                Repr::Tensor => {
                    let d = self.default_of(f, true)?;
                    let dims = fixed_dims(ty)
                        .ok_or_else(|| format!("column `{name}` has a shape with named sizes"))?;
                    quote!(__row.tensor::<#t>(#name, &[#(#dims),*], #d)?)
                }
                Repr::Bytes => {
                    let d = self.default_of(f, false)?;
                    quote!(__row.bytes(#name, #d)?)
                }
                Repr::Str => {
                    let d = self.default_of(f, false)?;
                    quote!(__row.text(#name, #d)?)
                }
            };
            out.extend(quote!(let #l = #value;));
        }
        Ok(out)
    }

    /// The statements that turn input `x` into record `out_fields` (ending in `Ok(..)`).
    pub(super) fn row_body(
        &mut self,
        input: &Element,
        ops: &[MapOp],
        out_fields: &[FieldType],
    ) -> R<(TokenStream, bool)> {
        let (mut body, random, _) = self.row_statements(input, ops, &[])?;
        let out = self.record(out_fields)?;
        let names: Vec<Ident> = out_fields.iter().map(|f| field_ident(&f.name)).collect();
        let values: Vec<TokenStream> = out_fields
            .iter()
            .map(|f| {
                let l = local(&f.name);
                match f.ty.as_ref().map(repr) {
                    Some(Ok(Repr::Bytes)) => quote!(::core::convert::Into::<::std::vec::Vec<u8>>::into(#l)),
                    _ => quote!(#l),
                }
            })
            .collect();
        body.extend(quote!(::std::result::Result::Ok(#out { #(#names: #values,)* })));
        Ok((body, random))
    }

    /// The statements of a row function up to its result; fields in `direct` whose last
    /// statement is the fused JPEG path write straight into their column `c_<name>`
    /// (returned: the fields written so).
    pub(super) fn row_statements(
        &mut self,
        input: &Element,
        ops: &[MapOp],
        direct: &[String],
    ) -> R<(TokenStream, bool, Vec<String>)> {
        let mut body = TokenStream::new();
        let mut fields: Vec<FieldType> = match input {
            Element::Fields(f) => {
                let r = self.record(f)?;
                let names: Vec<Ident> = f.iter().map(|x| field_ident(&x.name)).collect();
                let locals: Vec<Ident> = f.iter().map(|x| local(&x.name)).collect();
                body.extend(quote!(let #r { #(#names: #locals,)* } = x;));
                f.clone()
            }
            _ => Vec::new(),
        };
        let mut ops = ops;
        if let Some(MapOp::Parse { format, fields: parsed }) = ops.first() {
            let locals: Vec<Ident> = parsed.iter().map(|x| local(&x.name)).collect();
            match format {
                ParseFormat::Example => {
                    let parse = self.parse_fn(parsed)?;
                    body.extend(quote!(let (#(#locals,)*) = #parse(x)?;));
                }
                ParseFormat::Line => {
                    if !parsed.is_empty() {
                        body.extend(quote!(let (#(#locals,)*) = (__sl::abi::text::line_text(x)?,);));
                    }
                }
                ParseFormat::Csv => body.extend(self.csv_row(parsed)?),
                ParseFormat::Table => body.extend(self.table_row(parsed)?),
                ParseFormat::SequenceExample => {
                    let parse = self.parse_sequence_fn(parsed)?;
                    body.extend(quote!(let (#(#locals,)*) = #parse(x)?;));
                }
            }
            fields = parsed.clone();
            ops = &ops[1..];
        }
        let mut next_rng = self.next_rng;
        let mut scope = Scope::new(fields, self.decls, &mut next_rng);
        let mut written = Vec::new();
        let mut k = 0;
        while k < ops.len() {
            // The column is the destination when nothing after the fused four touches
            // the field.
            let into = match &ops[k] {
                MapOp::Assign { target, .. }
                    if direct.contains(target)
                        && !ops[(k + 4).min(ops.len())..].iter().any(|op| touches(op, target)) =>
                {
                    Some(target.clone())
                }
                _ => None,
            };
            // `decode_raw`, `reshape` and arithmetic over the values, the last statements
            // of a column's field: decoded from the bytes straight into the column.
            let raw = raw_run(&ops[k..]);
            if raw > 0
                && let MapOp::Assign { target, .. } = &ops[k]
                && direct.contains(target)
                && !ops[k + raw..].iter().any(|op| touches(op, target))
                && let Some(s) = scope.raw_into(&ops[k..], raw, target)?
            {
                body.extend(s);
                written.push(target.clone());
                k += raw;
                continue;
            }
            if let Some(fused) = scope.decode_resize_normalize(&ops[k..], into.as_deref())? {
                body.extend(fused);
                written.extend(into);
                k += 4;
                continue;
            }
            // The last statement of a column's field, arithmetic over one tensor: its
            // values go straight into the column.
            if let MapOp::Assign { target, value, ty, .. } = &ops[k]
                && direct.contains(target)
                && !ops[k + 1..].iter().any(|op| touches(op, target))
                && let Some(s) = scope.elementwise_into(target, value, ty, target)?
            {
                body.extend(s);
                written.push(target.clone());
                k += 1;
                continue;
            }
            match &ops[k] {
                MapOp::Assign { target, value, ty, .. } => body.extend(scope.statement(target, value, ty)?),
                MapOp::Parse { .. } => return Err("a parse after other operations".into()),
            }
            k += 1;
        }
        let random = scope.random;
        self.next_rng = next_rng;
        Ok((body, random, written))
    }

    /// A batch of serialized records mapped straight into the batch's column buffers, when
    /// every output field has a fixed size and nothing is random: each row's values are
    /// appended to their columns (the fused JPEG path decodes into its column directly).
    /// The rows are filled by one generic function (`map_rows_*`) over each column's
    /// [`Append`](sluice_runtime::column::Append) target: the whole column on this thread,
    /// or, when the pipeline's CPU budget has threads left over (`__sl::rows::split`), one
    /// disjoint part of every column per thread of its pool, bit-identical either way.
    pub(super) fn direct_columns_body(
        &mut self,
        ops: &[MapOp],
        out_fields: &[FieldType],
    ) -> R<Option<TokenStream>> {
        let mut cols = Vec::new();
        for f in out_fields {
            let Some(ty) = f.ty.as_ref() else { return Ok(None) };
            let (Ok(Repr::Scalar | Repr::Tensor), Some(dims)) = (repr(ty), fixed_dims(ty)) else {
                return Ok(None);
            };
            cols.push((f.name.clone(), scalar(ty.dtype), dims, repr(ty)?));
        }
        if cols.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = out_fields.iter().map(|f| f.name.clone()).collect();
        let saved = self.next_rng;
        let (stmts, random, written) = self.row_statements(&Element::Record, ops, &names)?;
        if random {
            self.next_rng = saved;
            return Ok(None);
        }
        let mut decls = TokenStream::new();
        let mut puts = TokenStream::new();
        let mut finish = Vec::new();
        for (name, t, dims, r) in &cols {
            let (c, l, id) = (format_ident!("c_{}", name), local(name), field_ident(name));
            let per: usize = dims.iter().product();
            decls.extend(quote!(let mut #c: ::std::vec::Vec<#t> = __sl::ops::column(n * #per);));
            if !written.contains(name) {
                puts.extend(match r {
                    Repr::Scalar => quote!(__sl::Append::push(&mut #c, #l);),
                    _ => quote!(__sl::ops::put(&mut #c, #l.as_slice(), #per, #name)?;),
                });
            }
            finish.push(quote!(#id: __sl::Dense::new(::std::vec![n #(, #dims)*], #c)?));
        }
        let split = SplitColumns::new(
            cols.iter().map(|(name, t, dims, _)| (name.clone(), quote!(#t), dims.iter().product())),
        );
        let (generics, params) = split.signature();
        let rows_fn = self.fresh("map_rows");
        let fill = split.fill(TokenStream::new(), |part, c| {
            let rows = if part { quote!(rows) } else { quote!(0..n) };
            quote!(#rows_fn(p, &x, #rows, #(#c),*))
        });
        let b = self.batch(out_fields)?;
        self.items.extend(quote! {
            fn #rows_fn<#(#generics),*>(
                p: &Params,
                x: &__sl::RecordBatch,
                rows: ::std::ops::Range<usize>,
                #(#params),*
            ) -> ::std::result::Result<(), __sl::BoxError> {
                for i in rows {
                    let record = x.get(i).unwrap_or_default();
                    let mut row = || -> ::std::result::Result<(), __sl::BoxError> {
                        let x: &[u8] = record;
                        #stmts
                        #puts
                        ::std::result::Result::Ok(())
                    };
                    row().map_err(|e| format!("{}: {e}", x.locate(i)))?;
                }
                ::std::result::Result::Ok(())
            }
        });
        Ok(Some(quote! {
            let n = x.len();
            #decls
            #fill
            ::std::result::Result::Ok(#b { #(#finish,)* })
        }))
    }

    /// The rows of a batch `x` of `inner` elements, and how many there are.
    pub(super) fn rows_of(inner: &Element) -> R<(TokenStream, TokenStream)> {
        match inner {
            Element::Record => Ok((quote!(x.len()), quote!(x.iter()))),
            Element::Fields(_) => {
                Ok((quote!(__sl::Columns::num_rows(&x)?), quote!((0..n).map(|i| __sl::Columns::row(&x, i)))))
            }
            other => Err(format!("a map over batches of {other}")),
        }
    }

    /// A map over batches (`batch` then `map`): a batch in, a batch out.
    pub(super) fn batch_map_fn(&mut self, inner: &Element, ops: &[MapOp], out: &Element) -> R<MapFn> {
        let Element::Fields(out_fields) = out else {
            return Err(format!("a map producing batches of {out}"));
        };
        let in_ty = self.item_type(&Element::Batch(Box::new(inner.clone())))?;
        let name = self.fresh("map_batch");
        let body = self.batch_body(inner, ops, out_fields)?;
        let b = self.batch(out_fields)?;
        self.items.extend(quote! {
            fn #name(p: &Params, __epoch: u64, __index: u64, x: #in_ty) -> ::std::result::Result<#b, __sl::BoxError> {
                #body
            }
        });
        Ok(MapFn { name: name.clone(), random: self.last_random, by_ref: false })
    }

    /// The body of a function from a batch `x` of `inner` elements to the batch of
    /// their mapped records: straight into columns when it only parses records.
    pub(super) fn batch_body(
        &mut self,
        inner: &Element,
        ops: &[MapOp],
        out_fields: &[FieldType],
    ) -> R<TokenStream> {
        self.last_random = false;
        if let ([MapOp::Parse { format: ParseFormat::Example, fields }], Element::Record) = (ops, inner)
            && let Some(columns) = self.parse_columns_fn(fields)?
        {
            return Ok(quote!(#columns(x.iter(), |i| x.locate(i))));
        }
        if let Element::Fields(in_fields) = inner
            && let Some(body) = self.column_body(in_fields, ops, out_fields)?
        {
            return Ok(body);
        }
        if *inner == Element::Record
            && let Some(body) = self.direct_columns_body(ops, out_fields)?
        {
            return Ok(body);
        }
        let (count, rows) = Self::rows_of(inner)?;
        let row_fn = self.fresh("map_row");
        let row_in = self.row_in(inner)?;
        let rec = self.record(out_fields)?;
        let (body, random) = self.row_body(inner, ops, out_fields)?;
        self.last_random = random;
        // Fixed shapes stack with the plain builder; others are padded to the longest.
        let fixed = out_fields
            .iter()
            .all(|f| f.ty.as_ref().is_some_and(|t| repr(t) == Ok(Repr::Bytes) || fixed_dims(t).is_some()));
        let builder = if fixed {
            quote!(<#rec as __sl::Batchable>::builder(n))
        } else {
            let padding = self.padding(out_fields, None, None, &Default::default())?;
            quote!(<#rec as __sl::Batchable>::padded_builder(n, &#padding))
        };
        self.items.extend(quote! {
            fn #row_fn(p: &Params, __epoch: u64, __index: u64, x: #row_in) -> ::std::result::Result<#rec, __sl::BoxError> {
                #body
            }
        });
        let at = match inner {
            Element::Record => quote!(x.locate(i)),
            _ => quote!(format!("element {i} of the batch")),
        };
        Ok(quote! {
            let n = #count;
            let mut out = #builder;
            for (i, row) in #rows.enumerate() {
                let r = #row_fn(p, __epoch, (__index << 20) | i as u64, row)
                    .map_err(|e| format!("{}: {e}", #at))?;
                __sl::ColumnBuilder::push(&mut out, r)?;
            }
            ::std::result::Result::Ok(__sl::ColumnBuilder::finish(out))
        })
    }

    /// Elementwise operations on a batch (what `vectorize_past_batch` moves after
    /// `batch`) as operations on whole columns: each column is one tensor `[n, ...]`,
    /// so `x * 2.0 + 1.0` is one loop over the batch. `None` when an operation is not
    /// elementwise or mixes shapes (a per-row scalar with a per-row vector): rows then.
    pub(super) fn column_body(
        &mut self,
        in_fields: &[FieldType],
        ops: &[MapOp],
        out_fields: &[FieldType],
    ) -> R<Option<TokenStream>> {
        if !ops.iter().all(MapOp::is_elementwise) {
            return Ok(None);
        }
        let mut fields = Vec::new();
        let mut binds = TokenStream::new();
        let rec_in = self.record(in_fields)?;
        let b_in = self.batch(in_fields)?;
        let _ = rec_in;
        let names_in: Vec<Ident> = in_fields.iter().map(|f| field_ident(&f.name)).collect();
        let cols_in: Vec<Ident> = in_fields.iter().map(|f| format_ident!("c_{}", f.name)).collect();
        binds.extend(quote!(let #b_in { #(#names_in: #cols_in,)* } = x;));
        let read: Vec<String> = ops
            .iter()
            .flat_map(|op| match op {
                MapOp::Assign { reads, target, .. } => reads.iter().chain([target]).cloned().collect(),
                MapOp::Parse { .. } => Vec::new(),
            })
            .collect();
        for f in in_fields {
            let Some(ty) = f.ty.as_ref() else { return Ok(None) };
            if repr(ty)? == Repr::Bytes {
                fields.push(f.clone());
                continue;
            }
            let Some(bt) = batched(ty) else { return Ok(None) };
            if read.contains(&f.name) {
                let (l, c) = (local(&f.name), format_ident!("c_{}", f.name));
                binds.extend(quote!(let #l = { let (shape, data) = #c.into_parts(); __sl::Tensor::new(shape, data)? };));
            }
            fields.push(FieldType { name: f.name.clone(), ty: Some(bt) });
        }
        let mut next_rng = self.next_rng;
        let mut scope = Scope::columns(fields, self.decls, &mut next_rng);
        let mut assigned = Vec::new();
        for op in ops {
            let MapOp::Assign { target, value, ty, .. } = op else { return Ok(None) };
            let Some(bt) = batched(ty) else { return Ok(None) };
            match scope.statement(target, value, &bt) {
                Ok(st) => binds.extend(st),
                Err(_) => return Ok(None),
            }
            assigned.push(target.clone());
        }
        if scope.random {
            return Ok(None);
        }
        self.next_rng = next_rng;
        let b_out = self.batch(out_fields)?;
        let mut outs = Vec::new();
        for f in out_fields {
            let id = field_ident(&f.name);
            let (l, c) = (local(&f.name), format_ident!("c_{}", f.name));
            outs.push(if assigned.contains(&f.name) || read.contains(&f.name) {
                quote!(#id: { let (shape, data) = #l.into_parts(); __sl::Dense::new(shape, data)? })
            } else if in_fields.iter().any(|g| g.name == f.name) {
                quote!(#id: #c)
            } else {
                return Ok(None);
            });
        }
        Ok(Some(quote! {
            #binds
            ::std::result::Result::Ok(#b_out { #(#outs,)* })
        }))
    }

    /// A fused map + batch: a batch of input elements in (a `RecordBatch` of records, or
    /// a `Vec` of elements), a batch out.
    pub(super) fn map_batch_fn(&mut self, input: &Element, ops: &[MapOp], map_output: &Element) -> R<MapFn> {
        let Element::Fields(out_fields) = map_output else {
            return self.map_each_fn(input, ops, map_output);
        };
        let in_ty = match input {
            Element::Record => quote!(__sl::RecordBatch),
            other => {
                let t = self.item_type(other)?;
                quote!(::std::vec::Vec<#t>)
            }
        };
        let name = self.fresh("map_batch");
        let body = match input {
            Element::Record => self.batch_body(input, ops, out_fields)?,
            _ => {
                // A `Vec` of elements: map each, build the batch.
                self.last_random = false;
                let row_fn = self.fresh("map_row");
                let row_in = self.row_in(input)?;
                let rec = self.record(out_fields)?;
                let (body, random) = self.row_body(input, ops, out_fields)?;
                self.last_random = random;
                self.items.extend(quote! {
                    fn #row_fn(p: &Params, __epoch: u64, __index: u64, x: #row_in) -> ::std::result::Result<#rec, __sl::BoxError> {
                        #body
                    }
                });
                quote! {
                    let mut out = <#rec as __sl::Batchable>::builder(x.len());
                    for (i, row) in x.into_iter().enumerate() {
                        let r = #row_fn(p, __epoch, (__index << 20) | i as u64, row)
                            .map_err(|e| format!("element {i} of the batch: {e}"))?;
                        __sl::ColumnBuilder::push(&mut out, r)?;
                    }
                    ::std::result::Result::Ok(__sl::ColumnBuilder::finish(out))
                }
            }
        };
        let b = self.batch(out_fields)?;
        self.items.extend(quote! {
            fn #name(p: &Params, __epoch: u64, __index: u64, x: #in_ty) -> ::std::result::Result<#b, __sl::BoxError> {
                #body
            }
        });
        Ok(MapFn { name, random: self.last_random, by_ref: false })
    }

    /// A map over a `Vec` of `input` elements (a batch of batches), each mapped to an
    /// `output` by its own function, their `Vec` out: a fused map + batch whose map is
    /// over batches (`vectorize_past_batch` moves a map before a second `batch`), or a
    /// map over batches of batches.
    fn map_each_fn(&mut self, input: &Element, ops: &[MapOp], map_output: &Element) -> R<MapFn> {
        let in_ty = self.item_type(input)?;
        let out_ty = self.item_type(&Element::Batch(Box::new(map_output.clone())))?;
        let each = self.map_fn(input, ops, map_output)?;
        let (call, name) = (each.name, self.fresh("map_batch"));
        let row = if each.by_ref { quote!(&row) } else { quote!(row) };
        self.items.extend(quote! {
            fn #name(p: &Params, __epoch: u64, __index: u64, x: ::std::vec::Vec<#in_ty>) -> ::std::result::Result<#out_ty, __sl::BoxError> {
                x.into_iter()
                    .enumerate()
                    .map(|(i, row)| {
                        #call(p, __epoch, (__index << 20) | i as u64, #row)
                            .map_err(|e| __sl::BoxError::from(format!("element {i} of the batch: {e}")))
                    })
                    .collect()
            }
        });
        Ok(MapFn { name, random: each.random, by_ref: false })
    }
}
