//! What `dataset()` does for the `tokenize` operations of a pipeline before building its
//! stages: load each tokenizer file once (the runtime keeps it for the process and the
//! map's workers share it) and check it has the BOS / EOS tokens asked for, so a missing
//! or bad file is an error naming it when the pipeline is built, not at its first
//! element.

use proc_macro2::TokenStream;
use quote::quote;

use super::context::R;
use super::types::field_ident;
use crate::ir::expr::ExprKind;
use crate::physical::Logical;

/// `__sl::abi::tokenize::tokenizer(path, add_bos, add_eos)?;` for each distinct
/// tokenizer use of the pipeline's maps, in plan order (source first).
pub(super) fn preload(logical: &Logical) -> R<TokenStream> {
    let mut out = TokenStream::new();
    for (tokenizer, add_bos, add_eos) in &logical.tokenizers {
        let path = match &tokenizer.kind {
            ExprKind::Str(s) => quote!(#s),
            ExprKind::Param { name, .. } => {
                let id = field_ident(name);
                quote!(params.#id.as_str())
            }
            _ => return Err(format!("the tokenizer `{tokenizer}` is not a file")),
        };
        out.extend(quote!(__sl::abi::tokenize::tokenizer(#path, #add_bos, #add_eos)?;));
    }
    Ok(out)
}
