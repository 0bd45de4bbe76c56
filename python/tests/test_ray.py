"""``sluice.ray`` on a real Ray cluster of 3 nodes on this machine (``ray.cluster_utils``,
started once for the module, small object stores): the loader's 4 workers feed 2
``torch.distributed`` (gloo) ranks every record once per epoch, in the same order on
every run, equal to the single-process pipeline's shards interleaved; a killed worker
(restarted by Ray, or replaced) and a resumed job deliver exactly the rest; object-store
use stays under the stated bound; the workers run without cargo; the Datasource and
export give the pipeline's records."""

import collections
import json
import os
import socket
import struct
import subprocess
import time

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

ray = pytest.importorskip("ray", reason="Ray is not installed: scripts/setup-ray installs it (scripts/test does)")
from ray.cluster_utils import Cluster  # noqa: E402

import sluice  # noqa: E402
import sluice.ray  # noqa: E402

# A shard of the tabular data (`sluice gen`): shuffled in a buffer (new each epoch),
# dealt record by record to the workers, parsed and batched.
PIPE = """\
pipeline shards(files: glob = "x", workers: u32 = 1, worker: u32 = 0, batch_size: u32 = 32, seed: u64 = 3) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    shuffle(64, seed: seed, reshuffle_each_epoch: true);
    map(parallel: auto) { parse_example(); }
    shard(workers, worker);
    batch(batch_size);
    prefetch(2);
}

pipeline elastic(files: glob = "x", workers: u32 = 1, worker: u32 = 0, batch_size: u32 = 32) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); }
    shard(workers, worker);
    batch(batch_size);
}

pipeline records(files: glob = "x", workers: u32 = 1, worker: u32 = 0) {
    schema { x: f32[16], label: i64, id: i64 }
    tfrecords(files);
    map { parse_example(); }
    shard(workers, worker);
}
"""

WORKERS = 4
MB = 2**20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """3 nodes of 2 logical CPUs and a 100 MB object store each; this process a driver."""
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "object_store_memory": 100 * MB, "include_dashboard": False},
    )
    for _ in range(2):
        c.add_node(num_cpus=2, object_store_memory=100 * MB)
    ray.init(address=c.address, logging_level="warning", log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    d = tmp_path_factory.mktemp("ray")
    (d / "shards.pipe").write_text(PIPE)
    return d / "shards.pipe"


@pytest.fixture(scope="module")
def big(tool, tmp_path_factory):
    """16384 tabular records (80 bytes each) in 4 files: batches of 2048 are 160 KiB,
    above Ray's inline limit, so they go through the object store."""
    d = tmp_path_factory.mktemp("big")
    subprocess.run([tool, "gen", "tabular", "--records", "16384", "--shards", "4", "--out", str(d)], check=True, stdout=subprocess.DEVNULL)
    return f"{d}/*.tfrecord"


# Workers: no cargo on PATH, a HOME without .cargo.
def _no_cargo_env(home) -> dict:
    return {"env_vars": {"PATH": "/usr/bin:/bin", "HOME": str(home), "CARGO": str(home / "no-cargo")}}


def _loader(pipe, files, name="shards", **kw):
    kw.setdefault("num_cpus", 0.25)
    kw.setdefault("num_workers", WORKERS)
    return sluice.ray.Loader(pipe, name, files=files, **kw)


def _expected(pipe, files, ranks: int, epochs: int, **params) -> dict:
    """Each rank's batch ids as the protocol defines them: its workers' single-process
    shards (``Pipeline(workers=4, worker=w)``), taken in turn each epoch."""
    per_worker = {}
    for w in range(WORKERS):
        p = sluice.Pipeline(pipe, "shards", files=files, workers=WORKERS, worker=w, engine="interpreted", format="numpy", **params)
        per_worker[w] = [[b["id"].tolist() for b in p] for _ in range(epochs)]
    out = {}
    for r in range(ranks):
        order = []
        for e in range(epochs):
            queues = [list(per_worker[w][e]) for w in range(r, WORKERS, ranks)]
            while any(queues):
                for q in queues:
                    if q:
                        order.append(q.pop(0))
        out[r] = order
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, address: str, pipe: str, files: str, env: dict, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ray.init(address=address, logging_level="warning", log_to_driver=False)
    runs = []
    for _ in range(2):  # two runs, each from scratch
        with sluice.ray.Loader(pipe, "shards", files=files, num_workers=WORKERS, epochs=2, num_cpus=0.25, runtime_env=env) as loader:
            assert (loader.rank, loader.world_size) == (rank, world)
            runs.append([b["id"].tolist() for b in loader])
            info = loader.worker_info()
            stats = loader.stats()
            together = loader.cluster_stats()  # a collective of both ranks
    with open(f"{out}/{rank}.json", "w") as f:
        json.dump({"runs": runs, "info": info, "stats": stats, "cluster": together}, f)
    ray.shutdown()
    dist.destroy_process_group()


def test_two_ranks_get_every_record_once_in_a_fixed_order(cluster, pipe, data, tmp_path):
    files = f"{data}/tabular/*.tfrecord"
    home = tmp_path / "home"
    home.mkdir()
    mp.spawn(_rank, args=(2, _free_port(), cluster.address, str(pipe), files, _no_cargo_env(home), str(tmp_path)), nprocs=2, join=True)
    got = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    expected = _expected(pipe, files, ranks=2, epochs=2)
    for r in range(2):
        first, second = got[r]["runs"]
        assert first == second == expected[r], r  # the same batches, in the same order
        # Rank r runs workers r and r + 2, with the engine and no cargo reachable.
        info = got[r]["info"]
        assert [i["worker"] for i in info] == [r, r + 2]
        assert all(i["engine"] == "interpreted" and i["cargo"] is None and not i["home_cargo"] for i in info), info
        stats = got[r]["stats"]
        assert stats["records"] == sum(len(b) for b in second) and stats["epoch"] == 2
        assert {w["worker"] for w in stats["workers"]} == {r, r + 2} and stats["slowest_worker"] in (r, r + 2)
        assert 0.0 <= stats["wait_share"] <= 1.0
        # Every rank's statistics together: the job's 2 epochs of 600 records, 4 workers.
        together = got[r]["cluster"]
        assert together["records"] == 1200 and [w["worker"] for w in together["workers"]] == [0, 1, 2, 3]
        assert [w["rank"] for w in together["workers"]] == [0, 1, 0, 1] and together["slowest_worker"] in range(4)
        assert together["max_wait_share"] == max(x["wait_share"] for x in together["ranks"])
    for epoch in range(2):
        ids = []
        for r in range(2):
            batches = got[r]["runs"][0]
            half = len(batches) // 2  # each epoch of a rank has the same number of batches here
            ids += [i for b in batches[epoch * half : (epoch + 1) * half] for i in b]
        assert collections.Counter(ids) == {i: 1 for i in range(600)}, epoch
    # The union is the single-process pipeline's records.
    single = sluice.Pipeline(pipe, "shards", files=files, engine="interpreted", format="numpy")
    assert sorted(i for b in single for i in b["id"].tolist()) == list(range(600))


def test_a_killed_worker_goes_on_exactly(cluster, pipe, data):
    files = f"{data}/tabular/*.tfrecord"
    expected = _expected(pipe, files, ranks=1, epochs=2)[0]
    with _loader(pipe, files, epochs=2, max_restarts=2) as loader:
        got = []
        for i, batch in enumerate(loader):
            got.append(batch["id"].tolist())
            if i == 5:  # mid-epoch, with requests outstanding: Ray restarts it
                ray.kill(loader.actors()[1], no_restart=False)
            if i == 25:  # in the second epoch, for good: the loader makes a new one
                ray.kill(loader.actors()[2], no_restart=True)
        restarts = {w["worker"]: w["restarts"] for w in loader.stats()["workers"]}
    assert got == expected
    assert restarts == {0: 0, 1: 1, 2: 1, 3: 0}


def test_a_resumed_job_goes_on_exactly(cluster, pipe, data):
    files = f"{data}/tabular/*.tfrecord"
    expected = _expected(pipe, files, ranks=1, epochs=2)[0]
    per_epoch = len(expected) // 2
    for stop in (3, per_epoch - 1, per_epoch, per_epoch + 2):  # mid-epoch, at its end, in the next
        with _loader(pipe, files, epochs=2) as loader:
            it = iter(loader)
            head = [next(it)["id"].tolist() for _ in range(stop)]
            state = loader.state()
        # The state after an epoch's last batch is still in that epoch (as a Pipeline's):
        # its rest, empty, is the first of the resumed loader's epochs.
        epochs = 2 if stop <= per_epoch else 1
        with _loader(pipe, files, epochs=epochs, resume=state) as resumed:
            rest = [b["id"].tolist() for b in resumed]
        assert head + rest == expected, stop
    with pytest.raises(sluice.ParameterError, match="the state is of"):
        _loader(pipe, files, batch_size=16, resume=state)
    with pytest.raises(sluice.ParameterError, match="not the state"):
        _loader(pipe, files, resume=b"nope")


def test_a_job_of_another_size_resumes_from_every_ranks_state(cluster, pipe, data):
    files = f"{data}/tabular/*.tfrecord"
    # Two ranks of 4 workers stop at different batches. One rank goes on with the same 4
    # workers (each worker's state moves to it), or with 3 workers of the elastic
    # pipeline (the 4 workers' states redealt), and again after a second stop.
    saved = {}
    for name, workers in (("shards", 4), ("elastic", 3)):
        states, before = [], []
        for rank in range(2):
            with _loader(pipe, files, name=name, rank=rank, world_size=2) as loader:
                it = iter(loader)
                before += [i for _ in range(2 + 3 * rank) for i in next(it)["id"].tolist()]
                states.append(loader.state())
        saved[name] = states
        after = []
        with _loader(pipe, files, name=name, num_workers=workers, resume=states) as loader:
            it = iter(loader)
            after += [i for _ in range(2) for i in next(it)["id"].tolist()]
            again = loader.state()
        with _loader(pipe, files, name=name, num_workers=workers, resume=again) as loader:
            after += [i for b in loader for i in b["id"].tolist()]
        assert sorted(before + after) == list(range(600)), (name, workers)
    # What cannot be resumed says why, before any actor starts: a rank missing; another
    # num_workers for a pipeline that is not elastic (its shuffle buffer before the shard).
    with pytest.raises(sluice.ParameterError, match=r"no state of rank\(s\) \[1\]"):
        _loader(pipe, files, name="elastic", resume=saved["elastic"][:1])
    with pytest.raises(sluice.ParameterError, match="ShuffleExec before the shard"):
        _loader(pipe, files, num_workers=3, resume=saved["shards"])


def test_object_store_use_stays_under_the_bound(cluster, pipe, big):
    in_flight = 2
    batch_bytes = 2048 * (16 * 4 + 8 + 8)
    with _loader(pipe, big, batch_size=2048, epochs=6, in_flight=in_flight, format="numpy") as loader:
        peak, used, batches = 0, 0, 0
        for batch in loader:
            if batches == 0:
                # Through the object store: a read-only view of its memory, no copy.
                assert not batch["x"].flags.writeable and not batch["x"].flags.owndata
            batches += 1
            # A trainer slower than the workers: without backpressure they would run ahead.
            time.sleep(0.01)
            usage = sluice.ray.object_store_usage()
            peak, used = max(peak, usage["pinned"]), max(used, usage["used"])
        stats = loader.stats()
    assert batches == 6 * 16384 // 2048
    # The stated bound of pinned bytes: (K + 1) * workers * the largest batch.
    assert loader.bound_bytes == (in_flight + 1) * WORKERS * batch_bytes == stats["bound_bytes"]
    print(f"object store: peak pinned {peak} bytes (bound {loader.bound_bytes}), peak used {used}")
    assert batch_bytes <= peak <= loader.bound_bytes, (peak, loader.bound_bytes)


def test_datasource_reads_one_task_per_shard(cluster, pipe, data):
    files = f"{data}/tabular/*.tfrecord"
    source = sluice.ray.Datasource(pipe, "shards", shards=WORKERS, files=files, batch_size=64)
    assert len(source.get_read_tasks(1)) == WORKERS
    rows = ray.data.read_datasource(source).take_all()
    assert sorted(int(r["id"]) for r in rows) == list(range(600))
    by_id = {int(r["id"]): r for r in rows}
    single = next(iter(sluice.Pipeline(pipe, "shards", files=files, engine="interpreted", format="numpy", batch_size=600)))
    for i, x in zip(single["id"].tolist(), single["x"]):
        assert by_id[i]["x"].tolist() == x.tolist()
    # A pipeline of records (no batch): blocks of block_rows records.
    source = sluice.ray.Datasource(pipe, "records", shards=2, block_rows=100, files=files)
    rows = ray.data.read_datasource(source).take_all()
    assert sorted(int(r["id"]) for r in rows) == list(range(600))
    assert all(by_id[int(r["id"])]["x"].tolist() == r["x"].tolist() for r in rows)


def _records(paths) -> list:
    """The records of TFRecord files (length, its CRC, data, its CRC)."""
    out = []
    for path in paths:
        blob = open(path, "rb").read()
        at = 0
        while at < len(blob):
            (n,) = struct.unpack_from("<Q", blob, at)
            out.append(blob[at + 12 : at + 12 + n])
            at += 12 + n + 4
    return out


def test_export_writes_the_single_process_records(cluster, pipe, data, tool, tmp_path):
    files = f"{data}/tabular/*.tfrecord"
    written = sluice.ray.export(pipe, "records", output=tmp_path / "out", shards=6, num_workers=WORKERS, num_cpus=0.25, files=files)
    assert [os.path.basename(p) for p in written] == [f"records-{k:05d}-of-00006.tfrecord" for k in range(6)]
    assert sorted(os.listdir(tmp_path / "out")) == sorted(n for p in written for n in (os.path.basename(p), os.path.basename(p) + ".idx"))
    subprocess.run(
        [tool, "run", str(pipe), "records", "--engine", "interpreted", "--no-progress", "--output", str(tmp_path / "one"), "--set", f"files={files}"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    single = _records(sorted((tmp_path / "one").glob("*.tfrecord")))
    assert len(single) == 600
    assert sorted(_records(written)) == sorted(single)


def test_export_writes_parquet_files_holding_the_single_process_rows(cluster, pipe, data, tool, tmp_path):
    import pyarrow.parquet as pq

    files = f"{data}/tabular/*.tfrecord"
    written = sluice.ray.export(
        pipe, "records", output=tmp_path / "out", shards=4, num_workers=WORKERS, num_cpus=0.25, files=files,
        format="parquet", compression="zstd", row_group=50,
    )
    assert [os.path.basename(p) for p in written] == [f"records-{k:05d}-of-00004.parquet" for k in range(4)]
    assert sorted(os.listdir(tmp_path / "out")) == sorted(os.path.basename(p) for p in written)
    rows = [r for p in written for r in pq.read_table(p).to_pylist()]
    assert pq.ParquetFile(written[0]).metadata.num_row_groups >= 3  # 150 rows in groups of 50
    subprocess.run(
        [tool, "run", str(pipe), "records", "--engine", "interpreted", "--no-progress", "--output", str(tmp_path / "one"),
         "--format", "parquet", "--set", f"files={files}"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    single = [r for p in sorted((tmp_path / "one").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    assert len(single) == 600
    key = lambda r: r["id"]
    assert sorted(rows, key=key) == sorted(single, key=key)
    with pytest.raises(sluice.ParameterError, match="format='webdataset'"):
        sluice.ray.export(pipe, "records", output=tmp_path / "w", shards=4, num_workers=WORKERS, files=files, format="webdataset")
