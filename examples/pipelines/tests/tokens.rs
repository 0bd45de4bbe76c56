//! `tokenize` and `pack` through generated pipelines (`tests/pipes/pack.pipe`) with the
//! committed tokenizer of `examples/text/`: the ids are the runtime tokenizer's, the rows
//! are the runtime packer's, resume gives the rest of an uninterrupted pass, and a
//! missing tokenizer or an overflowing sequence fails naming the problem.

use std::path::Path;

use sluice::runtime::stage::{Ctx, Dataset, Overflow, PackOptions, PackedRow, Packer};
use sluice::runtime::text::tokenize::Tokenizer;
use sluice_examples::tokens::{packed, packed_pairs, token_ids};

const TOKENIZER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../text/tokenizer.json");
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../text/corpus/jargon.txt");

fn glob(dir: &Path, pattern: &str) -> String {
    format!("{}/{pattern}", dir.display())
}

/// Every element of a generated dataset, or the first error's text.
fn all<D: Dataset>(ds: D) -> Result<Vec<D::Item>, String> {
    ds.stream().map_err(|e| e.to_string())?.map(|r| r.map_err(|e| e.to_string())).collect()
}

/// The first `n` lines of the example's corpus, written to `dir/a.txt`.
fn corpus_lines(dir: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(CORPUS).unwrap();
    let lines: Vec<String> = text.lines().take(n).map(str::to_string).collect();
    std::fs::write(dir.join("a.txt"), lines.join("\n")).unwrap();
    lines
}

#[test]
fn tokenize_gives_the_tokenizers_ids_with_eos() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "Hello, world!\n\nThe Jargon File: a hacker's lexicon.\nzoë 🚀")
        .unwrap();
    let p = token_ids::Params { files: glob(dir.path(), "*.txt"), tokenizer: TOKENIZER.into() };
    let got: Vec<Vec<i32>> =
        all(token_ids::dataset(&p).unwrap()).unwrap().into_iter().map(|r| r.ids).collect();
    let t = Tokenizer::from_file(TOKENIZER).unwrap();
    assert_eq!((t.bos(), t.eos(), t.vocab_size()), (Some(1), Some(2), 8000));
    let want: Vec<Vec<i32>> = ["Hello, world!", "", "The Jargon File: a hacker's lexicon.", "zoë 🚀"]
        .iter()
        .map(|l| t.encode(l, false, true).unwrap())
        .collect();
    assert_eq!(got, want);
    assert_eq!(got[1], vec![2], "an empty line is its EOS alone");
    assert!(got[0].len() > 2 && got[0].last() == Some(&2), "{:?}", got[0]);
}

/// The rows of `packed` (4 to a batch) as `PackedRow`s.
fn rows(batches: &[packed::Item]) -> Vec<PackedRow> {
    let mut out = Vec::new();
    for b in batches {
        let (ids, seg, pos) = (b.ids.as_slice(), b.segment_ids.as_slice(), b.positions.as_slice());
        for r in 0..ids.len() / 16 {
            let s = r * 16..(r + 1) * 16;
            out.push(PackedRow {
                fields: vec![ids[s.clone()].to_vec()],
                segment_ids: seg[s.clone()].to_vec(),
                positions: pos[s].to_vec(),
            });
        }
    }
    out
}

#[test]
fn packed_rows_are_the_runtimes_first_fit_packing_and_resume_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let lines = corpus_lines(dir.path(), 400);
    let p = packed::Params { files: glob(dir.path(), "*.txt"), tokenizer: TOKENIZER.into() };
    let batches = all(packed::dataset(&p).unwrap()).unwrap();
    let got = rows(&batches);
    let t = Tokenizer::from_file(TOKENIZER).unwrap();
    let mut packer =
        Packer::new(PackOptions { length: 16, window: 8, overflow: Overflow::Split }, 1).unwrap();
    let mut tokens = 0;
    for l in &lines {
        let ids = t.encode(l, true, true).unwrap();
        tokens += ids.len();
        packer.push(vec![ids]).unwrap();
    }
    packer.finish();
    let want: Vec<PackedRow> = std::iter::from_fn(|| packer.pop()).collect();
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    assert_eq!(got.iter().map(PackedRow::tokens).sum::<usize>(), tokens);
    assert!(batches.iter().all(|b| b.ids.shape()[1..] == [16]));

    // The statistics count the packing efficiency.
    let mut stream = packed::dataset(&p).unwrap().stream().unwrap();
    let n = stream.by_ref().count();
    let report = stream.report();
    let s = report.stages.iter().find(|s| s.name == "pack").unwrap();
    assert_eq!((s.tokens, s.token_slots), (tokens as u64, 16 * got.len() as u64), "{n} batches");
    assert!(s.packing_efficiency().unwrap() > 0.9, "{s:?}");

    // Resumed after 3 batches: the rest, exactly.
    let state = packed::state(&p, 0, 3).unwrap();
    let rest =
        packed::dataset(&p).unwrap().stream_from(&Ctx::new(&Default::default()), state.position).unwrap();
    let rest: Vec<packed::Item> = rest.map(|r| r.unwrap()).collect();
    assert_eq!(rows(&rest), got[12..]);
}

#[test]
fn a_missing_or_bad_tokenizer_fails_when_the_dataset_is_built() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let missing = dir.path().join("nope.json");
    let p = packed::Params { files: glob(dir.path(), "*.txt"), tokenizer: missing.display().to_string() };
    let e = packed::dataset(&p).err().expect("a missing tokenizer").to_string();
    assert!(e.contains("nope.json"), "{e}");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"model\": 3}").unwrap();
    let p = packed::Params { tokenizer: bad.display().to_string(), ..p };
    let e = packed::dataset(&p).err().expect("a bad tokenizer").to_string();
    assert!(e.contains("bad.json") && e.contains("not a tokenizer.json"), "{e}");
}

#[test]
fn fields_pack_in_lockstep_and_overflow_error_fails() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::copy(TOKENIZER, data.join("tokenizer.json")).unwrap();
    std::fs::write(dir.path().join("a.txt"), "hello world\nsmall\n").unwrap();
    // `packed_pairs` names its tokenizer as "data/tokenizer.json", from the working
    // directory: the crate's, so give it a path through the files' directory instead.
    let cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let p = packed_pairs::Params { files: glob(dir.path(), "*.txt") };
    let got = all(packed_pairs::dataset(&p).unwrap());
    std::fs::write(dir.path().join("b.txt"), "word ".repeat(100)).unwrap();
    let long = all(packed_pairs::dataset(&p).unwrap());
    std::env::set_current_dir(cwd).unwrap();
    let got = got.unwrap();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    let n = r.segment_ids.as_slice().iter().filter(|&&s| s != 0).count();
    assert_eq!(r.mask.as_slice()[..n], vec![1; n][..]);
    assert!(r.mask.as_slice()[n..].iter().all(|&m| m == 0));
    assert_eq!(r.segment_ids.as_slice().iter().max(), Some(&2));
    let e = long.unwrap_err();
    assert!(e.contains("longer than a row of 32"), "{e}");
}
