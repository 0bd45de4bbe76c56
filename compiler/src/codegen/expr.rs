//! Code for the statements of a `map` block and for `filter` predicates.
//!
//! Each field is a local (`f_<name>`), re-bound by each statement that assigns it. Types
//! come from the typed IR's nodes (sema typed them once); over whole batch columns
//! ([`Scope::columns`]) a value of the element is one column, so its type gains the
//! batch's dimension in front. Arithmetic on tensors is one closure over the values
//! (`Array::map` / `Array::zip`), so `x * 2.0 + 1.0` is a single loop; on scalars it is
//! plain Rust. Integer arithmetic wraps, and integer division by zero is an error, never
//! a panic.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use super::types::{Repr, field_ident, repr, rust, scalar};
use crate::ir::decls::Declarations;
use crate::ir::expr::{BinaryOp, Expr, ExprKind, ExprType, UnaryOp};
use crate::ir::op::Op;
use crate::ir::plan::FieldType;
use crate::ir::types::{DType, Dim, ParamType, Shape, TensorType};

mod fused;

/// The local holding field `name`.
pub fn local(name: &str) -> Ident {
    format_ident!("f_{}", name)
}

/// Generates code for expressions over the fields of one element.
pub struct Scope<'a> {
    /// The fields and their current types.
    pub fields: Vec<FieldType>,
    /// The pipeline's declarations.
    pub decls: &'a Declarations,
    /// The next id of a random operation (unique within the pipeline).
    pub next_rng: &'a mut u64,
    /// The field that may be moved (rather than cloned) when read: the statement's
    /// target, when the statement reads it once.
    movable: Option<String>,
    /// Set when the code uses `?` on an arithmetic error.
    pub fallible: bool,
    /// Set when the code draws random numbers (needs `__epoch`, `__index`).
    pub random: bool,
    /// Whether each field is a whole batch column (`[n, ...]`), not one row's value.
    columns: bool,
}

type R<T> = Result<T, String>;

impl<'a> Scope<'a> {
    /// A scope over the fields of one element.
    pub fn new(fields: Vec<FieldType>, decls: &'a Declarations, next_rng: &'a mut u64) -> Self {
        Scope { fields, decls, next_rng, movable: None, fallible: false, random: false, columns: false }
    }

    /// A scope over whole batch columns: `fields` have their batched types (`[n, ...]`;
    /// byte strings stay as they are).
    pub fn columns(fields: Vec<FieldType>, decls: &'a Declarations, next_rng: &'a mut u64) -> Self {
        Scope { columns: true, ..Scope::new(fields, decls, next_rng) }
    }

    /// The type of `e` here: the node's own type for a row; over columns, the column's.
    fn ty(&self, e: &Expr) -> R<ExprType> {
        if self.columns { self.column_ty(e) } else { Ok(e.ty.clone()) }
    }

    /// The type of `e` over whole columns: every value of the element gains the batch's
    /// dimension. Only elementwise operations work on columns (`cast`, `scale`,
    /// `normalize`, arithmetic on operands of one row shape); anything else is an error,
    /// and the caller maps rows instead.
    fn column_ty(&self, e: &Expr) -> R<ExprType> {
        let tensor = |t: ExprType| match t {
            ExprType::Tensor(t) => Ok(t),
            _ => Err(format!("`{e}` is not a value")),
        };
        match &e.kind {
            ExprKind::Field(name) => {
                let f = self.fields.iter().find(|f| &f.name == name).ok_or(format!("unknown `{name}`"))?;
                f.ty.clone().map(ExprType::Tensor).ok_or_else(|| format!("`{name}` has no type"))
            }
            ExprKind::Op(op) if op.is_elementwise() => {
                let x = tensor(self.column_ty(op.input().expect("a built-in has an input"))?)?;
                for arg in op.args().into_iter().skip(1) {
                    self.column_ty(arg)?;
                }
                let dtype = e.tensor().ok_or("an operation's value is a tensor")?.dtype;
                Ok(ExprType::Tensor(TensorType { dtype, shape: x.shape }))
            }
            ExprKind::Op(op) => Err(format!("`{}` does not work on whole columns", op.name())),
            ExprKind::Unary(_, x) => self.column_ty(x),
            ExprKind::Binary(_, l, r) => {
                let (lt, rt) = (self.column_ty(l)?, self.column_ty(r)?);
                let shapes: Vec<Shape> =
                    [lt.tensor(), rt.tensor()].into_iter().flatten().map(|t| t.shape.clone()).collect();
                if let [a, b] = &shapes[..]
                    && a != b
                    && *a != Shape::scalar()
                    && *b != Shape::scalar()
                {
                    return Err(format!("`{e}` mixes values of different shapes"));
                }
                Ok(match &e.ty {
                    ExprType::Tensor(t) => ExprType::Tensor(TensorType {
                        dtype: t.dtype,
                        shape: shapes
                            .into_iter()
                            .find(|s| *s != Shape::scalar())
                            .unwrap_or_else(Shape::scalar),
                    }),
                    other => other.clone(),
                })
            }
            _ => Ok(e.ty.clone()),
        }
    }

    fn tensor_ty(&self, e: &Expr) -> R<TensorType> {
        match self.ty(e)? {
            ExprType::Tensor(t) => Ok(t),
            _ => Err(format!("`{e}` is not a value")),
        }
    }

    /// `let f_target = value;` for one statement, and the new field type.
    pub fn statement(&mut self, target: &str, e: &Expr, ty: &TensorType) -> R<TokenStream> {
        repr(ty)?;
        self.movable = (e.count_reads(target) == 1).then(|| target.to_string());
        let value = self.value(e)?;
        self.movable = None;
        let name = local(target);
        let annotation = match repr(ty)? {
            Repr::Bytes => quote!(),
            _ => {
                let t = rust(ty);
                quote!(: #t)
            }
        };
        match self.fields.iter_mut().find(|f| f.name == target) {
            Some(f) => f.ty = Some(ty.clone()),
            None => self.fields.push(FieldType { name: target.to_string(), ty: Some(ty.clone()) }),
        }
        Ok(quote!(let #name #annotation = #value;))
    }

    /// A field read as an owned value (moved when allowed, else cloned).
    fn owned_field(&self, name: &str) -> TokenStream {
        let l = local(name);
        let scalar = self
            .fields
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.ty.as_ref())
            .is_some_and(|t| repr(t) == Ok(Repr::Scalar));
        if scalar || self.movable.as_deref() == Some(name) { quote!(#l) } else { quote!(#l.clone()) }
    }

    fn field_path<'e>(&self, e: &'e Expr) -> Option<&'e str> {
        e.field().filter(|n| self.fields.iter().any(|f| f.name == *n))
    }

    /// An owned value of `e` (of the Rust type of its tensor type).
    fn owned(&mut self, e: &Expr) -> R<TokenStream> {
        match self.field_path(e) {
            Some(n) => Ok(self.owned_field(n)),
            None => self.value(e),
        }
    }

    /// A reference to the value of `e`.
    fn borrowed(&mut self, e: &Expr) -> R<TokenStream> {
        match self.field_path(e) {
            Some(n) => {
                let l = local(n);
                Ok(quote!(&#l))
            }
            None => {
                let v = self.value(e)?;
                Ok(quote!(&(#v)))
            }
        }
    }

    /// The bytes of a byte-string value.
    fn bytes(&mut self, e: &Expr) -> R<TokenStream> {
        let b = self.borrowed(e)?;
        Ok(quote!(::core::convert::AsRef::<[u8]>::as_ref(#b)))
    }

    /// The value of a typed expression.
    pub fn value(&mut self, e: &Expr) -> R<TokenStream> {
        let ty = self.tensor_ty(e)?;
        match &e.kind {
            ExprKind::Field(_) => {
                let n = self.field_path(e).ok_or_else(|| format!("`{e}` is not a field"))?;
                Ok(self.owned_field(n))
            }
            ExprKind::Op(op) => self.call(op, e),
            ExprKind::Binary(..) | ExprKind::Unary(..) => {
                if repr(&ty)? == Repr::Scalar {
                    self.scalar(e, ty.dtype)
                } else {
                    self.elementwise(e, &ty)
                }
            }
            _ => Err(format!("`{e}` is not a value of the element")),
        }
    }

    /// A tensor-valued arithmetic expression as one closure over its tensor operands.
    fn elementwise(&mut self, e: &Expr, ty: &TensorType) -> R<TokenStream> {
        let mut leaves: Vec<Expr> = Vec::new();
        self.collect_leaves(e, &mut leaves)?;
        let mut binds = TokenStream::new();
        let mut params = Vec::new();
        let mut leaf_dtypes = Vec::new();
        for (i, leaf) in leaves.iter().enumerate() {
            let a = format_ident!("__a{}", i);
            let v = format_ident!("__v{}", i);
            let lt = self.tensor_ty(leaf)?;
            let owned = self.owned(leaf)?;
            binds.extend(quote!(let #a = #owned;));
            let st = scalar(lt.dtype);
            params.push(quote!(#v: #st));
            leaf_dtypes.push(lt.dtype);
        }
        let saved = self.fallible;
        self.fallible = false;
        let body = self.scalar_with(e, ty.dtype, &leaves, &leaf_dtypes)?;
        let fallible = self.fallible;
        self.fallible = saved;
        let out = scalar(ty.dtype);
        let call = match leaves.len() {
            1 if fallible => {
                quote!(__sl::Array::try_map(__a0, |#(#params),*| -> ::std::result::Result<#out, __sl::BoxError> { ::std::result::Result::Ok(#body) })?)
            }
            1 => quote!(__sl::Array::map(__a0, |#(#params),*| -> #out { #body })),
            2 => {
                quote!(__sl::Array::zip(__a0, &__a1, |#(#params),*| -> ::std::result::Result<#out, __sl::BoxError> { ::std::result::Result::Ok(#body) })?)
            }
            n => {
                return Err(format!(
                    "`{e}` combines {n} tensors in one expression; the code generator handles at most two (assign an intermediate field)"
                ));
            }
        };
        Ok(quote!({ #binds #call }))
    }

    /// The maximal tensor-valued operands of an arithmetic expression (fields, calls).
    fn collect_leaves(&mut self, e: &Expr, out: &mut Vec<Expr>) -> R<()> {
        match &e.kind {
            ExprKind::Binary(_, l, r) => {
                self.collect_leaves(l, out)?;
                self.collect_leaves(r, out)
            }
            ExprKind::Unary(_, x) => self.collect_leaves(x, out),
            // `cast` and `scale` are per-value: part of the one loop, not operands of it.
            ExprKind::Op(op) if op.is_per_value() => {
                self.collect_leaves(op.input().expect("a built-in has an input"), out)
            }
            _ => {
                if let ExprType::Tensor(t) = self.ty(e)?
                    && t.shape != Shape::scalar()
                    && !out.contains(e)
                {
                    out.push(e.clone());
                }
                Ok(())
            }
        }
    }

    /// A scalar expression of Rust type `want`.
    pub fn scalar(&mut self, e: &Expr, want: DType) -> R<TokenStream> {
        self.scalar_with(e, want, &[], &[])
    }

    fn scalar_with(&mut self, e: &Expr, want: DType, leaves: &[Expr], dts: &[DType]) -> R<TokenStream> {
        if let Some(i) = leaves.iter().position(|l| l == e) {
            let v = format_ident!("__v{}", i);
            return Ok(convert(quote!(#v), dts[i], want));
        }
        match &e.kind {
            ExprKind::Int(n) => Ok(number(*n as f64, Some(*n), want)),
            ExprKind::Float(x) => Ok(number(*x, None, want)),
            ExprKind::Bool(b) => Ok(quote!(#b)),
            ExprKind::Field(name) => {
                let f = self.fields.iter().find(|f| &f.name == name).ok_or(format!("unknown `{name}`"))?;
                let dt = f.ty.as_ref().map_or(want, |t| t.dtype);
                let l = local(name);
                Ok(convert(quote!(#l), dt, want))
            }
            ExprKind::Param { name, ty } => {
                let from = match ty {
                    ParamType::U32 => DType::U32,
                    ParamType::U64 | ParamType::Size => DType::U64,
                    ParamType::I64 => DType::I64,
                    ParamType::F64 => DType::F64,
                    ParamType::Bool => DType::Bool,
                    _ => return Err(format!("parameter `{name}` is not a number")),
                };
                let id = field_ident(name);
                Ok(convert(quote!(p.#id), from, want))
            }
            ExprKind::Unary(UnaryOp::Not, x) => {
                let x = self.scalar_with(x, DType::Bool, leaves, dts)?;
                Ok(quote!((!#x)))
            }
            ExprKind::Unary(UnaryOp::Neg, x) => {
                let x = self.scalar_with(x, want, leaves, dts)?;
                Ok(if want.is_float() { quote!((-#x)) } else { quote!((#x).wrapping_neg()) })
            }
            ExprKind::Binary(op, l, r) => {
                let own = match self.ty(e)? {
                    ExprType::Tensor(t) => t.dtype,
                    ExprType::Float => DType::F64,
                    _ => DType::I64,
                };
                let v = if op.is_logical() {
                    let (a, b) = (
                        self.scalar_with(l, DType::Bool, leaves, dts)?,
                        self.scalar_with(r, DType::Bool, leaves, dts)?,
                    );
                    if *op == BinaryOp::And { quote!((#a && #b)) } else { quote!((#a || #b)) }
                } else if op.is_comparison() {
                    let c = self.common(l, r)?;
                    let (a, b) = (self.scalar_with(l, c, leaves, dts)?, self.scalar_with(r, c, leaves, dts)?);
                    let o: TokenStream = op.symbol().parse().map_err(|_| "operator".to_string())?;
                    quote!((#a #o #b))
                } else {
                    let (a, b) =
                        (self.scalar_with(l, own, leaves, dts)?, self.scalar_with(r, own, leaves, dts)?);
                    arith(*op, own, a, b, &mut self.fallible)
                };
                let have = if op.is_logical() || op.is_comparison() { DType::Bool } else { own };
                Ok(convert(v, have, want))
            }
            ExprKind::Op(op) if !leaves.is_empty() && op.is_per_value() => {
                // Inside an elementwise loop: `cast(x, T)` is a conversion of each value,
                // `scale(x, f)` a conversion and a product.
                let t = self.tensor_ty(e)?;
                let x = op.input().expect("a built-in has an input");
                let from = self.tensor_ty(x)?.dtype;
                let v = self.scalar_with(x, from, leaves, dts)?;
                let v = convert(v, from, t.dtype);
                let v = if let Op::Scale { factor, .. } = &**op {
                    let factor = self.scalar(factor, t.dtype)?;
                    quote!((#v * #factor))
                } else {
                    v
                };
                Ok(convert(v, t.dtype, want))
            }
            ExprKind::Op(op) => {
                let t = self.tensor_ty(e)?;
                let v = self.call(op, e)?;
                Ok(convert(v, t.dtype, want))
            }
            _ => Err(format!("`{e}` is not a number")),
        }
    }

    /// The type two operands of a comparison are compared in.
    fn common(&self, l: &Expr, r: &Expr) -> R<DType> {
        let (a, b) = (self.ty(l)?, self.ty(r)?);
        let dt = |t: &ExprType| t.tensor().map(|t| t.dtype);
        let floats =
            [&a, &b].iter().any(|t| matches!(t, ExprType::Float) || dt(t).is_some_and(DType::is_float));
        Ok(if floats {
            if [&a, &b].iter().any(|t| dt(t) == Some(DType::F64)) { DType::F64 } else { DType::F32 }
        } else {
            dt(&a).or(dt(&b)).unwrap_or(DType::I64)
        })
    }

    /// A built-in operation or a declared `extern fn` (`e` is the call).
    fn call(&mut self, op: &Op, e: &Expr) -> R<TokenStream> {
        let out_ty = self.tensor_ty(e)?;
        match op {
            Op::DecodeRaw { bytes, .. } => {
                let t = scalar(out_ty.dtype);
                let b = self.bytes(bytes)?;
                Ok(quote!(__sl::ops::decode_raw::<#t>(#b)?))
            }
            Op::ParseTensor { bytes, dims, .. } => {
                let t = scalar(out_ty.dtype);
                let b = self.bytes(bytes)?;
                Ok(match dims {
                    None => quote!(__sl::ops::parse_tensor_values::<#t>(#b)?),
                    Some(d) if d.is_empty() => quote!(__sl::ops::parse_tensor_scalar::<#t>(#b)?),
                    Some(d) => {
                        let dims = d.iter().map(|d| match d {
                            crate::ir::types::Dim::Fixed(n) => {
                                let n = Literal::usize_unsuffixed(*n as usize);
                                quote!(::std::option::Option::Some(#n))
                            }
                            crate::ir::types::Dim::Named(_) => quote!(::std::option::Option::None),
                        });
                        quote!(__sl::ops::parse_tensor::<#t>(#b, &[#(#dims),*])?)
                    }
                })
            }
            Op::DecodeImage { bytes, channels, max_pixels, .. } => {
                let b = self.bytes(bytes)?;
                let c = match channels {
                    None => quote!(3usize),
                    Some(n) => {
                        let v = number(*n as f64, Some(*n), DType::U64);
                        quote!((#v as usize))
                    }
                };
                Ok(match max_pixels {
                    None => {
                        let f = format_ident!("{}", op.name());
                        quote!(__sl::ops::#f(#b, #c)?)
                    }
                    Some(n) => {
                        let f = format_ident!("{}_limited", op.name());
                        let n = Literal::usize_suffixed(*n as usize);
                        quote!(__sl::ops::#f(#b, #c, #n)?)
                    }
                })
            }
            Op::Reshape { x, dims } => {
                let v = self.owned(x)?;
                let dims = dims.iter().map(|n| Literal::usize_suffixed(*n as usize));
                Ok(quote!(__sl::ops::reshape(#v, &[#(#dims),*])?))
            }
            Op::Resize { image, h, w } | Op::CenterCrop { image, h, w } => {
                let v = self.borrowed(image)?;
                let h = self.count(h)?;
                let w = self.count(w)?;
                let f = format_ident!("{}", op.name());
                Ok(quote!(__sl::ops::#f(#v, #h, #w)?))
            }
            Op::RandomCrop { image, h, w, seed } => {
                let v = self.borrowed(image)?;
                let h = self.count(h)?;
                let w = self.count(w)?;
                let rng = self.rng(seed.as_ref())?;
                Ok(quote!({ #rng __sl::ops::random_crop(#v, #h, #w, &mut __rng)? }))
            }
            Op::RandomFlip { image, seed } => {
                let v = self.owned(image)?;
                let rng = self.rng(seed.as_ref())?;
                Ok(quote!({ #rng __sl::Flip::random_flip(#v, &mut __rng) }))
            }
            Op::Cast { x, .. } | Op::Scale { x, .. } => {
                let from = self.tensor_ty(x)?;
                let (s, d) = (scalar(from.dtype), scalar(out_ty.dtype));
                let body = match op {
                    Op::Scale { factor, .. } => {
                        let factor = self.scalar(factor, out_ty.dtype)?;
                        quote!(__sl::ops::cast::<#s, #d>(v) * #factor)
                    }
                    _ => quote!(__sl::ops::cast::<#s, #d>(v)),
                };
                let v = self.owned(x)?;
                if repr(&from)? == Repr::Scalar {
                    Ok(quote!({ let v: #s = #v; #body }))
                } else {
                    Ok(quote!(__sl::Array::map(#v, |v: #s| -> #d { #body })))
                }
            }
            Op::Normalize { x, mean, std } => {
                let from = self.tensor_ty(x)?;
                let s = scalar(from.dtype);
                let mean = self.floats(mean)?;
                let std = self.floats(std)?;
                let v = self.owned(x)?;
                if repr(&from)? == Repr::Scalar {
                    Ok(
                        quote!(__sl::ops::normalize_scalar(__sl::ops::cast::<#s, f32>(#v), &[#(#mean),*], &[#(#std),*])?),
                    )
                } else {
                    let v = if from.dtype == DType::F32 {
                        v
                    } else {
                        quote!(__sl::Array::map(#v, __sl::ops::cast::<#s, f32>))
                    };
                    Ok(quote!(__sl::ops::normalize(#v, &[#(#mean),*], &[#(#std),*])?))
                }
            }
            Op::Transpose { x, layout } => {
                let v = self.borrowed(x)?;
                let f = format_ident!("transpose_{}", layout.name());
                Ok(quote!(__sl::ops::#f(#v)?))
            }
            Op::OneHot { label, depth } => {
                let from = self.tensor_ty(label)?;
                let v = self.scalar(label, from.dtype)?;
                let depth = self.count(depth)?;
                Ok(quote!(__sl::ops::one_hot(#v, #depth)?))
            }
            Op::Tokenize { text, tokenizer, add_bos, add_eos } => {
                let b = self.bytes(text)?;
                let path = match &tokenizer.kind {
                    ExprKind::Str(s) => quote!(#s),
                    ExprKind::Param { name, .. } => {
                        let id = super::types::field_ident(name);
                        quote!(p.#id.as_str())
                    }
                    _ => return Err(format!("the tokenizer `{tokenizer}` is not a file")),
                };
                Ok(quote!(__sl::abi::tokenize::tokenize(#b, #path, #add_bos, #add_eos)?))
            }
            Op::CheckFinite { x } => {
                // The value named in the error: the field, or the expression as written.
                let what = match &x.kind {
                    ExprKind::Field(name) => name.clone(),
                    _ => x.to_string(),
                };
                if repr(&out_ty)? == Repr::Scalar {
                    let v = self.scalar(x, out_ty.dtype)?;
                    Ok(quote!(__sl::ops::check_finite_scalar(#v, #what)?))
                } else {
                    let v = self.owned(x)?;
                    Ok(quote!(__sl::ops::check_finite(#v, #what)?))
                }
            }
            Op::Extern { path, args } => self.user_fn(path, args),
        }
    }

    /// A call of a declared `extern fn`, resolved from the crate root.
    fn user_fn(&mut self, name: &str, args: &[Expr]) -> R<TokenStream> {
        let decl = self
            .decls
            .externs
            .iter()
            .find(|x| x.path == name)
            .cloned()
            .ok_or_else(|| format!("unknown function `{name}`"))?;
        let mut values = Vec::new();
        for ((_, pty), a) in decl.params.iter().zip(args) {
            values.push(if repr(pty)? == Repr::Scalar { self.scalar(a, pty.dtype)? } else { self.owned(a)? });
        }
        let path: syn::Path =
            syn::parse_str(&format!("crate::{name}")).map_err(|e| format!("path `{name}`: {e}"))?;
        Ok(quote!(#path(#(#values),*)))
    }

    /// A count argument as `usize`.
    fn count(&mut self, e: &Expr) -> R<TokenStream> {
        let v = self.scalar(e, DType::U64)?;
        Ok(quote!((#v as usize)))
    }

    /// A list of float constants (or one number, or a parameter) as `f32` values.
    fn floats(&mut self, e: &Expr) -> R<Vec<TokenStream>> {
        match &e.kind {
            ExprKind::List(items) => items.iter().map(|i| self.scalar(i, DType::F32)).collect(),
            _ => Ok(vec![self.scalar(e, DType::F32)?]),
        }
    }

    /// `let mut __rng = ...;` for one random operation of one element.
    fn rng(&mut self, seed: Option<&Expr>) -> R<TokenStream> {
        self.random = true;
        let id = *self.next_rng;
        *self.next_rng += 1;
        let seed = match seed {
            Some(s) => self.scalar(s, DType::U64)?,
            // No seed: different on every run, as an unseeded `shuffle` (and tf.data).
            None => quote!(__sl::abi::run_seed()),
        };
        Ok(quote!(let mut __rng = __sl::ops::element_rng(#seed, #id, __epoch, __index);))
    }
}

/// The type of a row's value as a whole batch column (`[n, ...]`), or `None` for a
/// variable-length one.
pub fn batched(t: &TensorType) -> Option<TensorType> {
    let mut dims = vec![Dim::Named("n".into())];
    match &t.shape {
        Shape::Dims(d) => dims.extend(d.iter().cloned()),
        Shape::Var => return None,
    }
    Some(TensorType { dtype: t.dtype, shape: Shape::Dims(dims) })
}

/// A number literal of type `want`.
fn number(x: f64, int: Option<u64>, want: DType) -> TokenStream {
    match (want, int) {
        (DType::F32, _) => {
            let l = Literal::f32_suffixed(x as f32);
            quote!(#l)
        }
        (DType::F64, _) => {
            let l = Literal::f64_suffixed(x);
            quote!(#l)
        }
        (DType::Bool, _) => {
            let b = x != 0.0;
            quote!(#b)
        }
        (d, Some(n)) => {
            let t = scalar(d);
            let l = Literal::u64_unsuffixed(n);
            quote!((#l as #t))
        }
        (d, None) => {
            let t = scalar(d);
            let l = Literal::f64_suffixed(x);
            quote!((#l as #t))
        }
    }
}

/// `v` (of `from`) as `to`.
fn convert(v: TokenStream, from: DType, to: DType) -> TokenStream {
    if from == to {
        return v;
    }
    let (s, d) = (scalar(from), scalar(to));
    quote!(__sl::ops::cast::<#s, #d>(#v))
}

/// Binary arithmetic in `dt`: wrapping for integers, an error for integer division by zero.
fn arith(op: BinaryOp, dt: DType, a: TokenStream, b: TokenStream, fallible: &mut bool) -> TokenStream {
    if dt.is_float() {
        let o: TokenStream = op.symbol().parse().unwrap_or_default();
        return quote!((#a #o #b));
    }
    match op {
        BinaryOp::Add => quote!((#a).wrapping_add(#b)),
        BinaryOp::Sub => quote!((#a).wrapping_sub(#b)),
        BinaryOp::Mul => quote!((#a).wrapping_mul(#b)),
        BinaryOp::Div => {
            *fallible = true;
            quote!(__sl::ops::int_div(#a, #b)?)
        }
        _ => {
            *fallible = true;
            quote!(__sl::ops::int_rem(#a, #b)?)
        }
    }
}
