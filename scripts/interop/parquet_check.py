"""Parquet written by the real writers, read by `parquet(files)` equal to pyarrow's own
reading of the same file: every row, every column, nulls taking the schema defaults.

Writers: pyarrow (each compression Spark and pyarrow write: none, snappy, zstd, gzip,
lz4; dictionary encoding on and off; data pages v1 and v2; small row groups), Hugging
Face `datasets` (`Dataset.to_parquet`) and polars (`DataFrame.write_parquet`). Each file
is shown whole (`sluice show -n all`) by the engine and by the compiled runner (one
runner build: the files are a `--set`), and each line compared to the row pyarrow reads
(`pq.read_table(f).to_pylist()`): integers and doubles exactly, floats as float32.

Usage: parquet_check.py --sluice BIN --work DIR
Prints `parquet: N files x 2 backends equal` and exits 0, or names the first difference.
"""
import argparse
import base64
import json
import os
import struct
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

PIPE = """
pipeline table(files: glob) {
    schema {
        id: i64,
        x: f32[4],
        score: f64 = -1.5,
        tokens: i32[],
        name: str = "none",
        blob: bytes,
        flag: bool,
        small: u8,
        count: i64,
    }
    parquet(files);
}
"""
DEFAULTS = {"score": -1.5, "name": "none"}
ROWS = 50


def columns():
    ids = list(range(ROWS))
    return {
        "id": ids,
        "x": [[i * 0.1, -i / 3, 1e30 if i == 7 else i * 1e-7, float(i)] for i in ids],
        "score": [None if i % 6 == 3 else i / 7 for i in ids],
        "tokens": [list(range(i, i + i % 4)) for i in ids],
        "name": [None if i % 5 == 4 else ["α", "beta", "", "日本"][i % 4] for i in ids],
        "blob": [bytes([i, 255 - i, 0]) * (i % 3) for i in ids],
        "flag": [i % 3 == 0 for i in ids],
        "small": [(i * 91) % 256 for i in ids],
        "count": [(-1) ** i * i * 10**12 for i in ids],
    }


def arrow_table():
    c = columns()
    return pa.table(
        {
            "id": pa.array(c["id"], pa.int64()),
            "x": pa.array(c["x"], pa.list_(pa.float32(), 4)),
            "score": pa.array(c["score"], pa.float64()),
            "tokens": pa.array(c["tokens"], pa.list_(pa.int32())),
            "name": pa.array(c["name"], pa.string()),
            "blob": pa.array(c["blob"], pa.binary()),
            "flag": pa.array(c["flag"], pa.bool_()),
            "small": pa.array(c["small"], pa.uint8()),
            "count": pa.array(c["count"], pa.int64()),
            "ignored": pa.array([f"not read {i}" for i in range(ROWS)], pa.string()),
        }
    )


def write_all(work):
    files = []
    t = arrow_table()
    for comp in ["none", "snappy", "zstd", "gzip", "lz4"]:
        for dictionary in [True, False]:
            for version in ["1.0", "2.0"]:
                name = f"pyarrow-{comp}-{'dict' if dictionary else 'plain'}-v{version}.parquet"
                path = os.path.join(work, name)
                pq.write_table(
                    t,
                    path,
                    compression=comp,
                    use_dictionary=dictionary,
                    data_page_version=version,
                    row_group_size=16,
                )
                files.append(path)
    # pandas' categorical: a dictionary<int8, string> column, stored with its Arrow schema.
    cat = t.set_column(t.schema.get_field_index("name"), "name", t.column("name").dictionary_encode())
    path = os.path.join(work, "pyarrow-categorical.parquet")
    pq.write_table(cat, path)
    files.append(path)

    import datasets

    c = columns()
    features = datasets.Features(
        {
            "id": datasets.Value("int64"),
            "x": datasets.List(datasets.Value("float32"), length=4)
            if hasattr(datasets, "List")
            else datasets.Sequence(datasets.Value("float32"), length=4),
            "score": datasets.Value("float64"),
            "tokens": datasets.List(datasets.Value("int32"))
            if hasattr(datasets, "List")
            else datasets.Sequence(datasets.Value("int32")),
            "name": datasets.Value("string"),
            "blob": datasets.Value("binary"),
            "flag": datasets.Value("bool"),
            "small": datasets.Value("uint8"),
            "count": datasets.Value("int64"),
        }
    )
    ds = datasets.Dataset.from_dict(c, features=features)
    path = os.path.join(work, "datasets.parquet")
    ds.to_parquet(path)
    files.append(path)

    import polars as pl

    df = pl.DataFrame(
        {
            "id": pl.Series(c["id"], dtype=pl.Int64),
            "x": pl.Series(c["x"], dtype=pl.Array(pl.Float32, 4)),
            "score": pl.Series(c["score"], dtype=pl.Float64),
            "tokens": pl.Series(c["tokens"], dtype=pl.List(pl.Int32)),
            "name": pl.Series(c["name"], dtype=pl.String),
            "blob": pl.Series(c["blob"], dtype=pl.Binary),
            "flag": pl.Series(c["flag"], dtype=pl.Boolean),
            "small": pl.Series(c["small"], dtype=pl.UInt8),
            "count": pl.Series(c["count"], dtype=pl.Int64),
        }
    )
    for comp in ["zstd", "snappy", "lz4"]:
        path = os.path.join(work, f"polars-{comp}.parquet")
        df.write_parquet(path, compression=comp, row_group_size=20)
        files.append(path)
    return files


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def expected(row):
    out = {}
    for k in ["id", "x", "score", "tokens", "name", "blob", "flag", "small", "count"]:
        v = row[k]
        if v is None:
            v = DEFAULTS[k]
        out[k] = v
    return out


def got(line):
    j = json.loads(line)
    v = lambda k: j[k]["values"]
    return {
        "id": v("id")[0],
        "x": v("x"),
        "score": v("score")[0],
        "tokens": v("tokens"),
        "name": j["name"],
        "blob": base64.b64decode(j["blob"]["base64"]),
        "flag": v("flag")[0],
        "small": v("small")[0],
        "count": v("count")[0],
    }


def same(want, have):
    for k, w in want.items():
        h = have[k]
        if k == "x":
            if len(w) != len(h) or any(f32(a) != f32(b) for a, b in zip(w, h)):
                return k
        elif k == "score":
            if float(w) != float(h):
                return k
        elif w != h:
            return k
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    pipe = os.path.join(a.work, "table.pipe")
    with open(pipe, "w") as f:
        f.write(PIPE)
    files = write_all(a.work)
    for path in files:
        rows = pq.read_table(path).to_pylist()
        for engine in ["interpreted", "compiled"]:
            cmd = [a.sluice, "show", pipe, "table", "-n", "all", "--engine", engine, "--set", f"files={path}"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"{os.path.basename(path)} ({engine}): exit {p.returncode}: {p.stderr.strip()}")
            lines = p.stdout.splitlines()
            if len(lines) != len(rows):
                sys.exit(f"{os.path.basename(path)} ({engine}): {len(lines)} rows, pyarrow reads {len(rows)}")
            for i, (line, row) in enumerate(zip(lines, rows)):
                want, have = expected(row), got(line)
                k = same(want, have)
                if k is not None:
                    sys.exit(f"{os.path.basename(path)} ({engine}) row {i}: `{k}`: sluice {have[k]!r}, pyarrow {want[k]!r}")
    print(f"parquet: {len(files)} files x 2 backends equal to pyarrow's reading ({ROWS} rows each)")


if __name__ == "__main__":
    main()
