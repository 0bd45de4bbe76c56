"""The WebDataset peer benchmark (scripts/bench-webdataset): 20,000 JPEGs (128x128, quality
90, the tf.data jpeg benchmark's kind of image) in 8 tar shards written by
`webdataset.TarWriter`, through decode -> resize to 112x112 (bilinear) -> (x/255 - mean)
/ std (ImageNet) -> batch(128): Sluice's `webdataset(files)` pipeline (bench/webdataset.pipe,
the compiled runner, then the engine) against `webdataset.WebDataset(...).decode("pil")`
with the same steps in PIL and numpy, batched by a PyTorch `DataLoader` with 2 workers
(the shards split between them), on the same files, in one run.

Each peer pass runs in a fresh process (`--peer`), 3 times; Sluice runs `sluice run --json`
3 times per backend; the median samples/s is reported, with the peak RSS (the peer's: its
process and its workers together, sampled every 20 ms; Sluice's: the runner's own report).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

SAMPLES = 20_000
SHARDS = 8
SIZE = 128
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def make(data, samples):
    import io

    import numpy as np
    import webdataset as wds
    from PIL import Image

    os.makedirs(data, exist_ok=True)
    per = samples // SHARDS
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) / (SIZE - 1)
    for k in range(SHARDS):
        path = os.path.join(data, f"shard-{k:06d}.tar")
        if os.path.exists(path):
            continue
        rng = np.random.default_rng([7, k])
        with wds.TarWriter(path + ".tmp") as w:
            for i in range(per):
                # A smooth picture with some noise (as bench/make_data.py's smooth_image).
                a, b, c = rng.uniform(0, 6.28, 3)
                img = np.stack(
                    [np.sin(xx * 3 + a) * 0.5 + 0.5, np.cos(yy * 4 + b) * 0.5 + 0.5, (xx + yy + c / 6.28) % 1.0], -1
                )
                img = np.clip(img * 255 + rng.normal(0, 8, img.shape), 0, 255).astype(np.uint8)
                buf = io.BytesIO()
                Image.fromarray(img).save(buf, format="JPEG", quality=90)
                w.write({"__key__": f"{k:02d}{i:06d}", "jpg": buf.getvalue(), "cls": int(rng.integers(0, 1000))})
        os.replace(path + ".tmp", path)


def shards(data):
    return sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith("shard-") and f.endswith(".tar"))


class PeakRss:
    """The peak of this process's RSS plus its children's (DataLoader workers), sampled."""

    def __init__(self):
        self.peak = 0
        self.done = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    @staticmethod
    def rss(pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def run(self):
        me = os.getpid()
        while not self.done:
            pids = [me]
            try:
                for tid in os.listdir(f"/proc/{me}/task"):
                    with open(f"/proc/{me}/task/{tid}/children") as f:
                        pids.extend(int(p) for p in f.read().split())
            except OSError:
                pass
            self.peak = max(self.peak, sum(self.rss(p) for p in pids))
            time.sleep(0.02)

    def stop(self):
        self.done = True
        self.thread.join()
        return self.peak


def peer(data):
    """One pass of the peer in this process: prints {records_per_s, peak_rss_bytes}."""
    import numpy as np
    import torch
    import webdataset as wds
    from PIL import Image

    mean = np.array(MEAN, np.float32)
    std = np.array(STD, np.float32)

    def transform(img):
        img = img.convert("RGB").resize((112, 112), Image.BILINEAR)
        x = (np.asarray(img, np.float32) / 255.0 - mean) / std
        return torch.from_numpy(x)

    rss = PeakRss()
    ds = (
        wds.WebDataset(shards(data), shardshuffle=False, nodesplitter=wds.split_by_node)
        .decode("pil")
        .to_tuple("jpg", "cls")
        .map_tuple(transform, lambda c: c)
        .batched(128, partial=True)
    )
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    start = time.perf_counter()
    n = 0
    for images, labels in loader:
        n += len(labels)
    secs = time.perf_counter() - start
    print(json.dumps({"records_per_s": n / secs, "records": n, "peak_rss_bytes": rss.stop()}))


def median_of(runs):
    return sorted(runs, key=lambda r: r["records_per_s"])[len(runs) // 2]


def run_peer(data):
    out = []
    for _ in range(3):
        p = subprocess.run([sys.executable, __file__, "--peer", "--data", data], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"the peer failed: {p.stderr}")
        out.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return median_of(out)


def run_sluice(sluice, pipe, data, engine):
    out = []
    for _ in range(3):
        p = subprocess.run(
            [sluice, "run", pipe, "--json", "--no-progress", "--engine", engine,
             "--set", f"files={os.path.join(data, 'shard-*.tar')}"],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            sys.exit(f"sluice run ({engine}): {p.stderr}")
        j = json.loads(p.stdout.strip().splitlines()[-1])
        out.append({"records_per_s": j["records_per_sec"], "peak_rss_bytes": j["peak_rss_bytes"], "records": j["records"]})
    return median_of(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", action="store_true")
    ap.add_argument("--data", required=True)
    ap.add_argument("--sluice")
    ap.add_argument("--pipe")
    ap.add_argument("--samples", type=int, default=SAMPLES)
    a = ap.parse_args()
    if a.peer:
        return peer(a.data)
    make(a.data, a.samples)
    results = {
        "sluice compiled": run_sluice(a.sluice, a.pipe, a.data, "compiled"),
        "sluice engine": run_sluice(a.sluice, a.pipe, a.data, "interpreted"),
        "webdataset + DataLoader(2 workers), PIL": run_peer(a.data),
    }
    for k, r in results.items():
        if r["records"] != a.samples:
            sys.exit(f"{k}: {r['records']} samples, expected {a.samples}")
    peer_rate = results["webdataset + DataLoader(2 workers), PIL"]["records_per_s"]
    print(f"{'WebDataset JPEG -> 112x112 -> batch(128)':42} {'samples/s':>12} {'vs peer':>9} {'peak RSS':>10}")
    for k, r in results.items():
        print(f"{k:42} {r['records_per_s']:12,.0f} {r['records_per_s'] / peer_rate:8.2f}x {r['peak_rss_bytes'] / 2**20:8.0f} MB")


if __name__ == "__main__":
    main()
