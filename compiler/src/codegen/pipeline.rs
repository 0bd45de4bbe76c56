//! One pipeline's module: parameters, record and batch types, the specialised parsers,
//! the map functions, and `dataset()`: the chain of runtime stages, built from the
//! optimized plan source first, each stage a concrete generic type (no boxing, no
//! dynamic dispatch; `sample_from` boxes its inputs once, not per element).

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use super::expr::{Scope, count_reads, local};
use super::types::{Repr, field_ident, fixed_dims, record_items, repr, scalar};
use crate::driver::Pipeline;
use crate::ir::plan::{ArgValue, Element, FieldType, MapOp, Plan};
use crate::ir::types::{DType, ParamType, TensorType, Value};
use crate::sema::Declarations;

type R<T> = Result<T, String>;

/// The module of pipeline `c` and the kernels of its device tail; `all` are the file's
/// pipelines (for `sample_from`).
pub fn generate(c: &Pipeline, all: &[Pipeline]) -> R<(TokenStream, Vec<crate::ir::kernel::Kernel>)> {
    let plan = &c.optimized.plan;
    let mut g = Gen {
        decls: &c.decls,
        all,
        records: Vec::new(),
        items: TokenStream::new(),
        next_fn: 0,
        next_rng: 0,
        last_random: false,
        public_parse: false,
        public_columns: false,
    };
    // A `device cuda` pipeline: the CPU's part is `host_dataset()`, and `dataset()` runs
    // the device tail's CPU twin on it.
    let (host, tail) = match plan {
        Plan::DeviceTail(t) => (&*t.input, Some(t)),
        other => (other, None),
    };
    let mut chain = Vec::new();
    let mut node = Some(host);
    while let Some(n) = node {
        chain.push(n);
        node = n.input();
    }
    chain.reverse();
    // A map + batch followed by elementwise operations on the batch (which
    // `vectorize_past_batch` moved there) runs them per row instead, in the same loop:
    // for the Rust code the two are the same work, and per row they can fuse with the
    // decoding before them (`decode_jpeg → resize → scale → normalize` in one pass).
    let merged: Vec<Plan> = merge_elementwise(&chain);
    let chain: Vec<&Plan> = merged.iter().collect();
    let mut stmts = TokenStream::new();
    let mut i = 0;
    while i < chain.len() {
        // `shuffle(global)` reads the files itself, through their indexes, in place of the
        // reader under it: the file list (sharded, shuffled, whatever came before) is
        // taken once, when the dataset is built.
        if let (Plan::Interleave(il), Some(Plan::Shuffle(s))) = (chain[i], chain.get(i + 1))
            && s.is_global()
        {
            let seed = seed(&s.seed)?;
            let re = s.reshuffle_each_epoch;
            let policy = match &il.on_corrupt {
                ArgValue::Word(w) if w == "skip" => quote!(__sl::CorruptPolicy::Skip),
                ArgValue::Word(w) if w == "skip_file" => quote!(__sl::CorruptPolicy::SkipFile),
                _ => quote!(__sl::CorruptPolicy::Fail),
            };
            // A `shard` (keep or drop) right after it takes a block of the permutation:
            // each worker reads only its own records.
            let (shard, used) = match chain.get(i + 2) {
                Some(Plan::Shard(p)) if p.remainder() != "pad" => {
                    let n = u64_arg(pass_arg(&p.args, "num_shards").ok_or("shard count")?)?;
                    let k = u64_arg(pass_arg(&p.args, "index").ok_or("shard index")?)?;
                    let drop = p.remainder() == "drop";
                    (quote!(.shard(#n, #k, #drop)?), 3)
                }
                _ => (TokenStream::new(), 2),
            };
            stmts.extend(quote! {
                let ds = {
                    let paths = ds.stream()?.collect::<__sl::Result<::std::vec::Vec<_>>>()?;
                    __sl::global_shuffle(paths, #seed)?.on_corrupt(#policy).reshuffle_each_epoch(#re) #shard
                };
            });
            i += used;
            continue;
        }
        // A non-deterministic TFRecord interleave straight into a batch of the records
        // (plain, or fused with a map) is one stage: the readers fill the batches.
        if let (Plan::Interleave(il), Some(next)) = (chain[i], chain.get(i + 1))
            && crate::physical::reads_batches(chain[i], next)
            && let Some((size, drop)) = match next {
                Plan::Batch(b) if b.padded.is_none() => Some((&b.size, b.drop_remainder)),
                Plan::MapBatch(m) => Some((&m.size, m.drop_remainder)),
                _ => None,
            }
        {
            let read = read_batches(il, size, drop)?;
            // The map that follows runs in the reader threads when it can: the batch is
            // parsed where it was filled, with no hand-over in between.
            let (map, used) = match (next, chain.get(i + 2)) {
                (Plan::MapBatch(m), _) => {
                    (Some(g.map_batch_fn(&m.input.output(), &m.ops, &m.map_output)?), 2)
                }
                (Plan::Batch(_), Some(Plan::Map(m)))
                    if m.input.output() == Element::Batch(Box::new(Element::Record)) =>
                {
                    (Some(g.map_fn(&m.input.output(), &m.ops, &m.output)?), 3)
                }
                _ => (None, 2),
            };
            match map {
                Some(f) if !f.random => {
                    // Maps over the batches that follow run in the same closure.
                    let mut calls = vec![f.name];
                    let mut later = TokenStream::new();
                    let mut used = used;
                    while let Some(Plan::Map(m)) = chain.get(i + used)
                        && matches!(m.input.output(), Element::Batch(_))
                        && later.is_empty()
                    {
                        let f = g.map_fn(&m.input.output(), &m.ops, &m.output)?;
                        if f.random {
                            later = g.apply(&f, &m.parallel, m.deterministic, None)?;
                        } else {
                            calls.push(f.name);
                        }
                        used += 1;
                    }
                    stmts.extend(quote! {
                        let ds = {
                            let p = __params.clone();
                            #read.map_batches(move |x| {
                                #( let x = #calls(&p, 0, 0, x)?; )*
                                ::std::result::Result::Ok(x)
                            })
                        };
                    });
                    stmts.extend(later);
                    i += used;
                }
                Some(_) if used == 2 => {
                    let Plan::MapBatch(m) = next else { unreachable!("used == 2 with a map is a MapBatch") };
                    stmts.extend(quote!(let ds = #read;));
                    stmts.extend(g.map_batch(m, true)?);
                    i += 2;
                }
                _ => {
                    stmts.extend(quote!(let ds = #read;));
                    i += 2;
                }
            }
            continue;
        }
        // `batch` of records then a map over the batches: the map's workers gather each
        // batch's records into one buffer, not the thread that pulls them.
        if let (Plan::Batch(b), Some(Plan::Map(m))) = (chain[i], chain.get(i + 1))
            && b.padded.is_none()
            && m.input.output() == Element::Batch(Box::new(Element::Record))
        {
            let f = g.map_fn(&m.input.output(), &m.ops, &m.output)?;
            if !f.random {
                let (size, drop, call) = (usize_arg(&b.size)?, b.drop_remainder, &f.name);
                let (par, det) = (parallel(&m.parallel)?, m.deterministic);
                stmts.extend(quote! {
                    let ds = ds.chunks(#size, #drop);
                    let ds = {
                        let p = __params.clone();
                        ds.try_map(move |x: ::std::vec::Vec<::std::vec::Vec<u8>>| #call(&p, 0, 0, __sl::RecordBatch::from(x)))
                    }
                    .num_parallel(#par).deterministic(#det).named("map");
                });
                i += 2;
                continue;
            }
        }
        stmts.extend(g.stage(chain[i])?);
        i += 1;
    }
    let name = &c.decls.name;
    let (device, kernels) = match tail {
        Some(t) => {
            let (code, kernels) = g.device_tail(name, host, t)?;
            (Some(code), kernels)
        }
        None => (None, Vec::new()),
    };
    let item = g.item_type(&plan.output())?;
    let module = field_ident(name);
    let params = g.params()?;
    let records = g.record_defs();
    let items = std::mem::take(&mut g.items);
    let doc = format!(" The pipeline `{name}`, generated by Sluice from its `.pipe` source.");
    let aliases = g.aliases(&plan.output());
    let note = if tail.is_some() { quote!(__sl::runner::note_cpu_twin(NAME);) } else { TokenStream::new() };
    let resume = resume_items(plan)?;
    let dataset = match device {
        None => quote! {
            /// Builds the pipeline (nothing runs until it is iterated).
            pub fn dataset(params: &Params) -> __sl::Result<impl __sl::Dataset<Item = Item> + use<>> {
                let __params = ::std::sync::Arc::new(params.clone());
                #stmts
                ::std::result::Result::Ok(ds)
            }
        },
        Some(DeviceCode { host_item, twin, tail }) => quote! {
            /// The batches as the CPU makes them, before the device tail.
            pub type HostItem = #host_item;

            /// The CPU's part of the pipeline: its batches before the device tail, what
            /// the device feed copies to the GPU and runs [`device_tail`]'s kernels on.
            pub fn host_dataset(params: &Params) -> __sl::Result<impl __sl::Dataset<Item = HostItem> + use<>> {
                let __params = ::std::sync::Arc::new(params.clone());
                #stmts
                ::std::result::Result::Ok(ds)
            }

            /// The device tail: one CUDA C kernel per column it changes, with the
            /// arguments `params` give them.
            pub fn device_tail(params: &Params) -> __sl::abi::DeviceTail {
                let __params = params;
                #tail
            }

            /// Builds the pipeline (nothing runs until it is iterated): the CPU's part,
            /// then the device tail's CPU twin.
            pub fn dataset(params: &Params) -> __sl::Result<impl __sl::Dataset<Item = Item> + use<>> {
                let __params = ::std::sync::Arc::new(params.clone());
                let ds = host_dataset(params)?;
                #twin
                ::std::result::Result::Ok(ds)
            }
        },
    };
    Ok((
        quote! {
            #[doc = #doc]
            #[allow(unused, non_snake_case, non_camel_case_types, clippy::all, clippy::pedantic)]
            pub mod #module {
                use ::sluice::__private as __sl;
                use __sl::Dataset as _;

                /// The pipeline's name.
                pub const NAME: &str = #name;

                #params
                #records
                #aliases

                /// The elements the pipeline yields.
                pub type Item = #item;

                #items

                #dataset

            #resume

                /// Runs the pipeline to the end with the runner of `sluice run`.
                pub fn run(args: &__sl::runner::RunArgs) -> ::std::process::ExitCode {
                    #note
                    __sl::runner::run(args, NAME, Params::from_args, dataset)
                }
            }
        },
        kernels,
    ))
}

/// What saves and restores the pipeline's position: `RESUME_BLOCKER` (why it cannot be,
/// from the plan), `fingerprint` (the plan's text, the parameters and the files its globs
/// match), `state` and `check_state`.
fn resume_items(plan: &Plan) -> R<TokenStream> {
    let blocker = match crate::ir::plan::resume_blocker(plan) {
        Some(why) => quote!(::std::option::Option::Some(#why)),
        None => quote!(::std::option::Option::None),
    };
    let text = plan.explain();
    let mut globs = Vec::new();
    let mut node = Some(plan);
    while let Some(n) = node {
        if let Plan::Files(f) = n {
            globs.push(string_arg(&f.pattern)?);
        }
        node = n.input();
    }
    Ok(quote! {
        /// Why this pipeline's position cannot be saved and restored exactly, or `None`
        /// when it can (every stage gives the same elements in the same order on every run).
        pub const RESUME_BLOCKER: ::std::option::Option<&str> = #blocker;

        /// The plan the compiler made of the pipeline, as `sluice explain` prints it.
        pub const PLAN: &str = #text;

        /// The pipeline's fingerprint with `params`: its plan, its parameters and the files
        /// its patterns match now (names and lengths).
        pub fn fingerprint(params: &Params) -> __sl::Result<u64> {
            let __params = params;
            __sl::fingerprint(NAME, PLAN, &::std::format!("{:?}", params), &[#(#globs),*])
        }

        /// The state of a run that has consumed `position` elements of pass `epoch`: small
        /// (positions, no data); an error when the pipeline cannot be resumed exactly.
        pub fn state(params: &Params, epoch: u64, position: u64) -> __sl::Result<__sl::PipelineState> {
            if let ::std::option::Option::Some(why) = RESUME_BLOCKER {
                return ::std::result::Result::Err(__sl::Error::Invalid(::std::format!(
                    "pipeline `{NAME}` cannot be resumed exactly: {why}"
                )));
            }
            ::std::result::Result::Ok(__sl::PipelineState {
                pipeline: NAME.to_string(),
                fingerprint: fingerprint(params)?,
                epoch,
                position,
            })
        }

        /// Checks that `state` was saved by this pipeline with these parameters over the
        /// same files.
        pub fn check_state(params: &Params, state: &__sl::PipelineState) -> __sl::Result<()> {
            state.check(NAME, fingerprint(params)?)
        }
    })
}

/// The code of a device tail: the host batches' type, the CPU twin's stage and the
/// `DeviceTail` value.
struct DeviceCode {
    host_item: TokenStream,
    twin: TokenStream,
    tail: TokenStream,
}

struct Gen<'a> {
    decls: &'a Declarations,
    all: &'a [Pipeline],
    /// Distinct record types: fields, whether batched, whether file-cached.
    records: Vec<(Vec<FieldType>, bool, bool)>,
    items: TokenStream,
    next_fn: usize,
    next_rng: u64,
    /// Whether the last row body generated draws random numbers.
    last_random: bool,
    /// Whether `parse_example` / `parse_examples` (the public parsers) exist yet.
    public_parse: bool,
    public_columns: bool,
}

/// How an argument is read in `dataset()`.
fn arg_tokens(v: &ArgValue, as_ty: TokenStream) -> R<TokenStream> {
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

fn usize_arg(v: &ArgValue) -> R<TokenStream> {
    arg_tokens(v, quote!(usize))
}

fn u64_arg(v: &ArgValue) -> R<TokenStream> {
    arg_tokens(v, quote!(u64))
}

fn parallel(v: &ArgValue) -> R<TokenStream> {
    match v {
        ArgValue::Auto => Ok(quote!(__sl::Parallelism::Auto)),
        v => {
            let n = usize_arg(v)?;
            Ok(quote!(__sl::Parallelism::Fixed(#n)))
        }
    }
}

fn seed(v: &Option<ArgValue>) -> R<TokenStream> {
    match v {
        Some(v) => u64_arg(v),
        None => Ok(quote!(__sl::abi::fresh_seed())),
    }
}

fn string_arg(v: &ArgValue) -> R<TokenStream> {
    match v {
        ArgValue::Const(Value::Str(s)) => Ok(quote!(#s)),
        ArgValue::Param(p) => {
            let id = field_ident(p);
            Ok(quote!(__params.#id.as_str()))
        }
        other => Err(format!("`{other}` where a path or glob is needed")),
    }
}

fn pass_arg<'p>(args: &'p [(&'static str, ArgValue)], name: &str) -> Option<&'p ArgValue> {
    args.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
}

/// The chain (source first) with each `MapBatch` + elementwise `Map` over its batches
/// merged into one `MapBatch` (each node re-linked to a copy of its input).
fn merge_elementwise(chain: &[&Plan]) -> Vec<Plan> {
    let mut out: Vec<Plan> = Vec::new();
    for n in chain {
        if let (Plan::Map(m), Some(Plan::MapBatch(prev))) = (n, out.last_mut())
            && m.ops.iter().all(MapOp::is_elementwise)
            && let Element::Batch(inner) = &m.output
        {
            prev.ops.extend(m.ops.iter().cloned());
            prev.map_output = (**inner).clone();
            continue;
        }
        out.push((*n).clone());
    }
    // Inputs are boxed copies of the original chain: re-link each node to the node
    // before it in `out`, so `input()` agrees with the merged chain.
    for k in 1..out.len() {
        let prev = out[k - 1].clone();
        if let Some(input) = out[k].input_mut() {
            *input = prev;
        }
    }
    out
}

/// The reader options of an interleave.
fn reader_options(i: &crate::ir::plan::Interleave) -> TokenStream {
    let compression = match &i.compression {
        ArgValue::Word(w) if w == "gzip" => quote!(__sl::Compression::Gzip),
        ArgValue::Word(w) if w == "zlib" => quote!(__sl::Compression::Zlib),
        ArgValue::Word(w) if w == "none" => quote!(__sl::Compression::None),
        _ => quote!(__sl::Compression::Auto),
    };
    let policy = match &i.on_corrupt {
        ArgValue::Word(w) if w == "skip" => quote!(__sl::CorruptPolicy::Skip),
        ArgValue::Word(w) if w == "skip_file" => quote!(__sl::CorruptPolicy::SkipFile),
        _ => quote!(__sl::CorruptPolicy::Fail),
    };
    let verify = i.verify_crc;
    quote!(__sl::ReaderOptions {
        compression: #compression,
        verify_crc: #verify,
        on_corrupt: #policy,
        ..::core::default::Default::default()
    })
}

/// A non-deterministic interleave of TFRecord files and the batching of its records, as
/// one stage whose readers fill the batches.
fn read_batches(i: &crate::ir::plan::Interleave, size: &ArgValue, drop: bool) -> R<TokenStream> {
    let options = reader_options(i);
    let cycle = usize_arg(&i.cycle_length)?;
    let par = parallel(&i.parallel)?;
    let size = usize_arg(size)?;
    Ok(quote!(__sl::tfrecord_batches(ds, #options, #cycle, #size, #drop).num_parallel(#par)))
}

impl Gen<'_> {
    /// The statements of a fused map + batch; `batched`: the input already comes in
    /// batches (a fused reader made them).
    fn map_batch(&mut self, m: &crate::ir::plan::MapBatch, batched: bool) -> R<TokenStream> {
        let input = m.input.output();
        let size = usize_arg(&m.size)?;
        let drop = m.drop_remainder;
        let f = self.map_batch_fn(&input, &m.ops, &m.map_output)?;
        let par = parallel(&m.parallel)?;
        let det = m.deterministic;
        let call = &f.name;
        let chunk = match (batched, &input) {
            (true, _) => TokenStream::new(),
            (false, Element::Record) => {
                quote!(let ds = ds.chunks(#size, #drop).map(__sl::RecordBatch::from);)
            }
            (false, _) => quote!(let ds = ds.chunks(#size, #drop);),
        };
        let (pre, args) = if f.random {
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

    fn record_index(&mut self, fields: &[FieldType]) -> usize {
        if let Some(i) = self.records.iter().position(|(f, _, _)| f == fields) {
            return i;
        }
        self.records.push((fields.to_vec(), false, false));
        self.records.len() - 1
    }

    fn record(&mut self, fields: &[FieldType]) -> R<Ident> {
        for f in fields {
            repr(f.ty.as_ref().ok_or("an untyped field")?).map_err(|e| format!("field `{}`: {e}", f.name))?;
        }
        Ok(format_ident!("Record{}", self.record_index(fields)))
    }

    fn batch(&mut self, fields: &[FieldType]) -> R<Ident> {
        self.record(fields)?;
        let i = self.record_index(fields);
        self.records[i].1 = true;
        Ok(format_ident!("Batch{}", i))
    }

    /// The Rust type of elements of type `e`.
    fn item_type(&mut self, e: &Element) -> R<TokenStream> {
        Ok(match e {
            Element::Path => quote!(::std::path::PathBuf),
            Element::Record => quote!(::std::vec::Vec<u8>),
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

    fn record_defs(&self) -> TokenStream {
        let mut out = TokenStream::new();
        for (k, (fields, batched, cached)) in self.records.iter().enumerate() {
            out.extend(record_items(k, fields, *batched, *cached));
        }
        out
    }

    /// `Record` / `Batch` aliases for the output's types.
    fn aliases(&self, out: &Element) -> TokenStream {
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

    fn fresh(&mut self, what: &str) -> Ident {
        self.next_fn += 1;
        format_ident!("{}_{}", what, self.next_fn)
    }

    /// `Params`: one field per parameter, plus the parameters of mixed pipelines.
    fn params(&self) -> R<TokenStream> {
        let mut fields = Vec::new();
        let mut inits = Vec::new();
        let mut arms = Vec::new();
        let mut finals = Vec::new();
        let mut defaults = Vec::new();
        let mut all_default = true;
        let names: Vec<String> = self.decls.params.iter().map(|p| p.name.clone()).collect();
        for p in &self.decls.params {
            let id = field_ident(&p.name);
            let s = p.name.as_str();
            let (ty, parse) = match p.ty {
                ParamType::Glob | ParamType::Path | ParamType::Str => {
                    (quote!(::std::string::String), quote!(__sl::param::<::std::string::String>(#s, v)?))
                }
                ParamType::Bool => (quote!(bool), quote!(__sl::param::<bool>(#s, v)?)),
                ParamType::U32 => (quote!(u32), quote!(__sl::param::<u32>(#s, v)?)),
                ParamType::U64 => (quote!(u64), quote!(__sl::param::<u64>(#s, v)?)),
                ParamType::I64 => (quote!(i64), quote!(__sl::param::<i64>(#s, v)?)),
                ParamType::F64 => (quote!(f64), quote!(__sl::param::<f64>(#s, v)?)),
                ParamType::Size => (quote!(u64), quote!(__sl::abi::size_param(#s, v)?)),
            };
            let default = match (&p.default, p.ty) {
                (None, _) => None,
                (Some(Value::Str(x)), _) => Some(quote!(::std::string::String::from(#x))),
                (Some(Value::Bool(b)), _) => Some(quote!(#b)),
                (Some(Value::Int(n)), t) => {
                    let l = Literal::i64_unsuffixed(*n);
                    Some(quote!((#l as #ty)).into_iter().collect::<TokenStream>())
                        .filter(|_| t != ParamType::Str)
                }
                (Some(Value::UInt(n) | Value::Bytes(n)), _) => {
                    let l = Literal::u64_unsuffixed(*n);
                    Some(quote!((#l as #ty)))
                }
                (Some(Value::Float(x)), _) => {
                    let l = Literal::f64_unsuffixed(*x);
                    Some(quote!((#l as #ty)))
                }
                (Some(Value::List(_)), _) => return Err(format!("parameter `{s}` has a list default")),
            };
            fields.push(quote!(pub #id: #ty));
            let doc = format!(
                " `{s}` (`{}`){}.",
                p.ty.name(),
                p.default.as_ref().map_or(String::new(), |d| format!(", default `{d}`"))
            );
            let _ = doc;
            match &default {
                Some(d) => {
                    inits.push(
                        quote!(let mut #id: ::std::option::Option<#ty> = ::std::option::Option::Some(#d);),
                    );
                    defaults.push(quote!(#id: #d));
                }
                None => {
                    all_default = false;
                    inits
                        .push(quote!(let mut #id: ::std::option::Option<#ty> = ::std::option::Option::None;));
                }
            }
            arms.push(quote!(#s => #id = ::std::option::Option::Some(#parse),));
            let missing = format!("parameter `{s}` has no default: set it (`--set {s}=...`)");
            finals.push(quote!(#id: #id.ok_or_else(|| ::std::string::String::from(#missing))?));
        }
        // The parameters of the pipelines this one mixes: `--set input.name=value`.
        let mut nested = Vec::new();
        for input in self.sample_inputs() {
            let id = field_ident(&input);
            let prefix = format!("{input}.");
            fields.push(quote!(pub #id: super::#id::Params));
            let sets = format_ident!("__set_{}", input);
            inits.push(quote!(let mut #sets: ::std::vec::Vec<(::std::string::String, ::std::string::String)> = ::std::vec::Vec::new();));
            nested.push(quote!(if let ::std::option::Option::Some(rest) = k.strip_prefix(#prefix) {
                #sets.push((rest.to_string(), v.clone()));
                continue;
            }));
            finals.push(
                quote!(#id: super::#id::Params::from_args(&#sets).map_err(|e| format!("{}{}", #prefix, e))?),
            );
            all_default &= self
                .all
                .iter()
                .find(|c| c.decls.name == input)
                .is_some_and(|c| c.decls.params.iter().all(|p| p.default.is_some()));
            defaults.push(quote!(#id: ::core::default::Default::default()));
        }
        let known = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        let unknown = format!("unknown parameter `{{}}` (parameters: {known})");
        let default_impl = if all_default {
            quote! {
                impl ::core::default::Default for Params {
                    fn default() -> Self {
                        Params { #(#defaults,)* }
                    }
                }
            }
        } else {
            TokenStream::new()
        };
        Ok(quote! {
            /// The pipeline's parameters.
            #[derive(Debug, Clone, PartialEq)]
            pub struct Params { #(#fields,)* }

            impl Params {
                /// From `NAME=VALUE` pairs (`--set`); the defaults fill the rest.
                pub fn from_args(set: &[(::std::string::String, ::std::string::String)]) -> ::std::result::Result<Params, ::std::string::String> {
                    #(#inits)*
                    for (k, v) in set {
                        #(#nested)*
                        match k.as_str() {
                            #(#arms)*
                            other => return ::std::result::Result::Err(format!(#unknown, other)),
                        }
                    }
                    ::std::result::Result::Ok(Params { #(#finals,)* })
                }
            }

            #default_impl
        })
    }

    fn sample_inputs(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(plan) =
            self.all.iter().find(|c| c.decls.name == self.decls.name).map(|c| &c.optimized.plan)
        {
            let mut node = Some(plan);
            while let Some(n) = node {
                if let Plan::SampleFrom(s) = n {
                    for i in &s.inputs {
                        if !out.contains(i) {
                            out.push(i.clone());
                        }
                    }
                }
                node = n.input();
            }
        }
        out
    }

    /// The `let ds = ...;` statement of one plan node.
    fn stage(&mut self, n: &Plan) -> R<TokenStream> {
        let input = n.input().map(Plan::output);
        Ok(match n {
            Plan::Files(f) => {
                let pattern = string_arg(&f.pattern)?;
                let shuffle = match &f.shuffle_seed {
                    Some(s) => {
                        let s = u64_arg(s)?;
                        quote!(.shuffled(#s))
                    }
                    None => TokenStream::new(),
                };
                quote!(let ds = __sl::files(#pattern)? #shuffle;)
            }
            Plan::SampleFrom(s) => {
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
            Plan::Interleave(i) => {
                let options = reader_options(i);
                let cycle = usize_arg(&i.cycle_length)?;
                let block = usize_arg(&i.block_length)?;
                let par = parallel(&i.parallel)?;
                let det = i.deterministic;
                quote! {
                    let ds = ds.interleave(
                        __sl::OpenTfRecord::new(#options),
                        #cycle,
                        #block,
                    ).num_parallel(#par).deterministic(#det);
                }
            }
            Plan::Map(m) => {
                let input = input.ok_or("map without input")?;
                let f = self.map_fn(&input, &m.ops, &m.output)?;
                self.apply(&f, &m.parallel, m.deterministic, None)?
            }
            Plan::MapFilter(m) => {
                let input = input.ok_or("map without input")?;
                let f = self.map_fn(&input, &m.ops, &m.output)?;
                let pred = self.predicate(&m.output, &m.conditions)?;
                self.apply(&f, &m.parallel, m.deterministic, Some(pred))?
            }
            Plan::MapBatch(m) => self.map_batch(m, false)?,
            Plan::Filter(f) => {
                let input = input.ok_or("filter without input")?;
                let pred = self.predicate(&input, &f.conditions)?;
                quote!(let ds = { let p = __params.clone(); ds.try_filter(move |x| #pred(&p, x)) };)
            }
            Plan::Rust(r) => self.rust_stage(r, input)?,
            Plan::Select(s) => {
                let input = input.ok_or("select without input")?;
                let (Element::Fields(from), out) = (&input, n.output()) else {
                    return Err("select of elements without fields".into());
                };
                let a = self.record(from)?;
                let Element::Fields(to) = &out else { return Err("select".into()) };
                let b = self.record(to)?;
                let names: Vec<Ident> = s.fields.iter().map(|f| field_ident(f)).collect();
                quote!(let ds = ds.map(|x: #a| #b { #(#names: x.#names,)* });)
            }
            Plan::Shuffle(s) => {
                let buffer = usize_arg(&s.buffer)?;
                let seed = seed(&s.seed)?;
                let re = s.reshuffle_each_epoch;
                quote!(let ds = ds.shuffle(#buffer, #seed).reshuffle_each_epoch(#re);)
            }
            Plan::ShuffleRepeat(s) => {
                let buffer = usize_arg(&s.buffer)?;
                let seed = seed(&s.seed)?;
                let count = match &s.count {
                    ArgValue::Word(_) => quote!(::std::option::Option::None),
                    v => {
                        let c = u64_arg(v)?;
                        quote!(::std::option::Option::Some(#c))
                    }
                };
                quote!(let ds = ds.shuffle(#buffer, #seed).reshuffle_each_epoch(true).repeat(#count);)
            }
            Plan::Batch(b) => {
                let input = input.ok_or("batch without input")?;
                let size = usize_arg(&b.size)?;
                let drop = b.drop_remainder;
                match (&input, &b.padded) {
                    (Element::Fields(f), None) => {
                        self.batch(f)?;
                        quote!(let ds = ds.batch(#size, #drop);)
                    }
                    (Element::Fields(f), Some(pad_to)) => {
                        self.batch(f)?;
                        let padding = self.padding(f, pad_to.as_ref())?;
                        quote!(let ds = ds.padded_batch(#size, #drop, #padding);)
                    }
                    (Element::Record, _) => {
                        quote!(let ds = ds.chunks(#size, #drop).map(__sl::RecordBatch::from);)
                    }
                    _ => quote!(let ds = ds.chunks(#size, #drop);),
                }
            }
            Plan::Unbatch(_) => quote!(let ds = ds.unbatch();),
            Plan::Repeat(p) => match pass_arg(&p.args, "count") {
                Some(ArgValue::Word(_)) | None => quote!(let ds = ds.repeat(::std::option::Option::None);),
                Some(v) => {
                    let c = u64_arg(v)?;
                    quote!(let ds = ds.repeat(::std::option::Option::Some(#c));)
                }
            },
            Plan::Take(p) => {
                let c = u64_arg(pass_arg(&p.args, "count").ok_or("take count")?)?;
                quote!(let ds = ds.take(#c);)
            }
            Plan::Skip(p) => {
                let c = u64_arg(&p.args.first().ok_or("skip count")?.1)?;
                quote!(let ds = ds.skip(#c);)
            }
            Plan::Shard(p) => {
                let n = u64_arg(pass_arg(&p.args, "num_shards").ok_or("shard count")?)?;
                let i = u64_arg(pass_arg(&p.args, "index").ok_or("shard index")?)?;
                match p.remainder() {
                    "drop" => quote!(let ds = ds.shard_with(#n, #i, __sl::Remainder::Drop)?;),
                    "pad" => quote!(let ds = ds.shard_with(#n, #i, __sl::Remainder::Pad)?;),
                    _ => quote!(let ds = ds.shard(#n, #i)?;),
                }
            }
            Plan::Cache(p) => match p.args.first() {
                None => quote!(let ds = ds.cache();),
                Some((_, v)) => {
                    match input.as_ref() {
                        Some(Element::Fields(f)) => {
                            self.record(f)?;
                            let i = self.record_index(f);
                            self.records[i].2 = true;
                        }
                        Some(Element::Record | Element::Path) => {}
                        _ => return Err("`cache(file)` of batches is not supported yet".into()),
                    }
                    let path = string_arg(v)?;
                    quote!(let ds = ds.cache_file(#path);)
                }
            },
            Plan::DeviceTail(_) => return Err("a device tail inside a pipeline".into()),
            Plan::Prefetch(p) => match p.args.first() {
                None | Some((_, ArgValue::Auto)) => quote!(let ds = ds.prefetch(__sl::Buffer::Auto);),
                Some((_, v)) => {
                    let c = usize_arg(v)?;
                    quote!(let ds = ds.prefetch(#c);)
                }
            },
        })
    }

    /// The device tail of pipeline `name` on the batches of `host`: its CPU twin (a map
    /// over the batches running the tail's operations as generated Rust) and its kernels,
    /// whose random operations draw as the twin's (the same ids, in the same order).
    fn device_tail(
        &mut self,
        name: &str,
        host: &Plan,
        t: &crate::ir::plan::DeviceTail,
    ) -> R<(DeviceCode, Vec<crate::ir::kernel::Kernel>)> {
        let host_item = self.item_type(&host.output())?;
        let base = self.next_rng;
        let twin = if t.ops.is_empty() {
            TokenStream::new()
        } else {
            let f = self.map_fn(&host.output(), &t.ops, &t.output)?;
            self.apply(&f, &ArgValue::Auto, true, None)?
        };
        let (mut kernels, mut generated) = (Vec::new(), Vec::new());
        for k in &t.kernels {
            let mut k = k.clone();
            k.name = format!("{name}_{}", k.name);
            for op in &mut k.ops {
                if let crate::ir::kernel::KernelOp::RandomCrop { op, .. }
                | crate::ir::kernel::KernelOp::RandomFlip { op, .. } = op
                {
                    *op += base;
                }
            }
            let source = k.source().map_err(|e| format!("the kernel of `{}`: {e}", k.field))?;
            let (out_shape, out_dtype) = k.output()?;
            let seeds = k
                .seeds
                .iter()
                .map(|s| match s {
                    crate::ir::kernel::KernelSeed::Const(v) => Ok(quote!(#v)),
                    crate::ir::kernel::KernelSeed::Param(p) => u64_arg(&ArgValue::Param(p.clone())),
                    crate::ir::kernel::KernelSeed::Run => Ok(quote!(__sl::abi::run_seed())),
                })
                .collect::<R<Vec<_>>>()?;
            let (kname, field, in_dtype, out_dtype) = (&k.name, &k.field, k.dtype.name(), out_dtype.name());
            let (in_shape, out_shape) = (&k.shape, &out_shape);
            let in_range =
                match k.ops.iter().find(|op| !matches!(op, crate::ir::kernel::KernelOp::RandomFlip { .. })) {
                    Some(crate::ir::kernel::KernelOp::OneHot(depth)) => {
                        let depth = *depth as i64;
                        quote!(::std::option::Option::Some((0, #depth)))
                    }
                    _ => quote!(::std::option::Option::None),
                };
            generated.push(k.clone());
            kernels.push(quote! {
                __sl::abi::TailKernel {
                    name: #kname,
                    field: #field,
                    source: #source,
                    in_dtype: #in_dtype,
                    in_shape: &[#(#in_shape),*],
                    out_dtype: #out_dtype,
                    out_shape: &[#(#out_shape),*],
                    seeds: ::std::vec![#(#seeds),*],
                    in_range: #in_range,
                }
            });
        }
        let tail = quote!(__sl::abi::DeviceTail { pipeline: NAME, kernels: ::std::vec![#(#kernels),*] });
        Ok((DeviceCode { host_item, twin, tail }, generated))
    }

    /// `.map(...)` converting the elements of pipeline `name` to this module's types.
    fn convert_from(&mut self, name: &str, e: &Element) -> R<TokenStream> {
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
    fn padding(&mut self, fields: &[FieldType], pad_to: Option<&ArgValue>) -> R<TokenStream> {
        let k = self.record_index(fields);
        let padding = format_ident!("Padding{}", k);
        let mut inits = Vec::new();
        for f in fields {
            let ty = f.ty.as_ref().ok_or("untyped field")?;
            let id = field_ident(&f.name);
            match repr(ty)? {
                Repr::List => inits.push(match pad_to {
                    Some(v) => {
                        let n = usize_arg(v)?;
                        quote!(#id: __sl::PadLen::to(#n, ::core::default::Default::default()))
                    }
                    None => quote!(#id: __sl::PadLen::longest(::core::default::Default::default())),
                }),
                Repr::Tensor => {
                    inits.push(quote!(#id: __sl::PadShape::longest(::core::default::Default::default())))
                }
                _ => {}
            }
        }
        Ok(quote!(#padding { #(#inits,)* }))
    }

    /// `let ds = ds.try_map(...)...;` for a map function, with an optional predicate.
    fn apply(&mut self, f: &MapFn, par: &ArgValue, det: bool, pred: Option<Ident>) -> R<TokenStream> {
        let par = parallel(par)?;
        let call = &f.name;
        let value = if f.by_ref { quote!(&x.value) } else { quote!(x.value) };
        let plain = if f.by_ref { quote!(&x) } else { quote!(x) };
        let (pre, args) = if f.random {
            (quote!(.enumerate()), quote!(&p, x.epoch, x.index, #value))
        } else {
            (TokenStream::new(), quote!(&p, 0, 0, #plain))
        };
        Ok(match pred {
            None => quote! {
                let ds = { let p = __params.clone(); ds #pre .try_map(move |x| #call(#args)) }
                    .num_parallel(#par).deterministic(#det).named("map");
            },
            Some(pred) => quote! {
                let ds = {
                    let p = __params.clone();
                    ds #pre .try_map(move |x| -> ::std::result::Result<::std::option::Option<_>, __sl::BoxError> {
                        let r = #call(#args)?;
                        ::std::result::Result::Ok(if #pred(&p, &r)? { ::std::option::Option::Some(r) } else { ::std::option::Option::None })
                    })
                }
                .num_parallel(#par).deterministic(#det).named("map_filter").somes();
            },
        })
    }

    /// A `map` or `filter` with Rust code (`pipeline!`): the code is called as written,
    /// with the tokens' own spans, so a type error in it points at it.
    fn rust_stage(&mut self, r: &crate::ir::plan::RustStage, input: Option<Element>) -> R<TokenStream> {
        let Some(Element::Fields(fields)) = input else {
            return Err("Rust code on elements without fields".into());
        };
        let rec = self.record(&fields)?;
        let code = if r.code.tokens.is_empty() {
            r.code.text.parse::<TokenStream>().map_err(|e| format!("Rust code `{}`: {e}", r.code.text))?
        } else {
            r.code.tokens.clone()
        };
        let span = code.clone().into_iter().next().map_or_else(proc_macro2::Span::call_site, |t| t.span());
        Ok(match r.kind {
            crate::ir::plan::RustKind::Filter => {
                let f = quote::quote_spanned!(span=> __sluice_filter(#code));
                quote! {
                    let ds = {
                        fn __sluice_filter<F: Fn(&#rec) -> bool + Send + Sync + 'static>(f: F) -> F { f }
                        let f = #f;
                        ds.filter(move |x: &#rec| f(x))
                    };
                }
            }
            crate::ir::plan::RustKind::Map => {
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
    fn predicate(&mut self, e: &Element, conditions: &[crate::ast::Expr]) -> R<Ident> {
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
            fields.iter().filter(|f| conditions.iter().any(|c| count_reads(c, &f.name) > 0)).collect();
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
    fn row_in(&mut self, input: &Element) -> R<TokenStream> {
        match input {
            Element::Record => Ok(quote!(&[u8])),
            other => self.item_type(other),
        }
    }

    /// The function mapping one element (`input`) through `ops` to a record `output`.
    fn map_fn(&mut self, input: &Element, ops: &[MapOp], output: &Element) -> R<MapFn> {
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

    /// The statements that turn input `x` into record `out_fields` (ending in `Ok(..)`).
    fn row_body(
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
    fn row_statements(
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
        if let Some(MapOp::ParseExample { fields: parsed }) = ops.first() {
            let parse = self.parse_fn(parsed)?;
            let locals: Vec<Ident> = parsed.iter().map(|x| local(&x.name)).collect();
            body.extend(quote!(let (#(#locals,)*) = #parse(x)?;));
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
                        && !ops[(k + 4).min(ops.len())..].iter().any(|op| match op {
                            MapOp::Assign { target: t, reads, .. } => t == target || reads.contains(target),
                            MapOp::ParseExample { .. } => true,
                        }) =>
                {
                    Some(target.clone())
                }
                _ => None,
            };
            if let Some(fused) = scope.decode_resize_normalize(&ops[k..], into.as_deref())? {
                body.extend(fused);
                written.extend(into);
                k += 4;
                continue;
            }
            match &ops[k] {
                MapOp::Assign { target, expr, ty, .. } => body.extend(scope.statement(target, expr, ty)?),
                MapOp::ParseExample { .. } => return Err("`parse_example` after other operations".into()),
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
    fn direct_columns_body(&mut self, ops: &[MapOp], out_fields: &[FieldType]) -> R<Option<TokenStream>> {
        let mut cols = Vec::new();
        for f in out_fields {
            let Some(ty) = f.ty.as_ref() else { return Ok(None) };
            let (Ok(Repr::Scalar | Repr::Tensor), Some(dims)) = (repr(ty), fixed_dims(ty)) else {
                return Ok(None);
            };
            cols.push((f.name.clone(), scalar(ty.dtype), dims, repr(ty)?));
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
            decls.extend(quote!(let mut #c: ::std::vec::Vec<#t> = ::std::vec::Vec::with_capacity(n * #per);));
            if !written.contains(name) {
                puts.extend(match r {
                    Repr::Scalar => quote!(#c.push(#l);),
                    _ => quote!(__sl::ops::put(&mut #c, #l.as_slice(), #per, #name)?;),
                });
            }
            finish.push(quote!(#id: __sl::Dense::new(::std::vec![n #(, #dims)*], #c)?));
        }
        let b = self.batch(out_fields)?;
        Ok(Some(quote! {
            let n = x.len();
            #decls
            for (i, record) in x.iter().enumerate() {
                let mut row = || -> ::std::result::Result<(), __sl::BoxError> {
                    let x: &[u8] = record;
                    #stmts
                    #puts
                    ::std::result::Result::Ok(())
                };
                row().map_err(|e| format!("{}: {e}", x.locate(i)))?;
            }
            ::std::result::Result::Ok(#b { #(#finish,)* })
        }))
    }

    /// The rows of a batch `x` of `inner` elements, and how many there are.
    fn rows_of(inner: &Element) -> R<(TokenStream, TokenStream)> {
        match inner {
            Element::Record => Ok((quote!(x.len()), quote!(x.iter()))),
            Element::Fields(_) => {
                Ok((quote!(__sl::Columns::num_rows(&x)?), quote!((0..n).map(|i| __sl::Columns::row(&x, i)))))
            }
            other => Err(format!("a map over batches of {other}")),
        }
    }

    /// A map over batches (`batch` then `map`): a batch in, a batch out.
    fn batch_map_fn(&mut self, inner: &Element, ops: &[MapOp], out: &Element) -> R<MapFn> {
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
    fn batch_body(&mut self, inner: &Element, ops: &[MapOp], out_fields: &[FieldType]) -> R<TokenStream> {
        self.last_random = false;
        if let ([MapOp::ParseExample { fields }], Element::Record) = (ops, inner)
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
            let padding = self.padding(out_fields, None)?;
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
    fn column_body(
        &mut self,
        in_fields: &[FieldType],
        ops: &[MapOp],
        out_fields: &[FieldType],
    ) -> R<Option<TokenStream>> {
        if !ops.iter().all(MapOp::is_elementwise) {
            return Ok(None);
        }
        let batched = |t: &TensorType| -> Option<TensorType> {
            let mut dims = vec![crate::ir::types::Dim::Named("n".into())];
            match &t.shape {
                crate::ir::types::Shape::Dims(d) => dims.extend(d.iter().cloned()),
                crate::ir::types::Shape::Var => return None,
            }
            Some(TensorType { dtype: t.dtype, shape: crate::ir::types::Shape::Dims(dims) })
        };
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
                MapOp::ParseExample { .. } => Vec::new(),
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
        let mut scope = Scope::new(fields, self.decls, &mut next_rng);
        let mut assigned = Vec::new();
        for op in ops {
            let MapOp::Assign { target, expr, ty, .. } = op else { return Ok(None) };
            let Some(bt) = batched(ty) else { return Ok(None) };
            match scope.statement(target, expr, &bt) {
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
    fn map_batch_fn(&mut self, input: &Element, ops: &[MapOp], map_output: &Element) -> R<MapFn> {
        let Element::Fields(out_fields) = map_output else {
            return Err(format!("a map producing {map_output}"));
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

    /// The found-entries walk of a specialised parser: `let mut e_x = None; ...`.
    fn entries_walk(fields: &[FieldType]) -> TokenStream {
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
    fn default_of(&self, f: &FieldType, for_slice: bool) -> R<TokenStream> {
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
    fn parse_fn(&mut self, fields: &[FieldType]) -> R<Ident> {
        // The first parser of a pipeline is public, under a fixed name.
        let first = !self.public_parse;
        self.public_parse = true;
        let name = if first { format_ident!("parse_example") } else { self.fresh("parse") };
        let vis = if first { quote!(pub) } else { quote!() };
        let walk = Self::entries_walk(fields);
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
            }
        }
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

    /// `parse_columns_N(records) -> Batch`: parses a batch of records straight into the
    /// batch's column buffers; `None` when a field needs the row-by-row path (lists).
    fn parse_columns_fn(&mut self, fields: &[FieldType]) -> R<Option<Ident>> {
        let mut decls = Vec::new();
        let mut per_row = Vec::new();
        let mut finish = Vec::new();
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
                    decls.push(
                        quote!(let mut #c: ::std::vec::Vec<#t> = ::std::vec::Vec::with_capacity(n * #n);),
                    );
                    per_row.push(quote!(__sl::parse::fixed::<#t>(#s, #e, #n, #d, &mut #c)));
                    finish.push(quote!(#id: __sl::Dense::new(::std::vec![n #(, #dims)*], #c)?));
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
                }
                Repr::List => return Ok(None),
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
        self.items.extend(quote! {
            /// Parses a batch of serialized `tf.train.Example`s straight into the batch's
            /// column buffers: only the declared features, no per-record allocation.
            fn #name<'r>(
                records: impl ExactSizeIterator<Item = &'r [u8]>,
                at: impl Fn(usize) -> ::std::string::String,
            ) -> ::std::result::Result<#b, __sl::BoxError> {
                let n = records.len();
                #(#decls)*
                for (i, record) in records.enumerate() {
                    let mut one = || -> ::std::result::Result<(), __sl::ParseError> {
                        #walk
                        #( #per_row?; )*
                        ::std::result::Result::Ok(())
                    };
                    one().map_err(|e| format!("{}: {e}", at(i)))?;
                }
                ::std::result::Result::Ok(#b { #(#finish,)* })
            }
        });
        Ok(Some(name))
    }
}

/// A generated map function and whether it draws random numbers.
struct MapFn {
    name: Ident,
    random: bool,
    /// It takes its input by reference (a serialized record).
    by_ref: bool,
}
