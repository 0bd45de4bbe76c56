//! What a generated, schema-specialised `tf.train.Example` parser calls.
//!
//! The generated parser walks a record's feature map once ([`ExampleView::entries`]),
//! matching each name against the declared features with a `match` on string literals
//! (the undeclared ones are skipped without being examined), then decodes each declared
//! feature straight into its destination with one of these functions: a column buffer of
//! a batch, or a value of a record. No `Example` message, map or per-feature allocation
//! is built. Semantics are `tf.io.parse_example`'s (and [`ExampleParser`]'s): a missing
//! feature takes its default or is an error, a fixed shape needs exactly its number of
//! values, a list of the wrong kind is an error, and the last of repeated map entries
//! wins.
//!
//! A batch parser whose features are all `f32`s and `i64`s also keeps the [`Layouts`]
//! of the records it walked: a record of a learned layout (the same bytes but for the
//! values) is read by comparing its bytes, without a walk, with the same result.
//!
//! A `tf.train.SequenceExample` parser (`parse_sequence_example`) walks the context
//! with the same functions (then [`in_sequence`] names the message in wire errors) and
//! each declared feature list with [`steps`]: a missing list has no steps, as in
//! `tf.io.parse_single_sequence_example`, and a step with the wrong number of values is
//! an error naming the list and the step.
//!
//! [`ExampleParser`]: crate::example::parse::ExampleParser

pub use crate::example::layout::{Layouts, Span, SpanValue, from_span, span};
pub use crate::example::parse::ParseError;
pub use crate::example::view::{Entry, ExampleView, FeatureView, ListEntry, SequenceView, WireError};

use crate::column::Append;
use crate::example::layout::extend_f32s;
use crate::example::parse::DType as Kind;

/// A record-level wire error (outside any declared feature).
#[cold]
pub fn malformed(error: WireError) -> ParseError {
    ParseError::Malformed { feature: None, error }
}

/// The feature of a declared entry, examined.
#[inline]
fn view<'a>(name: &str, entry: Option<Entry<'a>>) -> Result<Option<FeatureView<'a>>, ParseError> {
    entry
        .map(|e| {
            e.feature().map_err(|error| ParseError::Malformed { feature: Some(name.to_string()), error })
        })
        .transpose()
}

#[cold]
fn wrong_kind(name: &str, expected: Kind, view: &FeatureView<'_>) -> ParseError {
    let actual = match view {
        FeatureView::Floats(_) => Kind::F32,
        FeatureView::Int64s(_) => Kind::I64,
        FeatureView::Bytes(_) | FeatureView::None => Kind::Bytes,
    };
    ParseError::WrongKind { feature: name.to_string(), expected, actual }
}

#[cold]
fn missing(name: &str) -> ParseError {
    ParseError::Missing { feature: name.to_string() }
}

/// A value type a numeric feature decodes to: from a `float_list` (`f32`, `f64`) or an
/// `int64_list` (the integer types and `bool`, range-checked).
pub trait FromFeature: Copy + 'static {
    /// The list kind it is read from.
    const KIND: Kind;
    /// The type's name, for errors.
    const NAME: &'static str;
    /// Appends the values of `view`, which has kind [`KIND`](FromFeature::KIND).
    fn extend(name: &str, view: &FeatureView<'_>, out: &mut impl Append<Self>) -> Result<(), ParseError>;

    /// The fast path of the usual encoding ([`Entry::packed`]): appends exactly `n`
    /// values and returns true, or appends nothing and returns false (then the general
    /// path decides, and reports any error).
    #[inline]
    fn packed_exact(_entry: &Entry<'_>, _n: usize, _out: &mut impl Append<Self>) -> bool {
        false
    }
}

impl FromFeature for f32 {
    const KIND: Kind = Kind::F32;
    const NAME: &'static str = "f32";
    #[inline]
    fn packed_exact(entry: &Entry<'_>, n: usize, out: &mut impl Append<Self>) -> bool {
        match entry.packed(2) {
            Some(bytes) if bytes.len() == 4 * n => {
                extend_f32s(bytes, out);
                true
            }
            _ => false,
        }
    }
    #[inline]
    fn extend(_: &str, view: &FeatureView<'_>, out: &mut impl Append<Self>) -> Result<(), ParseError> {
        if let FeatureView::Floats(f) = view {
            f.extend_into(out);
        }
        Ok(())
    }
}

impl FromFeature for f64 {
    const KIND: Kind = Kind::F32;
    const NAME: &'static str = "f64";
    #[inline]
    fn extend(_: &str, view: &FeatureView<'_>, out: &mut impl Append<Self>) -> Result<(), ParseError> {
        if let FeatureView::Floats(f) = view {
            out.extend_iter(f.iter().map(f64::from));
        }
        Ok(())
    }
}

impl FromFeature for i64 {
    const KIND: Kind = Kind::I64;
    const NAME: &'static str = "i64";
    #[inline]
    fn packed_exact(entry: &Entry<'_>, n: usize, out: &mut impl Append<Self>) -> bool {
        let Some(mut bytes) = entry.packed(3) else { return false };
        let before = out.len();
        for _ in 0..n {
            let mut v = 0u64;
            let mut used = 0;
            for (i, &b) in bytes.iter().take(10).enumerate() {
                v |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    used = i + 1;
                    break;
                }
            }
            // A truncated or over-long varint: the general path reports it.
            if used == 0 || (used == 10 && bytes[9] >= 2) {
                out.truncate(before);
                return false;
            }
            out.push(v as i64);
            bytes = &bytes[used..];
        }
        if bytes.is_empty() {
            true
        } else {
            out.truncate(before);
            false
        }
    }
    #[inline]
    fn extend(_: &str, view: &FeatureView<'_>, out: &mut impl Append<Self>) -> Result<(), ParseError> {
        if let FeatureView::Int64s(v) = view {
            v.extend_into(out);
        }
        Ok(())
    }
}

/// `u64` is stored in an `int64_list` as its two's complement (as TensorFlow casts).
impl FromFeature for u64 {
    const KIND: Kind = Kind::I64;
    const NAME: &'static str = "u64";
    #[inline]
    fn extend(_: &str, view: &FeatureView<'_>, out: &mut impl Append<Self>) -> Result<(), ParseError> {
        if let FeatureView::Int64s(v) = view {
            out.extend_iter(v.iter().map(|x| x as u64));
        }
        Ok(())
    }
}

macro_rules! narrow_int {
    ($($t:ty => $n:literal),*) => {$(
        impl FromFeature for $t {
            const KIND: Kind = Kind::I64;
            const NAME: &'static str = $n;
            #[inline]
            fn extend(name: &str, view: &FeatureView<'_>, out: &mut impl Append<Self>) -> Result<(), ParseError> {
                if let FeatureView::Int64s(v) = view {
                    out.reserve(v.len());
                    for x in v.iter() {
                        let y = <$t>::try_from(x).map_err(|_| ParseError::OutOfRange {
                            feature: name.to_string(),
                            value: x,
                            dtype: $n,
                        })?;
                        out.push(y);
                    }
                }
                Ok(())
            }
        }
    )*};
}
narrow_int!(i32 => "i32", u32 => "u32", u8 => "u8", i8 => "i8", i16 => "i16", u16 => "u16");

/// `bool` from an `int64_list` of 0s and 1s.
impl FromFeature for bool {
    const KIND: Kind = Kind::I64;
    const NAME: &'static str = "bool";
    #[inline]
    fn extend(name: &str, view: &FeatureView<'_>, out: &mut impl Append<Self>) -> Result<(), ParseError> {
        if let FeatureView::Int64s(v) = view {
            for x in v.iter() {
                match x {
                    0 => out.push(false),
                    1 => out.push(true),
                    _ => {
                        return Err(ParseError::OutOfRange {
                            feature: name.to_string(),
                            value: x,
                            dtype: "bool",
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// Checks the list's kind (a kind-less feature holds no values of any kind).
#[inline]
fn check_kind<T: FromFeature>(name: &str, view: &FeatureView<'_>) -> Result<(), ParseError> {
    match view {
        FeatureView::None => Ok(()),
        FeatureView::Floats(_) if T::KIND == Kind::F32 => Ok(()),
        FeatureView::Int64s(_) if T::KIND == Kind::I64 => Ok(()),
        other => Err(wrong_kind(name, T::KIND, other)),
    }
}

/// Appends exactly `n` values of a fixed-shape feature (or its default) to `out`.
#[inline]
pub fn fixed<T: FromFeature>(
    name: &str,
    entry: Option<Entry<'_>>,
    n: usize,
    default: Option<&[T]>,
    out: &mut impl Append<T>,
) -> Result<(), ParseError> {
    if let Some(e) = &entry
        && T::packed_exact(e, n, out)
    {
        return Ok(());
    }
    let Some(view) = view(name, entry)? else {
        let d = default.ok_or_else(|| missing(name))?;
        out.extend_from_slice(d);
        return Ok(());
    };
    check_kind::<T>(name, &view)?;
    if view.len() != n {
        return Err(ParseError::WrongLength { feature: name.to_string(), expected: n, actual: view.len() });
    }
    let before = out.len();
    T::extend(name, &view, out).inspect_err(|_| out.truncate(before))
}

/// Appends every value of a variable-length feature (or its default; none when it has
/// no default) to `out`; returns how many.
#[inline]
pub fn var<T: FromFeature>(
    name: &str,
    entry: Option<Entry<'_>>,
    default: Option<&[T]>,
    out: &mut Vec<T>,
) -> Result<usize, ParseError> {
    let before = out.len();
    match view(name, entry)? {
        None => out.extend_from_slice(default.unwrap_or_default()),
        Some(view) => {
            check_kind::<T>(name, &view)?;
            T::extend(name, &view, out).inspect_err(|_| out.truncate(before))?;
        }
    }
    Ok(out.len() - before)
}

/// The single value of a scalar feature (or its default).
#[inline]
pub fn scalar<T: FromFeature>(
    name: &str,
    entry: Option<Entry<'_>>,
    default: Option<T>,
) -> Result<T, ParseError> {
    if let Some(e) = &entry {
        let mut one = Vec::with_capacity(1);
        if T::packed_exact(e, 1, &mut one)
            && let Some(v) = one.pop()
        {
            return Ok(v);
        }
    }
    let Some(view) = view(name, entry)? else { return default.ok_or_else(|| missing(name)) };
    check_kind::<T>(name, &view)?;
    if view.len() != 1 {
        return Err(ParseError::WrongLength { feature: name.to_string(), expected: 1, actual: view.len() });
    }
    let mut one = Vec::with_capacity(1);
    T::extend(name, &view, &mut one)?;
    one.pop().ok_or_else(|| missing(name))
}

/// The single byte string of a scalar `bytes` feature (or its default), borrowed from
/// the record.
#[inline]
pub fn bytes<'a>(
    name: &str,
    entry: Option<Entry<'a>>,
    default: Option<&'a [u8]>,
) -> Result<&'a [u8], ParseError> {
    let Some(view) = view(name, entry)? else { return default.ok_or_else(|| missing(name)) };
    match &view {
        FeatureView::Bytes(b) if b.len() == 1 => b.iter().next().ok_or_else(|| missing(name)),
        FeatureView::Bytes(b) => {
            Err(ParseError::WrongLength { feature: name.to_string(), expected: 1, actual: b.len() })
        }
        FeatureView::None => {
            Err(ParseError::WrongLength { feature: name.to_string(), expected: 1, actual: 0 })
        }
        other => Err(wrong_kind(name, Kind::Bytes, other)),
    }
}

/// The single string of a scalar `str` feature (or its default): a `bytes_list` of one
/// value, checked to be UTF-8.
#[inline]
pub fn text(name: &str, entry: Option<Entry<'_>>, default: Option<&str>) -> Result<String, ParseError> {
    let b = bytes(name, entry, default.map(str::as_bytes))?;
    match std::str::from_utf8(b) {
        Ok(s) => Ok(s.to_owned()),
        Err(e) => Err(ParseError::NotUtf8 { feature: name.to_string(), at: e.valid_up_to() }),
    }
}

/// Every byte string of a `bytes[]` feature (or its default), borrowed from the record.
#[inline]
pub fn bytes_list<'a>(
    name: &str,
    entry: Option<Entry<'a>>,
    default: Option<&'a [&'a [u8]]>,
    out: &mut Vec<&'a [u8]>,
) -> Result<(), ParseError> {
    match view(name, entry)? {
        None => out.extend_from_slice(default.unwrap_or_default()),
        Some(FeatureView::Bytes(b)) => out.extend(b.iter()),
        Some(FeatureView::None) => {}
        Some(other) => return Err(wrong_kind(name, Kind::Bytes, &other)),
    }
    Ok(())
}

/// A record-level wire error of a `tf.train.SequenceExample`.
#[cold]
pub fn malformed_sequence(error: WireError) -> ParseError {
    ParseError::MalformedSequence { feature: None, error }
}

/// An error of a context feature of a `tf.train.SequenceExample`: wire errors name
/// that message rather than `tf.train.Example`.
#[cold]
pub fn in_sequence(e: ParseError) -> ParseError {
    match e {
        ParseError::Malformed { feature, error } => ParseError::MalformedSequence { feature, error },
        other => other,
    }
}

/// [`in_sequence`] of a parse error boxed by a generated parser (others are unchanged).
#[cold]
pub fn in_sequence_boxed(e: crate::BoxError) -> crate::BoxError {
    match e.downcast::<ParseError>() {
        Ok(p) => Box::new(in_sequence(*p)),
        Err(other) => other,
    }
}

/// What is wrong with one step, without the feature's name (the caller gives it).
#[cold]
fn step_error(name: &str, step: usize, e: ParseError) -> ParseError {
    let problem = match e {
        ParseError::WrongKind { expected, actual, .. } => {
            format!("expected {} but found {}", expected.a_list(), actual.a_list())
        }
        ParseError::WrongLength { expected, actual, .. } => {
            format!("expected {expected} values, found {actual}")
        }
        ParseError::OutOfRange { value, dtype, .. } => format!("value {value} does not fit {dtype}"),
        ParseError::Malformed { error, .. } | ParseError::MalformedSequence { error, .. } => {
            format!("malformed: {error}")
        }
        other => other.to_string(),
    };
    ParseError::Step { feature: name.to_string(), step, problem }
}

/// Appends the values of every step of feature list `name` to `out`, each step exactly
/// `width` values (`tf.io.FixedLenSequenceFeature` of that many values); returns the
/// number of steps. A missing list has none. On error `out` is as it was.
#[inline]
pub fn steps<T: FromFeature>(
    name: &str,
    list: Option<ListEntry<'_>>,
    width: usize,
    out: &mut Vec<T>,
) -> Result<usize, ParseError> {
    let Some(list) = list else { return Ok(0) };
    let before = out.len();
    let mut n = 0;
    for step in list.steps() {
        let one = |out: &mut Vec<T>| -> Result<(), ParseError> {
            let view = step.map_err(|error| ParseError::Malformed { feature: None, error })?;
            check_kind::<T>(name, &view)?;
            if view.len() != width {
                return Err(ParseError::WrongLength {
                    feature: name.to_string(),
                    expected: width,
                    actual: view.len(),
                });
            }
            T::extend(name, &view, out)
        };
        if let Err(e) = one(out) {
            out.truncate(before);
            return Err(step_error(name, n, e));
        }
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod sequence_tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::example::{Feature, FeatureList, FeatureLists, SequenceExample};

    fn record(lists: Vec<(&str, Vec<Feature>)>) -> Vec<u8> {
        let feature_list = lists
            .into_iter()
            .map(|(k, v)| (k.to_string(), FeatureList { feature: v }))
            .collect::<BTreeMap<_, _>>();
        SequenceExample { context: None, feature_lists: Some(FeatureLists { feature_list }) }.encode_record()
    }

    fn list<'a>(bytes: &'a [u8], name: &str) -> Option<ListEntry<'a>> {
        SequenceView::new(bytes).feature_lists().map(Result::unwrap).filter(|e| e.name() == name).last()
    }

    #[test]
    fn steps_of_a_fixed_width_are_flattened_and_counted() {
        let bytes = record(vec![("x", vec![Feature::floats([1.0, 2.0]), Feature::floats([3.0, 4.0])])]);
        let mut out = vec![9.0f32];
        assert_eq!(steps::<f32>("x", list(&bytes, "x"), 2, &mut out), Ok(2));
        assert_eq!(out, [9.0, 1.0, 2.0, 3.0, 4.0]);
        let mut out = Vec::<f32>::new();
        assert_eq!(steps::<f32>("y", list(&bytes, "y"), 2, &mut out), Ok(0), "a missing list has no steps");
        assert!(out.is_empty());
    }

    #[test]
    fn a_bad_step_is_an_error_naming_the_list_and_the_step() {
        let bytes = record(vec![(
            "x",
            vec![
                Feature::int64s([1, 2]),
                Feature::int64s([3, 4]),
                Feature::int64s([5]),
                Feature::int64s([6, 7]),
            ],
        )]);
        let mut out = vec![0i64];
        let err = steps::<i64>("x", list(&bytes, "x"), 2, &mut out).unwrap_err();
        assert_eq!(err.to_string(), "feature list `x`, step 2: expected 2 values, found 1");
        assert_eq!(out, [0], "nothing of the record is kept");
        let err = steps::<f32>("x", list(&bytes, "x"), 2, &mut Vec::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "feature list `x`, step 0: expected a float_list but found an int64_list"
        );
        let big = record(vec![("x", vec![Feature::int64s([1]), Feature::int64s([300])])]);
        let err = steps::<u8>("x", list(&big, "x"), 1, &mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "feature list `x`, step 1: value 300 does not fit u8");
    }

    #[test]
    fn context_wire_errors_name_the_sequence_example() {
        let e = in_sequence(malformed(WireError {
            offset: 3,
            kind: crate::example::view::WireErrorKind::Truncated,
        }));
        assert_eq!(
            e.to_string(),
            "malformed tf.train.SequenceExample: field runs past the end of its message at byte 3"
        );
    }
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;

    /// A length-delimited field `key` holding `body` (bodies under 128 bytes).
    fn field(key: &[u8], body: &[u8]) -> Vec<u8> {
        let mut out = key.to_vec();
        out.push(u8::try_from(body.len()).unwrap());
        out.extend_from_slice(body);
        out
    }

    /// An Example of one feature `name` whose `Feature` message is `feature`.
    fn example(name: &[u8], feature: &[u8]) -> Vec<u8> {
        let entry = [field(&[0x0A], name), field(&[0x12], feature)].concat();
        field(&[0x0A], &field(&[0x0A], &entry))
    }

    fn floats(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn parse_x(record: &[u8]) -> Result<Vec<f32>, ParseError> {
        let entry = ExampleView::new(record).entries().next().expect("one entry").map_err(malformed)?;
        let mut out = vec![7.0];
        fixed::<f32>("x", Some(entry), 2, None, &mut out)?;
        Ok(out)
    }

    #[test]
    fn every_encoding_of_a_float_list_gives_the_same_values() {
        let packed = floats(&[1.5, -2.0]);
        let usual = field(&[0x12], &field(&[0x0A], &packed));
        // The list's key as a two-byte varint: not the fast path, the same values.
        let long_key = field(&[0x92, 0x00], &field(&[0x0A], &packed));
        // Unpacked values (fixed32 fields of their own).
        let unpacked = field(&[0x12], &[&[0x0D][..], &packed[..4], &[0x0D], &packed[4..]].concat());
        for feature in [usual, long_key, unpacked] {
            assert_eq!(parse_x(&example(b"x", &feature)), Ok(vec![7.0, 1.5, -2.0]), "{feature:?}");
        }
        // A wrong count is still the general path's error.
        let three = field(&[0x12], &field(&[0x0A], &floats(&[1.0, 2.0, 3.0])));
        assert!(matches!(parse_x(&example(b"x", &three)), Err(ParseError::WrongLength { .. })));
    }

    #[test]
    fn the_usual_float_list_keeps_every_bit_of_its_values() {
        // A NaN with a payload, negative zero and a subnormal: copied, not converted.
        let odd = [f32::from_bits(0x7fc0_1234), -0.0, f32::from_bits(1)];
        for values in [&odd[..2], &odd[1..]] {
            let record = example(b"x", &field(&[0x12], &field(&[0x0A], &floats(values))));
            let got = parse_x(&record).expect("parses");
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got[1..]), bits(values));
            assert_eq!(got[0].to_bits(), 7.0f32.to_bits(), "what the column held stays");
        }
    }

    #[test]
    fn feature_names_are_checked_as_utf8() {
        let feature = field(&[0x12], &field(&[0x0A], &floats(&[1.0, 2.0])));
        let named = |name: &[u8]| {
            let record = example(name, &feature);
            ExampleView::new(&record).entries().next().expect("one entry").map(|e| e.name().to_string())
        };
        assert_eq!(named(b"x").unwrap(), "x");
        assert_eq!(named("é".as_bytes()).unwrap(), "é");
        assert!(named(&[b'x', 0xFF]).is_err(), "not UTF-8");
    }
}
