//! Checking a pipeline's declarations: parameters (`name: type = default`), the schema,
//! `budget`, `threads`, `device` and `extern fn` signatures. Produces [`Declarations`] with every
//! type resolved and every default evaluated, and a diagnostic for each problem.
//!
//! Codes: E0100 duplicate pipeline, E0101 duplicate parameter, E0102 unknown parameter
//! type, E0103 default of the wrong type, E0104 not a constant, E0105 shaped parameter,
//! E0106 constant arithmetic fails, E0110 duplicate feature, E0111 unknown dtype, E0112
//! bad dimension, E0113 feature default does not fit, E0114 repeated declaration, E0116
//! unknown device, E0117 bad budget, E0118 duplicate extern fn, E0119 a pipeline,
//! parameter or field named by a reserved word of Rust (`self`, `Self`, `crate`, `super`),
//! E0121 a `threads` that is not a whole number of threads.

use std::collections::HashMap;

use crate::ast::{self, BinaryOp, ExprKind, Span, UnaryOp};
use crate::diagnostic::Diagnostic;
use crate::ir::types::{DType, Dim, ParamType, Shape, TensorType, Value};

pub use crate::ir::decls::{Declarations, Device, ExternDecl, FieldDecl, ParamDecl};

/// Checks the declarations of every pipeline of a file.
pub fn check_declarations(file: &ast::File) -> (Vec<Declarations>, Vec<Diagnostic>) {
    let mut cx = Cx { diags: Vec::new() };
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for p in &file.pipelines {
        if let Some(first) = seen.insert(&p.name.name, p.name.span) {
            cx.diags.push(
                Diagnostic::error(
                    "E0100",
                    format!("pipeline `{}` is defined twice", p.name),
                    p.name.span,
                    "redefined here",
                )
                .with_label(first, "first defined here")
                .with_help("give each pipeline of a file its own name"),
            );
        }
    }
    for p in &file.pipelines {
        cx.diags.extend(reserved(&p.name, "pipeline"));
    }
    let decls = file.pipelines.iter().map(|p| cx.pipeline(p)).collect();
    (decls, cx.diags)
}

/// The words of Rust that no identifier can be, not even a raw one (`r#self` is not
/// Rust, nor `r#_`): a pipeline, parameter or field so named could not be generated.
const RESERVED: &[&str] = &["self", "Self", "crate", "super", "_"];

/// E0119 when `name` is one of [`RESERVED`]; `what` names what it names.
pub fn reserved(name: &ast::Ident, what: &str) -> Option<Diagnostic> {
    RESERVED.contains(&name.name.as_str()).then(|| {
        Diagnostic::error(
            "E0119",
            format!("`{}` cannot name a {what}: it is a reserved word of Rust", name.name),
            name.span,
            "reserved word",
        )
        .with_note("a pipeline compiles to Rust, where `self`, `Self`, `crate` and `super` name nothing else")
        .with_help(format!("rename the {what}, e.g. `{}_`", name.name.to_lowercase()))
    })
}

struct Cx {
    diags: Vec<Diagnostic>,
}

impl Cx {
    fn pipeline(&mut self, p: &ast::Pipeline) -> Declarations {
        let mut d = Declarations { name: p.name.name.clone(), span: p.name.span, ..Declarations::default() };
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for param in &p.params {
            if let Some(first) = seen.insert(&param.name.name, param.name.span) {
                self.diags.push(
                    Diagnostic::error(
                        "E0101",
                        format!("parameter `{}` is declared twice", param.name),
                        param.name.span,
                        "declared again here",
                    )
                    .with_label(first, "first declared here"),
                );
                continue;
            }
            self.diags.extend(reserved(&param.name, "parameter"));
            if let Some(decl) = self.param(param) {
                d.params.push(decl);
            }
        }
        let (mut schema, mut budget, mut device) = (None::<Span>, None::<Span>, None::<Span>);
        let mut threads = None::<Span>;
        let mut externs: HashMap<String, Span> = HashMap::new();
        for item in &p.items {
            match item {
                ast::Item::Schema(s) => {
                    if self.once("schema", &mut schema, s.span) {
                        d.schema = self.schema(s);
                    }
                }
                ast::Item::Budget(b) => {
                    if self.once("budget", &mut budget, b.span) {
                        d.budget = self.budget(b);
                        d.budget_span = b.value.span;
                    }
                }
                ast::Item::Threads(t) => {
                    if self.once("threads", &mut threads, t.span) {
                        d.threads = self.threads(t);
                    }
                }
                ast::Item::Device(dev) => {
                    if self.once("device", &mut device, dev.span) {
                        d.device = self.device(dev);
                    }
                }
                ast::Item::ExternFn(e) => {
                    let path = e.path.to_string();
                    if let Some(first) = externs.insert(path.clone(), e.path.span) {
                        self.diags.push(
                            Diagnostic::error(
                                "E0118",
                                format!("`extern fn {path}` is declared twice"),
                                e.path.span,
                                "declared again here",
                            )
                            .with_label(first, "first declared here"),
                        );
                    } else if let Some(x) = self.extern_fn(e) {
                        d.externs.push(x);
                    }
                }
                ast::Item::Stage(_) => {}
            }
        }
        d
    }

    /// True the first time a once-only item (`schema`, `budget`, `threads`, `device`) is seen.
    fn once(&mut self, what: &str, first: &mut Option<Span>, span: Span) -> bool {
        match first {
            None => {
                *first = Some(span);
                true
            }
            Some(f) => {
                self.diags.push(
                    Diagnostic::error(
                        "E0114",
                        format!("more than one `{what}` in a pipeline"),
                        span,
                        "again here",
                    )
                    .with_label(*f, "first here")
                    .with_help(format!("merge them into one `{what}`")),
                );
                false
            }
        }
    }

    fn param(&mut self, p: &ast::Param) -> Option<ParamDecl> {
        let Some(ty) = ParamType::from_name(&p.ty.name.name) else {
            let names: Vec<&str> = ParamType::ALL.iter().map(|t| t.name()).collect();
            self.diags.push(unknown("E0102", "parameter type", &p.ty.name, &names));
            return None;
        };
        if p.ty.dims.is_some() {
            self.diags.push(
                Diagnostic::error(
                    "E0105",
                    "parameters are scalars",
                    p.ty.span,
                    "a shape is not allowed here",
                )
                .with_help(format!("write `{}: {ty}`", p.name)),
            );
            // One mistake, one error: the default is not checked against a wrong type.
            return None;
        }
        let default = p.default.as_ref().and_then(|e| {
            let v = self.eval(e)?;
            match fit_param(ty, v) {
                Ok(v) => Some(v),
                Err(why) => {
                    self.diags.push(
                        Diagnostic::error(
                            "E0103",
                            format!("the default of `{}` is not a `{ty}`", p.name),
                            e.span,
                            why,
                        )
                        .with_label(p.ty.span, format!("`{}` is declared `{ty}` here", p.name)),
                    );
                    None
                }
            }
        });
        Some(ParamDecl { name: p.name.name.clone(), ty, default, span: p.span })
    }

    fn schema(&mut self, s: &ast::Schema) -> Vec<FieldDecl> {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let mut out = Vec::new();
        for f in &s.fields {
            if let Some(first) = seen.insert(&f.name.name, f.name.span) {
                self.diags.push(
                    Diagnostic::error(
                        "E0110",
                        format!("feature `{}` is declared twice", f.name),
                        f.name.span,
                        "again here",
                    )
                    .with_label(first, "first declared here"),
                );
                continue;
            }
            self.diags.extend(reserved(&f.name, "field"));
            if f.sequence {
                if let Some(ty) = self.feature_list(f) {
                    out.push(FieldDecl {
                        name: f.name.name.clone(),
                        ty,
                        default: None,
                        sequence: true,
                        span: f.span,
                    });
                }
                continue;
            }
            let Some(ty) = self.tensor_type(&f.ty, false) else { continue };
            let default = f.default.as_ref().and_then(|e| {
                let v = self.eval(e)?;
                match fit_feature(&ty, v) {
                    Ok(v) => Some(v),
                    Err(why) => {
                        self.diags.push(
                            Diagnostic::error(
                                "E0113",
                                format!("the default of feature `{}` does not fit `{ty}`", f.name),
                                e.span,
                                why,
                            )
                            .with_label(f.ty.span, "declared here"),
                        );
                        None
                    }
                }
            });
            out.push(FieldDecl { name: f.name.name.clone(), ty, default, sequence: false, span: f.span });
        }
        out
    }

    /// The type of a feature list (`sequence name: T[]`, one value a step, or
    /// `T[steps, d, ...]`, a named number of steps of fixed shape `[d, ...]`), as
    /// `tf.io.FixedLenSequenceFeature` types its steps. Numbers only, and no default.
    fn feature_list(&mut self, f: &ast::Field) -> Option<TensorType> {
        let ty = self.tensor_type(&f.ty, true)?;
        if let Some(d) = &f.default {
            self.diags.push(
                Diagnostic::error(
                    "E0381",
                    format!("feature list `{}` has no default", f.name),
                    d.span,
                    "a default here",
                )
                .with_help("a missing feature list has no steps; remove the default"),
            );
        }
        if matches!(ty.dtype, DType::Bytes | DType::Str) {
            self.diags.push(
                Diagnostic::error(
                    "E0382",
                    format!("feature lists of `{}` are not supported yet", ty.dtype),
                    f.ty.span,
                    "a list of byte strings per step",
                )
                .with_help("feature lists of numbers are: `i64[]`, `f32[steps, 3]`; declare the text as a context feature"),
            );
            return None;
        }
        let stepwise = match &ty.shape {
            Shape::Var => true,
            Shape::Dims(d) => match d.split_first() {
                Some((Dim::Named(_), rest)) => {
                    rest.iter().all(|x| matches!(x, Dim::Fixed(_)))
                        && Shape::Dims(rest.to_vec()).fixed_len().is_some()
                }
                _ => false,
            },
        };
        if !stepwise {
            let dt = ty.dtype;
            self.diags.push(
                Diagnostic::error(
                    "E0380",
                    format!("feature list `{}` needs a variable number of steps, not `{ty}`", f.name),
                    f.ty.span,
                    "the first dimension is the steps",
                )
                .with_help(format!(
                    "write `{dt}[]` (one value a step) or `{dt}[steps, N]` (N values a step); only the first dimension is named"
                )),
            );
            return None;
        }
        Some(ty)
    }

    /// Resolves a dtype with an optional shape. Named dimensions are allowed in `extern fn`
    /// signatures (`f32[H, W, 3]`), not in the schema, whose features have fixed shapes.
    fn tensor_type(&mut self, t: &ast::TypeExpr, named_dims: bool) -> Option<TensorType> {
        let Some(dtype) = DType::from_name(&t.name.name) else {
            let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
            self.diags.push(unknown("E0111", "dtype", &t.name, &names));
            return None;
        };
        let shape = match &t.dims {
            None => Shape::scalar(),
            Some(dims) if dims.is_empty() => Shape::Var,
            Some(dims) => {
                let mut out = Vec::new();
                for d in dims {
                    match d {
                        ast::Dim::Fixed(0, span) => {
                            self.diags.push(
                                Diagnostic::error(
                                    "E0112",
                                    "a dimension of size zero",
                                    *span,
                                    "this dimension holds no values",
                                )
                                .with_help(
                                    "dimensions are at least 1; write `[]` for a variable-length feature",
                                ),
                            );
                            return None;
                        }
                        ast::Dim::Fixed(n, _) => out.push(Dim::Fixed(*n)),
                        ast::Dim::Named(id) if named_dims => out.push(Dim::Named(id.name.clone())),
                        ast::Dim::Named(id) => {
                            self.diags.push(
                                Diagnostic::error(
                                    "E0112",
                                    format!("feature shapes are fixed: `{}` is not a number", id.name),
                                    id.span,
                                    "a named dimension",
                                )
                                .with_help("write the size, or `[]` for a variable-length feature"),
                            );
                            return None;
                        }
                    }
                }
                let shape = Shape::Dims(out);
                if !named_dims && shape.fixed_len().is_none() {
                    self.diags.push(Diagnostic::error(
                        "E0112",
                        "the shape holds more values than fit in 64 bits",
                        t.span,
                        "too large",
                    ));
                    return None;
                }
                shape
            }
        };
        Some(TensorType { dtype, shape })
    }

    fn budget(&mut self, b: &ast::Budget) -> Option<u64> {
        match self.eval(&b.value)? {
            Value::Bytes(0) => {
                self.diags.push(Diagnostic::error(
                    "E0117",
                    "a memory budget of zero bytes",
                    b.value.span,
                    "nothing fits in this",
                ));
                None
            }
            Value::Bytes(n) => Some(n),
            other => {
                self.diags.push(
                    Diagnostic::error(
                        "E0117",
                        "a budget is an amount of memory",
                        b.value.span,
                        format!("found `{other}`"),
                    )
                    .with_help("write it with a unit, e.g. `budget 512 MiB;`"),
                );
                None
            }
        }
    }

    /// `threads N;`: a whole number of threads, at least 1.
    fn threads(&mut self, t: &ast::Threads) -> Option<u32> {
        let found = match self.eval(&t.value)? {
            Value::Int(n) if n >= 1 => match u32::try_from(n) {
                Ok(n) => return Some(n),
                Err(_) => format!("{n} threads: more than any machine has"),
            },
            Value::Int(n) => format!("{n} threads: none could run"),
            _ => format!("found `{}`", t.value),
        };
        self.diags.push(
            Diagnostic::error(
                "E0121",
                "a thread budget is a whole number of threads, at least 1",
                t.value.span,
                found,
            )
            .with_help("write the threads the pipeline may keep busy at once, e.g. `threads 4;`"),
        );
        None
    }

    fn device(&mut self, d: &ast::Device) -> Device {
        match d.target.name.as_str() {
            "cpu" => Device::Cpu,
            "cuda" => Device::Cuda,
            name => {
                let mut diag = unknown("E0116", "device", &d.target, &["cpu", "cuda"]);
                if matches!(name, "gpu" | "GPU" | "nvidia") {
                    diag.help = Some("a GPU target is written `cuda`".into());
                }
                self.diags.push(diag);
                Device::Cpu
            }
        }
    }

    fn extern_fn(&mut self, e: &ast::ExternFn) -> Option<ExternDecl> {
        let mut params = Vec::new();
        let mut ok = true;
        for p in &e.params {
            match self.tensor_type(&p.ty, true) {
                Some(t) => params.push((p.name.name.clone(), t)),
                None => ok = false,
            }
        }
        let ret = self.tensor_type(&e.ret, true);
        (ok && ret.is_some()).then(|| ExternDecl {
            path: e.path.to_string(),
            params,
            ret: ret.expect("checked"),
            span: e.span,
        })
    }

    /// Evaluates a constant expression; reports why not and returns `None` otherwise.
    fn eval(&mut self, e: &ast::Expr) -> Option<Value> {
        let v = match &e.kind {
            ExprKind::Int(n) => i64::try_from(*n).map_or(Value::UInt(*n), Value::Int),
            ExprKind::Float(x) => Value::Float(*x),
            ExprKind::Str(s) => Value::Str(s.clone()),
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::Quantity(n, unit) => {
                let scale: u64 = match unit.name.as_str() {
                    "B" => 1,
                    "KB" => 1_000,
                    "MB" => 1_000_000,
                    "GB" => 1_000_000_000,
                    "TB" => 1_000_000_000_000,
                    "KiB" => 1 << 10,
                    "MiB" => 1 << 20,
                    "GiB" => 1 << 30,
                    _ => 1 << 40,
                };
                match n.checked_mul(scale) {
                    Some(b) => Value::Bytes(b),
                    None => {
                        self.diags.push(Diagnostic::error(
                            "E0106",
                            "amount too large",
                            e.span,
                            "more than 2^64 bytes",
                        ));
                        return None;
                    }
                }
            }
            ExprKind::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.eval(item)?);
                }
                Value::List(out)
            }
            ExprKind::Unary(UnaryOp::Neg, inner) => match self.eval(inner)? {
                Value::Int(n) => Value::Int(-n),
                Value::UInt(n) if n == 1 << 63 => Value::Int(i64::MIN),
                Value::Float(x) => Value::Float(-x),
                other => {
                    self.diags.push(Diagnostic::error(
                        "E0106",
                        format!("cannot negate `{other}`"),
                        e.span,
                        "here",
                    ));
                    return None;
                }
            },
            ExprKind::Unary(UnaryOp::Not, inner) => match self.eval(inner)? {
                Value::Bool(b) => Value::Bool(!b),
                other => {
                    self.diags.push(Diagnostic::error(
                        "E0106",
                        format!("`!` needs a bool, found `{other}`"),
                        e.span,
                        "here",
                    ));
                    return None;
                }
            },
            ExprKind::Binary(op, l, r) => {
                let (l, r) = (self.eval(l)?, self.eval(r)?);
                match arith(*op, &l, &r) {
                    Ok(v) => v,
                    Err(why) => {
                        self.diags.push(Diagnostic::error("E0106", why, e.span, "in this constant"));
                        return None;
                    }
                }
            }
            ExprKind::Path(_) | ExprKind::Call { .. } | ExprKind::Rust(_) => {
                self.diags.push(
                    Diagnostic::error(
                        "E0104",
                        "a default must be a constant",
                        e.span,
                        "not known at compile time",
                    )
                    .with_help("use a literal, a list, a quantity such as `64 MiB`, or arithmetic on them"),
                );
                return None;
            }
        };
        Some(v)
    }
}

/// Constant arithmetic on numbers (integers stay integers, checked; any float makes a
/// float) and comparisons.
fn arith(op: BinaryOp, l: &Value, r: &Value) -> Result<Value, String> {
    use BinaryOp::*;
    let as_f = |v: &Value| match v {
        Value::Int(n) => Some(*n as f64),
        Value::UInt(n) => Some(*n as f64),
        Value::Float(x) => Some(*x),
        _ => None,
    };
    match (l, r) {
        (Value::Int(a), Value::Int(b)) if matches!(op, Add | Sub | Mul | Div | Rem) => {
            let r = match op {
                Add => a.checked_add(*b),
                Sub => a.checked_sub(*b),
                Mul => a.checked_mul(*b),
                Div => a.checked_div(*b),
                _ => a.checked_rem(*b),
            };
            r.map(Value::Int).ok_or_else(|| format!("`{a} {} {b}` overflows or divides by zero", op.symbol()))
        }
        (Value::Bool(a), Value::Bool(b)) if matches!(op, And | Or) => {
            Ok(Value::Bool(if op == And { *a && *b } else { *a || *b }))
        }
        _ => match (as_f(l), as_f(r)) {
            (Some(a), Some(b)) => {
                let v = match op {
                    Add => a + b,
                    Sub => a - b,
                    Mul => a * b,
                    Div => a / b,
                    Rem => a % b,
                    Eq => return Ok(Value::Bool(a == b)),
                    Ne => return Ok(Value::Bool(a != b)),
                    Lt => return Ok(Value::Bool(a < b)),
                    Le => return Ok(Value::Bool(a <= b)),
                    Gt => return Ok(Value::Bool(a > b)),
                    Ge => return Ok(Value::Bool(a >= b)),
                    And | Or => return Err(format!("`{}` needs bools", op.symbol())),
                };
                if v.is_finite() {
                    Ok(Value::Float(v))
                } else {
                    Err(format!("`{l} {} {r}` is not finite", op.symbol()))
                }
            }
            _ => Err(format!("cannot compute `{l} {} {r}`", op.symbol())),
        },
    }
}

/// Converts a default to a parameter's type, or says why it does not fit.
fn fit_param(ty: ParamType, v: Value) -> Result<Value, String> {
    let int = |v: &Value| match v {
        Value::Int(n) => Some(i128::from(*n)),
        Value::UInt(n) => Some(i128::from(*n)),
        _ => None,
    };
    let fits = match (ty, &v) {
        (ParamType::Glob | ParamType::Path | ParamType::Str, Value::Str(_)) => true,
        (ParamType::Bool, Value::Bool(_)) => true,
        (ParamType::U32, _) => int(&v).is_some_and(|n| (0..=i128::from(u32::MAX)).contains(&n)),
        (ParamType::U64, _) => int(&v).is_some_and(|n| n >= 0),
        (ParamType::I64, Value::Int(_)) => true,
        (ParamType::F64, Value::Float(_)) => true,
        (ParamType::F64, Value::Int(n)) => return Ok(Value::Float(*n as f64)),
        (ParamType::Size, Value::Bytes(_)) => true,
        _ => false,
    };
    if fits {
        return Ok(v);
    }
    Err(match (ty, int(&v)) {
        (ParamType::U32 | ParamType::U64, Some(n)) if n < 0 => format!("`{n}` is negative"),
        (ParamType::U32, Some(n)) => format!("`{n}` does not fit in 32 bits"),
        (ParamType::Size, _) => format!("`{v}` has no unit: write e.g. `64 MiB`"),
        _ => format!("`{v}` is not a `{ty}`"),
    })
}

/// Checks a feature default against the feature's dtype and shape: a scalar for a scalar
/// feature, exactly the shape's number of values (flat or nested lists) for a fixed shape,
/// any number for `[]`.
fn fit_feature(ty: &TensorType, v: Value) -> Result<Value, String> {
    let mut flat = Vec::new();
    flatten(v, &mut flat);
    for x in &flat {
        let ok = match (ty.dtype, x) {
            (DType::Bool, Value::Bool(_)) => true,
            (DType::U8, Value::Int(n)) => (0..=255).contains(n),
            (DType::I32, Value::Int(n)) => i32::try_from(*n).is_ok(),
            (DType::U32, Value::Int(n)) => u32::try_from(*n).is_ok(),
            (DType::I64, Value::Int(_)) => true,
            (DType::U64, Value::Int(n)) => *n >= 0,
            (DType::U64, Value::UInt(_)) => true,
            (d, Value::Float(_) | Value::Int(_)) if d.is_float() => true,
            (DType::Bytes | DType::Str, Value::Str(_)) => true,
            _ => false,
        };
        if !ok {
            return Err(format!("`{x}` does not fit dtype `{}`", ty.dtype));
        }
    }
    match ty.shape.fixed_len() {
        Some(n) if flat.len() as u64 != n => {
            Err(format!("{} value(s) given, the shape holds {n}", flat.len()))
        }
        _ => Ok(Value::List(flat)),
    }
}

fn flatten(v: Value, out: &mut Vec<Value>) {
    match v {
        Value::List(items) => items.into_iter().for_each(|i| flatten(i, out)),
        other => out.push(other),
    }
}

/// "unknown WHAT `name`", with the closest known name as help.
fn unknown(code: &'static str, what: &str, name: &ast::Ident, known: &[&str]) -> Diagnostic {
    let d = Diagnostic::error(
        code,
        format!("unknown {what} `{}`", name.name),
        name.span,
        format!("not a {what}"),
    );
    match closest(&name.name, known) {
        Some(c) => d.with_help(format!("did you mean `{c}`?")),
        None => d.with_note(format!("known: {}", known.join(", "))),
    }
}

/// The closest known name within edit distance 2 of `name` (1 for names of 1 or 2
/// characters).
pub(crate) fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let limit = if name.chars().count() <= 2 { 1 } else { 2 };
    known.iter().map(|k| (edit_distance(name, k), *k)).filter(|(d, _)| *d <= limit).min().map(|(_, k)| k)
}

/// Edit distance counting an adjacent transposition as one edit (optimal string
/// alignment), so `f23` is one edit from `f32`.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decls(src: &str) -> (Vec<Declarations>, Vec<Diagnostic>) {
        check_declarations(&crate::syntax::parse(src).unwrap())
    }

    #[test]
    fn resolves_types_and_evaluates_defaults() {
        let (d, diags) = decls(
            "pipeline p(files: glob = \"a/*\", n: u32 = 4 * 64, lr: f64 = 1, mem: size = 2 GiB) {
                 budget 512 MiB; device cuda;
                 schema { x: f32[2, 2] = [[0.5, 1], [2, 3]], tags: bytes[], label: i64 = -1 }
                 extern fn m::f(x: f32[H, W, 3]) -> f32[3, H, W];
             }",
        );
        assert!(diags.is_empty(), "{diags:?}");
        let d = &d[0];
        assert_eq!(d.params[1].default, Some(Value::Int(256)));
        assert_eq!(d.params[2].default, Some(Value::Float(1.0)));
        assert_eq!(d.params[3].default, Some(Value::Bytes(2 << 30)));
        assert_eq!((d.budget, d.device), (Some(512 << 20), Device::Cuda));
        assert_eq!(d.schema[0].ty.to_string(), "f32[2, 2]");
        assert_eq!(d.schema[0].default.as_ref().map(ToString::to_string).as_deref(), Some("[0.5, 1, 2, 3]"));
        assert_eq!(d.schema[1].ty.shape, Shape::Var);
        assert_eq!(d.externs[0].ret.to_string(), "f32[3, H, W]");
    }

    #[test]
    fn suggestions_come_from_edit_distance() {
        assert_eq!(closest("f23", &["f32", "f64"]), Some("f32"));
        assert_eq!(closest("int", &["i32", "i64", "bytes"]), Some("i32"));
        assert_eq!(closest("tensor", &["f32", "bytes"]), None);
        assert_eq!(closest("cdua", &["cpu", "cuda"]), Some("cuda"));
    }

    #[test]
    fn threads_is_a_whole_number_and_still_a_name() {
        let (d, diags) =
            decls("pipeline p(threads: u32 = 2) { threads 4; schema { threads: i64 } range(3); }");
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(d[0].threads, Some(4));
        assert_eq!(d[0].params[0].name, "threads");
        for (bad, found) in [("0", "none could run"), ("2 MiB", "found `2 MiB`"), ("1.5", "found `1.5`")] {
            let (_, diags) = decls(&format!("pipeline p() {{ threads {bad}; range(3); }}"));
            let e = diags.iter().find(|d| d.code == "E0121").unwrap_or_else(|| panic!("{bad}: {diags:?}"));
            assert!(e.primary.message.contains(found), "{bad}: {e:?}");
        }
        let (_, diags) = decls("pipeline p() { threads 2; threads 3; range(3); }");
        assert!(!diags.is_empty(), "a second `threads` was accepted");
    }
}
