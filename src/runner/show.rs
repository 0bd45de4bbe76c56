//! The runner's `--show N` (what `sluice show` runs): the first `N` elements of one pass,
//! each as one line of JSON on stdout (the element's `abi::show::Show` impl), then the
//! pass is dropped: nothing past the `N`th element is pulled on purpose (stages that read
//! ahead stop when their stream is dropped). No statistics, no progress bar.
//!
//! On a terminal (and without `--full`) long values are abbreviated as NumPy prints them
//! ([`abbreviate`]); piped, each line is the whole element as JSON.
//!
//! Exit status as a run's: 1 on a data error (the lines before it are printed) or when
//! stdout cannot be written, except a reader that stopped reading (`| head -1`, a broken
//! pipe), which ends the command quietly with 0.

use std::borrow::Cow;
use std::io::{ErrorKind, Write};

use sluice_runtime::abi::Rows;
use sluice_runtime::abi::show::{Json, Show};
use sluice_runtime::stage::{Ctx, Dataset};

use super::{FAILED, RunArgs};

/// Prints the first `n` elements of the dataset `build` makes of `params` (`u64::MAX`:
/// all of them) to `out`; gives the exit status.
pub(super) fn show<P, D>(
    params: &P,
    build: impl FnOnce(&P) -> sluice_runtime::Result<D>,
    args: &RunArgs,
    n: u64,
    name: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8
where
    D: Dataset,
    D::Item: Rows + Show,
{
    let ctx = Ctx::new(&args.options());
    let shown = build(params).and_then(|ds| {
        let mut json = Json::new();
        for item in ds.stream_in(&ctx)?.take(usize::try_from(n).unwrap_or(usize::MAX)) {
            json.clear();
            item?.show(&mut json);
            let line: Cow<'_, str> =
                if args.full { json.as_str().into() } else { abbreviate(json.as_str()).into() };
            if let Err(e) = writeln!(out, "{line}") {
                return Ok(Err(e));
            }
        }
        Ok(out.flush())
    });
    match shown {
        Ok(Ok(())) => 0,
        Ok(Err(e)) if e.kind() == ErrorKind::BrokenPipe => 0,
        Ok(Err(e)) => {
            let _ = writeln!(err, "error: cannot write to standard output: {e}");
            FAILED
        }
        Err(e) => {
            let _ = out.flush();
            let _ = writeln!(err, "error: pipeline `{name}`: {e}");
            FAILED
        }
    }
}

/// NumPy's print options (`threshold`, `edgeitems`): a value of more than `THRESHOLD`
/// numbers or strings prints `EDGE` items at each end of each of its arrays.
const THRESHOLD: usize = 1000;
const EDGE: usize = 3;
/// A string longer than this prints its first `STRING_EDGE` characters and its length.
const MAX_STRING: usize = 96;
const STRING_EDGE: usize = 48;

/// One JSON line of `Show`, abbreviated for a terminal as NumPy prints arrays: each
/// field's value of more than [`THRESHOLD`] items keeps [`EDGE`] items at each end of each
/// array (`[0, 1, 2, ..., 1021, 1022, 1023]`), and long strings (base64 bytes) keep their
/// start and say their length. The result is for reading, not JSON (`...`); `--full` or a
/// pipe gives the whole line. A line that is not the JSON `Show` writes comes back as it is.
pub(super) fn abbreviate(line: &str) -> String {
    let mut p = Parser { s: line.as_bytes(), i: 0 };
    match p.value() {
        Some(v) if p.i == line.len() => {
            let mut out = String::with_capacity(line.len().min(4096));
            v.write(&mut out, false);
            out
        }
        _ => line.to_string(),
    }
}

/// A JSON value of a `Show` line, its scalars kept as their text.
enum J<'a> {
    Obj(Vec<(&'a str, J<'a>)>),
    Arr(Vec<J<'a>>),
    Str(&'a str),
    Scalar(&'a str),
}

impl J<'_> {
    /// The numbers and strings in this value.
    fn leaves(&self) -> usize {
        match self {
            J::Obj(fields) => fields.iter().map(|(_, v)| v.leaves()).sum(),
            J::Arr(items) => items.iter().map(J::leaves).sum(),
            J::Str(_) | J::Scalar(_) => 1,
        }
    }

    /// Writes this value; `summarize`: its arrays keep [`EDGE`] items at each end. An
    /// object decides for each of its values (one field's size never cuts another).
    fn write(&self, out: &mut String, summarize: bool) {
        match self {
            J::Obj(fields) => {
                out.push('{');
                for (n, (key, v)) in fields.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    out.push_str(key);
                    out.push(':');
                    v.write(out, summarize || v.leaves() > THRESHOLD);
                }
                out.push('}');
            }
            J::Arr(items) => {
                out.push('[');
                let cut = summarize && items.len() > 2 * EDGE;
                for (n, v) in items.iter().enumerate() {
                    if cut && (EDGE..items.len() - EDGE).contains(&n) {
                        if n == EDGE {
                            out.push_str(",...");
                        }
                        continue;
                    }
                    if n > 0 {
                        out.push(',');
                    }
                    v.write(out, summarize);
                }
                out.push(']');
            }
            J::Str(s) => {
                // `s` is the string with its quotes; escapes are ASCII, so a cut at a
                // char boundary past them may split one only at the very end (shown as is).
                let body = &s[1..s.len() - 1];
                if body.chars().count() > MAX_STRING {
                    let end = body.char_indices().nth(STRING_EDGE).map_or(body.len(), |(i, _)| i);
                    out.push('"');
                    out.push_str(&body[..end]);
                    out.push_str(&format!("...\"({} chars)", body.chars().count()));
                } else {
                    out.push_str(s);
                }
            }
            J::Scalar(s) => out.push_str(s),
        }
    }
}

/// A parser of the JSON `Show` writes (no whitespace between tokens).
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn text(&self, from: usize) -> &'a str {
        // The input is a `str` and every cut is at an ASCII byte.
        std::str::from_utf8(&self.s[from..self.i]).unwrap_or("")
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.s.get(self.i) == Some(&b);
        self.i += usize::from(hit);
        hit
    }

    fn value(&mut self) -> Option<J<'a>> {
        match *self.s.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut fields = Vec::new();
                if self.eat(b'}') {
                    return Some(J::Obj(fields));
                }
                loop {
                    let key = match self.string()? {
                        J::Str(k) => k,
                        _ => return None,
                    };
                    if !self.eat(b':') {
                        return None;
                    }
                    fields.push((key, self.value()?));
                    if self.eat(b'}') {
                        return Some(J::Obj(fields));
                    }
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Some(J::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    if self.eat(b']') {
                        return Some(J::Arr(items));
                    }
                    if !self.eat(b',') {
                        return None;
                    }
                }
            }
            b'"' => self.string(),
            _ => {
                let from = self.i;
                while self.s.get(self.i).is_some_and(|b| !b",]}".contains(b)) {
                    self.i += 1;
                }
                (self.i > from).then(|| J::Scalar(self.text(from)))
            }
        }
    }

    fn string(&mut self) -> Option<J<'a>> {
        let from = self.i;
        if !self.eat(b'"') {
            return None;
        }
        loop {
            match *self.s.get(self.i)? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Some(J::Str(self.text(from)));
                }
                _ => self.i += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use sluice_runtime::stage::range;

    use super::*;

    /// Runs `--show n` over `0..len` encoded as 8-byte records in batches of 2 (element
    /// 3 of the input fails when `fail`), counting the records the map made.
    fn show_test(n: u64, len: u64, fail: bool, out: &mut dyn Write) -> (u8, String, u64) {
        let made = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&made);
        let build = move |_: &()| {
            Ok(range(0..len)
                .try_map(move |i| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    if fail && i == 3 {
                        Err(format!("record {i} is bad"))
                    } else {
                        Ok(i.to_le_bytes().to_vec())
                    }
                })
                .named("encode")
                .chunks(2, false))
        };
        let mut err = Vec::new();
        let args = RunArgs { show: Some(n), ..RunArgs::default() };
        let code = show(&(), build, &args, n, "test", out, &mut err);
        (code, String::from_utf8(err).unwrap(), made.load(Ordering::Relaxed))
    }

    #[test]
    fn prints_the_first_n_elements_and_pulls_no_further() {
        let mut out = Vec::new();
        let (code, err, made) = show_test(2, 1000, false, &mut out);
        assert_eq!((code, err.as_str()), (0, ""));
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "[{\"record\":{\"dtype\":\"bytes\",\"base64\":\"AAAAAAAAAAA=\"}},{\"record\":{\"dtype\":\"bytes\",\"base64\":\"AQAAAAAAAAA=\"}}]\n\
             [{\"record\":{\"dtype\":\"bytes\",\"base64\":\"AgAAAAAAAAA=\"}},{\"record\":{\"dtype\":\"bytes\",\"base64\":\"AwAAAAAAAAA=\"}}]\n"
        );
        assert!(made < 1000, "the pass stops after the shown elements: {made} made");
        let mut out = Vec::new();
        let (code, _, _) = show_test(u64::MAX, 7, false, &mut out);
        assert_eq!((code, String::from_utf8(out).unwrap().lines().count()), (0, 4));
    }

    #[test]
    fn a_data_error_ends_the_lines_with_exit_1() {
        let mut out = Vec::new();
        let (code, err, _) = show_test(5, 10, true, &mut out);
        assert_eq!((code, err.as_str()), (1, "error: pipeline `test`: stage `encode`: record 3 is bad\n"));
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
    }

    /// A writer that fails with `kind` at once.
    struct Failing(ErrorKind);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_ends_quietly_and_another_write_error_fails() {
        let (code, err, _) = show_test(1, 10, false, &mut Failing(ErrorKind::BrokenPipe));
        assert_eq!((code, err.as_str()), (0, ""));
        let (code, err, _) = show_test(1, 10, false, &mut Failing(ErrorKind::StorageFull));
        assert_eq!(code, 1);
        assert!(err.starts_with("error: cannot write to standard output: "), "{err}");
    }

    #[test]
    fn long_values_print_their_ends_as_numpy_does() {
        // A batch of 1024 rows of 4 numbers: 4096 values, each dimension cut to 3 + 3.
        let rows: Vec<String> = (0..1024).map(|r| format!("[{r},{r},{r},{r}]")).collect();
        let line = format!("{{\"x\":[{}],\"y\":[1,2,3,4,5,6,7,8]}}", rows.join(","));
        assert_eq!(
            abbreviate(&line),
            "{\"x\":[[0,0,0,0],[1,1,1,1],[2,2,2,2],...,[1021,1021,1021,1021],[1022,1022,1022,1022],\
             [1023,1023,1023,1023]],\"y\":[1,2,3,4,5,6,7,8]}",
            "a small field beside a big one prints whole"
        );
        // One row of 2000 numbers: its only dimension is cut.
        let values: Vec<String> = (0..2000).map(|v| format!("{v}.5")).collect();
        let line = format!("{{\"v\":[{}]}}", values.join(","));
        assert_eq!(abbreviate(&line), "{\"v\":[0.5,1.5,2.5,...,1997.5,1998.5,1999.5]}");
        // A batch of byte strings: the rows are cut, and each long string too.
        let long = "QUJD".repeat(100);
        let rows: Vec<String> = (0..1200).map(|_| format!("\"{long}\"")).collect();
        let line = format!("{{\"b\":{{\"dtype\":\"bytes\",\"base64\":[{}]}}}}", rows.join(","));
        let short = format!("\"{}...\"(400 chars)", &long[..48]);
        assert_eq!(
            abbreviate(&line),
            format!(
                "{{\"b\":{{\"dtype\":\"bytes\",\"base64\":[{short},{short},{short},...,{short},{short},{short}]}}}}"
            )
        );
    }

    #[test]
    fn short_lines_and_other_text_print_as_they_are() {
        for line in [
            "[{\"record\":{\"dtype\":\"bytes\",\"base64\":\"AAAAAAAAAAA=\"}}]",
            "{\"a\":\"x\\\"y\",\"b\":[],\"c\":{},\"d\":null,\"e\":-1.5e-7}",
            "not json",
            "{\"a\":[1,2",
            "\"\\",
            "",
        ] {
            assert_eq!(abbreviate(line), line);
        }
    }

    #[test]
    fn full_prints_every_value() {
        let build =
            |_: &()| Ok(range(0..1).map(|_| (0..2000u32).flat_map(u32::to_le_bytes).collect::<Vec<u8>>()));
        for (full, long) in [(true, true), (false, false)] {
            let mut out = Vec::new();
            let args = RunArgs { show: Some(1), full, ..RunArgs::default() };
            assert_eq!(show(&(), build, &args, 1, "t", &mut out, &mut Vec::new()), 0);
            let out = String::from_utf8(out).unwrap();
            assert_eq!(out.len() > 8000, long, "{full}: {out}");
        }
    }
}
