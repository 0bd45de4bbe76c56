//! `lower_device_tail`: in a `device cuda` pipeline, the trailing per-row operations that
//! a GPU kernel can run (`cast`, `scale`, `normalize`, constant float arithmetic, `clamp`-
//! free chains of `transpose`, `center_crop`, `random_crop`, `random_flip`, `one_hot`)
//! move from the maps around the `batch` into the [`DeviceTail`](crate::ir::plan::DeviceTail) on top, where each
//! column they change becomes one fused kernel ([`Kernel`]). The CPU then ships the
//! smaller, earlier values (`u8` pixels rather than `f32` ones) and the GPU does the rest
//! in one pass per column.
//!
//! ```text
//! before                                        after
//! DeviceTail: kernels=[]                        DeviceTail: kernels=[tail_image(image:
//!   Prefetch                                                  random_crop, cast, scale)]
//!     Batch: size=256                             Prefetch
//!       Map: fns=[decode_png, random_crop,          Batch: size=256
//!                 cast, scale]                        Map: fns=[decode_png]
//! ```
//!
//! What moves is a suffix of the map right under the batch (a plain `batch`, or a fused
//! `MapBatch`) or of a map over the batches (`vectorize_past_batch`'s), reached through
//! stages that pass batches on without reading them (`prefetch`, `repeat`, `take`,
//! `skip`). Each moved operation assigns a field from itself and constants only (a
//! seed may be a parameter), on a fixed-shape value of a type kernels handle.
//!
//! The tail draws for row `i` of the pass's batch `b` with index `(b << 20) | i`, on the
//! GPU and in the CPU twin alike. A map fused with its batch (`MapBatch`) keys its rows
//! the same way, so there the draws do not change; a random operation moved out of a map
//! that feeds a separate `batch` (it drew with the element's position in the pass) draws
//! other numbers, as random and as reproducible.

use crate::ir::expr::{BinaryOp, Expr, ExprKind, UnaryOp};
use crate::ir::kernel::{Kernel, KernelOp, KernelSeed};
use crate::ir::op::{Layout, Op};
use crate::ir::plan::{Batch, Element, FieldType, MapOp, Plan, apply_ops};
use crate::ir::types::{DType, Dim, Shape, TensorType};

use super::{Rule, Transformed};

/// Moves a `device cuda` pipeline's trailing row operations into its device tail.
#[derive(Debug, Clone, Copy, Default)]
pub struct LowerDeviceTail;

impl Rule for LowerDeviceTail {
    fn name(&self) -> &'static str {
        "lower_device_tail"
    }

    /// Only the tail on top matters: this rule does not walk the chain.
    fn rewrite(&self, plan: Plan) -> Transformed {
        let Plan::DeviceTail(mut tail) = plan else { return Transformed::no(plan) };
        let mut changed = false;
        while let Some(moved) = take_suffix(producer(&mut tail.input)) {
            tail.ops.splice(0..0, moved);
            changed = true;
        }
        if changed {
            tail.kernels = kernels(&tail.input.output(), &tail.ops);
        }
        Transformed { plan: Plan::DeviceTail(tail), changed }
    }
}

/// The first node under `plan` that reads the batches' values.
fn producer(mut plan: &mut Plan) -> &mut Plan {
    while matches!(plan, Plan::Prefetch(_) | Plan::Repeat(_) | Plan::Take(_) | Plan::Skip(_)) {
        plan = plan.input_mut().expect("a pass-through node has an input");
    }
    plan
}

/// Takes the kernel-able suffix off the map that makes (or maps) the batches at `node`,
/// removing a map left empty; `None` when nothing moves.
fn take_suffix(node: &mut Plan) -> Option<Vec<MapOp>> {
    match node {
        // A map over batches.
        // Nothing leaves a `map(on_error: skip)`: its failures drop elements on the CPU.
        Plan::Map(m) if matches!(m.input.output(), Element::Batch(_)) && !m.skip_errors => {
            let input = m.input.output();
            let moved = split_suffix(&input, &mut m.ops)?;
            m.output = apply_ops(&input, &m.ops);
            if m.ops.is_empty() {
                let input = std::mem::replace(&mut m.input, Box::new(super::placeholder()));
                *node = *input;
            }
            Some(moved)
        }
        Plan::Batch(b) if b.padded.is_none() => {
            let Plan::Map(m) = &mut *b.input else { return None };
            if m.skip_errors {
                return None;
            }
            let input = m.input.output();
            let moved = split_suffix(&input, &mut m.ops)?;
            m.output = apply_ops(&input, &m.ops);
            if m.ops.is_empty() {
                let input = std::mem::replace(&mut m.input, Box::new(super::placeholder()));
                b.input = input;
            }
            Some(moved)
        }
        Plan::MapBatch(m) => {
            let input = m.input.output();
            let moved = split_suffix(&input, &mut m.ops)?;
            m.map_output = apply_ops(&input, &m.ops);
            if m.ops.is_empty() {
                let input = std::mem::replace(&mut m.input, Box::new(super::placeholder()));
                *node = Plan::Batch(Batch {
                    input,
                    size: m.size.clone(),
                    drop_remainder: m.drop_remainder,
                    padded: None,
                    pad_to_multiple: None,
                    padding_values: Default::default(),
                });
            }
            Some(moved)
        }
        _ => None,
    }
}

/// Splits off the longest suffix of `ops` (applied to `input`) that kernels can run.
fn split_suffix(input: &Element, ops: &mut Vec<MapOp>) -> Option<Vec<MapOp>> {
    let mut keep = ops.len();
    while keep > 0 {
        let before = apply_ops(input, &ops[..keep - 1]);
        if kernel_ops(&ops[keep - 1], before.fields()).is_none() {
            break;
        }
        keep -= 1;
    }
    (keep < ops.len()).then(|| ops.split_off(keep))
}

/// The kernels of `ops` on batches of `input`: one per field the operations change, its
/// operations in order; random operations numbered in the order of `ops` (the order the
/// CPU twin's code draws in).
pub fn kernels(input: &Element, ops: &[MapOp]) -> Vec<Kernel> {
    let mut kernels: Vec<Kernel> = Vec::new();
    let mut random = 0;
    for (i, op) in ops.iter().enumerate() {
        let before = apply_ops(input, &ops[..i]);
        let MapOp::Assign { target, .. } = op else { continue };
        let Some((mut kops, seed)) = kernel_ops(op, before.fields()) else { continue };
        let at = match kernels.iter().position(|k| &k.field == target) {
            Some(at) => at,
            None => {
                let ty = field_type(before.fields(), target).expect("checked by kernel_ops");
                kernels.push(Kernel {
                    name: format!("tail_{target}"),
                    field: target.clone(),
                    dtype: ty.dtype,
                    shape: fixed_shape(ty).expect("checked by kernel_ops"),
                    ops: Vec::new(),
                    seeds: Vec::new(),
                });
                kernels.len() - 1
            }
        };
        let k = &mut kernels[at];
        for kop in &mut kops {
            if let KernelOp::RandomCrop { op, seed: s, .. } | KernelOp::RandomFlip { op, seed: s } = kop {
                *op = random;
                *s = k.seeds.len();
                random += 1;
                k.seeds.push(seed.clone().expect("a random operation has a seed"));
            }
        }
        k.ops.extend(kops);
    }
    kernels
}

fn field_type<'a>(fields: &'a [FieldType], name: &str) -> Option<&'a TensorType> {
    fields.iter().find(|f| f.name == name)?.ty.as_ref()
}

fn fixed_shape(t: &TensorType) -> Option<Vec<usize>> {
    match &t.shape {
        Shape::Dims(d) => d
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => usize::try_from(*n).ok(),
                Dim::Named(_) => None,
            })
            .collect(),
        Shape::Var => None,
    }
}

/// The kernel operations of one map operation on `fields` (and the seed of a random one),
/// or `None` when a kernel cannot run it: it must assign a field from that field and
/// constants, on a fixed-shape value of a type kernels handle, and the chain it makes
/// must be possible ([`Kernel::stages`]).
fn kernel_ops(op: &MapOp, fields: &[FieldType]) -> Option<(Vec<KernelOp>, Option<KernelSeed>)> {
    let MapOp::Assign { target, value, ty, .. } = op else { return None };
    let from = field_type(fields, target)?;
    let shape = fixed_shape(from)?;
    fixed_shape(ty)?;
    let is_target = |e: &Expr| e.field() == Some(target.as_str());
    let int = |e: &Expr| match e.kind {
        ExprKind::Int(n) => usize::try_from(n).ok(),
        _ => None,
    };
    let mut seed = None;
    let ops = match &value.kind {
        ExprKind::Op(op) => {
            if !op.input().is_some_and(is_target) {
                return None;
            }
            let cast_to = |d: DType| if from.dtype == d { vec![] } else { vec![KernelOp::Cast(d)] };
            match &**op {
                // Rust's `as` saturates floats into integers where C's conversion is
                // undefined out of range; bools convert differently too: those stay on
                // the CPU.
                Op::Cast { .. } if from.dtype.is_float() && !ty.dtype.is_float() => return None,
                Op::Cast { .. } if from.dtype == DType::Bool || ty.dtype == DType::Bool => return None,
                // A scalar stays on the CPU (it is cheap there): a `one_hot` on the GPU then
                // reads the host's value, which the device feed range-checks.
                Op::Cast { .. } if shape.is_empty() => return None,
                Op::Cast { .. } => vec![KernelOp::Cast(ty.dtype)],
                Op::Scale { factor, .. } => {
                    let mut v = cast_to(ty.dtype);
                    v.push(KernelOp::Scale(const_num(factor, ty.dtype)?));
                    v
                }
                Op::Normalize { mean, std, .. } => {
                    let floats = |e: &Expr| -> Option<Vec<f32>> {
                        match &e.kind {
                            ExprKind::List(items) => {
                                items.iter().map(|i| const_num(i, DType::F32).map(|v| v as f32)).collect()
                            }
                            _ => Some(vec![const_num(e, DType::F32)? as f32]),
                        }
                    };
                    let (mean, std) = (floats(mean)?, floats(std)?);
                    // The runtime refuses a zero or non-finite deviation: leave it to say so.
                    if std.iter().any(|s| !s.is_finite() || *s == 0.0) {
                        return None;
                    }
                    let mut v = cast_to(DType::F32);
                    v.push(KernelOp::Normalize { mean, std });
                    v
                }
                Op::Transpose { layout: Layout::Chw, .. } => vec![KernelOp::TransposeChw],
                Op::Transpose { layout: Layout::Hwc, .. } => vec![KernelOp::TransposeHwc],
                Op::CenterCrop { h, w, .. } => vec![KernelOp::CenterCrop(int(h)?, int(w)?)],
                Op::RandomCrop { h, w, seed: s, .. } => {
                    seed = Some(seed_of(s.as_ref())?);
                    vec![KernelOp::RandomCrop { h: int(h)?, w: int(w)?, op: 0, seed: 0 }]
                }
                Op::RandomFlip { seed: s, .. } => {
                    seed = Some(seed_of(s.as_ref())?);
                    vec![KernelOp::RandomFlip { op: 0, seed: 0 }]
                }
                Op::OneHot { depth, .. } => vec![KernelOp::OneHot(int(depth)?)],
                _ => return None,
            }
        }
        ExprKind::Binary(..) if ty.dtype.is_float() && from.dtype == ty.dtype => {
            arith(value, &is_target, ty.dtype)?
        }
        _ => return None,
    };
    // The chain must be possible and give the type the map says.
    let k = Kernel {
        name: String::new(),
        field: target.clone(),
        dtype: from.dtype,
        shape,
        ops: ops.clone(),
        seeds: Vec::new(),
    };
    let (out_shape, out_dtype) = k.output().ok()?;
    (Some(out_shape) == fixed_shape(ty) && out_dtype == ty.dtype).then_some((ops, seed))
}

/// `x op c`, `c op x` (for `+` and `*`), nested: constant float arithmetic on the field.
fn arith(e: &Expr, is_target: &dyn Fn(&Expr) -> bool, dt: DType) -> Option<Vec<KernelOp>> {
    if is_target(e) {
        return Some(Vec::new());
    }
    let ExprKind::Binary(op, l, r) = &e.kind else { return None };
    let sym = match op {
        BinaryOp::Add => '+',
        BinaryOp::Sub => '-',
        BinaryOp::Mul => '*',
        BinaryOp::Div => '/',
        _ => return None,
    };
    if let Some(c) = const_num(r, dt) {
        let mut ops = arith(l, is_target, dt)?;
        ops.push(KernelOp::Arith(sym, c));
        return Some(ops);
    }
    // Addition and multiplication of floats commute exactly.
    let c = const_num(l, dt).filter(|_| matches!(sym, '+' | '*'))?;
    let mut ops = arith(r, is_target, dt)?;
    ops.push(KernelOp::Arith(sym, c));
    Some(ops)
}

/// A constant number expression evaluated as the generated Rust does in `dt`: literals
/// rounded to `dt`, then each operation in `dt` (so `1.0 / 255.0` in `f32` is the `f32`
/// quotient, not the rounded `f64` one).
fn const_num(e: &Expr, dt: DType) -> Option<f64> {
    let round = |v: f64| if dt == DType::F32 { f64::from(v as f32) } else { v };
    Some(match &e.kind {
        ExprKind::Int(n) => round(*n as f64),
        ExprKind::Float(x) => round(*x),
        ExprKind::Unary(UnaryOp::Neg, x) => -const_num(x, dt)?,
        ExprKind::Binary(op, l, r) => {
            let (a, b) = (const_num(l, dt)?, const_num(r, dt)?);
            round(match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div => a / b,
                _ => return None,
            })
        }
        _ => return None,
    })
}

/// The seed of a random operation: a constant, a parameter, or none (the run's seed).
fn seed_of(e: Option<&Expr>) -> Option<KernelSeed> {
    match e.map(|e| &e.kind) {
        None => Some(KernelSeed::Run),
        Some(ExprKind::Int(n)) => Some(KernelSeed::Const(*n)),
        Some(ExprKind::Param { name, .. }) => Some(KernelSeed::Param(name.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::check;

    fn pipe(device: &str, body: &str, batch: &str) -> String {
        format!(
            "pipeline p(files: glob = \"d/*\", seed: u64 = 7) {{
                device {device};
                schema {{ image: bytes, label: i64 }}
                tfrecords(files);
                map {{
                    parse_example();
                    image = decode_raw(image, u8);
                    image = reshape(image, [8, 8, 3]);
                    {body}
                }}
                {batch}
                prefetch(2);
            }}"
        )
    }

    #[test]
    fn applies_to_the_kernel_able_suffix_through_a_prefetch() {
        let text = check(
            &LowerDeviceTail,
            &pipe(
                "cuda",
                "image = random_crop(image, 6, 6, seed: seed);
                 image = random_flip(image);
                 image = cast(image, f32);
                 image = scale(image, 1.0 / 255.0);
                 image = image * 2.0 - 1.0;
                 image = transpose(image, chw);
                 label = one_hot(label, 10);",
                "batch(32);",
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        DeviceTail: device=cuda, kernels=[tail_image(image: random_crop, random_flip, cast, scale, expr, transpose), tail_label(label: one_hot)] -> batch<{image: f32[3, 6, 6], label: f32[10]}>
          Prefetch: buffer=2 -> batch<{image: u8[8, 8, 3], label: i64}>
            Batch: size=32, drop_remainder=false -> batch<{image: u8[8, 8, 3], label: i64}>
              Map: fns=[parse_example, decode_raw, reshape], parses=[image, label], parallel=1, deterministic=true -> {image: u8[8, 8, 3], label: i64}
                Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                  Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn the_kernels_number_random_ops_in_order_and_keep_their_seeds() {
        let checked = crate::compile(&pipe(
            "cuda",
            "image = random_crop(image, 6, 6, seed: seed);
             image = random_flip(image, seed: 3);
             image = random_flip(image);
             image = cast(image, f32);
             image = scale(image, 1.0 / 3.0);",
            "batch(32);",
        ))
        .into_result()
        .unwrap();
        let plan = super::super::fuse(checked[0].optimized.plan.clone()).plan;
        let Plan::DeviceTail(tail) = plan else { panic!("{}", plan.explain()) };
        let [k] = &tail.kernels[..] else { panic!("{:?}", tail.kernels) };
        assert_eq!(
            k.ops,
            [
                KernelOp::RandomCrop { h: 6, w: 6, op: 0, seed: 0 },
                KernelOp::RandomFlip { op: 1, seed: 1 },
                KernelOp::RandomFlip { op: 2, seed: 2 },
                KernelOp::Cast(DType::F32),
                // The f32 quotient, as the generated Rust computes it.
                KernelOp::Scale(f64::from(1.0f32 / 3.0f32)),
            ]
        );
        assert_eq!(k.seeds, [KernelSeed::Param("seed".into()), KernelSeed::Const(3), KernelSeed::Run]);
        assert_eq!((k.dtype, &k.shape[..]), (DType::U8, &[8, 8, 3][..]));
    }

    #[test]
    fn takes_from_a_map_over_batches_and_a_fused_map_batch() {
        // Optimized and fused: `vectorize_past_batch` moves `cast` and `scale` after the
        // batch, `fuse_map_batch` fuses the rest; the tail takes from both.
        let checked = crate::compile(&pipe(
            "cuda",
            "image = center_crop(image, 4, 4); image = cast(image, f32); image = scale(image, 0.5);",
            "batch(8);",
        ))
        .into_result()
        .unwrap();
        let plan = super::super::fuse(checked[0].optimized.plan.clone()).plan;
        insta::assert_snapshot!(plan.explain(), @r"
        DeviceTail: device=cuda, kernels=[tail_image(image: center_crop, cast, scale)] -> batch<{image: f32[4, 4, 3], label: i64}>
          Prefetch: buffer=2 -> batch<{image: u8[8, 8, 3], label: i64}>
            MapBatch: fns=[parse_example, decode_raw, reshape], parses=[image, label], parallel=1, deterministic=true, size=8, drop_remainder=false -> batch<{image: u8[8, 8, 3], label: i64}>
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn stops_at_what_a_kernel_cannot_run() {
        // `resize` stays, and so does everything before it.
        let text = check(
            &LowerDeviceTail,
            &pipe(
                "cuda",
                "image = scale(image, 2.0); image = resize(image, 4, 4); image = transpose(image, chw);",
                "batch(8);",
            ),
        );
        assert!(text.contains("kernels=[tail_image(image: transpose)]"), "{text}");
        assert!(text.contains("fns=[parse_example, decode_raw, reshape, scale, resize]"), "{text}");
        for (device, body, batch) in [
            // Not a `device cuda` pipeline: no tail at all.
            ("cpu", "image = cast(image, f32);", "batch(8);"),
            // Padding would go through the kernel too.
            ("cuda", "image = cast(image, f32);", "padded_batch(8);"),
            // Rust's saturating float-to-integer `as` has no C equivalent.
            ("cuda", "image = cast(image, f32); image = cast(image, u8);", "batch(8);"),
            // A filter reads the values between the map and the batch.
            ("cuda", "image = cast(image, f32); } filter(label > 0); map { label = label;", "batch(8);"),
            // A factor known only at run time (the kernel's constants are in its source).
            ("cuda", "image = cast(image, f32); image = scale(image, seed);", "batch(8);"),
        ] {
            let text = check(&LowerDeviceTail, &pipe(device, body, batch));
            assert!(text.starts_with("changed=false"), "{device} {body} {batch}\n{text}");
        }
    }
}
