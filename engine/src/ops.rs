//! The per-field operations that make a new value rather than a value per value
//! (`decode_raw`, `parse_tensor`, `decode_jpeg` / `decode_png`, `reshape`, `resize`,
//! `center_crop`, `random_crop`, `random_flip`, `transpose`, `tokenize`), each through
//! the very runtime function the generated code calls (`abi::ops`, `abi::tokenize`), so
//! values and errors are the compiled pipeline's.
//!
//! A random operation draws from `abi::ops::element_rng(seed, id, epoch, index)` as the
//! generated code does: `id` is its position among the pipeline's random operations
//! (the code generator numbers them in the order it prints them, an operation's operand
//! before it), `epoch` and `index` those of the element (`Draws`).

use std::borrow::Cow;
use std::cell::Cell;

use sluice_compiler::ir::expr::{Expr, ExprKind};
use sluice_compiler::ir::op::{Layout, Op};
use sluice_compiler::ir::types::{DType, Dim};
use sluice_runtime::BoxError;
use sluice_runtime::abi::{self, ops};
use sluice_runtime::column::Tensor;
use sluice_runtime::rng::Philox;

use crate::eval::Eval;
use crate::num::Num;
use crate::value::{Data, Kind, Value};

type R<T> = Result<T, BoxError>;

/// Where an element's random operations draw: its epoch and index (as the runtime's
/// `enumerate` numbers it; a row of a batch `(index << 20) | row`), and the id of the
/// next random operation of the statement being evaluated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Draws {
    /// The element's epoch.
    pub epoch: u64,
    /// The element's index.
    pub index: u64,
    /// The id of the next random operation met.
    pub next: u64,
}

thread_local! {
    /// The draws of the statement this thread evaluates ([`with_draws`]); `None` outside
    /// a map's statement (a filter has no random operation).
    static DRAWS: Cell<Option<Draws>> = const { Cell::new(None) };
}

/// `f` with the statement's random operations drawing from `draws`; the draws after it
/// (the next id).
pub fn with_draws<T>(draws: Draws, f: impl FnOnce() -> T) -> (T, Draws) {
    let saved = DRAWS.replace(Some(draws));
    let out = f();
    let after = DRAWS.replace(saved).unwrap_or(draws);
    (out, after)
}

/// Whether `op` makes a whole new value (this module's operations), not one value per
/// value of its input (`cast`, `scale`, `normalize`, `one_hot`, `check_finite`: `eval`).
pub fn is_structural(op: &Op) -> bool {
    matches!(
        op,
        Op::DecodeRaw { .. }
            | Op::ParseTensor { .. }
            | Op::DecodeImage { .. }
            | Op::Reshape { .. }
            | Op::Resize { .. }
            | Op::CenterCrop { .. }
            | Op::RandomCrop { .. }
            | Op::RandomFlip { .. }
            | Op::Transpose { .. }
            | Op::Tokenize { .. }
    )
}

/// Whether a map draws random numbers.
pub fn random(f: &sluice_compiler::physical::MapFn) -> bool {
    use sluice_compiler::ir::plan::MapOp;
    f.ops.iter().any(|op| matches!(op, MapOp::Assign { value, .. } if value.is_random()))
}

/// How many random operations `e` holds (each gets one id).
pub fn random_ops(e: &Expr) -> u64 {
    e.nodes().into_iter().filter(|n| n.op().is_some_and(Op::is_random)).count() as u64
}

/// A value type of the engine's buffers.
trait Held: Sized {
    fn data(v: Vec<Self>) -> Data;
}

macro_rules! held {
    ($($t:ty => $v:ident),*) => {$(
        impl Held for $t {
            fn data(v: Vec<$t>) -> Data {
                Data::$v(v)
            }
        }
    )*};
}
held!(bool => Bool, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

fn tensor_value<T: Held + sluice_runtime::column::Scalar>(t: Tensor<T>, kind: Kind) -> Value {
    let (shape, v) = t.into_parts();
    Value { data: T::data(v), shape, kind }
}

fn list<T: Held>(v: Vec<T>) -> Value {
    let n = v.len();
    Value { data: T::data(v), shape: vec![n], kind: Kind::List }
}

/// Calls `$body` with `$t` bound to the value `$v` as a runtime `Tensor` of its dtype
/// (`$other` for byte strings and text).
macro_rules! with_tensor {
    ($v:expr, $t:ident => $body:expr) => {{
        let v: Value = $v;
        let shape = v.shape;
        match v.data {
            Data::Bool(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::U8(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::I32(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::U32(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::I64(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::U64(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::F32(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::F64(d) => {
                let $t = Tensor::new(shape, d)?;
                $body
            }
            Data::Bytes(_) | Data::Str(_) => {
                return Err("an image or tensor operation on byte strings".into());
            }
        }
    }};
}

/// Calls `$body` with `$t` bound to the Rust type of the dtype `$d` among the numbers
/// `$($ty)*` (`$other` for the rest).
macro_rules! typed {
    ($d:expr, [$($dt:ident => $ty:ty),*], $t:ident => $body:expr, $other:expr) => {
        match $d {
            $(DType::$dt => { type $t = $ty; $body })*
            _ => $other,
        }
    };
}

impl Eval<'_> {
    /// The value of `e` itself: a field's value borrowed, anything else computed.
    pub(crate) fn operand(&self, e: &Expr) -> R<Cow<'_, Value>> {
        if let ExprKind::Field(name) = &e.kind {
            return self.row.get(name).map(Cow::Borrowed).ok_or_else(|| format!("no field `{name}`").into());
        }
        let ty = e.tensor().ok_or_else(|| format!("`{e}` is not a value"))?;
        Ok(Cow::Owned(self.value(e, ty)?))
    }

    /// The bytes of a byte-string (or text) value.
    pub(crate) fn with_bytes<T>(&self, e: &Expr, f: impl FnOnce(&[u8]) -> R<T>) -> R<T> {
        let v = self.operand(e)?;
        match &v.data {
            Data::Bytes(b) => f(b.first().map_or(&[][..], Vec::as_slice)),
            Data::Str(s) => f(s.first().map_or("", String::as_str).as_bytes()),
            _ => Err(format!("`{e}` is not a byte string").into()),
        }
    }

    /// A count argument (`(v as u64) as usize`).
    pub(crate) fn count(&self, e: &Expr) -> R<usize> {
        match self.scalar(e, 0, DType::U64)? {
            Num::U64(n) => Ok(n as usize),
            _ => Err("a count".into()),
        }
    }

    /// The generator of the next random operation of the element.
    fn rng(&self, seed: Option<&Expr>) -> R<Philox> {
        let seed = match seed {
            Some(s) => match self.scalar(s, 0, DType::U64)? {
                Num::U64(n) => n,
                _ => return Err("a seed".into()),
            },
            None => abi::run_seed(),
        };
        let mut draws = DRAWS.get().ok_or("a random operation outside a map")?;
        let id = draws.next;
        draws.next += 1;
        DRAWS.set(Some(draws));
        Ok(ops::element_rng(seed, id, draws.epoch, draws.index))
    }

    /// The value of the operation `op` (the call `e`).
    pub(crate) fn structural(&self, op: &Op, e: &Expr) -> R<Value> {
        let ty = e.tensor().ok_or_else(|| format!("`{e}` is not a value"))?;
        let out = ty.dtype;
        Ok(match op {
            Op::DecodeRaw { bytes, .. } => self.with_bytes(bytes, |b| {
                typed!(out, [U8 => u8, I32 => i32, U32 => u32, I64 => i64, U64 => u64, F32 => f32, F64 => f64],
                    T => Ok(list(ops::decode_raw::<T>(b)?)),
                    Err(format!("`decode_raw` to {out}").into()))
            })?,
            Op::ParseTensor { bytes, dims, .. } => self.with_bytes(bytes, |b| {
                typed!(out, [U8 => u8, I32 => i32, U32 => u32, I64 => i64, F32 => f32, F64 => f64],
                    T => Ok(match dims {
                        None => list(ops::parse_tensor_values::<T>(b)?),
                        Some(d) if d.is_empty() => Value::scalar(T::data(vec![ops::parse_tensor_scalar::<T>(b)?])),
                        Some(d) => {
                            let dims: Vec<Option<usize>> = d
                                .iter()
                                .map(|d| match d {
                                    Dim::Fixed(n) => Some(*n as usize),
                                    Dim::Named(_) => None,
                                })
                                .collect();
                            tensor_value(ops::parse_tensor::<T>(b, &dims)?, Kind::Tensor)
                        }
                    }),
                    Err(format!("`parse_tensor` to {out}").into()))
            })?,
            Op::DecodeImage { format, bytes, channels, max_pixels } => {
                let c = channels.map_or(3, |n| n as usize);
                let t = self.with_bytes(bytes, |b| {
                    use sluice_compiler::ir::op::ImageFormat::{Jpeg, Png};
                    match (format, max_pixels) {
                        (Jpeg, None) => ops::decode_jpeg(b, c),
                        (Jpeg, Some(n)) => ops::decode_jpeg_limited(b, c, *n as usize),
                        (Png, None) => ops::decode_png(b, c),
                        (Png, Some(n)) => ops::decode_png_limited(b, c, *n as usize),
                    }
                })?;
                tensor_value(t, Kind::Tensor)
            }
            Op::Reshape { x, dims } => {
                let dims: Vec<usize> = dims.iter().map(|n| *n as usize).collect();
                let v = self.operand(x)?.into_owned();
                with_tensor!(v, t => tensor_value(ops::reshape(t, &dims)?, Kind::Tensor))
            }
            Op::Resize { image, h, w } => {
                let v = self.operand(image)?.into_owned();
                let (h, w) = (self.count(h)?, self.count(w)?);
                with_tensor!(v, t => tensor_value(ops::resize(&t, h, w)?, Kind::Tensor))
            }
            Op::CenterCrop { image, h, w } => {
                let v = self.operand(image)?.into_owned();
                let (h, w) = (self.count(h)?, self.count(w)?);
                with_tensor!(v, t => tensor_value(ops::center_crop(&t, h, w)?, Kind::Tensor))
            }
            Op::RandomCrop { image, h, w, seed } => {
                let v = self.operand(image)?.into_owned();
                let (h, w) = (self.count(h)?, self.count(w)?);
                let mut rng = self.rng(seed.as_ref())?;
                with_tensor!(v, t => tensor_value(ops::random_crop(&t, h, w, &mut rng)?, Kind::Tensor))
            }
            Op::RandomFlip { image, seed } => {
                let v = self.operand(image)?.into_owned();
                let mut rng = self.rng(seed.as_ref())?;
                flip(v, &mut rng)?
            }
            Op::Transpose { x, layout } => {
                let v = self.operand(x)?.into_owned();
                match layout {
                    Layout::Chw => with_tensor!(v, t => tensor_value(ops::transpose_chw(&t)?, Kind::Tensor)),
                    Layout::Hwc => with_tensor!(v, t => tensor_value(ops::transpose_hwc(&t)?, Kind::Tensor)),
                }
            }
            Op::Tokenize { text, tokenizer, add_bos, add_eos } => {
                let path = self.tokenizer_path(tokenizer)?;
                list(self.with_bytes(text, |b| abi::tokenize::tokenize(b, &path, *add_bos, *add_eos))?)
            }
            other => return Err(format!("`{}` is not an operation of this module", other.name()).into()),
        })
    }

    /// The file of a `tokenize`: a string literal or a `path` / `string` parameter.
    pub(crate) fn tokenizer_path(&self, e: &Expr) -> R<String> {
        match &e.kind {
            ExprKind::Str(s) => Ok(s.clone()),
            ExprKind::Param { name, .. } => match self.params.get(name) {
                Some(crate::params::Param::Text(s)) => Ok(s.clone()),
                _ => Err(format!("parameter `{name}` is not a file").into()),
            },
            _ => Err(format!("the tokenizer `{e}` is not a file").into()),
        }
    }
}

/// `random_flip` of a value, as `abi::ops::Flip` of its generated type: a list is a
/// `Vec` (reversed), a scalar a number (one draw, unchanged), a tensor a `Tensor`.
fn flip(v: Value, rng: &mut Philox) -> R<Value> {
    use ops::Flip;
    let kind = v.kind;
    macro_rules! flip_as {
        ($d:expr, $variant:ident) => {{
            let d = $d;
            match kind {
                Kind::List => Data::$variant(d.random_flip(rng)),
                Kind::Scalar => Data::$variant(vec![d[0].random_flip(rng)]),
                Kind::Tensor => {
                    let (_, d) = Tensor::new(v.shape.clone(), d)?.random_flip(rng).into_parts();
                    Data::$variant(d)
                }
            }
        }};
    }
    let data = match v.data {
        Data::Bool(d) => flip_as!(d, Bool),
        Data::U8(d) => flip_as!(d, U8),
        Data::I32(d) => flip_as!(d, I32),
        Data::U32(d) => flip_as!(d, U32),
        Data::I64(d) => flip_as!(d, I64),
        Data::U64(d) => flip_as!(d, U64),
        Data::F32(d) => flip_as!(d, F32),
        Data::F64(d) => flip_as!(d, F64),
        Data::Bytes(_) | Data::Str(_) => return Err("`random_flip` of byte strings".into()),
    };
    Ok(Value { data, shape: v.shape, kind })
}

/// Loads each tokenizer a statement uses, as the generated `dataset()` does before its
/// stages: a missing or bad file is an error (the runtime's) before any element.
pub fn preload(e: &Expr, eval: &Eval<'_>) -> sluice_runtime::Result<()> {
    for n in e.nodes() {
        if let Some(Op::Tokenize { tokenizer, add_bos, add_eos, .. }) = n.op() {
            let path =
                eval.tokenizer_path(tokenizer).map_err(|e| sluice_runtime::Error::Invalid(e.to_string()))?;
            abi::tokenize::tokenizer(&path, *add_bos, *add_eos)?;
        }
    }
    Ok(())
}

thread_local! {
    /// The id the next random operation of the pipeline being built gets.
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// The ids of `n` random operations, the next ones of the pipeline being built (the code
/// generator numbers a pipeline's random operations in stage order): the first.
pub fn take_ids(n: u64) -> u64 {
    let first = NEXT_ID.get();
    NEXT_ID.set(first + n);
    first
}

/// While it lives, the random operations built are numbered from 0 (a pipeline's own);
/// the numbering of the pipeline around it comes back when it is dropped.
#[must_use]
pub struct Ids(u64);

impl Ids {
    /// Numbering from 0.
    pub fn fresh() -> Ids {
        Ids::starting(0)
    }

    /// Numbering from `first` (a `flat_map`'s inner chain: where the pipeline's
    /// numbering was when the chain was first built).
    pub fn starting(first: u64) -> Ids {
        Ids(NEXT_ID.replace(first))
    }
}

impl Drop for Ids {
    fn drop(&mut self) {
        NEXT_ID.set(self.0);
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use sluice_runtime::example::tensor::{TensorProto, TensorShapeDim, TensorShapeProto};
    use sluice_runtime::example::{Example, Feature};
    use sluice_runtime::stage::Dataset;
    use sluice_runtime::tfrecord::{self, Compression};

    use super::*;
    use crate::value::{Item, Row};

    /// A TFRecord file of `records` (Examples of the named byte strings and `i64`s).
    fn file(name: &str, records: &[Vec<(&str, Feature)>]) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("sluice-engine-ops-{}-{name}.tfrecord", std::process::id()));
        let mut w = tfrecord::create(&path, Compression::None).unwrap();
        for r in records {
            let e = Example::from_features(r.iter().map(|(k, f)| (k.to_string(), f.clone())));
            w.write_record(&e.encode_record()).unwrap();
        }
        w.finish().unwrap();
        path
    }

    /// The rows of the first pipeline of `source` over `files`, then its error, if any.
    fn rows(source: &str, files: &Path) -> (Vec<Row>, Option<String>) {
        let c = sluice_compiler::compile(source);
        assert!(!c.has_errors(), "{:?}", c.diagnostics);
        let p = &c.pipelines[0];
        crate::check(p).unwrap();
        let params = crate::params(p, &[("files".to_string(), files.display().to_string())]).unwrap();
        let (mut out, mut error) = (Vec::new(), None);
        for x in crate::dataset(p, &params).unwrap().stream().unwrap() {
            match x {
                Ok(Item::Row(r)) => out.push(r),
                Ok(other) => panic!("a row, not {other:?}"),
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        (out, error)
    }

    fn u8s<A: ops::Array<u8>>(v: A) -> Vec<u8> {
        v.values().to_vec()
    }

    fn bytes(v: Vec<u8>) -> Feature {
        Feature::bytes([v])
    }

    #[test]
    fn raw_images_are_cropped_and_flipped_as_the_generated_code_draws() {
        let image =
            |i: u8| (0..64 * 64 * 3).map(|k: u32| (k as u8).wrapping_mul(7).wrapping_add(i)).collect();
        let mut records: Vec<Vec<(&str, Feature)>> =
            (0..4).map(|i| vec![("image", bytes(image(i)))]).collect();
        records.push(vec![("image", bytes(vec![1, 2, 3, 4, 5]))]);
        let path = file("raw", &records);
        let (got, error) = rows(
            "pipeline p(files: glob) { schema { image: bytes } tfrecords(files); map { parse_example(); \
             image = decode_raw(image, u8); image = reshape(image, [64, 64, 3]); \
             image = random_crop(image, 8, 8, seed: 5); image = random_flip(image, seed: 5); \
             t = transpose(image, chw); } }",
            &path,
        );
        assert_eq!(got.len(), 4);
        for (i, row) in got.iter().enumerate() {
            // The generated code: op ids 0 and 1, element `i` of epoch 0.
            let t = ops::reshape(ops::decode_raw::<u8>(&image(i as u8)).unwrap(), &[64, 64, 3]).unwrap();
            let t = ops::random_crop(&t, 8, 8, &mut ops::element_rng(5, 0, 0, i as u64)).unwrap();
            let t = ops::Flip::random_flip(t, &mut ops::element_rng(5, 1, 0, i as u64));
            let chw = ops::transpose_chw(&t).unwrap();
            assert_eq!(row.get("image").unwrap().data, Data::U8(u8s(t)), "record {i}");
            let v = row.get("t").unwrap();
            assert_eq!((&v.shape[..], v.kind), (&[3, 8, 8][..], Kind::Tensor));
            assert_eq!(v.data, Data::U8(u8s(chw)));
        }
        let error = error.expect("the fifth record fails");
        assert!(error.ends_with("record 4: reshape: 5 values do not fit the shape [64, 64, 3]"), "{error}");
    }

    #[test]
    fn images_decode_resize_and_crop_through_the_runtime() {
        let fixture = |f: &str| {
            std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/image").join(f))
                .unwrap()
        };
        let (png, jpeg) = (fixture("gray_9x13.png"), fixture("rgb_64x48.jpg"));
        let path = file("images", &[vec![("png", bytes(png.clone())), ("jpeg", bytes(jpeg.clone()))]]);
        let (got, error) = rows(
            "pipeline p(files: glob) { schema { png: bytes, jpeg: bytes } tfrecords(files); map { parse_example(); \
             png = center_crop(resize(decode_png(png, channels: 1), 6, 6), 4, 4); \
             jpeg = cast(decode_jpeg(jpeg), f32) * 2.0; } }",
            &path,
        );
        assert_eq!(error, None);
        let png_t =
            ops::center_crop(&ops::resize(&ops::decode_png(&png, 1).unwrap(), 6, 6).unwrap(), 4, 4).unwrap();
        let v = got[0].get("png").unwrap();
        assert_eq!((&v.shape[..], &v.data), (&[4, 4, 1][..], &Data::F32(png_t.as_slice().to_vec())));
        let j = ops::decode_jpeg(&jpeg, 3).unwrap();
        let v = got[0].get("jpeg").unwrap();
        assert_eq!(v.shape, j.shape());
        assert_eq!(v.data, Data::F32(j.as_slice().iter().map(|&p| f32::from(p) * 2.0).collect()));

        // `max_pixels` below the image's: the runtime's error, naming the record.
        let (got, error) = rows(
            "pipeline p(files: glob) { schema { jpeg: bytes } tfrecords(files); map { parse_example(); \
             jpeg = decode_jpeg(jpeg, max_pixels: 100); } }",
            &path,
        );
        let want = ops::decode_jpeg_limited(&jpeg, 3, 100).unwrap_err().to_string();
        assert!(got.is_empty());
        assert!(error.as_deref().is_some_and(|e| e.ends_with(&format!("record 0: {want}"))), "{error:?}");
    }

    #[test]
    fn serialized_tensors_parse_to_their_shapes() {
        let proto = |dtype: i32, dims: &[i64], content: Vec<u8>| {
            let dim = dims.iter().map(|&size| TensorShapeDim { size, name: String::new() }).collect();
            TensorProto {
                dtype,
                tensor_shape: Some(TensorShapeProto { dim, unknown_rank: false }),
                tensor_content: content,
                ..Default::default()
            }
            .to_bytes()
        };
        let floats: Vec<u8> = (0..6).flat_map(|i| (i as f32 * 0.5).to_le_bytes()).collect();
        let ids: Vec<u8> = [7i64, -2, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let path = file(
            "tensors",
            &[
                vec![
                    ("t", bytes(proto(1, &[2, 3], floats.clone()))),
                    ("ids", bytes(proto(9, &[3], ids.clone()))),
                    ("label", bytes(proto(9, &[], 41i64.to_le_bytes().to_vec()))),
                ],
                vec![
                    ("t", bytes(proto(1, &[3, 2], floats))),
                    ("ids", bytes(proto(9, &[3], ids))),
                    ("label", bytes(proto(9, &[], vec![0; 8]))),
                ],
            ],
        );
        let (got, error) = rows(
            "pipeline p(files: glob) { schema { t: bytes, ids: bytes, label: bytes } tfrecords(files); \
             map { parse_example(); ids = parse_tensor(ids, i64); t = parse_tensor(t, f32, [n, 3]); \
             label = parse_tensor(label, i64, []) + 1; } }",
            &path,
        );
        assert_eq!(got.len(), 1);
        let r = &got[0];
        assert_eq!(
            r.get("ids").unwrap(),
            &Value { data: Data::I64(vec![7, -2, 9]), shape: vec![3], kind: Kind::List }
        );
        assert_eq!(
            r.get("t").unwrap(),
            &Value {
                data: Data::F32(vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]),
                shape: vec![2, 3],
                kind: Kind::Tensor
            }
        );
        assert_eq!(r.get("label").unwrap(), &Value::scalar(Data::I64(vec![42])));
        let error = error.unwrap();
        assert!(
            error.ends_with("record 1: parse_tensor: the tensor's shape is [3, 2], not the [_, 3] declared"),
            "{error}"
        );
    }

    #[test]
    fn text_tokenizes_with_the_runtime_tokenizer_loaded_first() {
        let tokenizer = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/text/tokenizer.json");
        let path = file("text", &[vec![("line", bytes(b"hello, tokens".to_vec()))]]);
        let source = |t: &Path| {
            format!(
                "pipeline p(files: glob) {{ schema {{ line: str }} tfrecords(files); \
                 map {{ parse_example(); ids = tokenize(line, \"{}\", add_eos: true); flipped = random_flip(ids); }} }}",
                t.display()
            )
        };
        let (got, error) = rows(&source(&tokenizer), &path);
        assert_eq!(error, None);
        let want =
            abi::tokenize::tokenize(b"hello, tokens", tokenizer.to_str().unwrap(), false, true).unwrap();
        let ids = got[0].get("ids").unwrap();
        assert_eq!((&ids.data, ids.kind), (&Data::I32(want.clone()), Kind::List));
        let flipped = ops::Flip::random_flip(want, &mut ops::element_rng(abi::run_seed(), 0, 0, 0));
        assert_eq!(got[0].get("flipped").unwrap().data, Data::I32(flipped));

        // A missing tokenizer file: an error when the dataset is built.
        let c = sluice_compiler::compile(&source(Path::new("/no/such/tokenizer.json")));
        let p = &c.pipelines[0];
        let params = crate::params(p, &[("files".to_string(), path.display().to_string())]).unwrap();
        assert!(crate::dataset(p, &params).is_err());
    }
}
