"""The main job with its preprocessing on Ray: examples/digits/digits.pipe's training
pipeline runs as `--workers` Ray actors (``sluice.ray.Loader``: each a shard of the
pipeline in the engine the wheel ships, no Rust toolchain on the workers), feeding the
same small CNN as train_digits.py in a plain PyTorch loop.

    .venv-torch/bin/python examples/python/train_digits_ray.py [--workers 2] [--address ADDR]

Without ``--address`` (or ``RAY_ADDRESS``) it starts a Ray instance on this machine.
Each epoch prints its examples/s and loss; the end prints the loader's statistics (per
worker records/s, the slowest, the data-stall share) and, last, ``test accuracy:
0.NNNN`` (>= 0.95, as the Rust job and train_digits.py). Under ``torch.distributed``
each rank gets its own workers' batches (rank r of M: workers r, r + M, ...).
"""

import argparse
import math
import os
import sys
import time
from pathlib import Path

import ray
import torch
import torch.nn.functional as F

import sluice
import sluice.ray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_digits import PIPE, ROOT, Net  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2, help="Ray actors running the pipeline's shards")
    ap.add_argument("--address", default=os.environ.get("RAY_ADDRESS"), help="a Ray cluster (default: a new local one)")
    ap.add_argument("--data", default=str(ROOT / "examples" / "digits" / "data"))
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    if args.address:
        ray.init(address=args.address, logging_level="warning", log_to_driver=False)
    else:
        ray.init(num_cpus=max(2, args.workers), include_dashboard=False, logging_level="warning", log_to_driver=False)

    # Each worker's batches are its shard's batches of `batch_size`; the loader takes
    # them in turn, so an epoch has every training record once.
    train = sluice.ray.Loader(
        PIPE, "digits_train", num_workers=args.workers, num_cpus=1,
        files=f"{args.data}/train-*.tfrecord", batch_size=args.batch_size, seed=args.seed,
    )
    test = sluice.Pipeline(PIPE, "digits_test", files=f"{args.data}/test-*.tfrecord")
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    examples, train_seconds = 0, 0.0
    for epoch in range(args.epochs):
        for g in opt.param_groups:  # cosine decay over the epochs, as the Rust job
            g["lr"] = args.lr * 0.5 * (1.0 + math.cos(math.pi * epoch / args.epochs))
        model.train()
        start, seen, loss_sum = time.perf_counter(), 0, 0.0
        for batch in train:  # one epoch of this rank's workers, in a fixed order
            x, y = batch["image"], batch["label"]
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += y.shape[0]
            loss_sum += loss.item() * y.shape[0]
        took = time.perf_counter() - start
        examples, train_seconds = examples + seen, train_seconds + took
        print(f"epoch {epoch + 1}/{args.epochs}: {seen} examples, {seen / took:.0f} examples/s, loss {loss_sum / seen:.4f}")
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in test:
            correct += int((model(batch["image"]).argmax(1) == batch["label"]).sum())
            total += batch["label"].shape[0]
    stats = train.stats()
    print(f"\ntraining pipeline (digits_train) on {args.workers} Ray workers: {stats['records']} records, "
          f"{stats['records_per_sec']:.0f} records/s, data stall {stats['wait_share']:.1%}, slowest worker {stats['slowest_worker']}")
    for w in stats["workers"]:
        print(f"  worker {w['worker']}: {w['records']} records, {w['records_per_sec']:.0f} records/s of its own time, {w['restarts']} restarts")
    print(f"training: {examples} examples in {train_seconds:.2f} s, {examples / train_seconds:.0f} examples/s")
    train.close()
    ray.shutdown()
    print(f"test accuracy: {correct / total:.4f}")


if __name__ == "__main__":
    main()
