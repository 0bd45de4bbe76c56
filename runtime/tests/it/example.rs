//! `tf.train.Example` round trips through TFRecord files: any features of the three list
//! kinds (floats compared bit for bit, so NaN payloads and -0.0 count), every compression.

use std::collections::BTreeMap;

use proptest::prelude::*;
use prost::Message;
use sluice_runtime::example::{
    Example, Feature, FeatureList, FeatureLists, Features, SequenceExample, feature,
};
use sluice_runtime::tfrecord::{self, Compression, ReaderOptions};

fn any_feature() -> impl Strategy<Value = Feature> {
    prop_oneof![
        Just(Feature { kind: None }),
        prop::collection::vec(any::<u32>().prop_map(f32::from_bits), 0..40).prop_map(Feature::floats),
        prop::collection::vec(any::<i64>(), 0..40).prop_map(Feature::int64s),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8).prop_map(Feature::bytes),
    ]
}

fn any_features() -> impl Strategy<Value = Features> {
    prop::collection::btree_map("[a-z/_é]{0,12}", any_feature(), 0..12)
        .prop_map(|feature| Features { feature })
}

/// A feature's kind and values, floats as bits so that NaN equals itself.
type Canonical = Option<(u8, Vec<u64>, Vec<Vec<u8>>)>;

fn canonical(f: &Feature) -> Canonical {
    Some(match f.kind.as_ref()? {
        feature::Kind::FloatList(l) => (0, l.value.iter().map(|v| u64::from(v.to_bits())).collect(), vec![]),
        feature::Kind::Int64List(l) => (1, l.value.iter().map(|v| *v as u64).collect(), vec![]),
        feature::Kind::BytesList(l) => (2, vec![], l.value.clone()),
    })
}

fn canonical_map(f: &Features) -> BTreeMap<String, Canonical> {
    f.feature.iter().map(|(k, v)| (k.clone(), canonical(v))).collect()
}

proptest! {
    #[test]
    fn examples_round_trip(
        examples in prop::collection::vec(prop::option::of(any_features()), 0..12),
        compression in prop::sample::select(vec![Compression::None, Compression::Gzip, Compression::Zlib]),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("ex.tfrecord{}", compression.extension()));
        let examples: Vec<Example> = examples.into_iter().map(|features| Example { features }).collect();
        let mut w = tfrecord::create(&path, Compression::Auto).unwrap();
        for ex in &examples {
            w.write_record(&ex.encode_to_vec()).unwrap();
        }
        w.finish().unwrap();
        let mut r = tfrecord::open(&path, &ReaderOptions::default()).unwrap();
        let mut got = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            got.push(Example::decode_record(rec).unwrap());
        }
        prop_assert_eq!(got.len(), examples.len());
        for (g, e) in got.iter().zip(&examples) {
            prop_assert_eq!(g.features.is_some(), e.features.is_some());
            prop_assert_eq!(g.features.as_ref().map(canonical_map), e.features.as_ref().map(canonical_map));
        }
    }

    #[test]
    fn sequence_examples_round_trip(
        context in prop::option::of(any_features()),
        lists in prop::collection::btree_map("[a-z]{1,8}", prop::collection::vec(any_feature(), 0..6), 0..5),
    ) {
        let ex = SequenceExample {
            context,
            feature_lists: Some(FeatureLists {
                feature_list: lists.into_iter().map(|(k, feature)| (k, FeatureList { feature })).collect(),
            }),
        };
        let back = SequenceExample::decode_record(&ex.encode_to_vec()).unwrap();
        prop_assert_eq!(back.context.as_ref().map(canonical_map), ex.context.as_ref().map(canonical_map));
        let lists = |s: &SequenceExample| -> BTreeMap<String, Vec<_>> {
            s.feature_lists.iter().flat_map(|l| &l.feature_list)
                .map(|(k, l)| (k.clone(), l.feature.iter().map(canonical).collect()))
                .collect()
        };
        prop_assert_eq!(lists(&back), lists(&ex));
    }
}
