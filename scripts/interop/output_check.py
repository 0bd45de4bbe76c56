"""What `sluice run --output DIR --format parquet|webdataset` writes, read back by the real
readers equal to `sluice show -n all` of the same pipeline.

The pipeline reads a table pyarrow writes (parquet_check.py's columns: every type, nulls
taking the schema's defaults) and adds a 2x2 tensor. Its elements are exported to 2
Parquet files (zstd, row groups of 8) and to 2 gzip'ed WebDataset shards, dealt
round-robin. pyarrow (`pq.read_table`) must read each row back with the Arrow types the
README promises (`fixed_size_list<float>[4]`, `list<int32>`, `uint8`, `bool`, `string`,
`binary`, the tensor's shape in the field's metadata); `webdataset.WebDataset(...).decode()`
each sample: numbers as their text, `str` and `bytes` as they are, lists and tensors as
`.npy` arrays of the right dtype and shape, keys `000000000`, `000000001`, ...

Usage: output_check.py --sluice BIN --work DIR
Prints `output: N rows x 2 formats equal` and exits 0, or names the first difference.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parquet_check  # noqa: E402
from parquet_check import arrow_table, f32, got  # noqa: E402

# parquet_check.py's pipeline (its schema and defaults), with a 2x2 tensor added.
PIPE = parquet_check.PIPE.replace("pipeline table(", "pipeline rows(").replace(
    "parquet(files);", "parquet(files);\n    map { m = reshape(x * 2.0, [2, 2]); }"
)
assert "map { m = " in PIPE and "pipeline rows(" in PIPE

ARROW_TYPES = {
    "id": "int64",
    "x": "fixed_size_list<item: float not null>[4]",
    "score": "double",
    "tokens": "list<item: int32 not null>",
    "name": "string",
    "blob": "binary",
    "flag": "bool",
    "small": "uint8",
    "count": "int64",
    "m": "fixed_size_list<item: float not null>[4]",
}


def fail(what):
    print(f"output: {what}", file=sys.stderr)
    sys.exit(1)


def shown(a, pipe, files):
    out = subprocess.run(
        [a.sluice, "show", pipe, "--set", f"files={files}", "-n", "all", "--engine", "interpreted"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        row = got(line)
        row["m"] = json.loads(line)["m"]["values"]
        rows.append(row)
    return rows


def export(a, pipe, files, out, *flags):
    subprocess.run(
        [a.sluice, "run", pipe, "--set", f"files={files}", "--output", out, "--shards", "2",
         "--engine", "interpreted", *flags],
        check=True,
        capture_output=True,
        text=True,
    )
    return sorted(glob.glob(os.path.join(out, "rows-*")))


def dealt(shards):
    """Rows of round-robin shards, back in the order written."""
    out = []
    for i in range(max(len(s) for s in shards)):
        out.extend(s[i] for s in shards if i < len(s))
    return out


def compare(kind, want, have):
    if len(want) != len(have):
        fail(f"{kind}: {len(have)} rows read back, {len(want)} shown")
    for i, (w, h) in enumerate(zip(want, have)):
        for k, wv in w.items():
            hv = h[k]
            if k in ("x", "m"):
                ok = len(wv) == len(hv) and all(f32(p) == f32(q) for p, q in zip(wv, hv))
            elif k == "score":
                ok = float(wv) == float(hv)
            else:
                ok = wv == hv
            if not ok:
                fail(f"{kind}: row {i}: `{k}` is {hv!r}, sluice show gives {wv!r}")


def check_parquet(files, want):
    shards = []
    for f in files:
        t = pq.read_table(f)
        for name, ty in ARROW_TYPES.items():
            if str(t.schema.field(name).type) != ty:
                fail(f"{f}: `{name}` is {t.schema.field(name).type}, expected {ty}")
        meta = t.schema.field("m").metadata or {}
        if meta.get(b"sluice.shape") != b"[2, 2]":
            fail(f"{f}: `m` has the metadata {meta}, expected sluice.shape [2, 2]")
        if pq.ParquetFile(f).metadata.num_row_groups != -(-t.num_rows // 8):
            fail(f"{f}: {pq.ParquetFile(f).metadata.num_row_groups} row groups for {t.num_rows} rows of 8")
        shards.append(t.to_pylist())
    compare("parquet", want, dealt(shards))


def check_webdataset(files, want):
    import webdataset as wds

    shards = []
    for f in files:
        rows = []
        for s in wds.WebDataset([f], shardshuffle=False).decode():
            if s["x.npy"].dtype != np.float32 or s["m.npy"].shape != (2, 2) or s["tokens.npy"].dtype != np.int32:
                fail(f"{f}: sample {s['__key__']}: arrays {s['x.npy'].dtype} {s['m.npy'].shape} {s['tokens.npy'].dtype}")
            rows.append(
                {
                    "key": s["__key__"],
                    "id": s["id"],  # `id` is an integer extension to webdataset
                    "x": s["x.npy"].tolist(),
                    "score": float(s["score"]),
                    "tokens": s["tokens.npy"].tolist(),
                    "name": s["name"].decode(),
                    "blob": s["blob"],
                    "flag": s["flag"] == b"1",
                    "small": int(s["small"]),
                    "count": int(s["count"]),
                    "m": s["m.npy"].reshape(-1).tolist(),
                }
            )
        shards.append(rows)
    have = dealt(shards)
    keys = [r.pop("key") for r in have]
    if keys != [f"{i:09}" for i in range(len(have))]:
        fail(f"webdataset: keys {keys[:3]}..., expected 000000000, 000000001, ...")
    compare("webdataset", want, have)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    pipe = os.path.join(a.work, "rows.pipe")
    with open(pipe, "w") as f:
        f.write(PIPE)
    table = os.path.join(a.work, "table.parquet")
    pq.write_table(arrow_table(), table, row_group_size=16)
    want = shown(a, pipe, table)
    pq_files = export(a, pipe, table, os.path.join(a.work, "pq"), "--format", "parquet",
                      "--compression", "zstd", "--row-group", "8")
    check_parquet(pq_files, want)
    wds_files = export(a, pipe, table, os.path.join(a.work, "wds"), "--format", "webdataset",
                       "--compression", "gzip")
    check_webdataset(wds_files, want)
    print(f"output: {len(want)} rows x 2 formats equal")


if __name__ == "__main__":
    main()
