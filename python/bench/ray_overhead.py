"""The cost of going through Ray (sluice.ray.Loader) against a local sluice.Pipeline, on
examples/bench/jpeg.pipe sharded (written beside the data: `workers`/`worker`
parameters, a deterministic read and `shard(workers, worker, remainder: drop)` right
after it, so each worker decodes only its records; a no-op at 1 worker):
records/s of the trainer's side (it only takes the batches) over `epochs` epochs, the
first included, each consumer in a fresh process. scripts/bench-ray runs it.

    python ray_overhead.py local|ray DATA_DIR EPOCHS [WORKERS] [IN_FLIGHT]

Prints one JSON line: consumer, workers, records, seconds, records_per_sec, and for ray
the loader's wait_share, the peak pinned/used object-store bytes and bound_bytes. The
Ray instance's object store is SLUICE_BENCH_RAY_STORE_MB (256) MB: a store a few times
the loader's bound reuses its pages (a fresh page costs a fault on every batch copied
into it).
"""

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sharded_pipe(data: Path) -> Path:
    """examples/bench/jpeg.pipe, sharded record by record after a deterministic read."""
    text = (ROOT / "examples" / "bench" / "jpeg.pipe").read_text()
    text = text.replace("pipeline jpeg(files: glob)", "pipeline jpeg(files: glob, workers: u32 = 1, worker: u32 = 0)")
    read = "    tfrecords(files, cycle: 4, parallel: auto, deterministic: false);\n"
    assert read in text, "examples/bench/jpeg.pipe changed: update ray_overhead.py"
    text = text.replace(read, "    tfrecords(files, cycle: 4, parallel: auto);\n    shard(workers, worker, remainder: drop);\n")
    path = data / "jpeg_sharded.pipe"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def main() -> None:
    consumer, data, epochs = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    in_flight = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    pipe = sharded_pipe(data)
    files = f"{data}/jpeg/*.tfrecord"
    import sluice

    out = {"consumer": consumer, "workers": workers, "epochs": epochs}
    if consumer == "local":
        p = sluice.Pipeline(pipe, "jpeg", files=files, engine="interpreted", epochs=epochs)
        start, records = time.perf_counter(), 0
        for batch in p:
            records += batch["label"].shape[0]
    else:
        import ray
        import sluice.ray

        store = int(os.environ.get("SLUICE_BENCH_RAY_STORE_MB", "256")) << 20
        ray.init(num_cpus=os.cpu_count(), object_store_memory=store, include_dashboard=False, logging_level="error", log_to_driver=False)
        loader = sluice.ray.Loader(pipe, "jpeg", files=files, num_workers=workers, num_cpus=1, epochs=epochs, in_flight=in_flight)
        start, records, pinned, used = time.perf_counter(), 0, 0, 0
        for i, batch in enumerate(loader):
            records += batch["label"].shape[0]
            if i % 8 == 0:
                usage = sluice.ray.object_store_usage()
                pinned, used = max(pinned, usage["pinned"]), max(used, usage["used"])
        stats = loader.stats()
        out.update(wait_share=stats["wait_share"], pinned_peak=pinned, used_peak=used, bound_bytes=loader.bound_bytes, in_flight=in_flight)
    seconds = time.perf_counter() - start
    out.update(records=records, seconds=seconds, records_per_sec=records / seconds)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
