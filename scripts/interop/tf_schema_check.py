#!/usr/bin/env python3
"""Check with REAL TensorFlow that the shards of one benchmark dataset parse with the
real schema and hold what the schema promises.

Usage:
    python scripts/interop/tf_schema_check.py --kind tabular|image|jpeg --records N FILE...

FILE... are all the shards of ONE dataset, in shard order (as written by `sluice gen`
or by bench/make_data.py). Compression comes from the extension (.gz -> GZIP,
.zlib -> ZLIB, else none).

Every record is parsed with tf.io.parse_single_example (TF's C++ parser, the one
tf.data pipelines use) with the real schema:
    tabular: x FixedLenFeature([16], float32), label/id FixedLenFeature([], int64)
    image:   image FixedLenFeature([], string), label/id FixedLenFeature([], int64)
    jpeg:    image FixedLenFeature([], string), label/id FixedLenFeature([], int64)
and then checked:
  * each record holds exactly those features (protobuf parse, no extra keys),
  * the ids over all shards are exactly 0..N-1, each once; every shard holds an
    ascending contiguous id range and the shards follow each other in order,
  * labels are in 0..9,
  * tabular: label == argmax(x[0:10]) (first maximum, as numpy.argmax),
  * image: the image bytes are 64*64*3 = 12288 long,
  * jpeg: tf.io.decode_jpeg(image, channels=3) has shape [128, 128, 3].
Prints one OK line on success; on failure prints FAIL with the file and record
index of the first problem on stderr and exits 1.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


class CheckFailed(Exception):
    pass


def compression_for(path):
    if path.endswith(".gz"):
        return "GZIP"
    if path.endswith(".zlib"):
        return "ZLIB"
    return ""


def tf_error_text(e):
    text = (str(e).splitlines() or [""])[0].split("}} ")[-1]
    return text.strip()


def run(args):
    import numpy as np
    import tensorflow as tf

    if args.kind == "tabular":
        spec = {"x": tf.io.FixedLenFeature([16], tf.float32)}
    else:
        spec = {"image": tf.io.FixedLenFeature([], tf.string)}
    spec["label"] = tf.io.FixedLenFeature([], tf.int64)
    spec["id"] = tf.io.FixedLenFeature([], tf.int64)
    want_keys = sorted(spec)

    def parse(raw):
        out = tf.io.parse_single_example(raw, spec)
        res = {"raw": raw, "label": out["label"], "id": out["id"]}
        if args.kind == "tabular":
            res["x"] = out["x"]
        elif args.kind == "image":
            res["image_len"] = tf.strings.length(out["image"])
        else:
            res["jpeg_shape"] = tf.shape(tf.io.decode_jpeg(out["image"], channels=3))
        return res

    next_id = 0
    n = 0
    labels_seen = set()
    for path in args.files:
        if not os.path.isfile(path):
            raise CheckFailed("no such file: %s" % path)
        ds = tf.data.TFRecordDataset([path], compression_type=compression_for(path)).map(parse)
        it = iter(ds)
        idx = 0
        first_id = None
        while True:
            try:
                r = next(it)
            except StopIteration:
                break
            except tf.errors.OpError as e:
                raise CheckFailed("%s record %d: TensorFlow failed to read/parse/decode: %s" % (
                    path, idx, tf_error_text(e)))
            where = "%s record %d" % (path, idx)
            keys = sorted(tf.train.Example.FromString(r["raw"].numpy()).features.feature.keys())
            if keys != want_keys:
                raise CheckFailed("%s: features %s, expected exactly %s" % (where, keys, want_keys))
            rid = int(r["id"].numpy())
            label = int(r["label"].numpy())
            if first_id is None:
                first_id = rid
            if rid != next_id:
                raise CheckFailed("%s: id %d, expected %d (ids must run 0..%d contiguously over the "
                                  "shards in order)" % (where, rid, next_id, args.records - 1))
            next_id += 1
            if not 0 <= label <= 9:
                raise CheckFailed("%s (id %d): label %d not in 0..9" % (where, rid, label))
            labels_seen.add(label)
            if args.kind == "tabular":
                x = r["x"].numpy()
                am = int(np.argmax(x[:10]))
                if am != label:
                    raise CheckFailed("%s (id %d): label %d != argmax(x[:10]) = %d (x[:10] = %s)" % (
                        where, rid, label, am, x[:10].tolist()))
            elif args.kind == "image":
                ln = int(r["image_len"].numpy())
                if ln != 64 * 64 * 3:
                    raise CheckFailed("%s (id %d): image is %d bytes, expected 12288" % (where, rid, ln))
            else:
                shape = r["jpeg_shape"].numpy().tolist()
                if shape != [128, 128, 3]:
                    raise CheckFailed("%s (id %d): decode_jpeg shape %s, expected [128, 128, 3]" % (
                        where, rid, shape))
            idx += 1
            n += 1
        if idx == 0:
            raise CheckFailed("%s: no records" % path)
    if n != args.records:
        raise CheckFailed("%d records over %d files, expected %d" % (n, len(args.files), args.records))
    extra = {
        "tabular": "label == argmax(x[:10])",
        "image": "image 12288 bytes",
        "jpeg": "decode_jpeg -> [128,128,3]",
    }[args.kind]
    return ("OK: %s schema: %d files, %d records: ids 0..%d once, contiguous per shard; "
            "labels in 0..9 (%d distinct); %s; TF %s") % (
        args.kind, len(args.files), n, n - 1, len(labels_seen), extra, tf.__version__)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", required=True, choices=["tabular", "image", "jpeg"])
    ap.add_argument("--records", required=True, type=int, help="expected total records N")
    ap.add_argument("files", nargs="+", metavar="FILE", help="the shards of one dataset, in order")
    args = ap.parse_args(argv)
    try:
        print(run(args))
        return 0
    except CheckFailed as e:
        print("FAIL: %s schema: %s" % (args.kind, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
