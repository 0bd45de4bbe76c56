//! The prost message definitions, field for field TensorFlow's
//! `tensorflow/core/example/{feature,example}.proto`.

use std::collections::BTreeMap;

/// `tf.train.BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    /// The byte strings.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `tf.train.FloatList` (`repeated float value = 1 [packed = true]`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FloatList {
    /// The values.
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tf.train.Int64List` (`repeated int64 value = 1 [packed = true]`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    /// The values.
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

/// `tf.train.Feature`: one of the three list kinds, or none.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Feature {
    /// Which list this feature holds.
    #[prost(oneof = "feature::Kind", tags = "1, 2, 3")]
    pub kind: Option<feature::Kind>,
}

/// The `kind` oneof of [`Feature`].
pub mod feature {
    /// `oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; }`
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        /// `bytes_list = 1`.
        #[prost(message, tag = "1")]
        BytesList(super::BytesList),
        /// `float_list = 2`.
        #[prost(message, tag = "2")]
        FloatList(super::FloatList),
        /// `int64_list = 3`.
        #[prost(message, tag = "3")]
        Int64List(super::Int64List),
    }
}

/// `tf.train.Features`: a map from feature name to feature.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Features {
    /// `map<string, Feature> feature = 1`.
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature: BTreeMap<String, Feature>,
}

/// `tf.train.FeatureList`: a sequence of features.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureList {
    /// `repeated Feature feature = 1`.
    #[prost(message, repeated, tag = "1")]
    pub feature: Vec<Feature>,
}

/// `tf.train.FeatureLists`: a map from name to feature list.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureLists {
    /// `map<string, FeatureList> feature_list = 1`.
    #[prost(btree_map = "string, message", tag = "1")]
    pub feature_list: BTreeMap<String, FeatureList>,
}

/// `tf.train.Example`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Example {
    /// `Features features = 1`.
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// `tf.train.SequenceExample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SequenceExample {
    /// `Features context = 1`.
    #[prost(message, optional, tag = "1")]
    pub context: Option<Features>,
    /// `FeatureLists feature_lists = 2`.
    #[prost(message, optional, tag = "2")]
    pub feature_lists: Option<FeatureLists>,
}
