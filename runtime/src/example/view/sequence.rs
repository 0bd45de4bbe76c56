//! A zero-copy walker over the feature lists of a serialized `tf.train.SequenceExample`
//! (`parse_sequence_example`).
//!
//! A `SequenceExample` is `{ context: Features = 1, feature_lists: FeatureLists = 2 }`.
//! Its context has the wire layout of an `Example`'s features (field 1, a `Features`
//! message), so [`ExampleView`](super::ExampleView) walks it as it is (the feature lists,
//! field 2, are skipped there by length). [`SequenceView::feature_lists`] walks field 2:
//! every `FeatureLists` map entry in wire order (`{ key = 1, value: FeatureList = 2 }`),
//! and [`ListEntry::steps`] the steps of one: each `Feature` of the `FeatureList`'s
//! `repeated Feature feature = 1`, examined as [`FeatureView`]s.
//!
//! Protobuf's merge rules apply as in [`super`]: several `feature_lists` fields and all
//! their entries count, the last entry of a name wins, repeated `value` fields of one
//! entry merge (their steps concatenate, as merging a repeated message field does), and
//! unknown fields are skipped at every level. Each step is its own `Feature` message: its
//! kind and values are found as an `Example` feature's are. Recursion budgets for
//! skipped groups are prost's, one level deeper than an `Example`'s at each level.

use super::{ENTRY_DEPTH, EXAMPLE_DEPTH, FEATURES_DEPTH, FeatureView, LEN, Reader, WireError, WireErrorKind};

/// A serialized `tf.train.SequenceExample`, walked lazily.
#[derive(Debug, Clone, Copy)]
pub struct SequenceView<'a> {
    bytes: &'a [u8],
}

impl<'a> SequenceView<'a> {
    /// A view of `bytes`; nothing is read until the view is walked.
    pub fn new(bytes: &'a [u8]) -> Self {
        SequenceView { bytes }
    }

    /// Every map entry of the context, in wire order (see [`super::ExampleView::entries`]).
    pub fn context(&self) -> super::Entries<'a> {
        super::ExampleView::new(self.bytes).entries()
    }

    /// Every map entry of the feature lists, in wire order, without looking into their
    /// steps (only the entry's name and framing are checked). After an error the
    /// iterator ends.
    pub fn feature_lists(&self) -> ListEntries<'a> {
        ListEntries { outer: Reader::new(self.bytes), inner: None, done: false }
    }
}

/// One map entry of `FeatureLists`: a name and its not yet examined steps.
#[derive(Debug, Clone, Copy)]
pub struct ListEntry<'a> {
    name: &'a str,
    body: Reader<'a>,
}

impl<'a> ListEntry<'a> {
    /// Scans an entry body for its key (the last one; every one must be valid UTF-8).
    fn scan(body: Reader<'a>) -> Result<Self, WireError> {
        let mut r = body;
        let mut name = "";
        while !r.at_end() {
            let (field, wire_type) = r.key()?;
            match field {
                1 => {
                    let key = r.expect_sub(field, wire_type)?;
                    name = std::str::from_utf8(key.rest()).map_err(|_| key.err(WireErrorKind::BadUtf8))?;
                }
                2 => drop(r.expect_sub(field, wire_type)?),
                _ => r.skip(field, wire_type, ENTRY_DEPTH)?,
            }
        }
        Ok(ListEntry { name, body })
    }

    /// The feature list's name (empty if the entry has no key, as protobuf defaults it).
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The steps, in order: each examined when it is reached. After an error the
    /// iterator ends.
    pub fn steps(&self) -> Steps<'a> {
        Steps { entry: self.body, list: None, done: false }
    }
}

/// Iterator over the feature list entries of a sequence example, see
/// [`SequenceView::feature_lists`].
#[derive(Debug, Clone)]
pub struct ListEntries<'a> {
    outer: Reader<'a>,
    inner: Option<Reader<'a>>,
    done: bool,
}

impl<'a> ListEntries<'a> {
    fn step(&mut self) -> Result<Option<ListEntry<'a>>, WireError> {
        loop {
            if let Some(inner) = &mut self.inner {
                if !inner.at_end() {
                    let (field, wire_type) = inner.key()?;
                    if field == 1 {
                        return ListEntry::scan(inner.expect_sub(field, wire_type)?).map(Some);
                    }
                    inner.skip(field, wire_type, FEATURES_DEPTH)?;
                    continue;
                }
                self.inner = None;
            }
            if self.outer.at_end() {
                return Ok(None);
            }
            let (field, wire_type) = self.outer.key()?;
            match field {
                2 => self.inner = Some(self.outer.expect_sub(field, wire_type)?),
                // The context: checked by the context walk.
                1 if wire_type == LEN => drop(self.outer.sub()?),
                _ => self.outer.skip(field, wire_type, EXAMPLE_DEPTH)?,
            }
        }
    }
}

impl<'a> Iterator for ListEntries<'a> {
    type Item = Result<ListEntry<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

/// Iterator over the steps of a feature list, see [`ListEntry::steps`].
#[derive(Debug, Clone)]
pub struct Steps<'a> {
    /// The rest of the map entry.
    entry: Reader<'a>,
    /// The rest of the current `FeatureList` (a `value` field of the entry).
    list: Option<Reader<'a>>,
    done: bool,
}

impl<'a> Steps<'a> {
    fn step(&mut self) -> Result<Option<FeatureView<'a>>, WireError> {
        loop {
            if let Some(list) = &mut self.list {
                if !list.at_end() {
                    let (field, wire_type) = list.key()?;
                    if field == 1 {
                        let feature = list.expect_sub(field, wire_type)?;
                        // One `Feature` message: its own single value chunk, nothing after.
                        return FeatureView::from_entry(feature, Some(feature)).map(Some);
                    }
                    list.skip(field, wire_type, ENTRY_DEPTH - 1)?;
                    continue;
                }
                self.list = None;
            }
            if self.entry.at_end() {
                return Ok(None);
            }
            let (field, wire_type) = self.entry.key()?;
            match field {
                2 => self.list = Some(self.entry.expect_sub(field, wire_type)?),
                _ => self.entry.skip(field, wire_type, ENTRY_DEPTH)?,
            }
        }
    }
}

impl<'a> Iterator for Steps<'a> {
    type Item = Result<FeatureView<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.step().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prost::Message;

    use super::*;
    use crate::example::{Feature, FeatureList, FeatureLists, Features, SequenceExample};

    fn record() -> Vec<u8> {
        let lists = BTreeMap::from([
            (
                "frames".to_string(),
                FeatureList { feature: vec![Feature::floats([1.0, 2.0]), Feature::floats([3.0, 4.0])] },
            ),
            ("ids".to_string(), FeatureList { feature: vec![Feature::int64s([7]); 3] }),
        ]);
        let context = Features { feature: BTreeMap::from([("label".to_string(), Feature::int64s([5]))]) };
        SequenceExample { context: Some(context), feature_lists: Some(FeatureLists { feature_list: lists }) }
            .encode_to_vec()
    }

    fn floats(v: FeatureView<'_>) -> Vec<f32> {
        match v {
            FeatureView::Floats(f) => f.iter().collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn walks_the_context_and_the_steps_of_each_list() {
        let bytes = record();
        let view = SequenceView::new(&bytes);
        let context: Vec<&str> = view.context().map(|e| e.unwrap().name()).collect();
        assert_eq!(context, ["label"]);
        let lists: Vec<ListEntry<'_>> = view.feature_lists().map(Result::unwrap).collect();
        assert_eq!(lists.iter().map(ListEntry::name).collect::<Vec<_>>(), ["frames", "ids"]);
        let frames: Vec<Vec<f32>> = lists[0].steps().map(|s| floats(s.unwrap())).collect();
        assert_eq!(frames, [vec![1.0, 2.0], vec![3.0, 4.0]]);
        let ids: Vec<usize> = lists[1].steps().map(|s| s.unwrap().len()).collect();
        assert_eq!(ids, [1, 1, 1]);
    }

    #[test]
    fn merged_values_concatenate_steps_and_an_example_has_no_lists() {
        // Two `value` fields in one entry: protobuf merges them, the steps concatenate.
        let one = FeatureList { feature: vec![Feature::floats([1.0])] }.encode_to_vec();
        let two = FeatureList { feature: vec![Feature::floats([2.0]), Feature::floats([])] }.encode_to_vec();
        let mut entry = vec![0x0a, 1, b'x'];
        for v in [&one, &two] {
            entry.push(0x12);
            entry.push(v.len() as u8);
            entry.extend_from_slice(v);
        }
        let mut lists = vec![0x0a, entry.len() as u8];
        lists.extend(entry);
        let mut record = vec![0x12, lists.len() as u8];
        record.extend(lists);
        let view = SequenceView::new(&record);
        let e = view.feature_lists().next().unwrap().unwrap();
        let steps: Vec<Vec<f32>> = e.steps().map(|s| floats(s.unwrap())).collect();
        assert_eq!(steps, [vec![1.0], vec![2.0], vec![]]);
        let example = crate::example::Example::from_features([("x".into(), Feature::floats([1.0]))]);
        let bytes = example.encode_record();
        assert_eq!(SequenceView::new(&bytes).feature_lists().count(), 0);
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let bytes = record();
        for cut in 0..bytes.len() {
            let view = SequenceView::new(&bytes[..cut]);
            for e in view.feature_lists() {
                let Ok(e) = e else { continue };
                for s in e.steps() {
                    let _ = s.map(|f| f.len());
                }
            }
        }
        let truncated = &bytes[..bytes.len() - 3];
        let errors = SequenceView::new(truncated)
            .feature_lists()
            .filter_map(Result::err)
            .chain(
                SequenceView::new(truncated)
                    .feature_lists()
                    .filter_map(Result::ok)
                    .flat_map(|e| e.steps().filter_map(Result::err)),
            )
            .count();
        assert!(errors > 0);
    }
}
