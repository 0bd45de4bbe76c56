#!/usr/bin/env python3
"""Sluice's tf.data peer: one tf.data measurement of one benchmark pipeline over one dataset
directory, printed as one JSON line. Every speed ratio in BENCHMARKS.md divides Sluice's
records/s by this script's on the same files, in the same run.

Usage (any Python with tensorflow-cpu 2.21; `scripts/tf-python` prints one):
    $(scripts/tf-python) bench/tfdata_bench.py --data bench-data/tabular --pipeline parse_tabular
    $(scripts/tf-python) bench/tfdata_bench.py --data bench-data/tabular --pipeline read --consumer python

Protocol (the same for every pipeline, and what `scripts/bench-*` rely on):
  1. page cache warm: every shard is read once from Python before TensorFlow is imported;
  2. warm-up pass: --warmup elements are pulled through a separate iterator (thread pools
     started, AUTOTUNE's first decisions made) before the clock starts;
  3. one timed epoch on a fresh iterator;
  4. the callers run this script 3 times as fresh processes and keep the median by
     records/s (so peak RSS is per process and no state carries between runs).
The datasets are written by `bench/make_data.py` (TensorFlow's own writer) or `sluice gen`
(the same schemas).

Pipelines (all start from the same reader stage):
  read                  Dataset.from_tensor_slices(sorted shard files)
                          .interleave(TFRecordDataset, cycle_length=4,
                                      num_parallel_calls=AUTOTUNE, deterministic=False)
  parse_tabular         read .batch(1024) .map(tf.io.parse_example, AUTOTUNE) .prefetch(AUTOTUNE)
                          -> x [B,16] float32, label [B] int64   (vectorized parse, fast path)
  parse_tabular_single  read .map(tf.io.parse_single_example, AUTOTUNE) .batch(1024) .prefetch
                          (tf.data's default map_and_batch_fusion rewrites map+batch into one op)
  shuffle_tabular       read .shuffle(100000, seed=1) .batch(1024) .map(parse_example, AUTOTUNE)
                          .prefetch(AUTOTUNE)
  image_raw             read .map(parse_single_example -> decode_raw uint8 -> reshape [64,64,3]
                          -> cast float32 / 255, AUTOTUNE) .batch(256) .prefetch(AUTOTUNE)
  image_raw_vec         read .batch(256) .map(parse_example -> decode_raw [B,12288] -> reshape
                          [B,64,64,3] -> cast float32 / 255, AUTOTUNE) .prefetch  (extra variant)
  jpeg                  read .map(parse_single_example -> decode_jpeg(channels=3)
                          -> tf.image.resize [112,112] (bilinear, float32)
                          -> (x/255 - mean) / std  (ImageNet mean/std), AUTOTUNE)
                          .batch(128) .prefetch(AUTOTUNE)
Maps use the default deterministic ordering; only the interleave is deterministic=False.

  read_seq              tf.data.TFRecordDataset(sorted shard files): one sequential reader, no
                          interleave (extra variant: the cheapest way TF reads the files)

Consumers (--consumer):
  python   iterate the dataset from Python (`for e in ds`), counting records per element.
           Default for batched pipelines (~2,000 Python steps per epoch, negligible).
           For unbatched `read` this costs ~40 us per record and measures eager Python.
  batch    default for `read`/`read_seq`: append .batch(1024) inside tf.data and iterate the
           batches from Python (the cheapest consumer found; batching 1024 small strings
           is a memcpy of the record bytes).
  reduce   count inside tf.data with Dataset.reduce. Measured at ~40 us per element for
           unbatched records (the reduce function is invoked per element), so not a default.

Method: read every shard once first (page cache), build the dataset, warm up by pulling
--warmup elements through a separate iterator, then time one full epoch on a fresh iterator.
Output JSON fields: records, wall_s, records_per_s, mb_per_s (TFRecord file bytes / wall_s,
MB = 1e6 bytes), peak_rss_mb (ru_maxrss of this process, whole life), rss_before_epoch_mb
(ru_maxrss after import + warm-up), cpu_s / cpu_util (user+sys CPU during the epoch, in cores),
threads_max (max OS threads of the process sampled every 0.1 s during the epoch),
other_cpu_util (CPU cores used by other processes during the epoch, from /proc/stat: a check
that the machine was quiet), steal_util (hypervisor steal).
Run a fresh process per measurement (scripts/bench-* do, 3 times each) so peak RSS is per run.
"""
import argparse
import glob
import json
import os
import resource
import sys
import threading
import time


def list_files(data_dir):
    files = sorted(glob.glob(os.path.join(data_dir, "*.tfrecord")) +
                   glob.glob(os.path.join(data_dir, "*.tfrecord.gz")) +
                   glob.glob(os.path.join(data_dir, "*.tfrecord.zlib")))
    if not files:
        sys.exit(f"no *.tfrecord files in {data_dir}")
    return files


def warm_page_cache(files):
    buf = bytearray(1 << 22)
    mv = memoryview(buf)
    for p in files:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(mv):
                pass


def build(pipeline, files, compression):
    import tensorflow as tf
    AUTOTUNE = tf.data.AUTOTUNE

    def read():
        ds = tf.data.Dataset.from_tensor_slices(files)
        return ds.interleave(
            lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
            cycle_length=4, num_parallel_calls=AUTOTUNE, deterministic=False)

    tab_spec = {
        "x": tf.io.FixedLenFeature([16], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    img_spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse_batch(s):
        return tf.io.parse_example(s, tab_spec)

    if pipeline == "read":
        return read(), False
    if pipeline == "read_seq":
        return tf.data.TFRecordDataset(files, compression_type=compression), False
    if pipeline == "parse_tabular":
        return read().batch(1024).map(parse_batch, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE), True
    if pipeline == "parse_tabular_single":
        return (read().map(lambda s: tf.io.parse_single_example(s, tab_spec), num_parallel_calls=AUTOTUNE)
                .batch(1024).prefetch(AUTOTUNE)), True
    if pipeline == "shuffle_tabular":
        return (read().shuffle(100_000, seed=1).batch(1024)
                .map(parse_batch, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)), True
    if pipeline == "image_raw":
        def f(s):
            p = tf.io.parse_single_example(s, img_spec)
            img = tf.reshape(tf.io.decode_raw(p["image"], tf.uint8), [64, 64, 3])
            return {"image": tf.cast(img, tf.float32) / 255.0, "label": p["label"]}
        return read().map(f, num_parallel_calls=AUTOTUNE).batch(256).prefetch(AUTOTUNE), True
    if pipeline == "image_raw_vec":
        def f(s):
            p = tf.io.parse_example(s, img_spec)
            img = tf.reshape(tf.io.decode_raw(p["image"], tf.uint8), [-1, 64, 64, 3])
            return {"image": tf.cast(img, tf.float32) / 255.0, "label": p["label"]}
        return read().batch(256).map(f, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE), True
    if pipeline == "jpeg":
        mean = tf.constant([0.485, 0.456, 0.406], tf.float32)
        std = tf.constant([0.229, 0.224, 0.225], tf.float32)

        def f(s):
            p = tf.io.parse_single_example(s, img_spec)
            img = tf.io.decode_jpeg(p["image"], channels=3)
            img = tf.image.resize(img, [112, 112])  # bilinear, half_pixel_centers, float32
            img = (img / 255.0 - mean) / std
            return {"image": img, "label": p["label"]}
        return read().map(f, num_parallel_calls=AUTOTUNE).batch(128).prefetch(AUTOTUNE), True
    sys.exit(f"unknown pipeline {pipeline}")


class ThreadSampler(threading.Thread):
    def __init__(self, period=0.1):
        super().__init__(daemon=True)
        self.period = period
        self.max = 0
        self.stop = threading.Event()

    def sample(self):
        try:
            self.max = max(self.max, len(os.listdir("/proc/self/task")))
        except OSError:
            pass

    def run(self):
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.period)


def system_cpu():
    """(busy, steal) CPU seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    hz = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / hz, steal / hz


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="directory holding the shards of one dataset")
    ap.add_argument("--pipeline", required=True)
    ap.add_argument("--consumer", choices=["python", "batch", "reduce"], default=None)
    ap.add_argument("--warmup", type=int, default=None,
                    help="elements pulled before timing (default 20000 records unbatched, 5 batches batched)")
    ap.add_argument("--expect", type=int, default=None, help="fail unless this many records are seen")
    ap.add_argument("--no-cache-warm", action="store_true")
    a = ap.parse_args()

    files = list_files(a.data)
    compression = "GZIP" if files[0].endswith(".gz") else ("ZLIB" if files[0].endswith(".zlib") else "")
    file_bytes = sum(os.path.getsize(p) for p in files)
    if not a.no_cache_warm:
        warm_page_cache(files)

    t_import = time.perf_counter()
    import tensorflow as tf
    import numpy as np
    t_import = time.perf_counter() - t_import

    ds, batched = build(a.pipeline, files, compression)
    consumer = a.consumer or ("python" if batched else "batch")
    if consumer == "batch":
        if batched:
            sys.exit("--consumer batch is for unbatched pipelines")
        ds = ds.batch(1024)
        consumer_batched = True
    else:
        consumer_batched = batched
    warmup = a.warmup if a.warmup is not None else (5 if consumer_batched else 20_000)

    def count_of(e):
        if not consumer_batched:
            return 1
        if batched:
            return e["label"].shape[0]
        return e.shape[0]

    for _ in ds.take(warmup):
        pass
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    if consumer == "reduce":
        if consumer_batched:
            def red(acc, e):
                return acc + tf.cast(tf.shape(e["label"])[0], tf.int64)
        else:
            def red(acc, e):
                return acc + 1
        run_epoch = lambda: int(ds.reduce(np.int64(0), red))
    else:
        def run_epoch():
            n = 0
            for e in ds:
                n += count_of(e)
            return n

    sampler = ThreadSampler()
    sampler.sample()
    sampler.start()
    s0, st0 = system_cpu()
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    n = run_epoch()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - c0
    s1, st1 = system_cpu()
    sampler.stop.set()
    sampler.join()
    sampler.sample()

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    res = {
        "pipeline": a.pipeline,
        "data": os.path.basename(os.path.normpath(a.data)),
        "compression": compression or "NONE",
        "consumer": consumer,
        "files": len(files),
        "file_bytes": file_bytes,
        "records": n,
        "wall_s": round(wall, 4),
        "records_per_s": round(n / wall, 1),
        "mb_per_s": round(file_bytes / 1e6 / wall, 2),
        "peak_rss_mb": round(peak, 1),
        "rss_before_epoch_mb": round(rss_before, 1),
        "cpu_s": round(cpu, 3),
        "cpu_util": round(cpu / wall, 2),
        "threads_max": sampler.max,
        # CPU used by other processes on the machine during the epoch (cores); > ~0.1 means
        # the measurement was disturbed. steal_util: time the hypervisor took from this guest.
        "other_cpu_util": round(max(0.0, (s1 - s0) - cpu) / wall, 2),
        "steal_util": round((st1 - st0) / wall, 2),
        "warmup_elements": warmup,
        "tf_import_s": round(t_import, 2),
        "tf_version": tf.__version__,
    }
    print(json.dumps(res), flush=True)
    if a.expect is not None and n != a.expect:
        print(f"record count mismatch: got {n}, expected {a.expect}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
