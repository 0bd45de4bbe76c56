//! Types of pipeline values: element dtypes with shapes (record features, tensors),
//! parameter types, and constant values.

use std::fmt;

/// The element type of a feature or tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bool`.
    Bool,
    /// `u8`.
    U8,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64` (seeds, ids).
    U64,
    /// `f16` (IEEE half).
    F16,
    /// `bf16` (bfloat16).
    Bf16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `bytes`: one byte string per value.
    Bytes,
    /// `string`: UTF-8 text.
    Str,
}

impl DType {
    /// Every dtype, in the order messages list them.
    pub const ALL: [DType; 12] = [
        DType::Bool,
        DType::U8,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::Bf16,
        DType::F32,
        DType::F64,
        DType::Bytes,
        DType::Str,
    ];

    /// The name in `.pipe` source.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bytes => "bytes",
            DType::Str => "str",
        }
    }

    /// The dtype called `name` (`string` is another name of `str`).
    pub fn from_name(name: &str) -> Option<DType> {
        if name == "string" {
            return Some(DType::Str);
        }
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// True for the numbers and `bool` a Rust primitive holds as it is (not `f16`, `bf16`,
    /// `bytes`, `str`).
    pub fn is_native(self) -> bool {
        matches!(
            self,
            DType::Bool
                | DType::U8
                | DType::I32
                | DType::U32
                | DType::I64
                | DType::U64
                | DType::F32
                | DType::F64
        )
    }

    /// True for floating-point dtypes.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::Bf16 | DType::F32 | DType::F64)
    }

    /// True for integer dtypes.
    pub fn is_int(self) -> bool {
        matches!(self, DType::U8 | DType::I32 | DType::U32 | DType::I64 | DType::U64)
    }

    /// The `tf.train.Feature` list that carries this dtype: `int64_list`, `float_list`
    /// or `bytes_list`.
    pub fn feature_list(self) -> &'static str {
        match self {
            DType::Bool | DType::U8 | DType::I32 | DType::U32 | DType::I64 | DType::U64 => "int64_list",
            DType::F16 | DType::Bf16 | DType::F32 | DType::F64 => "float_list",
            DType::Bytes | DType::Str => "bytes_list",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One dimension of a shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A size known at compile time.
    Fixed(u64),
    /// A size bound per element and named, so that shapes can be related (`H`, `W`).
    Named(String),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Named(n) => f.write_str(n),
        }
    }
}

/// A shape: scalar, fixed or named dimensions, or a variable-length list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Dimensions, outermost first; empty for a scalar.
    Dims(Vec<Dim>),
    /// A variable-length list of scalars (`T[]`): ragged when batched.
    Var,
}

impl Shape {
    /// The scalar shape.
    pub fn scalar() -> Shape {
        Shape::Dims(Vec::new())
    }

    /// The number of values, when every dimension is fixed.
    pub fn fixed_len(&self) -> Option<u64> {
        match self {
            Shape::Var => None,
            Shape::Dims(dims) => dims.iter().try_fold(1u64, |n, d| match d {
                Dim::Fixed(k) => n.checked_mul(*k),
                Dim::Named(_) => None,
            }),
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Var => f.write_str("[]"),
            Shape::Dims(d) if d.is_empty() => Ok(()),
            Shape::Dims(d) => {
                f.write_str("[")?;
                for (i, x) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// The type of a feature or tensor value: a dtype and a shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// The element type.
    pub dtype: DType,
    /// The shape.
    pub shape: Shape,
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

/// The type of a pipeline parameter (overridable at run time with `--set NAME=VALUE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// A file glob, such as `"data/train-*.tfrecord"`.
    Glob,
    /// A file path.
    Path,
    /// Text.
    Str,
    /// `true` or `false`.
    Bool,
    /// An unsigned 32-bit integer.
    U32,
    /// An unsigned 64-bit integer.
    U64,
    /// A signed 64-bit integer.
    I64,
    /// A 64-bit float.
    F64,
    /// A number of bytes, written as a quantity (`512 MiB`).
    Size,
}

impl ParamType {
    /// Every parameter type, in the order messages list them.
    pub const ALL: [ParamType; 9] = [
        ParamType::Glob,
        ParamType::Path,
        ParamType::Str,
        ParamType::Bool,
        ParamType::U32,
        ParamType::U64,
        ParamType::I64,
        ParamType::F64,
        ParamType::Size,
    ];

    /// The name in `.pipe` source.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Glob => "glob",
            ParamType::Path => "path",
            ParamType::Str => "string",
            ParamType::Bool => "bool",
            ParamType::U32 => "u32",
            ParamType::U64 => "u64",
            ParamType::I64 => "i64",
            ParamType::F64 => "f64",
            ParamType::Size => "size",
        }
    }

    /// The parameter type called `name`.
    pub fn from_name(name: &str) -> Option<ParamType> {
        if name == "str" {
            return Some(ParamType::Str);
        }
        ParamType::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A constant known at compile time.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `true` / `false`.
    Bool(bool),
    /// A signed integer (all integer parameters fit; u64 values above i64::MAX are kept
    /// as `UInt`).
    Int(i64),
    /// An unsigned integer above `i64::MAX`.
    UInt(u64),
    /// A float.
    Float(f64),
    /// Text (also globs and paths).
    Str(String),
    /// A number of bytes.
    Bytes(u64),
    /// A list of constants.
    List(Vec<Value>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::UInt(n) => write!(f, "{n}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Bytes(n) => write!(f, "{n} B"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
        }
    }
}
