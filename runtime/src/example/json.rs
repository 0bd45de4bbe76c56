//! Protobuf's canonical proto3 JSON mapping for `tf.train.Example` and
//! `SequenceExample`, as Python's `json_format.MessageToJson` prints it, but compact
//! (no whitespace): camelCase field names, int64 as decimal strings, bytes as standard
//! base64 with padding, non-finite floats as `"NaN"`, `"Infinity"`, `"-Infinity"`,
//! empty repeated fields omitted, and map keys in sorted order.
//!
//! Floats are printed as protobuf's `ToShortestFloat` then Python's `repr` print them:
//! the first of 6, 7, 8 or 9 significant digits that reads back as the same `float32`
//! (`1.0`, `0.1`, `1e-05`, `1e+20`, `-0.0`, `1.4013e-45`), which is not always the
//! shortest round-tripping decimal.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::{Example, Feature, FeatureList, FeatureLists, Features, SequenceExample, feature};

/// Renders an `Example` as one line of canonical JSON.
pub fn example_to_json(ex: &Example) -> String {
    let mut out = String::with_capacity(256);
    write_example(&mut out, ex);
    out
}

/// Renders a `SequenceExample` as one line of canonical JSON.
pub fn sequence_example_to_json(ex: &SequenceExample) -> String {
    let mut out = String::with_capacity(256);
    write_sequence_example(&mut out, ex);
    out
}

/// Appends the JSON of `ex` to `out`.
pub fn write_example(out: &mut String, ex: &Example) {
    out.push('{');
    if let Some(f) = &ex.features {
        out.push_str("\"features\":");
        write_features(out, f);
    }
    out.push('}');
}

/// Appends the JSON of `ex` to `out`.
pub fn write_sequence_example(out: &mut String, ex: &SequenceExample) {
    out.push('{');
    let mut first = true;
    if let Some(c) = &ex.context {
        out.push_str("\"context\":");
        write_features(out, c);
        first = false;
    }
    if let Some(l) = &ex.feature_lists {
        if !first {
            out.push(',');
        }
        out.push_str("\"featureLists\":");
        write_feature_lists(out, l);
    }
    out.push('}');
}

fn write_features(out: &mut String, f: &Features) {
    out.push('{');
    if !f.feature.is_empty() {
        out.push_str("\"feature\":{");
        for (i, (name, feat)) in f.feature.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(out, name);
            out.push(':');
            write_feature(out, feat);
        }
        out.push('}');
    }
    out.push('}');
}

fn write_feature_lists(out: &mut String, l: &FeatureLists) {
    out.push('{');
    if !l.feature_list.is_empty() {
        out.push_str("\"featureList\":{");
        for (i, (name, list)) in l.feature_list.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(out, name);
            out.push(':');
            write_feature_list(out, list);
        }
        out.push('}');
    }
    out.push('}');
}

fn write_feature_list(out: &mut String, l: &FeatureList) {
    out.push('{');
    if !l.feature.is_empty() {
        out.push_str("\"feature\":[");
        for (i, f) in l.feature.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_feature(out, f);
        }
        out.push(']');
    }
    out.push('}');
}

/// Appends the JSON of one `Feature`.
pub fn write_feature(out: &mut String, f: &Feature) {
    out.push('{');
    match &f.kind {
        None => {}
        Some(feature::Kind::BytesList(l)) => {
            out.push_str("\"bytesList\":");
            write_list(out, &l.value, |out, v| {
                out.push('"');
                STANDARD.encode_string(v, out);
                out.push('"');
            });
        }
        Some(feature::Kind::FloatList(l)) => {
            out.push_str("\"floatList\":");
            write_list(out, &l.value, |out, v| write_f32(out, *v));
        }
        Some(feature::Kind::Int64List(l)) => {
            out.push_str("\"int64List\":");
            write_list(out, &l.value, |out, v| {
                let _ = write!(out, "\"{v}\"");
            });
        }
    }
    out.push('}');
}

/// `{"value":[...]}`, or `{}` for an empty list (proto3 JSON omits empty repeated fields).
fn write_list<T>(out: &mut String, values: &[T], mut each: impl FnMut(&mut String, &T)) {
    out.push('{');
    if !values.is_empty() {
        out.push_str("\"value\":[");
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            each(out, v);
        }
        out.push(']');
    }
    out.push('}');
}

/// Appends a float32 as `json_format.MessageToJson` prints it.
pub fn write_f32(out: &mut String, v: f32) {
    if v.is_nan() {
        out.push_str("\"NaN\"");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
    } else {
        push_python_repr(out, &to_shortest_float(v));
    }
}

/// protobuf's `type_checkers.ToShortestFloat`: `'%.{p}g' % v` for p = 6..=9, the first
/// that parses back to the same float32, in scientific form with trailing zeros removed
/// (Python's `repr` of the resulting double prints exactly those digits).
fn to_shortest_float(v: f32) -> String {
    let wide = f64::from(v);
    for precision in 6..=9 {
        let s = format!("{:.*e}", precision - 1, wide);
        if s.parse::<f64>().is_ok_and(|back| back as f32 == v) {
            let (mantissa, exp) = s.split_once('e').expect("scientific form");
            let mantissa = if mantissa.contains('.') {
                mantissa.trim_end_matches('0').trim_end_matches('.')
            } else {
                mantissa
            };
            return format!("{mantissa}e{exp}");
        }
    }
    // Nine significant digits always round-trip a float32.
    format!("{v:e}")
}

/// Turns Rust's shortest scientific form (`-1.25e-7`, `1e20`, `0e0`) into Python's repr:
/// positional for decimal exponents -4..=15 (always with a fractional part), otherwise
/// `d.ddde±XX` with at least two exponent digits.
fn push_python_repr(out: &mut String, sci: &str) {
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` output has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    out.push_str(sign);
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&digits);
        } else if point as usize >= digits.len() {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point as usize]);
            out.push('.');
            out.push_str(&digits[point as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

/// Appends a JSON string literal, escaping as Python's `json.dumps` does by default
/// (`ensure_ascii`): non-ASCII characters become `\uXXXX` escapes (surrogate pairs
/// beyond the BMP).
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || !c.is_ascii() => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f32) -> String {
        let mut s = String::new();
        write_f32(&mut s, v);
        s
    }

    #[test]
    fn floats_print_like_python() {
        let cases: &[(f32, &str)] = &[
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1e20, "1e+20"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123_456_790.0, "123456790.0"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (f32::from_bits(1), "1.4013e-45"),
            (f32::from_bits(0x0000_B70C), "6.56648e-41"),
            (f32::from_bits(0x0F80_0000), "1.26217745e-29"),
            (f32::from_bits(0x007F_FFFF), "1.1754942e-38"),
            (3e10, "30000000000.0"),
            (f32::MAX, "3.4028235e+38"),
            (f32::MIN_POSITIVE, "1.1754944e-38"),
            (-2.5, "-2.5"),
            (f32::NAN, "\"NaN\""),
            (f32::INFINITY, "\"Infinity\""),
            (f32::NEG_INFINITY, "\"-Infinity\""),
        ];
        for (v, want) in cases {
            assert_eq!(&f(*v), want, "for {v:e}");
        }
    }

    #[test]
    fn example_json_shape() {
        let ex = Example::from_features([
            ("b".to_string(), Feature::bytes([b"hi".to_vec(), vec![]])),
            ("a".to_string(), Feature::int64s(vec![i64::MIN, 7])),
            ("e".to_string(), Feature::floats(vec![])),
            ("n".to_string(), Feature { kind: None }),
            ("caf\u{e9}\"".to_string(), Feature::floats(vec![0.5])),
        ]);
        assert_eq!(
            example_to_json(&ex),
            r#"{"features":{"feature":{"a":{"int64List":{"value":["-9223372036854775808","7"]}},"b":{"bytesList":{"value":["aGk=",""]}},"caf\u00e9\"":{"floatList":{"value":[0.5]}},"e":{"floatList":{}},"n":{}}}}"#
        );
        assert_eq!(example_to_json(&Example::default()), "{}");
        assert_eq!(example_to_json(&Example::from_features([])), r#"{"features":{}}"#);
    }

    #[test]
    fn sequence_example_json_shape() {
        let mut lists = FeatureLists::default();
        lists.feature_list.insert(
            "tokens".into(),
            FeatureList { feature: vec![Feature::int64s(vec![1]), Feature::int64s(vec![])] },
        );
        lists.feature_list.insert("none".into(), FeatureList::default());
        let ex = SequenceExample { context: Some(Features::default()), feature_lists: Some(lists) };
        assert_eq!(
            sequence_example_to_json(&ex),
            r#"{"context":{},"featureLists":{"featureList":{"none":{},"tokens":{"feature":[{"int64List":{"value":["1"]}},{"int64List":{}}]}}}}"#
        );
    }
}
