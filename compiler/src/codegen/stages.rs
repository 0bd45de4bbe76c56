//! The `let ds = ...;` statement of each stage of the chain.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::quote;

use super::context::{Gen, MapFn, R, parallel, pass_arg, seed, string_arg, u64_arg, usize_arg};
use super::types::field_ident;
use crate::ir::plan::{ArgValue, Element, MapOp, Plan};

/// The chain (source first) with each `MapBatch` + elementwise `Map` over its batches
/// merged into one `MapBatch` (each node re-linked to a copy of its input).
pub(super) fn merge_elementwise(chain: &[&Plan]) -> Vec<Plan> {
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
pub(super) fn reader_options(i: &crate::ir::plan::Interleave) -> TokenStream {
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
pub(super) fn read_batches(i: &crate::ir::plan::Interleave, size: &ArgValue, drop: bool) -> R<TokenStream> {
    let options = reader_options(i);
    let cycle = usize_arg(&i.cycle_length)?;
    let par = parallel(&i.parallel)?;
    let size = usize_arg(size)?;
    Ok(quote!(__sl::tfrecord_batches(ds, #options, #cycle, #size, #drop).num_parallel(#par)))
}

impl Gen<'_> {
    /// The statements of a fused map + batch; `batched`: the input already comes in
    /// batches (a fused reader made them).
    pub(super) fn map_batch(&mut self, m: &crate::ir::plan::MapBatch, batched: bool) -> R<TokenStream> {
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

    /// The `let ds = ...;` statement of one plan node.
    pub(super) fn stage(&mut self, n: &Plan) -> R<TokenStream> {
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

    /// `let ds = ds.try_map(...)...;` for a map function, with an optional predicate.
    pub(super) fn apply(
        &mut self,
        f: &MapFn,
        par: &ArgValue,
        det: bool,
        pred: Option<Ident>,
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
}
