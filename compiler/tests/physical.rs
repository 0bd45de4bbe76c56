//! The physical plan is what runs: for every corpus and benchmark pipeline, the stages of
//! the generated chain (`dataset()`, or `host_dataset()` before a device tail) are the
//! exec nodes `explain` shows, in order; and the physical plan's figures rest on the
//! runtime's own defaults.

use std::path::Path;

use sluice_compiler::physical::{self, Exec, PhysicalPlan};

fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in [
        "tests/pipes",
        "examples/bench",
        "examples/digits",
        "examples/dist",
        "examples/pipelines/pipes",
        "examples/text",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "pipe") {
                out.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out
}

/// The `let ds = ...;` statements of the chain function `f` of module `module` in the
/// generated (prettyplease) text: each from its `let ds` line up to the next.
fn chain_statements(code: &str, module: &str, f: &str) -> Vec<String> {
    let start = code.find(&format!("pub mod {module} {{")).unwrap_or_else(|| panic!("module {module}"));
    let code = &code[start..];
    let body = code.find(&format!("    pub fn {f}(")).unwrap_or_else(|| panic!("{module}::{f}"));
    let mut out: Vec<String> = Vec::new();
    for line in code[body..].lines().skip(1) {
        if line.starts_with("        let ds = ") {
            out.push(line.to_string());
        } else if line.starts_with("        ::std::result::Result::Ok(ds)") || line.starts_with("    }") {
            break;
        } else if let Some(last) = out.last_mut() {
            last.push('\n');
            last.push_str(line);
        }
    }
    out
}

/// What the statements of one exec node call: the runtime stage each of them starts.
fn expected(exec: &Exec) -> Vec<&'static str> {
    match exec {
        Exec::Files { .. } => vec!["__sl::files("],
        Exec::Range(_) => vec!["__sl::range_step("],
        Exec::ReadFile { .. } => vec!["__sl::read_files("],
        Exec::SampleFrom(_) => vec!["__sl::sample_from("],
        Exec::Interleave { .. } => vec![".interleave("],
        Exec::GlobalShuffle { table: Some(_), .. } => vec!["__sl::parquet_global_shuffle("],
        Exec::GlobalShuffle { .. } => vec!["__sl::global_shuffle("],
        Exec::ReadBatches { maps, .. } if maps.is_empty() => vec!["__sl::tfrecord_batches("],
        Exec::ReadBatches { .. } => vec![".map_batches("],
        Exec::ReadColumns { .. } => vec!["__sl::parquet_columns("],
        Exec::Map { filter: None, .. } => vec![".named(\"map\")"],
        Exec::Map { filter: Some(_), .. } => vec![".named(\"map_filter\")"],
        Exec::ChunkedMap { .. } => vec![".chunks(", ".named(\"map\")"],
        Exec::MapBatch { batched: true, .. } => vec![".named(\"map_batch\")"],
        Exec::MapBatch { .. } => vec![".chunks(", ".named(\"map_batch\")"],
        Exec::Filter { .. } => vec![".try_filter("],
        Exec::Rust { .. } => vec!["__sluice_"],
        Exec::Select { .. } => vec![".map(|__x: Record"],
        Exec::Pack { .. } => vec!["__sl::pack("],
        Exec::BucketByLength { .. } => vec!["__sl::bucket_by_length("],
        Exec::Window { .. } => vec![".window("],
        Exec::Shuffle { .. } => vec![".shuffle("],
        Exec::ShuffleBatches { .. } => vec!["__sl::shuffle_batches("],
        Exec::ShuffleRepeat { .. } => vec![".reshuffle_each_epoch(true).repeat("],
        Exec::Batch { padded: Some(_), .. } => vec![".padded_batch("],
        Exec::Batch { input, .. } if input.fields().is_empty() => vec![".chunks("],
        Exec::Batch { .. } => vec![".batch("],
        Exec::Unbatch => vec![".unbatch("],
        Exec::UnbatchFields { .. } => vec!["__sl::unbatch_fields("],
        Exec::Repeat(_) => vec![".repeat("],
        Exec::Take(_) => vec![".take("],
        Exec::Skip(_) => vec![".skip("],
        Exec::Shard { .. } => vec![".shard"],
        Exec::Cache { .. } => vec![".cache"],
        Exec::Prefetch(_) => vec![".prefetch("],
        Exec::Enumerate { .. } => vec![".enumerate()"],
        Exec::TakeWhile { .. } => vec!["__sl::take_while("],
        Exec::Zip(z) if matches!(z.output, sluice_compiler::ir::plan::Element::Batch(_)) => {
            vec!["__sl::zip_batches("]
        }
        Exec::Zip(_) => vec!["__sl::zip("],
        Exec::Concatenate(_) => vec!["__sl::concatenate("],
        // One statement holding the inner chain's (its source's among them).
        Exec::FlatMap { .. } => vec!["__sl::flat_map("],
        // Only inside a flat_map's statement, never a statement of the chain.
        Exec::InnerSource(_) => vec!["__sl::flat_map("],
    }
}

fn check_chain(name: &str, module: &str, physical: &PhysicalPlan, code: &str) {
    let f = if physical.tail.is_some() { "host_dataset" } else { "dataset" };
    let statements = chain_statements(code, module, f);
    let mut at = 0;
    for node in &physical.stages {
        for marker in expected(&node.exec) {
            let st = statements.get(at).unwrap_or_else(|| {
                panic!("{name}: {module}: the chain ends before {} ({marker})", node.exec.name())
            });
            assert!(
                st.contains(marker),
                "{name}: {module}: {} should call `{marker}`:\n{st}",
                node.exec.name()
            );
            at += 1;
        }
    }
    assert_eq!(
        at,
        statements.len(),
        "{name}: {module}: statements after the last exec node: {:?}",
        &statements[at..]
    );
}

/// The generated module fills batch columns by row ranges (`__sl::rows::split`, whose
/// rows the pool may split) exactly when a stage of its plan does
/// (`Exec::fills_columns_by_rows`, which `explain`'s `rows=split` rests on).
fn check_row_splits(name: &str, module: &str, physical: &PhysicalPlan, code: &str) -> bool {
    let start = code.find(&format!("pub mod {module} {{")).unwrap_or_else(|| panic!("module {module}"));
    let end = code[start..].find("\n}\n").map_or(code.len(), |e| start + e);
    let generated = code[start..end].contains("__sl::rows::split(");
    let planned = physical.stages.iter().any(|s| s.exec.fills_columns_by_rows());
    assert_eq!(generated, planned, "{name}: {module}: generated row splits {generated}, planned {planned}");
    planned
}

#[test]
fn the_generated_chain_is_the_physical_plan() {
    let (mut checked, mut splits) = (0, 0);
    for (name, source) in sources() {
        let compilation = sluice_compiler::compile(&source);
        let Ok(code) = compilation.generate() else {
            // A pipeline with Rust code of a user's crate (`extern fn`) still generates.
            panic!("{name}: does not generate: {:?}", compilation.diagnostics);
        };
        let text = code.to_pretty_string();
        for p in &compilation.pipelines {
            check_chain(&name, p.name(), &p.physical, &text);
            splits += usize::from(check_row_splits(&name, p.name(), &p.physical, &text));
            let explained = p.physical.explain();
            let names: Vec<&str> = p.physical.nodes().map(|(n, _)| n).collect();
            for (line, n) in explained.lines().zip(&names) {
                assert!(line.trim_start().starts_with(&format!("{n}:")), "{name}: {line} / {n}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} pipelines");
    assert!(splits >= 4, "{splits} pipelines fill batch columns by row ranges");
}

/// A chain that does not match its plan is caught (the check is not vacuous).
#[test]
fn a_chain_that_differs_from_its_plan_is_caught() {
    let source = "pipeline p(files: glob = \"d/*\") { tfrecords(files); take(3); prefetch(2); }";
    let compilation = sluice_compiler::compile(source);
    let p = &compilation.pipelines[0];
    let code = compilation.generate().unwrap().to_pretty_string();
    check_chain("p.pipe", "p", &p.physical, &code);
    let swapped = code.replace(".take(", ".skip(");
    let caught = std::panic::catch_unwind(|| check_chain("p.pipe", "p", &p.physical, &swapped));
    assert!(caught.is_err(), "a `skip` where the plan has a `TakeExec`");
    let extra = code.replace("let ds = ds.prefetch(", "let ds = ds.take(1);\n        let ds = ds.prefetch(");
    assert!(std::panic::catch_unwind(|| check_chain("p.pipe", "p", &p.physical, &extra)).is_err());
}

/// The figures the physical plan sizes stages by are the runtime's own defaults, and the
/// runtime's stages use them.
#[test]
fn physical_figures_rest_on_the_runtime_defaults() {
    use sluice_runtime::defaults as rt;
    assert_eq!(physical::defaults::INTERLEAVE_BUFFER_PER_SLOT, rt::INTERLEAVE_BUFFER_PER_SLOT as u64);
    assert_eq!(sluice_runtime::stage::DEFAULT_BUFFER_PER_SLOT, rt::INTERLEAVE_BUFFER_PER_SLOT);
    assert_eq!(
        physical::defaults::READ_BUFFER_BYTES,
        sluice_runtime::tfrecord::ReaderOptions::default().buffer_size as u64
    );
    assert_eq!(physical::defaults::GLOBAL_SHUFFLE_WINDOW_BYTES, rt::GLOBAL_SHUFFLE_WINDOW_BYTES);
    assert_eq!(physical::defaults::PREFETCH_AUTO_DEPTH, rt::PREFETCH_AUTO_DEPTH as u64);
    assert_eq!(
        physical::defaults::READ_BATCHES_HANDOVER_PER_THREAD,
        rt::READ_BATCHES_HANDOVER_PER_THREAD as u64
    );
    assert_eq!(
        physical::defaults::READ_BATCHES_HANDOVER_BYTES_PER_THREAD,
        rt::READ_BATCHES_HANDOVER_BYTES_PER_THREAD as u64
    );
    assert_eq!(physical::defaults::RECYCLE_MIN_BYTES, sluice_runtime::column::recycle::MIN_BYTES as u64);
    assert_eq!(physical::defaults::RECYCLE_KEEP, sluice_runtime::column::recycle::KEEP as u64);
    assert_eq!(physical::defaults::RECYCLE_KEEP_BYTES, sluice_runtime::column::recycle::KEEP_BYTES as u64);
    assert_eq!(physical::defaults::DEVICE_FEED_AHEAD, rt::DEVICE_FEED_AHEAD as u64);
    // A parallel interleave of 4 files holds 64 records per file, plus each file's read
    // buffer; an automatic prefetch holds its starting depth.
    let source = "pipeline p(files: glob) { tfrecords(files, cycle: 4, parallel: 2); prefetch(); }";
    let p = &sluice_compiler::compile(source).pipelines[0];
    let figures = |name: &str| p.physical.nodes().find(|(n, _)| *n == name).map(|(_, f)| f.clone()).unwrap();
    let interleave = figures("InterleaveExec");
    let slots = 4 * rt::INTERLEAVE_BUFFER_PER_SLOT as u64;
    assert_eq!(interleave.held, slots);
    assert_eq!(
        interleave.bytes,
        slots * physical::defaults::ASSUMED_RECORD_BYTES + 4 * rt::READ_BUFFER_BYTES as u64
    );
    assert_eq!(figures("PrefetchExec").held, rt::PREFETCH_AUTO_DEPTH as u64);
}

/// The exec nodes of the physical plan of `source`'s one pipeline, by name.
fn stage_names(source: &str) -> Vec<&'static str> {
    let c = sluice_compiler::compile(source);
    assert!(c.diagnostics.is_empty(), "{source}: {:?}", c.diagnostics);
    c.pipelines[0].physical.stages.iter().map(|n| n.exec.name()).collect()
}

/// A local shuffle between a non-deterministic TFRecord interleave and a plain batch of its
/// records runs over the reader's batches (`ShuffleBatchesExec`); with a deterministic
/// interleave, a global shuffle, something between them or a padded batch it stays a
/// `ShuffleExec` (whose order over a deterministic input is the saved-state contract).
#[test]
fn a_shuffle_of_read_records_into_batches_runs_over_the_readers_batches() {
    let names = |body: &str| stage_names(&format!("pipeline p(files: glob) {{ {body} }}"));
    let read = "tfrecords(files, parallel: auto, deterministic: false);";
    assert_eq!(
        names(&format!("{read} shuffle(1000, seed: 3); batch(64);")),
        ["FilesExec", "ReadBatchesExec", "ShuffleBatchesExec", "PrefetchExec"]
    );
    for body in [
        "tfrecords(files, parallel: auto); shuffle(1000, seed: 3); batch(64);".to_string(),
        format!("{read} shuffle(1000, seed: 3); take(5000); batch(64);"),
        format!("{read} shuffle(1000, seed: 3); prefetch(2);"),
    ] {
        let n = names(&body);
        assert!(n.contains(&"ShuffleExec") && !n.contains(&"ShuffleBatchesExec"), "{body}: {n:?}");
    }
    let source = format!("pipeline p(files: glob) {{ {read} shuffle(1000, seed: 3); batch(64); }}");
    let p = &sluice_compiler::compile(&source).pipelines[0];
    let code = sluice_compiler::compile(&source).generate().unwrap().to_pretty_string();
    let flat: String = code.split_whitespace().collect();
    assert!(flat.contains("__sl::shuffle_batches(ds,(1000asusize),(3asu64),(64asusize),false,)"), "{code}");
    let read_batches = &p.physical.stages[1].exec;
    assert!(matches!(read_batches, Exec::ReadBatches { maps, drop_remainder: false, .. } if maps.is_empty()));
}

/// A `prefetch(auto)` (written, or inserted at the end) right on top of a
/// `ReadBatchesExec` is dropped: its reader threads already queue batches ahead of the
/// consumer. One of a set depth stays, as does one over a stage after the readers.
#[test]
fn an_auto_prefetch_on_the_readers_batches_adds_no_hand_over() {
    let names =
        |body: &str| stage_names(&format!("pipeline p(files: glob) {{ schema {{ x: f32[4] }} {body} }}"));
    let read = "tfrecords(files, parallel: auto, deterministic: false);";
    for body in [
        format!("{read} batch(64); map(parallel: auto) {{ parse_example(); }} prefetch(auto);"),
        format!("{read} batch(64); map(parallel: auto) {{ parse_example(); }}"),
        format!("{read} batch(64); prefetch();"),
    ] {
        assert_eq!(names(&body), ["FilesExec", "ReadBatchesExec"], "{body}");
    }
    assert_eq!(
        names(&format!("{read} batch(64); map(parallel: auto) {{ parse_example(); }} prefetch(4);")),
        ["FilesExec", "ReadBatchesExec", "PrefetchExec"]
    );
    assert_eq!(
        names(&format!("{read} shuffle(1000, seed: 3); batch(64); prefetch(auto);")),
        ["FilesExec", "ReadBatchesExec", "ShuffleBatchesExec", "PrefetchExec"]
    );
}

/// The memory bound counts the idle batch buffers kept for recycling (at most
/// `RECYCLE_KEEP` of twice the largest batch, `RECYCLE_KEEP_BYTES` in all; none without
/// batches), and a reader's hand-over queue of big batches by its bytes.
#[test]
fn the_memory_bound_counts_recycled_batch_buffers_and_the_hand_over_by_bytes() {
    use physical::defaults::*;
    let plan = |body: &str| {
        let source = format!("pipeline p(files: glob) {{ {body} }}");
        let c = sluice_compiler::compile(&source);
        assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
        c.pipelines[0].physical.clone()
    };
    let stages = |p: &physical::PhysicalPlan| p.nodes().map(|(_, f)| f.bytes.value()).sum::<u64>();
    // No batches: nothing recycled.
    let records = plan("tfrecords(files, cycle: 2, parallel: 2); prefetch();");
    assert_eq!(records.recycled, 0);
    assert_eq!(records.memory_bound, stages(&records));
    // Small batches (16 floats × 8 rows): twice KEEP of them.
    let small = plan(
        "schema { x: f32[16] } tfrecords(files, cycle: 2, parallel: 2, deterministic: false); \
         map(parallel: 2) { parse_example(); } batch(1024); prefetch(2);",
    );
    assert!(small.recycled > 0 && small.recycled <= RECYCLE_KEEP_BYTES, "{}", small.recycled);
    assert_eq!(small.memory_bound, stages(&small) + small.recycled);
    assert!(small.explain().contains("recycled batch buffers: up to "), "{}", small.explain());
    // Batches of images (256 × 64 × 64 × 3 floats, 12 MiB): the list's byte limit, and
    // the hand-over queue of 2 threads holds 2 × 16 MiB of them, not 4 batches.
    let images = plan(
        "schema { image: bytes } tfrecords(files, cycle: 2, parallel: 2, deterministic: false); \
         map(parallel: 2) { parse_example(); image = decode_raw(image, u8); \
         image = reshape(image, [64, 64, 3]); image = cast(image, f32); } batch(256); prefetch(2);",
    );
    assert_eq!(images.recycled, RECYCLE_KEEP_BYTES);
    let read = images.nodes().find(|(n, _)| *n == "ReadBatchesExec").map(|(_, f)| f.clone()).unwrap();
    let batch = 256 * 64 * 64 * 3 * 4;
    assert_eq!(read.held, 2 + 2 * READ_BATCHES_HANDOVER_PER_THREAD);
    assert_eq!(read.bytes, 2 * batch + 2 * READ_BATCHES_HANDOVER_BYTES_PER_THREAD + 2 * READ_BUFFER_BYTES);
}

/// `explain` marks `rows=split` where a batch's rows may be split across the pool: a map of
/// batches of records into fixed-size numbers, nothing random, on threads of its own.
#[test]
fn explain_marks_the_stages_that_may_split_a_batchs_rows() {
    let split = |schema: &str, body: &str| {
        let source = format!("pipeline p(files: glob) {{ schema {{ {schema} }} tfrecords(files); {body} }}");
        let c = sluice_compiler::compile(&source);
        assert!(!c.has_errors(), "{source}: {:?}", c.diagnostics);
        let text = c.pipelines[0].physical.explain();
        let marked: Vec<&str> = text.lines().filter(|l| l.contains("rows=split")).collect();
        assert_eq!(marked.is_empty(), !text.contains("\nbatch rows: "), "{text}");
        marked.iter().map(|l| l.trim_start().split(':').next().unwrap().to_string()).collect::<Vec<_>>()
    };
    let fixed = "x: f32[4], label: i64";
    let over_batches = "batch(64); map(parallel: auto) { parse_example(); }";
    assert_eq!(split(fixed, over_batches), ["ChunkedMapExec"]);
    assert_eq!(split(fixed, "map(parallel: auto) { parse_example(); } batch(64);"), ["MapBatchExec"]);
    // On the consumer's thread: nothing to split onto.
    assert!(split(fixed, "batch(64); map { parse_example(); }").is_empty());
    // A string column, or a random row (drawn in order), is made row by row.
    assert!(split("x: f32[4], name: str", over_batches).is_empty());
    let image = "image: u8[8, 8, 3], label: i64";
    let flip = |f: &str| format!("batch(64); map(parallel: auto) {{ parse_example(); image = {f}; }}");
    assert_eq!(split(image, &flip("transpose(image, chw)")), ["ChunkedMapExec"]);
    assert!(split(image, &flip("random_flip(image, seed: 3)")).is_empty(), "random");
}
