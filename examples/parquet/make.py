"""Writes this example's Parquet files with the real writers (run once; the files are
committed): python examples/parquet/make.py

data/features-{0,1}.parquet: pyarrow, zstd, row groups of 32 rows: `id: int64`,
    `x: fixed_size_list<float>[8]`, `label: int32`, `split: dictionary<int8, string>`.
data/reviews.parquet: Hugging Face `datasets` (`Dataset.to_parquet`): `text: string`,
    `label: int64`, `score: double` (null in a few rows).
"""
import os

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(HERE, exist_ok=True)

for shard in range(2):
    ids = list(range(shard * 100, shard * 100 + 100))
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([[((i * 7 + k) % 13) / 13 for k in range(8)] for i in ids], pa.list_(pa.float32(), 8)),
            "label": pa.array([i % 3 for i in ids], pa.int32()),
            "split": pa.array(["train" if i % 10 else "val" for i in ids]).dictionary_encode(),
        }
    )
    pq.write_table(table, os.path.join(HERE, f"features-{shard}.parquet"), compression="zstd", row_group_size=32)

words = ["good", "bad", "fine", "great", "awful", "ok", "superb", "meh"]
reviews = {
    "text": [" ".join(words[(i * k) % 8] for k in range(1, 2 + i % 5)) for i in range(60)],
    "label": [i % 2 for i in range(60)],
    "score": [None if i % 9 == 4 else (i % 5) + 0.5 for i in range(60)],
}
datasets.Dataset.from_dict(reviews).to_parquet(os.path.join(HERE, "reviews.parquet"))
