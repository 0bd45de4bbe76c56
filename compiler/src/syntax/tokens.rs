//! The `pipeline!` front end: the `.pipe` language from Rust tokens, parsed with syn into
//! the same [`ast`](crate::ast) the pest front end builds from text (equal trees, spans
//! aside). Comments are gone by then (rustc drops them), so a `.pipe` file read as a
//! `TokenStream` parses to the file's tree.
//!
//! Spans: every token consumed gets the next index, in reading order, and an AST
//! [`Span`] is a range of those indices; [`SpanMap`] maps an index back to the token's
//! `proc_macro2::Span`, so a diagnostic can be put on the exact tokens it names.
//!
//! Beyond the `.pipe` grammar, the positional argument of `map` and `filter` may be Rust
//! code ([`ExprKind::Rust`]): a closure (`|r| r.label >= 0`, `move |r| ...`), or a function
//! path. A path in `filter(...)` is a Rust function unless it names a field (of the
//! schema, or assigned by a `map` before) or a parameter; in a `map` without a block it is
//! a Rust function unless it is `auto` or a parameter.

use std::cell::RefCell;

use proc_macro2::{Delimiter, Spacing, Span as TokSpan, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};

use crate::ast::*;
use crate::diagnostic::Diagnostic;

/// The words the `.pipe` grammar reserves (never names).
const KEYWORDS: &[&str] = &["pipeline", "schema", "extern", "fn", "budget", "device", "true", "false"];
/// The units of a quantity (`512 MiB`).
const UNITS: &[&str] = &["KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "B"];

/// The token of each index an AST span of the token front end refers to.
#[derive(Debug, Clone, Default)]
pub struct SpanMap {
    /// The span of each token consumed, in reading order.
    pub spans: Vec<TokSpan>,
}

impl SpanMap {
    /// The first and last token of `span` (the call site when it names none).
    pub fn range(&self, span: Span) -> (TokSpan, TokSpan) {
        let at = |i: usize| self.spans.get(i).copied();
        let first = at(span.start).or_else(|| self.spans.last().copied()).unwrap_or_else(TokSpan::call_site);
        let last = if span.end > span.start { at(span.end - 1).unwrap_or(first) } else { first };
        (first, last)
    }

    /// A `syn::Error` covering the tokens of `span` (first..last, on stable too).
    pub fn error(&self, span: Span, message: impl std::fmt::Display) -> syn::Error {
        let (first, last) = self.range(span);
        let tokens: TokenStream = [
            TokenTree::Ident(proc_macro2::Ident::new("x", first)),
            TokenTree::Ident(proc_macro2::Ident::new("x", last)),
        ]
        .into_iter()
        .collect();
        syn::Error::new_spanned(tokens, message)
    }
}

/// Parses the `.pipe` language from Rust tokens: the file (or every diagnostic, a syntax
/// error as one `E0001`, literal errors `E0002`), and the token of each span index.
pub fn parse_tokens(tokens: TokenStream) -> (Result<File, Vec<Diagnostic>>, SpanMap) {
    let p = P { spans: RefCell::new(Vec::new()), errors: RefCell::new(Vec::new()) };
    let result = (|input: ParseStream<'_>| p.file(input)).parse2(tokens);
    let mut errors = p.errors.into_inner();
    let mut spans = p.spans.into_inner();
    let file = match result {
        Ok(file) => Some(file),
        Err(e) => {
            spans.push(e.span());
            let i = spans.len() - 1;
            errors
                .insert(0, Diagnostic::error("E0001", e.to_string(), Span::new(i, i + 1), "unexpected here"));
            None
        }
    };
    let map = SpanMap { spans };
    match file {
        Some(mut file) if errors.is_empty() => {
            for pipeline in &mut file.pipelines {
                rust_paths(pipeline, &map);
            }
            (Ok(file), map)
        }
        _ => (Err(errors), map),
    }
}

/// The parser state: the spans of the tokens consumed so far and the literal errors.
struct P {
    spans: RefCell<Vec<TokSpan>>,
    errors: RefCell<Vec<Diagnostic>>,
}

type R<T> = syn::Result<T>;

/// Whether the next tokens are the punctuation `s` (joined).
fn peek_punct(input: ParseStream<'_>, s: &str) -> bool {
    let mut c = input.cursor();
    let n = s.chars().count();
    for (i, ch) in s.chars().enumerate() {
        match c.punct() {
            Some((p, rest)) if p.as_char() == ch && (i + 1 == n || p.spacing() == Spacing::Joint) => c = rest,
            _ => return false,
        }
    }
    true
}

/// Whether the next token is the word `kw`.
fn peek_word(input: ParseStream<'_>, kw: &str) -> bool {
    input.cursor().ident().is_some_and(|(i, _)| i == kw)
}

/// Whether the next tokens are `threads` as a stage's name (`threads;`, `threads { ... }`):
/// the grammar's `threads` item takes an expression after the word, as `grammar.pest`.
fn peek_threads_stage(input: ParseStream<'_>) -> bool {
    let Some((_, rest)) = input.cursor().ident() else { return false };
    rest.punct().is_some_and(|(p, _)| p.as_char() == ';') || rest.group(Delimiter::Brace).is_some()
}

/// "expected WHAT, found ..." at the next token.
fn expected(input: ParseStream<'_>, what: &str) -> syn::Error {
    let found = match input.cursor().token_tree() {
        None => "the end of the input".to_string(),
        Some((TokenTree::Group(g), _)) => match g.delimiter() {
            Delimiter::Parenthesis => "`(`".into(),
            Delimiter::Bracket => "`[`".into(),
            Delimiter::Brace => "`{`".into(),
            Delimiter::None => "a group".into(),
        },
        Some((t, _)) => format!("`{t}`"),
    };
    input.error(format!("expected {what}, found {found}"))
}

impl P {
    fn mark(&self) -> usize {
        self.spans.borrow().len()
    }

    fn push(&self, s: TokSpan) -> Span {
        let mut v = self.spans.borrow_mut();
        v.push(s);
        Span::new(v.len() - 1, v.len())
    }

    fn since(&self, start: usize) -> Span {
        Span::new(start, self.mark())
    }

    /// Consumes the punctuation `s`.
    fn punct(&self, input: ParseStream<'_>, s: &str) -> R<Span> {
        if !peek_punct(input, s) {
            return Err(expected(input, &format!("`{s}`")));
        }
        let start = self.mark();
        input.step(|c| {
            let mut c = *c;
            for _ in s.chars() {
                let (p, rest) = c.punct().expect("peeked");
                self.push(p.span());
                c = rest;
            }
            Ok(((), c))
        })?;
        Ok(self.since(start))
    }

    fn word(&self, input: ParseStream<'_>, kw: &str) -> R<Span> {
        if !peek_word(input, kw) {
            return Err(expected(input, &format!("`{kw}`")));
        }
        let i = input.call(syn::Ident::parse_any)?;
        Ok(self.push(i.span()))
    }

    fn ident(&self, input: ParseStream<'_>) -> R<Ident> {
        let is_name =
            input.cursor().ident().is_some_and(|(i, _)| !KEYWORDS.contains(&i.to_string().as_str()));
        if !is_name {
            return Err(expected(input, "an identifier"));
        }
        let i = input.call(syn::Ident::parse_any)?;
        Ok(Ident { name: i.to_string(), span: self.push(i.span()) })
    }

    /// The contents of the next group, delimited by `d`, parsed by `f` to the end.
    fn group<T>(
        &self,
        input: ParseStream<'_>,
        d: Delimiter,
        f: impl FnOnce(ParseStream<'_>) -> R<T>,
    ) -> R<T> {
        let (content, span) = match d {
            Delimiter::Parenthesis => {
                let content;
                let p = syn::parenthesized!(content in input);
                (content, p.span)
            }
            Delimiter::Bracket => {
                let content;
                let b = syn::bracketed!(content in input);
                (content, b.span)
            }
            _ => {
                let content;
                let b = syn::braced!(content in input);
                (content, b.span)
            }
        };
        self.push(span.open());
        let out = f(&content)?;
        if !content.is_empty() {
            return Err(expected(&content, "`,` or the end of the group"));
        }
        self.push(span.close());
        Ok(out)
    }

    fn peek_group(input: ParseStream<'_>, d: Delimiter) -> bool {
        input.cursor().group(d).is_some()
    }

    /// `item, item, ...` with an optional trailing comma, to the end of `input`.
    fn list<T>(&self, input: ParseStream<'_>, mut f: impl FnMut(ParseStream<'_>) -> R<T>) -> R<Vec<T>> {
        let mut out = Vec::new();
        while !input.is_empty() {
            out.push(f(input)?);
            if input.is_empty() {
                break;
            }
            self.punct(input, ",")?;
        }
        Ok(out)
    }

    fn file(&self, input: ParseStream<'_>) -> R<File> {
        let mut pipelines = Vec::new();
        while !input.is_empty() {
            pipelines.push(self.pipeline(input)?);
        }
        Ok(File { pipelines })
    }

    fn pipeline(&self, input: ParseStream<'_>) -> R<Pipeline> {
        let start = self.mark();
        self.word(input, "pipeline")?;
        let name = self.ident(input)?;
        let params = self.group(input, Delimiter::Parenthesis, |c| self.list(c, |c| self.param(c)))?;
        let items = self.group(input, Delimiter::Brace, |c| {
            let mut items = Vec::new();
            while !c.is_empty() {
                items.push(self.item(c)?);
            }
            Ok(items)
        })?;
        Ok(Pipeline { name, params, items, span: self.since(start) })
    }

    fn param(&self, input: ParseStream<'_>) -> R<Param> {
        let start = self.mark();
        let name = self.ident(input)?;
        self.punct(input, ":")?;
        let ty = self.type_expr(input)?;
        let default = if peek_punct(input, "=") {
            self.punct(input, "=")?;
            Some(self.expr(input)?)
        } else {
            None
        };
        Ok(Param { name, ty, default, span: self.since(start) })
    }

    fn item(&self, input: ParseStream<'_>) -> R<Item> {
        let start = self.mark();
        if peek_word(input, "schema") {
            self.word(input, "schema")?;
            let fields = self.group(input, Delimiter::Brace, |c| {
                self.list(c, |c| {
                    let start = self.mark();
                    // `sequence name: ...` (a field called `sequence` is `sequence: ...`).
                    let sequence = peek_word(c, "sequence")
                        && c.cursor().ident().and_then(|(_, rest)| rest.ident()).is_some();
                    if sequence {
                        self.word(c, "sequence")?;
                    }
                    let name = self.ident(c)?;
                    self.punct(c, ":")?;
                    let ty = self.type_expr(c)?;
                    let default = if peek_punct(c, "=") {
                        self.punct(c, "=")?;
                        Some(self.expr(c)?)
                    } else {
                        None
                    };
                    Ok(Field { name, ty, default, sequence, span: self.since(start) })
                })
            })?;
            return Ok(Item::Schema(Schema { fields, span: self.since(start) }));
        }
        if peek_word(input, "extern") {
            self.word(input, "extern")?;
            self.word(input, "fn")?;
            let path = self.path(input)?;
            let params = self.group(input, Delimiter::Parenthesis, |c| {
                self.list(c, |c| {
                    let start = self.mark();
                    let name = self.ident(c)?;
                    self.punct(c, ":")?;
                    let ty = self.type_expr(c)?;
                    Ok(FnParam { name, ty, span: self.since(start) })
                })
            })?;
            self.punct(input, "->")?;
            let ret = self.type_expr(input)?;
            self.punct(input, ";")?;
            return Ok(Item::ExternFn(ExternFn { path, params, ret, span: self.since(start) }));
        }
        if peek_word(input, "budget") {
            self.word(input, "budget")?;
            let value = self.expr(input)?;
            self.punct(input, ";")?;
            return Ok(Item::Budget(Budget { value, span: self.since(start) }));
        }
        // `threads N;` (as the grammar: `threads;` and `threads { ... }` are stages).
        if peek_word(input, "threads") && !peek_threads_stage(input) {
            self.word(input, "threads")?;
            let value = self.expr(input)?;
            self.punct(input, ";")?;
            return Ok(Item::Threads(Threads { value, span: self.since(start) }));
        }
        if peek_word(input, "device") {
            self.word(input, "device")?;
            let target = self.ident(input)?;
            self.punct(input, ";")?;
            return Ok(Item::Device(Device { target, span: self.since(start) }));
        }
        let name = self.ident(input)?;
        let args = if Self::peek_group(input, Delimiter::Parenthesis) {
            self.group(input, Delimiter::Parenthesis, |c| self.args(c))?
        } else {
            Vec::new()
        };
        let body = if Self::peek_group(input, Delimiter::Brace) {
            Some(self.block(input)?)
        } else if peek_punct(input, ";") {
            self.punct(input, ";")?;
            None
        } else {
            return Err(expected(input, "`;` or `{`"));
        };
        Ok(Item::Stage(Stage { name, args, body, span: self.since(start) }))
    }

    fn args(&self, input: ParseStream<'_>) -> R<Vec<Arg>> {
        self.list(input, |c| {
            let start = self.mark();
            let fork = c.fork();
            let named = fork.call(syn::Ident::parse_any).is_ok()
                && peek_punct(&fork, ":")
                && !peek_punct(&fork, "::");
            let name = if named {
                let n = self.ident(c)?;
                self.punct(c, ":")?;
                Some(n)
            } else {
                None
            };
            let value = self.expr(c)?;
            Ok(Arg { name, value, span: self.since(start) })
        })
    }

    fn block(&self, input: ParseStream<'_>) -> R<Block> {
        let start = self.mark();
        let stmts = self.group(input, Delimiter::Brace, |c| {
            let mut stmts = Vec::new();
            while !c.is_empty() {
                let start = self.mark();
                let fork = c.fork();
                let assign = fork.call(syn::Ident::parse_any).is_ok()
                    && peek_punct(&fork, "=")
                    && !peek_punct(&fork, "==");
                let target = if assign {
                    let t = self.ident(c)?;
                    self.punct(c, "=")?;
                    Some(t)
                } else {
                    None
                };
                let value = self.expr(c)?;
                // A stage with its block, in a block of stages (`flat_map`).
                let body = if Self::peek_group(c, Delimiter::Brace) {
                    Some(self.block(c)?)
                } else {
                    self.punct(c, ";")?;
                    None
                };
                stmts.push(Stmt { target, value, body, span: self.since(start) });
            }
            Ok(stmts)
        })?;
        Ok(Block { stmts, span: self.since(start) })
    }

    fn type_expr(&self, input: ParseStream<'_>) -> R<TypeExpr> {
        let start = self.mark();
        let name = self.ident(input)?;
        let dims = if Self::peek_group(input, Delimiter::Bracket) {
            Some(self.group(input, Delimiter::Bracket, |c| {
                self.list(c, |c| {
                    if c.cursor().literal().is_some() {
                        let lit: syn::LitInt = c.parse()?;
                        let sp = self.push(lit.span());
                        Ok(Dim::Fixed(self.int(&lit, sp), sp))
                    } else {
                        Ok(Dim::Named(self.ident(c)?))
                    }
                })
            })?)
        } else {
            None
        };
        Ok(TypeExpr { name, dims, span: self.since(start) })
    }

    fn path(&self, input: ParseStream<'_>) -> R<Path> {
        let start = self.mark();
        let mut segments = vec![self.ident(input)?];
        while peek_punct(input, "::") {
            self.punct(input, "::")?;
            segments.push(self.ident(input)?);
        }
        Ok(Path { segments, span: self.since(start) })
    }

    fn expr(&self, input: ParseStream<'_>) -> R<Expr> {
        self.binary(input, 0)
    }

    /// Precedence climbing, all operators left-associative: `||` < `&&` < comparisons <
    /// `+ -` < `* / %` < prefix operators (as the pest front end's Pratt parser).
    fn binary(&self, input: ParseStream<'_>, min: u8) -> R<Expr> {
        let mut lhs = self.unary(input)?;
        while let Some((op, prec)) = infix(input) {
            if prec < min {
                break;
            }
            self.punct(input, op.symbol())?;
            let rhs = self.binary(input, prec + 1)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span };
        }
        Ok(lhs)
    }

    fn unary(&self, input: ParseStream<'_>) -> R<Expr> {
        let op = if peek_punct(input, "-") && !peek_punct(input, "->") {
            UnaryOp::Neg
        } else if peek_punct(input, "!") && !peek_punct(input, "!=") {
            UnaryOp::Not
        } else {
            return self.primary(input);
        };
        let sp = self.punct(input, if op == UnaryOp::Neg { "-" } else { "!" })?;
        let rhs = self.unary(input)?;
        let span = sp.to(rhs.span);
        Ok(Expr { kind: ExprKind::Unary(op, Box::new(rhs)), span })
    }

    fn primary(&self, input: ParseStream<'_>) -> R<Expr> {
        let start = self.mark();
        // Rust code: a closure (`|r| ...`, `|| ...`, `move |r| ...`).
        if peek_punct(input, "|") || peek_word(input, "move") {
            let e: syn::Expr = input.parse()?;
            let tokens = e.to_token_stream();
            let mut it = tokens.clone().into_iter();
            let first = it.next().map_or_else(TokSpan::call_site, |t| t.span());
            let last = it.last().map_or(first, |t| t.span());
            self.push(first);
            if tokens.clone().into_iter().count() > 1 {
                self.push(last);
            }
            let text = tokens.to_string();
            return Ok(Expr { kind: ExprKind::Rust(RustCode { text, tokens }), span: self.since(start) });
        }
        if Self::peek_group(input, Delimiter::Parenthesis) {
            return self.group(input, Delimiter::Parenthesis, |c| self.expr(c));
        }
        if Self::peek_group(input, Delimiter::Bracket) {
            let items = self.group(input, Delimiter::Bracket, |c| self.list(c, |c| self.expr(c)))?;
            return Ok(Expr { kind: ExprKind::List(items), span: self.since(start) });
        }
        if peek_word(input, "true") || peek_word(input, "false") {
            let b = peek_word(input, "true");
            let i = input.call(syn::Ident::parse_any)?;
            return Ok(Expr { kind: ExprKind::Bool(b), span: self.push(i.span()) });
        }
        if input.cursor().literal().is_some() {
            return self.literal(input);
        }
        if input.cursor().ident().is_none() {
            return Err(expected(input, "an expression"));
        }
        let callee = self.path(input)?;
        if !Self::peek_group(input, Delimiter::Parenthesis) {
            return Ok(Expr { kind: ExprKind::Path(callee), span: self.since(start) });
        }
        let args = self.group(input, Delimiter::Parenthesis, |c| self.args(c))?;
        let ret = if peek_punct(input, "->") {
            self.punct(input, "->")?;
            Some(self.type_expr(input)?)
        } else {
            None
        };
        Ok(Expr { kind: ExprKind::Call { callee, args, ret }, span: self.since(start) })
    }

    fn literal(&self, input: ParseStream<'_>) -> R<Expr> {
        let lit: syn::Lit = input.parse()?;
        let sp = self.push(lit.span());
        let kind = match &lit {
            syn::Lit::Int(n) => {
                let value = self.int(n, sp);
                let unit = if n.suffix().is_empty() {
                    let unit_next =
                        input.cursor().ident().is_some_and(|(i, _)| UNITS.contains(&i.to_string().as_str()));
                    if unit_next {
                        let i = input.call(syn::Ident::parse_any)?;
                        Some(Ident { name: i.to_string(), span: self.push(i.span()) })
                    } else {
                        None
                    }
                } else if UNITS.contains(&n.suffix()) {
                    Some(Ident { name: n.suffix().to_string(), span: sp })
                } else {
                    return Err(syn::Error::new(n.span(), format!("unexpected suffix `{}`", n.suffix())));
                };
                match unit {
                    Some(u) => ExprKind::Quantity(value, u),
                    None => ExprKind::Int(value),
                }
            }
            syn::Lit::Float(x) if x.suffix().is_empty() => match x.base10_parse::<f64>() {
                Ok(v) if v.is_finite() => ExprKind::Float(v),
                _ => {
                    self.errors.borrow_mut().push(super::float_out_of_range(sp));
                    ExprKind::Float(0.0)
                }
            },
            syn::Lit::Str(s) if s.suffix().is_empty() => ExprKind::Str(s.value()),
            syn::Lit::Bool(b) => ExprKind::Bool(b.value),
            other => return Err(syn::Error::new(other.span(), "expected a number, a string or a bool")),
        };
        Ok(Expr { kind, span: self.since(sp.start) })
    }

    fn int(&self, n: &syn::LitInt, sp: Span) -> u64 {
        match n.base10_parse::<u64>() {
            Ok(v) => v,
            Err(_) => {
                self.errors.borrow_mut().push(super::int_out_of_range(sp));
                0
            }
        }
    }
}

/// The infix operator next, with its precedence.
fn infix(input: ParseStream<'_>) -> Option<(BinaryOp, u8)> {
    use BinaryOp::*;
    const OPS: &[(BinaryOp, u8)] = &[
        (Or, 1),
        (And, 2),
        (Eq, 3),
        (Ne, 3),
        (Le, 3),
        (Ge, 3),
        (Lt, 3),
        (Gt, 3),
        (Add, 4),
        (Sub, 4),
        (Mul, 5),
        (Div, 5),
        (Rem, 5),
    ];
    if peek_punct(input, "->") {
        return None;
    }
    OPS.iter().copied().find(|(op, _)| peek_punct(input, op.symbol()))
}

/// Turns the function paths written as `map`/`filter` arguments into Rust code (see the
/// module doc for the rule).
fn rust_paths(p: &mut Pipeline, map: &SpanMap) {
    let params: Vec<String> = p.params.iter().map(|q| q.name.name.clone()).collect();
    let mut fields: Vec<String> = Vec::new();
    for item in &mut p.items {
        match item {
            Item::Schema(s) => fields.extend(s.fields.iter().map(|f| f.name.name.clone())),
            Item::Stage(s) => {
                let is_filter = s.name.name == "filter";
                let is_map = s.name.name == "map" && s.body.is_none();
                for st in s.body.iter().flat_map(|b| &b.stmts) {
                    fields.extend(st.target.iter().map(|t| t.name.clone()));
                }
                if !is_filter && !is_map {
                    continue;
                }
                for a in s.args.iter_mut().filter(|a| a.name.is_none()) {
                    let ExprKind::Path(path) = &a.value.kind else { continue };
                    let single = path.segments.len() == 1;
                    let name = &path.segments[0].name;
                    let data =
                        params.contains(name) || (is_filter && fields.contains(name)) || name == "auto";
                    if single && data {
                        continue;
                    }
                    let tokens = path_tokens(path, map);
                    a.value.kind = ExprKind::Rust(RustCode { text: tokens.to_string(), tokens });
                }
            }
            _ => {}
        }
    }
}

/// The tokens of a path, with their spans.
fn path_tokens(path: &Path, map: &SpanMap) -> TokenStream {
    let mut out = TokenStream::new();
    for (i, seg) in path.segments.iter().enumerate() {
        let (at, _) = map.range(seg.span);
        if i > 0 {
            let mut a = proc_macro2::Punct::new(':', Spacing::Joint);
            a.set_span(at);
            let mut b = proc_macro2::Punct::new(':', Spacing::Alone);
            b.set_span(at);
            out.extend([TokenTree::Punct(a), TokenTree::Punct(b)]);
        }
        out.extend([TokenTree::Ident(proc_macro2::Ident::new(&seg.name, at))]);
    }
    out
}
