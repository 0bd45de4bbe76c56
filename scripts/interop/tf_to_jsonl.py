#!/usr/bin/env python3
"""Print TFRecord files the way REAL TensorFlow + protobuf see them: one JSON line per
record, json_format.MessageToJson(msg, indent=None, sort_keys=True).

Usage:
    python scripts/interop/tf_to_jsonl.py FILE [--sequence]                 (to stdout)
    python scripts/interop/tf_to_jsonl.py --out-dir DIR FILE... [--sequence]
        (writes DIR/<basename of FILE>.jsonl for every FILE: one TF start-up for many files)

Records are read with tf.data.TFRecordDataset (compression from the extension: .gz ->
GZIP, .zlib -> ZLIB, else none, unless --compression is given; TF verifies the CRCs)
and parsed with the protobuf library as tf.train.Example (tf.train.SequenceExample
with --sequence). Exit status 1 if TF cannot read a file or a record does not parse.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def compression_for(path, override):
    if override:
        return "" if override.upper() == "NONE" else override.upper()
    if path.endswith(".gz"):
        return "GZIP"
    if path.endswith(".zlib"):
        return "ZLIB"
    return ""


def dump(tf, json_format, path, msg_type, override, out):
    ds = tf.data.TFRecordDataset([path], compression_type=compression_for(path, override))
    it = iter(ds)
    n = 0
    while True:
        try:
            rec = next(it)
        except StopIteration:
            return n
        except tf.errors.OpError as e:
            raise RuntimeError("%s record %d: TensorFlow failed to read the file: %s" % (
                path, n, (str(e).splitlines() or [""])[0]))
        msg = msg_type.FromString(bytes(rec.numpy()))
        out.write(json_format.MessageToJson(msg, indent=None, sort_keys=True))
        out.write("\n")
        n += 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--sequence", action="store_true", help="records are tf.train.SequenceExample")
    ap.add_argument("--compression", choices=["NONE", "GZIP", "ZLIB", "none", "gzip", "zlib"])
    ap.add_argument("--out-dir", help="write DIR/<basename>.jsonl per file instead of stdout")
    args = ap.parse_args(argv)
    if not args.out_dir and len(args.files) != 1:
        ap.error("several FILEs need --out-dir")

    import tensorflow as tf
    from google.protobuf import json_format

    msg_type = tf.train.SequenceExample if args.sequence else tf.train.Example
    try:
        for path in args.files:
            if args.out_dir:
                dst = os.path.join(args.out_dir, os.path.basename(path) + ".jsonl")
                with open(dst, "w", encoding="utf-8") as out:
                    dump(tf, json_format, path, msg_type, args.compression, out)
            else:
                dump(tf, json_format, path, msg_type, args.compression, sys.stdout)
    except Exception as e:  # noqa: BLE001 - report and fail
        print("FAIL: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
