//! Prints an AST back as canonical `.pipe` text: four-space indents, one item per line,
//! minimal parentheses. `parse(print(ast)) == ast` for every tree (tested), so the
//! printed form is a faithful, readable rendering for snapshots and for `sluice fmt`.

use std::fmt::{self, Write};

use crate::ast::*;

impl fmt::Display for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.pipelines.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pipeline {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}: {}", p.name, p.ty)?;
            if let Some(d) = &p.default {
                write!(f, " = {d}")?;
            }
        }
        f.write_str(") {\n")?;
        for item in &self.items {
            write!(f, "{item}")?;
        }
        f.write_str("}\n")
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::Schema(s) => {
                f.write_str("    schema {\n")?;
                for field in &s.fields {
                    let sequence = if field.sequence { "sequence " } else { "" };
                    write!(f, "        {sequence}{}: {}", field.name, field.ty)?;
                    if let Some(d) = &field.default {
                        write!(f, " = {d}")?;
                    }
                    f.write_str(",\n")?;
                }
                f.write_str("    }\n")
            }
            Item::ExternFn(e) => {
                write!(f, "    extern fn {}(", e.path)?;
                for (i, p) in e.params.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {}", p.name, p.ty)?;
                }
                writeln!(f, ") -> {};", e.ret)
            }
            Item::Budget(b) => writeln!(f, "    budget {};", b.value),
            Item::Threads(t) => writeln!(f, "    threads {};", t.value),
            Item::Device(d) => writeln!(f, "    device {};", d.target),
            Item::Stage(s) => {
                write!(f, "    {}", s.name)?;
                if !s.args.is_empty() {
                    f.write_char('(')?;
                    write_args(f, &s.args)?;
                    f.write_char(')')?;
                }
                match &s.body {
                    None => f.write_str(";\n"),
                    Some(b) => write_block(f, b, 1),
                }
            }
        }
    }
}

/// A block `depth` levels in: its statements one level further, a statement's own block
/// (a stage in `flat_map`'s block) nested under it.
fn write_block(f: &mut fmt::Formatter<'_>, b: &crate::ast::Block, depth: usize) -> fmt::Result {
    f.write_str(" {\n")?;
    for st in &b.stmts {
        f.write_str(&"    ".repeat(depth + 1))?;
        if let Some(t) = &st.target {
            write!(f, "{t} = ")?;
        }
        write!(f, "{}", st.value)?;
        match &st.body {
            None => f.write_str(";\n")?,
            Some(inner) => write_block(f, inner, depth + 1)?,
        }
    }
    writeln!(f, "{}}}", "    ".repeat(depth))
}

fn write_args(f: &mut fmt::Formatter<'_>, args: &[Arg]) -> fmt::Result {
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        if let Some(n) = &a.name {
            write!(f, "{n}: ")?;
        }
        write!(f, "{}", a.value)?;
    }
    Ok(())
}

impl fmt::Display for TypeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        if let Some(dims) = &self.dims {
            f.write_char('[')?;
            for (i, d) in dims.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                match d {
                    Dim::Fixed(n, _) => write!(f, "{n}")?,
                    Dim::Named(id) => write!(f, "{id}")?,
                }
            }
            f.write_char(']')?;
        }
        Ok(())
    }
}

/// Binding strength of an expression's top operator (higher binds tighter).
fn precedence(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary(op, ..) => match op {
            BinaryOp::Or => 1,
            BinaryOp::And => 2,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 3,
            BinaryOp::Add | BinaryOp::Sub => 4,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 5,
        },
        ExprKind::Unary(..) => 6,
        _ => 7,
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Int(n) => write!(f, "{n}"),
            ExprKind::Float(x) => {
                // Always with a fraction or exponent, so it reads back as a float.
                let s = format!("{x:?}");
                f.write_str(&s)
            }
            ExprKind::Str(s) => {
                f.write_char('"')?;
                for c in s.chars() {
                    match c {
                        '"' => f.write_str("\\\"")?,
                        '\\' => f.write_str("\\\\")?,
                        '\n' => f.write_str("\\n")?,
                        '\t' => f.write_str("\\t")?,
                        '\r' => f.write_str("\\r")?,
                        '\0' => f.write_str("\\0")?,
                        c => f.write_char(c)?,
                    }
                }
                f.write_char('"')
            }
            ExprKind::Bool(b) => write!(f, "{b}"),
            ExprKind::Quantity(n, unit) => write!(f, "{n} {unit}"),
            ExprKind::Path(p) => write!(f, "{p}"),
            ExprKind::Rust(code) => f.write_str(&code.text),
            ExprKind::List(items) => {
                f.write_char('[')?;
                for (i, e) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_char(']')
            }
            ExprKind::Call { callee, args, ret } => {
                write!(f, "{callee}(")?;
                write_args(f, args)?;
                f.write_char(')')?;
                if let Some(t) = ret {
                    write!(f, " -> {t}")?;
                }
                Ok(())
            }
            ExprKind::Unary(op, e) => {
                f.write_str(match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Not => "!",
                })?;
                if precedence(e) < 6 { write!(f, "({e})") } else { write!(f, "{e}") }
            }
            ExprKind::Binary(op, l, r) => {
                let p = precedence(self);
                // Left-associative: the left side may share the precedence, the right not.
                if precedence(l) < p {
                    write!(f, "({l})")?
                } else {
                    write!(f, "{l}")?
                }
                write!(f, " {} ", op.symbol())?;
                if precedence(r) <= p { write!(f, "({r})") } else { write!(f, "{r}") }
            }
        }
    }
}
