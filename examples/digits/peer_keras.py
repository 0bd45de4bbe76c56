#!/usr/bin/env python3
"""The main job's peer: the same digits training run in TensorFlow (tf.data + Keras).

What it is
----------
The reference point that Sluice's main job (``examples/digits``: ``digits.pipe`` feeding
a small CNN through ``sluice::torch::Trainer``) is quoted against. It trains the same
network on the same TFRecord shards with the same input pipelines, built the way a
TensorFlow user would build them -- ``tf.data`` feeding ``keras.Model.fit`` -- and
reports the same figures, so that ``scripts/bench-digits`` can run both on one machine in
one run and print the ratio.

How it mirrors the Sluice job
-----------------------------
Input pipelines (``digits.pipe``):

* train: ``list_files(train-*.tfrecord, shuffle=True)`` (shard order reshuffled each
  epoch) -> ``interleave(TFRecordDataset, cycle_length=4, block_length=1)`` ->
  ``shuffle(2048, reshuffle_each_iteration=True)`` (more than the 1437 records: a full
  shuffle, different each epoch) -> ``map(parse_single_example, decode_png(channels=1),
  tf.image.resize 10x10 bilinear, tf.image.random_crop 8x8, / 255)`` with
  ``num_parallel_calls=AUTOTUNE`` -> ``batch(64)`` (the last batch short: 23 steps an
  epoch, as in the Sluice job) -> ``prefetch(AUTOTUNE)``.
* test: the one test shard in order, the same map with the centre 8x8 crop (slicing
  ``[1:9, 1:9]`` of the 10x10 image) instead of the random one, one batch of 360.

The images stay NHWC ([8, 8, 1], Keras's default layout on CPU) instead of being
transposed to CHW as the Sluice job does for libtorch.

Model and training (``examples/digits/src/main.rs``): Conv2D 32 3x3 same + relu, Conv2D
64 3x3 same + relu, MaxPool 2, Flatten (1024), Dense 128 + relu, Dropout 0.25, Dense 10
logits; sparse categorical cross-entropy from logits; Adam (beta 0.9/0.999, epsilon
1e-8 as in tch's default; Keras's own default epsilon is 1e-7) with the peak learning
rate 3e-3 decayed per epoch on the same cosine, ``lr_e = lr * 0.5 * (1 + cos(pi * e /
E))`` (a ``LearningRateScheduler`` callback); 15 epochs of batch 64; seeded with
``tf.keras.utils.set_random_seed``. The test set is evaluated after every epoch
(``validation_data``), as the Sluice job does. The weight initialisation is Keras's
(Glorot uniform), not libtorch's (Kaiming uniform); the network is otherwise the same.
``compile`` keeps Keras's default ``jit_compile="auto"``, what a Keras user gets: on a
machine whose TensorFlow sees only CPUs that resolves to no XLA (Keras 3 turns XLA off on
CPU-only machines; ``--jit-compile on`` forces it, and is about twice as slow here).

What is timed
-------------
``training: N examples in S s, R examples/s``: the wall time of ``model.fit`` (the model
already built and compiled), less the time of the per-epoch evaluations inside it
(measured with the ``on_test_begin``/``on_test_end`` callbacks), like the Sluice job's
figure, which is the sum of its training epochs' walls without the evaluations. It
includes the first epoch's tracing of the training step (and its XLA compile), as the
Sluice job's includes its first epoch. That line also gives the first epoch's time and
the rate over the later epochs. ``total T s`` is the script's wall time after ``import
tensorflow`` (the import itself, a few seconds, is reported apart). The last line is
``test accuracy: 0.NNNN`` after the last epoch. ``--json`` prints one JSON object
instead (``examples``, ``train_seconds``, ``examples_per_sec``, ``test_accuracy``, and
a few more).

How it is run
-------------
With the project's TensorFlow venv (``scripts/tf-python`` prints its interpreter), from
the repository root::

    .venv-tf/bin/python examples/digits/peer_keras.py
    .venv-tf/bin/python examples/digits/peer_keras.py --epochs 15 --batch-size 64 --json

``scripts/bench-digits`` runs it alternately with the Sluice job and prints the table.

Several workers
---------------
``--workers N --worker-index I --port P`` makes it worker ``I`` of ``N`` processes under
``tf.distribute.MultiWorkerMirroredStrategy`` (TensorFlow's multi-worker data
parallelism: gRPC between the workers on ``localhost:P`` .. ``P+N-1``, ring all-reduce
of the gradients), the peer of the Sluice job under ``mpirun -np N``: the same global
batch, split across the workers; the training files sharded by file (4 files), the test
set by record. Worker 0 reports. ``scripts/bench-dist`` starts the workers.
"""

import argparse
import glob
import json
import math
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
NUM_CLASSES = 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=15, help="passes over the 1437 training images")
    p.add_argument("--batch-size", type=int, default=64, help="training batch size")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (cosine decay)")
    p.add_argument("--seed", type=int, default=7, help="seed of the initialisation, shuffle and crops")
    p.add_argument(
        "--data",
        default=os.path.join(HERE, "data"),
        help="directory with train-*.tfrecord and test-*.tfrecord (default: the committed data)",
    )
    p.add_argument(
        "--jit-compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="Keras's jit_compile (XLA); default: Keras's own default, auto",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the text")
    p.add_argument("--workers", type=int, default=1, help="processes of a MultiWorkerMirroredStrategy job")
    p.add_argument("--worker-index", type=int, default=0, help="this process's index among --workers")
    p.add_argument("--port", type=int, default=23456, help="worker i listens on localhost:PORT+i")
    return p.parse_args()


def multi_worker(args, tf, strategy, model, train_ds, test_ds, n_train, say, started, import_seconds):
    """Trains `model` (built and compiled under `strategy`) with a custom loop: each
    step, `strategy.run` computes every replica's gradient of its part of the global
    batch (the loss averaged over the global batch) and the optimizer's
    `apply_gradients` all-reduces them across the workers. Prints what `main` prints."""
    optimizer = model.optimizer
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    dist_train = strategy.experimental_distribute_dataset(train_ds)

    @tf.function
    def train_step(batch):
        def step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = tf.nn.compute_average_loss(loss_fn(y, logits), global_batch_size=args.batch_size)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1), y), tf.float32))
            return loss, correct

        loss, correct = strategy.run(step, args=batch)
        sum_ = tf.distribute.ReduceOp.SUM
        return strategy.reduce(sum_, loss, axis=None), strategy.reduce(sum_, correct, axis=None)

    epoch_train, accuracy = [], float("nan")
    for epoch in range(args.epochs):
        optimizer.learning_rate.assign(args.lr * 0.5 * (1.0 + math.cos(math.pi * epoch / args.epochs)))
        t = time.perf_counter()
        steps, loss_sum, correct = 0, 0.0, 0.0
        for batch in dist_train:
            loss, c = train_step(batch)
            steps, loss_sum, correct = steps + 1, loss_sum + float(loss), correct + float(c)
        epoch_train.append(time.perf_counter() - t)
        hits = rows = 0
        for x, y in test_ds:
            hits += int(tf.reduce_sum(tf.cast(tf.equal(tf.argmax(model(x, training=False), -1), y), tf.int32)))
            rows += int(tf.shape(y)[0])
        accuracy = hits / max(rows, 1)
        s = epoch_train[-1]
        say(
            f"epoch {epoch + 1}: {n_train} examples in {steps} steps, {s:.2f} s, {n_train / max(s, 1e-9):.0f} "
            f"examples/s, loss {loss_sum / max(steps, 1):.4f} accuracy {correct / n_train:.4f}; test accuracy "
            f"{accuracy:.4f}"
        )
    train_seconds = sum(epoch_train)
    examples = n_train * args.epochs
    later = sum(epoch_train[1:])
    result = {
        "examples": examples,
        "train_seconds": round(train_seconds, 4),
        "examples_per_sec": round(examples / max(train_seconds, 1e-9), 1),
        "test_accuracy": round(accuracy, 4),
        "first_epoch_seconds": round(epoch_train[0], 4),
        "later_examples_per_sec": round(n_train * (len(epoch_train) - 1) / later, 1) if later > 0 else None,
        "total_seconds": round(time.perf_counter() - started, 3),
        "import_seconds": round(import_seconds, 3),
        "workers": args.workers,
    }
    if args.worker_index != 0:
        return
    if args.json:
        print(json.dumps(result), flush=True)
        return
    say(f"\ntraining: {examples} examples in {train_seconds:.2f} s, {result['examples_per_sec']:.0f} examples/s")
    say(f"test accuracy: {accuracy:.4f}")


def main():
    args = parse_args()
    # Two warnings Keras 3 gives every tf.data user: fit's `shuffle` is ignored for a
    # Dataset (this one shuffles itself), and a Dataset of unknown length "ran out of
    # data" at the end of the first epoch (that is how Keras learns the epoch's length).
    warnings.filterwarnings("ignore", message=".*`shuffle=True` was passed.*")
    warnings.filterwarnings("ignore", message=".*Your input ran out of data.*")
    if args.workers > 1:
        os.environ["TF_CONFIG"] = json.dumps(
            {
                "cluster": {"worker": [f"localhost:{args.port + i}" for i in range(args.workers)]},
                "task": {"type": "worker", "index": args.worker_index},
            }
        )
    t_import = time.perf_counter()
    import tensorflow as tf

    started = time.perf_counter()
    import_seconds = started - t_import
    out = sys.stderr if args.json else sys.stdout
    chief = args.worker_index == 0

    def say(*a):
        if chief:
            print(*a, file=out, flush=True)

    if args.workers > 1:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        strategy = tf.distribute.get_strategy()  # the default: one device, no distribution

    train_files = sorted(glob.glob(os.path.join(args.data, "train-*.tfrecord")))
    test_files = sorted(glob.glob(os.path.join(args.data, "test-*.tfrecord")))
    if not train_files or not test_files:
        sys.exit(f"no train-*.tfrecord / test-*.tfrecord under {args.data}")
    # For the examples count only (fast: 1437 small records); not part of the timing.
    n_train = sum(1 for _ in tf.data.TFRecordDataset(train_files))

    tf.keras.utils.set_random_seed(args.seed)
    autotune = tf.data.AUTOTUNE
    features = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(record):
        ex = tf.io.parse_single_example(record, features)
        image = tf.io.decode_png(ex["image"], channels=1)  # uint8 [8, 8, 1]
        image = tf.image.resize(image, [10, 10], method="bilinear")  # float32 [10, 10, 1]
        return image, ex["label"]

    def train_map(record):
        image, label = decode(record)
        image = tf.image.random_crop(image, [8, 8, 1])  # up to 2 pixels of shift each way
        return image * (1.0 / 255.0), label

    def test_map(record):
        image, label = decode(record)
        image = image[1:9, 1:9, :]  # the centre 8x8
        return image * (1.0 / 255.0), label

    train_ds = (
        tf.data.Dataset.list_files(os.path.join(args.data, "train-*.tfrecord"), shuffle=True, seed=args.seed)
        .interleave(
            tf.data.TFRecordDataset,
            cycle_length=4,
            block_length=1,
            num_parallel_calls=autotune,
        )
        .shuffle(2048, seed=args.seed, reshuffle_each_iteration=True)
        .map(train_map, num_parallel_calls=autotune)
        .batch(args.batch_size)
        .prefetch(autotune)
    )
    test_ds = tf.data.TFRecordDataset(test_files).map(test_map, num_parallel_calls=autotune).batch(360)
    if args.workers > 1:
        # One test file: shard its records, not files.
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        test_ds = test_ds.with_options(options)

    keras = tf.keras
    layers = keras.layers
    scope = strategy.scope()
    scope.__enter__()
    model = keras.Sequential(
        [
            keras.Input(shape=(8, 8, 1)),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(128, activation="relu"),
            layers.Dropout(0.25),
            layers.Dense(NUM_CLASSES),
        ]
    )
    jit = {"auto": "auto", "on": True, "off": False}[args.jit_compile]
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=args.lr, epsilon=1e-8),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=jit,
    )
    if args.workers > 1:
        # Keras 3's `fit` does not run under MultiWorkerMirroredStrategy
        # (keras-team/keras#20585): the loop TensorFlow's guide writes instead.
        multi_worker(args, tf, strategy, model, train_ds, test_ds, n_train, say, started, import_seconds)
        scope.__exit__(None, None, None)
        return

    def schedule(epoch, _lr):
        return args.lr * 0.5 * (1.0 + math.cos(math.pi * epoch / args.epochs))

    class Timing(keras.callbacks.Callback):
        """Per-epoch training time (evaluation excluded), steps, and a line an epoch."""

        def __init__(self):
            super().__init__()
            self.epoch_train = []  # seconds of training, per epoch
            self.eval_seconds = 0.0
            self.steps = 0
            self.test_accuracy = float("nan")

        def on_epoch_begin(self, epoch, logs=None):
            self.t_epoch = time.perf_counter()
            self.t_test = None
            self.steps = 0

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1

        def on_test_begin(self, logs=None):
            self.t_test = time.perf_counter()
            self.epoch_train.append(self.t_test - self.t_epoch)

        def on_test_end(self, logs=None):
            self.eval_seconds += time.perf_counter() - self.t_test

        def on_epoch_end(self, epoch, logs=None):
            if self.t_test is None:  # no evaluation this epoch
                self.epoch_train.append(time.perf_counter() - self.t_epoch)
            logs = logs or {}
            s = self.epoch_train[-1]
            self.test_accuracy = logs.get("val_accuracy", float("nan"))
            say(
                f"epoch {epoch + 1}: {n_train} examples in {self.steps} steps, {s:.2f} s, "
                f"{n_train / max(s, 1e-9):.0f} examples/s, loss {logs.get('loss', float('nan')):.4f} "
                f"accuracy {logs.get('accuracy', float('nan')):.4f}; test loss "
                f"{logs.get('val_loss', float('nan')):.4f} accuracy {self.test_accuracy:.4f}"
            )

    say(
        f"digits (Keras {keras.__version__}, TensorFlow {tf.__version__}): {args.data} -> a CNN on CPU"
        f"{f' in each of {args.workers} workers (MultiWorkerMirroredStrategy)' if args.workers > 1 else ''}, "
        f"{args.epochs} epochs, batch {args.batch_size}, jit_compile={args.jit_compile} "
        f"(XLA {'on' if model.jit_compile else 'off'})"
    )
    timing = Timing()
    t_fit = time.perf_counter()
    model.fit(
        train_ds,
        epochs=args.epochs,
        validation_data=test_ds,
        callbacks=[keras.callbacks.LearningRateScheduler(schedule), timing],
        verbose=0,
    )
    fit_seconds = time.perf_counter() - t_fit
    scope.__exit__(None, None, None)
    train_seconds = fit_seconds - timing.eval_seconds
    examples = n_train * args.epochs
    rate = examples / max(train_seconds, 1e-9)
    first = timing.epoch_train[0] if timing.epoch_train else float("nan")
    later = sum(timing.epoch_train[1:])
    later_rate = n_train * (len(timing.epoch_train) - 1) / later if later > 0 else float("nan")
    total = time.perf_counter() - started
    accuracy = float(timing.test_accuracy)

    if args.json and chief:
        print(
            json.dumps(
                {
                    "examples": examples,
                    "train_seconds": round(train_seconds, 4),
                    "examples_per_sec": round(rate, 1),
                    "test_accuracy": round(accuracy, 4),
                    "first_epoch_seconds": round(first, 4),
                    "later_examples_per_sec": round(later_rate, 1),
                    "fit_seconds": round(fit_seconds, 4),
                    "eval_seconds": round(timing.eval_seconds, 4),
                    "total_seconds": round(total, 3),
                    "import_seconds": round(import_seconds, 3),
                    "jit_compile": args.jit_compile,
                    "xla": bool(model.jit_compile),
                }
            ),
            flush=True,
        )
        return
    say(
        f"\ntraining: {examples} examples in {train_seconds:.2f} s, {rate:.0f} examples/s; "
        f"epoch 1 {first:.2f} s (tracing the step), later epochs {later_rate:.0f} examples/s; "
        f"model.fit {fit_seconds:.2f} s of which {timing.eval_seconds:.2f} s evaluating"
    )
    say(f"total {total:.1f} s (after importing TensorFlow, {import_seconds:.1f} s)")
    say(f"test accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
