#!/usr/bin/env python3
"""Write the main job's dataset: scikit-learn's 8x8 handwritten digits as TFRecord shards.

What it does
------------
Loads ``sklearn.datasets.load_digits()`` -- 1797 grey-scale 8x8 images of the digits 0-9,
pixel values 0..16. That loader reads the CSV that ships inside the scikit-learn package:
nothing is downloaded. With a fixed seed it makes a stratified split,
``train_test_split(test_size=360, stratify=y, random_state=0)``: 1437 train / 360 test
images, each split in shuffled order with the class proportions of the whole set.

Each image is scaled to uint8 as ``round(v * 255 / 16)`` (half rounds up; 8 -> 128),
shaped [8, 8, 1] and PNG-encoded by ``tf.io.encode_png``. Each record is a
``tf.train.Example`` with two features:

    image: bytes_list  -- the PNG (1 channel, 8x8)
    label: int64_list  -- the digit, 0..9

and is written by ``tf.io.TFRecordWriter`` (uncompressed) to ``data/`` next to this script:

    train-0000K-of-00004.tfrecord  K = 0..3; train record i (in the shuffled order) goes to
                                   shard i % 4 (360, 359, 359, 359 records)
    test-00000-of-00001.tfrecord   the 360 test records
    MANIFEST.json                  per file: records, per-class counts, bytes, sha256;
                                   per split: records and per-class counts

The output is deterministic: running the script again gives byte-identical files.

How it was run
--------------
Once, from the repository root, with the project's TensorFlow venv (``scripts/test``
creates ``.venv-tf``; scikit-learn was added to it by hand for this script only):

    .venv-tf/bin/python -m pip install -q scikit-learn
    .venv-tf/bin/python examples/digits/make_data.py

The files it wrote are committed (about 320 KB in all). Nothing runs this script, and
nothing downloads data, at build, test or training time; it is kept to document, and to
reproduce, how the data was made. ``examples/digits/digits.pipe`` reads the files.
"""

import hashlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

SEED = 0
TEST_SIZE = 360
TRAIN_SHARDS = 4
NUM_CLASSES = 10

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")


def to_uint8(images: np.ndarray) -> np.ndarray:
    """[N, 64] values 0..16 -> [N, 8, 8, 1] uint8 0..255, round(v * 255 / 16), half up."""
    assert images.min() >= 0 and images.max() <= 16
    scaled = np.floor(images.astype(np.float64) * 255.0 / 16.0 + 0.5)
    return scaled.astype(np.uint8).reshape(-1, 8, 8, 1)


def example(image: np.ndarray, label: int) -> bytes:
    png = tf.io.encode_png(tf.constant(image)).numpy()
    features = tf.train.Features(
        feature={
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
        }
    )
    # deterministic=True writes the feature map in key order (image, label); without it the
    # map's order, and so the file's bytes, can change from one run to the next.
    return tf.train.Example(features=features).SerializeToString(deterministic=True)


def write(path: str, records: list) -> None:
    with tf.io.TFRecordWriter(path) as writer:  # uncompressed
        for record in records:
            writer.write(record)


def class_counts(labels) -> dict:
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=NUM_CLASSES)
    return {str(c): int(n) for c, n in enumerate(counts)}


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main() -> int:
    digits = load_digits()
    x, y = digits.data, digits.target.astype(np.int64)
    assert x.shape == (1797, 64) and y.shape == (1797,)

    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=TEST_SIZE, stratify=y, random_state=SEED, shuffle=True
    )
    x_train, x_test = to_uint8(x_train), to_uint8(x_test)

    os.makedirs(OUT, exist_ok=True)
    files = {}  # name -> labels written to it

    shards = [([], []) for _ in range(TRAIN_SHARDS)]
    for i, (image, label) in enumerate(zip(x_train, y_train)):
        records, labels = shards[i % TRAIN_SHARDS]
        records.append(example(image, label))
        labels.append(label)
    for k, (records, labels) in enumerate(shards):
        name = f"train-{k:05d}-of-{TRAIN_SHARDS:05d}.tfrecord"
        write(os.path.join(OUT, name), records)
        files[name] = labels

    name = "test-00000-of-00001.tfrecord"
    write(os.path.join(OUT, name), [example(im, lb) for im, lb in zip(x_test, y_test)])
    files[name] = list(y_test)

    manifest = {
        "dataset": "scikit-learn load_digits (UCI optdigits test set), 8x8 grey-scale, 10 classes",
        "generator": "examples/digits/make_data.py",
        "versions": {
            "tensorflow": tf.__version__,
            "scikit-learn": sklearn.__version__,
            "numpy": np.__version__,
        },
        "split": {
            "method": f"train_test_split(test_size={TEST_SIZE}, stratify=y, random_state={SEED})",
            "train": {"records": int(len(y_train)), "classes": class_counts(y_train)},
            "test": {"records": int(len(y_test)), "classes": class_counts(y_test)},
        },
        "features": {
            "image": "bytes: PNG, uint8 [8, 8, 1], pixel = round(v * 255 / 16) of v in 0..16",
            "label": "int64: the digit, 0..9",
        },
        "compression": "none",
        "files": {
            name: {
                "records": len(labels),
                "classes": class_counts(labels),
                "bytes": os.path.getsize(os.path.join(OUT, name)),
                "sha256": sha256(os.path.join(OUT, name)),
            }
            for name, labels in sorted(files.items())
        },
    }
    with open(os.path.join(OUT, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=False)
        f.write("\n")

    for name, entry in manifest["files"].items():
        print(f"{name}: {entry['records']} records, {entry['bytes']} bytes, sha256 {entry['sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
