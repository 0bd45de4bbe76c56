#!/usr/bin/env python3
"""The tf.data programs a user ports yield what their `.pipe` versions yield, compared
through `sluice show -n all` (one JSON line per element).

Usage: show_check.py --sluice BIN --root REPO --work DIR --program NAME

Each `.pipe` port is shown by both backends: the compiled runner's elements are compared
with tf.data's, and the engine's (`--engine interpreted`) must be the same lines, or the
engine must refuse the pipeline by name (listed on stderr).

Programs:
  range            tf.data.Dataset.range(10000).map(lambda x: x * 2)
                   vs tests/pipes/range.pipe `doubled` (n=10000)
  range_batch      tf.data.Dataset.range(-5, 20, 3).batch(4)   vs `stepped`
  parse_tensor     TFRecords TensorFlow writes with tf.io.serialize_tensor features,
                   .map(parse_single_example).map(parse_tensor(t, tf.float32)).batch(32)
                   vs tests/pipes/parse_tensor.pipe `tensors`
  interleave_auto  TFRecord files TensorFlow writes, list_files(shuffle=False)
                   .interleave(TFRecordDataset, cycle_length=AUTOTUNE).map(parse)
                   vs tests/pipes/auto_cycle.pipe `auto_tfrecords`
  text_lines       text files TensorFlow writes (UTF-8, empty lines, CRLF, no final
                   newline): TextLineDataset(files) vs tests/pipes/text.pipe `lines`;
                   GZIP files: from_tensor_slices(files).interleave(TextLineDataset(f,
                   "GZIP"), cycle_length=2).batch(3) vs `line_batches`
  csv              CSV files TensorFlow writes (quoted fields with commas, quotes and
                   line breaks; empty scores): CsvDataset(header=True, select_cols,
                   record_defaults) .map(score * 2).batch(4) vs tests/pipes/csv.pipe `table`
  ignore_errors    TFRecords TensorFlow writes with a few JPEG features that are not JPEGs:
                   TFRecordDataset.map(parse + decode_jpeg + resize(8, 8)).ignore_errors()
                   .batch(4) vs tests/pipes/on_error.pipe `jpegs` (map(on_error: skip)),
                   on 1 and 3 threads (labels exact, pixels within the IDCT tolerance)
  tokenize_pack    the lines of examples/text/corpus (2000, and a few of other
                   scripts) encoded by Python's `tokenizers` with examples/text/tokenizer.json
                   (encode(line, add_special_tokens=False) + EOS) vs tests/pipes/pack.pipe
                   `token_ids`; and those ids (BOS + ids + EOS) packed by a Python first-fit
                   loop (rows of 16, 8 open) .batch(4) vs `packed`
  jpeg_folder      JPEGs of varied sizes TensorFlow encodes in class folders:
                   list_files(shuffle=False) -> read_file -> decode_jpeg -> resize(32, 32)
                   -> / 255, labels by sorted folder name (image_dataset_from_directory)
                   .batch(8) vs tests/pipes/read_file.pipe `images` (pixels within the
                   IDCT tolerance: TF decodes with libjpeg's fast integer IDCT)
  zip              tf.data.Dataset.zip((range(10).map(x * 2), range(3, 20))) and with
                   range(40): tuples vs tests/pipes/combine.pipe `zipped`'s fields
  concatenate      range(3).concatenate(range(10, 14)), and then range(3) again
                   vs `joined` and `joined_three`
  enumerate        range(5, 10).enumerate(start=100) (and start=-2) vs `numbered`
  take_while       range(20).take_while(x < 7) (and x < 0, x < 50) vs `while_small`
  bucket_by_length TFRecords TensorFlow writes of variable-length int64 tokens (lengths
                   0 to 40): parse (VarLenFeature, to dense)
                   .bucket_by_sequence_length(len, [8, 16, 32], [8, 8, 4, 2]) vs
                   tests/pipes/bucket.pipe `bucketed`; lengths below 32 with
                   pad_to_bucket_boundary=True, drop_remainder=True, batch sizes [4, 4, 2, 1]
                   vs `bucketed_to_boundary`; padded_batch(4) with each batch's tokens
                   padded on to a multiple of 8 in numpy (tf.data has no pad_to_multiple)
                   vs `padded_to_multiple`
  window           range(n).window(size, shift, stride, drop_remainder).flat_map(lambda w:
                   w.batch(size)) for overlapping, batch-like, spaced and strided windows (and
                   an input shorter than a window, an empty one) vs tests/pipes/window.pipe
                   `windows`/`full_windows`; TFRecords TensorFlow writes, parsed, windowed
                   with each window a dict of batches (zip({k: w[k].batch(size)})) vs
                   `record_windows`/`full_record_windows`
  sequence_example tf.train.SequenceExamples TensorFlow writes (context label, weight on odd
                   records, tags of 0-2 values; feature lists frames of 3 floats a step,
                   tokens of 1 int a step and absent on some records, mask): map(
                   parse_single_sequence_example(FixedLenFeature, VarLenFeature,
                   FixedLenSequenceFeature([3]/[]/[1], allow_missing=True)) + frames * 2)
                   .padded_batch(2) vs tests/pipes/sequence.pipe `clips`, on 1 and 3 threads
  flat_map         range(1, 8).flat_map(lambda x: range(x).map(y * 10)) vs
                   tests/pipes/flat_map.pipe `ranges`; map(y * 10 + x) (the outer element
                   read inside) vs `ranges_plus` (range(n, keep: [n])) for ends 8, 1, 12;
                   range(0, 6).map(+ lengths).flat_map(range(0, n, 2).filter.map.take(4)
                   .batch(2)) vs `per_element` (lengths 10, 2, -1); TFRecords TensorFlow
                   writes (tokens of 0-6 int64s, id): flat_map(from_tensor_slices({tokens,
                   id: fill(shape(tokens), id)})).batch(5) vs `tokens`
                   (slices(tokens, keep: [id])); grids f32[4, 3] + labels [4]:
                   flat_map(from_tensor_slices({grid, labels}).enumerate()) vs `rows`
Exits 1 with the first difference.
"""
import argparse
import csv
import gzip
import io
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def show(a, pipe, pipeline, *sets):
    """The elements of `sluice show -n all` from the compiled runner; the engine
    (`--engine interpreted`) must print the same lines (sorted first when only the order
    differs: a parallel stage's order is timing's), or refuse the pipeline by name."""
    cmd = [a.sluice, "show", os.path.join(a.root, pipe), pipeline, "-n", "all"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd + ["--engine", "compiled"], check=True, capture_output=True, text=True).stdout
    engine = subprocess.run(cmd + ["--engine", "interpreted"], capture_output=True, text=True)
    if engine.returncode != 0:
        if "the engine does not run" not in engine.stderr:
            raise SystemExit(f"{pipe}:{pipeline}: the engine fails where the compiled runner runs:\n{engine.stderr}")
        print(f"{pipe}:{pipeline}: {engine.stderr.strip().splitlines()[-1]}", file=sys.stderr)
    elif engine.stdout != out and sorted(engine.stdout.splitlines()) != sorted(out.splitlines()):
        raise SystemExit(f"{pipe}:{pipeline}: the engine's elements differ from the compiled runner's")
    return [json.loads(line) for line in out.splitlines()]


def values(field):
    return field["values"]


def compare(label, got, want):
    if got == want:
        print(f"{label}: {len(want)} elements equal")
        return True
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            print(f"{label}: element {i}: sluice {g!r}, tf.data {w!r}")
            return False
    print(f"{label}: sluice yields {len(got)} elements, tf.data {len(want)}")
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--program", required=True, choices=["range", "range_batch", "parse_tensor", "interleave_auto", "text_lines", "csv", "jpeg_folder", "ignore_errors", "zip", "concatenate", "enumerate", "take_while", "tokenize_pack", "bucket_by_length", "window", "sequence_example", "flat_map"],)
    a = ap.parse_args()

    if a.program == "range":
        want = [int(x) for x in tf.data.Dataset.range(10000).map(lambda x: x * 2).as_numpy_iterator()]
        got = [values(e["value"])[0] for e in show(a, "tests/pipes/range.pipe", "doubled", "n=10000")]
        ok = compare("range(10000).map(x * 2)", got, want)
    elif a.program == "range_batch":
        want = [[int(v) for v in b] for b in tf.data.Dataset.range(-5, 20, 3).batch(4).as_numpy_iterator()]
        got = [values(e["value"]) for e in show(a, "tests/pipes/range.pipe", "stepped", "step=3")]
        ok = compare("range(-5, 20, 3).batch(4)", got, want)
    elif a.program == "parse_tensor":
        os.makedirs(a.work, exist_ok=True)
        path = os.path.join(a.work, "tensors.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for i in range(70):
                t = tf.reshape(tf.range(6, dtype=tf.float32) * 0.25 + i, [2, 3])
                feature = {
                    "t": tf.train.Feature(bytes_list=tf.train.BytesList(value=[tf.io.serialize_tensor(t).numpy()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        spec = {"t": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
        ds = (
            tf.data.TFRecordDataset(path)
            .map(lambda s: tf.io.parse_single_example(s, spec))
            .map(lambda e: {"t": tf.ensure_shape(tf.io.parse_tensor(e["t"], tf.float32), [2, 3]), "label": e["label"]})
            .batch(32)
        )
        want = [
            (list(b["t"].shape), [float(v) for v in b["t"].reshape(-1)], [int(v) for v in b["label"]])
            for b in ds.as_numpy_iterator()
        ]
        got = [
            (e["t"]["shape"], values(e["t"]), values(e["label"]))
            for e in show(a, "tests/pipes/parse_tensor.pipe", "tensors", f"files={path}")
        ]
        ok = compare("parse_tensor(t, f32, [2, 3]) + batch(32)", got, want)
    elif a.program == "text_lines":
        ok = text_lines(a)
    elif a.program == "csv":
        ok = csv_program(a)
    elif a.program == "jpeg_folder":
        ok = jpeg_folder(a)
    elif a.program == "ignore_errors":
        ok = ignore_errors(a)
    elif a.program in ("zip", "concatenate", "enumerate", "take_while"):
        ok = combine_program(a)
    elif a.program == "tokenize_pack":
        ok = tokenize_pack(a)
    elif a.program == "bucket_by_length":
        ok = bucket_by_length(a)
    elif a.program == "window":
        ok = window_program(a)
    elif a.program == "sequence_example":
        ok = sequence_example(a)
    elif a.program == "flat_map":
        ok = flat_map_program(a)
    else:
        os.makedirs(a.work, exist_ok=True)
        for k, n in [(0, 5), (1, 9), (2, 3), (3, 4), (4, 6)]:
            with tf.io.TFRecordWriter(os.path.join(a.work, f"part-{k}.tfrecord")) as w:
                for i in range(n):
                    feature = {
                        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i + 0.5 * j for j in range(16)])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[k])),
                    }
                    w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        spec = {"x": tf.io.FixedLenFeature([16], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}
        pattern = os.path.join(a.work, "part-*.tfrecord")
        ds = (
            tf.data.Dataset.list_files(pattern, shuffle=False)
            .interleave(tf.data.TFRecordDataset, cycle_length=tf.data.AUTOTUNE)
            .map(lambda s: tf.io.parse_single_example(s, spec))
        )
        want = [(int(e["label"]), [float(v) for v in e["x"]]) for e in ds.as_numpy_iterator()]
        got = [
            (values(e["label"])[0], values(e["x"]))
            for e in show(a, "tests/pipes/auto_cycle.pipe", "auto_tfrecords", f"files={pattern}")
        ]
        ok = compare("interleave(cycle_length=AUTOTUNE)", got, want)
    sys.exit(0 if ok else 1)


def first_fit(seqs, length, window):
    """The packing of the runtime's `pack` (runtime/src/stage/pack.rs), written again:
    first fit over `window` open rows, rows out in the order they were opened."""
    open_rows, out = [], []

    def close(row):
        ids, seg, pos = row
        pad = length - len(ids)
        out.append((ids + [0] * pad, seg + [0] * pad, pos + [0] * pad))

    for seq in seqs:
        for start in range(0, len(seq), length):
            chunk = seq[start:start + length]
            row = next((r for r in open_rows if length - len(r[0]) >= len(chunk)), None)
            if row is None:
                if len(open_rows) == window:
                    close(open_rows.pop(0))
                row = ([], [], [])
                open_rows.append(row)
            doc = (max(row[1]) if row[1] else 0) + 1
            row[0].extend(chunk)
            row[1].extend([doc] * len(chunk))
            row[2].extend(range(len(chunk)))
            while open_rows and len(open_rows[0][0]) == length:
                close(open_rows.pop(0))
    for row in open_rows:
        close(row)
    return out


def sequence_example(a):
    os.makedirs(a.work, exist_ok=True)
    path = os.path.join(a.work, "clips.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(25):
            se = tf.train.SequenceExample()
            se.context.feature["label"].int64_list.value.append(i)
            se.context.feature["tags"].int64_list.value.extend(range(i % 3))
            if i % 2 == 1:
                se.context.feature["weight"].float_list.value.append(0.25 * i)
            for s in range(i % 4):
                se.feature_lists.feature_list["frames"].feature.add().float_list.value.extend([i, s, 0.5])
                se.feature_lists.feature_list["mask"].feature.add().int64_list.value.append(s % 2)
            if i % 5 != 0:
                for t in range(i % 5):
                    se.feature_lists.feature_list["tokens"].feature.add().int64_list.value.append(100 * i + t)
            se.feature_lists.feature_list["unused"].feature.add().float_list.value.append(1.0)
            w.write(se.SerializeToString())
    context = {
        "label": tf.io.FixedLenFeature([], tf.int64),
        "weight": tf.io.FixedLenFeature([], tf.float32, default_value=1.0),
        "tags": tf.io.VarLenFeature(tf.int64),
    }
    # Sluice's feature lists are TF's with allow_missing=True: a missing list has no steps.
    lists = {
        "frames": tf.io.FixedLenSequenceFeature([3], tf.float32, allow_missing=True),
        "tokens": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
        "mask": tf.io.FixedLenSequenceFeature([1], tf.int64, allow_missing=True),
    }

    def parse(s):
        c, l = tf.io.parse_single_sequence_example(s, context_features=context, sequence_features=lists)
        return {
            "label": c["label"],
            "weight": c["weight"],
            "tags": tf.sparse.to_dense(c["tags"]),
            "frames": l["frames"] * 2.0,
            "tokens": l["tokens"],
            "mask": l["mask"],
        }

    names = ["label", "weight", "tags", "frames", "tokens", "mask"]
    ds = tf.data.TFRecordDataset(path).map(parse).padded_batch(2)
    want = [
        [(list(b[k].shape), [float(v) for v in b[k].reshape(-1)]) for k in names] for b in ds.as_numpy_iterator()
    ]
    ok = True
    for par in (1, 3):
        elements = show(a, "tests/pipes/sequence.pipe", "clips", f"files={path}", f"par={par}")
        got = [[(e[k]["shape"], [float(v) for v in values(e[k])]) for k in names] for e in elements]
        ok = compare(f"parse_single_sequence_example + padded_batch(2), parallel {par}", got, want) and ok
    return ok


def tokenize_pack(a):
    from tokenizers import Tokenizer

    os.makedirs(a.work, exist_ok=True)
    tok_path = os.path.join(a.root, "examples/text/tokenizer.json")
    tok = Tokenizer.from_file(tok_path)
    with open(os.path.join(a.root, "examples/text/corpus/jargon.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")[:2000]
    lines += ["zoë 🚀 naïve café", "Ελληνικά and 日本語", "", "   spaces   ", "tab\there"]
    path = os.path.join(a.work, "lines.txt")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    ids = [e.ids for e in tok.encode_batch(lines, add_special_tokens=False)]
    want = [i + [eos] for i in ids]
    sets = [f"files={path}", f"tokenizer={tok_path}"]
    got = [values(e["ids"]) for e in show(a, "tests/pipes/pack.pipe", "token_ids", *sets)]
    ok = compare(f"tokenizers encode + EOS ({len(lines)} lines)", got, want)
    rows = first_fit([[bos] + i + [eos] for i in ids], 16, 8)
    want = []
    for b in range(0, len(rows), 4):
        batch = rows[b:b + 4]
        want.append(tuple(sum((r[k] for r in batch), []) for k in range(3)))
    got = [
        (values(e["ids"]), values(e["segment_ids"]), values(e["positions"]))
        for e in show(a, "tests/pipes/pack.pipe", "packed", *sets)
    ]
    return compare("first-fit packing (16, window 8) + batch(4)", got, want) and ok


def bucket_by_length(a):
    import numpy as np

    os.makedirs(a.work, exist_ok=True)

    def write(name, lengths):
        path = os.path.join(a.work, name)
        with tf.io.TFRecordWriter(path) as w:
            for i, n in enumerate(lengths):
                feature = {
                    "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=[1000 * i + t + 1 for t in range(n)])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[n - 1])),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        return path

    spec = {"tokens": tf.io.VarLenFeature(tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parsed(path):
        def parse(s):
            e = tf.io.parse_single_example(s, spec)
            return {"tokens": tf.sparse.to_dense(e["tokens"]), "label": e["label"]}

        return tf.data.TFRecordDataset(path).map(parse)

    def batches(ds):
        return [
            (list(b["tokens"].shape), [int(v) for v in b["tokens"].reshape(-1)], [int(v) for v in b["label"]])
            for b in ds.as_numpy_iterator()
        ]

    def ours(pipeline, path):
        return [
            (e["tokens"]["shape"], values(e["tokens"]), values(e["label"]))
            for e in show(a, "tests/pipes/bucket.pipe", pipeline, f"files={path}")
        ]

    # Lengths 0 to 40: every bucket, the last one (32 up) too.
    long = write("long.tfrecord", [(i * 13 + i * i // 7) % 41 for i in range(500)])
    ds = parsed(long).bucket_by_sequence_length(lambda e: tf.shape(e["tokens"])[0], [8, 16, 32], [8, 8, 4, 2])
    ok = compare("bucket_by_sequence_length([8, 16, 32], [8, 8, 4, 2])", ours("bucketed", long), batches(ds))
    # Lengths 0 to 31 (pad_to_bucket_boundary refuses the last bucket), the length a field.
    short = write("short.tfrecord", [(i * 7 + i * i // 5) % 32 for i in range(301)])
    ds = parsed(short).bucket_by_sequence_length(
        lambda e: tf.cast(e["label"] + 1, tf.int32), [8, 16, 32], [4, 4, 2, 1], pad_to_bucket_boundary=True, drop_remainder=True
    )
    want = [(s, t, l) for s, t, l in batches(ds)]
    got = [(s, t, l) for s, t, l in ours("bucketed_to_boundary", short)]
    ok = compare("pad_to_bucket_boundary=True, drop_remainder=True", got, want) and ok
    want = []
    for b in parsed(long).padded_batch(4).as_numpy_iterator():
        t = b["tokens"]
        width = -(-t.shape[1] // 8) * 8
        t = np.pad(t, [(0, 0), (0, width - t.shape[1])])
        want.append((list(t.shape), [int(v) for v in t.reshape(-1)], [int(v) for v in b["label"]]))
    got = ours("padded_to_multiple", long)
    return compare("padded_batch(4) padded to a multiple of 8", got, want) and ok


def text_lines(a):
    os.makedirs(a.work, exist_ok=True)
    texts = [
        "first line\nsecond line\n\nafter an empty line\n",
        "windows\r\nline endings\r\n",
        "unicode: é, ß, 日本語, 🚀\ntabs\tand \"quotes\"\nno final newline",
        "",
        "one\n",
    ]
    plain, gz = [], []
    for k, text in enumerate(texts):
        path = os.path.join(a.work, f"part-{k}.txt")
        tf.io.write_file(path, text)
        plain.append(path)
        gpath = os.path.join(a.work, f"part-{k}.txt.gz")
        # TensorFlow has no GZIP text writer: Python's gzip writes the same RFC 1952 stream.
        with gzip.open(gpath, "wb") as f:
            f.write(text.encode("utf-8"))
        gz.append(gpath)
    want = [x.decode("utf-8") for x in tf.data.TextLineDataset(plain).as_numpy_iterator()]
    got = [e["line"] for e in show(a, "tests/pipes/text.pipe", "lines", f"files={os.path.join(a.work, '*.txt')}")]
    ok = compare("TextLineDataset(files)", got, want)
    ds = (
        tf.data.Dataset.from_tensor_slices(gz)
        .interleave(lambda f: tf.data.TextLineDataset(f, compression_type="GZIP"), cycle_length=2, block_length=1)
        .batch(3)
    )
    want = [[x.decode("utf-8") for x in b] for b in ds.as_numpy_iterator()]
    got = [e["line"] for e in show(a, "tests/pipes/text.pipe", "line_batches", f"files={os.path.join(a.work, '*.txt.gz')}")]
    return compare("interleave(TextLineDataset(GZIP), cycle_length=2).batch(3)", got, want) and ok


def csv_program(a):
    import numpy as np

    os.makedirs(a.work, exist_ok=True)
    rows = [
        ["ada", "36", "1.5", "true", "plain"],
        ["grace, hopper", "85", "", "false", "a comma in the name, an empty score"],
        ['bob "the builder"', "-4", "2.25", "true", 'quotes ""inside"" and a\nline break'],
        ["zoë", "0", "1e-3", "false", ""],
        ["eve", "7", "-0.5", "true", ""],
    ]
    paths = []
    for k in range(2):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\r\n" if k else "\n")
        w.writerow(["name", "age", "score", "member", "comment"])
        for r in rows[3:] if k else rows[:3]:
            w.writerow(r)
        path = os.path.join(a.work, f"part-{k}.csv")
        tf.io.write_file(path, buf.getvalue())
        paths.append(path)
    ds = tf.data.experimental.CsvDataset(
        paths,
        record_defaults=[tf.string, tf.int64, tf.constant(0.0, tf.float32), tf.string],
        header=True,
        select_cols=[0, 1, 2, 3],
    ).map(lambda n, g, s, m: {"name": n, "age": g, "score": s * 2.0, "member": tf.equal(m, "true")}).batch(4)
    want = [
        (
            [x.decode("utf-8") for x in b["name"]],
            [int(x) for x in b["age"]],
            [float(x) for x in b["score"]],
            [bool(x) for x in b["member"]],
        )
        for b in ds.as_numpy_iterator()
    ]
    got = [
        # `sluice show` prints an f32 in the fewest digits that read back to it.
        (e["name"], values(e["age"]), [float(np.float32(v)) for v in values(e["score"])], values(e["member"]))
        for e in show(a, "tests/pipes/csv.pipe", "table", f"files={os.path.join(a.work, '*.csv')}")
    ]
    return compare("CsvDataset(header=True).map(score * 2).batch(4)", got, want)


def jpeg_folder(a):
    import numpy as np

    os.makedirs(a.work, exist_ok=True)
    sizes = [(40, 52), (64, 48), (100, 75), (33, 33), (80, 120), (32, 32), (57, 91)]
    n = 0
    for c, cls in enumerate(["cat", "dog", "zebra"]):
        os.makedirs(os.path.join(a.work, cls), exist_ok=True)
        for j in range(5 + c):
            h, w = sizes[(n + j) % len(sizes)]
            y, x = np.mgrid[0:h, 0:w]
            img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y + 40 * c) % 256], -1)
            data = tf.io.encode_jpeg(tf.constant(img.astype(np.uint8)), quality=95)
            tf.io.write_file(os.path.join(a.work, cls, f"img-{j:02}.jpg"), data)
        n += 5 + c
    pattern = os.path.join(a.work, "*", "*.jpg")
    classes = sorted({os.path.basename(os.path.dirname(p)) for p in tf.io.gfile.glob(pattern)})

    def load(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        image = tf.image.resize(image, [32, 32]) / 255.0
        parent = tf.strings.split(path, os.sep)[-2]
        label = tf.argmax(tf.cast(tf.equal(tf.constant(classes), parent), tf.int64))
        return {"image": image, "label": label, "path": path}

    ds = tf.data.Dataset.list_files(pattern, shuffle=False).map(load).batch(8)
    want = list(ds.as_numpy_iterator())
    got = show(a, "tests/pipes/read_file.pipe", "images", f"files={pattern}")
    if len(got) != len(want):
        print(f"jpeg_folder: sluice yields {len(got)} batches, tf.data {len(want)}")
        return False
    worst, total, count = 0.0, 0.0, 0
    for i, (g, w) in enumerate(zip(got, want)):
        labels, paths = [int(x) for x in w["label"]], [x.decode("utf-8") for x in w["path"]]
        if values(g["label"]) != labels or g["path"] != paths:
            print(f"jpeg_folder: batch {i}: sluice {values(g['label'])} {g['path']}, tf.data {labels} {paths}")
            return False
        if g["image"]["shape"] != list(w["image"].shape):
            print(f"jpeg_folder: batch {i}: sluice shape {g['image']['shape']}, tf.data {list(w['image'].shape)}")
            return False
        d = np.abs(np.array(values(g["image"]), np.float64) - w["image"].reshape(-1))
        worst, total, count = max(worst, float(d.max())), total + float(d.sum()), count + d.size
    mean = total / count
    # TF decodes with libjpeg's fast integer IDCT, Sluice exactly: a few levels per pixel
    # (the same bound as `ignore_errors`: max 14, mean 3 levels of 255).
    ok = worst <= 14 / 255 and mean <= 3 / 255
    print(f"jpeg_folder: {len(want)} batches, labels and paths equal, pixels max |diff| {worst * 255:.2f}/255, mean {mean * 255:.3f}/255")
    return ok


def ignore_errors(a):
    import numpy as np

    os.makedirs(a.work, exist_ok=True)
    path = os.path.join(a.work, "images.tfrecord")
    bad = {3: b"not a jpeg", 4: b"", 9: b"\xff\xd8\xff garbage after a JPEG marker", 14: b"GIF89a"}
    with tf.io.TFRecordWriter(path) as w:
        for i in range(17):
            h, wd = 10 + i, 12 + 2 * i
            y, x = np.mgrid[0:h, 0:wd]
            img = np.stack([x * 255 // (wd - 1), y * 255 // (h - 1), np.full_like(x, 9 * i)], -1).astype(np.uint8)
            data = bad.get(i, tf.io.encode_jpeg(tf.constant(img), quality=95).numpy())
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def load(s):
        e = tf.io.parse_single_example(s, spec)
        image = tf.image.resize(tf.io.decode_jpeg(e["image"], channels=3), [8, 8])
        return {"image": image, "label": e["label"]}

    ds = tf.data.TFRecordDataset(path).map(load).ignore_errors().batch(4)
    want = list(ds.as_numpy_iterator())
    ok = True
    for par in (1, 3):
        got = show(a, "tests/pipes/on_error.pipe", "jpegs", f"files={path}", f"par={par}")
        labels = [values(g["label"]) for g in got]
        want_labels = [[int(x) for x in w["label"]] for w in want]
        if labels != want_labels:
            print(f"ignore_errors (parallel {par}): labels sluice {labels}, tf.data {want_labels}")
            return False
        diffs = np.concatenate(
            [np.abs(np.array(values(g["image"]), np.float64) - w["image"].reshape(-1)) for g, w in zip(got, want)]
        )
        worst, mean = float(diffs.max()), float(diffs.mean())
        # TF decodes with libjpeg's fast integer IDCT, Sluice exactly: a few levels per pixel
        # (the jpeg benchmark's documented tolerance, 0.25 of a normalised unit, is ~14 levels).
        ok = ok and worst <= 14 and mean <= 3
        print(
            f"ignore_errors (parallel {par}): {len(want)} batches, labels equal, "
            f"pixels max |diff| {worst:.2f}, mean {mean:.3f} (of 255)"
        )
    return ok


def combine_program(a):
    """The combining stages on `range` sources: tf.data's tuples against the fields of
    tests/pipes/combine.pipe's pipelines."""
    pipe = "tests/pipes/combine.pipe"
    R = tf.data.Dataset.range
    scalar = lambda e, f: values(e[f])[0]  # noqa: E731
    ok = True
    if a.program == "zip":
        for n in (10, 40):
            want = [(int(x), int(y)) for x, y in tf.data.Dataset.zip((R(n).map(lambda x: x * 2), R(3, 20))).as_numpy_iterator()]
            got = [(scalar(e, "twice"), scalar(e, "value")) for e in show(a, pipe, "zipped", f"evens.n={n}")]
            ok &= compare(f"zip((range({n}).map(x * 2), range(3, 20)))", got, want)
    elif a.program == "concatenate":
        want = [int(x) for x in R(3).concatenate(R(10, 14)).as_numpy_iterator()]
        got = [scalar(e, "value") for e in show(a, pipe, "joined")]
        ok &= compare("range(3).concatenate(range(10, 14))", got, want)
        want = [int(x) for x in R(3).concatenate(R(10, 14)).concatenate(R(3)).as_numpy_iterator()]
        got = [scalar(e, "value") for e in show(a, pipe, "joined_three")]
        ok &= compare("range(3).concatenate(range(10, 14)).concatenate(range(3))", got, want)
    elif a.program == "enumerate":
        for start in (100, -2):
            want = [(int(i), int(x)) for i, x in R(5, 10).enumerate(start=start).as_numpy_iterator()]
            got = [(scalar(e, "index"), scalar(e, "value")) for e in show(a, pipe, "numbered", f"start={start}")]
            ok &= compare(f"range(5, 10).enumerate(start={start})", got, want)
    else:
        for limit in (7, 0, 50):
            want = [int(x) for x in R(20).take_while(lambda x: x < limit).as_numpy_iterator()]
            got = [scalar(e, "value") for e in show(a, pipe, "while_small", f"limit={limit}")]
            ok &= compare(f"range(20).take_while(x < {limit})", got, want)
    return ok


# (size, shift, stride) of the window programs: overlaps, batches, gaps, strides.
WINDOW_CASES = [(3, 1, 1), (3, 3, 1), (2, 4, 1), (3, 2, 2), (4, 5, 3), (5, 1, 1), (4, 2, 3)]


def window_program(a):
    """tf.data's window + batch of each window against tests/pipes/window.pipe."""
    pipe = "tests/pipes/window.pipe"
    ok = True
    for n in (10, 3, 0):
        for size, shift, stride in WINDOW_CASES:
            for drop in (False, True):
                ds = tf.data.Dataset.range(n).window(size, shift, stride, drop).flat_map(lambda w: w.batch(size))
                want = [[int(v) for v in b] for b in ds.as_numpy_iterator()]
                sets = [f"n={n}", f"size={size}", f"shift={shift}", f"stride={stride}"]
                got = [values(e["value"]) for e in show(a, pipe, "full_windows" if drop else "windows", *sets)]
                ok &= compare(f"range({n}).window({size}, {shift}, {stride}, {drop})", got, want)
    os.makedirs(a.work, exist_ok=True)
    for k, count in [(0, 7), (1, 5)]:
        with tf.io.TFRecordWriter(os.path.join(a.work, f"part-{k}.tfrecord")) as w:
            for i in range(count):
                feature = {
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[10 * k + i + 0.25, -0.5 * i])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[100 * k + i])),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    spec = {"x": tf.io.FixedLenFeature([2], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}
    files = sorted(os.path.join(a.work, f) for f in os.listdir(a.work) if f.endswith(".tfrecord"))
    pattern = os.path.join(a.work, "part-*.tfrecord")
    for size, shift, stride in WINDOW_CASES:
        for drop in (False, True):
            ds = (
                tf.data.TFRecordDataset(files)
                .map(lambda s: tf.io.parse_single_example(s, spec))
                .window(size, shift, stride, drop)
                .flat_map(lambda w: tf.data.Dataset.zip({k: w[k].batch(size) for k in w}))
            )
            want = [([int(v) for v in b["label"]], [float(v) for v in b["x"].reshape(-1)]) for b in ds.as_numpy_iterator()]
            sets = [f"files={pattern}", f"size={size}", f"shift={shift}", f"stride={stride}"]
            pipeline = "full_record_windows" if drop else "record_windows"
            got = [(values(e["label"]), values(e["x"])) for e in show(a, pipe, pipeline, *sets)]
            ok &= compare(f"TFRecords .window({size}, {shift}, {stride}, {drop})", got, want)
    return ok


def flat_map_program(a):
    """tf.data's flat_map over ranges and tensor slices against tests/pipes/flat_map.pipe."""
    pipe = "tests/pipes/flat_map.pipe"
    R = tf.data.Dataset.range
    ints = lambda t: [int(v) for v in t.reshape(-1)]  # noqa: E731
    ok = True
    want = [int(v) for v in R(1, 8).flat_map(lambda x: R(x).map(lambda y: y * 10)).as_numpy_iterator()]
    got = [values(e["value"])[0] for e in show(a, pipe, "ranges")]
    ok &= compare("range(1, 8).flat_map(range(x).map(y * 10))", got, want)
    for end in (8, 1, 12):
        ds = R(1, end).flat_map(lambda x: R(x).map(lambda y: y * 10 + x))
        want = [int(v) for v in ds.as_numpy_iterator()]
        got = [(sorted(e), values(e["value"])[0]) for e in show(a, pipe, "ranges_plus", f"end={end}")]
        ok &= compare(f"range(1, {end}).flat_map(range(x).map(y * 10 + x))", got, [(["value"], v) for v in want])
    for lengths in (10, 2, -1):
        ds = (
            R(0, 6)
            .map(lambda v: v + lengths)
            .flat_map(lambda n: R(0, n, 2).filter(lambda v: v % 3 != 0).map(lambda v: v + 1).take(4).batch(2))
        )
        want = [ints(b) for b in ds.as_numpy_iterator()]
        got = [values(e["value"]) for e in show(a, pipe, "per_element", f"lengths={lengths}")]
        ok &= compare(f"flat_map(range(0, n, 2).filter.map.take(4).batch(2)), lengths={lengths}", got, want)

    os.makedirs(a.work, exist_ok=True)
    tokens_dir = os.path.join(a.work, "tokens")
    os.makedirs(tokens_dir, exist_ok=True)
    for k, count in [(0, 23), (1, 17)]:
        with tf.io.TFRecordWriter(os.path.join(tokens_dir, f"part-{k}.tfrecord")) as w:
            for i in range(count):
                n = (i * 5 + k * 3 + i * i // 3) % 7  # 0 to 6 tokens
                feature = {
                    "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=[1000 * k + 10 * i + t - 3 for t in range(n)])),
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[100 * k + i])),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    files = sorted(os.path.join(tokens_dir, f) for f in os.listdir(tokens_dir))
    spec = {"tokens": tf.io.VarLenFeature(tf.int64), "id": tf.io.FixedLenFeature([], tf.int64)}

    def parse(s):
        e = tf.io.parse_single_example(s, spec)
        return {"tokens": tf.sparse.to_dense(e["tokens"]), "id": e["id"]}

    ds = (
        tf.data.TFRecordDataset(files)
        .map(parse)
        .flat_map(
            lambda e: tf.data.Dataset.from_tensor_slices(
                {"tokens": e["tokens"], "id": tf.fill(tf.shape(e["tokens"]), e["id"])}
            )
        )
        .batch(5)
    )
    want = [(ints(b["tokens"]), ints(b["id"])) for b in ds.as_numpy_iterator()]
    pattern = os.path.join(tokens_dir, "part-*.tfrecord")
    got = [(values(e["tokens"]), values(e["id"])) for e in show(a, pipe, "tokens", f"files={pattern}")]
    ok &= compare("flat_map(from_tensor_slices({tokens, id})).batch(5)", got, want)

    grid_path = os.path.join(a.work, "grids.tfrecord")
    with tf.io.TFRecordWriter(grid_path) as w:
        for i in range(9):
            feature = {
                "grid": tf.train.Feature(float_list=tf.train.FloatList(value=[i + 0.25 * j - 1.5 for j in range(12)])),
                "labels": tf.train.Feature(int64_list=tf.train.Int64List(value=[10 * i + r for r in range(4)])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    spec = {"grid": tf.io.FixedLenFeature([4, 3], tf.float32), "labels": tf.io.FixedLenFeature([4], tf.int64)}
    ds = (
        tf.data.TFRecordDataset(grid_path)
        .map(lambda s: tf.io.parse_single_example(s, spec))
        .flat_map(lambda e: tf.data.Dataset.from_tensor_slices({"grid": e["grid"], "labels": e["labels"]}).enumerate())
    )
    want = [(int(i), [float(v) for v in r["grid"]], int(r["labels"])) for i, r in ds.as_numpy_iterator()]
    got = [
        (values(e["index"])[0], values(e["grid"]), values(e["labels"])[0])
        for e in show(a, pipe, "rows", f"files={grid_path}")
    ]
    ok &= compare("flat_map(from_tensor_slices({grid, labels}).enumerate())", got, want)
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
