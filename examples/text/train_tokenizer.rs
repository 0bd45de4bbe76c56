//! Trains the tokenizer of `examples/text/` once: byte-level BPE (GPT-2's pre-tokenizer
//! and decoder, NFC normalization) with a vocabulary of 8000 on `corpus/jargon.txt`,
//! special tokens `<pad>` (id 0, what `pack` pads with), `<s>` (BOS, 1), `</s>` (EOS, 2)
//! and `<unk>` (3), written to `examples/text/tokenizer.json`, which is committed.
//!
//! `cargo run --example train-tokenizer [CORPUS] [OUT]`. Training is deterministic for
//! one corpus and `tokenizers` version (0.22).

use std::path::PathBuf;

use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, TokenizerBuilder};

fn main() -> tokenizers::Result<()> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/text");
    let mut args = std::env::args().skip(1);
    let corpus = args.next().map_or_else(|| dir.join("corpus/jargon.txt"), PathBuf::from);
    let out = args.next().map_or_else(|| dir.join("tokenizer.json"), PathBuf::from);
    let specials = ["<pad>", "<s>", "</s>", "<unk>"].map(|t| AddedToken::from(t, true)).to_vec();
    let mut trainer = BpeTrainerBuilder::new()
        .show_progress(false)
        .vocab_size(8000)
        .min_frequency(2)
        .special_tokens(specials)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tokenizer = TokenizerBuilder::new()
        .with_model(BPE::default())
        .with_normalizer(Some(NFC))
        .with_pre_tokenizer(Some(ByteLevel::default()))
        .with_post_processor(Some(ByteLevel::default()))
        .with_decoder(Some(ByteLevel::default()))
        .build()?;
    tokenizer.train_from_files(&mut trainer, vec![corpus.display().to_string()])?;
    tokenizer.save(&out, true)?;
    println!("{}: {} tokens", out.display(), tokenizer.get_vocab_size(true));
    Ok(())
}
