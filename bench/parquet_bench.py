"""The Parquet peer benchmark (scripts/bench-parquet): Sluice's `parquet -> batch(1024)`
against pyarrow `ParquetFile.iter_batches(1024)` into numpy arrays and Hugging Face
`datasets` (`Dataset.from_parquet(...).with_format("numpy").iter(1024)`), on the same
files, in one run; and the projection (2 of 20 columns against all 20).

Each peer runs in a fresh process (`--peer NAME`), 3 times; the median records/s and the
peak RSS (ru_maxrss of that process) are reported. Sluice runs `sluice run --json`
(compiled runner, release; then the engine), 3 times each.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def make(data, rows):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(7)
    shards = 4
    per = rows // shards
    for k in range(shards):
        wide = os.path.join(data, f"wide-{k}.parquet")
        if not os.path.exists(wide):
            cols = {f"f{i}": pa.array(rng.standard_normal(per, dtype=np.float32)) for i in range(16)}
            cols["label"] = pa.array(rng.integers(0, 10, per, dtype=np.int64))
            pq.write_table(pa.table(cols), wide + ".tmp", compression="snappy", row_group_size=65536)
            os.replace(wide + ".tmp", wide)
        twenty = os.path.join(data, f"twenty-{k}.parquet")
        if not os.path.exists(twenty):
            cols = {f"c{i}": pa.array(rng.standard_normal(per, dtype=np.float32)) for i in range(20)}
            pq.write_table(pa.table(cols), twenty + ".tmp", compression="snappy", row_group_size=65536)
            os.replace(twenty + ".tmp", twenty)


def files(data, prefix):
    return sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(prefix) and f.endswith(".parquet"))


def peer(name, data):
    """One pass of a peer in this process: prints {records_per_s, peak_rss_bytes}."""
    start = time.perf_counter()
    n = 0
    if name == "pyarrow":
        import pyarrow.parquet as pq

        start = time.perf_counter()
        for f in files(data, "wide-"):
            for b in pq.ParquetFile(f).iter_batches(batch_size=1024):
                arrays = [c.to_numpy() for c in b.columns]
                n += len(arrays[0])
    elif name == "datasets":
        import datasets

        datasets.disable_progress_bars()
        ds = datasets.Dataset.from_parquet(files(data, "wide-"), cache_dir=os.path.join(data, "hf-cache"))
        start = time.perf_counter()
        for b in ds.with_format("numpy").iter(batch_size=1024):
            n += len(b["label"])
    else:
        sys.exit(f"no peer {name}")
    secs = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"records_per_s": n / secs, "records": n, "peak_rss_bytes": rss}))


def median_of(runs):
    runs = sorted(runs, key=lambda r: r["records_per_s"])
    return runs[len(runs) // 2]


def run_peer(name, data):
    out = []
    for _ in range(3):
        p = subprocess.run([sys.executable, __file__, "--peer", name, "--data", data], capture_output=True, text=True, check=True)
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return median_of(out)


def run_sluice(sluice, pipe, pipeline, data, engine):
    glob = os.path.join(data, ("wide-*.parquet" if pipeline == "parquet_batch" else "twenty-*.parquet"))
    out = []
    for _ in range(3):
        p = subprocess.run(
            [sluice, "run", pipe, pipeline, "--json", "--no-progress", "--engine", engine, "--set", f"files={glob}"],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            sys.exit(f"sluice run {pipeline} ({engine}): {p.stderr}")
        j = json.loads(p.stdout.strip().splitlines()[-1])
        out.append({"records_per_s": j["records_per_sec"], "peak_rss_bytes": j["peak_rss_bytes"], "records": j.get("records")})
    return median_of(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer")
    ap.add_argument("--data", required=True)
    ap.add_argument("--sluice")
    ap.add_argument("--pipe")
    ap.add_argument("--rows", type=int, default=2_000_000)
    a = ap.parse_args()
    if a.peer:
        return peer(a.peer, a.data)
    make(a.data, a.rows)
    # The peers first: `datasets` converts the files into its cache once (not timed).
    results = {
        "sluice compiled": run_sluice(a.sluice, a.pipe, "parquet_batch", a.data, "compiled"),
        "sluice engine": run_sluice(a.sluice, a.pipe, "parquet_batch", a.data, "interpreted"),
        "pyarrow iter_batches": run_peer("pyarrow", a.data),
        "datasets numpy": run_peer("datasets", a.data),
    }
    best_peer = max(results["pyarrow iter_batches"]["records_per_s"], results["datasets numpy"]["records_per_s"])
    print(f"{'parquet -> batch(1024), 16 f32 + label':42} {'rows/s':>12} {'vs best peer':>13} {'peak RSS':>10}")
    for k, r in results.items():
        print(f"{k:42} {r['records_per_s']:12,.0f} {r['records_per_s'] / best_peer:12.2f}x {r['peak_rss_bytes'] / 2**20:8.0f} MB")
    two = run_sluice(a.sluice, a.pipe, "parquet_two", a.data, "compiled")
    all20 = run_sluice(a.sluice, a.pipe, "parquet_all20", a.data, "compiled")
    import pyarrow.parquet as pq

    chunk = lambda cols: sum(
        rg.column(i).total_compressed_size
        for f in files(a.data, "twenty-")
        for rg in (pq.ParquetFile(f).metadata.row_group(g) for g in range(pq.ParquetFile(f).metadata.num_row_groups))
        for i in range(rg.num_columns)
        if rg.column(i).path_in_schema in cols
    )
    read_two, read_all = chunk({"c0", "c1"}), chunk({f"c{i}" for i in range(20)})
    print(f"{'projection (compiled)':42} {'rows/s':>12} {'column bytes':>13} {'peak RSS':>10}")
    print(f"{'2 of 20 columns':42} {two['records_per_s']:12,.0f} {read_two / 2**20:11.1f} MB {two['peak_rss_bytes'] / 2**20:8.0f} MB")
    print(f"{'all 20 columns':42} {all20['records_per_s']:12,.0f} {read_all / 2**20:11.1f} MB {all20['peak_rss_bytes'] / 2**20:8.0f} MB")
    print(f"projection: {read_all / read_two:.1f}x less read, {two['records_per_s'] / all20['records_per_s']:.2f}x the rows/s")


if __name__ == "__main__":
    main()
