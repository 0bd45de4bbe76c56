//! Lowering `shuffle`: a buffer of elements, or `global`, which must come right after the
//! reader of the files (E0314): `tfrecords(files)` (records through the files' indexes),
//! or `parquet(files)`, whose parse then runs after the shuffle (the shuffle permutes
//! the reader's rows, gathered a `window` of positions at a time). `window` is an
//! argument of a global shuffle only (E0314 otherwise).

use crate::ast;
use crate::diagnostic::Diagnostic;
use crate::ir::plan::{ArgValue, Map, MapOp, ParseFormat, Plan, RecordFormat, Shuffle, ShuffleBuffer};
use crate::ir::types::Value;

/// The `Shuffle` node of stage `s` (its arguments bound by name: `arg`; `global` when its
/// buffer is the word), or `None` with diagnostics.
pub fn lower(
    s: &ast::Stage,
    arg: impl Fn(&str) -> Option<ArgValue>,
    global: bool,
    reshuffle_each_epoch: bool,
    input: Box<Plan>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let window = arg("window");
    if !global {
        if window.is_some() {
            diags.push(
                Diagnostic::error(
                    "E0314",
                    "`window` is an argument of `shuffle(global)`",
                    s.name.span,
                    "a shuffle of a buffer of elements",
                )
                .with_help("drop `window`: a buffered shuffle holds `buffer` elements"),
            );
            return None;
        }
        return Some(Plan::Shuffle(Shuffle {
            input,
            buffer: ShuffleBuffer::Elements(arg("buffer").unwrap_or(ArgValue::Const(Value::Int(1)))),
            seed: arg("seed"),
            reshuffle_each_epoch,
            window: None,
        }));
    }
    let shuffle = |input| Shuffle {
        input,
        buffer: ShuffleBuffer::Global,
        seed: arg("seed"),
        reshuffle_each_epoch,
        window: window.clone(),
    };
    match *input {
        Plan::Interleave(i) if matches!(*i.input, Plan::Files(_)) && i.format == RecordFormat::TfRecord => {
            Some(Plan::Shuffle(shuffle(Box::new(Plan::Interleave(i)))))
        }
        // The parse of a `parquet` reader runs after the shuffle of its rows.
        Plan::Map(mut m) if parquet_reader(&m) => {
            m.input = Box::new(Plan::Shuffle(shuffle(m.input)));
            Some(Plan::Map(m))
        }
        other => {
            diags.push(
                Diagnostic::error(
                    "E0314",
                    "`shuffle(global)` must come right after the reader of the files",
                    s.name.span,
                    format!("its input is {}, not the records or rows of `files`", other.output()),
                )
                .with_note(
                    "a global shuffle permutes every record of every file: through the files' indexes \
                     (`sluice index`) for `tfrecords`, a window of rows at a time for `parquet`; it \
                     replaces reading them in order",
                )
                .with_help(
                    "write it right after `tfrecords(files)` or `parquet(files)` (or the `interleave` \
                     reading the files)",
                ),
            );
            None
        }
    }
}

/// Whether `m` is the parse of a `parquet` reader of files, alone.
fn parquet_reader(m: &Map) -> bool {
    matches!(m.ops.as_slice(), [MapOp::Parse { format: ParseFormat::Table, .. }])
        && matches!(&*m.input, Plan::Interleave(i)
            if matches!(*i.input, Plan::Files(_)) && matches!(i.format, RecordFormat::Parquet(_)))
}
