"""Writes the WebDataset example's shards with the real writer, the `webdataset`
package's TarWriter (run once; the shards in data/ are committed):

    .venv-torch/bin/python examples/webdataset/make.py

data/train-000000.tar, data/train-000001.tar.gz (gzip'ed): 24 samples each. A sample is
`KEY.jpg` (a 32x32 JPEG of a colored square on a gray ground, by PIL), `KEY.cls` (its
class: 0 red, 1 green, 2 blue, as text), `KEY.json` (where the square is) and
`KEY.emb.npy` (a float32[16] vector saved by numpy, TarWriter's encoding of an array).
"""
import io
import os

import numpy as np
import webdataset as wds
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
COLORS = [(220, 40, 40), (40, 200, 60), (50, 60, 220)]


def sample(i):
    cls = i % 3
    x, y = (i * 5) % 20, (i * 7) % 20
    img = Image.new("RGB", (32, 32), (128, 128, 128))
    img.paste(COLORS[cls], (x, y, x + 12, y + 12))
    jpg = io.BytesIO()
    img.save(jpg, format="JPEG", quality=90)
    emb = np.linspace(0, 1, 16, dtype=np.float32) * (cls + 1) + np.float32(i) / 64
    return {
        "__key__": f"train/{i:06d}",
        "jpg": jpg.getvalue(),
        "cls": cls,
        "json": {"x": x, "y": y, "size": 12},
        "emb.npy": emb,
    }


os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
for k, compress in enumerate([False, True]):
    name = f"train-{k:06d}.tar" + (".gz" if compress else "")
    with wds.TarWriter(os.path.join(HERE, "data", name), compress=compress) as w:
        for i in range(k * 24, k * 24 + 24):
            w.write(sample(i))
