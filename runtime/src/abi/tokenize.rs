//! The `tokenize` operation in generated code: [`tokenizer`] loads (and checks) a
//! pipeline's tokenizer once, when its `dataset()` is built, so a missing or bad file is
//! an error before any element; [`tokenize`] encodes one value with it. Each thread
//! keeps the tokenizers it used last, so encoding takes no lock.

use std::cell::RefCell;
use std::sync::Arc;

use crate::error::{BoxError, Result};
use crate::text::tokenize::{Tokenizer, load};

/// Loads the tokenizer at `path` into the process's cache and checks that it has the
/// BOS / EOS tokens the pipeline adds.
pub fn tokenizer(path: &str, add_bos: bool, add_eos: bool) -> Result<()> {
    load(path)?.require(add_bos, add_eos)
}

thread_local! {
    /// The tokenizers this thread used, by path (a pipeline has one or a few).
    static LOCAL: RefCell<Vec<(String, Arc<Tokenizer>)>> = const { RefCell::new(Vec::new()) };
}

/// `tokenize(text, tokenizer, add_bos, add_eos)`: the ids of `text` (UTF-8, checked:
/// a `bytes` field may hold anything).
pub fn tokenize(text: &[u8], path: &str, add_bos: bool, add_eos: bool) -> Result<Vec<i32>, BoxError> {
    let text = std::str::from_utf8(text).map_err(|e| format!("tokenize: the text is not UTF-8: {e}"))?;
    let t = LOCAL.with_borrow_mut(|local| -> Result<Arc<Tokenizer>> {
        if let Some((_, t)) = local.iter().find(|(p, _)| p == path) {
            return Ok(t.clone());
        }
        let t = load(path)?;
        local.push((path.to_string(), t.clone()));
        Ok(t)
    })?;
    t.require(add_bos, add_eos)?;
    Ok(t.encode(text, add_bos, add_eos)?)
}
