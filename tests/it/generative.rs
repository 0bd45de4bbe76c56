//! The generative test of "every pipeline that checks compiles and runs": random
//! well-typed pipelines, made stage by stage from the stage table (`sema::stages::STAGES`)
//! and the operation table (`sema::ops::SIGNATURES`) with a generator per stage and per
//! operation, over sources of every kind (`range`, TFRecords parsed or not, text lines,
//! CSV, whole files, `zip`/`concatenate`/`sample_from` of earlier pipelines, `flat_map`),
//! with parameters and field names that collide with Rust keywords and with the names
//! the code generator uses itself. The pipelines are written into ONE `.pipe` file, which
//! the compiler must accept (`driver::compile`, what `sluice check` runs); `sluice show`
//! then builds its one runner (cargo's cost paid once, in the CLI tests' shared target
//! directory) and prints the first elements of every pipeline, which must come without an
//! error, as JSON lines. Every pipeline the engine runs (`sluice_engine::check`) is shown
//! again with `--engine interpreted`: the same lines and exit status, or the test fails
//! (the refusals are listed on stderr).
//!
//! The suite runs [`DEFAULT_COUNT`] pipelines with a fixed seed;
//! `SLUICE_GENERATIVE_COUNT=N` and `SLUICE_GENERATIVE_SEED=S` choose others
//! (`scripts/test-generative`). A failure names the seed and keeps the file under
//! `target/tmp/generative/`.
//!
//! Also here: the regressions the generator's class of defects started from (`select`
//! after batching stages, parameters named as generated locals, chains longer than rustc's
//! recursion limit), with their exact output.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use sluice_compiler::sema::ops::SIGNATURES;
use sluice_compiler::sema::stages::STAGES;

use crate::support::{generate, sluice_in, stderr, stdout};

/// How many pipelines the suite's run generates.
const DEFAULT_COUNT: usize = 48;
/// The suite's seed.
const DEFAULT_SEED: u64 = 20_240_601;
/// Elements shown of each pipeline.
const SHOW: &str = "4";

/// The stages the generator makes, each by its own arm of [`Gen::stage`] or a source.
const GENERATED_STAGES: &[&str] = &[
    "files",
    "range",
    "tfrecord",
    "tfrecords",
    "text_lines",
    "csv",
    "read_file",
    "interleave",
    "map",
    "filter",
    "select",
    "sample_from",
    "zip",
    "concatenate",
    "enumerate",
    "take_while",
    "flat_map",
    "shuffle",
    "batch",
    "padded_batch",
    "unbatch",
    "bucket_by_length",
    "window",
    "repeat",
    "take",
    "skip",
    "shard",
    "cache",
    "prefetch",
    "pack",
];

/// Stages the generator leaves out, and why.
const SKIPPED_STAGES: &[(&str, &str)] = &[
    (
        "parquet",
        "its files come from pyarrow (tests/fixtures/parquet, scripts/interop/parquet_check.py): \
         tests/it/parquet.rs and engine_diff run them through both backends",
    ),
    (
        "webdataset",
        "its shards come from the webdataset package's TarWriter (tests/fixtures/webdataset): \
         tests/it/webdataset.rs and engine_diff run them through both backends",
    ),
];

/// The operations the generator calls in `map` blocks.
const GENERATED_OPS: &[&str] = &[
    "reshape",
    "resize",
    "center_crop",
    "random_crop",
    "random_flip",
    "cast",
    "scale",
    "normalize",
    "transpose",
    "one_hot",
    "check_finite",
    "decode_raw",
    "parse_tensor",
    "decode_jpeg",
    "decode_png",
    "tokenize",
];

/// Operations left out, and why.
const SKIPPED_OPS: &[(&str, &str)] = &[];

/// Names that a user may give a field, parameter or pipeline and that Rust or the code
/// generator also uses: keywords (raw identifiers in Rust), the generated module's items
/// and locals, prefixes of generated locals.
const NASTY: &[&str] = &[
    "k",
    "v",
    "set",
    "x",
    "p",
    "r",
    "o",
    "e",
    "ds",
    "params",
    "__params",
    "__sl",
    "__values",
    "__k",
    "__v",
    "__x",
    "__set",
    "__other",
    "Params",
    "Record",
    "Record0",
    "Batch",
    "Batch0",
    "Item",
    "NAME",
    "BUDGET",
    "dataset",
    "run",
    "check",
    "from_args",
    "map_0",
    "keep_0",
    "f_value",
    "c_value",
    "e_value",
    "std",
    "core",
    "sluice",
    "type",
    "gen",
    "async",
    "await",
    "try",
    "yield",
    "match",
    "loop",
    "move",
    "box",
    "union",
    "dyn",
    "abstract",
    "macro_rules",
    "value",
    "index",
    "len",
    "i",
    "n",
    "rng",
    "row",
    "epoch",
    "mod",
    "use",
    "impl",
    "static",
    "ref",
    "where",
    "main",
    "pipelines",
];

#[test]
fn every_stage_and_operation_has_a_generator_or_a_reason() {
    let stages: BTreeSet<&str> = STAGES.iter().map(|s| s.name).collect();
    let covered: BTreeSet<&str> =
        GENERATED_STAGES.iter().copied().chain(SKIPPED_STAGES.iter().map(|(s, _)| *s)).collect();
    assert_eq!(
        stages, covered,
        "a stage of sema::stages::STAGES has no generator in tests/it/generative.rs (or one is gone)"
    );
    let ops: BTreeSet<&str> = SIGNATURES.iter().map(|(s, _, _)| *s).collect();
    let covered: BTreeSet<&str> =
        GENERATED_OPS.iter().copied().chain(SKIPPED_OPS.iter().map(|(s, _)| *s)).collect();
    assert_eq!(
        ops, covered,
        "an operation of sema::ops::SIGNATURES has no generator in tests/it/generative.rs"
    );
}

#[test]
fn random_pipelines_check_compile_and_run() {
    let count = env_number("SLUICE_GENERATIVE_COUNT").map_or(DEFAULT_COUNT, |n| n as usize);
    let seed = env_number("SLUICE_GENERATIVE_SEED").unwrap_or(DEFAULT_SEED);
    let dir = tempfile::tempdir().unwrap();
    let data = Data::make(dir.path());
    let mut g = Gen { rng: Rng(seed), data, out: String::new(), done: Vec::new(), names: 0 };
    for i in 0..count {
        g.pipeline(i);
    }
    let file = dir.path().join("generated.pipe");
    std::fs::write(&file, &g.out).unwrap();
    let keep = || {
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("generative");
        std::fs::create_dir_all(&kept).unwrap();
        let kept = kept.join(format!("seed-{seed}-count-{count}.pipe"));
        std::fs::write(&kept, &g.out).unwrap();
        kept
    };
    // What `sluice check` runs.
    let compilation = sluice_compiler::compile(&g.out);
    let errors: Vec<String> = compilation
        .diagnostics
        .iter()
        .filter(|d| d.severity == sluice_compiler::Severity::Error)
        .map(|d| format!("{} {}", d.code, d.message))
        .collect();
    assert!(
        errors.is_empty(),
        "seed {seed}: the checker refuses a generated pipeline ({}): {errors:#?}",
        keep().display()
    );
    assert_eq!(compilation.pipelines.len(), g.done.len());
    if let Err(diags) = compilation.generate() {
        let msgs: Vec<String> = diags.iter().map(|d| format!("{} {}", d.code, d.message)).collect();
        panic!(
            "seed {seed}: the code generator refuses a checked pipeline ({}): {msgs:#?}",
            keep().display()
        );
    }
    // One runner for the file, then each pipeline's first elements; the same from the
    // engine, for every pipeline it runs.
    let (mut compared, mut refused) = (0, Vec::new());
    for p in &g.done {
        let mut args = vec!["show", file.to_str().unwrap(), &p.name, "-n", SHOW];
        for s in &p.sets {
            args.extend(["--set", s]);
        }
        let o = sluice_in(dir.path(), &args);
        let planned = compilation.pipelines.iter().find(|c| c.name() == p.name).expect("checked");
        match sluice_engine::check_in(&compilation.pipelines, planned) {
            Ok(()) => {
                args.extend(["--engine", "interpreted"]);
                let e = sluice_in(dir.path(), &args);
                assert_eq!(
                    (e.status.code(), stdout(&e)),
                    (o.status.code(), stdout(&o)),
                    "seed {seed}: pipeline `{}`: the engine (left; {}) and the compiled runner (right; {}) differ ({})",
                    p.name,
                    stderr(&e),
                    stderr(&o),
                    keep().display()
                );
                compared += 1;
            }
            Err(why) => refused.push(why.to_string()),
        }
        assert!(
            o.status.success(),
            "seed {seed}: pipeline `{}` fails ({}):\n{}",
            p.name,
            keep().display(),
            stderr(&o)
        );
        let out = stdout(&o);
        assert!(out.lines().count() <= 4, "{}: {out}", p.name);
        for line in out.lines() {
            assert!(
                serde_json::from_str::<serde_json::Value>(line).is_ok(),
                "seed {seed}: pipeline `{}` shows a line that is not JSON: {line}",
                p.name
            );
        }
    }
    eprintln!(
        "{compared} of {} pipelines compared with the engine; it refuses {}:",
        g.done.len(),
        refused.len()
    );
    for why in &refused {
        eprintln!("  {why}");
    }
}

/// The regressions of the class, with their output: `select` after `batch`,
/// `padded_batch`, `window`, `bucket_by_length` and a batch of batches (E0631 before);
/// parameters named `k`, `v` and `set` (E0308: the generated `--set` loop's locals); 128
/// and 1024 stages (E0275: the chain's type nested past rustc's recursion limit); a map
/// before a batch of batches (E0600: `vectorize_past_batch` moved it over the inner
/// batches, then `fuse_map_batch` made a map + batch producing batches) and a map over a
/// batch of batches (E0600, and typed as a batch of its last batch's columns).
#[test]
fn regressions_select_after_batching_colliding_names_and_long_chains_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = String::from(
        "pipeline sel_batch() { range(6); map { key = value % 2; } batch(4); select(value); }\n\
         pipeline sel_padded() { range(6); map { key = value % 2; } padded_batch(4); select(key); }\n\
         pipeline sel_window() { range(6); map { key = value * 10; } window(3, shift: 3); select(key); }\n\
         pipeline sel_bucket() { range(10); map { key = value % 2; } \
             bucket_by_length(length: key, boundaries: [1], batch_sizes: [5, 5]); select(value); }\n\
         pipeline sel_nested() { range(8); map { key = value % 2; } batch(2); batch(2); select(key); prefetch(2); }\n\
         pipeline map_nested() { range(16); batch(2); batch(2); batch(2); map { key = value * 2; } select(key); }\n\
         pipeline map_nested2() { range(8); map { key = value * 3; } batch(2); map { key = key + 1; } batch(2); }\n\
         pipeline q(k: u64 = 3, v: u64 = 1, set: u64 = 2) { range(10); skip(v); take(k); batch(set); }\n",
    );
    for n in [128, 1023] {
        let _ = writeln!(src, "pipeline long{n}() {{ range(10); {} }}", "take(5); ".repeat(n));
    }
    let file = dir.path().join("regressions.pipe");
    std::fs::write(&file, &src).unwrap();
    let show = |name: &str, set: &[&str]| {
        let mut args = vec!["show", file.to_str().unwrap(), name, "-n", "all"];
        for s in set {
            args.extend(["--set", s]);
        }
        let o = sluice_in(dir.path(), &args);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        stdout(&o)
    };
    // One field of `sluice show`'s JSON: an `i64` tensor (a batch's column) or scalar.
    let t = |name: &str, v: &[i64]| {
        let values: Vec<String> = v.iter().map(i64::to_string).collect();
        format!(
            "{{\"{name}\":{{\"dtype\":\"i64\",\"shape\":[{}],\"values\":[{}]}}}}",
            v.len(),
            values.join(",")
        )
    };
    let lines = |ls: &[String]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
    assert_eq!(show("sel_batch", &[]), lines(&[t("value", &[0, 1, 2, 3]), t("value", &[4, 5])]));
    assert_eq!(show("sel_padded", &[]), lines(&[t("key", &[0, 1, 0, 1]), t("key", &[0, 1])]));
    assert_eq!(show("sel_window", &[]), lines(&[t("key", &[0, 10, 20]), t("key", &[30, 40, 50])]));
    assert_eq!(show("sel_bucket", &[]), lines(&[t("value", &[0, 2, 4, 6, 8]), t("value", &[1, 3, 5, 7, 9])]));
    let pair = |name: &str, a: [i64; 2], b: [i64; 2]| format!("[{},{}]", t(name, &a), t(name, &b));
    assert_eq!(show("sel_nested", &[]), lines(&[pair("key", [0, 1], [0, 1]), pair("key", [0, 1], [0, 1])]));
    let quad = |k: i64| {
        let (a, b) =
            (pair("key", [k, k + 2], [k + 4, k + 6]), pair("key", [k + 8, k + 10], [k + 12, k + 14]));
        format!("[{a},{b}]")
    };
    assert_eq!(show("map_nested", &[]), lines(&[quad(0), quad(16)]));
    // `{value, key}` rows `[v, v + 1]` of `map_nested2`, key = value * 3 + 1.
    let vk = |v: i64| {
        let col = |a: i64, b: i64| format!("{{\"dtype\":\"i64\",\"shape\":[2],\"values\":[{a},{b}]}}");
        format!("{{\"value\":{},\"key\":{}}}", col(v, v + 1), col(3 * v + 1, 3 * v + 4))
    };
    assert_eq!(
        show("map_nested2", &[]),
        lines(&[format!("[{},{}]", vk(0), vk(2)), format!("[{},{}]", vk(4), vk(6))])
    );
    assert_eq!(show("q", &[]), lines(&[t("value", &[1, 2]), t("value", &[3])]));
    assert_eq!(show("q", &["k=2", "v=5", "set=3"]), lines(&[t("value", &[5, 6])]));
    let scalar = |v: i64| format!("{{\"value\":{{\"dtype\":\"i64\",\"shape\":[],\"values\":[{v}]}}}}");
    let five = lines(&(0..5).map(scalar).collect::<Vec<_>>());
    assert_eq!(show("long128", &[]), five);
    assert_eq!(show("long1023", &[]), five);
}

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.trim().parse().unwrap_or_else(|_| panic!("{name}={v}: expected a number")))
}

/// splitmix64: small, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    /// True with probability `n` in `d`.
    fn chance(&mut self, n: u64, d: u64) -> bool {
        self.next() % d < n
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// The files the sources read, made once per run.
struct Data {
    /// TFRecords of `{x: f32[16], label: i64}` (`sluice gen tabular`).
    tfrecords: String,
    /// Text files of a few lines each.
    text: String,
    /// CSV files with a header `a,b,name`.
    csv: String,
    /// Where `cache(file)` writes.
    caches: String,
    /// Files read whole (`files(..); read_file()`), by what they hold.
    raw: String,
    tensors: String,
    jpegs: String,
    pngs: String,
    /// The tokenizer of `tokenize` (`examples/text/tokenizer.json`).
    tokenizer: String,
}

impl Data {
    fn make(dir: &Path) -> Data {
        let tab = dir.join("tabular");
        generate("tabular", 24, 2, &tab, &[]);
        let text = dir.join("text");
        let csv = dir.join("csv");
        let caches = dir.join("caches");
        let (raw, tensors, images) = (dir.join("raw"), dir.join("tensors"), dir.join("images"));
        for d in [&text, &csv, &caches, &raw, &tensors, &images] {
            std::fs::create_dir_all(d).unwrap();
        }
        // 16 little-endian f32s a file (`decode_raw(.., f32)`), and the bytes of
        // `tf.io.serialize_tensor` of an `f32[2, 3]` (`parse_tensor`).
        for f in 0..2u8 {
            let floats: Vec<u8> =
                (0..16u8).flat_map(|i| (f32::from(i) * 0.5 - f32::from(f)).to_le_bytes()).collect();
            std::fs::write(raw.join(format!("r{f}.bin")), floats).unwrap();
            std::fs::write(tensors.join(format!("t{f}.pb")), tensor_proto(&[2, 3], f32::from(f))).unwrap();
        }
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/image");
        for name in ["gray_40x32.jpg", "rgb_64x48.jpg", "gray_9x13.png", "rgba_20x24.png"] {
            std::fs::copy(fixtures.join(name), images.join(name)).unwrap();
        }
        for f in 0..2 {
            let lines: String = (0..5).map(|i| format!("line {i} of file {f}\n")).collect();
            std::fs::write(text.join(format!("t{f}.txt")), lines).unwrap();
            let rows: String = (0..5).map(|i| format!("{},{}.5,row{i}\n", i * (f + 1), i)).collect();
            std::fs::write(csv.join(format!("c{f}.csv")), format!("a,b,name\n{rows}")).unwrap();
        }
        Data {
            tfrecords: format!("{}/*.tfrecord", tab.display()),
            text: format!("{}/*.txt", text.display()),
            csv: format!("{}/*.csv", csv.display()),
            caches: caches.display().to_string(),
            raw: format!("{}/*.bin", raw.display()),
            tensors: format!("{}/*.pb", tensors.display()),
            jpegs: format!("{}/*.jpg", images.display()),
            pngs: format!("{}/*.png", images.display()),
            tokenizer: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/text/tokenizer.json")
                .display()
                .to_string(),
        }
    }
}

/// A serialized `TensorProto` (`tf.io.serialize_tensor`) of `f32` values `base`,
/// `base + 1`, … of shape `dims`.
fn tensor_proto(dims: &[u64], base: f32) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn field(out: &mut Vec<u8>, tag: u64, bytes: &[u8]) {
        varint(out, tag << 3 | 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }
    let mut shape = Vec::new();
    for &d in dims {
        let mut dim = vec![0x08];
        varint(&mut dim, d);
        field(&mut shape, 2, &dim);
    }
    let n = dims.iter().product::<u64>();
    let values: Vec<u8> = (0..n).flat_map(|i| (base + i as f32).to_le_bytes()).collect();
    let mut out = vec![0x08, 0x01]; // dtype: DT_FLOAT
    field(&mut out, 2, &shape);
    field(&mut out, 4, &values);
    out
}

/// A field's type, as far as the generator tracks it.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    I64,
    F32,
    F64,
    Str,
    /// Bytes holding this.
    Bytes(Content),
    /// An `f32` tensor of this shape (`[16]`; images `[h, w, c]`).
    Tensor(Vec<u64>),
    /// A variable-length list without operations (`i64[]`, `u8[]`).
    List,
    /// `f32[]`, of this many values when known (`decode_raw` of 16 floats).
    Floats(Option<u64>),
    /// A decoded image `u8[H, W, c]` of this many channels.
    Image(u64),
    /// Token ids `i32[]` (`tokenize`).
    Ids,
    /// Packed token ids `i32[n]` (`pack`).
    Packed(u64),
}

impl Ty {
    /// A type of no fixed size: `batch` and `window` cannot stack it.
    fn varies(&self) -> bool {
        matches!(self, Ty::List | Ty::Floats(_) | Ty::Image(_) | Ty::Ids)
    }
}

/// What bytes hold.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Content {
    Text,
    /// 16 little-endian `f32`s.
    Raw,
    /// A serialized `f32[2, 3]`.
    TensorProto,
    Jpeg,
    Png,
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    ty: Ty,
}

/// The element type after each stage.
#[derive(Debug, Clone, PartialEq)]
enum Elem {
    Path,
    Record,
    Fields(Vec<Field>),
    Batch(Box<Elem>),
}

impl Elem {
    fn fields(&self) -> Option<&Vec<Field>> {
        match self {
            Elem::Fields(f) => Some(f),
            _ => None,
        }
    }
}

/// A pipeline made: its name, type and the `--set`s it runs with.
struct Done {
    name: String,
    elem: Elem,
    sets: Vec<String>,
}

/// The pipeline being made.
struct Pipe {
    params: Vec<String>,
    stmts: Vec<String>,
    sets: Vec<String>,
    elem: Elem,
    schema: Option<String>,
    /// Pipelines a combinator of this one takes, which must precede it.
    stages: usize,
    /// What the files of `files(..)` hold.
    content: Content,
    /// The pipelines it takes (`zip`, ...), whose names no parameter may have (E0120).
    inputs: Vec<String>,
}

struct Gen {
    rng: Rng,
    data: Data,
    out: String,
    done: Vec<Done>,
    names: usize,
}

impl Gen {
    /// A name for a new field, parameter or pipeline: often one of [`NASTY`], never one of
    /// `taken`.
    fn name(&mut self, taken: &[String]) -> String {
        for _ in 0..4 {
            if self.rng.chance(2, 3) {
                let n = self.rng.pick(NASTY).to_string();
                if !taken.contains(&n) {
                    return n;
                }
            }
        }
        self.names += 1;
        format!("n{}", self.names)
    }

    /// A count argument: a literal, or a fresh parameter of type `ty` (default the
    /// literal; sometimes `--set` to another value).
    fn count(&mut self, p: &mut Pipe, lo: u64, hi: u64, ty: &str) -> String {
        let v = self.rng.range(lo, hi);
        if !self.rng.chance(1, 3) {
            return v.to_string();
        }
        let mut taken = p.params.iter().map(|d| d.split(':').next().unwrap().to_string()).collect::<Vec<_>>();
        taken.extend(p.inputs.iter().cloned());
        let name = self.name(&taken);
        p.params.push(format!("{name}: {ty} = {v}"));
        if self.rng.chance(1, 3) {
            p.sets.push(format!("{name}={}", self.rng.range(lo, hi)));
        }
        name
    }

    fn pipeline(&mut self, i: usize) {
        let taken: Vec<String> = self.done.iter().map(|d| d.name.clone()).collect();
        let name = if i % 3 == 1 { self.name(&taken) } else { format!("g{i}") };
        let name = if taken.contains(&name) { format!("g{i}") } else { name };
        let mut p = Pipe {
            params: Vec::new(),
            stmts: Vec::new(),
            sets: Vec::new(),
            elem: Elem::Path,
            schema: None,
            stages: 0,
            content: Content::Text,
            inputs: Vec::new(),
        };
        self.source(&mut p);
        let n = if i == 7 { 40 } else { self.rng.range(0, 7) };
        for _ in 0..n {
            self.stage(&mut p);
        }
        // Every element ends finite and small enough to show.
        if matches!(p.elem, Elem::Path) {
            p.stmts.push("read_file();".into());
            p.elem = Elem::Fields(vec![
                Field { name: "contents".into(), ty: Ty::Bytes(p.content) },
                Field { name: "path".into(), ty: Ty::Str },
            ]);
        }
        let mut text = format!("pipeline {name}({}) {{\n", p.params.join(", "));
        if let Some(s) = &p.schema {
            let _ = writeln!(text, "    schema {{ {s} }}");
        }
        for s in &p.stmts {
            let _ = writeln!(text, "    {s}");
        }
        text.push_str("}\n\n");
        self.out.push_str(&text);
        self.done.push(Done { name, elem: p.elem, sets: p.sets });
    }

    fn source(&mut self, p: &mut Pipe) {
        let combinable: Vec<usize> =
            (0..self.done.len()).filter(|&i| self.done[i].elem.fields().is_some()).collect();
        let kind = self.rng.range(0, 9);
        match kind {
            0..=2 => {
                let (a, b) = (self.rng.range(0, 5) as i64 - 2, self.rng.range(3, 30));
                let end = self.count(p, 3, 30, "i64");
                let end = if self.rng.chance(1, 2) { end } else { b.to_string() };
                p.stmts.push(match self.rng.range(0, 2) {
                    0 => format!("range({end});"),
                    1 => format!("range({a}, {end});"),
                    _ => format!("range(start: {}, end: {a}, step: -{});", b, self.rng.range(1, 3)),
                });
                p.elem = Elem::Fields(vec![Field { name: "value".into(), ty: Ty::I64 }]);
            }
            3 | 4 => {
                p.schema = Some("x: f32[16], label: i64".into());
                let files = &self.data.tfrecords;
                match self.rng.range(0, 2) {
                    0 => p.stmts.push(format!(
                        "tfrecords({files:?}, cycle: {}, parallel: {});",
                        self.rng.range(1, 3),
                        self.rng.pick(&["1", "2", "auto"])
                    )),
                    1 => {
                        p.stmts.push(format!(
                            "files({files:?}, shuffle: true, seed: {});",
                            self.rng.range(0, 9)
                        ));
                        p.stmts.push("interleave(cycle: 2, block: 2) { tfrecord(); }".into());
                    }
                    _ => {
                        p.stmts.push(format!("files({files:?});"));
                        p.stmts.push("tfrecord(verify_crc: false);".into());
                    }
                }
                p.elem = Elem::Record;
                // Some stages on serialized records (or their batches), then the parse.
                for _ in 0..self.rng.range(0, 2) {
                    let c = self.count(p, 1, 5, "u64");
                    p.stmts.push(
                        self.rng
                            .pick(&[
                                format!("take({c});"),
                                format!("skip({c});"),
                                "shuffle(4, seed: 1);".into(),
                            ])
                            .clone(),
                    );
                }
                let fields = vec![
                    Field { name: "x".into(), ty: Ty::Tensor(vec![16]) },
                    Field { name: "label".into(), ty: Ty::I64 },
                ];
                if self.rng.chance(1, 4) {
                    p.stmts.push(format!("batch({});", self.rng.range(2, 5)));
                    p.stmts.push("map { parse_example(); }".into());
                    p.elem = Elem::Batch(Box::new(Elem::Fields(fields)));
                } else {
                    p.stmts.push("map { parse_example(); }".into());
                    p.elem = Elem::Fields(fields);
                }
            }
            5 => {
                p.stmts.push(format!("text_lines({:?});", self.data.text));
                p.elem = Elem::Fields(vec![Field { name: "line".into(), ty: Ty::Str }]);
            }
            6 => {
                p.schema = Some("a: i64, b: f64, name: str".into());
                p.stmts.push(format!("csv({:?}, header: true);", self.data.csv));
                p.elem = Elem::Fields(vec![
                    Field { name: "a".into(), ty: Ty::I64 },
                    Field { name: "b".into(), ty: Ty::F64 },
                    Field { name: "name".into(), ty: Ty::Str },
                ]);
            }
            7 => {
                let (files, content) = *self.rng.pick(&[
                    (&self.data.text, Content::Text),
                    (&self.data.raw, Content::Raw),
                    (&self.data.tensors, Content::TensorProto),
                    (&self.data.jpegs, Content::Jpeg),
                    (&self.data.pngs, Content::Png),
                ]);
                p.content = content;
                p.stmts.push(format!("files({files:?});"));
                if self.rng.chance(1, 2) {
                    p.stmts.push("shard(2, 0);".into());
                }
                p.elem = Elem::Path;
            }
            _ if combinable.len() >= 2 => {
                let a = *self.rng.pick(&combinable);
                let b = *self.rng.pick(&combinable);
                let (ea, eb) = (self.done[a].elem.clone(), self.done[b].elem.clone());
                let (na, nb) = (self.done[a].name.clone(), self.done[b].name.clone());
                p.inputs = vec![na.clone(), nb.clone()];
                let disjoint = ea
                    .fields()
                    .unwrap()
                    .iter()
                    .all(|f| eb.fields().unwrap().iter().all(|g| g.name != f.name));
                if a != b && disjoint {
                    p.stmts.push(format!("zip({na}, {nb});"));
                    let mut f = ea.fields().unwrap().clone();
                    f.extend(eb.fields().unwrap().iter().cloned());
                    p.elem = Elem::Fields(f);
                } else if ea == eb && self.rng.chance(1, 2) {
                    p.stmts.push(format!("concatenate({na}, {nb});"));
                    p.elem = ea;
                } else if ea == eb && a != b {
                    p.stmts.push(format!("sample_from({na}, {nb}, weights: [0.25, 0.75], seed: 5);"));
                    p.elem = ea;
                } else {
                    p.stmts.push(format!("sample_from({na}, weights: [1.0]);"));
                    p.elem = ea;
                }
            }
            _ => {
                p.stmts.push("range(5);".into());
                p.elem = Elem::Fields(vec![Field { name: "value".into(), ty: Ty::I64 }]);
            }
        }
    }

    /// A fresh field name for `fields`.
    fn field_name(&mut self, fields: &[Field]) -> String {
        let taken: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
        self.name(&taken)
    }

    /// One stage that fits the element type, appended.
    fn stage(&mut self, p: &mut Pipe) {
        p.stages += 1;
        match p.elem.clone() {
            Elem::Path => {
                let c = self.count(p, 1, 3, "u64");
                match self.rng.range(0, 2) {
                    0 => p.stmts.push(format!("take({c});")),
                    1 => p.stmts.push("shuffle(4, seed: 2);".into()),
                    _ => {
                        p.stmts.push(format!("read_file(on_error: {});", self.rng.pick(&["fail", "skip"])));
                        p.elem = Elem::Fields(vec![
                            Field { name: "contents".into(), ty: Ty::Bytes(p.content) },
                            Field { name: "path".into(), ty: Ty::Str },
                        ]);
                    }
                }
            }
            Elem::Record => unreachable!("records are parsed by the source"),
            Elem::Batch(inner) => self.batch_stage(p, &inner),
            Elem::Fields(fields) => self.fields_stage(p, fields),
        }
    }

    fn batch_stage(&mut self, p: &mut Pipe, inner: &Elem) {
        let names: Vec<String> = match inner {
            Elem::Fields(f) => f.iter().map(|f| f.name.clone()).collect(),
            Elem::Batch(b) => {
                b.fields().map(|f| f.iter().map(|f| f.name.clone()).collect()).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        match self.rng.range(0, 9) {
            0 | 1 if matches!(inner, Elem::Fields(_)) => {
                p.stmts.push("unbatch();".into());
                p.elem = inner.clone();
            }
            2 if !names.is_empty() => {
                let keep: Vec<String> = names.iter().filter(|_| self.rng.chance(1, 2)).cloned().collect();
                let keep = if keep.is_empty() { vec![names[0].clone()] } else { keep };
                p.stmts.push(format!("select({});", keep.join(", ")));
                p.elem = select(&p.elem, &keep);
            }
            3 if !matches!(inner, Elem::Batch(_)) && !matches!(inner, Elem::Record) => {
                p.stmts.push(format!("batch({});", self.rng.range(1, 3)));
                p.elem = Elem::Batch(Box::new(p.elem.clone()));
            }
            4 => {
                let c = self.count(p, 1, 4, "u64");
                p.stmts.push(
                    self.rng
                        .pick(&[format!("take({c});"), format!("skip({c});"), format!("repeat({c});")])
                        .clone(),
                );
            }
            5 => {
                let buf = self.count(p, 1, 8, "u32");
                p.stmts.push(format!("shuffle({buf}, seed: 3);"));
            }
            6 => {
                let c = self.count(p, 1, 4, "u32");
                p.stmts.push(
                    self.rng
                        .pick(&[format!("prefetch({c});"), "prefetch(auto);".into(), "cache();".into()])
                        .clone(),
                );
            }
            7 => p.stmts.push("shard(2, 1, remainder: pad);".into()),
            _ => {
                // A map over the batches' rows: its fields, at the same depth.
                let Some(fields) = inner.fields().or_else(|| match inner {
                    Elem::Batch(b) => b.fields(),
                    _ => None,
                }) else {
                    return;
                };
                let Some(stmt) = self.map_block(p, fields.clone()) else { return };
                p.stmts.push(stmt.0);
                p.elem = rebatch(&p.elem, stmt.1);
            }
        }
    }

    fn fields_stage(&mut self, p: &mut Pipe, fields: Vec<Field>) {
        let ints: Vec<String> = fields.iter().filter(|f| f.ty == Ty::I64).map(|f| f.name.clone()).collect();
        let lists = fields.iter().any(|f| f.ty.varies());
        match self.rng.range(0, 22) {
            0..=5 => self.map(p, fields),
            6 if !ints.is_empty() => {
                let a = self.rng.pick(&ints).clone();
                let limit = self.count(p, 0, 12, "i64");
                let pred = self
                    .rng
                    .pick(&[
                        format!("{a} % 2 == 0 || {a} > {limit}"),
                        format!("{a} < {limit}"),
                        format!("!({a} == 3) && {a} != 4"),
                    ])
                    .clone();
                p.stmts.push(format!("filter({pred});"));
            }
            7 if !ints.is_empty() => {
                let a = self.rng.pick(&ints).clone();
                let limit = self.count(p, 0, 12, "i64");
                p.stmts.push(format!("take_while({a} <= {limit} || {a} < 0);"));
            }
            8 => {
                let keep: Vec<String> =
                    fields.iter().filter(|_| self.rng.chance(1, 2)).map(|f| f.name.clone()).collect();
                let keep = if keep.is_empty() { vec![fields[0].name.clone()] } else { keep };
                p.stmts.push(format!("select({});", keep.join(", ")));
                p.elem = select(&p.elem, &keep);
            }
            9 if !fields.iter().any(|f| f.name == "index") => {
                let start = self.count(p, 0, 100, "i64");
                p.stmts.push(if self.rng.chance(1, 2) {
                    format!("enumerate(start: {start});")
                } else {
                    "enumerate();".into()
                });
                let mut f = fields;
                f.push(Field { name: "index".into(), ty: Ty::I64 });
                p.elem = Elem::Fields(f);
            }
            10 if !ints.is_empty() && p.stages < 20 => {
                // A bounded count for the inner range (a field could have grown large).
                let a = self.rng.pick(&ints).clone();
                let n = self.field_name(&fields);
                p.stmts.push(format!("map {{ {n} = {a} % 4; }}"));
                let inner =
                    self.rng.pick(&["", "take(2);", "map { value = value * 3; }", "filter(value != 1);"]);
                p.stmts.push(format!("flat_map {{ range({n}); {inner} }}"));
                p.elem = Elem::Fields(vec![Field { name: "value".into(), ty: Ty::I64 }]);
            }
            11 => {
                let size = self.count(p, 1, 4, "u32");
                let drop = self.rng.pick(&["", ", drop_remainder: false", ", drop_remainder: true"]);
                if lists {
                    p.stmts.push(format!("padded_batch({size}{drop});"));
                } else {
                    p.stmts.push(format!("batch({size}{drop});"));
                }
                p.elem = Elem::Batch(Box::new(p.elem.clone()));
            }
            12 => {
                let size = self.count(p, 1, 4, "u32");
                // `pad_to_multiple` rounds lists only, not images (E0371).
                let images = fields.iter().any(|f| matches!(f.ty, Ty::Image(_)));
                let more = if images {
                    &["", ", drop_remainder: true"][..]
                } else {
                    &["", ", pad_to_multiple: 4", ", drop_remainder: true"][..]
                };
                let more = self.rng.pick(more);
                p.stmts.push(format!("padded_batch({size}{more});"));
                p.elem = Elem::Batch(Box::new(p.elem.clone()));
            }
            13 if !lists => {
                let size = self.count(p, 1, 4, "u32");
                let shift = self.rng.range(1, 3);
                let stride = self.rng.range(1, 2);
                p.stmts.push(format!(
                    "window({size}, shift: {shift}, stride: {stride}, drop_remainder: {});",
                    self.rng.chance(1, 2)
                ));
                p.elem = Elem::Batch(Box::new(p.elem.clone()));
            }
            14 if !ints.is_empty() => {
                let a = self.rng.pick(&ints).clone();
                let n = self.field_name(&fields);
                // With `pad_to_bucket_boundary` a length must be below the last boundary,
                // and a list no longer than the length given (tf.data's rules too: an
                // error otherwise).
                let to_boundary = !lists && self.rng.chance(1, 2);
                let m = if to_boundary { 5 } else { 9 };
                p.stmts.push(format!("map {{ {n} = ({a} % {m} + {m}) % {m}; }}"));
                p.stmts.push(format!(
                    "bucket_by_length(length: {n}, boundaries: [2, 5], batch_sizes: [2, 3, 2], pad_to_bucket_boundary: {to_boundary}, drop_remainder: {});",
                    self.rng.chance(1, 3)
                ));
                let mut f = fields;
                f.push(Field { name: n, ty: Ty::I64 });
                p.elem = Elem::Batch(Box::new(Elem::Fields(f)));
            }
            15 => {
                let c = self.count(p, 1, 3, "u64");
                p.stmts.push(
                    self.rng
                        .pick(&[format!("repeat({c});"), format!("take({c});"), format!("skip({c});")])
                        .clone(),
                );
            }
            16 => {
                let buf = self.count(p, 1, 16, "u32");
                let seed = self.count(p, 0, 9, "u64");
                let each = self.rng.pick(&["", ", reshuffle_each_epoch: false"]);
                p.stmts.push(format!("shuffle({buf}, seed: {seed}{each});"));
            }
            17 => {
                let n = self.rng.range(1, 3);
                let rem = self.rng.pick(&["keep", "drop", "pad"]);
                p.stmts.push(format!("shard({n}, {}, remainder: {rem});", self.rng.range(0, n - 1)));
            }
            18 if !lists => {
                let path = format!("{}/{}.cache", self.data.caches, self.rng.next());
                p.stmts.push(self.rng.pick(&["cache();".to_string(), format!("cache({path:?});")]).clone());
            }
            19 => {
                let c = self.count(p, 1, 4, "u32");
                p.stmts.push(
                    self.rng
                        .pick(&[format!("prefetch({c});"), "prefetch(auto);".into(), "prefetch();".into()])
                        .clone(),
                );
            }
            20 if fields.iter().any(|f| f.ty == Ty::Ids) => {
                let ids = fields.iter().find(|f| f.ty == Ty::Ids).unwrap().name.clone();
                let length = self.rng.range(2, 12);
                let window = self.rng.pick(&["", ", window: 1", ", window: 3"]);
                p.stmts.push(format!("pack(length: {length}, fields: [{ids}]{window});"));
                p.elem = Elem::Fields(
                    [ids.as_str(), "segment_ids", "positions"]
                        .iter()
                        .map(|n| Field { name: n.to_string(), ty: Ty::Packed(length) })
                        .collect(),
                );
            }
            _ => self.map(p, fields),
        }
    }

    /// A `map` block of one to four statements over the fields.
    fn map(&mut self, p: &mut Pipe, fields: Vec<Field>) {
        if let Some((stmt, fields)) = self.map_block(p, fields) {
            p.stmts.push(stmt);
            p.elem = Elem::Fields(fields);
        }
    }

    /// A `map` statement of one to four assignments over `fields`, and the fields after
    /// it; `None` when no operation fits.
    fn map_block(&mut self, p: &mut Pipe, mut fields: Vec<Field>) -> Option<(String, Vec<Field>)> {
        let mut stmts = Vec::new();
        for _ in 0..self.rng.range(1, 4) {
            let Some((target, expr, ty)) = self.op(p, &fields) else { continue };
            stmts.push(format!("{target} = {expr};"));
            match fields.iter_mut().find(|f| f.name == target) {
                Some(f) => f.ty = ty,
                None => fields.push(Field { name: target, ty }),
            }
        }
        if stmts.is_empty() {
            return None;
        }
        let opts = self.rng.pick(&[
            "",
            "(parallel: 2)",
            "(parallel: auto, deterministic: true)",
            "(on_error: skip)",
        ]);
        Some((format!("map{opts} {{ {} }}", stmts.join(" ")), fields))
    }

    /// One statement: target, expression, the target's new type.
    fn op(&mut self, p: &mut Pipe, fields: &[Field]) -> Option<(String, String, Ty)> {
        let f = self.rng.pick(fields).clone();
        let target = if self.rng.chance(1, 2) { f.name.clone() } else { self.field_name(fields) };
        let a = &f.name;
        Some(match &f.ty {
            Ty::I64 => match self.rng.range(0, 5) {
                0 => (target, format!("{a} * 3 + 1"), Ty::I64),
                1 => {
                    let d = self.count(p, 1, 7, "i64");
                    (target, format!("({a} - 2) % {d}"), Ty::I64)
                }
                2 => (target, format!("cast({a}, f32) * 0.5"), Ty::F32),
                3 => (target, format!("cast({a}, f64)"), Ty::F64),
                4 => (target, format!("one_hot(({a} % 5 + 5) % 5, 5)"), Ty::Tensor(vec![5])),
                _ => (target, format!("{a} / 2 - {a}"), Ty::I64),
            },
            Ty::F32 | Ty::F64 => {
                let ty = f.ty.clone();
                (target, format!("{a} * 2.0 - 1.0"), ty)
            }
            Ty::Tensor(shape) if shape == &[16] => match self.rng.range(0, 4) {
                0 => (target, format!("reshape({a}, [4, 4, 1])"), Ty::Tensor(vec![4, 4, 1])),
                1 => (target, format!("scale({a}, 0.5)"), f.ty.clone()),
                2 => (target, format!("check_finite({a} * 2.0 + 1.0)"), f.ty.clone()),
                3 => (target, format!("cast({a}, f32) / 3.0"), f.ty.clone()),
                _ => (target, format!("normalize({a}, mean: [0.5], std: [0.25])"), f.ty.clone()),
            },
            Ty::Tensor(shape) if shape.len() == 3 => {
                let (h, w, c) = (shape[0], shape[1], shape[2]);
                match self.rng.range(0, 6) {
                    0 => (target, format!("resize({a}, 2, 3)"), Ty::Tensor(vec![2, 3, c])),
                    1 if h >= 2 && w >= 2 => {
                        (target, format!("center_crop({a}, 2, 2)"), Ty::Tensor(vec![2, 2, c]))
                    }
                    2 if h >= 2 && w >= 2 => {
                        let seed = self.count(p, 0, 9, "u64");
                        (target, format!("random_crop({a}, 2, 2, seed: {seed})"), Ty::Tensor(vec![2, 2, c]))
                    }
                    3 => (target, format!("random_flip({a}, seed: 4)"), f.ty.clone()),
                    4 => (target, format!("transpose({a}, chw)"), Ty::Tensor(vec![c, h, w])),
                    _ => (target, format!("normalize({a}, mean: [0.5], std: [0.25])"), f.ty.clone()),
                }
            }
            Ty::Tensor(_) => (target, format!("{a} + 1.0"), f.ty.clone()),
            Ty::Bytes(Content::Text) => (target, format!("decode_raw({a}, u8)"), Ty::List),
            Ty::Bytes(Content::Raw) => (target, format!("decode_raw({a}, f32)"), Ty::Floats(Some(16))),
            Ty::Bytes(Content::TensorProto) => match self.rng.range(0, 1) {
                0 => (target, format!("parse_tensor({a}, f32, [2, 3])"), Ty::Tensor(vec![2, 3])),
                _ => (target, format!("parse_tensor({a}, f32)"), Ty::Floats(Some(6))),
            },
            Ty::Bytes(c @ (Content::Jpeg | Content::Png)) => {
                let op = if *c == Content::Jpeg { "decode_jpeg" } else { "decode_png" };
                let channels = *self.rng.pick(&[1, 3]);
                (target, format!("{op}({a}, channels: {channels})"), Ty::Image(channels))
            }
            Ty::Image(c) => {
                let c = *c;
                match self.rng.range(0, 3) {
                    0 => (target, format!("resize({a}, 3, 2)"), Ty::Tensor(vec![3, 2, c])),
                    1 => (target, format!("center_crop({a}, 4, 4)"), Ty::Image(c)),
                    2 => (target, format!("random_crop({a}, 3, 5, seed: 1)"), Ty::Image(c)),
                    _ => (target, format!("random_flip({a}, seed: 2)"), Ty::Image(c)),
                }
            }
            Ty::Floats(n) => match self.rng.range(0, 2) {
                0 => (target, format!("{a} * 2.0 + 1.0"), f.ty.clone()),
                1 => (target, format!("check_finite({a})"), f.ty.clone()),
                _ if *n == Some(16) => {
                    (target, format!("reshape({a}, [4, 4, 1])"), Ty::Tensor(vec![4, 4, 1]))
                }
                _ => (target, format!("scale({a}, 0.5)"), f.ty.clone()),
            },
            Ty::Str => {
                let (bos, eos) = (self.rng.chance(1, 2), self.rng.chance(1, 2));
                let tok = &self.data.tokenizer;
                (target, format!("tokenize({a}, {tok:?}, add_bos: {bos}, add_eos: {eos})"), Ty::Ids)
            }
            Ty::Ids => (target, format!("cast({a}, f32)"), Ty::Floats(None)),
            Ty::Packed(n) => (target, format!("cast({a}, f32) * 0.5"), Ty::Tensor(vec![*n])),
            Ty::List => return None,
        })
    }
}

/// `e` (a batch, perhaps of batches) with its rows' fields now `fields`.
fn rebatch(e: &Elem, fields: Vec<Field>) -> Elem {
    match e {
        Elem::Batch(b) => Elem::Batch(Box::new(rebatch(b, fields))),
        _ => Elem::Fields(fields),
    }
}

/// `e` after `select(keep)`.
fn select(e: &Elem, keep: &[String]) -> Elem {
    match e {
        Elem::Fields(f) => {
            Elem::Fields(keep.iter().filter_map(|k| f.iter().find(|x| &x.name == k).cloned()).collect())
        }
        Elem::Batch(b) => Elem::Batch(Box::new(select(b, keep))),
        other => other.clone(),
    }
}

/// The generator's finds that `sluice check` now refuses: a parameter with the name of a
/// pipeline the pipeline takes (E0120; the generated `Params` had the field twice, E0124).
#[test]
fn regressions_refused_by_check() {
    let src = "pipeline a() { range(3); }\n\
               pipeline b(a: u64 = 1) { sample_from(a, weights: [1.0]); take(a); }\n\
               pipeline c(x: u64 = 1) { zip(a, b); take(x); }\n";
    let codes: Vec<&str> = sluice_compiler::compile(src).diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["E0120"]);
}
