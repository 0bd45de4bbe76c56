//! One pipeline's module: its parameters, record and batch types, functions and
//! `dataset()`, the chain of runtime stages, built source first, each stage a concrete
//! generic type (no boxing, no dynamic dispatch; `sample_from` boxes its inputs once, not
//! per element); and what saves and restores its position.

use proc_macro2::TokenStream;
use quote::quote;

use super::context::{Gen, R, parallel, pass_arg, seed, string_arg, u64_arg, usize_arg};
use super::device_tail::DeviceCode;
use super::stages::{merge_elementwise, read_batches};
use super::types::field_ident;
use crate::driver::Pipeline;
use crate::ir::plan::{ArgValue, Element, Plan};

/// The module of pipeline `c` and the kernels of its device tail; `all` are the file's
/// pipelines (for `sample_from`).
pub fn generate(c: &Pipeline, all: &[Pipeline]) -> R<(TokenStream, Vec<crate::ir::kernel::Kernel>)> {
    let plan = &c.optimized.plan;
    let mut g = Gen {
        decls: &c.decls,
        rust_code: &c.rust_code,
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
pub(super) fn resume_items(plan: &Plan) -> R<TokenStream> {
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
