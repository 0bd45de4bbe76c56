//! The generated, schema-specialised parser on records written by real TensorFlow
//! (`tests/fixtures/tf/unpacked.tfrecord`): every value, bit for bit, as prost decodes
//! it, whichever encoding (packed, unpacked, mixed chunks) the record uses.

use prost::Message;
use sluice::example::Example;
use sluice::example::feature::Kind;
use sluice::runtime::stage::Dataset;
use sluice_examples::fixtures::tf_unpacked;

fn floats(ex: &Example, name: &str) -> Option<Vec<u32>> {
    match ex.features.as_ref()?.feature.get(name)?.kind.as_ref()? {
        Kind::FloatList(l) => Some(l.value.iter().map(|v| v.to_bits()).collect()),
        _ => None,
    }
}

fn ints(ex: &Example, name: &str) -> Option<Vec<i64>> {
    match ex.features.as_ref()?.feature.get(name)?.kind.as_ref()? {
        Kind::Int64List(l) => Some(l.value.clone()),
        _ => None,
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn tensorflow_written_records_parse_bit_for_bit() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/tf/unpacked.tfrecord");
    let mut reader = sluice::tfrecord::open(path, &Default::default()).unwrap();
    let mut expected = Vec::new();
    while let Some(r) = reader.next_record().unwrap() {
        expected.push(Example::decode(r).unwrap());
    }
    assert!(expected.len() >= 4, "the fixture has its records");
    let params = tf_unpacked::Params::from_args(&[("files".into(), path.into())]).unwrap();
    let got: Vec<tf_unpacked::Record> =
        tf_unpacked::dataset(&params).unwrap().stream().unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(got.len(), expected.len());
    for (i, (r, ex)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(bits(&r.f_unpacked), floats(ex, "f_unpacked").unwrap_or_default(), "record {i}");
        assert_eq!(r.i_unpacked, ints(ex, "i_unpacked").unwrap_or_default(), "record {i}");
        assert_eq!(bits(&r.f_mixed), floats(ex, "f_mixed").unwrap_or_default(), "record {i}");
        assert_eq!(r.i_mixed, ints(ex, "i_mixed").unwrap_or_default(), "record {i}");
        let one = |name: &str| floats(ex, name).map_or((-1.0f32).to_bits(), |v| v[0]);
        assert_eq!(r.f_packed_single.to_bits(), one("f_packed_single"), "record {i}");
        assert_eq!(r.a_float.to_bits(), one("a_float"), "record {i}");
        assert_eq!(r.z_int, ints(ex, "z_int").map_or(-1, |v| v[0]), "record {i}");
        assert_eq!(bits(r.snan.as_slice()), floats(ex, "snan").unwrap_or(vec![0, 0]), "record {i}");
    }
    // The mixed-chunk record really is the one with concatenated chunks.
    assert_eq!(got[1].f_mixed, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(got[1].i_mixed, vec![1, 2, 3, -4, 5]);
}
