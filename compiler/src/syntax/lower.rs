//! Parsing `.pipe` text with pest and lowering the parse tree to [`ast`](crate::ast).
//! A syntax error becomes one diagnostic (`E0001`) at the furthest position pest
//! reached, listing the tokens it expected there; literal problems (an integer out of
//! range) are collected while lowering, so every one of them is reported at once.

use std::sync::LazyLock;

use pest::Parser as _;
use pest::iterators::Pair;
use pest::pratt_parser::{Assoc, Op, PrattParser};

use crate::ast::*;
use crate::diagnostic::Diagnostic;

#[derive(pest_derive::Parser)]
#[grammar = "syntax/grammar.pest"]
struct PipeParser;

static PRATT: LazyLock<PrattParser<Rule>> = LazyLock::new(|| {
    PrattParser::new()
        .op(Op::infix(Rule::or, Assoc::Left))
        .op(Op::infix(Rule::and, Assoc::Left))
        .op(Op::infix(Rule::eq, Assoc::Left)
            | Op::infix(Rule::ne, Assoc::Left)
            | Op::infix(Rule::lt, Assoc::Left)
            | Op::infix(Rule::le, Assoc::Left)
            | Op::infix(Rule::gt, Assoc::Left)
            | Op::infix(Rule::ge, Assoc::Left))
        .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
        .op(Op::infix(Rule::mul, Assoc::Left)
            | Op::infix(Rule::div, Assoc::Left)
            | Op::infix(Rule::rem, Assoc::Left))
        .op(Op::prefix(Rule::neg) | Op::prefix(Rule::not))
});

/// The deepest bracket nesting accepted (the parser is recursive; this keeps hostile
/// input from exhausting the stack).
pub const MAX_NESTING: usize = 128;
/// The longest run of prefix operators accepted (`- - - x`), for the same reason.
pub const MAX_PREFIX_RUN: usize = 64;
/// The largest source accepted, in bytes.
pub const MAX_SOURCE: usize = 4 << 20;
/// The most operator characters in one statement (`x + x + …`): every later pass walks an
/// expression recursively, and the Rust generated from it must stay within what rustc
/// compiles.
pub const MAX_OPERATORS: usize = 256;

/// Rejects input the recursive parser could not handle safely: too large, nested too
/// deeply, with too long a run of prefix operators, or with too many operators in one
/// statement (the problem, if any). Comments and strings are skipped.
fn guard(source: &str) -> Option<Diagnostic> {
    if source.len() > MAX_SOURCE {
        return Some(Diagnostic::error(
            "E0003",
            format!("file too large for a pipeline ({} bytes, at most {MAX_SOURCE})", source.len()),
            Span::new(0, 0),
            "",
        ));
    }
    let bytes = source.as_bytes();
    let (mut depth, mut run, mut i) = (0usize, 0usize, 0usize);
    // Operator characters since the start of the statement, and where it starts.
    let (mut operators, mut statement) = (0usize, 0usize);
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(Diagnostic::error(
                        "E0003",
                        format!("brackets nest more than {MAX_NESTING} deep"),
                        Span::new(i, i + 1),
                        "too deep here",
                    ));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if matches!(c, b';' | b'{' | b'}') {
            (operators, statement) = (0, i + 1);
        } else if matches!(c, b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'!' | b'&' | b'|') {
            operators += 1;
            if operators > MAX_OPERATORS {
                let start =
                    statement + (source[statement..i].len() - source[statement..i].trim_start().len());
                return Some(
                    Diagnostic::error(
                        "E0003",
                        format!("more than {MAX_OPERATORS} operators in one statement"),
                        Span::new(start, i + 1),
                        "too many operators",
                    )
                    .with_help("split the expression: assign parts of it to fields of their own"),
                );
            }
        }
        if c == b'-' || c == b'!' {
            run += 1;
            if run > MAX_PREFIX_RUN {
                return Some(Diagnostic::error(
                    "E0003",
                    format!("more than {MAX_PREFIX_RUN} operators in a row"),
                    Span::new(i, i + 1),
                    "too many here",
                ));
            }
        } else if !c.is_ascii_whitespace() {
            run = 0;
        }
        i += 1;
    }
    None
}

/// Parses a `.pipe` file. On failure, returns every diagnostic found.
pub fn parse(source: &str) -> Result<File, Vec<Diagnostic>> {
    // A byte-order mark at the start (some editors write one) is read as the three
    // spaces it occupies, so every byte offset still points into `source`.
    let unmarked;
    let source = match source.strip_prefix('\u{FEFF}') {
        Some(rest) => {
            unmarked = format!("   {rest}");
            unmarked.as_str()
        }
        None => source,
    };
    if let Some(d) = guard(source) {
        return Err(vec![d]);
    }
    pest::set_error_detail(true);
    let mut pairs = PipeParser::parse(Rule::file, source).map_err(|e| vec![syntax_error(source, &e)])?;
    let mut lower = Lower { errors: Vec::new() };
    let file = pairs.next().expect("the file rule matched");
    let pipelines =
        file.into_inner().filter(|p| p.as_rule() == Rule::pipeline).map(|p| lower.pipeline(p)).collect();
    if lower.errors.is_empty() { Ok(File { pipelines }) } else { Err(lower.errors) }
}

fn span(p: &Pair<'_, Rule>) -> Span {
    Span::new(p.as_span().start(), p.as_span().end())
}

/// What a rule is called in messages.
fn describe(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::ident | Rule::arg_name | Rule::target => "a name",
        Rule::expr => "an expression",
        Rule::type_expr => "a type",
        Rule::int => "an integer",
        Rule::float => "a number",
        Rule::string => "a string",
        Rule::pipeline | Rule::kw_pipeline => "`pipeline`",
        Rule::stage => "a stage",
        Rule::schema | Rule::kw_schema => "`schema`",
        Rule::unit => "a unit (B, KiB, MiB, GiB)",
        Rule::EOI => "the end of the file",
        _ => return None,
    })
}

/// How an expected token is named in a message: character classes by what they start,
/// whitespace and comments not at all.
fn token_name(token: &str) -> Option<String> {
    match token {
        " " | "\t" | "\n" | "\r" | "//" | "/*" => None,
        "0..9" => Some("a number".into()),
        "A..Z" | "a..z" | "_" => Some("a name".into()),
        t => Some(format!("`{t}`")),
    }
}

/// Collapses an expected-token list: operators into "an operator", tokens that only start
/// an expression into "an expression" when an expression is expected, units into one.
fn simplify(expected: &mut Vec<String>) {
    const OPERATORS: &[&str] =
        &["`!=`", "`%`", "`&&`", "`*`", "`+`", "`-`", "`/`", "`<=`", "`<`", "`==`", "`>=`", "`>`", "`||`"];
    const EXPR_START: &[&str] =
        &["`!`", "`\"`", "`(`", "`-`", "`[`", "`false`", "`true`", "a name", "a number"];
    const UNITS: &[&str] = &["`B`", "`KiB`", "`MiB`", "`GiB`", "`TiB`", "`KB`", "`MB`", "`GB`", "`TB`"];
    // Continuations of a number literal are never what the user meant to write.
    expected.retain(|e| !matches!(e.as_str(), "`.`" | "`e`" | "`E`"));
    if expected.iter().any(|e| e == "an expression") {
        expected.retain(|e| !EXPR_START.contains(&e.as_str()));
    }
    if expected.iter().any(|e| OPERATORS.contains(&e.as_str())) {
        expected.retain(|e| !OPERATORS.contains(&e.as_str()) && e != "`::`" && e != "`(`");
        expected.push("an operator".into());
    }
    if expected.iter().any(|e| UNITS.contains(&e.as_str())) {
        expected.retain(|e| !UNITS.contains(&e.as_str()) && !e.starts_with("a unit"));
        expected.push("a unit (B, KiB, MiB, GiB)".into());
    }
    expected.sort();
    expected.dedup();
}

fn syntax_error(source: &str, e: &pest::error::Error<Rule>) -> Diagnostic {
    use pest::error::{ErrorVariant, InputLocation};
    let at = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    // The furthest position any rule reached, and the literal tokens expected there.
    let (pos, mut expected): (usize, Vec<String>) = match e.parse_attempts() {
        Some(a) => {
            (a.max_position, a.expected_tokens().iter().filter_map(|t| token_name(&t.to_string())).collect())
        }
        None => (at, Vec::new()),
    };
    if let ErrorVariant::ParsingError { positives, .. } = &e.variant {
        expected.extend(positives.iter().filter_map(|r| describe(*r)).map(str::to_string));
    }
    simplify(&mut expected);
    let found = match source[pos.min(source.len())..].chars().next() {
        None => "the end of the file".to_string(),
        Some(_) => {
            let rest = &source[pos..];
            let word: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            format!("`{}`", if word.is_empty() { rest.chars().next().unwrap().to_string() } else { word })
        }
    };
    let what = match expected.len() {
        0 => "something else".to_string(),
        1 => expected[0].clone(),
        n => format!("{} or {}", expected[..n - 1].join(", "), expected[n - 1]),
    };
    let message = format!("expected {what}, found {found}");
    // A missing `;` at the end of a line: point there, as rustc does.
    if expected.iter().any(|e| e == "`;`") {
        let before = source[..pos].trim_end();
        if source[before.len()..pos].contains('\n') {
            let at = before.len();
            let (line, _) = crate::diagnostic::line_col(source, at);
            return Diagnostic::error("E0001", message, Span::new(at, at), "expected `;` here")
                .with_label(Span::new(pos, (pos + 1).min(source.len())), "unexpected token")
                .with_help(format!("add `;` at the end of line {line}"));
        }
    }
    let end = (pos + 1).min(source.len()).max(pos);
    Diagnostic::error(
        "E0001",
        format!("expected {what}, found {found}"),
        Span::new(pos, end),
        "unexpected here",
    )
}

struct Lower {
    errors: Vec<Diagnostic>,
}

impl Lower {
    fn pipeline(&mut self, p: Pair<'_, Rule>) -> Pipeline {
        let sp = span(&p);
        let mut it = p.into_inner().filter(|q| q.as_rule() != Rule::kw_pipeline);
        let name = ident(it.next().expect("pipeline name"));
        let mut params = Vec::new();
        let mut items = Vec::new();
        for q in it {
            match q.as_rule() {
                Rule::params => params = q.into_inner().map(|r| self.param(r)).collect(),
                _ => items.push(self.item(q)),
            }
        }
        Pipeline { name, params, items, span: sp }
    }

    fn param(&mut self, p: Pair<'_, Rule>) -> Param {
        let sp = span(&p);
        let mut it = p.into_inner();
        let name = ident(it.next().expect("param name"));
        let ty = self.type_expr(it.next().expect("param type"));
        let default = it.next().map(|e| self.expr(e));
        Param { name, ty, default, span: sp }
    }

    fn item(&mut self, p: Pair<'_, Rule>) -> Item {
        let sp = span(&p);
        match p.as_rule() {
            Rule::schema => {
                let fields = p
                    .into_inner()
                    .filter(|q| q.as_rule() == Rule::fields)
                    .flat_map(|q| q.into_inner())
                    .map(|f| {
                        let fsp = span(&f);
                        let mut it = f.into_inner().peekable();
                        let sequence = it.next_if(|q| q.as_rule() == Rule::kw_sequence).is_some();
                        let name = ident(it.next().expect("field name"));
                        let ty = self.type_expr(it.next().expect("field type"));
                        let default = it.next().map(|e| self.expr(e));
                        Field { name, ty, default, sequence, span: fsp }
                    })
                    .collect();
                Item::Schema(Schema { fields, span: sp })
            }
            Rule::extern_fn => {
                let mut it = p.into_inner().filter(|q| !matches!(q.as_rule(), Rule::kw_extern | Rule::kw_fn));
                let path = path(it.next().expect("fn path"));
                let mut params = Vec::new();
                let mut ret = None;
                for q in it {
                    match q.as_rule() {
                        Rule::fn_params => {
                            params = q
                                .into_inner()
                                .map(|fp| {
                                    let psp = span(&fp);
                                    let mut it = fp.into_inner();
                                    let name = ident(it.next().expect("param name"));
                                    FnParam {
                                        name,
                                        ty: self.type_expr(it.next().expect("param type")),
                                        span: psp,
                                    }
                                })
                                .collect();
                        }
                        _ => ret = Some(self.type_expr(q)),
                    }
                }
                Item::ExternFn(ExternFn { path, params, ret: ret.expect("return type"), span: sp })
            }
            Rule::budget => {
                let e = p.into_inner().find(|q| q.as_rule() == Rule::expr).expect("budget value");
                Item::Budget(Budget { value: self.expr(e), span: sp })
            }
            Rule::threads => {
                let e = p.into_inner().find(|q| q.as_rule() == Rule::expr).expect("threads value");
                Item::Threads(Threads { value: self.expr(e), span: sp })
            }
            Rule::device => {
                let t = p.into_inner().find(|q| q.as_rule() == Rule::ident).expect("device name");
                Item::Device(Device { target: ident(t), span: sp })
            }
            Rule::stage => {
                let mut it = p.into_inner();
                let name = ident(it.next().expect("stage name"));
                let mut args = Vec::new();
                let mut body = None;
                for q in it {
                    match q.as_rule() {
                        Rule::args => args = self.args(q),
                        Rule::block => body = Some(self.block(q)),
                        other => unreachable!("stage part {other:?}"),
                    }
                }
                Item::Stage(Stage { name, args, body, span: sp })
            }
            other => unreachable!("pipeline item {other:?}"),
        }
    }

    fn args(&mut self, p: Pair<'_, Rule>) -> Vec<Arg> {
        p.into_inner()
            .map(|a| {
                let sp = span(&a);
                let mut name = None;
                let mut value = None;
                for q in a.into_inner() {
                    match q.as_rule() {
                        Rule::arg_name => name = Some(ident(q.into_inner().next().expect("ident"))),
                        _ => value = Some(self.expr(q)),
                    }
                }
                Arg { name, value: value.expect("argument value"), span: sp }
            })
            .collect()
    }

    fn block(&mut self, p: Pair<'_, Rule>) -> Block {
        let sp = span(&p);
        let stmts = p
            .into_inner()
            .map(|s| {
                let ssp = span(&s);
                let mut target = None;
                let mut value = None;
                let mut body = None;
                for q in s.into_inner() {
                    match q.as_rule() {
                        Rule::target => target = Some(ident(q.into_inner().next().expect("ident"))),
                        Rule::block => body = Some(self.block(q)),
                        _ => value = Some(self.expr(q)),
                    }
                }
                Stmt { target, value: value.expect("statement value"), body, span: ssp }
            })
            .collect();
        Block { stmts, span: sp }
    }

    fn type_expr(&mut self, p: Pair<'_, Rule>) -> TypeExpr {
        let sp = span(&p);
        let mut it = p.into_inner();
        let name = ident(it.next().expect("type name"));
        // `T[...]`: a shape, possibly empty (`T[]`, variable length).
        let dims = it.next().map(|shape| {
            shape
                .into_inner()
                .flat_map(|dims| dims.into_inner())
                .map(|dim| {
                    let inner = dim.into_inner().next().expect("dim");
                    match inner.as_rule() {
                        Rule::int => Dim::Fixed(self.int(&inner), span(&inner)),
                        _ => Dim::Named(ident(inner)),
                    }
                })
                .collect()
        });
        TypeExpr { name, dims, span: sp }
    }

    fn expr(&mut self, p: Pair<'_, Rule>) -> Expr {
        PRATT
            .map_primary(|q| self.primary(q))
            .map_prefix(|op, rhs| {
                let sp = span(&op).to(rhs.span);
                let op = if op.as_rule() == Rule::neg { UnaryOp::Neg } else { UnaryOp::Not };
                Expr { kind: ExprKind::Unary(op, Box::new(rhs)), span: sp }
            })
            .map_infix(|lhs, op, rhs| {
                let op = match op.as_rule() {
                    Rule::or => BinaryOp::Or,
                    Rule::and => BinaryOp::And,
                    Rule::eq => BinaryOp::Eq,
                    Rule::ne => BinaryOp::Ne,
                    Rule::lt => BinaryOp::Lt,
                    Rule::le => BinaryOp::Le,
                    Rule::gt => BinaryOp::Gt,
                    Rule::ge => BinaryOp::Ge,
                    Rule::add => BinaryOp::Add,
                    Rule::sub => BinaryOp::Sub,
                    Rule::mul => BinaryOp::Mul,
                    Rule::div => BinaryOp::Div,
                    Rule::rem => BinaryOp::Rem,
                    other => unreachable!("infix {other:?}"),
                };
                let sp = lhs.span.to(rhs.span);
                Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span: sp }
            })
            .parse(p.into_inner())
    }

    fn primary(&mut self, p: Pair<'_, Rule>) -> Expr {
        let sp = span(&p);
        let kind = match p.as_rule() {
            Rule::expr => return self.expr(p),
            Rule::int => ExprKind::Int(self.int(&p)),
            Rule::float => match p.as_str().replace('_', "").parse::<f64>() {
                Ok(v) if v.is_finite() => ExprKind::Float(v),
                _ => {
                    self.errors.push(super::float_out_of_range(sp));
                    ExprKind::Float(0.0)
                }
            },
            Rule::string => ExprKind::Str(unescape(p.into_inner().next().map_or("", |c| c.as_str()))),
            Rule::boolean => ExprKind::Bool(p.as_str() == "true"),
            Rule::quantity => {
                let mut it = p.into_inner();
                let n = it.next().expect("quantity number");
                let value = self.int(&n);
                let unit = it.next().expect("unit");
                ExprKind::Quantity(value, Ident { name: unit.as_str().to_string(), span: span(&unit) })
            }
            Rule::path => ExprKind::Path(path(p)),
            Rule::list => ExprKind::List(p.into_inner().map(|e| self.expr(e)).collect()),
            Rule::call => {
                let mut it = p.into_inner();
                let callee = path(it.next().expect("callee"));
                let mut args = Vec::new();
                let mut ret = None;
                for q in it {
                    match q.as_rule() {
                        Rule::args => args = self.args(q),
                        _ => ret = Some(self.type_expr(q)),
                    }
                }
                ExprKind::Call { callee, args, ret }
            }
            other => unreachable!("primary {other:?}"),
        };
        Expr { kind, span: sp }
    }

    fn int(&mut self, p: &Pair<'_, Rule>) -> u64 {
        match p.as_str().replace('_', "").parse::<u64>() {
            Ok(v) => v,
            Err(_) => {
                self.errors.push(super::int_out_of_range(span(p)));
                0
            }
        }
    }
}

fn ident(p: Pair<'_, Rule>) -> Ident {
    Ident { name: p.as_str().to_string(), span: span(&p) }
}

fn path(p: Pair<'_, Rule>) -> Path {
    let sp = span(&p);
    Path { segments: p.into_inner().map(ident).collect(), span: sp }
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}
