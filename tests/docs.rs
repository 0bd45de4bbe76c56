//! Docs that cannot lie: every ```pipe block of `README.md` and of the guide
//! (`docs/guide/src/**.md`, `docs/PORTING.md`) is a whole `.pipe` file that checks with no
//! error, or, marked ```pipe fails=CODE, fails with that code; every `sluice …` command
//! line of their shell blocks parses; every stage and per-field operation of the
//! compiler's own tables (`STAGES`, `SIGNATURES`) has a reference entry naming each of its
//! arguments; and the CLI reference page is the tool's own `--help` text
//! (`SLUICE_BLESS_DOCS=1 cargo test --test docs` rewrites it); the README stays short with
//! its two set-up commands, and every guide page is in `SUMMARY.md`. The diagnostic pages'
//! examples are held by `compiler/tests/diagnostic_pages.rs` and skipped here.

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_compiler::diagnostic::Severity;
use sluice_compiler::sema::ops::SIGNATURES;
use sluice_compiler::sema::stages::STAGES;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files whose examples are checked: the README, PORTING.md and the guide
/// without its diagnostic pages.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("diagnostics") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![root().join("README.md"), root().join("docs/PORTING.md")];
    walk(&root().join("docs/guide/src"), &mut out);
    out.sort();
    out
}

/// A fenced block: its info string, its text and the line its fence opens on.
struct Block {
    info: String,
    text: String,
    line: usize,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None if trimmed.starts_with("```") => {
                open = Some(Block { info: trimmed[3..].trim().to_string(), text: String::new(), line: i + 1 })
            }
            None => {}
            Some(b) if trimmed.starts_with("```") => out.push(b),
            Some(mut b) => {
                b.text.push_str(line);
                b.text.push('\n');
                open = Some(b);
            }
        }
    }
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

#[test]
fn every_pipe_block_checks_or_fails_with_its_code() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for b in blocks(&text).iter().filter(|b| b.info.split_whitespace().next() == Some("pipe")) {
            checked += 1;
            let place = format!("{}:{}", relative(&doc), b.line);
            let expected = b.info.split_whitespace().find_map(|w| w.strip_prefix("fails="));
            let diags = sluice_compiler::compile(&b.text).diagnostics;
            let errors: Vec<&str> =
                diags.iter().filter(|d| d.severity == Severity::Error).map(|d| d.code).collect();
            match expected {
                None if !errors.is_empty() => problems.push(format!(
                    "{place}: the block does not check (mark it `pipe fails=CODE` if meant):\n{}",
                    sluice_compiler::diagnostic::render("block.pipe", &b.text, &diags)
                )),
                Some(code) if !diags.iter().any(|d| d.code == code) => {
                    problems.push(format!("{place}: expected {code}, got {errors:?}"))
                }
                _ => {}
            }
        }
    }
    assert!(checked >= 10, "found only {checked} ```pipe blocks");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// Splits a shell line into words (single and double quotes, no escapes), up to the first
/// `|`, `>`, `&&`, `;` or `#` outside quotes.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, '|' | '>' | ';' | '#') => break,
            (None, '&') if chars.peek() == Some(&'&') => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    words.extend(word);
    words
}

/// The `sluice` command lines of the shell blocks (`sh`, `bash`, `console`, unmarked): the
/// arguments after `sluice`, `target/*/sluice` or `python -m sluice`, with `\` line
/// continuations joined.
fn command_lines(markdown: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for b in blocks(markdown) {
        if !matches!(b.info.as_str(), "sh" | "bash" | "console" | "shell" | "") {
            continue;
        }
        let joined = b.text.replace("\\\n", " ");
        for line in joined.lines() {
            let line = line.trim().trim_start_matches("$ ");
            let words = shell_words(line);
            let start = words.iter().position(|w| w == "sluice" || w.ends_with("/sluice"));
            let Some(start) = start else { continue };
            // `python -m sluice` and `sluice` itself; not a path such as `pipes/sluice`.
            if start > 0 && !(words[start - 1] == "-m" || words[..start].iter().all(|w| w.contains('='))) {
                continue;
            }
            out.push((b.line, words[start + 1..].to_vec()));
        }
    }
    out
}

/// clap accepts each command line: run with `--help` appended, every word before it
/// must be a known subcommand, flag or valid value (clap stops at `--help` with exit 0,
/// having parsed what came before).
#[test]
fn every_sluice_command_line_parses() {
    let bin = env!("CARGO_BIN_EXE_sluice");
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (line, args) in command_lines(&text) {
            // `sluice run … -- ARGS` hands the rest to the runner.
            let args: Vec<&String> = args.iter().take_while(|a| *a != "--").collect();
            if args.is_empty() || args[0] == "--help" {
                continue;
            }
            checked += 1;
            let out = Command::new(bin).args(&args).arg("--help").output().unwrap();
            if !out.status.success() {
                problems.push(format!(
                    "{}:{line}: `sluice {}` does not parse:\n{}",
                    relative(&doc),
                    args.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
    }
    assert!(checked >= 10, "found only {checked} sluice command lines");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The Markdown section under the heading `### `NAME``, up to the next heading of level 3
/// or less.
fn section<'a>(page: &'a str, name: &str) -> Option<&'a str> {
    let heading = format!("### `{name}`");
    let start = page.lines().position(|l| l.trim_end() == heading)?;
    let rest: Vec<&str> = page.lines().skip(start + 1).collect();
    let end = rest.iter().position(|l| l.starts_with("# ") || l.starts_with("## ") || l.starts_with("### "));
    let len: usize = rest[..end.unwrap_or(rest.len())].iter().map(|l| l.len() + 1).sum();
    let offset = page.find(&heading).unwrap() + heading.len() + 1;
    Some(&page[offset..(offset + len).min(page.len())])
}

/// Whether `text` has `word` as a whole word (not inside an identifier).
fn mentions(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word)
        .any(|(i, _)| !text[..i].ends_with(ident) && !text[i + word.len()..].starts_with(ident))
}

#[test]
fn every_stage_and_operation_has_a_reference_entry() {
    let stages = std::fs::read_to_string(root().join("docs/guide/src/language/stages.md")).unwrap();
    let ops = std::fs::read_to_string(root().join("docs/guide/src/language/operations.md")).unwrap();
    let mut missing = Vec::new();
    for stage in STAGES {
        match section(&stages, stage.name) {
            None => missing
                .push(format!("stage `{}`: no `### `{}`` in language/stages.md", stage.name, stage.name)),
            Some(text) => {
                for arg in stage.args {
                    if !mentions(text, arg.name) {
                        missing.push(format!(
                            "stage `{}`: its argument `{}` is not described",
                            stage.name, arg.name
                        ));
                    }
                }
            }
        }
    }
    for (name, params, _) in SIGNATURES {
        match section(&ops, name) {
            None => missing.push(format!("operation `{name}`: no `### `{name}`` in language/operations.md")),
            Some(text) => {
                for p in *params {
                    if !mentions(text, p) {
                        missing.push(format!("operation `{name}`: its parameter `{p}` is not described"));
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "the language reference lacks:\n{}", missing.join("\n"));
}

/// The subcommands `sluice --help` lists (`help` aside).
fn subcommands(bin: &str) -> Vec<String> {
    let help = Command::new(bin).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let commands = help.split("Commands:\n").nth(1).unwrap().split("\n\n").next().unwrap();
    commands
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

fn help(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "sluice {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap().trim_end().to_string()
}

/// The CLI reference as `sluice --help` and each subcommand's `--help` (and `bench`'s
/// subcommands') print it.
fn cli_reference(bin: &str) -> String {
    let mut page = String::from(
        "# Command-line reference\n\n\
         <!-- Generated from the tool's own help by tests/docs.rs: do not edit. \
         `SLUICE_BLESS_DOCS=1 cargo test --test docs` rewrites it. -->\n\n\
         Every subcommand of `sluice`, as `sluice COMMAND --help` prints it. The guide's \
         other pages say what the commands are for; this page is the exact list of flags.\n\n",
    );
    page += &format!("## `sluice`\n\n```text\n{}\n```\n", help(bin, &[]));
    for command in subcommands(bin) {
        page += &format!("\n## `sluice {command}`\n\n```text\n{}\n```\n", help(bin, &[&command]));
        if command == "bench" {
            for sub in subcommands_of(bin, &command) {
                page += &format!(
                    "\n### `sluice {command} {sub}`\n\n```text\n{}\n```\n",
                    help(bin, &[&command, &sub])
                );
            }
        }
    }
    page
}

fn subcommands_of(bin: &str, command: &str) -> Vec<String> {
    let text = help(bin, &[command]);
    let Some(commands) = text.split("Commands:\n").nth(1) else { return Vec::new() };
    commands
        .split("\n\n")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_cli_reference_is_the_tool_s_help() {
    let page = root().join("docs/guide/src/cli.md");
    let fresh = cli_reference(env!("CARGO_BIN_EXE_sluice"));
    if std::env::var_os("SLUICE_BLESS_DOCS").is_some() {
        std::fs::write(&page, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        committed == fresh,
        "docs/guide/src/cli.md is stale (the tool's help changed): rewrite it with \
         `SLUICE_BLESS_DOCS=1 cargo test --test docs`"
    );
}

/// The README stays a front page: at most 200 lines, and exactly two set-up commands for
/// a fresh machine, the main job and the whole test suite (the guide holds the rest).
#[test]
fn the_readme_is_short_and_gives_the_two_set_up_commands() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines: move the detail to the guide (docs/guide/)");
    let section =
        readme.split("\n## On a fresh machine\n").nth(1).expect("a section `## On a fresh machine`");
    let section = section.split("\n## ").next().unwrap();
    let commands: Vec<String> = blocks(section)
        .iter()
        .filter(|b| b.info == "sh")
        .flat_map(|b| b.text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')))
        .map(str::to_owned)
        .collect();
    assert_eq!(commands, ["./scripts/main-job", "./scripts/test"], "the set-up commands of a fresh machine");
}

/// Every page of the guide is in its table of contents (mdBook renders no other), the
/// diagnostic pages included.
#[test]
fn every_guide_page_is_in_the_summary() {
    let src = root().join("docs/guide/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let mut pages = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") && !path.ends_with("SUMMARY.md") {
                pages.push(path.strip_prefix(&src).unwrap().display().to_string());
            }
        }
    }
    let missing: Vec<_> = pages.iter().filter(|p| !summary.contains(&format!("]({p})"))).collect();
    assert!(missing.is_empty(), "pages not in docs/guide/src/SUMMARY.md: {missing:?}");
}
