//! The per-field operations of a `map`: one variant per built-in operation with its
//! arguments bound (positional and named arguments resolved once, in sema) and typed,
//! and `Extern` for a declared `extern fn`. [`Op::name`] is the one table of the
//! operations' names in the IR: `explain` and `Display` print them.

use std::fmt;

use super::expr::{Expr, write_list};
use super::types::{DType, Dim};

/// The most pixels a decoded image may have (8192 × 8192): the default of `decode_jpeg`
/// / `decode_png`'s `max_pixels` and its largest value: the runtime's
/// `image::decode::MAX_PIXELS` (`compiler/tests/codegen.rs` holds them equal).
pub const MAX_PIXELS: u64 = 1 << 26;

/// The format `decode_jpeg` / `decode_png` decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// JPEG.
    Jpeg,
    /// PNG.
    Png,
}

/// The memory layout `transpose` produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[h, w, c]` → `[c, h, w]`.
    Chw,
    /// `[c, h, w]` → `[h, w, c]`.
    Hwc,
}

impl Layout {
    /// The layout's name in `.pipe` source.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Chw => "chw",
            Layout::Hwc => "hwc",
        }
    }

    /// The layout called `name`.
    pub fn from_name(name: &str) -> Option<Layout> {
        [Layout::Chw, Layout::Hwc].into_iter().find(|l| l.name() == name)
    }
}

/// A per-field operation with its bound, typed arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `decode_raw(bytes, dtype)`: the bytes as a list of `dtype` values.
    DecodeRaw {
        /// The byte string.
        bytes: Expr,
        /// The values' type.
        dtype: DType,
    },
    /// `parse_tensor(bytes, dtype, [dims])`: the bytes of `tf.io.serialize_tensor` (a
    /// `TensorProto`) as a tensor of `dtype` and that shape (no shape: a list of all its
    /// values).
    ParseTensor {
        /// The serialized tensor.
        bytes: Expr,
        /// The declared dtype (the proto's must be the same).
        dtype: DType,
        /// The declared dimensions (named ones match any size), or `None`.
        dims: Option<Vec<Dim>>,
    },
    /// `decode_jpeg(bytes, channels, max_pixels)` / `decode_png(...)`: `u8[H, W, channels]`.
    DecodeImage {
        /// JPEG or PNG.
        format: ImageFormat,
        /// The encoded image.
        bytes: Expr,
        /// The channels asked for (`None`: not given, 3).
        channels: Option<u64>,
        /// The most pixels an image may have, checked on its header before decoding
        /// (`None`: not given, the runtime's cap of 8192 × 8192).
        max_pixels: Option<u64>,
    },
    /// `reshape(x, [dims])`.
    Reshape {
        /// The value.
        x: Expr,
        /// The new shape, fixed sizes.
        dims: Vec<u64>,
    },
    /// `resize(image, height, width)` (bilinear, `f32`).
    Resize {
        /// `[H, W, C]`.
        image: Expr,
        /// Height.
        h: Expr,
        /// Width.
        w: Expr,
    },
    /// `center_crop(image, height, width)`.
    CenterCrop {
        /// `[H, W, C]`.
        image: Expr,
        /// Height.
        h: Expr,
        /// Width.
        w: Expr,
    },
    /// `random_crop(image, height, width, seed)`.
    RandomCrop {
        /// `[H, W, C]`.
        image: Expr,
        /// Height.
        h: Expr,
        /// Width.
        w: Expr,
        /// The seed (`None`: the run's, different on every run).
        seed: Option<Expr>,
    },
    /// `random_flip(image, seed)`: left to right with probability ½.
    RandomFlip {
        /// The value.
        image: Expr,
        /// The seed (`None`: the run's).
        seed: Option<Expr>,
    },
    /// `cast(x, dtype)`.
    Cast {
        /// The value.
        x: Expr,
        /// The new dtype.
        dtype: DType,
    },
    /// `scale(x, factor)`: cast to a float and multiply.
    Scale {
        /// The value.
        x: Expr,
        /// The factor, a number.
        factor: Expr,
    },
    /// `normalize(x, mean, std)`: `(x - mean[c]) / std[c]` per channel, `f32`.
    Normalize {
        /// The value.
        x: Expr,
        /// One number or one per channel.
        mean: Expr,
        /// One number or one per channel.
        std: Expr,
    },
    /// `transpose(x, layout)`.
    Transpose {
        /// `[H, W, C]` or `[C, H, W]`.
        x: Expr,
        /// The layout made.
        layout: Layout,
    },
    /// `one_hot(label, depth)`.
    OneHot {
        /// A scalar integer.
        label: Expr,
        /// The number of classes.
        depth: Expr,
    },
    /// `tokenize(text, tokenizer, add_bos, add_eos)`: the ids (`i32[]`) a Hugging Face
    /// `tokenizer.json` gives a `str` (or UTF-8 `bytes`) value.
    Tokenize {
        /// The text.
        text: Expr,
        /// The tokenizer file: a string literal or a `path`/`string` parameter.
        tokenizer: Expr,
        /// Put the tokenizer's BOS token in front.
        add_bos: bool,
        /// Put the tokenizer's EOS token at the end.
        add_eos: bool,
    },
    /// `check_finite(x)` (tf.debugging.check_numerics): `x` unchanged when every value
    /// is finite, else an error naming the value (a field) and the first NaN or infinity,
    /// which `map(on_error: skip)` drops with its element.
    CheckFinite {
        /// A float value of any shape.
        x: Expr,
    },
    /// A declared `extern fn`, its arguments positional.
    Extern {
        /// The Rust path of the function (from the crate root).
        path: String,
        /// The arguments, in order.
        args: Vec<Expr>,
    },
}

impl Op {
    /// The operation's name in `.pipe` source and in `explain` (the path of an `extern
    /// fn`).
    pub fn name(&self) -> &str {
        match self {
            Op::DecodeRaw { .. } => "decode_raw",
            Op::ParseTensor { .. } => "parse_tensor",
            Op::DecodeImage { format: ImageFormat::Jpeg, .. } => "decode_jpeg",
            Op::DecodeImage { format: ImageFormat::Png, .. } => "decode_png",
            Op::Reshape { .. } => "reshape",
            Op::Resize { .. } => "resize",
            Op::CenterCrop { .. } => "center_crop",
            Op::RandomCrop { .. } => "random_crop",
            Op::RandomFlip { .. } => "random_flip",
            Op::Cast { .. } => "cast",
            Op::Scale { .. } => "scale",
            Op::Normalize { .. } => "normalize",
            Op::Transpose { .. } => "transpose",
            Op::OneHot { .. } => "one_hot",
            Op::Tokenize { .. } => "tokenize",
            Op::CheckFinite { .. } => "check_finite",
            Op::Extern { path, .. } => path,
        }
    }

    /// The expression arguments, in the signature's order.
    pub fn args(&self) -> Vec<&Expr> {
        match self {
            Op::DecodeRaw { bytes, .. } | Op::DecodeImage { bytes, .. } | Op::ParseTensor { bytes, .. } => {
                vec![bytes]
            }
            Op::Reshape { x, .. } | Op::Cast { x, .. } | Op::Transpose { x, .. } | Op::CheckFinite { x } => {
                vec![x]
            }
            Op::Resize { image, h, w } | Op::CenterCrop { image, h, w } => vec![image, h, w],
            Op::RandomCrop { image, h, w, seed } => [image, h, w].into_iter().chain(seed).collect(),
            Op::RandomFlip { image, seed } => [image].into_iter().chain(seed).collect(),
            Op::Scale { x, factor } => vec![x, factor],
            Op::Normalize { x, mean, std } => vec![x, mean, std],
            Op::OneHot { label, depth } => vec![label, depth],
            Op::Tokenize { text, tokenizer, .. } => vec![text, tokenizer],
            Op::Extern { args, .. } => args.iter().collect(),
        }
    }

    /// The value the operation transforms (its first argument); `None` for an `extern
    /// fn`.
    pub fn input(&self) -> Option<&Expr> {
        match self {
            Op::Extern { .. } => None,
            other => other.args().first().copied(),
        }
    }

    /// Whether the operation draws random numbers (`random_crop`, `random_flip`): its
    /// result depends on the element's position and epoch, not only on its value.
    pub fn is_random(&self) -> bool {
        matches!(self, Op::RandomCrop { .. } | Op::RandomFlip { .. })
    }

    /// Whether the operation works value by value (`cast`, `scale`, `normalize`): the
    /// same on a row as on a whole batch column.
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Cast { .. } | Op::Scale { .. } | Op::Normalize { .. })
    }

    /// Whether the operation converts each value on its own (`cast`, `scale`), so that a
    /// loop over values can apply it inline.
    pub fn is_per_value(&self) -> bool {
        matches!(self, Op::Cast { .. } | Op::Scale { .. })
    }

    /// The constant options `explain` shows beside the operation's name, when given
    /// (`max_pixels=4194304`).
    pub fn explain_options(&self) -> Option<String> {
        match self {
            Op::DecodeImage { max_pixels: Some(n), .. } => Some(format!("max_pixels={n}")),
            Op::Tokenize { add_bos, add_eos, .. } if *add_bos || *add_eos => {
                let on: Vec<&str> = [("add_bos", *add_bos), ("add_eos", *add_eos)]
                    .into_iter()
                    .filter_map(|(n, on)| on.then_some(n))
                    .collect();
                Some(on.join(", "))
            }
            _ => None,
        }
    }

    /// The seed of a random operation (`None` also when it was not given).
    pub fn seed(&self) -> Option<&Expr> {
        match self {
            Op::RandomCrop { seed, .. } | Op::RandomFlip { seed, .. } => seed.as_ref(),
            _ => None,
        }
    }
}

/// The operation as `.pipe` text, its arguments positional (`max_pixels` named).
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.name())?;
        write_list(f, self.args().into_iter())?;
        let word = match self {
            Op::DecodeRaw { dtype, .. } | Op::Cast { dtype, .. } => Some(dtype.name().to_string()),
            Op::ParseTensor { dtype, dims, .. } => Some(match dims {
                Some(d) => {
                    format!(
                        "{}, [{}]",
                        dtype.name(),
                        d.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                    )
                }
                None => dtype.name().to_string(),
            }),
            Op::DecodeImage { channels, .. } => channels.map(|c| c.to_string()),
            Op::Reshape { dims, .. } => {
                Some(format!("[{}]", dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")))
            }
            Op::Transpose { layout, .. } => Some(layout.name().to_string()),
            _ => None,
        };
        if let Some(w) = word {
            write!(f, ", {w}")?;
        }
        if let Op::DecodeImage { max_pixels: Some(n), .. } = self {
            write!(f, ", max_pixels: {n}")?;
        }
        if let Op::Tokenize { add_bos, add_eos, .. } = self {
            for (name, on) in [("add_bos", add_bos), ("add_eos", add_eos)] {
                if *on {
                    write!(f, ", {name}: true")?;
                }
            }
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::expr::{ExprKind, ExprType};
    use crate::ir::types::{Shape, TensorType};
    use crate::span::Span;

    fn field(name: &str) -> Expr {
        let ty = ExprType::Tensor(TensorType { dtype: DType::U8, shape: Shape::scalar() });
        Expr::new(ExprKind::Field(name.into()), ty, Span::default())
    }

    fn int(n: u64) -> Expr {
        Expr::new(ExprKind::Int(n), ExprType::Int(Some(n)), Span::default())
    }

    #[test]
    fn ops_print_as_pipe_text_with_positional_arguments() {
        let crop = Op::RandomCrop { image: field("image"), h: int(4), w: int(5), seed: Some(int(7)) };
        assert_eq!(crop.to_string(), "random_crop(image, 4, 5, 7)");
        assert!(crop.is_random() && !crop.is_elementwise());
        let decode = Op::DecodeImage {
            format: ImageFormat::Png,
            bytes: field("b"),
            channels: Some(1),
            max_pixels: None,
        };
        assert_eq!(decode.to_string(), "decode_png(b, 1)");
        assert_eq!(decode.explain_options(), None);
        let limited = Op::DecodeImage {
            format: ImageFormat::Jpeg,
            bytes: field("b"),
            channels: None,
            max_pixels: Some(4096),
        };
        assert_eq!(limited.to_string(), "decode_jpeg(b, max_pixels: 4096)");
        assert_eq!(limited.explain_options().as_deref(), Some("max_pixels=4096"));
        let cast = Op::Cast { x: field("x"), dtype: DType::F32 };
        assert_eq!(cast.to_string(), "cast(x, f32)");
        assert!(cast.is_per_value());
        let reshape = Op::Reshape { x: field("x"), dims: vec![2, 3] };
        assert_eq!(reshape.to_string(), "reshape(x, [2, 3])");
        let t = Op::Transpose { x: field("x"), layout: Layout::Chw };
        assert_eq!(t.to_string(), "transpose(x, chw)");
    }
}
