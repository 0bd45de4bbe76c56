//! `prune_fields`: `parse_example` decodes only the features the rest of the pipeline
//! uses: those in the final element, those a `filter` or an operation reads, and not
//! those a `select` drops or an assignment overwrites before any read. The parse of a
//! `map(on_error: skip)` is left whole: a feature it fails on drops the element, used
//! or not.
//!
//! ```text
//! before                                              after
//! Select: fields=[image, label]                       Select: fields=[image, label]
//!   Map: fns=[parse_example{image, label, bbox,         Map: fns=[parse_example{image, label},
//!             text}, decode_jpeg]                                 decode_jpeg]
//! ```

use std::collections::BTreeSet;

use crate::ir::plan::{Element, MapOp, ParseFormat, Plan, RecordFormat, apply_ops};

use super::{Rule, Transformed};

/// Parses only the features that are used.
#[derive(Debug, Clone, Copy, Default)]
pub struct PruneFields;

impl Rule for PruneFields {
    fn name(&self) -> &'static str {
        "prune_fields"
    }

    fn rewrite(&self, mut plan: Plan) -> Transformed {
        let needed = field_names(&plan.output());
        let changed = prune(&mut plan, needed);
        if changed {
            refresh(&mut plan);
        }
        Transformed { plan, changed }
    }
}

fn field_names(e: &Element) -> BTreeSet<String> {
    match e {
        Element::Fields(f) => f.iter().map(|x| x.name.clone()).collect(),
        Element::Batch(inner) => field_names(inner),
        _ => BTreeSet::new(),
    }
}

/// Prunes below `node`, given the fields needed from its output.
fn prune(node: &mut Plan, mut needed: BTreeSet<String>) -> bool {
    let mut changed = false;
    let mut ops_of = |ops: &mut Vec<MapOp>, needed: &mut BTreeSet<String>, keep_parse: bool| {
        for op in ops.iter_mut().rev() {
            match op {
                MapOp::Assign { target, reads, .. } => {
                    needed.remove(target.as_str());
                    needed.extend(reads.iter().cloned());
                }
                MapOp::Parse { fields, .. } => {
                    let before = fields.len();
                    fields.retain(|f| keep_parse || needed.contains(&f.name));
                    changed |= fields.len() != before;
                    // Below the parse, elements are records: no fields.
                    needed.clear();
                }
            }
        }
    };
    match node {
        Plan::Select(s) => {
            let before = s.fields.len();
            s.fields.retain(|f| needed.contains(f));
            changed |= s.fields.len() != before;
            needed = s.fields.iter().cloned().collect();
        }
        Plan::Filter(f) => needed.extend(f.reads.iter().cloned()),
        Plan::TakeWhile(t) => needed.extend(t.reads.iter().cloned()),
        // Rust code may read any field, and a Rust map returns the whole record.
        Plan::Rust(r) => needed = field_names(&r.input.output()),
        // The optimizer's plan has no fused nodes: the physical plan makes them.
        Plan::Map(m) => ops_of(&mut m.ops, &mut needed, m.skip_errors),
        // A pack reads its packed fields and drops the others.
        Plan::Pack(p) => needed = p.spec.fields.iter().cloned().collect(),
        // A bucketing reads its length field and passes every field on.
        Plan::BucketByLength(b) => _ = needed.insert(b.spec.length.clone()),
        // A flat_map's inner source reads these fields of its input (its inner chain
        // makes the rest).
        Plan::FlatMap(f) => needed = f.reads().into_iter().collect(),
        // An `unbatch` of records checks that every field it splits has one length.
        Plan::Unbatch(input) if matches!(input.output(), Element::Fields(_)) => {
            needed = field_names(&input.output())
        }
        _ => {}
    }
    match node.input_mut() {
        Some(input) => prune(input, needed) | changed,
        None => changed,
    }
}

/// Recomputes the element types the maps store, from the source up; a `parquet` reader
/// reads the columns its parse still reads (the projection).
fn refresh(node: &mut Plan) {
    if let Some(input) = node.input_mut() {
        refresh(input);
    }
    if let Plan::Map(m) = node {
        project(&mut m.input, &m.ops);
        m.output = apply_ops(&m.input.output(), &m.ops)
    }
}

/// A `parquet` reader below a map that starts with its parse (or below the global shuffle
/// of its rows under that map) reads only the columns the parse reads, in its order.
fn project(input: &mut Plan, ops: &[MapOp]) {
    let input = match input {
        Plan::Shuffle(s) if s.is_global() => &mut *s.input,
        other => other,
    };
    if let (Plan::Interleave(i), Some(MapOp::Parse { format: ParseFormat::Table, fields })) =
        (input, ops.first())
        && let RecordFormat::Parquet(p) | RecordFormat::WebDataset(p) = &mut i.format
    {
        p.columns = fields.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimizer::tests::check;

    const HEAD: &str = "pipeline p(files: glob = \"d/*\") {
        schema { image: bytes, label: i64, bbox: f32[4], text: bytes, weight: f32 }
        tfrecords(files);";

    #[test]
    fn applies_to_features_nothing_uses() {
        let text = check(
            &PruneFields,
            &format!(
                "{HEAD}
                 map {{ parse_example(); image = decode_jpeg(image); image = resize(image, 8, 8); }}
                 filter(weight > 0.0);
                 select(image, label);
             }}"
            ),
        );
        insta::assert_snapshot!(text, @r"
        changed=true
        Select: fields=[image, label] -> {image: f32[8, 8, 3], label: i64}
          Filter: predicate=weight > 0.0 -> {image: f32[8, 8, 3], label: i64, weight: f32}
            Map: fns=[parse_example, decode_jpeg, resize], parses=[image, label, weight], parallel=1, deterministic=true -> {image: f32[8, 8, 3], label: i64, weight: f32}
              Interleave: reader=tfrecord, cycle_length=1, block_length=1, parallel=1, deterministic=true, compression=auto, on_corrupt=fail, verify_crc=true -> record
                Files: pattern=$files, shuffle_seed=none -> path
        ");
    }

    #[test]
    fn does_not_apply_when_every_feature_is_used() {
        let text = check(&PruneFields, &format!("{HEAD} map {{ parse_example(); }} batch(4); }}"));
        assert!(text.starts_with("changed=false"), "{text}");
    }
}
