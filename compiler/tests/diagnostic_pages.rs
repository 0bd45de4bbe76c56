//! Docs that cannot lie, for diagnostics: `diagnostic::CODES` is every code the compiler's
//! sources write (and no other), each code has a page `docs/guide/src/diagnostics/CODE.md`
//! (and each page is a code) listed in the index `README.md` with its summary, and each
//! page's failing ```pipe example reports its code, rendered as the page's ```text block
//! shows, while the ```pipe fix after it compiles with no error (and without that code,
//! for a warning). A new code without a page, or a page whose example no longer fails
//! as it shows, fails here naming it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sluice_compiler::diagnostic::{CODES, render};

/// Codes whose page has no `.pipe` example, and why: Rust code exists only in
/// `pipeline!` (E0313, E0408: their examples are ```rust blocks of a `pipeline!` call,
/// checked through the token front end), the smallest example is 1025 stages long
/// (E0315, checked here as such), and no valid pipeline is known to reach a code
/// generator failure (E0600, a compiler bug).
const NO_PIPE_EXAMPLE: &[&str] = &["E0313", "E0315", "E0408", "E0600"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn pages_dir() -> PathBuf {
    root().join("docs/guide/src/diagnostics")
}

/// Whether `s` is a code: `E` or `W` and four digits.
fn is_code(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 5 && (b[0] == b'E' || b[0] == b'W') && b[1..].iter().all(u8::is_ascii_digit)
}

/// Every `"E…"`/`"W…"` string literal of the `.rs` files under `dir`, except the table
/// itself.
fn literal_codes(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            literal_codes(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("diagnostic.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.extend(text.split('"').filter(|s| is_code(s)).map(str::to_owned));
        }
    }
}

#[test]
fn the_table_is_every_code_of_the_sources() {
    let codes: Vec<&str> = CODES.iter().map(|(c, _)| *c).collect();
    assert!(codes.windows(2).all(|w| w[0] < w[1]), "CODES is sorted and has no repeats");
    for (code, summary) in CODES {
        assert!(is_code(code), "{code}: not a code");
        assert!(!summary.is_empty() && !summary.ends_with('.'), "{code}: a summary, no trailing period");
    }
    let mut used = BTreeSet::new();
    literal_codes(&root().join("compiler/src"), &mut used);
    let table: BTreeSet<String> = codes.iter().map(|c| c.to_string()).collect();
    let unlisted: Vec<_> = used.difference(&table).collect();
    let unused: Vec<_> = table.difference(&used).collect();
    assert!(
        unlisted.is_empty(),
        "codes written in compiler/src but missing from diagnostic::CODES: {unlisted:?}"
    );
    assert!(unused.is_empty(), "codes of diagnostic::CODES that compiler/src never reports: {unused:?}");
}

#[test]
fn every_code_has_a_page_and_every_page_is_a_code() {
    let mut pages = BTreeSet::new();
    for entry in std::fs::read_dir(pages_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name != "README.md" {
            let code = name.strip_suffix(".md").unwrap_or_else(|| panic!("{name}: not a page"));
            pages.insert(code.to_owned());
        }
    }
    let table: BTreeSet<String> = CODES.iter().map(|(c, _)| c.to_string()).collect();
    let missing: Vec<_> = table.difference(&pages).collect();
    let extra: Vec<_> = pages.difference(&table).collect();
    assert!(missing.is_empty(), "codes without a page in docs/guide/src/diagnostics/: {missing:?}");
    assert!(extra.is_empty(), "pages of no code of diagnostic::CODES: {extra:?}");
    let index = std::fs::read_to_string(pages_dir().join("README.md")).unwrap();
    for (code, summary) in CODES {
        let row = format!("| [{code}]({code}.md) | {summary} |");
        assert!(index.contains(&row), "the index README.md lacks the row {row}");
    }
}

/// The contents of each ```pipe fenced block of `page`.
fn pipe_blocks(page: &str) -> Vec<String> {
    blocks(page, "pipe")
}

/// The contents of each fenced block of `page` in `language`.
fn blocks(page: &str, language: &str) -> Vec<String> {
    let fence = format!("```{language}");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in page.lines() {
        match &mut current {
            None if line.trim_end() == fence => current = Some(String::new()),
            Some(_) if line.trim_end() == "```" => blocks.push(current.take().unwrap()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn each_page_fails_with_its_code_and_its_fix_compiles() {
    let mut problems = Vec::new();
    for (code, summary) in CODES {
        let page = std::fs::read_to_string(pages_dir().join(format!("{code}.md"))).unwrap();
        let title = format!("# {code}: {summary}\n");
        if !page.starts_with(&title) {
            problems.push(format!("{code}: the page does not start with {title:?}"));
        }
        let pipe = pipe_blocks(&page);
        if NO_PIPE_EXAMPLE.contains(code) {
            if !pipe.is_empty() {
                problems.push(format!("{code}: has a ```pipe example now: take it off NO_PIPE_EXAMPLE"));
            }
            continue;
        }
        let [failing, fix] = pipe.as_slice() else {
            problems
                .push(format!("{code}: {} ```pipe blocks, not 2 (the failing example, the fix)", pipe.len()));
            continue;
        };
        let diagnostics = sluice_compiler::compile(failing).diagnostics;
        let reported: Vec<&str> = diagnostics.iter().map(|d| d.code).collect();
        let of_code: Vec<_> = diagnostics.iter().filter(|d| d.code == *code).cloned().collect();
        if of_code.is_empty() {
            problems.push(format!("{code}: the example reports {reported:?}, not {code}"));
        } else {
            // The page shows the errors of its code the example gives, as `sluice check
            // example.pipe` renders them.
            let rendered = render("example.pipe", failing, &of_code);
            let shown = blocks(&page, "text");
            if shown.first().map(|b| b.trim_end()) != Some(rendered.trim_end()) {
                problems.push(format!(
                    "{code}: the page's first ```text block is not what its example gives, which is:\n{}",
                    rendered.trim_end()
                ));
            }
        }
        let fixed = sluice_compiler::compile(fix).diagnostics;
        let bad: Vec<&str> =
            fixed.iter().filter(|d| d.is_error() || d.code == *code).map(|d| d.code).collect();
        if !bad.is_empty() {
            problems.push(format!("{code}: the fix still reports {bad:?}"));
        }
    }
    assert!(problems.is_empty(), "diagnostic pages:\n{}", problems.join("\n"));
}

/// The codes of a `pipeline! { … }` call's body, compiled as the macro does (the token
/// front end, then `compile_ast`).
fn macro_codes(block: &str) -> Vec<&'static str> {
    let body = block.trim().strip_prefix("sluice::pipeline! {").and_then(|b| b.strip_suffix('}'));
    let body = body.unwrap_or_else(|| panic!("not one `sluice::pipeline! {{ … }}` call:\n{block}"));
    let tokens: proc_macro2::TokenStream = body.parse().unwrap();
    match sluice_compiler::syntax::tokens::parse_tokens(tokens).0 {
        Err(diagnostics) => diagnostics.iter().map(|d| d.code).collect(),
        Ok(file) => sluice_compiler::compile_ast(&file).diagnostics.iter().map(|d| d.code).collect(),
    }
}

#[test]
fn the_pages_of_codes_only_pipeline_macro_gives_are_checked_through_it() {
    for code in ["E0313", "E0408"] {
        let page = std::fs::read_to_string(pages_dir().join(format!("{code}.md"))).unwrap();
        let [failing, fix] =
            blocks(&page, "rust").try_into().expect("two ```rust blocks: the example, the fix");
        assert!(
            macro_codes(&failing).contains(&code),
            "{code}: the example reports {:?}",
            macro_codes(&failing)
        );
        assert_eq!(macro_codes(&fix), Vec::<&str>::new(), "{code}: the fix");
    }
}

#[test]
fn a_pipeline_of_more_than_1024_stages_is_e0315() {
    let stages = |n| format!("pipeline p() {{\n    range(10);\n{}}}\n", "    take(1);\n".repeat(n));
    let codes =
        |n| sluice_compiler::compile(&stages(n)).diagnostics.iter().map(|d| d.code).collect::<Vec<_>>();
    assert_eq!(codes(1023), Vec::<&str>::new(), "1024 stages");
    assert_eq!(codes(1024), ["E0315"], "1025 stages");
    let page = std::fs::read_to_string(pages_dir().join("E0315.md")).unwrap();
    assert!(
        page.contains("`range(10);` and 1024 `take(1);` after it"),
        "the page says the example this test builds"
    );
}
