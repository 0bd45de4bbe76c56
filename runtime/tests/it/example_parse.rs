//! The zero-copy `Example` walker and the spec-driven parser against prost: random
//! examples in every wire encoding protobuf allows (packed, unpacked, split chunks,
//! merged values, replaced kinds, duplicate keys, unknown fields) read the same; errors
//! name the feature; random and mutated bytes never panic.

use std::collections::BTreeMap;

use proptest::prelude::*;
use prost::Message;
use sluice_runtime::example::parse::{
    Column, ColumnValues, Columns, DType, DefaultValue, ExampleParser, FeatureSpec, ParseError, ParseSpec,
    Shape,
};
use sluice_runtime::example::view::{ExampleView, FeatureView};
use sluice_runtime::example::{Example, Feature, Features, feature};

/// A feature's kind and values, floats as bits so that NaN equals itself.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Canon {
    None,
    Floats(Vec<u32>),
    Int64s(Vec<i64>),
    Bytes(Vec<Vec<u8>>),
}

fn canon(f: &Feature) -> Canon {
    match &f.kind {
        None => Canon::None,
        Some(feature::Kind::FloatList(l)) => Canon::Floats(l.value.iter().map(|v| v.to_bits()).collect()),
        Some(feature::Kind::Int64List(l)) => Canon::Int64s(l.value.clone()),
        Some(feature::Kind::BytesList(l)) => Canon::Bytes(l.value.clone()),
    }
}

fn canon_view(v: &FeatureView<'_>) -> Canon {
    match v {
        FeatureView::None => Canon::None,
        FeatureView::Floats(f) => {
            let mut bulk = Vec::new();
            f.extend_into(&mut bulk);
            let one_by_one: Vec<f32> = f.iter().collect();
            assert_eq!(bulk.len(), f.len());
            assert_eq!(bits(&bulk), bits(&one_by_one));
            let mut slice = vec![0f32; f.len()];
            assert_eq!(f.copy_to_slice(&mut slice), f.len());
            assert_eq!(bits(&slice), bits(&bulk));
            Canon::Floats(bits(&bulk))
        }
        FeatureView::Int64s(f) => {
            let mut bulk = Vec::new();
            f.extend_into(&mut bulk);
            assert_eq!(bulk, f.iter().collect::<Vec<_>>());
            assert_eq!(bulk.len(), f.len());
            Canon::Int64s(bulk)
        }
        FeatureView::Bytes(f) => {
            let all: Vec<Vec<u8>> = f.iter().map(<[u8]>::to_vec).collect();
            assert_eq!(all.len(), f.len());
            Canon::Bytes(all)
        }
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// All features of a record through the view, last one wins.
fn view_map(bytes: &[u8]) -> Result<BTreeMap<String, Canon>, String> {
    let mut map = BTreeMap::new();
    for item in ExampleView::new(bytes).features() {
        let (name, view) = item.map_err(|e| e.to_string())?;
        map.insert(name.to_string(), canon_view(&view));
    }
    Ok(map)
}

fn prost_map(bytes: &[u8]) -> Result<BTreeMap<String, Canon>, String> {
    let ex = Example::decode(bytes).map_err(|e| e.to_string())?;
    Ok(ex
        .features
        .map(|f| f.feature.iter().map(|(k, v)| (k.clone(), canon(v))).collect())
        .unwrap_or_default())
}

// ---- A wire encoder with all the freedom protobuf allows. ----

/// A tiny deterministic generator for encoding choices.
struct Choices(u64);

impl Choices {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn coin(&mut self) -> bool {
        self.next().is_multiple_of(3)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    put_varint(out, u64::from(field) << 3 | u64::from(wire_type));
}

fn put_len(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    put_key(out, field, 2);
    put_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// Sometimes an unknown field of a random wire type (a group included).
fn maybe_unknown(out: &mut Vec<u8>, c: &mut Choices) {
    if !c.coin() {
        return;
    }
    let field = 4 + c.below(20) as u32;
    match c.below(5) {
        0 => {
            put_key(out, field, 0);
            put_varint(out, c.next());
        }
        1 => {
            put_key(out, field, 1);
            out.extend_from_slice(&c.next().to_le_bytes());
        }
        2 => put_len(out, field, b"junk"),
        3 => {
            put_key(out, field, 5);
            out.extend_from_slice(&[1, 2, 3, 4]);
        }
        _ => {
            put_key(out, field, 3);
            put_key(out, 1, 0);
            put_varint(out, 300);
            put_key(out, field, 4);
        }
    }
}

/// The list-message bodies of a feature: values split into chunks, each packed or not.
fn enc_lists(f: &Feature, c: &mut Choices) -> Vec<(u32, Vec<u8>)> {
    let Some(kind) = &f.kind else { return vec![] };
    let (field, n) = match kind {
        feature::Kind::BytesList(l) => (1, l.value.len()),
        feature::Kind::FloatList(l) => (2, l.value.len()),
        feature::Kind::Int64List(l) => (3, l.value.len()),
    };
    // Split the values over 1..=3 list messages, and each list into chunks.
    let cuts = if n > 1 && c.coin() { vec![0, 1 + c.below(n - 1), n] } else { vec![0, n] };
    let mut lists = Vec::new();
    for w in cuts.windows(2) {
        let mut body = Vec::new();
        maybe_unknown(&mut body, c);
        let mut i = w[0];
        while i < w[1] {
            let j = (i + 1 + c.below(4)).min(w[1]);
            let packed = c.coin() || c.coin();
            match kind {
                feature::Kind::BytesList(l) => {
                    for v in &l.value[i..j] {
                        put_len(&mut body, 1, v);
                    }
                }
                feature::Kind::FloatList(l) if packed => {
                    let bytes: Vec<u8> = l.value[i..j].iter().flat_map(|v| v.to_le_bytes()).collect();
                    put_len(&mut body, 1, &bytes);
                }
                feature::Kind::FloatList(l) => {
                    for v in &l.value[i..j] {
                        put_key(&mut body, 1, 5);
                        body.extend_from_slice(&v.to_le_bytes());
                    }
                }
                feature::Kind::Int64List(l) if packed => {
                    let mut bytes = Vec::new();
                    for v in &l.value[i..j] {
                        put_varint(&mut bytes, *v as u64);
                    }
                    put_len(&mut body, 1, &bytes);
                }
                feature::Kind::Int64List(l) => {
                    for v in &l.value[i..j] {
                        put_key(&mut body, 1, 0);
                        put_varint(&mut body, *v as u64);
                    }
                }
            }
            maybe_unknown(&mut body, c);
            i = j;
        }
        lists.push((field, body));
    }
    lists
}

/// A `Feature`'s fields, possibly preceded by a decoy list of another kind that the
/// real kind replaces.
fn enc_feature_fields(f: &Feature, c: &mut Choices) -> Vec<Vec<u8>> {
    let mut fields = Vec::new();
    if let Some(kind) = &f.kind
        && c.coin()
    {
        let decoy = match kind {
            feature::Kind::FloatList(_) => Feature::int64s(vec![7, -1]),
            _ => Feature::floats(vec![1.5]),
        };
        for (field, body) in enc_lists(&decoy, c) {
            let mut out = Vec::new();
            put_len(&mut out, field, &body);
            fields.push(out);
        }
    }
    for (field, body) in enc_lists(f, c) {
        let mut out = Vec::new();
        maybe_unknown(&mut out, c);
        put_len(&mut out, field, &body);
        fields.push(out);
    }
    fields
}

/// A map entry body: key and value fields (the value possibly split into merged chunks).
fn enc_entry(name: &str, f: &Feature, c: &mut Choices) -> Vec<u8> {
    let mut body = Vec::new();
    let fields = enc_feature_fields(f, c);
    let key_first = !c.coin();
    if key_first {
        if c.coin() {
            put_len(&mut body, 1, b"replaced key");
        }
        put_len(&mut body, 1, name.as_bytes());
    }
    maybe_unknown(&mut body, c);
    if fields.is_empty() {
        if !c.coin() {
            put_len(&mut body, 2, &[]);
        }
    } else {
        let split = if c.coin() { c.below(fields.len() + 1) } else { fields.len() };
        for part in [&fields[..split], &fields[split..]] {
            if !part.is_empty() {
                put_len(&mut body, 2, &part.concat());
            }
        }
    }
    if !key_first {
        put_len(&mut body, 1, name.as_bytes());
    }
    body
}

/// An `Example` in a random one of the many encodings protobuf accepts for it.
fn enc_example(features: &Option<Features>, c: &mut Choices) -> Vec<u8> {
    let mut out = Vec::new();
    maybe_unknown(&mut out, c);
    let Some(features) = features else { return out };
    let mut chunks = vec![Vec::new()];
    for (name, f) in &features.feature {
        if c.coin() {
            // A decoy entry of the same name, replaced by the real one below.
            put_len(chunks.last_mut().unwrap(), 1, &enc_entry(name, &Feature::bytes([b"decoy".to_vec()]), c));
            if c.coin() {
                chunks.push(Vec::new());
            }
        }
        let entry = enc_entry(name, f, c);
        let chunk = chunks.last_mut().unwrap();
        maybe_unknown(chunk, c);
        put_len(chunk, 1, &entry);
    }
    for chunk in chunks {
        put_len(&mut out, 1, &chunk);
        maybe_unknown(&mut out, c);
    }
    out
}

fn any_feature() -> impl Strategy<Value = Feature> {
    prop_oneof![
        1 => Just(Feature { kind: None }),
        3 => prop::collection::vec(any::<u32>().prop_map(f32::from_bits), 0..24).prop_map(Feature::floats),
        3 => prop::collection::vec(any::<i64>(), 0..24).prop_map(Feature::int64s),
        2 => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..6).prop_map(Feature::bytes),
    ]
}

fn any_features() -> impl Strategy<Value = Features> {
    prop::collection::btree_map("[a-e]{0,3}|caf\u{e9}", any_feature(), 0..8)
        .prop_map(|feature| Features { feature })
}

fn dtype_of(f: &Feature) -> Option<DType> {
    Some(match f.kind.as_ref()? {
        feature::Kind::FloatList(_) => DType::F32,
        feature::Kind::Int64List(_) => DType::I64,
        feature::Kind::BytesList(_) => DType::Bytes,
    })
}

fn feature_len(f: &Feature) -> usize {
    match &f.kind {
        None => 0,
        Some(feature::Kind::FloatList(l)) => l.value.len(),
        Some(feature::Kind::Int64List(l)) => l.value.len(),
        Some(feature::Kind::BytesList(l)) => l.value.len(),
    }
}

/// Appends one record's feature (as prost decoded it) or default to an expected column.
fn push_expected(col: &mut Column, f: Option<&Feature>, default: Option<&DefaultValue>) {
    match (&mut col.values, f.and_then(|f| f.kind.as_ref()), default) {
        (ColumnValues::F32(v), Some(feature::Kind::FloatList(l)), _) => v.extend_from_slice(&l.value),
        (ColumnValues::I64(v), Some(feature::Kind::Int64List(l)), _) => v.extend_from_slice(&l.value),
        (ColumnValues::Bytes { data, offsets }, Some(feature::Kind::BytesList(l)), _) => {
            for b in &l.value {
                data.extend_from_slice(b);
                offsets.push(data.len());
            }
        }
        (ColumnValues::F32(v), None, Some(DefaultValue::F32(d))) if f.is_none() => v.extend_from_slice(d),
        (ColumnValues::I64(v), None, Some(DefaultValue::I64(d))) if f.is_none() => v.extend_from_slice(d),
        (ColumnValues::Bytes { data, offsets }, None, Some(DefaultValue::Bytes(d))) if f.is_none() => {
            for b in d {
                data.extend_from_slice(b);
                offsets.push(data.len());
            }
        }
        (_, None, _) => assert!(f.is_some(), "test bug: missing feature without default"),
        _ => panic!("test bug: kind mismatch"),
    }
    let n = col.value_count();
    if let Some(s) = &mut col.row_splits {
        s.push(n);
    }
}

/// Columns with floats replaced by their bits, for comparisons where NaN equals NaN.
fn canon_columns(cols: &[Column]) -> Vec<(Option<Vec<usize>>, Canon, Vec<usize>)> {
    cols.iter()
        .map(|c| match &c.values {
            ColumnValues::F32(v) => (c.row_splits.clone(), Canon::Floats(bits(v)), vec![]),
            ColumnValues::I64(v) => (c.row_splits.clone(), Canon::Int64s(v.clone()), vec![]),
            ColumnValues::Bytes { data, offsets } => {
                (c.row_splits.clone(), Canon::Bytes(vec![data.clone()]), offsets.clone())
            }
        })
        .collect()
}

/// A spec over some present features (their actual kind, fixed at their actual length
/// or ragged) and some absent ones with defaults, from choices `c`.
fn spec_for(features: &Features, c: &mut Choices) -> ParseSpec {
    let mut specs = Vec::new();
    for (name, f) in &features.feature {
        if c.coin() {
            continue;
        }
        let dtype = dtype_of(f).unwrap_or(match c.below(3) {
            0 => DType::F32,
            1 => DType::I64,
            _ => DType::Bytes,
        });
        let shape = if c.coin() { Shape::Var } else { Shape::Fixed(vec![feature_len(f)]) };
        specs.push(FeatureSpec { name: name.clone(), dtype, shape, default: None });
    }
    specs.push(FeatureSpec::var("absent/var", DType::Bytes));
    specs.push(
        FeatureSpec::fixed("absent/fixed", DType::F32, vec![2, 1])
            .with_default(Some(DefaultValue::F32(vec![-0.0, f32::NAN]))),
    );
    let n = specs.len();
    specs.swap(c.below(n), c.below(n));
    ParseSpec::new(specs)
}

fn expected_columns(parser: &ExampleParser, records: &[&Option<Features>]) -> Vec<Column> {
    let mut cols: Vec<Column> =
        parser.spec().features.iter().map(|f| Column::new(f.dtype, f.shape == Shape::Var)).collect();
    for features in records {
        for (spec, col) in parser.spec().features.iter().zip(&mut cols) {
            let f = features.as_ref().and_then(|fs| fs.feature.get(&spec.name));
            push_expected(col, f, spec.default.as_ref());
        }
    }
    cols
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn view_reads_what_prost_reads(features in prop::option::of(any_features()), seed in 1u64..) {
        let mut c = Choices(seed);
        let bytes = enc_example(&features, &mut c);
        let want: BTreeMap<String, Canon> = features.as_ref()
            .map(|f| f.feature.iter().map(|(k, v)| (k.clone(), canon(v))).collect())
            .unwrap_or_default();
        // The encoder's freedoms are ones protobuf itself accepts.
        prop_assert_eq!(&prost_map(&bytes).unwrap(), &want);
        prop_assert_eq!(&view_map(&bytes).unwrap(), &want);
        // The standard (packed, canonical) encoding too.
        let canonical = Example { features: features.clone() }.encode_to_vec();
        prop_assert_eq!(&view_map(&canonical).unwrap(), &want);
        for (name, f) in &want {
            let got = ExampleView::new(&bytes).get(name).unwrap().map(|v| canon_view(&v));
            prop_assert_eq!(got.as_ref(), Some(f));
        }
    }

    #[test]
    fn parser_matches_prost(features in prop::option::of(any_features()), seed in 1u64..) {
        let mut c = Choices(seed);
        let bytes = enc_example(&features, &mut c);
        let empty = Features::default();
        let parser = ExampleParser::new(spec_for(features.as_ref().unwrap_or(&empty), &mut c)).unwrap();
        let got = parser.parse_one(&bytes).unwrap();
        let expected = expected_columns(&parser, &[&features]);
        prop_assert_eq!(canon_columns(got.columns()), canon_columns(&expected));
        prop_assert_eq!(got.rows(), 1);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check_no_panic_and_agreement(&bytes);
    }

    #[test]
    fn mutated_examples_never_panic(
        features in any_features(),
        seed in 1u64..,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut c = Choices(seed);
        let mut bytes = enc_example(&Some(features), &mut c);
        for (at, byte, op) in edits {
            if bytes.is_empty() {
                bytes.push(byte);
                continue;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => { bytes.remove(i); }
            }
        }
        check_no_panic_and_agreement(&bytes);
    }

    #[test]
    fn a_batch_is_its_records_concatenated(
        examples in prop::collection::vec(prop::option::of(any_features()), 1..24),
        seed in 1u64..,
    ) {
        let mut c = Choices(seed);
        let records: Vec<Vec<u8>> = (0..1024).map(|i| enc_example(&examples[i % examples.len()], &mut c)).collect();
        // A spec that some records satisfy and others fail (wrong kind, wrong length,
        // missing), so that failed records must leave the batch untouched.
        let empty = Features::default();
        let spec = spec_for(examples[0].as_ref().unwrap_or(&empty), &mut c);
        let parser = ExampleParser::new(spec).unwrap();
        let mut batch = parser.columns();
        let mut singles = Vec::new();
        for r in &records {
            let one = parser.parse_one(r);
            let into = parser.parse_into(r, &mut batch);
            prop_assert_eq!(one.is_ok(), into.is_ok());
            if let (Err(a), Err(b)) = (&one, &into) {
                prop_assert_eq!(a, b);
            }
            if let Ok(one) = one {
                singles.push(one);
            }
        }
        prop_assert_eq!(batch.rows(), singles.len());
        let concat = concat_columns(&parser, &singles);
        prop_assert_eq!(canon_columns(batch.columns()), canon_columns(&concat));
        batch.truncate(1);
        let first = concat_columns(&parser, &singles[..singles.len().min(1)]);
        prop_assert_eq!(canon_columns(batch.columns()), canon_columns(&first));
    }
}

/// Per-record columns concatenated column by column.
fn concat_columns(parser: &ExampleParser, singles: &[Columns]) -> Vec<Column> {
    let mut out: Vec<Column> =
        parser.spec().features.iter().map(|f| Column::new(f.dtype, f.shape == Shape::Var)).collect();
    for one in singles {
        for (acc, col) in out.iter_mut().zip(one.columns()) {
            let base = acc.value_count();
            match (&mut acc.values, &col.values) {
                (ColumnValues::F32(a), ColumnValues::F32(v)) => a.extend_from_slice(v),
                (ColumnValues::I64(a), ColumnValues::I64(v)) => a.extend_from_slice(v),
                (ColumnValues::Bytes { data: ad, offsets: ao }, ColumnValues::Bytes { data, offsets }) => {
                    let shift = ad.len();
                    ad.extend_from_slice(data);
                    ao.extend(offsets[1..].iter().map(|o| o + shift));
                }
                _ => panic!("test bug: column types differ"),
            }
            if let (Some(a), Some(s)) = (&mut acc.row_splits, &col.row_splits) {
                a.extend(s[1..].iter().map(|o| o + base));
            }
        }
    }
    out
}

/// Walks everything a record offers through the view and the parser (a panic fails the
/// test), and checks the view against prost: whatever prost decodes, the view reads the
/// same; whatever the view fully reads, prost decodes.
fn check_no_panic_and_agreement(bytes: &[u8]) {
    let view = view_map(bytes);
    let prost = prost_map(bytes);
    match (&view, &prost) {
        (Ok(v), Ok(p)) => assert_eq!(v, p),
        (Err(_), Err(_)) => {}
        // prost reads a map field's entry without checking its wire type (its derived
        // map `merge` takes a length whatever the key said); the view, like TensorFlow's
        // parser, rejects a `Features.feature` key of another wire type.
        (Err(e), Ok(_))
            if e.contains("field 1 has invalid wire type") && has_map_key_of_other_wire_type(bytes) => {}
        _ => panic!("view {view:?} but prost {prost:?} on {bytes:?}"),
    }
    for dtype in [DType::F32, DType::I64, DType::Bytes] {
        let names: Vec<String> = match &prost {
            Ok(p) => p.keys().cloned().collect(),
            Err(_) => vec![String::new(), "a".into()],
        };
        let parser =
            ExampleParser::new(ParseSpec::new(names.iter().map(|n| FeatureSpec::var(n.clone(), dtype))))
                .unwrap();
        let mut cols = parser.columns();
        let _ = parser.parse_into(bytes, &mut cols);
        let _ = parser.parse_into(bytes, &mut cols);
    }
}

/// Whether a `Features` message of `example` (as far as it reads as wire format) holds a
/// key of field 1 (`feature`, the map) whose wire type is not length-delimited.
fn has_map_key_of_other_wire_type(example: &[u8]) -> bool {
    fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*i)?;
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    /// The fields of a message as (field, wire type, body of a length-delimited one), up
    /// to the first that does not read.
    fn fields(b: &[u8]) -> Vec<(u64, u64, &[u8])> {
        let (mut i, mut out) = (0, Vec::new());
        while i < b.len() {
            let Some(key) = varint(b, &mut i) else { break };
            let (field, wire) = (key >> 3, key & 7);
            let fixed = if wire == 1 { 8 } else { 4 };
            let body: &[u8] = match wire {
                0 if varint(b, &mut i).is_some() => &[],
                1 | 5 if i + fixed <= b.len() => {
                    i += fixed;
                    &[]
                }
                2 => match varint(b, &mut i).and_then(|n| b.get(i..i.checked_add(n as usize)?)) {
                    Some(body) => {
                        i += body.len();
                        body
                    }
                    None => break,
                },
                // A group's markers are fields of their own here: the key is all that counts.
                3 | 4 => &[],
                _ => break,
            };
            out.push((field, wire, body));
        }
        out
    }
    fields(example)
        .into_iter()
        .filter(|&(field, wire, _)| field == 1 && wire == 2)
        .any(|(_, _, features)| fields(features).iter().any(|&(field, wire, _)| field == 1 && wire != 2))
}

#[test]
fn a_map_key_of_another_wire_type_is_rejected_where_prost_reads_it() {
    // Features { feature: {"a": int64s [7]} }, the entry's key saying "end group" (wire
    // type 4): prost takes the next varint as the entry's length anyway.
    let entry = Features { feature: [("a".to_string(), Feature::int64s(vec![7]))].into_iter().collect() }
        .encode_to_vec();
    assert_eq!(entry[0], 0x0a, "field 1, length-delimited");
    let mut features = entry.clone();
    features[0] = 0x0c;
    let mut bytes = vec![0x0a];
    prost::encoding::encode_varint(features.len() as u64, &mut bytes);
    bytes.extend_from_slice(&features);
    assert!(has_map_key_of_other_wire_type(&bytes));
    let view = view_map(&bytes).unwrap_err();
    assert!(view.contains("field 1 has invalid wire type 4"), "{view}");
    assert!(prost_map(&bytes).is_ok(), "prost reads it (if it stops, the exemption can go)");
    let mut plain = vec![0x0a];
    prost::encoding::encode_varint(entry.len() as u64, &mut plain);
    plain.extend_from_slice(&entry);
    assert!(!has_map_key_of_other_wire_type(&plain));
    assert_eq!(view_map(&plain), prost_map(&plain));
}

/// The mutated example on which CI found prost's map leniency (a `10` turned `12`).
#[test]
fn the_mutated_example_ci_found_agrees_up_to_prost_s_leniency() {
    let bytes = [
        10, 128, 1, 10, 38, 10, 3, 98, 99, 99, 18, 31, 18, 15, 33, 112, 142, 13, 140, 232, 224, 164, 248, 10,
        4, 0, 0, 192, 63, 10, 12, 10, 5, 100, 101, 99, 111, 121, 53, 1, 2, 3, 4, 10, 35, 18, 28, 18, 26, 67,
        8, 172, 2, 68, 13, 49, 220, 129, 42, 13, 87, 48, 162, 4, 13, 69, 192, 25, 22, 122, 4, 106, 117, 110,
        107, 10, 3, 98, 99, 99, 12, 49, 10, 5, 99, 97, 102, 195, 169, 18, 40, 51, 8, 172, 2, 52, 10, 33, 10,
        10, 72, 227, 152, 245, 140, 167, 204, 163, 244, 74, 10, 2, 94, 237, 101, 1, 2, 3, 4, 10, 3, 20, 232,
        2, 155, 1, 8, 172, 2, 156, 1, 157, 1, 1, 2, 3, 4,
    ];
    assert!(has_map_key_of_other_wire_type(&bytes));
    check_no_panic_and_agreement(&bytes);
}

fn tabular_record(x: &[f32], label: i64) -> Vec<u8> {
    Example::from_features([
        ("x".to_string(), Feature::floats(x.to_vec())),
        ("label".to_string(), Feature::int64s(vec![label])),
        ("id".to_string(), Feature::int64s(vec![99])),
    ])
    .encode_to_vec()
}

fn tabular_parser() -> ExampleParser {
    ExampleParser::new(ParseSpec::new([
        FeatureSpec::fixed("x", DType::F32, vec![4]),
        FeatureSpec::fixed("label", DType::I64, vec![]),
    ]))
    .unwrap()
}

#[test]
fn parses_dense_columns() {
    let parser = tabular_parser();
    let mut cols = parser.columns();
    parser.parse_into(&tabular_record(&[1.0, 2.0, 3.0, 4.0], 3), &mut cols).unwrap();
    parser.parse_into(&tabular_record(&[5.0, 6.0, 7.0, 8.0], -1), &mut cols).unwrap();
    assert_eq!(cols.rows(), 2);
    assert_eq!(cols.columns()[0].as_f32().unwrap(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    assert_eq!(cols.columns()[1].as_i64().unwrap(), &[3, -1]);
    assert_eq!(cols.columns()[0].row_splits, None);
    cols.clear();
    assert_eq!(cols.rows(), 0);
    assert!(cols.columns()[0].as_f32().unwrap().is_empty());
}

#[test]
fn errors_name_the_feature() {
    let parser = tabular_parser();
    let mut cols = parser.columns();
    parser.parse_into(&tabular_record(&[1.0; 4], 0), &mut cols).unwrap();
    let before = cols.clone();

    let err = parser.parse_into(&tabular_record(&[1.0; 3], 0), &mut cols).unwrap_err();
    assert_eq!(err, ParseError::WrongLength { feature: "x".into(), expected: 4, actual: 3 });
    assert_eq!(err.to_string(), "feature `x`: expected 4 values, found 3");
    assert_eq!(cols, before, "a failed record leaves the columns as they were");

    let wrong_kind = Example::from_features([
        ("x".to_string(), Feature::floats(vec![0.0; 4])),
        ("label".to_string(), Feature::floats(vec![1.0])),
    ])
    .encode_to_vec();
    let err = parser.parse_into(&wrong_kind, &mut cols).unwrap_err();
    assert_eq!(
        err,
        ParseError::WrongKind { feature: "label".into(), expected: DType::I64, actual: DType::F32 }
    );
    assert_eq!(err.to_string(), "feature `label`: expected an int64_list but found a float_list");
    assert_eq!(cols, before);

    let missing = Example::from_features([("x".to_string(), Feature::floats(vec![0.0; 4]))]).encode_to_vec();
    let err = parser.parse_into(&missing, &mut cols).unwrap_err();
    assert_eq!(err, ParseError::Missing { feature: "label".into() });
    assert_eq!(err.to_string(), "feature `label` is missing and has no default");
    assert_eq!(cols, before);

    // A feature with no kind is present with zero values: wrong length for a scalar.
    let no_kind = Example::from_features([
        ("x".to_string(), Feature::floats(vec![0.0; 4])),
        ("label".to_string(), Feature { kind: None }),
    ])
    .encode_to_vec();
    let err = parser.parse_into(&no_kind, &mut cols).unwrap_err();
    assert_eq!(err, ParseError::WrongLength { feature: "label".into(), expected: 1, actual: 0 });

    let err = parser.parse_into(&[0x0a, 0x05, 0x01], &mut cols).unwrap_err();
    assert!(matches!(err, ParseError::Malformed { feature: None, .. }), "{err}");
    assert_eq!(cols, before);

    // Columns of another spec are refused, not misused.
    let other = ExampleParser::new(ParseSpec::new([FeatureSpec::var("x", DType::F32)])).unwrap();
    let err = parser.parse_into(&tabular_record(&[1.0; 4], 0), &mut other.columns()).unwrap_err();
    assert_eq!(err, ParseError::ColumnsMismatch);
}

#[test]
fn defaults_and_ragged_features() {
    let parser = ExampleParser::new(ParseSpec::new([
        FeatureSpec::fixed("label", DType::I64, vec![]).with_default(Some(DefaultValue::I64(vec![-1]))),
        FeatureSpec::var("tokens", DType::Bytes),
        FeatureSpec::var("w", DType::F32).with_default(Some(DefaultValue::F32(vec![0.5, 0.25]))),
    ]))
    .unwrap();
    let mut cols = parser.columns();
    let full = Example::from_features([
        ("label".to_string(), Feature::int64s(vec![7])),
        ("tokens".to_string(), Feature::bytes([b"ab".to_vec(), b"".to_vec(), b"c".to_vec()])),
        ("w".to_string(), Feature { kind: None }),
    ])
    .encode_to_vec();
    parser.parse_into(&full, &mut cols).unwrap();
    parser.parse_into(&Example::default().encode_to_vec(), &mut cols).unwrap();
    parser.parse_into(&full, &mut cols).unwrap();
    let c = cols.columns();
    assert_eq!(c[0].as_i64().unwrap(), &[7, -1, 7]);
    assert_eq!(c[1].row_splits.as_deref(), Some(&[0, 3, 3, 6][..]));
    assert_eq!(
        c[1].values,
        ColumnValues::Bytes { data: b"abcabc".to_vec(), offsets: vec![0, 2, 2, 3, 5, 5, 6] }
    );
    assert_eq!(c[1].bytes_value(2), Some(&b"c"[..]));
    assert_eq!(c[2].as_f32().unwrap(), &[0.5, 0.25]);
    assert_eq!(c[2].row_splits.as_deref(), Some(&[0, 0, 2, 2][..]));
    cols.truncate(1);
    assert_eq!(cols.columns()[1].row_splits.as_deref(), Some(&[0, 3][..]));
    assert_eq!(cols.columns()[1].value_count(), 3);
}

#[test]
fn spec_validation() {
    let dup = ParseSpec::new([FeatureSpec::var("a", DType::F32), FeatureSpec::var("a", DType::I64)]);
    assert_eq!(dup.validate().unwrap_err().to_string(), "feature `a` is declared twice");
    let kind =
        ParseSpec::new([FeatureSpec::var("a", DType::F32).with_default(Some(DefaultValue::I64(vec![])))]);
    assert_eq!(
        kind.validate().unwrap_err().to_string(),
        "feature `a`: default is i64 but the feature is f32"
    );
    let len =
        ParseSpec::new([FeatureSpec::fixed("a", DType::F32, vec![2, 3])
            .with_default(Some(DefaultValue::F32(vec![0.0; 5])))]);
    assert_eq!(
        len.validate().unwrap_err().to_string(),
        "feature `a`: default has 5 values but the shape needs 6"
    );
    let huge = ParseSpec::new([FeatureSpec::fixed("a", DType::F32, vec![usize::MAX, 2])]);
    assert!(ExampleParser::new(huge).is_err());
}

#[test]
fn many_declared_features_use_the_hash_lookup() {
    let names: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
    let parser = ExampleParser::new(ParseSpec::new(
        names.iter().map(|n| FeatureSpec::fixed(n.clone(), DType::I64, vec![])),
    ))
    .unwrap();
    let record = Example::from_features(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), Feature::int64s(vec![i as i64])))
            .chain([("undeclared".to_string(), Feature::floats(vec![1.0]))]),
    )
    .encode_to_vec();
    let cols = parser.parse_one(&record).unwrap();
    for (i, c) in cols.columns().iter().enumerate() {
        assert_eq!(c.as_i64().unwrap(), &[i as i64]);
    }
}

#[test]
fn undeclared_features_are_not_decoded() {
    // `junk`'s float list has a packed length that is not a multiple of 4: prost and the
    // full walk reject the record, the parser (which never looks inside) does not.
    let mut record = tabular_record(&[1.0; 4], 2);
    let mut entry = Vec::new();
    put_len(&mut entry, 1, b"junk");
    let mut list = Vec::new();
    put_len(&mut list, 1, &[0, 0, 0]);
    let mut feature = Vec::new();
    put_len(&mut feature, 2, &list);
    put_len(&mut entry, 2, &feature);
    let mut features = Vec::new();
    put_len(&mut features, 1, &entry);
    put_len(&mut record, 1, &features);
    assert!(Example::decode(&record[..]).is_err());
    assert!(view_map(&record).is_err());
    let cols = tabular_parser().parse_one(&record).unwrap();
    assert_eq!(cols.columns()[1].as_i64().unwrap(), &[2]);
}

#[test]
fn invalid_utf8_names_are_errors() {
    let mut entry = Vec::new();
    put_len(&mut entry, 1, &[0xff, 0x61]);
    let mut features = Vec::new();
    put_len(&mut features, 1, &entry);
    let mut record = Vec::new();
    put_len(&mut record, 1, &features);
    assert!(Example::decode(&record[..]).is_err());
    let err = ExampleView::new(&record).entries().next().unwrap().unwrap_err();
    assert_eq!(err.to_string(), "feature name is not valid UTF-8 at byte 6");
    assert!(matches!(tabular_parser().parse_one(&record), Err(ParseError::Malformed { .. })));
}
