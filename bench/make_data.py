#!/usr/bin/env python3
"""Sluice's TensorFlow data writer: the benchmark TFRecord datasets written by real
TensorFlow (tf.io.TFRecordWriter). `sluice gen` writes the same schemas; the interop check
(scripts/interop/run.sh) has `sluice cat` read these files back exactly as TF reads them.

Usage:
    $(scripts/tf-python) bench/make_data.py --out bench-data-tf [--datasets tabular,tabular_gzip,image_raw,jpeg]
                                  [--seed 20251121] [--scale 1.0] [--jobs 2]

Layout written under --out (one directory per dataset, shards named like TF does):

    tabular/tabular-00000-of-00016.tfrecord          2,000,000 tf.train.Example, 16 shards
        x:     float_list, 16 float32 (standard normal)
        label: int64_list, 1 value = argmax(x[0:10])   (0..9)
        id:    int64_list, 1 value = global record index
    tabular_gzip/tabular-00000-of-00016.tfrecord.gz  the same records, TFRecordOptions GZIP
    image_raw/image_raw-00000-of-00016.tfrecord      50,000 records, 16 shards
        image: bytes_list, 64*64*3 = 12,288 raw uint8 bytes (HWC, uniform random)
        label: int64 (0..9), id: int64 (global record index)
    jpeg/jpeg-00000-of-00008.tfrecord                20,000 records, 8 shards
        image: bytes_list, one JPEG (tf.io.encode_jpeg, quality 90) of a 128x128x3
               image = smooth colour gradient + a soft disc + gaussian noise (sigma 6)
        label: int64 (0..9), id: int64 (global record index)
    manifest.json                                    per file: records, bytes, sha256

Records are assigned to shards contiguously: shard k holds ids [k*n/N, (k+1)*n/N).
Everything is derived from --seed (numpy PCG64 seeded with [seed, dataset, shard]), so a
re-run with the same seed and the same TF/libjpeg build gives byte-identical files
(compare the sha256 values in manifest.json).

--scale multiplies the record counts (e.g. 0.01 for a quick smoke test).
"""
import argparse
import hashlib
import json
import os
import sys
import time
from multiprocessing import Pool

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DATASETS = {
    # name: (records, shards)
    "tabular": (2_000_000, 16),
    "image_raw": (50_000, 16),
    "jpeg": (20_000, 8),
}
DATASET_IDS = {"tabular": 1, "image_raw": 2, "jpeg": 3}


def shard_range(n, shards, k):
    return (k * n) // shards, ((k + 1) * n) // shards


def shard_name(name, k, shards, ext=".tfrecord"):
    return f"{name}-{k:05d}-of-{shards:05d}{ext}"


def _feature_helpers():
    import tensorflow as tf

    def f_float(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))

    def f_int(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    def f_bytes(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))

    def example(d):
        # deterministic=True sorts the feature-map keys; without it upb emits map entries in a
        # per-process hash order, so files would differ from run to run.
        return tf.train.Example(features=tf.train.Features(feature=d)).SerializeToString(deterministic=True)

    return tf, f_float, f_int, f_bytes, example


def write_tabular(args):
    out, k, n, shards, seed, gzip_too = args
    import numpy as np
    tf, f_float, f_int, f_bytes, example = _feature_helpers()
    lo, hi = shard_range(n, shards, k)
    rng = np.random.default_rng([seed, DATASET_IDS["tabular"], k])
    x = rng.standard_normal((hi - lo, 16)).astype(np.float32)
    labels = np.argmax(x[:, :10], axis=1)
    p = os.path.join(out, "tabular", shard_name("tabular", k, shards))
    writers = [tf.io.TFRecordWriter(p)]
    if gzip_too:
        pg = os.path.join(out, "tabular_gzip", shard_name("tabular", k, shards, ".tfrecord.gz"))
        writers.append(tf.io.TFRecordWriter(pg, tf.io.TFRecordOptions(compression_type="GZIP")))
    xl = x.tolist()
    ll = labels.tolist()
    for i in range(hi - lo):
        s = example({
            "x": f_float(xl[i]),
            "label": f_int([ll[i]]),
            "id": f_int([lo + i]),
        })
        for w in writers:
            w.write(s)
    for w in writers:
        w.close()
    return k


def write_image_raw(args):
    out, k, n, shards, seed = args
    import numpy as np
    tf, f_float, f_int, f_bytes, example = _feature_helpers()
    lo, hi = shard_range(n, shards, k)
    rng = np.random.default_rng([seed, DATASET_IDS["image_raw"], k])
    p = os.path.join(out, "image_raw", shard_name("image_raw", k, shards))
    with tf.io.TFRecordWriter(p) as w:
        for i in range(hi - lo):
            img = rng.integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
            label = int(rng.integers(0, 10))
            w.write(example({
                "image": f_bytes([img.tobytes()]),
                "label": f_int([label]),
                "id": f_int([lo + i]),
            }))
    return k


def smooth_image(rng, size=128):
    """Compressible but non-trivial RGB image: gradient + soft disc + noise."""
    import numpy as np
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / (size - 1)
    img = np.empty((size, size, 3), np.float32)
    ang = rng.uniform(0, 2 * np.pi)
    t = np.cos(ang) * xx + np.sin(ang) * yy
    c0 = rng.uniform(0, 255, 3)
    c1 = rng.uniform(0, 255, 3)
    cx, cy, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.1, 0.35)
    disc = np.clip(1.0 - np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2) / r, 0, 1)
    c2 = rng.uniform(0, 255, 3)
    for c in range(3):
        img[..., c] = c0[c] * (1 - t) + c1[c] * t
        img[..., c] = img[..., c] * (1 - disc) + c2[c] * disc
    img += rng.normal(0, 6.0, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_jpeg(args):
    out, k, n, shards, seed = args
    import numpy as np
    tf, f_float, f_int, f_bytes, example = _feature_helpers()
    lo, hi = shard_range(n, shards, k)
    rng = np.random.default_rng([seed, DATASET_IDS["jpeg"], k])
    p = os.path.join(out, "jpeg", shard_name("jpeg", k, shards))
    with tf.io.TFRecordWriter(p) as w:
        for i in range(hi - lo):
            img = smooth_image(rng)
            label = int(rng.integers(0, 10))
            jpg = tf.io.encode_jpeg(img, quality=90).numpy()
            w.write(example({
                "image": f_bytes([jpg]),
                "label": f_int([label]),
                "id": f_int([lo + i]),
            }))
    return k


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--datasets", default="tabular,tabular_gzip,image_raw,jpeg")
    ap.add_argument("--seed", type=int, default=20251121)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()

    wanted = [d.strip() for d in a.datasets.split(",") if d.strip()]
    for d in wanted:
        if d not in DATASETS and d != "tabular_gzip":
            sys.exit(f"unknown dataset {d}")
    os.makedirs(a.out, exist_ok=True)
    manifest = {"seed": a.seed, "scale": a.scale, "datasets": {}}
    gzip_too = "tabular_gzip" in wanted
    if gzip_too and "tabular" not in wanted:
        wanted.insert(0, "tabular")  # the gzip shards are written in the same pass

    for name in [d for d in wanted if d in DATASETS]:
        n, shards = DATASETS[name]
        n = max(shards, int(round(n * a.scale)))
        os.makedirs(os.path.join(a.out, name), exist_ok=True)
        t0 = time.time()
        if name == "tabular":
            if gzip_too:
                os.makedirs(os.path.join(a.out, "tabular_gzip"), exist_ok=True)
            jobs = [(a.out, k, n, shards, a.seed, gzip_too) for k in range(shards)]
            fn = write_tabular
        elif name == "image_raw":
            jobs = [(a.out, k, n, shards, a.seed) for k in range(shards)]
            fn = write_image_raw
        else:
            jobs = [(a.out, k, n, shards, a.seed) for k in range(shards)]
            fn = write_jpeg
        with Pool(a.jobs) as pool:
            for _ in pool.imap_unordered(fn, jobs):
                pass
        dt = time.time() - t0
        dirs = [(name, ".tfrecord")] + ([("tabular_gzip", ".tfrecord.gz")] if name == "tabular" and gzip_too else [])
        for dname, ext in dirs:
            files = []
            for k in range(shards):
                fname = shard_name(name, k, shards, ext)
                p = os.path.join(a.out, dname, fname)
                lo, hi = shard_range(n, shards, k)
                files.append({"file": f"{dname}/{fname}", "records": hi - lo,
                              "bytes": os.path.getsize(p), "sha256": sha256_file(p)})
            total = sum(f["bytes"] for f in files)
            manifest["datasets"][dname] = {
                "records": n, "shards": shards, "bytes": total,
                "compression": "GZIP" if ext.endswith(".gz") else "",
                "write_seconds": round(dt, 1), "files": files,
            }
            print(f"{dname:14s} {n:>9,d} records  {shards:2d} shards  {total / 1e6:9.1f} MB  ({dt:.1f} s)",
                  flush=True)

    import tensorflow as tf
    manifest["tensorflow"] = tf.__version__
    mpath = os.path.join(a.out, "manifest.json")
    if os.path.exists(mpath):  # merge with datasets written by an earlier run
        old = json.load(open(mpath))
        if old.get("seed") == a.seed and old.get("scale") == a.scale:
            old["datasets"].update(manifest["datasets"])
            manifest["datasets"] = old["datasets"]
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
