//! The text and file sources through generated pipelines, on files written here:
//! `text_lines` (tests/pipes/text.pipe), `csv` (tests/pipes/csv.pipe) and `read_file`
//! (tests/pipes/read_file.pipe): their elements, resume, and every error naming the file
//! and the line (and column) or the file.

use std::io::Write;
use std::path::Path;

use sluice::runtime::column::Columns;
use sluice::runtime::stage::{Ctx, Dataset};
use sluice_examples::corpus::{
    example_text, images, line_batches, lines, positional, raw, table, table_skipping,
};

fn glob(dir: &Path, pattern: &str) -> String {
    format!("{}/{pattern}", dir.display())
}

/// Every element of a generated dataset, or the first error's text.
fn all<D: Dataset>(ds: D) -> Result<Vec<D::Item>, String> {
    ds.stream().map_err(|e| e.to_string())?.map(|r| r.map_err(|e| e.to_string())).collect()
}

fn gzip(path: &Path, text: &str) {
    let mut w =
        flate2::write::GzEncoder::new(std::fs::File::create(path).unwrap(), flate2::Compression::default());
    w.write_all(text.as_bytes()).unwrap();
    w.finish().unwrap();
}

#[test]
fn text_lines_yield_each_line_as_tensorflow_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\r\n\nthree").unwrap();
    std::fs::write(dir.path().join("b.txt"), "zoë 🚀\n").unwrap();
    std::fs::write(dir.path().join("c.txt"), "").unwrap();
    let p = lines::Params { files: glob(dir.path(), "*.txt") };
    let got: Vec<String> = all(lines::dataset(&p).unwrap()).unwrap().into_iter().map(|r| r.line).collect();
    assert_eq!(got, ["one", "two", "", "three", "zoë 🚀"]);
    // Resumed after two lines: the rest, as an uninterrupted pass gives it.
    let state = lines::state(&p, 0, 2).unwrap();
    let rest: Vec<String> = lines::dataset(&p)
        .unwrap()
        .stream_from(&Ctx::new(&Default::default()), state.position)
        .unwrap()
        .map(|r| r.unwrap().line)
        .collect();
    assert_eq!(rest, ["", "three", "zoë 🚀"]);

    // GZIP files, two at a time on two threads, batched: a batch of `str` is ragged.
    gzip(&dir.path().join("a.txt.gz"), "a1\na2\na3\n");
    gzip(&dir.path().join("b.txt.gz"), "b1\nb2\n");
    let p = line_batches::Params { files: glob(dir.path(), "*.txt.gz"), size: 2 };
    let batches: Vec<Vec<String>> = all(line_batches::dataset(&p).unwrap())
        .unwrap()
        .iter()
        .map(|b| (0..b.line.num_rows().unwrap()).map(|i| b.line.row(i)).collect())
        .collect();
    assert_eq!(batches, [vec!["a1", "b1"], vec!["a2", "b2"], vec!["a3"]]);
}

#[test]
fn a_line_that_is_not_utf8_names_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.txt"), b"fine\nalso fine\nbad \xff byte\n").unwrap();
    let err = all(lines::dataset(&lines::Params { files: glob(dir.path(), "*.txt") }).unwrap()).unwrap_err();
    assert!(err.contains("bad.txt:3"), "{err}");
    assert!(err.contains("UTF-8"), "{err}");
    let missing = lines::dataset(&lines::Params { files: glob(dir.path(), "nothing-*.txt") })
        .and_then(|d| d.stream().map(|_| ()))
        .map_err(|e| e.to_string());
    assert!(missing.unwrap_err().contains("nothing-*.txt"));
}

#[test]
fn csv_columns_by_header_name_typed_by_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    // Columns in another order than the schema, one extra, quoting per RFC 4180.
    std::fs::write(
        dir.path().join("a.csv"),
        "member,comment,score,name,age\n\
         true,plain,1.5,ada,36\n\
         false,\"a comma, and \"\"quotes\"\"\",,\"grace, hopper\",85\n\
         true,\"a line\nbreak\",2.25,bob,-4\r\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.csv"), "name,age,score,member\nzoë,0,1e-3,false\n").unwrap();
    let p = table::Params { files: glob(dir.path(), "*.csv") };
    let batches = all(table::dataset(&p).unwrap()).unwrap();
    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    let names: Vec<String> = (0..4).map(|i| b.name.row(i)).collect();
    assert_eq!(names, ["ada", "grace, hopper", "bob", "zoë"]);
    assert_eq!(b.age.as_slice(), [36, 85, -4, 0]);
    // `score = score * 2.0`; the empty score is the schema default 0.0.
    assert_eq!(b.score.as_slice(), [3.0, 0.0, 4.5, 2e-3]);
    assert_eq!(b.member.as_slice(), [true, false, true, false]);
}

#[test]
fn csv_errors_name_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let run = |text: &str| {
        std::fs::write(dir.path().join("t.csv"), text).unwrap();
        all(table::dataset(&table::Params { files: glob(dir.path(), "t.csv") }).unwrap()).map(|_| ())
    };
    let err = run("name,age,score,member\nada,36,1.5,true\nbob,old,2,false\n").unwrap_err();
    assert!(err.contains("t.csv:3") && err.contains("age") && err.contains("old"), "{err}");
    let err = run("name,age,member\nada,36,true\n").unwrap_err();
    assert!(err.contains("t.csv:1") && err.contains("score"), "{err}");
    let err = run("name,age,score,member\nada,36,1.5\n").unwrap_err();
    assert!(err.contains("t.csv:2"), "{err}");
    let err = run("name,age,score,member\nada,36,1.5,true\n\"unterminated,1,2,true\n").unwrap_err();
    assert!(err.contains("t.csv:3"), "{err}");
    // An empty value without a schema default (`name`, `member`); `score` has one.
    let err = run("name,age,score,member\nada,36,,\n").unwrap_err();
    assert!(err.contains("t.csv:2: column 4 (`member`): empty"), "{err}");
    let err = run("name,age,score,member\n,36,1.5,true\n").unwrap_err();
    assert!(err.contains("t.csv:2: column 1 (`name`): empty"), "{err}");

    // Without a header: the first columns in schema order; `;` between them.
    std::fs::write(dir.path().join("p.csv"), "1;2.5;x\n2;-0.25;\n").unwrap();
    let rows =
        all(positional::dataset(&positional::Params { files: glob(dir.path(), "p.csv") }).unwrap()).unwrap();
    let got: Vec<(i64, f64, Vec<u8>)> = rows.into_iter().map(|r| (r.a, r.b, r.note)).collect();
    assert_eq!(got, [(1, 2.5, b"x".to_vec()), (2, -0.25, b"none".to_vec())]);
}

/// `csv(..., on_error: skip)`: rows whose values do not parse are dropped and counted in
/// the parse stage's statistics with the first messages (file and line); the others come
/// through in order.
#[test]
fn csv_on_error_skip_drops_the_rows_that_do_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), "name,age\nada,36\nbob,old\n,7\ncy,12\ndee,1.5\neve,-3\n")
        .unwrap();
    let p = table_skipping::Params { files: glob(dir.path(), "t.csv") };
    let mut stream = table_skipping::dataset(&p).unwrap().stream().unwrap();
    let rows: Vec<(String, i64)> = stream.by_ref().map(|r| r.map(|r| (r.name, r.age)).unwrap()).collect();
    assert_eq!(rows, [("ada".into(), 36), ("cy".into(), 12), ("eve".into(), -3)]);
    let report = stream.report();
    let skipping: Vec<_> = report.stages.iter().filter(|s| s.skipped_errors > 0).collect();
    assert_eq!(skipping.len(), 1, "{report}");
    assert_eq!(skipping[0].skipped_errors, 3, "{report}");
    let first = &skipping[0].first_skipped;
    assert!(first[0].contains("t.csv:3") && first[0].contains("old"), "{first:?}");
    assert!(first[1].contains("t.csv:4") && first[1].contains("name"), "{first:?}");
}

/// A folder of JPEGs in class folders, as Keras' `image_dataset_from_directory` reads it.
fn jpeg_folders(root: &Path) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for (label, class) in ["cat", "dog", "zebra"].into_iter().enumerate() {
        std::fs::create_dir_all(root.join(class)).unwrap();
        for j in 0..(2 + label) {
            let (w, h) = (20 + 7 * j, 16 + 5 * label);
            let mut rgb = Vec::with_capacity(w * h * 3);
            for y in 0..h {
                for x in 0..w {
                    rgb.extend([(x * 9) as u8, (y * 11) as u8, 40 * label as u8]);
                }
            }
            let mut jpeg = Vec::new();
            jpeg_encoder::Encoder::new(&mut jpeg, 90)
                .encode(&rgb, w as u16, h as u16, jpeg_encoder::ColorType::Rgb)
                .unwrap();
            let path = root.join(class).join(format!("{j}.jpg"));
            std::fs::write(&path, jpeg).unwrap();
            out.push((path.display().to_string(), label as i64));
        }
    }
    out
}

#[test]
fn read_file_labels_each_file_by_its_sorted_folder() {
    let dir = tempfile::tempdir().unwrap();
    let expected = jpeg_folders(dir.path());
    let p = images::Params { files: glob(dir.path(), "*/*.jpg") };
    let batches = all(images::dataset(&p).unwrap()).unwrap();
    let mut got = Vec::new();
    for b in &batches {
        assert_eq!(&b.image.shape()[1..], [32, 32, 3]);
        for i in 0..b.label.as_slice().len() {
            got.push((b.path.row(i), b.label.as_slice()[i]));
        }
    }
    assert_eq!(got, expected);
    assert!(batches.iter().flat_map(|b| b.image.as_slice()).all(|v| (0.0..=1.0).contains(v)));

    // A file that is not a JPEG: the map's error names the decode; a file gone between
    // the listing and the read names the file.
    std::fs::write(dir.path().join("dog").join("9.jpg"), b"not a jpeg").unwrap();
    let err = all(images::dataset(&p).unwrap()).unwrap_err();
    assert!(err.to_lowercase().contains("jpeg"), "{err}");
    std::fs::remove_file(dir.path().join("dog").join("9.jpg")).unwrap();
}

#[test]
fn read_file_reads_each_file_whole_and_skips_what_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    for k in 0..4 {
        std::fs::write(dir.path().join(format!("f{k}")), vec![k as u8; k * 3]).unwrap();
    }
    let p = raw::Params { files: glob(dir.path(), "f*"), shuffle_seed: 3 };
    let ds = raw::dataset(&p).unwrap();
    let mut got: Vec<(String, usize)> =
        all(ds).unwrap().into_iter().map(|r| (r.path, r.contents.len())).collect();
    got.sort();
    let want: Vec<(String, usize)> = (0..4).map(|k| (glob(dir.path(), &format!("f{k}")), k * 3)).collect();
    assert_eq!(got, want);
    // A path that is listed but cannot be read whole (a folder named like a file is not
    // listed; a dangling link is): skipped and counted with `on_error: skip`.
    std::os::unix::fs::symlink(dir.path().join("gone"), dir.path().join("f9")).unwrap();
    let mut got: Vec<String> = all(raw::dataset(&p).unwrap()).unwrap().into_iter().map(|r| r.path).collect();
    got.sort();
    assert_eq!(got.len(), 4, "{got:?}");
}

#[test]
fn str_features_of_examples_are_checked_utf8_text() {
    use prost::Message;
    use sluice::example::feature::Kind;
    use sluice::example::{BytesList, Example, Feature, Features};
    let dir = tempfile::tempdir().unwrap();
    let example = |line: &[u8], lang: Option<&str>| {
        let mut feature = std::collections::BTreeMap::new();
        let bytes = |v: &[u8]| Feature { kind: Some(Kind::BytesList(BytesList { value: vec![v.to_vec()] })) };
        feature.insert("line".to_string(), bytes(line));
        if let Some(l) = lang {
            feature.insert("lang".to_string(), bytes(l.as_bytes()));
        }
        Example { features: Some(Features { feature }) }.encode_to_vec()
    };
    let write = |name: &str, records: &[Vec<u8>]| {
        let mut w =
            sluice::tfrecord::create(dir.path().join(name), sluice::tfrecord::Compression::None).unwrap();
        for r in records {
            w.write_record(r).unwrap();
        }
        w.finish().unwrap();
    };
    write(
        "a.tfrecord",
        &[example("héllo".as_bytes(), None), example(b"", Some("fr")), example(b"x", Some("de"))],
    );
    let p = example_text::Params { files: glob(dir.path(), "a.tfrecord") };
    let rows: Vec<(String, String)> = all(example_text::dataset(&p).unwrap())
        .unwrap()
        .iter()
        .flat_map(|b| {
            (0..b.line.num_rows().unwrap()).map(|i| (b.line.row(i), b.lang.row(i))).collect::<Vec<_>>()
        })
        .collect();
    let want = [("héllo", "en"), ("", "fr"), ("x", "de")].map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(rows, want);
    write("b.tfrecord", &[example(b"ok", None), example(b"bad \xc3(", None)]);
    let err =
        all(example_text::dataset(&example_text::Params { files: glob(dir.path(), "b.tfrecord") }).unwrap())
            .unwrap_err();
    assert!(err.contains("b.tfrecord") && err.contains("record 1") && err.contains("not UTF-8"), "{err}");
}
