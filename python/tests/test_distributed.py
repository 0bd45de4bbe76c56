"""Two processes of a `torch.distributed` (gloo, CPU) job, each a `sluice.Pipeline` of
examples/dist/dist.pipe: `workers`/`worker` come from the world size and rank, and
together the ranks read every record once per epoch."""

import collections
import json
import os
import socket

import torch.distributed as dist
import torch.multiprocessing as mp

import sluice
from conftest import ROOT

PIPE = ROOT / "examples" / "dist" / "dist.pipe"


def _rank(rank: int, world: int, port: int, files: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    p = sluice.Pipeline(PIPE, "dist_train", files=files, epochs=2)
    assert p.params["workers"] == str(world) and p.params["worker"] == str(rank)
    ids = [i for batch in p for i in batch["id"].tolist()]
    with open(f"{out}/{rank}.json", "w") as f:
        json.dump(ids, f)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ids_per_epoch(rank: int, world: int, files: str) -> list:
    p = sluice.Pipeline(PIPE, "dist_train", files=files, workers=world, worker=rank)
    first = [i for b in p for i in b["id"].tolist()]
    second = [i for b in p for i in b["id"].tolist()]
    return [first, second]


def test_two_ranks_read_every_record_once_per_epoch(data, tmp_path):
    files = f"{data}/tabular/*.tfrecord"
    mp.spawn(_rank, args=(2, _free_port(), files, str(tmp_path)), nprocs=2, join=True)
    ids = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    assert abs(len(ids[0]) - len(ids[1])) <= 2
    assert collections.Counter(ids[0] + ids[1]) == {i: 2 for i in range(600)}
    # The same shards, explicit: every id once per epoch, epochs in new orders.
    per = [_ids_per_epoch(r, 2, files) for r in range(2)]
    for epoch in range(2):
        ids = per[0][epoch] + per[1][epoch]
        assert sorted(ids) == list(range(600)), epoch
    assert per[0][0] != per[0][1]


def test_the_states_of_two_ranks_resume_on_three_each_record_once(data):
    # Two ranks stop at different steps of the epoch; three go on from their states
    # (redealt: dist.pipe is elastic, its shards are blocks of a global permutation).
    files = f"{data}/tabular/*.tfrecord"
    states, before = [], []
    for rank in range(2):
        p = sluice.Pipeline(PIPE, "dist_train", files=files, workers=2, worker=rank)
        batches = iter(p)
        for _ in range(3 + 2 * rank):
            before += next(batches)["id"].tolist()
        states.append(p.state())
    after = []
    for rank in range(3):
        p = sluice.Pipeline(PIPE, "dist_train", files=files, workers=3, worker=rank, resume=states)
        if rank == 1:  # stopped again in the redealt epoch, resumed by the same rank
            batches = iter(p)
            after += next(batches)["id"].tolist()
            p = sluice.Pipeline(PIPE, "dist_train", files=files, workers=3, worker=rank, resume=p.state())
        after += [i for b in p for i in b["id"].tolist()]
    assert sorted(before + after) == list(range(600))
    # A rank missing is refused with the reason.
    try:
        sluice.Pipeline(PIPE, "dist_train", files=files, workers=3, worker=0, resume=states[:1])
    except sluice.ParameterError as e:
        assert "no state of rank 1 of 2" in str(e), e
    else:
        raise AssertionError("resuming from one rank's state of two was not refused")
