"""Fixtures of the Python package's tests (run by scripts/test in .venv-torch): the
`sluice` tool, small data made by `sluice gen`, and `sluice show` to compare with."""

import base64
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch

import sluice

ROOT = Path(__file__).resolve().parents[2]

# The tests that do not name an engine are of the compiled library (test_engine.py names
# it): `auto` would run many of their pipelines in the engine.
os.environ.setdefault("SLUICE_ENGINE", "compiled")


@pytest.fixture(scope="session")
def tool() -> str:
    return sluice.sluice_binary()


@pytest.fixture(scope="session")
def data(tool, tmp_path_factory) -> Path:
    """Small datasets: tabular (600 records, 3 files), image (96, 2), jpeg (150, 2), and
    two CSV files."""
    d = tmp_path_factory.mktemp("data")
    for kind, records, shards in (("tabular", 600, 3), ("image", 96, 2), ("jpeg", 150, 2)):
        subprocess.run(
            [tool, "gen", kind, "--records", str(records), "--shards", str(shards), "--out", str(d / kind)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    subprocess.run([tool, "index", str(d / "tabular")], check=True, stdout=subprocess.DEVNULL)
    (d / "csv").mkdir()
    (d / "csv" / "a.csv").write_text(
        "name,age,score,member\nada,36,1.5,true\nbob,7,-0.25,false\nçé,99,,true\n"
        "dan,1,2e-5,false\neve,40,NaN,true\n"
    )
    (d / "semi").mkdir()
    (d / "semi" / "p.csv").write_text("1;0.5;x\n2;-1.25;\n3;3;zz\n")
    return d


def show(tool: str, path, name: str, params: dict) -> list:
    """Every element of one pass as `sluice show -n all` prints it."""
    args = [tool, "show", str(path), name, "-n", "all"]
    for k, v in params.items():
        args += ["--set", f"{k}={v}"]
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE).stdout.decode()
    return [json.loads(line) for line in out.splitlines()]


TORCH = {
    "bool": torch.bool, "u8": torch.uint8, "u16": torch.uint16, "u32": torch.uint32, "u64": torch.uint64,
    "i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
    "f32": torch.float32, "f64": torch.float64,
}
NAME = {v: k for k, v in TORCH.items()}


def _number(x):
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(x, x) if isinstance(x, str) else x


def _values(values: list) -> tuple:
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in values)


def normal(value, shown=None):
    """A field as a comparable value: numbers as (dtype, shape, values of their own type);
    `shown` is the `sluice show` JSON of the same field (it says which empty lists are of
    bytes)."""
    if isinstance(value, torch.Tensor):
        return (NAME[value.dtype], tuple(value.shape), _values(value.flatten().tolist()))
    if isinstance(value, dict) and "values" in value:
        t = torch.tensor([_number(v) for v in value["values"]], dtype=TORCH[value["dtype"]])
        return (value["dtype"], tuple(value["shape"]), _values(t.tolist()))
    if isinstance(value, dict) and value.get("dtype") == "bytes":
        b = value["base64"]
        return ("bytes", [base64.b64decode(x) for x in b] if isinstance(b, list) else base64.b64decode(b))
    if isinstance(value, bytes):
        return ("bytes", value)
    if isinstance(value, list) and (
        any(isinstance(x, bytes) for x in value) or (isinstance(shown, dict) and shown.get("dtype") == "bytes")
    ):
        return ("bytes", list(value))
    return value


def normal_element(element, shown=None):
    if isinstance(element, dict) and not ("values" in element or element.get("dtype") == "bytes"):
        return {k: normal(v, (shown or {}).get(k)) for k, v in element.items()}
    return normal(element, shown)


def rows(element: dict) -> list:
    """A normal batch's rows (for pipelines that read in any order)."""
    out = []
    n = None
    for v in element.values():
        n = v[1][0] if isinstance(v, tuple) and v[0] != "bytes" else len(v[1] if isinstance(v, tuple) else v)
        break
    for i in range(n):
        row = {}
        for k, v in element.items():
            if isinstance(v, tuple) and v[0] == "bytes":
                row[k] = v[1][i]
            elif isinstance(v, tuple):
                size = len(v[2]) // v[1][0] if v[1][0] else 0
                row[k] = (v[0], v[1][1:], v[2][i * size : (i + 1) * size])
            else:
                row[k] = v[i]
        out.append(repr(sorted(row.items())))
    return out
