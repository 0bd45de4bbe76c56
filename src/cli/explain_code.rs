//! `sluice explain-code E0306` (rustc's `--explain`): prints the page of a diagnostic code
//! (what it means, a failing example, the error it gives and the fix), the markdown of
//! `docs/guide/src/diagnostics/CODE.md` as it is, compiled into the binary so an installed
//! `sluice` needs no docs folder. `sluice explain-code` alone lists every code with its
//! summary (`sluice_compiler::diagnostic::CODES`). An unknown code is a usage error (exit
//! 2) naming the closest codes.

use std::process::ExitCode;

use clap::Args;
use sluice_compiler::diagnostic::CODES;

use super::Failure;

#[derive(Debug, Args)]
pub struct ExplainCodeArgs {
    /// The code, as diagnostics print it (`E0306`, `W0210`; `e0306` works too); none lists
    /// every code.
    code: Option<String>,
}

/// The pages, `(code, markdown)`, in the order of `CODES` (a test holds them equal).
macro_rules! pages {
    ($($code:literal),* $(,)?) => {
        &[$(($code, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide/src/diagnostics/", $code, ".md")))),*]
    };
}

const PAGES: &[(&str, &str)] = pages![
    "E0001", "E0002", "E0003", "E0100", "E0101", "E0102", "E0103", "E0104", "E0105", "E0106", "E0110",
    "E0111", "E0112", "E0113", "E0114", "E0116", "E0117", "E0118", "E0119", "E0120", "E0121", "E0200",
    "E0201", "E0202", "E0203", "E0204", "E0205", "E0206", "E0207", "E0208", "E0209", "E0211", "E0300",
    "E0301", "E0302", "E0303", "E0304", "E0305", "E0306", "E0307", "E0308", "E0309", "E0310", "E0311",
    "E0312", "E0313", "E0314", "E0315", "E0320", "E0321", "E0322", "E0323", "E0324", "E0325", "E0330",
    "E0331", "E0332", "E0333", "E0350", "E0351", "E0352", "E0353", "E0360", "E0361", "E0362", "E0363",
    "E0364", "E0365", "E0366", "E0370", "E0371", "E0372", "E0373", "E0374", "E0375", "E0376", "E0380",
    "E0381", "E0382", "E0383", "E0400", "E0401", "E0402", "E0403", "E0404", "E0405", "E0406", "E0407",
    "E0408", "E0409", "E0410", "E0411", "E0412", "E0500", "E0600", "W0210", "W0354",
];

pub fn run(args: ExplainCodeArgs) -> Result<ExitCode, Failure> {
    match args.code {
        None => outln!("{}", list()),
        Some(code) => out!("{}", page(&code)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// Every code with its summary, one a line.
fn list() -> String {
    let lines: Vec<String> = CODES.iter().map(|(code, summary)| format!("{code}  {summary}")).collect();
    lines.join("\n")
}

/// The page of `code` (any case), or a usage error naming the closest codes.
fn page(code: &str) -> Result<&'static str, Failure> {
    let wanted = code.trim().to_ascii_uppercase();
    if let Some((_, page)) = PAGES.iter().find(|(c, _)| *c == wanted) {
        return Ok(page);
    }
    let close = closest(&wanted);
    let close = if close.is_empty() { String::new() } else { format!("; close codes: {}", close.join(", ")) };
    Err(Failure::Usage(format!(
        "no diagnostic code `{code}`{close} (`sluice explain-code` lists every code)"
    )))
}

/// Up to three codes close to `wanted`, in order: of those one character away (else of
/// every code of its letter), the nearest by number.
fn closest(wanted: &str) -> Vec<&'static str> {
    let one_off = |c: &str| {
        c.len() == wanted.len() && c.chars().zip(wanted.chars()).filter(|(a, b)| a != b).count() == 1
    };
    let codes = || CODES.iter().map(|(c, _)| *c);
    let mut close: Vec<&str> = codes().filter(|c| one_off(c)).collect();
    if close.is_empty() {
        close = codes().filter(|c| wanted.starts_with(&c[..1])).collect();
    }
    let digits: String = wanted.chars().filter(char::is_ascii_digit).collect();
    let Ok(n) = digits.parse::<i64>() else { return Vec::new() };
    close.sort_by_key(|c| (c[1..].parse::<i64>().unwrap_or(0) - n).abs());
    close.truncate(3);
    close.sort();
    close
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_page_compiled_in() {
        let pages: Vec<&str> = PAGES.iter().map(|(c, _)| *c).collect();
        let codes: Vec<&str> = CODES.iter().map(|(c, _)| *c).collect();
        assert_eq!(pages, codes, "PAGES lists the codes of diagnostic::CODES, in order");
        for ((code, page), (_, summary)) in PAGES.iter().zip(CODES) {
            assert!(page.starts_with(&format!("# {code}: {summary}\n")), "{code}");
        }
    }

    #[test]
    fn a_known_code_prints_its_page() {
        let page = page("E0306").unwrap();
        assert!(page.starts_with("# E0306: "), "{page}");
        assert!(
            page.contains("```pipe") && page.contains("error[E0306]") && page.contains("## Fix"),
            "{page}"
        );
        assert_eq!(super::page("e0306").unwrap(), page, "any case");
        assert!(super::page("W0210").unwrap().starts_with("# W0210: "));
    }

    #[test]
    fn an_unknown_code_is_a_usage_error_naming_close_codes() {
        let message = |code| match page(code) {
            Err(Failure::Usage(m)) => m,
            other => panic!("{code}: {other:?}"),
        };
        let m = message("E0307x");
        assert!(m.starts_with("no diagnostic code `E0307x`"), "{m}");
        assert_eq!(
            message("E0999"),
            "no diagnostic code `E0999`; close codes: E0412, E0500, E0600 (`sluice explain-code` lists every code)"
        );
        assert!(message("E0399").contains("close codes: E0309 "), "{}", message("E0399"));
        assert!(message("E0316").contains("close codes: E0313, E0314, E0315 "), "{}", message("E0316"));
        assert!(message("W0211").contains("W0210"), "{}", message("W0211"));
        assert!(m.contains("close codes: E0306, E0307, E0308 "), "{m}");
        assert!(
            message("nonsense")
                .ends_with("no diagnostic code `nonsense` (`sluice explain-code` lists every code)")
        );
    }

    #[test]
    fn no_code_lists_every_code_with_its_summary() {
        let list = list();
        assert_eq!(list.lines().count(), CODES.len());
        assert!(list.lines().any(|l| l.starts_with("E0306  unbatch")), "{list}");
        assert!(list.lines().next().unwrap().starts_with("E0001  syntax error"), "{list}");
    }
}
