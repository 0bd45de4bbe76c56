#!/usr/bin/env python3
"""The tf.data programs a user ports yield what their `.pipe` versions yield, compared
through `sluice show -n all` (one JSON line per element).

Usage: show_check.py --sluice BIN --root REPO --work DIR --program NAME

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
Exits 1 with the first difference.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def show(a, pipe, pipeline, *sets):
    cmd = [a.sluice, "show", os.path.join(a.root, pipe), pipeline, "-n", "all"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
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
    ap.add_argument("--program", required=True, choices=["range", "range_batch", "parse_tensor", "interleave_auto"])
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


if __name__ == "__main__":
    main()
