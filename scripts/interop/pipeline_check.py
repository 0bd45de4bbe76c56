#!/usr/bin/env python3
"""Sluice's benchmark pipelines compute what their tf.data counterparts compute.

Usage: pipeline_check.py --peer PATH/tfdata_bench.py --pipeline NAME --data DIR --dump FILE

DIR holds ONE shard (so both sides see the records in file order); FILE is what
`sluice bench pipeline NAME DIR --dump FILE` wrote for its first batch (features as f32
little-endian, FILE.labels as i64). The tf.data pipeline is `build()` of the peer
benchmark itself; its first batch is compared with Sluice's: labels exactly, features
within a tolerance (exact for parse_tabular; float rounding for image_raw; for jpeg the
JPEG decoders differ: TF's default is libjpeg's fast integer IDCT, Sluice's zune-jpeg is
accurate, so a few levels per pixel differ). Prints the differences; exits 1 on failure.
"""
import argparse
import glob
import importlib.util
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# name: (feature key, max abs tolerance, mean abs tolerance)
LIMITS = {
    "parse_tabular": ("x", 0.0, 0.0),
    "image_raw": ("image", 1e-6, 1e-7),
    "jpeg": ("image", 0.25, 0.03),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--pipeline", required=True, choices=sorted(LIMITS))
    ap.add_argument("--data", required=True)
    ap.add_argument("--dump", required=True)
    a = ap.parse_args()

    spec = importlib.util.spec_from_file_location("tfdata_bench", a.peer)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    files = sorted(glob.glob(os.path.join(a.data, "*.tfrecord")))
    if len(files) != 1:
        sys.exit(f"{a.data}: expected exactly one shard, found {len(files)}")
    ds, _ = peer.build(a.pipeline, files, "")
    first = next(iter(ds))
    key, max_tol, mean_tol = LIMITS[a.pipeline]
    want = first[key].numpy().astype(np.float32).ravel()
    want_labels = first["label"].numpy().astype(np.int64).ravel()
    got = np.fromfile(a.dump, dtype="<f4")
    got_labels = np.fromfile(a.dump + ".labels", dtype="<i8")
    if got.shape != want.shape or got_labels.shape != want_labels.shape:
        sys.exit(f"{a.pipeline}: shapes differ: sluice {got.shape}/{got_labels.shape}, "
                 f"tf.data {want.shape}/{want_labels.shape}")
    diff = np.abs(got - want)
    ok = bool(np.array_equal(got_labels, want_labels)) and diff.max() <= max_tol and diff.mean() <= mean_tol
    print(f"{a.pipeline}: {want_labels.size} records, labels {'equal' if np.array_equal(got_labels, want_labels) else 'DIFFER'}, "
          f"{key} max abs diff {diff.max():.3g} (limit {max_tol:g}), mean {diff.mean():.3g} (limit {mean_tol:g})"
          f"{'' if ok else ' FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
