//! `Params`: one field per parameter of the pipeline (and the parameters of the
//! pipelines it mixes), parsed from `--set NAME=VALUE` pairs, with the defaults.

use proc_macro2::{Literal, TokenStream};
use quote::quote;

use super::context::{Gen, R};
use super::types::field_ident;
use crate::ir::decls::Declarations;
use crate::ir::plan::ArgValue;
use crate::ir::types::{ParamType, Value};
use crate::physical::{Expr, ParamRule};

impl Gen<'_> {
    /// `Params`: one field per parameter, plus the parameters of mixed pipelines, and
    /// `check`, which holds their values against the physical plan's `rules`.
    pub(super) fn params(&self, rules: &[ParamRule]) -> R<TokenStream> {
        let mut fields = Vec::new();
        let mut inits = Vec::new();
        let mut arms = Vec::new();
        let mut finals = Vec::new();
        let mut defaults = Vec::new();
        let mut all_default = true;
        let names: Vec<String> = self.decls.params.iter().map(|p| p.name.clone()).collect();
        // Hygiene: a parameter's value is held in `__values.N` while the pairs are read,
        // never in a local named after the parameter, which could be any name the
        // generated code uses itself (`k`, `v`, `set`, `params`, ...).
        for (i, p) in self.decls.params.iter().enumerate() {
            let id = field_ident(&p.name);
            let slot = syn::Index::from(i);
            let s = p.name.as_str();
            let (ty, parse) = match p.ty {
                ParamType::Glob | ParamType::Path | ParamType::Str => {
                    (quote!(::std::string::String), quote!(__sl::param::<::std::string::String>(#s, __v)?))
                }
                ParamType::Bool => (quote!(bool), quote!(__sl::param::<bool>(#s, __v)?)),
                ParamType::U32 => (quote!(u32), quote!(__sl::param::<u32>(#s, __v)?)),
                ParamType::U64 => (quote!(u64), quote!(__sl::param::<u64>(#s, __v)?)),
                ParamType::I64 => (quote!(i64), quote!(__sl::param::<i64>(#s, __v)?)),
                ParamType::F64 => (quote!(f64), quote!(__sl::param::<f64>(#s, __v)?)),
                ParamType::Size => (quote!(u64), quote!(__sl::abi::size_param(#s, __v)?)),
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
                    inits.push(quote!(::std::option::Option::<#ty>::Some(#d)));
                    defaults.push(quote!(#id: #d));
                }
                None => {
                    all_default = false;
                    inits.push(quote!(::std::option::Option::<#ty>::None));
                }
            }
            arms.push(quote!(#s => __values.#slot = ::std::option::Option::Some(#parse),));
            let missing = format!("parameter `{s}` has no default: set it (`--set {s}=...`)");
            finals.push(quote!(#id: __values.#slot.ok_or_else(|| ::std::string::String::from(#missing))?));
        }
        // The parameters of the pipelines this one mixes: `--set input.name=value`.
        let mut nested = Vec::new();
        for input in self.sample_inputs() {
            let id = field_ident(&input);
            let prefix = format!("{input}.");
            fields.push(quote!(pub #id: super::#id::Params));
            let slot = syn::Index::from(inits.len());
            inits.push(quote!(::std::vec::Vec::<(::std::string::String, ::std::string::String)>::new()));
            nested.push(quote!(if let ::std::option::Option::Some(__rest) = __k.strip_prefix(#prefix) {
                __values.#slot.push((__rest.to_string(), __v.clone()));
                continue;
            }));
            finals.push(
                quote!(#id: super::#id::Params::from_args(&__values.#slot).map_err(|__e| format!("{}{}", #prefix, __e))?),
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
        let checks = checks(rules, self.decls)?;
        Ok(quote! {
            /// The pipeline's parameters.
            #[derive(Debug, Clone, PartialEq)]
            pub struct Params { #(#fields,)* }

            impl Params {
                /// From `NAME=VALUE` pairs (`--set`); the defaults fill the rest.
                pub fn from_args(__set: &[(::std::string::String, ::std::string::String)]) -> ::std::result::Result<Params, ::std::string::String> {
                    let mut __values = (#(#inits,)*);
                    for (__k, __v) in __set {
                        #(#nested)*
                        match __k.as_str() {
                            #(#arms)*
                            __other => return ::std::result::Result::Err(format!(#unknown, __other)),
                        }
                    }
                    let __params = Params { #(#finals,)* };
                    __params.check()?;
                    ::std::result::Result::Ok(__params)
                }

                /// Checks the values against what the stages they size need (a count at
                /// least 1, a shard's index below its count): an error names the
                /// parameter and the stage argument it feeds.
                pub fn check(&self) -> ::std::result::Result<(), ::std::string::String> {
                    #checks
                    ::std::result::Result::Ok(())
                }
            }

            #default_impl
        })
    }

    /// The pipelines this one takes (`sample_from`, `zip`, `concatenate`), each once.
    pub(super) fn sample_inputs(&self) -> Vec<String> {
        self.all
            .iter()
            .find(|c| c.decls.name == self.decls.name)
            .map_or_else(Vec::new, |c| c.physical.logical.taken.clone())
    }
}

/// The statements of `Params::check` for `rules`.
fn checks(rules: &[ParamRule], decls: &Declarations) -> R<TokenStream> {
    // A value as a `u64` and how to show it: a parameter (`self.name`) or a constant.
    let value = |v: &ArgValue| -> R<(TokenStream, String)> {
        match v {
            ArgValue::Param(p) => {
                let id = field_ident(p);
                Ok((quote!((self.#id as u64)), format!("parameter `{p}`")))
            }
            ArgValue::Const(Value::Int(n)) if *n >= 0 => {
                let l = Literal::u64_unsuffixed(*n as u64);
                Ok((quote!((#l as u64)), n.to_string()))
            }
            ArgValue::Const(Value::UInt(n)) => {
                let l = Literal::u64_unsuffixed(*n);
                Ok((quote!((#l as u64)), n.to_string()))
            }
            other => Err(format!("a shard argument `{other}`")),
        }
    };
    let mut out = TokenStream::new();
    for rule in rules {
        out.extend(match rule {
            ParamRule::AtLeastOne { param, stage, arg } => {
                let (v, _) = value(&ArgValue::Param(param.clone()))?;
                let message = format!("parameter `{param}` is 0: the `{arg}` of `{stage}` it sets must be at least 1");
                quote!(if #v < 1 { return ::std::result::Result::Err(::std::string::String::from(#message)); })
            }
            ParamRule::NonZero { param, stage, arg } => {
                let (v, _) = value(&ArgValue::Param(param.clone()))?;
                let message = format!("parameter `{param}` is 0: the `{arg}` of `{stage}` it sets must not be 0");
                quote!(if #v == 0 { return ::std::result::Result::Err(::std::string::String::from(#message)); })
            }
            ParamRule::IndexBelowCount { index, count } => {
                let ((i, i_name), (n, n_name)) = (value(index)?, value(count)?);
                let message = match (index, count) {
                    (ArgValue::Param(_), ArgValue::Param(_)) => format!(
                        "{i_name} is {{i}}, {n_name} is {{n}}: the `index` of `shard` must be below its `num_shards`"
                    ),
                    (ArgValue::Param(_), _) => {
                        format!("{i_name} is {{i}}: the `index` of `shard` must be below its `num_shards` ({{n}})")
                    }
                    _ => format!("{n_name} is {{n}}: the `num_shards` of `shard` must be above its `index` ({{i}})"),
                };
                quote!(if #i >= #n {
                    let (i, n) = (#i, #n);
                    return ::std::result::Result::Err(format!(#message));
                })
            }
            ParamRule::AtMost { param, stage, arg, max } => {
                let (v, _) = value(&ArgValue::Param(param.clone()))?;
                let message = format!(
                    "parameter `{param}` is {{}}: the `{arg}` of `{stage}` it sets must be at most {max}"
                );
                let max = Literal::u64_suffixed(*max);
                quote!(if #v > #max { return ::std::result::Result::Err(format!(#message, #v)); })
            }
            ParamRule::WithinBudget { bound, budget } => {
                let expr = bound_tokens(bound);
                let values = bound.params().into_iter().map(|p| {
                    let id = field_ident(&p);
                    let default = match decls.params.iter().find(|q| q.name == p).and_then(|q| q.default.as_ref()) {
                        Some(Value::Int(n)) if *n >= 0 => Some(*n as u64),
                        Some(Value::UInt(n) | Value::Bytes(n)) => Some(*n),
                        _ => None,
                    };
                    let default = match default {
                        Some(n) => {
                            let l = Literal::u64_suffixed(n);
                            quote!(::std::option::Option::Some(#l))
                        }
                        None => quote!(::std::option::Option::None),
                    };
                    quote!((#p, (self.#id as u64), #default))
                });
                let budget = Literal::u64_suffixed(*budget);
                quote! {
                    let __bound: u64 = #expr;
                    if __bound > #budget {
                        return ::std::result::Result::Err(__sl::abi::over_budget(__bound, #budget, &[#(#values),*]));
                    }
                }
            }
        });
    }
    Ok(out)
}

/// The memory bound's expression of the parameters as `u64` arithmetic on `self`'s
/// fields (saturating, as the compiler computes it).
fn bound_tokens(e: &Expr) -> TokenStream {
    let two = |a: &Expr, b: &Expr| (bound_tokens(a), bound_tokens(b));
    match e {
        Expr::Const(n) => {
            let l = Literal::u64_suffixed(*n);
            quote!(#l)
        }
        Expr::Param(p) => {
            let id = field_ident(p);
            quote!((self.#id as u64))
        }
        Expr::Add(a, b) => {
            let (a, b) = two(a, b);
            quote!(u64::saturating_add(#a, #b))
        }
        Expr::Sub(a, b) => {
            let (a, b) = two(a, b);
            quote!(u64::saturating_sub(#a, #b))
        }
        Expr::Mul(a, b) => {
            let (a, b) = two(a, b);
            quote!(u64::saturating_mul(#a, #b))
        }
        Expr::Div(a, b) => {
            let (a, b) = two(a, b);
            quote!(u64::checked_div(#a, #b).unwrap_or(0))
        }
        Expr::DivCeil(a, b) => {
            let (a, b) = two(a, b);
            quote!(match #b { 0 => 0u64, __d => u64::div_ceil(#a, __d) })
        }
        Expr::Min(a, b) => {
            let (a, b) = two(a, b);
            quote!(::core::cmp::min::<u64>(#a, #b))
        }
        Expr::Max(a, b) => {
            let (a, b) = two(a, b);
            quote!(::core::cmp::max::<u64>(#a, #b))
        }
        Expr::IfBelow { a, b, then, otherwise } => {
            let (a, b) = two(a, b);
            let (then, otherwise) = two(then, otherwise);
            quote!(if #a < #b { #then } else { #otherwise })
        }
    }
}
