#!/usr/bin/env python3
"""Real TensorFlow reads back what `sluice run --output` exports: `sluice gen` writes
tabular records, a `.pipe` pipeline parses them (x as a 4x4 tensor, scaled) and exports
its records to 3 shards (uncompressed, then gzip); tf.data.TFRecordDataset +
tf.io.parse_single_example of each shard, dealt back round-robin, must give the
elements of `sluice show -n all` of the same pipeline, in order, `x.shape` included.

Usage: export_check.py --sluice BIN --work DIR
Exits 1 with the first difference.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

PIPE = """
pipeline rec(files: glob) {
    schema { x: f32[4, 4], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); x = x * 2.0; }
}
"""

FEATURES = {
    "x": tf.io.FixedLenFeature([16], tf.float32),
    "x.shape": tf.io.FixedLenFeature([2], tf.int64),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "id": tf.io.FixedLenFeature([], tf.int64),
}


def sluice(a, *args):
    return subprocess.run([a.sluice, *args], check=True, capture_output=True, text=True).stdout


def tf_read(files):
    """Each shard's examples, dealt back round-robin: the pipeline's order."""
    shards = []
    for f in files:
        ds = tf.data.TFRecordDataset([f], compression_type="GZIP" if f.endswith(".gz") else "")
        shards.append([tf.io.parse_single_example(r, FEATURES) for r in ds])
    out = []
    for i in range(sum(map(len, shards))):
        ex = shards[i % len(shards)][i // len(shards)]
        out.append({
            "x": {"dtype": "f32", "shape": [int(d) for d in ex["x.shape"].numpy()],
                  "values": [float(v) for v in ex["x"].numpy()]},
            "label": int(ex["label"].numpy()),
            "id": int(ex["id"].numpy()),
        })
    return [len(s) for s in shards], out


def shown(line):
    v = json.loads(line)
    x = v["x"]
    # Floats print as the shortest f32 decimal; compare as TF's f32 widened to f64.
    vals = [float(tf.constant(float(t), tf.float32).numpy()) for t in x["values"]]
    return {"x": {"dtype": x["dtype"], "shape": x["shape"], "values": vals},
            "label": v["label"]["values"][0], "id": v["id"]["values"][0]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sluice", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    pipe = os.path.join(a.work, "export.pipe")
    with open(pipe, "w") as f:
        f.write(PIPE)
    data = os.path.join(a.work, "data")
    sluice(a, "gen", "tabular", "--records", "100", "--shards", "2", "--out", data, "--seed", "7")
    files = f"files={data}/*.tfrecord"
    want = [shown(l) for l in sluice(a, "show", pipe, "rec", "--set", files, "-n", "all").splitlines()]
    ok = True
    for compression, ext in (("none", ""), ("gzip", ".gz")):
        out = os.path.join(a.work, f"out-{compression}")
        sluice(a, "run", pipe, "rec", "--set", files, "--output", out, "--shards", "3",
               "--compression", compression, "--no-progress")
        shards = [os.path.join(out, f"rec-{k:05}-of-00003.tfrecord{ext}") for k in range(3)]
        sizes, got = tf_read(shards)
        label = f"export {compression}"
        if max(sizes) - min(sizes) > 1:
            print(f"{label}: shard sizes {sizes} differ by more than one")
            ok = False
        elif got != want:
            for i, (g, w) in enumerate(zip(got, want)):
                if g != w:
                    print(f"{label}: element {i}: TensorFlow read {g!r}, sluice show {w!r}")
                    break
            else:
                print(f"{label}: TensorFlow read {len(got)} elements, sluice show {len(want)}")
            ok = False
        else:
            print(f"{label}: TensorFlow read {len(got)} elements in shards of {sizes}, equal to sluice show")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
