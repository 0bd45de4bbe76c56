//! Typing `tokenize(text, tokenizer, add_bos, add_eos)`: a Hugging Face tokenizer's ids
//! (`i32[]`) of a `str` value (or `bytes`, checked to be UTF-8 when it runs).
//!
//! Codes: E0410 the text is not one `str` or `bytes` value, E0411 the tokenizer is not a
//! string literal or a `path`/`string` parameter (the file is read when the pipeline is
//! built, so it must be known then), E0412 `add_bos`/`add_eos` not `true` or `false`.

use crate::ast::{self, ExprKind as A};
use crate::diagnostic::Diagnostic;
use crate::ir::expr::ExprKind;
use crate::ir::op::Op;
use crate::ir::types::{DType, ParamType, Shape, TensorType};

use super::ops::Typer;

impl Typer<'_> {
    /// `tokenize`'s arguments, bound to its signature.
    pub(super) fn tokenize(&mut self, a: &[Option<&ast::Expr>]) -> Option<(Op, TensorType)> {
        let (text_arg, file_arg) = (a[0]?, a[1]?);
        let text = self.ty(text_arg);
        let file = self.ty(file_arg);
        let mut ok = true;
        if let Some(t) = &text {
            let is_text = matches!(t.tensor(), Some(x) if matches!(x.dtype, DType::Str | DType::Bytes)
                && x.shape == Shape::scalar());
            if !is_text {
                let found = match t.tensor() {
                    Some(x) => format!("this is `{x}`"),
                    None => format!("this is {}", t.ty.describe()),
                };
                self.diags.push(
                    Diagnostic::error("E0410", "`tokenize` needs one text value per element", text_arg.span, found)
                        .with_note("`tokenize` takes a `str` field (such as `line` of `text_lines`) or `bytes` holding UTF-8"),
                );
                ok = false;
            }
        }
        if let Some(f) = &file {
            let is_file = match &f.kind {
                ExprKind::Str(_) => true,
                ExprKind::Param { ty, .. } => matches!(ty, ParamType::Path | ParamType::Str),
                _ => false,
            };
            if !is_file {
                let found = match &f.kind {
                    ExprKind::Param { name, ty } => format!("`{name}` is a `{}` parameter", ty.name()),
                    _ => match f.tensor() {
                        Some(x) => format!("this is a field of type `{x}`"),
                        None => format!("this is {}", f.ty.describe()),
                    },
                };
                self.diags.push(
                    Diagnostic::error(
                        "E0411",
                        "the tokenizer of `tokenize` is a file known when the pipeline starts",
                        file_arg.span,
                        found,
                    )
                    .with_help(
                        "declare a parameter `tokenizer: path = \"tokenizer.json\"` and write \
                         `tokenize(line, tokenizer)`, or give the file as a string",
                    ),
                );
                ok = false;
            }
        }
        let mut flags = [false; 2];
        for (i, name) in ["add_bos", "add_eos"].into_iter().enumerate() {
            match a[2 + i].map(|e| (e, &e.kind)) {
                None => {}
                Some((_, A::Bool(b))) => flags[i] = *b,
                Some((e, _)) => {
                    self.diags.push(Diagnostic::error(
                        "E0412",
                        format!("`{name}` of `tokenize` is `true` or `false`"),
                        e.span,
                        "not a boolean literal",
                    ));
                    ok = false;
                }
            }
        }
        let (text, tokenizer) = (text?, file?);
        if !ok {
            return None;
        }
        let op = Op::Tokenize { text, tokenizer, add_bos: flags[0], add_eos: flags[1] };
        Some((op, TensorType { dtype: DType::I32, shape: Shape::Var }))
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::op::Op;
    use crate::ir::plan::{MapOp, Plan};

    fn compile(params: &str, stmt: &str) -> Result<Plan, Vec<crate::diagnostic::Diagnostic>> {
        let source = if stmt.contains("value") { "range(10)" } else { "text_lines(files)" };
        let src = format!(
            "pipeline p(files: glob = \"d/*.txt\"{params}) {{
                {source};
                map {{ {stmt} }}
            }}"
        );
        crate::compile(&src).into_result().map(|p| p[0].logical.clone())
    }

    #[test]
    fn tokenize_gives_i32_lists_and_prints_as_written() {
        let plan = compile(", tok: path = \"t.json\"", "ids = tokenize(line, tok, add_eos: true);").unwrap();
        let Plan::Map(m) = &plan else { panic!("{}", plan.explain()) };
        let Some(MapOp::Assign { value, ty, .. }) = m.ops.last() else { panic!("{:?}", m.ops) };
        assert_eq!(ty.to_string(), "i32[]");
        assert!(matches!(value.op(), Some(Op::Tokenize { add_bos: false, add_eos: true, .. })));
        assert_eq!(value.to_string(), "tokenize(line, tok, add_eos: true)");
        assert!(plan.explain().contains("tokenize(add_eos)"), "{}", plan.explain());
        // A literal file and positional flags.
        assert!(compile("", "ids = tokenize(line, \"t.json\", true, false);").is_ok());
    }

    #[test]
    fn tokenize_checks_its_arguments() {
        for (params, stmt, code) in [
            ("", "ids = tokenize(value, \"t.json\");", "E0410"),
            (", k: u64 = 1", "ids = tokenize(line, k);", "E0411"),
            ("", "ids = tokenize(line, line);", "E0411"),
            ("", "ids = tokenize(line, \"t.json\", add_bos: 1);", "E0412"),
            ("", "ids = tokenize(line);", "E0402"),
        ] {
            let diags = compile(params, stmt).unwrap_err();
            assert_eq!(diags.iter().map(|d| d.code).collect::<Vec<_>>(), vec![code], "{stmt}: {diags:?}");
        }
    }
}
