//! The `let ds = ...;` statements of the chain: one generator per exec node of the
//! physical plan, each printing the runtime stage it names. No choice is made here: the
//! physical plan made them all.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::quote;

use super::context::{Gen, MapFn, R, arg_tokens, parallel, seed, string_arg, u64_arg, usize_arg};
use super::types::field_ident;
use crate::ir::plan::{ArgValue, Element, PrefetchDepth, RecordFormat};
use crate::physical::{self, Compression, CorruptPolicy, Exec, Labels, ReaderMap, ReaderOptions, Remainder};

fn compression(c: Compression) -> TokenStream {
    match c {
        Compression::Gzip => quote!(__sl::Compression::Gzip),
        Compression::Zlib => quote!(__sl::Compression::Zlib),
        Compression::None => quote!(__sl::Compression::None),
        Compression::Auto => quote!(__sl::Compression::Auto),
    }
}

/// The function of an interleave that opens each file: a TFRecord, text-lines, CSV,
/// WebDataset or Parquet reader.
fn open_fn(format: &RecordFormat, r: &ReaderOptions) -> R<TokenStream> {
    let c = compression(r.compression);
    Ok(match format {
        RecordFormat::TfRecord => {
            let options = reader_options(r);
            quote!(__sl::OpenTfRecord::new(#options))
        }
        RecordFormat::Lines => quote!(__sl::OpenLines::new(__sl::TextOptions { compression: #c })),
        RecordFormat::Csv(csv) => {
            let (header, delimiter) = (csv.header, Literal::u8_suffixed(csv.delimiter));
            let columns = &csv.columns;
            quote!(__sl::OpenCsv::new(__sl::CsvOptions {
                compression: #c,
                header: #header,
                delimiter: #delimiter,
                columns: ::std::sync::Arc::from([#(::std::string::String::from(#columns)),*]),
            }))
        }
        RecordFormat::WebDataset(w) => open_webdataset(w, c),
        RecordFormat::Parquet(p) => {
            let options = parquet_options(p)?;
            quote!(__sl::OpenParquet::new(#options))
        }
    })
}

/// The `ParquetOptions` of a `parquet` reader of `p`'s columns (and its row groups, when a
/// `shard` moved into it: `RowGroupShard::new` holds the index below the count).
fn parquet_options(p: &crate::ir::formats::ParquetFormat) -> R<TokenStream> {
    let columns = p.columns.iter().map(|c| table_column(c, p.defaults.contains(&c.name)));
    let tests = p.tests.iter().map(row_group_test);
    let shard = match &p.shard {
        Some(s) => {
            let (n, i) = (u64_arg(&s.num_shards)?, u64_arg(&s.index)?);
            quote!(shard: ::core::option::Option::Some(__sl::RowGroupShard::new(#n, #i)?),)
        }
        None => TokenStream::new(),
    };
    Ok(quote!(__sl::ParquetOptions {
        columns: ::std::sync::Arc::from([#(#columns),*]),
        tests: ::std::sync::Arc::from([#(#tests),*]),
        #shard
        ..::core::default::Default::default()
    }))
}

/// The `webdataset` reader of `w`'s fields.
fn open_webdataset(w: &crate::ir::formats::ParquetFormat, c: TokenStream) -> TokenStream {
    let columns = w.columns.iter().map(|f| table_column(f, w.defaults.contains(&f.name)));
    quote!(__sl::OpenWebDataset::new(__sl::WebDatasetOptions {
        columns: ::std::sync::Arc::from([#(#columns),*]),
        compression: #c,
    }))
}

/// The runtime's description of a column a `parquet` reader reads: the schema field's
/// name, value type and shape (sema refused the fields no table column holds).
fn table_column(f: &crate::ir::plan::FieldType, has_default: bool) -> TokenStream {
    use crate::ir::types::DType;
    let name = f.name.as_str();
    let Some(ty) = &f.ty else { return quote!(compile_error!("an untyped Parquet column")) };
    let dtype = match ty.dtype {
        DType::Bool => quote!(Bool),
        DType::U8 => quote!(U8),
        DType::I32 => quote!(I32),
        DType::U32 => quote!(U32),
        DType::I64 => quote!(I64),
        DType::U64 => quote!(U64),
        DType::F32 | DType::F16 | DType::Bf16 => quote!(F32),
        DType::F64 => quote!(F64),
        DType::Str => quote!(Str),
        DType::Bytes => quote!(Bytes),
    };
    let shape = match super::types::repr(ty) {
        Ok(super::types::Repr::List) => quote!(List),
        Ok(super::types::Repr::Tensor) => {
            let n: usize = super::types::fixed_dims(ty).unwrap_or_default().iter().product();
            quote!(Fixed(#n))
        }
        _ => quote!(Scalar),
    };
    quote!(__sl::TableColumn {
        name: ::std::string::String::from(#name),
        dtype: __sl::ColumnType::#dtype,
        shape: __sl::ColumnShape::#shape,
        has_default: #has_default,
    })
}

/// A test of the filter after a `parquet` reader, for its row groups' statistics.
fn row_group_test(t: &crate::ir::formats::ColumnTest) -> TokenStream {
    use crate::ir::expr::BinaryOp as B;
    use crate::ir::formats::TestValue;
    let column = t.column.as_str();
    let op = match t.op {
        B::Lt => quote!(Lt),
        B::Le => quote!(Le),
        B::Gt => quote!(Gt),
        B::Ge => quote!(Ge),
        _ => quote!(Eq),
    };
    let value = match t.value {
        TestValue::Int(i) => quote!(__sl::Bound::Int(#i)),
        TestValue::Float(x) => quote!(__sl::Bound::Float(#x)),
    };
    quote!(__sl::RowGroupTest { column: ::std::string::String::from(#column), op: __sl::Cmp::#op, value: #value })
}

/// The reader options of a TFRecord reader.
fn reader_options(r: &ReaderOptions) -> TokenStream {
    let compression = compression(r.compression);
    let policy = corrupt_policy(r.on_corrupt);
    let verify = r.verify_crc;
    quote!(__sl::ReaderOptions {
        compression: #compression,
        verify_crc: #verify,
        on_corrupt: #policy,
        ..::core::default::Default::default()
    })
}

fn corrupt_policy(p: CorruptPolicy) -> TokenStream {
    match p {
        CorruptPolicy::Skip => quote!(__sl::CorruptPolicy::Skip),
        CorruptPolicy::SkipFile => quote!(__sl::CorruptPolicy::SkipFile),
        CorruptPolicy::Fail => quote!(__sl::CorruptPolicy::Fail),
    }
}

/// Whether the elements after `e` are `read_file`'s, with the file in their `path` field
/// (`before`: whether `e`'s input elements are): `read_file` makes them, the stages that
/// pass elements on unchanged keep them so, a `select` that keeps `path` too; any other
/// stage (a map may assign `path`) makes other elements.
fn from_file(e: &Exec, before: bool) -> bool {
    match e {
        Exec::ReadFile { .. } => true,
        Exec::Select { to, .. } => before && to.iter().any(|f| f.name == "path"),
        Exec::Filter { .. }
        | Exec::Shuffle { .. }
        | Exec::ShuffleRepeat { .. }
        | Exec::Repeat(_)
        | Exec::Take(_)
        | Exec::Skip(_)
        | Exec::Shard { .. }
        | Exec::Cache { .. }
        | Exec::Prefetch(_)
        | Exec::TakeWhile { .. } => before,
        _ => false,
    }
}

impl Gen<'_> {
    /// The statements of one exec node ([`Gen::stage`]); then whether the elements after
    /// it are `read_file`'s ([`from_file`]). A nested chain (`flat_map`'s) starts from its
    /// inner source, which resets it.
    pub(super) fn exec(&mut self, e: &Exec) -> R<TokenStream> {
        let stmts = self.stage(e)?;
        self.from_file = from_file(e, self.from_file);
        Ok(stmts)
    }
}

/// `Some(c)` or `None` (forever) for a repeat count.
/// A cycle length, and the statement that computes it first: a count, or `auto`
/// (tf.data's AUTOTUNE cycle: the cores, at most the files the input yields, counted when
/// the pipeline is built).
fn cycle_arg(cycle: &ArgValue) -> R<(TokenStream, TokenStream)> {
    match cycle {
        ArgValue::Auto => Ok((quote!(let cycle = __sl::auto_cycle(&ds)?;), quote!(cycle))),
        v => Ok((TokenStream::new(), usize_arg(v)?)),
    }
}

fn repeat_count(count: &Option<ArgValue>) -> R<TokenStream> {
    Ok(match count {
        None => quote!(::std::option::Option::None),
        Some(v) => {
            let c = u64_arg(v)?;
            quote!(::std::option::Option::Some(#c))
        }
    })
}

/// How many exec nodes a chain nests before it is boxed ([`Gen::chain`]). Each node nests
/// its input's type in its own (`Take<Skip<Map<…>>>`, and their iterators alike), one to
/// a few levels deep; rustc's trait solver gives up on a type nested about 128 deep
/// (E0275 `overflow evaluating the requirement _: Send`), and `#![recursion_limit]` is the
/// crate's, not the module's. Boxing every 16th node keeps every chain the language
/// accepts (up to 1024 stages) well within it, at one virtual call per element per box.
pub(super) const ERASE_EVERY: usize = 16;

impl Gen<'_> {
    /// The statements of a chain of exec nodes, `ds` boxed after every [`ERASE_EVERY`]th
    /// node that is not the last.
    pub(super) fn chain(&mut self, nodes: &[physical::ExecNode]) -> R<TokenStream> {
        let mut stmts = TokenStream::new();
        for (i, node) in nodes.iter().enumerate() {
            stmts.extend(self.exec(&node.exec)?);
            if (i + 1) % ERASE_EVERY == 0 && i + 1 < nodes.len() {
                stmts.extend(quote!(let ds = __sl::Dataset::boxed(ds);));
            }
        }
        Ok(stmts)
    }

    /// The statements of one exec node.
    fn stage(&mut self, e: &Exec) -> R<TokenStream> {
        Ok(match e {
            Exec::Files { pattern, shuffle_seed } => {
                let pattern = string_arg(pattern)?;
                let shuffle = match shuffle_seed {
                    Some(s) => {
                        let s = u64_arg(s)?;
                        quote!(.shuffled(#s))
                    }
                    None => TokenStream::new(),
                };
                quote!(let ds = __sl::files(#pattern)? #shuffle;)
            }
            Exec::ReadFile { labels, on_error } => {
                let fields = match crate::ir::plan::ReadFile::element(*labels) {
                    Element::Fields(f) => f,
                    _ => return Err("a read file's element has fields".into()),
                };
                let rec = self.record(&fields)?;
                let policy = corrupt_policy(*on_error);
                let dir = *labels == Labels::Dir;
                let label = if dir { quote!(label: f.label,) } else { TokenStream::new() };
                quote! {
                    let ds = __sl::read_files(ds, __sl::ReadFileOptions { labels: #dir, on_error: #policy })
                        .map(|f: __sl::FileContents| #rec { contents: f.contents, path: f.path, #label })
                        .named("read_file");
                }
            }
            Exec::Range(r) => {
                let Element::Fields(fields) = crate::ir::plan::Range::element() else {
                    return Err("a range's element has one field".into());
                };
                let rec = self.record(&fields)?;
                let (start, end, step) = (
                    arg_tokens(&r.start, quote!(i64))?,
                    arg_tokens(&r.end, quote!(i64))?,
                    arg_tokens(&r.step, quote!(i64))?,
                );
                quote!(let ds = __sl::range_step(#start, #end, #step).map(|value: i64| #rec { value }).named("range");)
            }
            Exec::SampleFrom(s) => {
                let mut inputs = Vec::new();
                for name in &s.inputs {
                    let id = field_ident(name);
                    let conv = self.convert_from(name, &s.output)?;
                    inputs.push(quote!(__sl::Dataset::boxed(super::#id::dataset(&__params.#id)? #conv)));
                }
                let weights: Vec<Literal> = s.weights.iter().map(|w| Literal::f64_suffixed(*w)).collect();
                let seed = seed(&s.seed)?;
                let stop = s.stop_on_empty;
                quote!(let ds = __sl::sample_from(::std::vec![#(#inputs),*], ::std::vec![#(#weights),*], #seed)?.stop_on_empty_dataset(#stop);)
            }
            Exec::Interleave { format, reader, cycle, block, parallel: par, deterministic } => {
                let open = open_fn(format, reader)?;
                let (first, cycle) = cycle_arg(cycle)?;
                let block = usize_arg(block)?;
                let par = parallel(par)?;
                // A reader of row groups of the global list takes its files with the row
                // groups before each.
                let files = match format {
                    RecordFormat::Parquet(p) if p.shard.is_some() => quote!(__sl::parquet_parts(ds)),
                    _ => quote!(ds),
                };
                quote! {
                    #first
                    let ds = #files.interleave(
                        #open,
                        #cycle,
                        #block,
                    ).num_parallel(#par).deterministic(#deterministic);
                }
            }
            Exec::ReadColumns { format, size, drop_remainder, output } => {
                // Each batch's columns moved out of the reader's buffers, none copied.
                let Element::Fields(fields) = output else { return Err("a table row has fields".into()) };
                let options = parquet_options(format)?;
                let size = usize_arg(size)?;
                let b = self.batch(fields)?;
                let mut cols = Vec::new();
                for (i, f) in fields.iter().enumerate() {
                    let ty = f.ty.as_ref().ok_or("an untyped Parquet column")?;
                    let dims = super::types::fixed_dims(ty).ok_or("a Parquet column of a fixed shape")?;
                    let (t, id) = (super::types::scalar(ty.dtype), field_ident(&f.name));
                    cols.push(
                        quote!(#id: __sl::Dense::new(::std::vec![t.rows #(, #dims)*], t.take::<#t>(#i)?)?),
                    );
                }
                quote! {
                    let ds = __sl::parquet_columns(ds, #options, #size, #drop_remainder)?
                        .try_map(|mut t: __sl::TableColumns| -> ::std::result::Result<#b, __sl::BoxError> {
                            ::std::result::Result::Ok(#b { #(#cols),* })
                        })
                        .named("read_columns");
                }
            }
            Exec::GlobalShuffle { reader, table, window, seed: s, reshuffle_each_epoch, shard } => {
                // The file list (sharded, shuffled, whatever came before) is taken once,
                // when the dataset is built (with the Parquet files' footers).
                let seed = seed(s)?;
                let shard = match shard {
                    Some((n, k, drop)) => {
                        let (n, k) = (u64_arg(n)?, u64_arg(k)?);
                        quote!(.shard(#n, #k, #drop)?)
                    }
                    None => TokenStream::new(),
                };
                let make = match (table, window) {
                    (Some(p), w) => {
                        let options = parquet_options(p)?;
                        let w = w.as_ref().map(u64_arg).transpose()?.map(|w| quote!(.window(#w)));
                        quote!(__sl::parquet_global_shuffle(paths, #options, #seed)? #w)
                    }
                    (None, w) => {
                        let policy = corrupt_policy(reader.on_corrupt);
                        let w = w.as_ref().map(usize_arg).transpose()?.map(|w| quote!(.window(#w)));
                        quote!(__sl::global_shuffle(paths, #seed)?.on_corrupt(#policy) #w)
                    }
                };
                quote! {
                    let ds = {
                        let paths = ds.stream()?.collect::<__sl::Result<::std::vec::Vec<_>>>()?;
                        #make.reshuffle_each_epoch(#reshuffle_each_epoch) #shard
                    };
                }
            }
            Exec::ReadBatches { reader, cycle, parallel: par, size, drop_remainder, maps } => {
                let options = reader_options(reader);
                let (first, cycle) = cycle_arg(cycle)?;
                let par = parallel(par)?;
                let size = usize_arg(size)?;
                let read = quote!(__sl::tfrecord_batches(ds, #options, #cycle, #size, #drop_remainder).num_parallel(#par));
                if maps.is_empty() {
                    quote!(#first let ds = #read;)
                } else {
                    let mut calls = Vec::new();
                    for m in maps {
                        calls.push(match m {
                            ReaderMap::MapBatch(f) => self.map_batch_fn(&f.input, &f.ops, &f.output)?.name,
                            ReaderMap::Map(f) => self.map_fn(&f.input, &f.ops, &f.output)?.name,
                        });
                    }
                    quote! {
                        #first
                        let ds = {
                            let p = __params.clone();
                            #read.map_batches(move |x| {
                                #( let x = #calls(&p, 0, 0, x)?; )*
                                ::std::result::Result::Ok(x)
                            })
                        };
                    }
                }
            }
            Exec::Map { f, parallel: par, deterministic, filter } => {
                let g = self.map_fn(&f.input, &f.ops, &f.output)?;
                let pred = match filter {
                    Some(conditions) => Some(self.predicate(&f.output, conditions)?),
                    None => None,
                };
                self.apply(&g, par, *deterministic, pred, f.skip_errors)?
            }
            Exec::ChunkedMap { size, drop_remainder, f, parallel: par, deterministic } => {
                let g = self.map_fn(&f.input, &f.ops, &f.output)?;
                let (size, call) = (usize_arg(size)?, &g.name);
                let par = parallel(par)?;
                if f.skip_errors {
                    // `on_error: skip` drops the map's element: the whole batch.
                    quote! {
                        let ds = ds.chunks(#size, #drop_remainder);
                        let ds = {
                            let p = __params.clone();
                            ds.try_map_skipping(move |x: ::std::vec::Vec<__sl::Record>| -> ::std::result::Result<::std::option::Option<_>, __sl::BoxError> {
                                ::std::result::Result::Ok(::std::option::Option::Some(
                                    #call(&p, 0, 0, __sl::RecordBatch::from(x)).map_err(__sl::skippable)?,
                                ))
                            })
                        }
                        .num_parallel(#par).deterministic(#deterministic).named("map").somes();
                    }
                } else {
                    quote! {
                        let ds = ds.chunks(#size, #drop_remainder);
                        let ds = {
                            let p = __params.clone();
                            ds.try_map(move |x: ::std::vec::Vec<__sl::Record>| #call(&p, 0, 0, __sl::RecordBatch::from(x)))
                        }
                        .num_parallel(#par).deterministic(#deterministic).named("map");
                    }
                }
            }
            Exec::MapBatch { f, size, drop_remainder, parallel: par, deterministic, batched } => {
                self.map_batch(f, size, *drop_remainder, par, *deterministic, *batched)?
            }
            Exec::Filter { input, conditions } => {
                let pred = self.predicate(input, conditions)?;
                quote!(let ds = { let p = __params.clone(); ds.try_filter(move |x| #pred(&p, x)) };)
            }
            Exec::Rust { input, kind, code, code_index } => {
                self.rust_stage(*kind, code, *code_index, input)?
            }
            Exec::Pack { from, spec } => self.pack(from, spec)?,
            Exec::BucketByLength { from, spec } => self.bucket(from, spec)?,
            Exec::Select { from, to, depth } => {
                // Records move their kept fields, batches their kept columns (a column's
                // type is its field's, padded or not); batches of batches, element by
                // element.
                let names: Vec<Ident> = to.iter().map(|f| field_ident(&f.name)).collect();
                let (a, b) = if *depth == 0 {
                    (self.record(from)?, self.record(to)?)
                } else {
                    (self.batch(from)?, self.batch(to)?)
                };
                let mut f = quote!(|__x: #a| #b { #(#names: __x.#names,)* });
                for _ in 1..(*depth).max(1) {
                    f = quote!(|__x: ::std::vec::Vec<_>| __x.into_iter().map(#f).collect::<::std::vec::Vec<_>>());
                }
                quote!(let ds = ds.map(#f);)
            }
            Exec::Shuffle { buffer, seed: s, reshuffle_each_epoch } => {
                let buffer = usize_arg(buffer)?;
                let seed = seed(s)?;
                quote!(let ds = ds.shuffle(#buffer, #seed).reshuffle_each_epoch(#reshuffle_each_epoch);)
            }
            Exec::ShuffleBatches { buffer, seed: s, reshuffle_each_epoch, size, drop_remainder } => {
                let (buffer, size) = (usize_arg(buffer)?, usize_arg(size)?);
                let seed = seed(s)?;
                quote!(let ds = __sl::shuffle_batches(ds, #buffer, #seed, #size, #drop_remainder).reshuffle_each_epoch(#reshuffle_each_epoch);)
            }
            Exec::ShuffleRepeat { buffer, seed: s, count } => {
                let buffer = usize_arg(buffer)?;
                let seed = seed(s)?;
                let count = repeat_count(count)?;
                quote!(let ds = ds.shuffle(#buffer, #seed).reshuffle_each_epoch(true).repeat(#count);)
            }
            Exec::Batch { input, size, drop_remainder: drop, padded, pad_to_multiple, padding_values } => {
                let size = usize_arg(size)?;
                match (input, padded) {
                    (Element::Fields(f), None) => {
                        self.batch(f)?;
                        quote!(let ds = ds.batch(#size, #drop);)
                    }
                    (Element::Fields(f), Some(pad_to)) => {
                        self.batch(f)?;
                        let padding =
                            self.padding(f, pad_to.as_ref(), pad_to_multiple.as_ref(), padding_values)?;
                        quote!(let ds = ds.padded_batch(#size, #drop, #padding);)
                    }
                    (Element::Record, _) => {
                        quote!(let ds = ds.chunks(#size, #drop).map(__sl::RecordBatch::from);)
                    }
                    _ => quote!(let ds = ds.chunks(#size, #drop);),
                }
            }
            Exec::Window { from, size, shift, stride, drop_remainder: drop } => {
                self.batch(from)?;
                let (size, shift, stride) = (usize_arg(size)?, usize_arg(shift)?, usize_arg(stride)?);
                quote!(let ds = ds.window(#size, #shift, #stride, #drop);)
            }
            Exec::Unbatch => quote!(let ds = ds.unbatch();),
            Exec::UnbatchFields { from, to } => self.unbatch_fields(from, to)?,
            Exec::Repeat(count) => {
                let count = repeat_count(count)?;
                quote!(let ds = ds.repeat(#count);)
            }
            Exec::Take(count) => {
                let c = u64_arg(count)?;
                quote!(let ds = ds.take(#c);)
            }
            Exec::Skip(count) => {
                let c = u64_arg(count)?;
                quote!(let ds = ds.skip(#c);)
            }
            Exec::Shard { num_shards, index, remainder } => {
                let (n, i) = (u64_arg(num_shards)?, u64_arg(index)?);
                match remainder {
                    Remainder::Drop => quote!(let ds = ds.shard_with(#n, #i, __sl::Remainder::Drop)?;),
                    Remainder::Pad => quote!(let ds = ds.shard_with(#n, #i, __sl::Remainder::Pad)?;),
                    Remainder::Keep => quote!(let ds = ds.shard(#n, #i)?;),
                }
            }
            Exec::Cache { file: None, .. } => quote!(let ds = ds.cache();),
            Exec::Cache { input, file: Some(v) } => {
                match input {
                    Element::Fields(f) => {
                        self.record(f)?;
                        let i = self.record_index(f);
                        self.records[i].2 = true;
                    }
                    Element::Record | Element::Path => {}
                    Element::Batch(_) => return Err("`cache(file)` of batches is not supported yet".into()),
                }
                let path = string_arg(v)?;
                // The cache is the pipeline's: a file another plan, other parameters or
                // other files made is rebuilt.
                quote!(let ds = ds.cache_file(#path).fingerprint(fingerprint(params)?);)
            }
            Exec::Enumerate { from, to, start } => self.enumerate(from, to, start)?,
            Exec::TakeWhile { input, conditions } => {
                let pred = self.predicate(input, conditions)?;
                quote!(let ds = { let p = __params.clone(); __sl::take_while(ds, move |x| #pred(&p, x)) };)
            }
            Exec::Zip(z) => self.zip(z)?,
            Exec::Concatenate(c) => self.concatenate(c)?,
            Exec::FlatMap { from, inner } => self.flat_map(from, inner)?,
            Exec::InnerSource(s) => self.inner_source(s, None)?,
            Exec::Prefetch(PrefetchDepth::Auto) => quote!(let ds = ds.prefetch(__sl::Buffer::Auto);),
            Exec::Prefetch(PrefetchDepth::Elements(v)) => {
                let c = usize_arg(v)?;
                quote!(let ds = ds.prefetch(#c);)
            }
        })
    }

    /// The statements of a fused map + batch; `batched`: the input already comes in
    /// batches (a `ReadBatchesExec` made them).
    fn map_batch(
        &mut self,
        f: &physical::MapFn,
        size: &ArgValue,
        drop: bool,
        par: &ArgValue,
        det: bool,
        batched: bool,
    ) -> R<TokenStream> {
        let size = usize_arg(size)?;
        let g = self.map_batch_fn(&f.input, &f.ops, &f.output)?;
        let par = parallel(par)?;
        let call = &g.name;
        let chunk = match (batched, &f.input) {
            (true, _) => TokenStream::new(),
            (false, Element::Record) => {
                quote!(let ds = ds.chunks(#size, #drop).map(__sl::RecordBatch::from);)
            }
            (false, _) => quote!(let ds = ds.chunks(#size, #drop);),
        };
        let (pre, args) = if g.random {
            (quote!(.enumerate()), quote!(&p, x.epoch, x.index, x.value))
        } else {
            (quote!(), quote!(&p, 0, 0, x))
        };
        Ok(quote! {
            #chunk
            let ds = { let p = __params.clone(); ds #pre .try_map(move |x| #call(#args)) }
                .num_parallel(#par).deterministic(#det).named("map_batch");
        })
    }

    /// `let ds = ds.try_map(...)...;` for a map function, with an optional predicate;
    /// with `skip` (`on_error: skip`) the function's errors drop their element, counted
    /// in the stage's statistics (`try_map_skipping`; the predicate's errors still fail).
    pub(super) fn apply(
        &mut self,
        f: &MapFn,
        par: &ArgValue,
        det: bool,
        pred: Option<Ident>,
        skip: bool,
    ) -> R<TokenStream> {
        let par = parallel(par)?;
        let call = &f.name;
        let value = if f.by_ref { quote!(&x.value) } else { quote!(x.value) };
        let plain = if f.by_ref { quote!(&x) } else { quote!(x) };
        let (pre, args) = if f.random {
            (quote!(.enumerate()), quote!(&p, x.epoch, x.index, #value))
        } else {
            (TokenStream::new(), quote!(&p, 0, 0, #plain))
        };
        // A function of a serialized record names its file and record when it fails, one
        // of a file read whole (`read_file`) names the file.
        let record = if f.random { quote!(x.value) } else { quote!(x) };
        let call = if f.by_ref {
            quote!({ let o = #record.origin(); #call(#args).map_err(|e| __sl::located(o, e)) })
        } else if self.from_file {
            let path = field_ident("path");
            quote!({
                let __path = #record.#path.clone();
                #call(#args).map_err(|e| __sl::abi::located_file(&__path, e))
            })
        } else {
            quote!(#call(#args))
        };
        if skip {
            let (keep, name) = match pred {
                None => (quote!(::std::option::Option::Some(r)), "map"),
                Some(pred) => (
                    quote!(if #pred(&p, &r)? { ::std::option::Option::Some(r) } else { ::std::option::Option::None }),
                    "map_filter",
                ),
            };
            return Ok(quote! {
                let ds = {
                    let p = __params.clone();
                    ds #pre .try_map_skipping(move |x| -> ::std::result::Result<::std::option::Option<_>, __sl::BoxError> {
                        let r = (#call).map_err(__sl::skippable)?;
                        ::std::result::Result::Ok(#keep)
                    })
                }
                .num_parallel(#par).deterministic(#det).named(#name).somes();
            });
        }
        Ok(match pred {
            None => quote! {
                let ds = { let p = __params.clone(); ds #pre .try_map(move |x| #call) }
                    .num_parallel(#par).deterministic(#det).named("map");
            },
            Some(pred) => quote! {
                let ds = {
                    let p = __params.clone();
                    ds #pre .try_map(move |x| -> ::std::result::Result<::std::option::Option<_>, __sl::BoxError> {
                        let r = #call?;
                        ::std::result::Result::Ok(if #pred(&p, &r)? { ::std::option::Option::Some(r) } else { ::std::option::Option::None })
                    })
                }
                .num_parallel(#par).deterministic(#det).named("map_filter").somes();
            },
        })
    }
}
