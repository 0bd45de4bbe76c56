//! Lowering `window(size, shift: size, stride: 1, drop_remainder: false)` to a
//! [`Window`] node: tf.data's `Dataset.window` with each window batched, so its input
//! must be what `batch` stacks: elements with fields, each of a fixed shape (E0308, as
//! `batch`). The counts are constants or parameters (checked at least 1 by the stage
//! checks, E0206, and for parameters when the pipeline is built).
//!
//! Codes: E0365 `window` of elements without fields (file paths, unparsed records);
//! E0366 `window` of batches; E0308 a field whose size varies (`batch`'s check).

use crate::ast;
use crate::diagnostic::Diagnostic;
use crate::ir::plan::{ArgValue, Element, Plan};
use crate::ir::types::Value;
use crate::ir::window::Window;

/// The `Window` node of stage `s` (its arguments bound by name: `arg`, `flag`), or
/// `None` with diagnostics.
pub fn lower(
    s: &ast::Stage,
    arg: impl Fn(&str) -> Option<ArgValue>,
    drop_remainder: bool,
    input: Box<Plan>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Plan> {
    let element = input.output();
    match &element {
        Element::Fields(_) => {}
        Element::Batch(_) => {
            diags.push(
                Diagnostic::error(
                    "E0366",
                    "`window` of batches",
                    s.name.span,
                    format!("its input is {element}"),
                )
                .with_note("each window is already a batch: of the elements it holds")
                .with_help("put `window` before `batch`, or `unbatch()` first"),
            );
            return None;
        }
        Element::Path | Element::Record => {
            let help = if element == Element::Record {
                "parse the records first: `map { parse_example(); }`"
            } else {
                "read the files first (`tfrecords(files)`, `read_file()`) and parse what they hold"
            };
            diags.push(
                Diagnostic::error(
                    "E0365",
                    "`window` needs elements with fields",
                    s.name.span,
                    format!("its input is {element}"),
                )
                .with_note("each window is a batch of named columns, one per field")
                .with_help(help),
            );
            return None;
        }
    }
    if !super::lower::batchable(&element, "window", s.name.span, diags) {
        return None;
    }
    let size = arg("size").unwrap_or(ArgValue::Const(Value::Int(1)));
    Some(Plan::Window(Window {
        input,
        shift: arg("shift").unwrap_or_else(|| size.clone()),
        stride: arg("stride").unwrap_or(ArgValue::Const(Value::Int(1))),
        size,
        drop_remainder,
    }))
}
