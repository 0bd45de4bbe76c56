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
use crate::ir::op::Op;
use crate::ir::plan::{MapOp, Plan};

/// `__sl::abi::tokenize::tokenizer(path, add_bos, add_eos)?;` for each distinct
/// tokenizer use in `plan`'s maps, in plan order (source first).
pub(super) fn preload(plan: &Plan) -> R<TokenStream> {
    let mut nodes = Vec::new();
    let mut node = Some(plan);
    while let Some(n) = node {
        nodes.push(n);
        node = n.input();
    }
    let mut seen: Vec<(String, bool, bool)> = Vec::new();
    let mut out = TokenStream::new();
    for n in nodes.into_iter().rev() {
        let ops: &[MapOp] = match n {
            Plan::Map(m) => &m.ops,
            Plan::MapFilter(m) => &m.ops,
            Plan::MapBatch(m) => &m.ops,
            Plan::DeviceTail(t) => &t.ops,
            _ => continue,
        };
        for op in ops {
            let MapOp::Assign { value, .. } = op else { continue };
            for e in value.nodes() {
                let Some(Op::Tokenize { tokenizer, add_bos, add_eos, .. }) = e.op() else { continue };
                let key = (tokenizer.to_string(), *add_bos, *add_eos);
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
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
        }
    }
    Ok(out)
}
