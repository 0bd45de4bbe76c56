"""scripts/test-wheel's Python side, run by the fresh venv's python with no cargo on
PATH and an empty HOME: the README's example as written (its code block, read from
README.md), then `wheel.pipe`; both must run in the engine the wheel ships.
Arguments: the repository root, the data directory, and the number of rows that
`sluice show -n all` printed of `wheel.pipe`."""

import os
import re
import sys

import sluice

root, data, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.chdir(root)
readme = open("README.md", encoding="utf-8").read()
example = re.search(r"## From Python.*?```python\n(.*?)```", readme, re.S).group(1)
scope = {}
exec(compile(example, "README.md (the Python example)", "exec"), scope)
train = scope["train"]
assert train.engine == "interpreted" and train.stats()["engine"] == "interpreted", train.stats()
assert train.stats()["records"] == 1437, train.stats()
print(f"README example: {train!r}: {train.stats()['records']} records, engine {train.stats()['engine']}")

p = sluice.Pipeline(os.path.join(root, "python/tests/wheel/wheel.pipe"), files=f"{data}/*.tfrecord")
shapes = [tuple(b["x"].shape) for b in p]
assert p.engine == "interpreted" and p.stats()["engine"] == "interpreted", p.stats()
assert sum(s[0] for s in shapes) == rows > 0 and all(s[1:] == (16,) for s in shapes), (shapes, rows)
assert p.library_path is None
print(f"wheel.pipe: {len(shapes)} batches, {rows} rows, engine {p.stats()['engine']}")
