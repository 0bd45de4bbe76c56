#!/usr/bin/env python3
"""Compare two JSONL files record by record after json.loads (no TensorFlow needed).

Usage:
    python scripts/interop/jsonl_compare.py GOT.jsonl WANT.jsonl [--count N] [--label TEXT]

GOT is typically `sluice cat FILE`, WANT `tf_to_jsonl.py FILE` (MessageToJson of TF's
own read). Equality is tf_check.json_diff: key order irrelevant, types must match,
floats exact with NaN == NaN and -0.0 != 0.0. --count N also checks both files hold
N records. On success prints one OK line, which also says how many GOT lines are
byte-identical to the compact, key-sorted re-dump of the WANT record
(json.dumps(separators=(",", ":"), sort_keys=True)) -- informational only.
On failure prints the first differing record and the difference, exit status 1.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_check import CheckFailed, json_diff, read_jsonl  # noqa: E402  (stdlib-only at import)


def raw_lines(path):
    with open(path, "r", encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    while lines and lines[-1].strip() == "":
        lines.pop()
    return lines


def run(args):
    got = read_jsonl(args.got)
    want = read_jsonl(args.want)
    got_raw = raw_lines(args.got)
    for i, (g, w) in enumerate(zip(got, want)):
        d = json_diff(g, w)
        if d:
            raise CheckFailed("record %d differs at %s\n  got : %s\n  want: %s" % (
                i, d, got_raw[i][:600], json.dumps(w, sort_keys=True)[:600]))
    if len(got) != len(want):
        raise CheckFailed("record count: %s has %d records, %s has %d" % (
            args.got, len(got), args.want, len(want)))
    if args.count is not None and len(want) != args.count:
        raise CheckFailed("record count: %d records, expected %d" % (len(want), args.count))
    same_bytes = sum(1 for line, w in zip(got_raw, want)
                     if line == json.dumps(w, separators=(",", ":"), sort_keys=True, ensure_ascii=True))
    return "OK: %s: %d records equal%s (%d/%d lines byte-identical to compact sorted MessageToJson)" % (
        args.label or args.got, len(want), " (count %d)" % args.count if args.count is not None else "",
        same_bytes, len(want))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("got")
    ap.add_argument("want")
    ap.add_argument("--count", type=int)
    ap.add_argument("--label")
    args = ap.parse_args(argv)
    try:
        print(run(args))
        return 0
    except CheckFailed as e:
        print("FAIL: %s: %s" % (args.label or args.got, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
