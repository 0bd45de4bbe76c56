//! Hugging Face tokenizers for the `tokenize` operation: a `tokenizer.json` file (the
//! format `tokenizers.Tokenizer.save` writes, for BPE, WordPiece, Unigram and WordLevel
//! models) loaded once, with the ids of its beginning- and end-of-sequence tokens.
//!
//! Encoding is `Tokenizer::encode_fast(text, add_special_tokens = false)`: the
//! normalizer, pre-tokenizer and model, **not** the tokenizer's post-processor (its
//! template), so the ids are Python's `tokenizer.encode(text,
//! add_special_tokens=False).ids`. `add_bos` / `add_eos` then put the tokenizer's BOS
//! token in front and its EOS token at the end, named by convention
//! ([`BOS_NAMES`], [`EOS_NAMES`]: the first of them the vocabulary holds).
//!
//! [`load`] keeps one [`Tokenizer`] per path for the whole process (a tokenizer is read
//! once, however many pipelines, passes and threads use it); a file changed while the
//! process runs is not read again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};

/// The names a BOS (beginning-of-sequence) token goes by, in the order they are tried.
pub const BOS_NAMES: &[&str] = &["<s>", "<bos>", "[BOS]", "<|begin_of_text|>", "<|startoftext|>", "[CLS]"];

/// The names an EOS (end-of-sequence) token goes by, in the order they are tried.
pub const EOS_NAMES: &[&str] = &["</s>", "<eos>", "[EOS]", "<|end_of_text|>", "<|endoftext|>", "[SEP]"];

/// A loaded tokenizer and its special tokens.
#[derive(Debug)]
pub struct Tokenizer {
    path: PathBuf,
    inner: tokenizers::Tokenizer,
    bos: Option<i32>,
    eos: Option<i32>,
}

impl Tokenizer {
    /// Reads and checks `path` (a `tokenizer.json`). A missing file is `Error::Io`, a file
    /// that is not a tokenizer `Error::Invalid`, both naming the file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        let inner = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| {
            Error::Invalid(format!("tokenizer {}: not a tokenizer.json file: {e}", path.display()))
        })?;
        if inner.get_vocab_size(true) > i32::MAX as usize {
            return Err(Error::Invalid(format!(
                "tokenizer {}: {} tokens do not fit i32 ids",
                path.display(),
                inner.get_vocab_size(true)
            )));
        }
        let find = |names: &[&str]| names.iter().find_map(|n| inner.token_to_id(n)).map(|id| id as i32);
        let (bos, eos) = (find(BOS_NAMES), find(EOS_NAMES));
        Ok(Tokenizer { path: path.to_path_buf(), inner, bos, eos })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id of the BOS token, if the vocabulary has one of [`BOS_NAMES`].
    pub fn bos(&self) -> Option<i32> {
        self.bos
    }

    /// The id of the EOS token, if the vocabulary has one of [`EOS_NAMES`].
    pub fn eos(&self) -> Option<i32> {
        self.eos
    }

    /// The number of tokens, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// An error unless the tokenizer has the BOS / EOS tokens asked for.
    pub fn require(&self, bos: bool, eos: bool) -> Result<()> {
        for (want, have, what, names) in
            [(bos, self.bos, "BOS", BOS_NAMES), (eos, self.eos, "EOS", EOS_NAMES)]
        {
            if want && have.is_none() {
                return Err(Error::Invalid(format!(
                    "tokenizer {}: no {what} token for `add_{}: true` (looked for {})",
                    self.path.display(),
                    what.to_lowercase(),
                    names.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// The ids of `text`, with the BOS / EOS tokens when asked (and present: see
    /// [`require`](Self::require)).
    pub fn encode(&self, text: &str, add_bos: bool, add_eos: bool) -> Result<Vec<i32>> {
        let enc = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| Error::Invalid(format!("tokenizer {}: {e}", self.path.display())))?;
        let ids = enc.get_ids();
        let mut out = Vec::with_capacity(ids.len() + usize::from(add_bos) + usize::from(add_eos));
        if add_bos && let Some(b) = self.bos {
            out.push(b);
        }
        // Ids are below the vocabulary's size, checked to fit i32 when loaded.
        out.extend(ids.iter().map(|&i| i as i32));
        if add_eos && let Some(e) = self.eos {
            out.push(e);
        }
        Ok(out)
    }
}

/// The process's tokenizers, by path as given.
fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<Tokenizer>>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Tokenizer>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The tokenizer at `path`, read on first use and shared after that by every caller in
/// the process. A failed load is not cached: the next call reads the file again.
pub fn load(path: impl AsRef<Path>) -> Result<Arc<Tokenizer>> {
    let path = path.as_ref();
    let mut cache = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = cache.get(path) {
        return Ok(t.clone());
    }
    let t = Arc::new(Tokenizer::from_file(path)?);
    cache.insert(path.to_path_buf(), t.clone());
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word-level tokenizer over a tiny vocabulary, as `tokenizer.json`.
    fn word_level(dir: &Path, specials: bool) -> PathBuf {
        let mut vocab = vec![("<pad>", 0), ("<unk>", 1), ("hello", 2), ("world", 3)];
        if specials {
            vocab.extend([("<s>", 4), ("</s>", 5)]);
        }
        let vocab: Vec<String> = vocab.iter().map(|(t, i)| format!("\"{t}\": {i}")).collect();
        let json = format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
              "normalizer": null, "pre_tokenizer": {{"type": "Whitespace"}},
              "post_processor": null, "decoder": null,
              "model": {{"type": "WordLevel", "vocab": {{{}}}, "unk_token": "<unk>"}}}}"#,
            vocab.join(", ")
        );
        let path = dir.join(if specials { "with.json" } else { "without.json" });
        std::fs::write(&path, json).unwrap();
        path
    }

    #[test]
    fn encodes_with_and_without_bos_and_eos() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tokenizer::from_file(word_level(dir.path(), true)).unwrap();
        assert_eq!((t.bos(), t.eos(), t.vocab_size()), (Some(4), Some(5), 6));
        assert_eq!(t.encode("hello world nope", false, false).unwrap(), vec![2, 3, 1]);
        assert_eq!(t.encode("hello", true, true).unwrap(), vec![4, 2, 5]);
        assert_eq!(t.encode("", false, true).unwrap(), vec![5]);
        assert!(t.require(true, true).is_ok());
    }

    #[test]
    fn missing_specials_missing_files_and_bad_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tokenizer::from_file(word_level(dir.path(), false)).unwrap();
        let e = t.require(false, true).unwrap_err().to_string();
        assert!(e.contains("without.json") && e.contains("no EOS token") && e.contains("</s>"), "{e}");
        let missing = dir.path().join("missing.json");
        let e = load(&missing).unwrap_err();
        assert!(matches!(&e, Error::Io { path, .. } if *path == missing), "{e}");
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{not json").unwrap();
        let e = load(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("not a tokenizer.json"), "{e}");
    }

    #[test]
    fn load_shares_one_tokenizer_per_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = word_level(dir.path(), true);
        let (a, b) = (load(&path).unwrap(), load(&path).unwrap());
        assert!(Arc::ptr_eq(&a, &b));
    }
}
