//! `tf.train.Example` and `tf.train.SequenceExample`: the messages of TensorFlow's
//! `example.proto` and `feature.proto`, as prost messages (derived, no protoc needed),
//! wire-compatible with TensorFlow in both directions.
//!
//! Repeated numeric fields are written packed, as TensorFlow writes them, and read
//! either packed or unpacked, as protobuf requires. Feature maps are `BTreeMap`s, so a
//! message encodes with its keys sorted, like TensorFlow's `SerializeToString(deterministic=True)`.
//!
//! [`json`] renders messages in protobuf's canonical proto3 JSON mapping (`sluice cat`).

pub mod json;
pub mod layout;
pub mod parse;
mod proto;
pub mod tensor;
pub mod view;

pub use proto::{
    BytesList, Example, Feature, FeatureList, FeatureLists, Features, FloatList, Int64List, SequenceExample,
    feature,
};

use prost::Message;

use crate::error::CorruptKind;

impl Example {
    /// Decodes a serialized `tf.train.Example`.
    pub fn decode_record(bytes: &[u8]) -> Result<Self, CorruptKind> {
        Self::decode(bytes)
            .map_err(|e| CorruptKind::Decode { message: "tf.train.Example", reason: e.to_string() })
    }

    /// The serialized message, as a TFRecord holds it.
    pub fn encode_record(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// An example with the given features.
    pub fn from_features(features: impl IntoIterator<Item = (String, Feature)>) -> Self {
        Example { features: Some(Features { feature: features.into_iter().collect() }) }
    }

    /// The feature named `name`, if present.
    pub fn feature(&self, name: &str) -> Option<&Feature> {
        self.features.as_ref()?.feature.get(name)
    }
}

impl SequenceExample {
    /// Decodes a serialized `tf.train.SequenceExample`.
    pub fn decode_record(bytes: &[u8]) -> Result<Self, CorruptKind> {
        Self::decode(bytes)
            .map_err(|e| CorruptKind::Decode { message: "tf.train.SequenceExample", reason: e.to_string() })
    }

    /// The serialized message, as a TFRecord holds it.
    pub fn encode_record(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// A sequence example with the given context features and feature lists (each a
    /// list of steps).
    pub fn from_parts(
        context: impl IntoIterator<Item = (String, Feature)>,
        lists: impl IntoIterator<Item = (String, Vec<Feature>)>,
    ) -> Self {
        SequenceExample {
            context: Some(Features { feature: context.into_iter().collect() }),
            feature_lists: Some(FeatureLists {
                feature_list: lists.into_iter().map(|(k, feature)| (k, FeatureList { feature })).collect(),
            }),
        }
    }
}

impl Feature {
    /// A `float_list` feature.
    pub fn floats(value: impl Into<Vec<f32>>) -> Self {
        Feature { kind: Some(feature::Kind::FloatList(FloatList { value: value.into() })) }
    }

    /// An `int64_list` feature.
    pub fn int64s(value: impl Into<Vec<i64>>) -> Self {
        Feature { kind: Some(feature::Kind::Int64List(Int64List { value: value.into() })) }
    }

    /// A `bytes_list` feature.
    pub fn bytes(value: impl IntoIterator<Item = Vec<u8>>) -> Self {
        Feature { kind: Some(feature::Kind::BytesList(BytesList { value: value.into_iter().collect() })) }
    }

    /// The float values, if this is a `float_list`.
    pub fn as_floats(&self) -> Option<&[f32]> {
        match &self.kind {
            Some(feature::Kind::FloatList(l)) => Some(&l.value),
            _ => None,
        }
    }

    /// The int64 values, if this is an `int64_list`.
    pub fn as_int64s(&self) -> Option<&[i64]> {
        match &self.kind {
            Some(feature::Kind::Int64List(l)) => Some(&l.value),
            _ => None,
        }
    }

    /// The byte strings, if this is a `bytes_list`.
    pub fn as_bytes(&self) -> Option<&[Vec<u8>]> {
        match &self.kind {
            Some(feature::Kind::BytesList(l)) => Some(&l.value),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_and_unpacked_floats_decode_alike() {
        // FloatList{value: [1.0, 2.0]} unpacked: tag (1 << 3 | 5) per value.
        let mut unpacked = Vec::new();
        for v in [1.0f32, 2.0] {
            unpacked.push(0x0d);
            unpacked.extend_from_slice(&v.to_le_bytes());
        }
        let packed = FloatList { value: vec![1.0, 2.0] }.encode_to_vec();
        assert_eq!(packed[0], 0x0a, "prost writes packed, as TensorFlow does");
        assert_eq!(FloatList::decode(&unpacked[..]).unwrap().value, vec![1.0, 2.0]);
        assert_eq!(FloatList::decode(&packed[..]).unwrap().value, vec![1.0, 2.0]);
    }

    #[test]
    fn bad_payload_is_a_decode_error() {
        let err = Example::decode_record(&[0x0a, 0x05, 0x01]).unwrap_err();
        assert!(matches!(err, CorruptKind::Decode { message: "tf.train.Example", .. }), "{err}");
    }
}
