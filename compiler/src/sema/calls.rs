//! Typing calls: each built-in operation's arguments bound to its signature once
//! ([`SIGNATURES`]), checked, and turned into a typed [`Op`]; a declared `extern fn` with
//! its named dimensions bound on use.

use crate::ast::{self, ExprKind as A};
use crate::diagnostic::Diagnostic;
use crate::ir::expr::{Expr, ExprKind, ExprType};
use crate::ir::op::{ImageFormat, Layout, MAX_PIXELS, Op};
use crate::ir::types::{DType, Dim, Shape, TensorType};

use super::decls::closest;
use super::ops::{SIGNATURES, Typer, op_names};

impl Typer<'_> {
    /// The operation `callee(args)` and the type of its value.
    pub(super) fn call(
        &mut self,
        callee: &ast::Path,
        args: &[ast::Arg],
        e: &ast::Expr,
    ) -> Option<(Op, TensorType)> {
        let name = callee.to_string();
        let numeric = |d: DType| !matches!(d, DType::Bytes | DType::Str);
        let bytes = |d: DType| d == DType::Bytes;
        let any = |_: DType| true;
        let dims3 = |t: &TensorType| match &t.shape {
            Shape::Dims(d) if d.len() == 3 => Some((d[0].clone(), d[1].clone(), d[2].clone())),
            _ => None,
        };
        let fixed = |n: Option<u64>, named: &str| n.map_or(Dim::Named(named.to_string()), Dim::Fixed);
        if !SIGNATURES.iter().any(|(n, _, _)| *n == name) {
            return self.call_other(callee, &name, args, e);
        }
        let a = self.bind_op(&name, args, e)?;
        Some(match name.as_str() {
            "decode_raw" => {
                let (bytes, _) = self.tensor_arg(&name, a[0]?, bytes, "bytes", Some(0))?;
                let numeric_names: Vec<&str> =
                    DType::ALL.iter().filter(|d| d.is_int() || d.is_float()).map(|d| d.name()).collect();
                let dtype = DType::from_name(&self.word_arg(&name, "dtype", a[1]?, &numeric_names)?)?;
                (Op::DecodeRaw { bytes, dtype }, TensorType { dtype, shape: Shape::Var })
            }
            "parse_tensor" => {
                let (bytes, _) = self.tensor_arg(&name, a[0]?, bytes, "bytes", Some(0))?;
                // The dtypes of `tf.io.serialize_tensor` the runtime reads (TensorValue).
                let names = ["u8", "i32", "u32", "i64", "u64", "f32", "f64"];
                let dtype = DType::from_name(&self.word_arg(&name, "dtype", a[1]?, &names)?)?;
                let dims = match a[2] {
                    None => None,
                    Some(shape) => {
                        let dims = match &shape.kind {
                            A::List(items) => items
                                .iter()
                                .map(|i| match &i.kind {
                                    A::Int(n) => Some(Dim::Fixed(*n)),
                                    A::Path(p) if p.segments.len() == 1 => {
                                        Some(Dim::Named(p.segments[0].name.clone()))
                                    }
                                    _ => None,
                                })
                                .collect::<Option<Vec<Dim>>>(),
                            _ => None,
                        };
                        if dims.is_none() {
                            self.diags.push(Diagnostic::error(
                                "E0405",
                                "`shape` of `parse_tensor` is a list of sizes and dimension names",
                                shape.span,
                                "such as `[28, 28]`, `[n, 3]` or `[]` for a scalar",
                            ));
                            return None;
                        }
                        dims
                    }
                };
                let shape = dims.clone().map_or(Shape::Var, Shape::Dims);
                (Op::ParseTensor { bytes, dtype, dims }, TensorType { dtype, shape })
            }
            "decode_jpeg" | "decode_png" => {
                let (bytes, _) = self.tensor_arg(&name, a[0]?, bytes, "bytes", Some(0))?;
                let png = name == "decode_png";
                let channels = match a[1] {
                    None => None,
                    Some(c) => match self.count_arg(&name, "channels", c)?.1 {
                        Some(n @ (1 | 3)) => Some(n),
                        Some(4) if png => Some(4),
                        other => {
                            self.diags.push(Diagnostic::error(
                                "E0405",
                                format!(
                                    "`channels` of `{name}` must be 1 or 3{}",
                                    if png { " or 4" } else { "" }
                                ),
                                c.span,
                                format!(
                                    "found {}",
                                    other.map_or("a run-time value".into(), |n| n.to_string())
                                ),
                            ));
                            return None;
                        }
                    },
                };
                let shape = Shape::Dims(vec![
                    Dim::Named("H".into()),
                    Dim::Named("W".into()),
                    Dim::Fixed(channels.unwrap_or(3)),
                ]);
                let max_pixels = match a[2] {
                    None => None,
                    Some(m) => Some(self.max_pixels_arg(&name, m)?),
                };
                let format = if png { ImageFormat::Png } else { ImageFormat::Jpeg };
                (
                    Op::DecodeImage { format, bytes, channels, max_pixels },
                    TensorType { dtype: DType::U8, shape },
                )
            }
            "reshape" => {
                let (x, t) = self.tensor_arg(&name, a[0]?, numeric, "numbers", None)?;
                let shape = a[1]?;
                let dims: Option<Vec<u64>> = match &shape.kind {
                    A::List(items) if !items.is_empty() => items
                        .iter()
                        .map(|i| match i.kind {
                            A::Int(n) if n > 0 => Some(n),
                            _ => None,
                        })
                        .collect(),
                    _ => None,
                };
                let Some(dims) = dims else {
                    self.diags.push(Diagnostic::error(
                        "E0405",
                        "`shape` of `reshape` is a list of positive integer sizes",
                        shape.span,
                        "such as `[64, 64, 3]`",
                    ));
                    return None;
                };
                let count = dims.iter().try_fold(1u64, |n, d| n.checked_mul(*d));
                if let (Shape::Dims(src), Some(count)) = (&t.shape, count) {
                    let fixed: Option<u64> = src.iter().try_fold(1u64, |n, d| match d {
                        Dim::Fixed(k) => n.checked_mul(*k),
                        Dim::Named(_) => None,
                    });
                    if let Some(have) = fixed.filter(|&h| h != count) {
                        self.diags.push(
                            Diagnostic::error(
                                "E0404",
                                format!("`reshape` of {have} values into a shape of {count}"),
                                shape.span,
                                "the sizes must multiply to the number of values",
                            )
                            .with_label(a[0]?.span, format!("`{t}`")),
                        );
                        return None;
                    }
                }
                let ty = TensorType {
                    dtype: t.dtype,
                    shape: Shape::Dims(dims.iter().copied().map(Dim::Fixed).collect()),
                };
                (Op::Reshape { x, dims }, ty)
            }
            "resize" | "center_crop" | "random_crop" => {
                let (image, t) =
                    self.tensor_arg(&name, a[0]?, numeric, "numbers (decode the image first)", Some(3))?;
                let (h, hn) = self.count_arg(&name, "height", a[1]?)?;
                let (w, wn) = self.count_arg(&name, "width", a[2]?)?;
                let (_, _, c) = dims3(&t)?;
                let dtype = if name == "resize" { DType::F32 } else { t.dtype };
                let ty = TensorType { dtype, shape: Shape::Dims(vec![fixed(hn, "h"), fixed(wn, "w"), c]) };
                let op = match name.as_str() {
                    "resize" => Op::Resize { image, h, w },
                    "center_crop" => Op::CenterCrop { image, h, w },
                    _ => Op::RandomCrop { image, h, w, seed: a[3].map(|s| self.quiet(s)) },
                };
                (op, ty)
            }
            "random_flip" => {
                let (image, t) = self.tensor_arg(&name, a[0]?, any, "a value", None)?;
                (Op::RandomFlip { image, seed: a[1].map(|s| self.quiet(s)) }, t)
            }
            "cast" => {
                let (x, t) = self.tensor_arg(&name, a[0]?, numeric, "numbers", None)?;
                let numeric_names: Vec<&str> = DType::ALL
                    .iter()
                    .filter(|d| d.is_int() || d.is_float() || **d == DType::Bool)
                    .map(|d| d.name())
                    .collect();
                let dtype = DType::from_name(&self.word_arg(&name, "dtype", a[1]?, &numeric_names)?)?;
                (Op::Cast { x, dtype }, TensorType { dtype, shape: t.shape })
            }
            "scale" => {
                let (x, t) = self.tensor_arg(&name, a[0]?, numeric, "numbers", None)?;
                let factor = self.ty(a[1]?)?;
                if !matches!(factor.ty, ExprType::Int(_) | ExprType::Float) {
                    self.diags.push(Diagnostic::error(
                        "E0405",
                        "`factor` of `scale` must be a number",
                        a[1]?.span,
                        format!("this is {}", factor.ty.describe()),
                    ));
                    return None;
                }
                let dtype = if t.dtype == DType::F64 { DType::F64 } else { DType::F32 };
                (Op::Scale { x, factor }, TensorType { dtype, shape: t.shape })
            }
            "normalize" => self.normalize(a[0]?, a[1]?, a[2]?)?,
            "transpose" => {
                let (x, t) = self.tensor_arg(&name, a[0]?, any, "a value", Some(3))?;
                let layout = Layout::from_name(&self.word_arg(&name, "layout", a[1]?, &["chw", "hwc"])?)?;
                let (d0, d1, d2) = dims3(&t)?;
                let dims = match layout {
                    Layout::Chw => vec![d2, d0, d1],
                    Layout::Hwc => vec![d1, d2, d0],
                };
                (Op::Transpose { x, layout }, TensorType { dtype: t.dtype, shape: Shape::Dims(dims) })
            }
            "one_hot" => {
                let (label, _) =
                    self.tensor_arg(&name, a[0]?, |d| d.is_int(), "an integer label", Some(0))?;
                let (depth, n) = self.count_arg(&name, "depth", a[1]?)?;
                let ty = TensorType { dtype: DType::F32, shape: Shape::Dims(vec![fixed(n, "depth")]) };
                (Op::OneHot { label, depth }, ty)
            }
            "tokenize" => self.tokenize(&a)?,
            "check_finite" => {
                let (x, t) = self.tensor_arg(&name, a[0]?, DType::is_float, "a float value", None)?;
                (Op::CheckFinite { x }, t)
            }
            other => unreachable!("`{other}` is in SIGNATURES"),
        })
    }

    /// The `max_pixels` of `decode_jpeg`/`decode_png`: a constant from 1 to the runtime's
    /// cap ([`MAX_PIXELS`], 8192 × 8192), else E0409. A constant, as `channels`: the
    /// limit is part of the op, not of a run.
    fn max_pixels_arg(&mut self, op: &str, e: &ast::Expr) -> Option<u64> {
        let found = match &e.kind {
            A::Int(n) if (1..=MAX_PIXELS).contains(n) => return Some(*n),
            A::Int(n) if *n > MAX_PIXELS => format!("{n}, more than the {MAX_PIXELS} an image may have"),
            A::Int(_) | A::Float(_) => e.to_string(),
            A::Unary(ast::UnaryOp::Neg, inner) if matches!(inner.kind, A::Int(_) | A::Float(_)) => {
                e.to_string()
            }
            _ => match self.ty(e) {
                Some(x) if matches!(x.kind, ExprKind::Param { .. }) => {
                    "a parameter, known only at run time".to_string()
                }
                Some(x) if matches!(x.ty, ExprType::Int(_) | ExprType::Float) => {
                    "an expression: write the number itself".to_string()
                }
                Some(x) => x.ty.describe().to_string(),
                // A problem already reported (an unknown name).
                None => return None,
            },
        };
        self.diags.push(
            Diagnostic::error(
                "E0409",
                format!("`max_pixels` of `{op}` must be a constant from 1 to {MAX_PIXELS}"),
                e.span,
                format!("found {found}"),
            )
            .with_note(format!(
                "an image whose header claims more pixels is an error before it is decoded; \
                 without `max_pixels` the limit is {MAX_PIXELS} (8192 x 8192)"
            )),
        );
        None
    }

    /// `normalize(x, mean, std)`: one mean and deviation, or one per channel.
    fn normalize(&mut self, x: &ast::Expr, mean: &ast::Expr, std: &ast::Expr) -> Option<(Op, TensorType)> {
        let (xv, t) = self.tensor_arg(
            "normalize",
            x,
            |d| !matches!(d, DType::Bytes | DType::Str),
            "numbers (decode and cast first)",
            None,
        )?;
        let channels = match &t.shape {
            Shape::Dims(d) => match d.last() {
                Some(Dim::Fixed(c)) => Some(*c as usize),
                Some(Dim::Named(_)) => None,
                None => Some(1),
            },
            Shape::Var => None,
        };
        let mut values = Vec::new();
        for (what, arg) in [("mean", mean), ("std", std)] {
            let v = self.ty(arg)?;
            let n = match v.ty {
                ExprType::List(n) => n,
                ExprType::Int(_) | ExprType::Float => 1,
                ref other => {
                    self.diags.push(Diagnostic::error(
                        "E0405",
                        format!("`{what}` of `normalize` must be numbers"),
                        arg.span,
                        format!("this is {}", other.describe()),
                    ));
                    return None;
                }
            };
            if let Some(c) = channels
                && n != c
                && n != 1
            {
                self.diags.push(
                    Diagnostic::error(
                        "E0405",
                        format!("`{what}` has {n} values for {c} channel(s)"),
                        arg.span,
                        "one value per channel",
                    )
                    .with_label(x.span, format!("`{t}`")),
                );
                return None;
            }
            values.push(v);
        }
        let [mean, std] = <[Expr; 2]>::try_from(values).ok()?;
        Some((Op::Normalize { x: xv, mean, std }, TensorType { dtype: DType::F32, shape: t.shape }))
    }

    /// A call of something other than a built-in operation: `parse_example` in the wrong
    /// place, or a declared `extern fn`.
    fn call_other(
        &mut self,
        callee: &ast::Path,
        name: &str,
        args: &[ast::Arg],
        e: &ast::Expr,
    ) -> Option<(Op, TensorType)> {
        if name == "parse_example" || name == "parse_sequence_example" {
            self.diags.push(
                Diagnostic::error(
                    "E0400",
                    format!("`{name}` is a statement of its own"),
                    e.span,
                    "not a value",
                )
                .with_help(format!("write `{name}();` on its own line")),
            );
            return None;
        }
        let Some(decl) = self.decls.externs.iter().find(|x| x.path == name) else {
            let d = Diagnostic::error(
                "E0400",
                format!("unknown operation `{name}`"),
                callee.span,
                "not an operation",
            );
            let ops: Vec<&str> = op_names().collect();
            self.diags.push(match closest(name, &ops) {
                Some(c) => d.with_help(format!("did you mean `{c}`?")),
                None if name.contains("::") => {
                    d.with_help(format!("declare it: `extern fn {name}(x: f32[N]) -> f32[N];`"))
                }
                None => d.with_note(format!("the operations: {}", ops.join(", "))),
            });
            return None;
        };
        if args.len() != decl.params.len() || args.iter().any(|a| a.name.is_some()) {
            self.diags.push(
                Diagnostic::error(
                    "E0406",
                    format!("`{name}` takes {} positional argument(s)", decl.params.len()),
                    e.span,
                    format!("{} given", args.len()),
                )
                .with_label(decl.span, "declared here"),
            );
            return None;
        }
        // Named dimensions bind on first use and must agree after.
        let mut bound: Vec<(String, Dim)> = Vec::new();
        let mut values = Vec::new();
        for (a, (pname, pty)) in args.iter().zip(&decl.params) {
            let v = self.ty(&a.value)?;
            let t = match &v.ty {
                ExprType::Tensor(t) => t.clone(),
                ExprType::Int(_) if pty.dtype.is_int() && pty.shape == Shape::scalar() => {
                    values.push(v);
                    continue;
                }
                ExprType::Float if pty.dtype.is_float() && pty.shape == Shape::scalar() => {
                    values.push(v);
                    continue;
                }
                other => {
                    self.diags.push(
                        Diagnostic::error(
                            "E0406",
                            format!("argument `{pname}` of `{name}` must be `{pty}`"),
                            a.value.span,
                            format!("this is {}", other.describe()),
                        )
                        .with_label(decl.span, "declared here"),
                    );
                    return None;
                }
            };
            let shapes_agree = match (&pty.shape, &t.shape) {
                (Shape::Var, Shape::Var) => true,
                (Shape::Dims(want), Shape::Dims(have)) if want.len() == have.len() => {
                    want.iter().zip(have).all(|(w, h)| match w {
                        Dim::Fixed(_) => w == h,
                        Dim::Named(n) => match bound.iter().find(|(b, _)| b == n) {
                            Some((_, d)) => d == h,
                            None => {
                                bound.push((n.clone(), h.clone()));
                                true
                            }
                        },
                    })
                }
                _ => false,
            };
            if t.dtype != pty.dtype || !shapes_agree {
                self.diags.push(
                    Diagnostic::error(
                        "E0406",
                        format!("argument `{pname}` of `{name}` must be `{pty}`"),
                        a.value.span,
                        format!("this is `{t}`"),
                    )
                    .with_label(decl.span, "declared here"),
                );
                return None;
            }
            values.push(v);
        }
        let shape = match &decl.ret.shape {
            Shape::Dims(d) => Shape::Dims(
                d.iter()
                    .map(|x| match x {
                        Dim::Named(n) => {
                            bound.iter().find(|(b, _)| b == n).map_or(x.clone(), |(_, v)| v.clone())
                        }
                        other => other.clone(),
                    })
                    .collect(),
            ),
            s => s.clone(),
        };
        let ty = TensorType { dtype: decl.ret.dtype, shape };
        Some((Op::Extern { path: name.to_string(), args: values }, ty))
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::expr::{Expr, ExprKind};
    use crate::ir::op::Op;
    use crate::ir::plan::{MapOp, Plan};

    /// The typed value of `image = VALUE;`, the last statement of a map over decoded
    /// images.
    fn value(v: &str) -> Expr {
        let src = format!(
            "pipeline p(files: glob = \"d/*\", seed: u64 = 1) {{
                schema {{ image: bytes, label: i64 }}
                tfrecords(files);
                map {{ parse_example(); image = decode_raw(image, u8); image = reshape(image, [4, 4, 3]); image = {v}; }}
            }}"
        );
        let pipelines = crate::compile(&src).into_result().unwrap_or_else(|d| panic!("{v}: {d:?}"));
        let Plan::Map(m) = &pipelines[0].logical else { panic!("{}", pipelines[0].logical.explain()) };
        let Some(MapOp::Assign { value, .. }) = m.ops.last() else { panic!("{:?}", m.ops) };
        value.clone()
    }

    #[test]
    fn arguments_bind_once_whether_named_or_positional() {
        let positional = value("random_crop(image, 2, 3, seed)");
        let named = value("random_crop(height: 2, image: image, seed: seed, width: 3)");
        assert_eq!(positional, named);
        let Some(Op::RandomCrop { image, h, w, seed: Some(seed) }) = named.op() else { panic!("{named:?}") };
        assert_eq!((image.field(), &h.kind, &w.kind), (Some("image"), &ExprKind::Int(2), &ExprKind::Int(3)));
        assert!(matches!(&seed.kind, ExprKind::Param { name, .. } if name == "seed"));
        assert_eq!(named.tensor().map(ToString::to_string).as_deref(), Some("u8[2, 3, 3]"));
        assert_eq!(named.to_string(), "random_crop(image, 2, 3, seed)");
    }

    /// The source of a map decoding `image` with `call`, and its diagnostics.
    fn decode_errors(call: &str) -> (String, Vec<crate::diagnostic::Diagnostic>) {
        let src = format!(
            "pipeline p(files: glob = \"d/*\", limit: u64 = 64) {{
                schema {{ image: bytes, label: i64 }}
                tfrecords(files);
                map {{ parse_example(); image = {call}; }}
            }}"
        );
        let diags = crate::compile(&src).diagnostics;
        (src, diags)
    }

    #[test]
    fn max_pixels_is_a_constant_from_one_to_the_cap() {
        for (call, arg, found) in [
            ("decode_jpeg(image, channels: 3, max_pixels: 0)", "0", "0"),
            ("decode_png(image, max_pixels: 0)", "0", "0"),
            ("decode_jpeg(image, max_pixels: -5)", "-5", "-5"),
            ("decode_jpeg(image, 3, 2.5)", "2.5", "2.5"),
            ("decode_png(image, max_pixels: limit)", "limit", "a parameter, known only at run time"),
            (
                "decode_jpeg(image, max_pixels: 2048 * 2048)",
                "2048 * 2048",
                "an expression: write the number itself",
            ),
            ("decode_png(image, max_pixels: [1])", "[1]", "a list"),
            (
                "decode_jpeg(image, max_pixels: 67108865)",
                "67108865",
                "67108865, more than the 67108864 an image may have",
            ),
        ] {
            let (src, diags) = decode_errors(call);
            let [d] = &diags[..] else { panic!("{call}: {diags:?}") };
            assert_eq!(d.code, "E0409", "{call}: {d:?}");
            let op = &call[..call.find('(').unwrap()];
            assert_eq!(d.message, format!("`max_pixels` of `{op}` must be a constant from 1 to 67108864"));
            // The label is on the argument's value and says what it is.
            assert_eq!(&src[d.primary.span.start..d.primary.span.end], arg, "{call}");
            assert_eq!(d.primary.message, format!("found {found}"), "{call}");
        }
    }

    #[test]
    fn max_pixels_binds_named_or_positional_and_prints() {
        let named = value_of_decode("decode_jpeg(image, channels: 3, max_pixels: 4194304)");
        let positional = value_of_decode("decode_jpeg(image, 3, 4194304)");
        assert_eq!(named, positional);
        let Some(Op::DecodeImage { channels: Some(3), max_pixels: Some(4194304), .. }) = named.op() else {
            panic!("{named:?}")
        };
        assert_eq!(named.to_string(), "decode_jpeg(image, 3, max_pixels: 4194304)");
        assert_eq!(named.tensor().map(ToString::to_string).as_deref(), Some("u8[H, W, 3]"));
        // The largest value, and none at all.
        let cap = value_of_decode("decode_png(image, max_pixels: 67108864)");
        assert!(matches!(cap.op(), Some(Op::DecodeImage { channels: None, max_pixels: Some(67108864), .. })));
        let plain = value_of_decode("decode_png(image, 4)");
        assert!(matches!(plain.op(), Some(Op::DecodeImage { channels: Some(4), max_pixels: None, .. })));
        assert_eq!(plain.to_string(), "decode_png(image, 4)");
    }

    /// The typed value of `image = CALL;` right after `parse_example`.
    fn value_of_decode(call: &str) -> Expr {
        let src = format!(
            "pipeline p(files: glob = \"d/*\") {{
                schema {{ image: bytes, label: i64 }}
                tfrecords(files);
                map {{ parse_example(); image = {call}; }}
            }}"
        );
        let pipelines = crate::compile(&src).into_result().unwrap_or_else(|d| panic!("{call}: {d:?}"));
        let Plan::Map(m) = &pipelines[0].logical else { panic!("{}", pipelines[0].logical.explain()) };
        let Some(MapOp::Assign { value, .. }) = m.ops.last() else { panic!("{:?}", m.ops) };
        value.clone()
    }

    #[test]
    fn every_node_has_its_type_and_prints_as_pipe_text() {
        for (v, text, ty) in [
            ("cast(image, f32) * 2.0 - 1.0", "cast(image, f32) * 2.0 - 1.0", "f32[4, 4, 3]"),
            ("scale(image, 1.0 / 255.0)", "scale(image, 1.0 / 255.0)", "f32[4, 4, 3]"),
            (
                "normalize(image, std: [0.5, 0.5, 0.5], mean: [0.1, 0.2, 0.3])",
                "normalize(image, [0.1, 0.2, 0.3], [0.5, 0.5, 0.5])",
                "f32[4, 4, 3]",
            ),
            ("transpose(image, chw)", "transpose(image, chw)", "u8[3, 4, 4]"),
            ("random_flip(image)", "random_flip(image)", "u8[4, 4, 3]"),
        ] {
            let e = value(v);
            assert_eq!(e.to_string(), text);
            assert_eq!(e.tensor().map(ToString::to_string).as_deref(), Some(ty), "{v}");
            assert!(e.nodes().iter().all(|n| !matches!(n.kind, ExprKind::Field(_)) || n.tensor().is_some()));
            // The canonical text types to the same expression.
            assert_eq!(value(text), e, "{v}");
        }
    }

    #[test]
    fn check_finite_keeps_the_type_of_floats_of_any_shape_and_refuses_the_rest() {
        let typed = |src: &str| {
            let src = format!(
                "pipeline p(files: glob = \"d/*\") {{
                    schema {{ w: f32[], s: f64, g: f32[2, 3], n: i64 }}
                    tfrecords(files);
                    map {{ parse_example(); {src} }}
                }}"
            );
            match crate::compile(&src).into_result() {
                Ok(p) => p[0].logical.output().to_string(),
                Err(d) => crate::diagnostic::render("test.pipe", &src, &d),
            }
        };
        insta::assert_snapshot!(
            typed("w = check_finite(w); s = check_finite(s); g = check_finite(g); r = check_finite(1.0 / s);"),
            @"{w: f32[], s: f64, g: f32[2, 3], n: i64, r: f64}"
        );
        let e = typed("n = check_finite(n);");
        assert!(e.contains("error[E0403]: `check_finite` needs a float value"), "{e}");
    }
}
