//! Files written by real TensorFlow (`tests/fixtures/tf`, made by `make_reference.py`
//! with tensorflow-cpu 2.21.0) decode to exactly what TensorFlow wrote: the JSON is
//! byte-for-byte `MessageToJson(msg, indent=None, sort_keys=True)` once Python's
//! separators are applied, and every float, int64 and byte string matches bit for bit.

use std::path::PathBuf;

use serde_json::Value;
use sluice_runtime::example::{Example, Feature, Features, SequenceExample, feature, json};
use sluice_runtime::tfrecord::{self, ReaderOptions};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tf")
}

/// Python's `json.dumps` separators (`", "`, `": "`) applied to compact JSON.
fn python_spacing(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 5 / 4);
    let (mut in_str, mut escaped) = (false, false);
    for c in compact.chars() {
        out.push(c);
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
        } else if c == ',' || c == ':' {
            out.push(' ');
        }
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The lossless description `make_reference.py` writes: kind and values with floats as
/// their bit patterns, int64 as strings, bytes as hex.
fn feature_bits(f: &Feature) -> Value {
    let (kind, values): (Value, Vec<Value>) = match &f.kind {
        None => (Value::Null, vec![]),
        Some(feature::Kind::FloatList(l)) => {
            ("float".into(), l.value.iter().map(|v| v.to_bits().into()).collect())
        }
        Some(feature::Kind::Int64List(l)) => {
            ("int64".into(), l.value.iter().map(|v| v.to_string().into()).collect())
        }
        Some(feature::Kind::BytesList(l)) => {
            ("bytes".into(), l.value.iter().map(|v| hex(v).into()).collect())
        }
    };
    serde_json::json!({ "kind": kind, "values": values })
}

fn features_bits(f: Option<&Features>) -> Value {
    let map = f.map(|f| f.feature.iter().map(|(k, v)| (k.clone(), feature_bits(v))).collect());
    Value::Object(map.unwrap_or_default())
}

struct Decoded {
    json: String,
    bits: Value,
}

fn decode(record: &[u8], sequence: bool) -> Decoded {
    if sequence {
        let ex = SequenceExample::decode_record(record).expect("a valid SequenceExample");
        let lists: serde_json::Map<String, Value> = ex
            .feature_lists
            .iter()
            .flat_map(|l| &l.feature_list)
            .map(|(k, l)| (k.clone(), Value::Array(l.feature.iter().map(feature_bits).collect())))
            .collect();
        Decoded {
            json: json::sequence_example_to_json(&ex),
            bits: serde_json::json!({ "context": features_bits(ex.context.as_ref()), "feature_lists": lists }),
        }
    } else {
        let ex = Example::decode_record(record).expect("a valid Example");
        Decoded {
            json: json::example_to_json(&ex),
            bits: serde_json::json!({ "features": features_bits(ex.features.as_ref()) }),
        }
    }
}

#[test]
fn tensorflow_files_decode_exactly() {
    let dir = fixtures();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_object().unwrap();
    assert!(files.len() >= 7, "the fixture set is complete");
    for (name, spec) in files {
        let sequence = spec["message"] == "tensorflow.SequenceExample";
        let want_json: Vec<String> = std::fs::read_to_string(dir.join(spec["expect_json"].as_str().unwrap()))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        let want_bits: Vec<Value> = std::fs::read_to_string(dir.join(spec["expect_bits"].as_str().unwrap()))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let lens: Vec<u64> =
            spec["payload_len"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();

        let mut reader = tfrecord::open(dir.join(name), &ReaderOptions::default()).unwrap();
        let mut n = 0;
        while let Some(record) = reader.next_record().unwrap_or_else(|e| panic!("{e}")) {
            assert_eq!(record.len() as u64, lens[n], "{name} record {n}: payload length");
            let got = decode(record, sequence);
            assert_eq!(python_spacing(&got.json), want_json[n], "{name} record {n}: JSON");
            assert_eq!(got.bits, want_bits[n], "{name} record {n}: values");
            n += 1;
        }
        assert_eq!(n as u64, spec["records"].as_u64().unwrap(), "{name}: record count");
    }
}

#[test]
fn re_encoding_gives_tensorflows_bytes() {
    // Sorted feature maps and packed lists: what Sluice writes for an Example is what
    // TensorFlow's SerializeToString(deterministic=True) wrote, except where one key is
    // a prefix of another: upb then puts the longer key first (`blob_len` before `blob`),
    // Sluice keeps plain byte order; and a map entry whose value is an empty `Feature`
    // is written by prost without the empty value field. Both decode to the same message.
    use prost::Message;
    let mut reader = tfrecord::open(fixtures().join("examples.tfrecord"), &ReaderOptions::default()).unwrap();
    let (mut n, mut identical) = (0, 0);
    while let Some(record) = reader.next_record().unwrap() {
        let ex = Example::decode_record(record).unwrap();
        let again = ex.encode_to_vec();
        assert_eq!(Example::decode_record(&again).unwrap().encode_to_vec(), again, "record {n}");
        let keys: Vec<&String> = ex.features.iter().flat_map(|f| f.feature.keys()).collect();
        let prefixed = keys.iter().any(|a| keys.iter().any(|b| a != b && b.starts_with(a.as_str())));
        let kindless = ex.features.iter().flat_map(|f| f.feature.values()).any(|f| f.kind.is_none());
        if !prefixed && !kindless {
            assert_eq!(again, record, "record {n}");
            identical += 1;
        }
        n += 1;
    }
    assert_eq!(n, 20);
    assert_eq!(identical, 16, "records without either quirk");
}
