"""The main job from Python: examples/digits/digits.pipe (the Rust main job's pipelines,
compiled by Sluice) feeding the same small CNN in a plain PyTorch loop.

    .venv-torch/bin/python examples/python/train_digits.py [--epochs 15] [--lr 3e-3]

Each epoch prints its examples/s and loss; the end prints the training pipeline's
statistics and, last, ``test accuracy: 0.NNNN`` (the Rust job reaches >= 0.95, and so
does this). With ``torch.distributed`` initialised (``torchrun``), each rank reads its
shard (``shard(workers, worker)`` of the pipeline) without any change here.
"""

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import sluice

ROOT = Path(__file__).resolve().parents[2]
PIPE = ROOT / "examples" / "digits" / "digits.pipe"


class Net(nn.Module):
    """Two 3x3 convolutions, a 2x2 max-pool and two fully connected layers (as the Rust
    job's `Net`)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.dropout(F.relu(self.fc1(x.flatten(1))), 0.25, self.training)
        return self.fc2(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", default=str(ROOT / "examples" / "digits" / "data"))
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    # One libtorch thread, as the Rust job's trainer gives each replica: the pipeline runs
    # its own threads beside it.
    torch.set_num_threads(1)

    train = sluice.Pipeline(
        PIPE, "digits_train", files=f"{args.data}/train-*.tfrecord", batch_size=args.batch_size, seed=args.seed
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
        for batch in train:  # one pass: a dict of tensors over Sluice's buffers
            x, y = batch["image"], batch["label"]
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += y.shape[0]
            loss_sum += float(loss) * y.shape[0]
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
    print(f"\ntraining pipeline (digits_train): {stats['records']} records, bottleneck {stats['bottleneck']}")
    print(f"training: {examples} examples in {train_seconds:.2f} s, {examples / train_seconds:.0f} examples/s")
    print(f"test accuracy: {correct / total:.4f}")


if __name__ == "__main__":
    main()
