//! Code for the statements of a `map` block and for `filter` predicates.
//!
//! Each field is a local (`f_<name>`), re-bound by each statement that assigns it. Types
//! come from the one typer of `sema::ops` (the expressions were checked there).
//! Arithmetic on tensors is one closure over the values (`Array::map` / `Array::zip`),
//! so `x * 2.0 + 1.0` is a single loop; on scalars it is plain Rust. Integer arithmetic
//! wraps, and integer division by zero is an error, never a panic.

use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

use super::types::{Repr, field_ident, repr, rust, scalar};
use crate::ast::{self, BinaryOp, ExprKind, UnaryOp};
use crate::ir::decls::Declarations;
use crate::ir::plan::{FieldType, MapOp};
use crate::ir::types::{DType, ParamType, Shape, TensorType};
use crate::sema::ops::{Ty, Typer};

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
}

type R<T> = Result<T, String>;

impl<'a> Scope<'a> {
    /// A scope over `fields`.
    pub fn new(fields: Vec<FieldType>, decls: &'a Declarations, next_rng: &'a mut u64) -> Self {
        Scope { fields, decls, next_rng, movable: None, fallible: false, random: false }
    }

    fn ty(&mut self, e: &ast::Expr) -> R<Ty> {
        let mut diags = Vec::new();
        Typer { fields: &self.fields, decls: self.decls, diags: &mut diags }
            .type_of(e)
            .ok_or_else(|| format!("cannot type `{e}`"))
    }

    fn tensor_ty(&mut self, e: &ast::Expr) -> R<TensorType> {
        match self.ty(e)? {
            Ty::Tensor(t) => Ok(t),
            _ => Err(format!("`{e}` is not a value")),
        }
    }

    /// `let f_target = value;` for one statement, and the new field type.
    pub fn statement(&mut self, target: &str, e: &ast::Expr, ty: &TensorType) -> R<TokenStream> {
        repr(ty)?;
        self.movable = (count_reads(e, target) == 1).then(|| target.to_string());
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

    /// `decode_jpeg(b, 3)`, `resize(h, w)`, `scale(1/255)`, `normalize(mean, std)` on
    /// one field in a row: one fused pass (`ops::decode_resize_normalize_into`,
    /// bit-identical to the four steps), or `None` when `ops` does not start so.
    /// With `into`, the pixels are appended to that field's column `c_<into>` instead
    /// of making a local.
    pub fn decode_resize_normalize(&mut self, ops: &[MapOp], into: Option<&str>) -> R<Option<TokenStream>> {
        let [
            MapOp::Assign { target, expr: e0, .. },
            MapOp::Assign { target: t1, expr: e1, .. },
            MapOp::Assign { target: t2, expr: e2, .. },
            MapOp::Assign { target: t3, expr: e3, ty, .. },
            ..,
        ] = ops
        else {
            return Ok(None);
        };
        if [t1, t2, t3].iter().any(|t| *t != target) {
            return Ok(None);
        }
        let call = |e: &ast::Expr, name: &str| -> Option<Vec<(Option<String>, ast::Expr)>> {
            match &e.kind {
                ExprKind::Call { callee, args, .. } if callee.to_string() == name => Some(
                    args.iter().map(|a| (a.name.as_ref().map(|n| n.name.clone()), a.value.clone())).collect(),
                ),
                _ => None,
            }
        };
        let reads_target = |args: &[(Option<String>, ast::Expr)]| matches!(&args.first(), Some((None, a)) if a.to_string() == *target);
        let (Some(dec), Some(res), Some(sc), Some(norm)) =
            (call(e0, "decode_jpeg"), call(e1, "resize"), call(e2, "scale"), call(e3, "normalize"))
        else {
            return Ok(None);
        };
        let channels_ok = match dec.get(1) {
            None => true,
            Some((_, c)) => matches!(c.kind, ExprKind::Int(3)),
        };
        let factor_ok = match sc.get(1) {
            Some((None, f)) => const_f64(f).is_some_and(|v| v as f32 == 1.0f32 / 255.0),
            _ => false,
        };
        let named = |args: &[(Option<String>, ast::Expr)], i: usize, name: &str| {
            args.iter()
                .find(|(n, _)| n.as_deref() == Some(name))
                .or_else(|| args.get(i).filter(|(n, _)| n.is_none()))
                .map(|(_, e)| e.clone())
        };
        if !channels_ok
            || !factor_ok
            || dec.len() > 2
            || res.len() != 3
            || norm.len() != 3
            || !reads_target(&res)
            || !reads_target(&sc)
            || !reads_target(&norm)
            || res.iter().any(|(n, _)| n.is_some())
        {
            return Ok(None);
        }
        let (Some(src), Some(mean), Some(std)) =
            (dec.first().map(|(_, e)| e.clone()), named(&norm, 1, "mean"), named(&norm, 2, "std"))
        else {
            return Ok(None);
        };
        let bytes = self.bytes(&src)?;
        let h = self.count(&res[1].1)?;
        let w = self.count(&res[2].1)?;
        let mean = self.floats(&mean)?;
        let std = self.floats(&std)?;
        let name = local(target);
        for (t, ty) in [(target, ty)] {
            match self.fields.iter_mut().find(|f| &f.name == t) {
                Some(f) => f.ty = Some(ty.clone()),
                None => self.fields.push(FieldType { name: t.clone(), ty: Some(ty.clone()) }),
            }
        }
        if let Some(field) = into {
            let c = format_ident!("c_{}", field);
            return Ok(Some(quote! {
                {
                    let (h, w) = (#h, #w);
                    let start = #c.len();
                    #c.resize(start + h * w * 3, 0.0);
                    __sl::ops::decode_resize_normalize_into(#bytes, h, w, &[#(#mean),*], &[#(#std),*], &mut #c[start..])?;
                }
            }));
        }
        Ok(Some(quote! {
            let #name: __sl::Tensor<f32> = {
                let (h, w) = (#h, #w);
                let mut v = ::std::vec![0f32; h * w * 3];
                __sl::ops::decode_resize_normalize_into(#bytes, h, w, &[#(#mean),*], &[#(#std),*], &mut v)?;
                __sl::Tensor::new(::std::vec![h, w, 3], v)?
            };
        }))
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

    fn field_path<'e>(&self, e: &'e ast::Expr) -> Option<&'e str> {
        match &e.kind {
            ExprKind::Path(p) if p.segments.len() == 1 => {
                let n = p.segments[0].name.as_str();
                self.fields.iter().any(|f| f.name == n).then_some(n)
            }
            _ => None,
        }
    }

    /// An owned value of `e` (of the Rust type of its tensor type).
    fn owned(&mut self, e: &ast::Expr) -> R<TokenStream> {
        match self.field_path(e) {
            Some(n) => Ok(self.owned_field(n)),
            None => self.value(e),
        }
    }

    /// A reference to the value of `e`.
    fn borrowed(&mut self, e: &ast::Expr) -> R<TokenStream> {
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
    fn bytes(&mut self, e: &ast::Expr) -> R<TokenStream> {
        let b = self.borrowed(e)?;
        Ok(quote!(::core::convert::AsRef::<[u8]>::as_ref(#b)))
    }

    /// The value of a typed expression.
    pub fn value(&mut self, e: &ast::Expr) -> R<TokenStream> {
        let ty = self.tensor_ty(e)?;
        match &e.kind {
            ExprKind::Path(_) => {
                let n = self.field_path(e).ok_or_else(|| format!("`{e}` is not a field"))?;
                Ok(self.owned_field(n))
            }
            ExprKind::Call { callee, args, .. } => self.call(&callee.to_string(), args, e),
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
    fn elementwise(&mut self, e: &ast::Expr, ty: &TensorType) -> R<TokenStream> {
        let mut leaves: Vec<ast::Expr> = Vec::new();
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
    fn collect_leaves(&mut self, e: &ast::Expr, out: &mut Vec<ast::Expr>) -> R<()> {
        match &e.kind {
            ExprKind::Binary(_, l, r) => {
                self.collect_leaves(l, out)?;
                self.collect_leaves(r, out)
            }
            ExprKind::Unary(_, x) => self.collect_leaves(x, out),
            // `cast` and `scale` are per-value: part of the one loop, not operands of it.
            ExprKind::Call { callee, args, .. } if is_per_value(&callee.to_string(), args) => {
                self.collect_leaves(&args[0].value, out)
            }
            _ => {
                if let Ty::Tensor(t) = self.ty(e)?
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
    pub fn scalar(&mut self, e: &ast::Expr, want: DType) -> R<TokenStream> {
        self.scalar_with(e, want, &[], &[])
    }

    fn scalar_with(
        &mut self,
        e: &ast::Expr,
        want: DType,
        leaves: &[ast::Expr],
        dts: &[DType],
    ) -> R<TokenStream> {
        if let Some(i) = leaves.iter().position(|l| l == e) {
            let v = format_ident!("__v{}", i);
            return Ok(convert(quote!(#v), dts[i], want));
        }
        match &e.kind {
            ExprKind::Int(n) => Ok(number(*n as f64, Some(*n), want)),
            ExprKind::Float(x) => Ok(number(*x, None, want)),
            ExprKind::Bool(b) => Ok(quote!(#b)),
            ExprKind::Path(p) if p.segments.len() == 1 => {
                let name = p.segments[0].name.as_str();
                if let Some(f) = self.fields.iter().find(|f| f.name == name) {
                    let dt = f.ty.as_ref().map_or(want, |t| t.dtype);
                    let l = local(name);
                    return Ok(convert(quote!(#l), dt, want));
                }
                let param =
                    self.decls.params.iter().find(|q| q.name == name).ok_or(format!("unknown `{name}`"))?;
                let from = match param.ty {
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
                    Ty::Tensor(t) => t.dtype,
                    Ty::Float => DType::F64,
                    _ => DType::I64,
                };
                let v = match op {
                    BinaryOp::And | BinaryOp::Or => {
                        let (a, b) = (
                            self.scalar_with(l, DType::Bool, leaves, dts)?,
                            self.scalar_with(r, DType::Bool, leaves, dts)?,
                        );
                        if *op == BinaryOp::And { quote!((#a && #b)) } else { quote!((#a || #b)) }
                    }
                    BinaryOp::Eq
                    | BinaryOp::Ne
                    | BinaryOp::Lt
                    | BinaryOp::Le
                    | BinaryOp::Gt
                    | BinaryOp::Ge => {
                        let c = self.common(l, r)?;
                        let (a, b) =
                            (self.scalar_with(l, c, leaves, dts)?, self.scalar_with(r, c, leaves, dts)?);
                        let o: TokenStream = op.symbol().parse().map_err(|_| "operator".to_string())?;
                        quote!((#a #o #b))
                    }
                    _ => {
                        let (a, b) =
                            (self.scalar_with(l, own, leaves, dts)?, self.scalar_with(r, own, leaves, dts)?);
                        arith(*op, own, a, b, &mut self.fallible)
                    }
                };
                let have = if matches!(
                    op,
                    BinaryOp::And
                        | BinaryOp::Or
                        | BinaryOp::Eq
                        | BinaryOp::Ne
                        | BinaryOp::Lt
                        | BinaryOp::Le
                        | BinaryOp::Gt
                        | BinaryOp::Ge
                ) {
                    DType::Bool
                } else {
                    own
                };
                Ok(convert(v, have, want))
            }
            ExprKind::Call { callee, args, .. }
                if !leaves.is_empty() && is_per_value(&callee.to_string(), args) =>
            {
                // Inside an elementwise loop: `cast(x, T)` is a conversion of each value,
                // `scale(x, f)` a conversion and a product.
                let t = self.tensor_ty(e)?;
                let x = &args[0].value;
                let from = self.tensor_ty(x)?.dtype;
                let v = self.scalar_with(x, from, leaves, dts)?;
                let v = convert(v, from, t.dtype);
                let v = if callee.to_string() == "scale" {
                    let factor = self.scalar(&args[1].value, t.dtype)?;
                    quote!((#v * #factor))
                } else {
                    v
                };
                Ok(convert(v, t.dtype, want))
            }
            ExprKind::Call { callee, args, .. } => {
                let t = self.tensor_ty(e)?;
                let v = self.call(&callee.to_string(), args, e)?;
                Ok(convert(v, t.dtype, want))
            }
            _ => Err(format!("`{e}` is not a number")),
        }
    }

    /// The type two operands of a comparison are compared in.
    fn common(&mut self, l: &ast::Expr, r: &ast::Expr) -> R<DType> {
        let (a, b) = (self.ty(l)?, self.ty(r)?);
        let dt = |t: &Ty| match t {
            Ty::Tensor(t) => Some(t.dtype),
            _ => None,
        };
        let floats = [&a, &b].iter().any(|t| matches!(t, Ty::Float) || dt(t).is_some_and(DType::is_float));
        Ok(if floats {
            if [&a, &b].iter().any(|t| dt(t) == Some(DType::F64)) { DType::F64 } else { DType::F32 }
        } else {
            dt(&a).or(dt(&b)).unwrap_or(DType::I64)
        })
    }

    /// A built-in operation or a declared `extern fn`.
    fn call(&mut self, name: &str, args: &[ast::Arg], e: &ast::Expr) -> R<TokenStream> {
        let out_ty = self.tensor_ty(e)?;
        let Some((params, _)) = crate::sema::ops::signature(name) else { return self.user_fn(name, args) };
        let (bound, _) = crate::sema::args::bind(params, args);
        let arg = |i: usize| bound.get(i).copied().flatten().map(|a| &a.value);
        let x = arg(0).ok_or_else(|| format!("`{name}` needs an argument"))?;
        match name {
            "decode_raw" => {
                let t = scalar(out_ty.dtype);
                let b = self.bytes(x)?;
                Ok(quote!(__sl::ops::decode_raw::<#t>(#b)?))
            }
            "decode_jpeg" | "decode_png" => {
                let b = self.bytes(x)?;
                let c = arg(1).map_or(Ok(quote!(3usize)), |c| self.count(c))?;
                let f = format_ident!("{}", name);
                Ok(quote!(__sl::ops::#f(#b, #c)?))
            }
            "reshape" => {
                let v = self.owned(x)?;
                let dims = match arg(1).map(|a| &a.kind) {
                    Some(ExprKind::List(items)) => items
                        .iter()
                        .map(|i| match i.kind {
                            ExprKind::Int(n) => Ok(Literal::usize_suffixed(n as usize)),
                            _ => Err("reshape sizes are integers".to_string()),
                        })
                        .collect::<R<Vec<_>>>()?,
                    _ => return Err("reshape needs a list of sizes".into()),
                };
                Ok(quote!(__sl::ops::reshape(#v, &[#(#dims),*])?))
            }
            "resize" | "center_crop" | "random_crop" => {
                let v = self.borrowed(x)?;
                let h = self.count(arg(1).ok_or("height")?)?;
                let w = self.count(arg(2).ok_or("width")?)?;
                let f = format_ident!("{}", name);
                if name == "random_crop" {
                    let rng = self.rng(arg(3))?;
                    Ok(quote!({ #rng __sl::ops::random_crop(#v, #h, #w, &mut __rng)? }))
                } else {
                    Ok(quote!(__sl::ops::#f(#v, #h, #w)?))
                }
            }
            "random_flip" => {
                let v = self.owned(x)?;
                let rng = self.rng(arg(1))?;
                Ok(quote!({ #rng __sl::Flip::random_flip(#v, &mut __rng) }))
            }
            "cast" | "scale" => {
                let from = self.tensor_ty(x)?;
                let (s, d) = (scalar(from.dtype), scalar(out_ty.dtype));
                let body = if name == "cast" {
                    quote!(__sl::ops::cast::<#s, #d>(v))
                } else {
                    let factor = self.scalar(arg(1).ok_or("factor")?, out_ty.dtype)?;
                    quote!(__sl::ops::cast::<#s, #d>(v) * #factor)
                };
                if repr(&from)? == Repr::Scalar {
                    let v = self.owned(x)?;
                    Ok(quote!({ let v: #s = #v; #body }))
                } else {
                    let v = self.owned(x)?;
                    Ok(quote!(__sl::Array::map(#v, |v: #s| -> #d { #body })))
                }
            }
            "normalize" => {
                let from = self.tensor_ty(x)?;
                let s = scalar(from.dtype);
                let mean = self.floats(arg(1).ok_or("mean")?)?;
                let std = self.floats(arg(2).ok_or("std")?)?;
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
            "transpose" => {
                let v = self.borrowed(x)?;
                let layout = arg(1).map(ToString::to_string).unwrap_or_default();
                let f = format_ident!("transpose_{}", layout);
                Ok(quote!(__sl::ops::#f(#v)?))
            }
            "one_hot" => {
                let from = self.tensor_ty(x)?;
                let v = self.scalar(x, from.dtype)?;
                let depth = self.count(arg(1).ok_or("depth")?)?;
                Ok(quote!(__sl::ops::one_hot(#v, #depth)?))
            }
            other => Err(format!("unknown operation `{other}`")),
        }
    }

    /// A call of a declared `extern fn`, resolved from the crate root.
    fn user_fn(&mut self, name: &str, args: &[ast::Arg]) -> R<TokenStream> {
        let decl = self
            .decls
            .externs
            .iter()
            .find(|x| x.path == name)
            .cloned()
            .ok_or_else(|| format!("unknown function `{name}`"))?;
        let mut values = Vec::new();
        for ((_, pty), a) in decl.params.iter().zip(args) {
            values.push(if repr(pty)? == Repr::Scalar {
                self.scalar(&a.value, pty.dtype)?
            } else {
                self.owned(&a.value)?
            });
        }
        let path: syn::Path =
            syn::parse_str(&format!("crate::{name}")).map_err(|e| format!("path `{name}`: {e}"))?;
        Ok(quote!(#path(#(#values),*)))
    }

    /// A count argument as `usize`.
    fn count(&mut self, e: &ast::Expr) -> R<TokenStream> {
        let v = self.scalar(e, DType::U64)?;
        Ok(quote!((#v as usize)))
    }

    /// A list of float constants (or one number, or a parameter) as `f32` values.
    fn floats(&mut self, e: &ast::Expr) -> R<Vec<TokenStream>> {
        match &e.kind {
            ExprKind::List(items) => items.iter().map(|i| self.scalar(i, DType::F32)).collect(),
            _ => Ok(vec![self.scalar(e, DType::F32)?]),
        }
    }

    /// `let mut __rng = ...;` for one random operation of one element.
    fn rng(&mut self, seed: Option<&ast::Expr>) -> R<TokenStream> {
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

/// Whether a call is a per-value conversion (`cast(x, T)`, `scale(x, f)` with both
/// arguments positional) that an elementwise loop can apply to each value.
fn is_per_value(callee: &str, args: &[ast::Arg]) -> bool {
    matches!(callee, "cast" | "scale") && args.len() == 2 && args.iter().all(|a| a.name.is_none())
}

/// The value of a constant number expression (`1.0 / 255.0`).
fn const_f64(e: &ast::Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(n) => Some(*n as f64),
        ExprKind::Float(x) => Some(*x),
        ExprKind::Unary(UnaryOp::Neg, x) => const_f64(x).map(|v| -v),
        ExprKind::Binary(op, l, r) => {
            let (a, b) = (const_f64(l)?, const_f64(r)?);
            match op {
                BinaryOp::Add => Some(a + b),
                BinaryOp::Sub => Some(a - b),
                BinaryOp::Mul => Some(a * b),
                BinaryOp::Div => Some(a / b),
                _ => None,
            }
        }
        _ => None,
    }
}

/// How often `e` reads field `name`.
pub fn count_reads(e: &ast::Expr, name: &str) -> usize {
    match &e.kind {
        ExprKind::Path(p) => usize::from(p.segments.len() == 1 && p.segments[0].name == name),
        ExprKind::List(items) => items.iter().map(|i| count_reads(i, name)).sum(),
        ExprKind::Call { args, .. } => args.iter().map(|a| count_reads(&a.value, name)).sum(),
        ExprKind::Unary(_, x) => count_reads(x, name),
        ExprKind::Binary(_, l, r) => count_reads(l, name) + count_reads(r, name),
        _ => 0,
    }
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
