//! The runner's `--show N` (what `sluice show` runs): the first `N` elements of one pass,
//! each as one line of JSON on stdout (the element's `abi::show::Show` impl), then the
//! pass is dropped: nothing past the `N`th element is pulled on purpose (stages that read
//! ahead stop when their stream is dropped). No statistics, no progress bar.
//!
//! Exit status as a run's: 1 on a data error (the lines before it are printed) or when
//! stdout cannot be written, except a reader that stopped reading (`| head -1`, a broken
//! pipe), which ends the command quietly with 0.

use std::io::{ErrorKind, Write};

use sluice_runtime::abi::Rows;
use sluice_runtime::abi::show::{Json, Show};
use sluice_runtime::stage::{Ctx, Dataset, RuntimeOptions};

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
    let ctx = Ctx::new(&RuntimeOptions { memory_budget: args.memory_budget, cores: None });
    let shown = build(params).and_then(|ds| {
        let mut json = Json::new();
        for item in ds.stream_in(&ctx)?.take(usize::try_from(n).unwrap_or(usize::MAX)) {
            json.clear();
            item?.show(&mut json);
            if let Err(e) = writeln!(out, "{}", json.as_str()) {
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
}
