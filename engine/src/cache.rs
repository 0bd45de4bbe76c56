//! `cache(file)`: the runtime's `cache_file` over each element's encoding ([`Encoded`]),
//! which is the generated record's `CacheCodec` byte for byte (its fields in order: a
//! scalar's little-endian bytes, a list as `Vec<T>`, a tensor as `Tensor<T>`, a byte string
//! or string as its length and bytes; a record as its bytes), so that either backend
//! replays a cache the other wrote. Replayed elements are decoded with the plan's types.
//! The file's header holds the pipeline's fingerprint ([`crate::resume::fingerprint`], the
//! generated `fingerprint(params)`): another plan, other parameters or other files rebuild it.

use std::cell::Cell;

use sluice_compiler::ir::plan::{Element as Elem, FieldType};
use sluice_compiler::ir::types::{DType, Shape};
use sluice_runtime::BoxError;
use sluice_runtime::stage::{CacheCodec, Dataset, Element, Record};

use crate::build::Ds;
use crate::value::{Data, Item, Kind, Names, Row, Value, numeric};

/// One element as the generated record's `CacheCodec` encodes it.
#[derive(Debug, Clone)]
struct Encoded(Vec<u8>);

impl Element for Encoded {
    const FLAT: bool = false;
    fn byte_size(&self) -> usize {
        size_of::<Self>() + self.0.len()
    }
}

/// The bytes as they are: the cache file's entry is the element's encoding.
impl CacheCodec for Encoded {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
    fn decode(bytes: &mut &[u8]) -> Result<Self, String> {
        let all = std::mem::take(bytes);
        Ok(Encoded(all.to_vec()))
    }
}

thread_local! {
    /// The fingerprint of the pipeline being built, when it caches to a file.
    static FINGERPRINT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// While it lives, the pipeline being built has this fingerprint; the one of the pipeline
/// around it (a `zip`'s) comes back when it is dropped.
#[must_use]
pub(crate) struct Fingerprint(Option<u64>);

impl Fingerprint {
    pub(crate) fn set(f: Option<u64>) -> Fingerprint {
        Fingerprint(FINGERPRINT.replace(f))
    }
}

impl Drop for Fingerprint {
    fn drop(&mut self) {
        FINGERPRINT.set(self.0);
    }
}

/// An element decoded from its cache entry.
type Decode = dyn Fn(&[u8]) -> Result<Item, String> + Send + Sync;

/// `ds` cached in the file `path` (elements of type `input`).
pub(crate) fn cache_file(ds: Ds, input: &Elem, path: &str) -> Result<Ds, String> {
    let fingerprint = FINGERPRINT.get().ok_or("`cache(file)` without the pipeline's fingerprint")?;
    let decode: Box<Decode> = match input {
        Elem::Record => Box::new(|b: &[u8]| {
            let mut b = b;
            let r = Vec::<u8>::decode(&mut b).map(Record::from)?;
            done(b).map(|()| Item::Record(r))
        }),
        Elem::Fields(fields) => {
            let fields = fields.clone();
            let names: Names = fields.iter().map(|f| f.name.clone()).collect();
            Box::new(move |b: &[u8]| decode_row(b, &fields, &names))
        }
        other => return Err(format!("`cache(file)` of {other}")),
    };
    let encoded = ds.try_map(|x: Item| -> Result<Encoded, BoxError> {
        let mut out = Vec::new();
        encode(&x, &mut out)?;
        Ok(Encoded(out))
    });
    Ok(encoded
        .cache_file(path)
        .fingerprint(fingerprint)
        .try_map(move |e: Encoded| decode(&e.0).map_err(|e| BoxError::from(format!("cache entry: {e}"))))
        .boxed())
}

fn done(rest: &[u8]) -> Result<(), String> {
    match rest.len() {
        0 => Ok(()),
        n => Err(format!("{n} bytes left over after the entry")),
    }
}

/// `x`'s encoding appended to `out`.
fn encode(x: &Item, out: &mut Vec<u8>) -> Result<(), String> {
    match x {
        Item::Record(r) => r.as_bytes().to_vec().encode(out),
        Item::Row(row) => {
            for v in &row.values {
                encode_value(v, out);
            }
        }
        _ => return Err("`cache(file)` of batches".into()),
    }
    Ok(())
}

fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match (&v.data, v.kind) {
        (Data::Bytes(b), _) => b.first().cloned().unwrap_or_default().encode(out),
        (Data::Str(s), _) => s.first().cloned().unwrap_or_default().encode(out),
        (d, Kind::Scalar) => numeric!(d, x => x.iter().for_each(|x| x.encode(out)), _ => {}),
        (d, Kind::List) => numeric!(d, x => x.encode(out), _ => {}),
        (d, Kind::Tensor) => {
            let shape: Vec<u64> = v.shape.iter().map(|&n| n as u64).collect();
            shape.encode(out);
            numeric!(d, x => x.encode(out), _ => {});
        }
    }
}

/// A row of `fields` decoded from `b`.
fn decode_row(b: &[u8], fields: &[FieldType], names: &Names) -> Result<Item, String> {
    let mut b = b;
    let mut values = Vec::with_capacity(fields.len());
    for f in fields {
        let ty = f.ty.as_ref().ok_or_else(|| format!("field `{}` without a type", f.name))?;
        let kind = match &ty.shape {
            _ if matches!(ty.dtype, DType::Bytes | DType::Str) => Kind::Scalar,
            Shape::Var => Kind::List,
            Shape::Dims(d) if d.is_empty() => Kind::Scalar,
            Shape::Dims(_) => Kind::Tensor,
        };
        values.push(decode_value(&mut b, ty.dtype, kind)?);
    }
    done(b)?;
    Ok(Item::Row(Row { names: names.clone(), values }))
}

fn decode_value(b: &mut &[u8], dtype: DType, kind: Kind) -> Result<Value, String> {
    macro_rules! typed {
        ($t:ty, $variant:ident) => {
            match kind {
                Kind::Scalar => Value::scalar(Data::$variant(vec![<$t>::decode(b)?])),
                Kind::List => {
                    let v = Vec::<$t>::decode(b)?;
                    let n = v.len();
                    Value { data: Data::$variant(v), shape: vec![n], kind: Kind::List }
                }
                Kind::Tensor => {
                    let shape: Vec<u64> = Vec::decode(b)?;
                    let v = Vec::<$t>::decode(b)?;
                    let shape: Vec<usize> = shape.into_iter().map(|d| d as usize).collect();
                    if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(v.len()) {
                        return Err(format!("a tensor of shape {shape:?} with {} values", v.len()));
                    }
                    Value { data: Data::$variant(v), shape, kind: Kind::Tensor }
                }
            }
        };
    }
    Ok(match dtype {
        DType::Bool => typed!(bool, Bool),
        DType::U8 => typed!(u8, U8),
        DType::I32 => typed!(i32, I32),
        DType::U32 => typed!(u32, U32),
        DType::I64 => typed!(i64, I64),
        DType::U64 => typed!(u64, U64),
        DType::F32 => typed!(f32, F32),
        DType::F64 => typed!(f64, F64),
        DType::Bytes => Value::scalar(Data::Bytes(vec![Vec::<u8>::decode(b)?])),
        DType::Str => Value::scalar(Data::Str(vec![String::decode(b)?])),
        other => return Err(format!("values of {other}")),
    })
}
