//! `tf.io.serialize_tensor` / `tf.io.parse_tensor`: TensorFlow's `TensorProto` (from
//! `tensor.proto` and `tensor_shape.proto`) as prost messages, and the values of one
//! as a tensor of a declared dtype and shape.
//!
//! A tensor's values are in `tensor_content` (little-endian, what `serialize_tensor`
//! writes for numbers) or in the typed `*_val` field of its dtype; a `*_val` shorter than
//! the tensor repeats its last value (none: zeros), as TensorFlow reads it.

use prost::Message;

/// `tensorflow.TensorProto` (the fields numbers need; the others are skipped).
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    /// A `tensorflow.DataType`.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// The shape.
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    /// The values as little-endian bytes.
    #[prost(bytes = "vec", tag = "4")]
    pub tensor_content: Vec<u8>,
    /// `DT_FLOAT` values.
    #[prost(float, repeated, tag = "5")]
    pub float_val: Vec<f32>,
    /// `DT_DOUBLE` values.
    #[prost(double, repeated, tag = "6")]
    pub double_val: Vec<f64>,
    /// `DT_INT32`, `DT_INT16`, `DT_INT8`, `DT_UINT8`, `DT_UINT16` values.
    #[prost(int32, repeated, tag = "7")]
    pub int_val: Vec<i32>,
    /// `DT_STRING` values.
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
    /// `DT_INT64` values.
    #[prost(int64, repeated, tag = "10")]
    pub int64_val: Vec<i64>,
    /// `DT_BOOL` values.
    #[prost(bool, repeated, tag = "11")]
    pub bool_val: Vec<bool>,
    /// `DT_UINT32` values.
    #[prost(uint32, repeated, tag = "16")]
    pub uint32_val: Vec<u32>,
    /// `DT_UINT64` values.
    #[prost(uint64, repeated, tag = "17")]
    pub uint64_val: Vec<u64>,
}

impl TensorProto {
    /// The serialized message, as `tf.io.serialize_tensor` writes it.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

/// `tensorflow.TensorShapeProto`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    /// The dimensions, outermost first.
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<TensorShapeDim>,
    /// The rank is unknown (never in a serialized tensor).
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

/// `tensorflow.TensorShapeProto.Dim`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeDim {
    /// The size.
    #[prost(int64, tag = "1")]
    pub size: i64,
    /// An optional name.
    #[prost(string, tag = "2")]
    pub name: String,
}

/// The most values a tensor may have when its values repeat (a short `*_val`): a
/// hostile shape cannot make a small record allocate gigabytes.
pub const MAX_FILLED_VALUES: u64 = 1 << 26;

/// A dtype a tensor can be parsed as: its `tensorflow.DataType` and where its values are.
pub trait TensorValue: Copy + Default + Sized {
    /// The `tensorflow.DataType` number.
    const DTYPE: i32;
    /// Its name in TensorFlow (`DT_FLOAT`).
    const NAME: &'static str;
    /// Bytes per value in `tensor_content`.
    const SIZE: usize;
    /// A value from `SIZE` little-endian bytes.
    fn from_le(b: &[u8]) -> Self;
    /// The typed values of the proto, converted.
    fn vals(p: &TensorProto) -> Vec<Self>;
}

macro_rules! tensor_value {
    ($t:ty, $code:expr, $name:expr, |$p:ident| $vals:expr) => {
        impl TensorValue for $t {
            const DTYPE: i32 = $code;
            const NAME: &'static str = $name;
            const SIZE: usize = size_of::<$t>();
            fn from_le(b: &[u8]) -> Self {
                let mut a = [0u8; size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            fn vals($p: &TensorProto) -> Vec<Self> {
                $vals
            }
        }
    };
}
tensor_value!(f32, 1, "DT_FLOAT", |p| p.float_val.clone());
tensor_value!(f64, 2, "DT_DOUBLE", |p| p.double_val.clone());
tensor_value!(i32, 3, "DT_INT32", |p| p.int_val.clone());
tensor_value!(u8, 4, "DT_UINT8", |p| p.int_val.iter().map(|&v| v as u8).collect());
tensor_value!(i16, 5, "DT_INT16", |p| p.int_val.iter().map(|&v| v as i16).collect());
tensor_value!(i8, 6, "DT_INT8", |p| p.int_val.iter().map(|&v| v as i8).collect());
tensor_value!(i64, 9, "DT_INT64", |p| p.int64_val.clone());
tensor_value!(u16, 17, "DT_UINT16", |p| p.int_val.iter().map(|&v| v as u16).collect());
tensor_value!(u32, 22, "DT_UINT32", |p| p.uint32_val.clone());
tensor_value!(u64, 23, "DT_UINT64", |p| p.uint64_val.clone());

/// TensorFlow's name of a `DataType` number.
fn dtype_name(code: i32) -> String {
    let name = match code {
        1 => "DT_FLOAT",
        2 => "DT_DOUBLE",
        3 => "DT_INT32",
        4 => "DT_UINT8",
        5 => "DT_INT16",
        6 => "DT_INT8",
        7 => "DT_STRING",
        9 => "DT_INT64",
        10 => "DT_BOOL",
        14 => "DT_BFLOAT16",
        17 => "DT_UINT16",
        19 => "DT_HALF",
        22 => "DT_UINT32",
        23 => "DT_UINT64",
        _ => return format!("DataType {code}"),
    };
    name.to_string()
}

/// The shape and values of the serialized `TensorProto` `bytes` as dtype `T`; an error
/// says what is wrong (not a TensorProto, another dtype, values that do not fill the
/// shape).
pub fn parse_tensor<T: TensorValue>(bytes: &[u8]) -> Result<(Vec<usize>, Vec<T>), String> {
    let p = TensorProto::decode(bytes).map_err(|e| format!("malformed TensorProto: {e}"))?;
    if p.dtype != T::DTYPE {
        return Err(format!("the tensor is {}, not the {} declared", dtype_name(p.dtype), T::NAME));
    }
    let shape = p.tensor_shape.clone().unwrap_or_default();
    if shape.unknown_rank {
        return Err("the tensor's rank is unknown".into());
    }
    let mut dims = Vec::with_capacity(shape.dim.len());
    let mut n: u64 = 1;
    for d in &shape.dim {
        let size = u64::try_from(d.size).map_err(|_| format!("a dimension of size {}", d.size))?;
        n = n.checked_mul(size).ok_or("the shape's size overflows")?;
        dims.push(usize::try_from(size).map_err(|_| "the shape's size overflows")?);
    }
    let values = if !p.tensor_content.is_empty() {
        let want = n.checked_mul(T::SIZE as u64);
        if want != Some(p.tensor_content.len() as u64) {
            return Err(format!(
                "tensor_content holds {} bytes, the shape {dims:?} of {} needs {}",
                p.tensor_content.len(),
                T::NAME,
                want.map_or("more".to_string(), |w| w.to_string())
            ));
        }
        p.tensor_content.chunks_exact(T::SIZE).map(T::from_le).collect()
    } else {
        let mut vals = T::vals(&p);
        if vals.len() as u64 > n {
            return Err(format!("{} values for the shape {dims:?} of {} values", vals.len(), n));
        }
        if (vals.len() as u64) < n {
            if n > MAX_FILLED_VALUES {
                return Err(format!("the shape {dims:?} holds more than {MAX_FILLED_VALUES} values"));
            }
            let last = vals.last().copied().unwrap_or_default();
            vals.resize(n as usize, last);
        }
        vals
    };
    Ok((dims, values))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: i32, dims: &[i64]) -> TensorProto {
        TensorProto {
            dtype,
            tensor_shape: Some(TensorShapeProto {
                dim: dims.iter().map(|&size| TensorShapeDim { size, name: String::new() }).collect(),
                unknown_rank: false,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn content_and_typed_values_parse() {
        let mut p = proto(1, &[2, 2]);
        p.tensor_content = [1.0f32, 2.0, 3.0, 4.5].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(parse_tensor::<f32>(&p.encode_to_vec()).unwrap(), (vec![2, 2], vec![1.0, 2.0, 3.0, 4.5]));
        let mut p = proto(9, &[3]);
        p.int64_val = vec![7];
        assert_eq!(parse_tensor::<i64>(&p.encode_to_vec()).unwrap(), (vec![3], vec![7, 7, 7]), "repeats");
        let p = proto(3, &[]);
        assert_eq!(parse_tensor::<i32>(&p.encode_to_vec()).unwrap(), (vec![], vec![0]), "a scalar zero");
    }

    #[test]
    fn wrong_dtype_size_or_bytes_are_errors() {
        let p = proto(9, &[2]);
        let e = parse_tensor::<f32>(&p.encode_to_vec()).unwrap_err();
        assert_eq!(e, "the tensor is DT_INT64, not the DT_FLOAT declared");
        let mut p = proto(1, &[3]);
        p.tensor_content = vec![0; 8];
        assert!(parse_tensor::<f32>(&p.encode_to_vec()).unwrap_err().contains("holds 8 bytes"));
        let mut p = proto(1, &[1 << 40]);
        p.float_val = vec![1.0];
        assert!(parse_tensor::<f32>(&p.encode_to_vec()).unwrap_err().contains("more than"));
        assert!(parse_tensor::<f32>(&[0xff, 0xff]).unwrap_err().starts_with("malformed TensorProto"));
        let p = proto(1, &[-1]);
        assert!(parse_tensor::<f32>(&p.encode_to_vec()).is_err());
    }
}
