//! The compiler driver: the one way through the compiler. Every command of the `sluice`
//! CLI, `build::compile` and the `pipeline!` macro call it.
//!
//! ```text
//! source ─parse─▶ AST ─sema─▶ declarations + logical plan ─optimize (once)─▶ optimized plan
//!        ─checks on the optimized plan (W0210)─▶ ─physical─▶ physical plan ─codegen─▶ Rust
//! ```
//!
//! [`compile`] (or [`compile_ast`] for a tree from the `pipeline!` front end) runs every
//! stage up to the physical plan and returns a [`Compilation`]: one [`Pipeline`] per
//! pipeline that got that far, carrying all its plans, and every diagnostic of the
//! file. [`Compilation::generate`] prints those pipelines as Rust. Nothing below the
//! driver calls back up into it, and no stage runs twice.
//!
//! **Architecture Invariant:** the optimizer runs once per pipeline, here; the physical
//! plan and the generated code are both of that one optimized plan.

use crate::ast;
use crate::codegen::{self, Generated};
use crate::diagnostic::Diagnostic;
use crate::ir::plan::{ArgValue, Element, ParquetFormat, Plan, RecordFormat, Remainder, Shard};
use crate::ir::types::Value;
use crate::optimizer::{self, Optimized};
use crate::physical::{self, PhysicalPlan};
use crate::sema::{self, Declarations};

/// One pipeline through every stage of the compiler.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// Parameters, schema, budget, device, user functions.
    pub decls: Declarations,
    /// The plan as written (lowered from the AST, checked).
    pub logical: Plan,
    /// The plan after the optimizer, and the rules that changed it.
    pub optimized: Optimized,
    /// What runs: threads, queue depths, fused stages, the memory bound.
    pub physical: PhysicalPlan,
    /// The tokens of its Rust code (`pipeline!`), by a `RustStage`'s `code_index`.
    pub rust_code: Vec<proc_macro2::TokenStream>,
}

impl Pipeline {
    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.decls.name
    }

    /// The `explain` text of its plans: logical, optimized (with the plan after each rule,
    /// the optimizer's then fusion's, that changed it when `verbose`) and physical, as
    /// `sluice explain` prints them.
    pub fn explain(&self, verbose: bool) -> String {
        let name = self.name();
        let mut out = format!("== {name} (logical) ==\n{}", self.logical.explain());
        out.push_str(&format!("== {name} (optimized) ==\n{}", self.optimized.plan.explain()));
        if verbose {
            for a in &self.optimized.applied {
                out.push_str(&format!("-- after {}:\n{}", a.rule, a.after.explain()));
            }
            for a in &self.physical.fusions {
                out.push_str(&format!("-- after {} (physical):\n{}", a.rule, a.after.explain()));
            }
        }
        out.push_str(&format!("== {name} (physical) ==\n{}", self.physical.explain()));
        out
    }
}

/// A compiled `.pipe` file: its pipelines and every diagnostic.
#[derive(Debug, Clone)]
pub struct Compilation {
    /// The pipelines that passed every check, in file order (all of them when there is
    /// no error).
    pub pipelines: Vec<Pipeline>,
    /// Every diagnostic, errors and warnings, in reading order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The warnings (what a clean file may still have).
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| !d.is_error())
    }

    /// The pipelines, or every diagnostic when there is an error.
    pub fn into_result(self) -> Result<Vec<Pipeline>, Vec<Diagnostic>> {
        if self.has_errors() { Err(self.diagnostics) } else { Ok(self.pipelines) }
    }

    /// The Rust of the whole file (one module per pipeline), or the diagnostics: the
    /// file's errors, or `E0600` for a pipeline the code generator cannot handle.
    pub fn generate(&self) -> Result<Generated, Vec<Diagnostic>> {
        if self.has_errors() {
            return Err(self.diagnostics.clone());
        }
        let units: Vec<codegen::Unit<'_>> = self
            .pipelines
            .iter()
            .map(|p| codegen::Unit { decls: &p.decls, physical: &p.physical, rust_code: &p.rust_code })
            .collect();
        codegen::generate(&units)
    }
}

/// The resume blocker of the first pipeline `plan` zips or concatenates that has one (its
/// own, else what it takes in turn), as the generated `RESUME_BLOCKER` finds it at run
/// time (`codegen/module.rs`' `combined_blockers`).
fn inherited_blocker(pipelines: &[Pipeline], plan: &crate::ir::plan::Plan, depth: usize) -> Option<String> {
    // Sema refuses a pipeline that takes itself; the depth only guards against a loop.
    if depth > pipelines.len() {
        return None;
    }
    crate::ir::combine::passes_beneath(plan).into_iter().find_map(|name| {
        let q = pipelines.iter().find(|q| q.name() == name)?;
        crate::ir::resume::resume_blocker(&q.optimized.plan)
            .or_else(|| inherited_blocker(pipelines, &q.optimized.plan, depth + 1))
    })
}

/// Parses and compiles a `.pipe` file.
pub fn compile(source: &str) -> Compilation {
    match crate::syntax::parse(source) {
        Ok(file) => compile_ast(&file),
        Err(diagnostics) => Compilation { pipelines: Vec::new(), diagnostics },
    }
}

/// Compiles a parsed file (from either front end).
pub fn compile_ast(file: &ast::File) -> Compilation {
    let (checked, mut diagnostics) = sema::check_file(file);
    let mut pipelines = Vec::new();
    for c in checked {
        let Some(logical) = c.plan else { continue };
        let optimized = optimizer::optimize(logical.clone());
        diagnostics.extend(file_level_shards(&logical, &optimized.plan));
        match physical::plan(
            &optimized.plan,
            &c.decls.params,
            c.decls.budget,
            c.decls.budget_span,
            c.decls.device,
            physical::Options::default(),
        ) {
            Ok(mut physical) => pipelines.push(Pipeline {
                physical: {
                    physical.threads = c.decls.threads;
                    physical
                },
                decls: c.decls,
                logical,
                optimized,
                rust_code: c.rust_code,
            }),
            Err(d) => diagnostics.push(*d),
        }
    }
    // What a pipeline zips or concatenates blocks its resumption too (explain says so).
    let inherited: Vec<Option<String>> =
        pipelines.iter().map(|p| inherited_blocker(&pipelines, &p.optimized.plan, 0)).collect();
    for (p, why) in pipelines.iter_mut().zip(inherited) {
        p.physical.inherited_blocker = why;
    }
    // In reading order, whichever check found them.
    diagnostics.sort_by_key(|d| d.primary.span.start);
    Compilation { pipelines, diagnostics }
}

/// W0210, one per `shard` of the optimized plan whose workers read whole files: a shard
/// of paths, written so (between `files` and `interleave`) or moved onto the file list
/// by `push_shard_down` (a `remainder: keep` shard on an interleave of `files`). Such a
/// shard cannot give workers equal record counts. A single shard (`num_shards` the
/// constant 1) is even whatever it reads. The logical plan tells which were written on
/// the paths (the same stage, by its span).
fn file_level_shards(logical: &Plan, optimized: &Plan) -> Vec<Diagnostic> {
    let single = |s: &Shard| s.num_shards == ArgValue::Const(Value::Int(1));
    // The spans of the shards written on the paths.
    let mut written = Vec::new();
    let mut node = Some(logical);
    while let Some(n) = node {
        if let Plan::Shard(s) = n
            && s.input.output() == Element::Path
        {
            written.push(s.span);
        }
        node = n.input();
    }
    let mut out = Vec::new();
    let mut node = Some(optimized);
    let mut parent: Option<&Plan> = None;
    while let Some(n) = node {
        node = n.input();
        let consumer = parent.replace(n);
        if let Plan::Interleave(i) = n
            && let RecordFormat::Parquet(ParquetFormat { shard: Some(s), .. }) = &i.format
            && s.num_shards != ArgValue::Const(Value::Int(1))
        {
            out.push(row_group_shard(s.span));
        }
        let Plan::Shard(pass) = n else { continue };
        // `read_file` makes one element of each file: a shard of its paths is one of elements.
        if pass.input.output() != Element::Path || single(pass) || matches!(consumer, Some(Plan::ReadFile(_)))
        {
            continue;
        }
        let on_paths = written.iter().any(|s| s.start == pass.span.start && s.end == pass.span.end);
        let d = Diagnostic::warning(
            "W0210",
            "file-level sharding cannot give workers equal record counts",
            pass.span,
            "each worker reads whole files",
        );
        out.push(if !on_paths {
            d.with_note(
                "a `shard` right on an interleave of `files` is moved onto the file list: each worker reads \
                 whole files, so counts match only when every file holds the same number of records and \
                 the number of files is a multiple of `num_shards`",
            )
            .with_help(
                "declare `remainder: drop` or `remainder: pad` to shard record by record with equal counts \
                 (every worker then reads every file)",
            )
        } else {
            let note = if pass.remainder == Remainder::Keep {
                "this `shard` deals out files: each worker reads whole files, so counts match only when \
                 every file holds the same number of records and the number of files is a multiple of \
                 `num_shards`"
            } else {
                "this `shard` deals out files: its `remainder` evens out the number of files per worker, \
                 not the number of records"
            };
            d.with_note(note).with_help(
                "to shard record by record with equal counts, move `shard` after the `interleave` and \
                 declare `remainder: drop` or `remainder: pad` (every worker then reads every file)",
            )
        });
    }
    out
}

/// W0210 for a `shard` that `push_shard_down` moved into a `parquet` reader.
fn row_group_shard(span: crate::span::Span) -> Diagnostic {
    Diagnostic::warning(
        "W0210",
        "row-group sharding cannot give workers equal record counts",
        span,
        "each worker reads whole row groups",
    )
    .with_note(
        "a `shard` right on a `parquet` reader moves into it: each worker reads the row groups whose index \
         in the list of every file's row groups (file after file) is its `index` modulo `num_shards`, so a \
         worker gets whole row groups, not every `num_shards`-th row, and counts match only when every row \
         group holds the same number of rows and their number is a multiple of `num_shards`",
    )
    .with_help(
        "declare `remainder: drop` or `remainder: pad` to shard row by row with equal counts (every worker \
         then decodes every row group)",
    )
}

#[cfg(test)]
mod tests {
    use crate::diagnostic::Severity;

    /// The stages that W0210 points at in a one-pipeline file of `stages`, which must
    /// still compile.
    fn file_level(stages: &str) -> Vec<String> {
        let src = format!("pipeline p(files: glob = \"d/*\", w: u32 = 2, i: u32 = 0) {{\n{stages}\n}}\n");
        let c = super::compile(&src);
        assert!(!c.has_errors(), "{}", crate::diagnostic::render("test.pipe", &src, &c.diagnostics));
        c.diagnostics
            .iter()
            .inspect(|d| assert_eq!((d.code, d.severity), ("W0210", Severity::Warning), "{d:?}"))
            .map(|d| src[d.primary.span.start..d.primary.span.end].to_string())
            .collect()
    }

    #[test]
    fn shards_of_whole_files_warn() {
        // Moved onto the file list by `push_shard_down`, also past a stage that does nothing.
        assert_eq!(file_level("tfrecords(files); shard(w, i);"), ["shard(w, i);"]);
        assert_eq!(file_level("tfrecords(files); shuffle(1); shard(4, 1);"), ["shard(4, 1);"]);
        // Written on the paths, whatever the remainder.
        assert_eq!(
            file_level("files(files); shard(4, 1); interleave(cycle: 2) { tfrecord(); }"),
            ["shard(4, 1);"]
        );
        assert_eq!(
            file_level("files(files); shard(4, 1, remainder: pad); interleave(cycle: 2) { tfrecord(); }"),
            ["shard(4, 1, remainder: pad);"]
        );
        // Two shards: the one of paths warns, the one of records stays on the records.
        assert_eq!(
            file_level("files(files); shard(2, 0); interleave(cycle: 2) { tfrecord(); } shard(8, 3);"),
            ["shard(2, 0);"]
        );
    }

    #[test]
    fn shards_of_parquet_row_groups_warn_so() {
        let schema = "schema { x: f32[4] }";
        assert_eq!(file_level(&format!("{schema} parquet(files); shard(w, i);")), ["shard(w, i);"]);
        assert!(file_level(&format!("{schema} parquet(files); shard(w, i, remainder: drop);")).is_empty());
        assert!(file_level(&format!("{schema} parquet(files); shard(1, 0);")).is_empty());
        let src =
            "pipeline p(files: glob) {\n    schema { x: f32[4] }\n    parquet(files);\n    shard(4, 1);\n}\n";
        let text = crate::diagnostic::render("p.pipe", src, &super::compile(src).diagnostics);
        assert!(text.starts_with("warning[W0210]: row-group sharding cannot"), "{text}");
        assert!(text.contains("each worker reads whole row groups"), "{text}");
    }

    #[test]
    fn shards_of_records_and_single_shards_do_not_warn() {
        assert!(file_level("files(files); shard(w, i); read_file();").is_empty(), "one element per file");
        assert!(file_level("files(files); read_file(); shard(w, i);").is_empty(), "moved onto the paths");
        assert!(file_level("tfrecords(files); shard(4, 1, remainder: drop);").is_empty());
        assert!(file_level("tfrecords(files); shard(w, i, remainder: pad);").is_empty());
        assert!(file_level("tfrecords(files); repeat(2); shard(4, 1);").is_empty());
        assert!(file_level("tfrecords(files); shard(1, 0);").is_empty());
        assert!(file_level("files(files); shard(1, 0); interleave(cycle: 2) { tfrecord(); }").is_empty());
    }

    #[test]
    fn drop_and_pad_shards_hold_elements_in_the_memory_bound() {
        let holds = |remainder: &str| {
            let src = format!(
                "pipeline p(files: glob) {{ tfrecords(files); shard(4, 1, remainder: {remainder}); }}"
            );
            let pipelines = super::compile(&src).into_result().unwrap_or_else(|d| panic!("{d:?}"));
            let physical = pipelines[0].physical.explain();
            physical.lines().find(|l| l.contains("ShardExec")).map(|l| l.trim().to_string())
        };
        assert_eq!(
            holds("keep").as_deref(),
            Some("ShardExec: threads=1, holds=0, memory=0 B, resume=fast-forward")
        );
        assert_eq!(
            holds("drop").as_deref(),
            Some("ShardExec: threads=1, holds=1, memory=64.0 KiB, resume=fast-forward")
        );
        assert_eq!(
            holds("pad").as_deref(),
            Some("ShardExec: threads=1, holds=3, memory=192.0 KiB, resume=replay")
        );
    }

    #[test]
    fn the_warning_says_how_to_even_counts() {
        let src = "pipeline p(files: glob) {\n    tfrecords(files);\n    shard(4, 1);\n}\n";
        let text = crate::diagnostic::render("p.pipe", src, &super::compile(src).diagnostics);
        insta::assert_snapshot!(text, @r"
        warning[W0210]: file-level sharding cannot give workers equal record counts
          ┌─ p.pipe:3:5
          │
        3 │     shard(4, 1);
          │     ^^^^^^^^^^^^ each worker reads whole files
          │
          = a `shard` right on an interleave of `files` is moved onto the file list: each worker reads whole files, so counts match only when every file holds the same number of records and the number of files is a multiple of `num_shards`
          = help: declare `remainder: drop` or `remainder: pad` to shard record by record with equal counts (every worker then reads every file)
        ");
    }
}
