#!/usr/bin/env python3
"""Check with REAL TensorFlow that a TFRecord file (e.g. one written by Sluice)
reads back and decodes to what we expect.

Usage:
    python scripts/interop/tf_check.py FILE.tfrecord[.gz|.zlib] --expect FILE.jsonl [--sequence]
    python scripts/interop/tf_check.py FILE.tfrecord --count N
    python scripts/interop/tf_check.py FILE.tfrecord --bits FILE.bits.jsonl      (lossless)

What it does:
  * reads FILE with tf.data.TFRecordDataset; compression from the extension
    (.gz -> GZIP, .zlib -> ZLIB, anything else -> none) unless --compression is given.
    TF verifies the length and data CRCs, so a bad framing/CRC is reported here.
  * parses each record with the protobuf library as tf.train.Example
    (tf.train.SequenceExample with --sequence),
  * --expect: converts it with json_format.MessageToJson(msg, indent=None) and
    compares with the expected JSONL line by line after json.loads (key order is
    irrelevant; types must match; floats compare exactly with NaN == NaN and
    -0.0 != 0.0),
  * --bits: compares with a lossless "bits" JSONL (as written by
    tests/fixtures/tf/make_reference.py): floats as uint32 bit patterns, int64 as
    decimal strings, bytes as hex. (Signalling NaNs are quieted by Python's float
    conversion, so they are compared in quieted form.)
  * --count N: checks the number of records (can be combined with the others),
  * unless --no-tf-parse: also parses every record with TF's own C++ parser
    (tf.io.parse_single_example / parse_single_sequence_example, VarLenFeature
    for every feature) and checks it yields the same values as the protobuf
    parse -- this is the parser tf.data pipelines actually use.
Exit status: 0 on success, 1 on any failure (first failure reported with its
record index).
"""

import argparse
import json
import math
import os
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


class CheckFailed(Exception):
    pass


def compression_for(path, override):
    if override:
        return "" if override.upper() == "NONE" else override.upper()
    if path.endswith(".gz"):
        return "GZIP"
    if path.endswith(".zlib"):
        return "ZLIB"
    return ""


def read_jsonl(path):
    with open(path, "r", encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    while lines and lines[-1].strip() == "":
        lines.pop()
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except ValueError as e:
            raise CheckFailed("%s line %d is not valid JSON: %s" % (path, i + 1, e))
    return out


def json_diff(got, want, path="$"):
    """Return None if equal, else a human readable description of the first difference."""
    if isinstance(want, bool) or isinstance(got, bool):
        if type(got) is not type(want) or got != want:
            return "%s: got %r, expected %r" % (path, got, want)
        return None
    if isinstance(want, float) and isinstance(got, float):
        if math.isnan(want) and math.isnan(got):
            return None
        if got == want and math.copysign(1.0, got) == math.copysign(1.0, want):
            return None
        return "%s: got %r, expected %r" % (path, got, want)
    if type(got) is not type(want):
        return "%s: got %s %s, expected %s %s" % (
            path, type(got).__name__, json.dumps(got)[:200], type(want).__name__, json.dumps(want)[:200])
    if isinstance(want, dict):
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        if missing:
            return "%s: missing key %s" % (path, json.dumps(missing[0]))
        if extra:
            return "%s: unexpected key %s" % (path, json.dumps(extra[0]))
        for k in sorted(want):
            d = json_diff(got[k], want[k], "%s.%s" % (path, json.dumps(k)))
            if d:
                return d
        return None
    if isinstance(want, list):
        for i, (g, w) in enumerate(zip(got, want)):
            d = json_diff(g, w, "%s[%d]" % (path, i))
            if d:
                return d
        if len(got) != len(want):
            return "%s: got %d elements, expected %d" % (path, len(got), len(want))
        return None
    if got != want:
        return "%s: got %s, expected %s" % (path, json.dumps(got)[:200], json.dumps(want)[:200])
    return None


def tf_error_text(e):
    """First line of a TF error without the '{{function_node ...}}' noise."""
    text = (str(e).splitlines() or [""])[0].split("}} ")[-1]
    if text.endswith(" name: "):
        text = text[: -len(" name: ")]
    return text.strip()


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def feature_bits(feat):
    which = feat.WhichOneof("kind")
    if which == "float_list":
        return {"kind": "float", "values": [f32_bits(x) for x in feat.float_list.value]}
    if which == "int64_list":
        return {"kind": "int64", "values": [str(x) for x in feat.int64_list.value]}
    if which == "bytes_list":
        return {"kind": "bytes", "values": [bytes(x).hex() for x in feat.bytes_list.value]}
    return {"kind": None, "values": []}


def message_bits(msg, sequence):
    if sequence:
        return {
            "context": {k: feature_bits(v) for k, v in msg.context.feature.items()},
            "feature_lists": {k: [feature_bits(f) for f in v.feature]
                              for k, v in msg.feature_lists.feature_list.items()},
        }
    return {"features": {k: feature_bits(v) for k, v in msg.features.feature.items()}}


def quiet_snan(bits_obj):
    if isinstance(bits_obj, dict):
        if bits_obj.get("kind") == "float":
            vals = []
            for b in bits_obj.get("values", []):
                if isinstance(b, int) and (b & 0x7F800000) == 0x7F800000 and (b & 0x007FFFFF):
                    b |= 0x00400000
                vals.append(b)
            return dict(bits_obj, values=vals)
        return {k: quiet_snan(v) for k, v in bits_obj.items()}
    if isinstance(bits_obj, list):
        return [quiet_snan(x) for x in bits_obj]
    return bits_obj


def tf_values_bits(tf_values, kind):
    arr = tf_values.numpy()
    if kind == "float":
        # quiet signalling NaNs the way the protobuf/Python side does
        return quiet_snan({"kind": "float", "values": arr.astype("<f4").view("<u4").tolist()})["values"]
    if kind == "int64":
        return [str(x) for x in arr.tolist()]
    return [bytes(x).hex() for x in arr.tolist()]


def tf_parse_check(tf, raw, msg, sequence):
    """Parse with TF's C++ parser; return None if it agrees with protobuf, else a message."""
    dtype = {"float": tf.float32, "int64": tf.int64, "bytes": tf.string}
    bits = message_bits(msg, sequence)
    if not sequence:
        want = {k: v for k, v in bits["features"].items() if v["kind"] is not None}
        if not want:
            return None
        spec = {k: tf.io.VarLenFeature(dtype[v["kind"]]) for k, v in want.items()}
        try:
            out = tf.io.parse_single_example(raw, spec)
        except tf.errors.OpError as e:
            return "tf.io.parse_single_example failed: " + tf_error_text(e)
        for k, v in want.items():
            got = tf_values_bits(out[k].values, v["kind"])
            if got != v["values"]:
                return "tf.io.parse_single_example: feature %s: got %s, protobuf parse gives %s" % (
                    json.dumps(k), got[:20], v["values"][:20])
        return None
    ctx = {k: v for k, v in bits["context"].items() if v["kind"] is not None}
    seq = {}
    for k, feats in bits["feature_lists"].items():
        kinds = {f["kind"] for f in feats}
        # TF needs one dtype per list; lists that are empty, hold kindless
        # Features or mix kinds cannot be described by a spec -> skipped.
        if len(kinds) == 1 and None not in kinds:
            seq[k] = (kinds.pop(), [x for f in feats for x in f["values"]])
    if not ctx and not seq:
        return None
    try:
        c_out, s_out = tf.io.parse_single_sequence_example(
            raw,
            context_features={k: tf.io.VarLenFeature(dtype[v["kind"]]) for k, v in ctx.items()} or None,
            sequence_features={k: tf.io.VarLenFeature(dtype[kind]) for k, (kind, _) in seq.items()} or None)
    except tf.errors.OpError as e:
        return "tf.io.parse_single_sequence_example failed: " + tf_error_text(e)
    for k, v in ctx.items():
        got = tf_values_bits(c_out[k].values, v["kind"])
        if got != v["values"]:
            return "parse_single_sequence_example: context %s: got %s, protobuf parse gives %s" % (
                json.dumps(k), got[:20], v["values"][:20])
    for k, (kind, vals) in seq.items():
        got = tf_values_bits(s_out[k].values, kind)
        if got != vals:
            return "parse_single_sequence_example: feature_list %s: got %s, protobuf parse gives %s" % (
                json.dumps(k), got[:20], vals[:20])
    return None


def run(args):
    if not os.path.isfile(args.file):
        raise CheckFailed("no such file: %s" % args.file)
    expect = read_jsonl(args.expect) if args.expect else None
    expect_bits = read_jsonl(args.bits) if args.bits else None

    import tensorflow as tf
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError

    msg_type = tf.train.SequenceExample if args.sequence else tf.train.Example
    type_name = "SequenceExample" if args.sequence else "Example"
    compression = compression_for(args.file, args.compression)
    ds = tf.data.TFRecordDataset([args.file], compression_type=compression)

    n = 0
    it = iter(ds)
    while True:
        try:
            rec = next(it)
        except StopIteration:
            break
        except tf.errors.OpError as e:
            raise CheckFailed("record %d: TensorFlow failed to read the file (compression=%s): %s" % (
                n, compression or "NONE", tf_error_text(e)))
        raw = bytes(rec.numpy())
        idx = n
        n += 1
        if args.count_only:
            continue
        try:
            msg = msg_type.FromString(raw)
        except DecodeError as e:
            raise CheckFailed("record %d: cannot parse %d bytes as tf.train.%s: %s" % (idx, len(raw), type_name, e))
        if expect is not None:
            if idx >= len(expect):
                raise CheckFailed("record %d: file has more records than %s (%d lines)" % (
                    idx, args.expect, len(expect)))
            got = json.loads(json_format.MessageToJson(msg, indent=None))
            d = json_diff(got, expect[idx])
            if d:
                raise CheckFailed("record %d: MessageToJson mismatch at %s" % (idx, d))
        if expect_bits is not None:
            if idx >= len(expect_bits):
                raise CheckFailed("record %d: file has more records than %s (%d lines)" % (
                    idx, args.bits, len(expect_bits)))
            d = json_diff(message_bits(msg, args.sequence), quiet_snan(expect_bits[idx]))
            if d:
                raise CheckFailed("record %d: bits mismatch at %s" % (idx, d))
        if not args.no_tf_parse:
            d = tf_parse_check(tf, raw, msg, args.sequence)
            if d:
                raise CheckFailed("record %d: %s" % (idx, d))

    if args.count is not None and n != args.count:
        raise CheckFailed("record count: file has %d records, expected %d" % (n, args.count))
    if expect is not None and n != len(expect):
        raise CheckFailed("record count: file has %d records, %s has %d lines" % (n, args.expect, len(expect)))
    if expect_bits is not None and n != len(expect_bits):
        raise CheckFailed("record count: file has %d records, %s has %d lines" % (n, args.bits, len(expect_bits)))
    checks = []
    if args.count is not None:
        checks.append("count")
    if expect is not None:
        checks.append("MessageToJson")
    if expect_bits is not None:
        checks.append("bits")
    if not args.count_only and not args.no_tf_parse:
        checks.append("tf.io parser")
    return "OK: %s: %d records (compression=%s, %s; TF %s)%s" % (
        args.file, n, compression or "NONE", type_name, tf.__version__,
        (" checked: " + ", ".join(checks)) if checks else " read and parsed")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="TFRecord file (.gz -> GZIP, .zlib -> ZLIB, else uncompressed)")
    ap.add_argument("--expect", metavar="JSONL", help="expected MessageToJson output, one line per record")
    ap.add_argument("--bits", metavar="JSONL", help="expected lossless bits description, one line per record")
    ap.add_argument("--sequence", action="store_true", help="records are tf.train.SequenceExample")
    ap.add_argument("--count", type=int, metavar="N", help="expected number of records")
    ap.add_argument("--compression", choices=["NONE", "GZIP", "ZLIB", "none", "gzip", "zlib"],
                    help="override the compression guessed from the extension")
    ap.add_argument("--no-tf-parse", action="store_true",
                    help="skip the extra check with TF's C++ tf.io.parse_*example parser")
    args = ap.parse_args(argv)
    # --count alone: only count the records (no parsing at all)
    args.count_only = args.count is not None and not args.expect and not args.bits
    try:
        print(run(args))
        return 0
    except CheckFailed as e:
        print("FAIL: %s: %s" % (args.file, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
