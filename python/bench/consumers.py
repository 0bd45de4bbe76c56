"""One measurement of `scripts/bench-python`: a bench pipeline (examples/bench) consumed
from Python for one epoch after a warm-up pass, printing one JSON line (`records_per_s`,
`peak_rss_mb`), by

  sluice      ``sluice.Pipeline`` (torch tensors over Sluice's buffers): EPOCHS passes
              (default 3) timed from the first batch, the first included, as
              ``sluice run --epochs 3 --json`` times them; or
  dataloader  PyTorch's ``DataLoader(num_workers=2)`` over an ``IterableDataset`` that
              reads the TFRecord shards (split between the workers), parses each
              ``tf.train.Example`` (a small protobuf reader here: no TensorFlow) and does
              the same per-record work in PIL and torch: ``jpeg`` decodes with PIL,
              resizes bilinearly to 112x112 and normalises with ImageNet's mean/std;
              ``image_raw`` reshapes the 64x64x3 bytes and scales to 0..1. Batches of 128
              (jpeg) and 256 (image_raw), as the pipelines.

    python consumers.py sluice|dataloader jpeg|image_raw DIR [EPOCHS]
"""

import glob
import io
import json
import resource
import struct
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
BATCH = {"jpeg": 128, "image_raw": 256}


def varint(b: bytes, i: int):
    shift = result = 0
    while True:
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if c < 0x80:
            return result, i
        shift += 7


def fields(b: bytes):
    """(field number, wire type, value) of a protobuf message (length-delimited values as
    bytes, varints as ints)."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        wt = key & 7
        if wt == 2:
            n, i = varint(b, i)
            yield key >> 3, wt, b[i : i + n]
            i += n
        elif wt == 0:
            v, i = varint(b, i)
            yield key >> 3, wt, v
        elif wt == 5:
            yield key >> 3, wt, b[i : i + 4]
            i += 4
        else:
            yield key >> 3, wt, b[i : i + 8]
            i += 8


def example(record: bytes) -> dict:
    """`tf.train.Example` → {name: bytes | [int]} (bytes_list's first value, int64_list)."""
    out = {}
    for _, _, features in fields(record):
        for _, _, entry in fields(features):
            name, value = None, None
            for num, _, v in fields(entry):
                if num == 1:
                    name = v.decode()
                else:
                    for kind, _, lst in fields(v):
                        if kind == 1:  # bytes_list
                            value = next(x for n, _, x in fields(lst) if n == 1)
                        elif kind == 3:  # int64_list (packed or not)
                            ints = []
                            for n, wt, x in fields(lst):
                                if wt == 2:
                                    j = 0
                                    while j < len(x):
                                        val, j = varint(x, j)
                                        ints.append(val)
                                else:
                                    ints.append(x)
                            value = ints
            out[name] = value
    return out


def records(path: str):
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        yield data[i + 12 : i + 12 + n]
        i += 16 + n


MEAN = torch.tensor([0.485, 0.456, 0.406])
STD = torch.tensor([0.229, 0.224, 0.225])


class Records(torch.utils.data.IterableDataset):
    def __init__(self, kind: str, files: list):
        self.kind, self.files = kind, files

    def __iter__(self):
        from PIL import Image

        info = torch.utils.data.get_worker_info()
        mine = self.files[info.id :: info.num_workers] if info else self.files
        for path in mine:
            for r in records(path):
                e = example(r)
                label = e["label"][0]
                if self.kind == "jpeg":
                    img = Image.open(io.BytesIO(e["image"])).convert("RGB").resize((112, 112), Image.BILINEAR)
                    x = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(112, 112, 3)
                    x = (x.float() / 255.0 - MEAN) / STD
                else:
                    x = torch.frombuffer(bytearray(e["image"]), dtype=torch.uint8).view(64, 64, 3).float() / 255.0
                yield x, label


def batches(kind: str, data: str, consumer: str):
    files = sorted(glob.glob(f"{data}/*.tfrecord"))
    loader = torch.utils.data.DataLoader(
        Records(kind, files), batch_size=BATCH[kind], num_workers=2, persistent_workers=True
    )
    return lambda: iter(loader)


def main() -> None:
    consumer, kind, data = sys.argv[1:4]
    torch.set_num_threads(1)
    if consumer == "sluice":
        import sluice

        epochs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
        p = sluice.Pipeline(ROOT / "examples" / "bench" / f"{kind}.pipe", files=f"{data}/*.tfrecord", epochs=epochs)
        start, n = time.perf_counter(), 0
        for b in p:
            n += int(b["label"].shape[0])
        took = time.perf_counter() - start
        report(consumer, kind, n, took)
        return
    epoch = batches(kind, data, consumer)
    for _ in epoch():  # warm-up pass (and the first build of the Sluice library)
        pass
    start, n = time.perf_counter(), 0
    for x, y in epoch():
        n += int(y.shape[0])
    took = time.perf_counter() - start
    report(consumer, kind, n, took)


def report(consumer: str, kind: str, n: int, took: float) -> None:
    print(json.dumps({
        "consumer": consumer, "pipeline": kind, "records": n, "seconds": took,
        "records_per_s": n / took, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


if __name__ == "__main__":
    main()
