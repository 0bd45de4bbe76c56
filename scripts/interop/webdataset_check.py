"""WebDataset shards written by the `webdataset` package's TarWriter (plain and gzip'ed,
keys in folders, extra members, a missing optional member, NumPy arrays saved as `.npy`
members of every dtype a schema declares, big-endian ones too) read by
`webdataset(files)` equal to `webdataset.WebDataset`'s own samples (the arrays as
`numpy.load` reads them): every key, every declared member.

Usage: webdataset_check.py --sluice BIN --work DIR
"""
import argparse
import base64
import io
import json
import os
import subprocess
import sys

import numpy as np
import webdataset as wds

PIPE = """
pipeline samples(files: glob) {
    schema {
        __key__: str, bin: bytes, cls: i64, json: str, txt: str = "(none)", score: f64 = -1.0,
        vec: f32[], mat: i32[2, 3], pix: u8[], big: f64[], ids: u64[], flags: bool[2],
    }
    webdataset(files);
}
"""


def write(work):
    shards = []
    for k, compress in enumerate([False, True, False]):
        path = os.path.join(work, f"shard-{k:06d}.tar" + (".gz" if compress else ""))
        with wds.TarWriter(path, compress=compress) as w:
            for i in range(k * 40, k * 40 + 40):
                s = {
                    "__key__": f"part{k}/{i:06d}",
                    "bin": bytes((i * 7 + j) % 256 for j in range(i % 50)),
                    "cls": i % 10,
                    "json": {"i": i, "name": f"n{i}"},
                    "extra.npy": b"not declared",
                    # Values exact in binary: sluice prints an f32 as itself, numpy widens it.
                    "vec.npy": np.arange(i % 6, dtype=np.float32) / 4 - i,
                    "mat.npy": np.arange(6, dtype=np.int32).reshape(2, 3) * (i - 60),
                    "pix.npy": np.full(i % 4, i % 256, dtype=np.uint8),
                    "big.npy": np.array([i / 8, -i], dtype=">f8"),
                    "ids.npy": np.array([2**63 + i], dtype=np.uint64),
                    "flags.npy": np.array([i % 2 == 0, i % 3 == 0]),
                }
                if i % 7:
                    s["txt"] = f"text {i} ü"
                if i % 5 == 0:
                    s["score"] = str(i / 3).encode()
                w.write(s)
        shards.append(path)
    return shards


ARRAYS = ["vec", "mat", "pix", "big", "ids", "flags"]
DTYPES = {"float32": "f32", "int32": "i32", "uint8": "u8", "float64": "f64", "uint64": "u64", "bool": "bool"}


def array(a):
    """An array as `sluice show` prints a field: its dtype, shape and values."""
    return (DTYPES[a.dtype.name], list(a.shape), a.flatten().tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    pipe = os.path.join(a.work, "w.pipe")
    open(pipe, "w").write(PIPE)
    total = 0
    for shard in write(a.work):
        want = []
        for s in wds.WebDataset(shard, shardshuffle=False, empty_check=False):
            want.append(
                {
                    "__key__": s["__key__"],
                    "bin": s["bin"],
                    "cls": int(s["cls"]),
                    "json": s["json"].decode(),
                    "txt": s["txt"].decode() if "txt" in s else "(none)",
                    "score": float(s["score"]) if "score" in s else -1.0,
                    **{f: array(np.load(io.BytesIO(s[f + ".npy"]))) for f in ARRAYS},
                }
            )
        for engine in ["interpreted", "compiled"]:
            cmd = [a.sluice, "show", pipe, "samples", "-n", "all", "--engine", engine, "--set", f"files={shard}"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"{shard} ({engine}): exit {p.returncode}: {p.stderr.strip()}")
            got = []
            for line in p.stdout.splitlines():
                j = json.loads(line)
                got.append(
                    {
                        "__key__": j["__key__"],
                        "bin": base64.b64decode(j["bin"]["base64"]),
                        "cls": j["cls"]["values"][0],
                        "json": j["json"],
                        "txt": j["txt"],
                        "score": j["score"]["values"][0],
                        **{f: (j[f]["dtype"], j[f]["shape"], j[f]["values"]) for f in ARRAYS},
                    }
                )
            if got != want:
                for i, (g, w) in enumerate(zip(got, want)):
                    if g != w:
                        sys.exit(f"{os.path.basename(shard)} ({engine}) sample {i}: sluice {g}, webdataset {w}")
                sys.exit(f"{os.path.basename(shard)} ({engine}): {len(got)} samples, webdataset reads {len(want)}")
        total += len(want)
    print(f"webdataset: 3 shards ({total} samples, {len(ARRAYS)} .npy fields) x 2 backends equal to webdataset.WebDataset's samples")


if __name__ == "__main__":
    main()
