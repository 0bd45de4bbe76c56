//! The `pipeline!` proc-macro: a thin front end over `sluice-compiler`. It parses the
//! `.pipe` language from Rust tokens (`syntax::tokens`, syn) or reads a `.pipe` file, runs
//! the one compiler (sema, optimizer, physical plan, code generator: the code `build.rs`
//! generates for the same text), and turns its diagnostics into `syn::Error`s on the
//! exact tokens (for a file: on the path, with the rendered snippet and `file:line:col`).
//! All errors are reported together, and on error a fallback module per pipeline keeps
//! uses such as `NAME::dataset(&params)` from adding errors of their own. Warnings (such
//! as W0210, file-level sharding) are left out: a proc-macro cannot emit one on stable
//! Rust; `sluice check` or `build::compile` on the same text shows them.
//!
//! Inline, `map` and `filter` also take Rust closures and function paths, which the
//! generated code calls directly (see `sluice_compiler::syntax::tokens`); the modules of
//! an inline pipeline start with `use super::*;` so that this code can name the items
//! of the module the macro is called in.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote};
use sluice_compiler::Diagnostic;
use sluice_compiler::syntax::{SpanMap, parse_tokens};

/// Compiles pipelines written in the `.pipe` language to one module each, as
/// `build.rs` + `include_pipelines!` do:
///
/// ```ignore
/// sluice::pipeline! {
///     pipeline train(files: glob = "data/*.tfrecord") {
///         schema { x: f32[16], label: i64 }
///         tfrecords(files);
///         map { parse_example(); }
///         filter(|r| r.label >= 0);
///         batch(32);
///     }
/// }
/// // or, from a file relative to CARGO_MANIFEST_DIR (cargo rebuilds when it changes):
/// sluice::pipeline!(file = "pipes/train.pipe");
/// ```
#[proc_macro]
pub fn pipeline(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = TokenStream::from(input);
    match file_arg(input.clone()) {
        Some(path) => from_file(&path),
        None => inline(input),
    }
    .into()
}

/// `file = "PATH"`, when that is the whole input.
fn file_arg(input: TokenStream) -> Option<syn::LitStr> {
    let mut it = input.into_iter();
    let (Some(TokenTree::Ident(kw)), Some(TokenTree::Punct(eq)), Some(TokenTree::Literal(lit)), None) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return None;
    };
    if kw != "file" || eq.as_char() != '=' {
        return None;
    }
    syn::parse2::<syn::LitStr>(TokenTree::Literal(lit).into()).ok()
}

fn inline(input: TokenStream) -> TokenStream {
    let names = pipeline_names(input.clone());
    let (parsed, map) = parse_tokens(input);
    let file = match parsed {
        Ok(file) => file,
        Err(diags) => return failed(errors(&diags, |d| map.error(d.primary.span, message(d))), &names),
    };
    match sluice_compiler::compile_ast(&file).generate() {
        Ok(generated) => use_super(generated.tokens),
        Err(diags) => {
            let names: Vec<String> = file.pipelines.iter().map(|p| p.name.name.clone()).collect();
            failed(errors(&diags, |d| error_at(&map, d)), &names)
        }
    }
}

fn from_file(path: &syn::LitStr) -> TokenStream {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let full = std::path::Path::new(&dir).join(path.value());
    let source = match std::fs::read_to_string(&full) {
        Ok(s) => s,
        Err(e) => {
            let e = syn::Error::new(path.span(), format!("cannot read `{}`: {e}", full.display()));
            return e.to_compile_error();
        }
    };
    let names = source.parse::<TokenStream>().map(pipeline_names).unwrap_or_default();
    let full_str = full.display().to_string();
    // Tracks the file: cargo rebuilds the crate when it changes.
    let track = quote!(
        const _: &[u8] = ::core::include_bytes!(#full_str);
    );
    match sluice_compiler::compile(&source).generate() {
        Ok(generated) => {
            let tokens = generated.tokens;
            quote!(#track #tokens)
        }
        Err(diags) => {
            let name = path.value();
            let e = errors(&diags, |d| {
                let rendered = sluice_compiler::diagnostic::render(&name, &source, std::slice::from_ref(d));
                syn::Error::new(path.span(), format!("{}\n{}", d.message, rendered.trim_end()))
            });
            let fallback = failed(e, &names);
            quote!(#track #fallback)
        }
    }
}

/// The error diagnostics as one combined `syn::Error` (warnings are left out).
fn errors(diags: &[Diagnostic], mut to: impl FnMut(&Diagnostic) -> syn::Error) -> syn::Error {
    let mut out: Option<syn::Error> = None;
    for d in diags.iter().filter(|d| d.is_error()) {
        let e = to(d);
        match &mut out {
            Some(all) => all.combine(e),
            None => out = Some(e),
        }
    }
    out.unwrap_or_else(|| syn::Error::new(Span::call_site(), "the pipelines do not compile"))
}

/// A diagnostic on its tokens; each secondary label is a note on its own tokens.
fn error_at(map: &SpanMap, d: &Diagnostic) -> syn::Error {
    let mut e = map.error(d.primary.span, message(d));
    for l in &d.secondary {
        if !l.message.is_empty() {
            e.combine(map.error(l.span, format!("note [{}]: {}", d.code, l.message)));
        }
    }
    e
}

/// The message of a diagnostic, with its code, label, notes and help, as rustc lays
/// them out.
fn message(d: &Diagnostic) -> String {
    let mut m = format!("{} [{}]", d.message, d.code);
    if !d.primary.message.is_empty() {
        m.push_str(&format!("\n  {}", d.primary.message));
    }
    for n in &d.notes {
        m.push_str(&format!("\n  = note: {n}"));
    }
    if let Some(h) = &d.help {
        m.push_str(&format!("\n  = help: {h}"));
    }
    m
}

/// The errors, then a stand-in module per pipeline: the same names (`Params`,
/// `Params::from_args`, `Item`, `dataset`, `NAME`), so that the code using them does not
/// add errors of its own.
fn failed(error: syn::Error, names: &[String]) -> TokenStream {
    let errors = error.to_compile_error();
    let modules = names.iter().map(|name| {
        let module = format_ident!("{}", name);
        quote! {
            #[allow(unused, dead_code, clippy::all)]
            pub mod #module {
                pub const NAME: &str = #name;
                #[derive(Debug, Clone, Default)]
                pub struct Params;
                impl Params {
                    pub fn from_args(
                        _: &[(::std::string::String, ::std::string::String)],
                    ) -> ::std::result::Result<Params, ::std::string::String> {
                        ::std::result::Result::Ok(Params)
                    }
                }
                pub type Item = ::std::vec::Vec<u8>;
                pub fn dataset(
                    _: &Params,
                ) -> ::sluice::__private::Result<impl ::sluice::__private::Dataset<Item = Item> + use<>> {
                    ::std::result::Result::Ok(::sluice::__private::from_vec(::std::vec::Vec::<Item>::new()))
                }
            }
        }
    });
    quote!(#errors #(#modules)*)
}

/// The names after `pipeline` at the top level of the input (for the fallback when it
/// does not parse).
fn pipeline_names(input: TokenStream) -> Vec<String> {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    tokens
        .windows(2)
        .filter_map(|w| match (&w[0], &w[1]) {
            (TokenTree::Ident(kw), TokenTree::Ident(name)) if kw == "pipeline" => Some(name.to_string()),
            _ => None,
        })
        .collect()
}

/// Adds `use super::*;` to each generated module, so the Rust code of an inline pipeline
/// can name the items of the module the macro is called in.
fn use_super(tokens: TokenStream) -> TokenStream {
    let Ok(mut file) = syn::parse2::<syn::File>(tokens.clone()) else { return tokens };
    for item in &mut file.items {
        if let syn::Item::Mod(m) = item
            && let Some((_, items)) = &mut m.content
        {
            items.insert(
                0,
                syn::parse_quote!(
                    use super::*;
                ),
            );
        }
    }
    quote!(#file)
}
