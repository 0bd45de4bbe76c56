"""``sluice.ray``: a pipeline's shards on a Ray cluster, feeding training ranks exactly.

Ray is an optional dependency (``pip install "sluice[ray]"``; ``scripts/setup-ray``). Every
worker is a Ray actor holding one :class:`sluice.Pipeline` of a pipeline with
``shard(workers, worker)``, run by the engine the wheel ships (``engine="interpreted"``:
the cluster's nodes need the ``sluice`` wheel, not a Rust toolchain)::

    loader = sluice.ray.Loader("train.pipe", "train", num_workers=8, files="s3://b/train-*")
    for batch in loader:                       # this rank's batches, in a fixed order
        x, y = batch["image"], batch["label"]  # torch tensors over the object store's memory

- :class:`Loader`: the batches of one training rank (``torch.distributed``'s rank and
  world size when it is initialised, else ``rank``/``world_size``).
- :class:`Datasource`: the pipeline's records as a Ray Data dataset, one read task per
  shard.
- :func:`export`: the pipeline's records written as TFRecord shards by the workers.

The loader's protocol
---------------------

*Order.* Rank ``r`` of ``M`` owns workers ``r, r + M, r + 2M, ...`` (of ``num_workers``)
and takes one item from each in turn, round robin, skipping those whose epoch has ended.
A worker's items are its pipeline's batches, then an end-of-epoch mark, then the next
epoch's batches. Each worker's sequence is its shard of a deterministic pipeline, and
the round robin is fixed, so a rank's batches are the same, in the same order, on every
run; since ``shard(workers, worker)`` deals each record to exactly one worker, the ranks
together see every record once per epoch.

*Backpressure.* The loader keeps at most ``in_flight`` (K) requests outstanding per
worker: an actor makes a batch only when asked, so at most K batches per worker wait in
the object store for this rank, plus the one the trainer holds (in a loop that drops
each batch before taking the next). A batch above Ray's inline limit (100 KiB) is
pinned in the worker node's object store until the loader has it (a primary copy);
pulled to the trainer's node, the copy there is read in place (no copy) and, once
released, a cache Ray evicts when it needs the room. :attr:`Loader.bound_bytes` states
the pinned bytes: ``(K + 1) * workers * largest batch`` for the rank
(``python/tests/test_ray.py`` measures them with :func:`object_store_usage`).

*Exactly once, and resume.* Each item comes back with the worker's ``PipelineState``
after it (tens of bytes). The loader, not the actor, keeps the state of the last item it
handed over (acknowledged) for each worker, which of them ended the current epoch, and
whose turn is next: that is :meth:`Loader.state`. When a worker dies (``ray.kill``, a
lost node), its outstanding requests are dropped and the actor, restarted by Ray
(``max_restarts``) or made anew when Ray gave up on it, reopens its pipeline at the
acknowledged state before it is asked again: nothing handed to the trainer comes again
and nothing after it is skipped. ``Loader(..., resume=loader.state())`` does the same
for every worker of a restarted job. A job restarted with another number of ranks takes
the list of every old rank's state (``resume=[state_0, ..., state_N-1]``): each worker's
state goes to the rank that owns it now, and with another ``num_workers`` too the old
workers' states are redealt to the new workers (``PipelineState::reshard``; an elastic
pipeline): the ranks together deliver the rest of the epoch, each record once. Ray never retries an actor's request on its own
(``max_task_retries=0``): a retried request would run from the restarted actor's first
state.

*Statistics.* :meth:`Loader.stats`: records, batches and records/s per worker (records
over the seconds its pipeline took to make them) and in total (over the loader's wall
time), the slowest worker, and the trainer's wait share (the data stall): the share of
the loader's wall time the trainer spent waiting for a batch. :meth:`Loader.cluster_stats`
gathers every rank's over ``torch.distributed``.
"""

from __future__ import annotations

import base64
import collections
import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple

try:
    import ray
    import ray.exceptions
except ImportError as e:  # pragma: no cover: the message is the point
    raise ImportError('sluice.ray needs Ray: pip install "ray[data]>=2.60,<3" (or scripts/setup-ray)') from e

from ._native import ParameterError, SluiceError
from ._pipeline import Pipeline, _resume_bytes, _text, _torch_distributed, sluice_binary

__all__ = ["Datasource", "Loader", "export", "object_store_usage"]

#: Requests outstanding per worker when ``in_flight`` is not given.
DEFAULT_IN_FLIGHT = 2

_STATE_FORMAT = "sluice.ray.Loader/1"


class _Worker:
    """A worker actor's body: one shard of the pipeline, asked for one item at a time."""

    def __init__(self, path: str, name: str, workers: int, worker: int, options: Dict[str, Any], params: Dict[str, str], resume: Optional[bytes]) -> None:
        self._args = (path, name, workers, worker, options, params)
        self._open(resume)

    def _open(self, resume: Optional[bytes]) -> None:
        path, name, workers, worker, options, params = self._args
        self._pipeline = Pipeline(path, name, workers=workers, worker=worker, resume=resume, **options, **params)
        self._items: Optional[Iterator[Any]] = None
        self._exact = True
        self._records = 0

    def seek(self, state: Optional[bytes]) -> Dict[str, Any]:
        """Reopens the pipeline at ``state`` (the start when ``None``) and says where this
        actor runs."""
        self._open(state)
        return self.info()

    def info(self) -> Dict[str, Any]:
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "engine": self._pipeline.engine,
            "cargo": shutil.which("cargo"),
            "home_cargo": os.path.exists(os.path.join(os.path.expanduser("~"), ".cargo")),
        }

    def next(self) -> Tuple[Any, Optional[bytes], int, float]:
        """``(element, state, records, seconds)``: the next element (``None`` at the end
        of an epoch: the next call starts the next one), the ``PipelineState`` after it
        (``None`` for a pipeline that cannot be resumed exactly), the records it holds and
        the seconds the pipeline took to make it."""
        start = time.perf_counter()
        if self._items is None:
            self._items = iter(self._pipeline)
        element = next(self._items, None)
        if element is None:
            self._items = None
        records = self._pipeline.stats()["records"]
        made, self._records = records - self._records, records
        state = None
        if self._exact:
            try:
                state = self._pipeline.state()
            except ParameterError:
                self._exact = False
        return element, state, made, time.perf_counter() - start


_WorkerActor = ray.remote(_Worker)


class _Shard:
    """The loader's record of one worker: its actor, outstanding requests, acknowledged
    state and counts."""

    def __init__(self, worker: int, actor: Any, state: Optional[bytes], done: bool) -> None:
        self.worker = worker
        self.actor = actor
        self.pending: Deque[Any] = collections.deque()
        self.state = state
        self.done = done
        self.records = 0
        self.batches = 0
        self.busy_s = 0.0
        self.restarts = 0
        self.info: Dict[str, Any] = {}


def _split_options(params: Dict[str, Any], names: Tuple[str, ...]) -> Dict[str, Any]:
    return {k: params.pop(k) for k in names if k in params}


def _rank_world(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    if (rank is None) != (world_size is None):
        raise ParameterError("give both `rank` and `world_size`, or neither")
    if rank is None:
        world = _torch_distributed()
        world_size, rank = world if world is not None else (1, 0)
    assert rank is not None and world_size is not None
    if not 0 <= rank < world_size:
        raise ParameterError(f"rank {rank} is not one of world size {world_size}'s")
    return rank, world_size


def _nbytes(element: Any) -> int:
    if isinstance(element, dict):
        return sum(_nbytes(v) for v in element.values())
    if isinstance(element, (bytes, str)):
        return len(element)
    if isinstance(element, list):
        return sum(_nbytes(v) for v in element)
    return int(getattr(element, "nbytes", 0))


class Loader:
    """One training rank's batches of a pipeline whose shards run as Ray actors.

    ``Loader(path, name=None, num_workers=N, **params)``: the pipeline ``name`` of the
    ``.pipe`` file at ``path`` (it must take ``workers`` and ``worker`` and
    ``shard(workers, worker)``), ``params`` its parameters (as :class:`sluice.Pipeline`).
    Ray must be initialised (``ray.init(address=...)``). Options:

    - ``num_workers``: the pipeline's shards, each an actor; this rank runs workers
      ``rank, rank + world_size, ...`` of them.
    - ``rank``, ``world_size``: this training rank; by default ``torch.distributed``'s
      when it is initialised, else 0 of 1.
    - ``in_flight`` (default 2): requests outstanding per worker (the backpressure).
    - ``epochs`` (default 1): the epochs each ``iter(loader)`` runs (a loop broken off
      mid-epoch goes on there at the next ``iter``, the partial epoch counting as one).
    - ``resume``: :meth:`state` bytes of a loader of the same pipeline, parameters,
      workers, rank and world size: it goes on exactly there. Or the list of every
      rank's :meth:`state` of a job of another size: each worker's state goes to the
      rank that owns it now (the ranks must have stopped in the same epoch), and with
      another ``num_workers`` the workers' states are redealt to the new workers (an
      elastic pipeline, stopped mid-epoch or at its end): together the ranks deliver
      the rest of the epoch, each record once.
    - ``format``: ``"torch"`` (default when torch is installed) or ``"numpy"``.
    - ``engine`` (default ``"interpreted"``): the workers' backend (``"compiled"`` needs
      cargo and the sources on every node).
    - ``num_cpus`` (default 1), ``runtime_env``, ``max_restarts`` (default 3: how often
      each worker may be restarted or replaced) and ``actor_options`` (more
      ``.options()`` of the actors; ``scheduling_strategy`` is ``"SPREAD"`` unless set).

    Batches arrive as dicts of tensors (or arrays) over the object store's memory: no
    copy on the worker's node; read-only (do not write to them in place).
    """

    _OPTIONS = (
        "num_workers", "rank", "world_size", "in_flight", "epochs", "resume", "format",
        "engine", "num_cpus", "runtime_env", "max_restarts", "actor_options",
    )

    def __init__(self, path: str, name: Optional[str] = None, **params: Any) -> None:
        options = _split_options(params, self._OPTIONS)
        if "num_workers" not in options:
            raise ParameterError("give num_workers: how many shards of the pipeline run as Ray actors")
        self.path = os.path.abspath(os.fspath(path))
        self.num_workers = int(options["num_workers"])
        self.rank, self.world_size = _rank_world(options.get("rank"), options.get("world_size"))
        if self.num_workers < self.world_size:
            raise ParameterError(f"num_workers={self.num_workers} is fewer than the {self.world_size} ranks: each rank needs a worker")
        self.in_flight = int(options.get("in_flight", DEFAULT_IN_FLIGHT))
        if self.in_flight < 1:
            raise ParameterError("in_flight must be at least 1")
        self.epochs = int(options.get("epochs", 1))
        if self.epochs < 1:
            raise ParameterError("epochs must be at least 1")
        self.format = options.get("format") or _default_format()
        self.max_restarts = int(options.get("max_restarts", 3))
        self.params = {k: _text(v) for k, v in params.items()}
        # Checked here, on the driver: a bad name or parameter is an error at once, not in
        # every actor (the engine compiles in milliseconds).
        self._worker_options = {"engine": options.get("engine", "interpreted"), "format": "numpy"}
        self.name = Pipeline(self.path, name, workers=self.num_workers, worker=0, **self._worker_options, **self.params).name
        actor_options = {
            "num_cpus": options.get("num_cpus", 1),
            "max_restarts": self.max_restarts,
            "max_task_retries": 0,
            "scheduling_strategy": "SPREAD",
        }
        if options.get("runtime_env") is not None:
            actor_options["runtime_env"] = options["runtime_env"]
        actor_options.update(options.get("actor_options") or {})
        self._actor_options = actor_options
        self.workers = list(range(self.rank, self.num_workers, self.world_size))
        resumed = self._resumed(options.get("resume"))
        self._epoch = resumed["epoch"] if resumed else 0
        self._cursor = resumed["cursor"] if resumed else 0
        self._shards: List[_Shard] = []
        for i, w in enumerate(self.workers):
            state = base64.b64decode(resumed["states"][i]) if resumed and resumed["states"][i] is not None else None
            done = bool(resumed["done"][i]) if resumed else False
            self._shards.append(_Shard(w, self._new_actor(w, state), state, done))
        for shard in self._shards:
            shard.info = ray.get(shard.actor.info.remote())
        self._records = 0
        self._batches = 0
        self._wait_s = 0.0
        self._wall_s = 0.0
        self._largest = 0

    def _resumed(self, resume: Any) -> Optional[Dict[str, Any]]:
        """What ``resume`` says this rank's loader goes on from: ``epoch``, ``cursor`` and,
        per worker of this rank, its ``states`` (base64) and ``done``."""
        if resume is None:
            return None
        several = isinstance(resume, (list, tuple))
        saved = [self._loader_state(s) for s in (resume if several else [resume])]
        mine = {"pipeline": self.name, "num_workers": self.num_workers, "rank": self.rank, "world_size": self.world_size, "params": self.params}
        if len(saved) == 1 and {k: saved[0].get(k) for k in mine} == mine:
            return saved[0]
        same = ("pipeline", "params")
        for s in saved:
            theirs = {k: s.get(k) for k in same}
            if theirs != {k: mine[k] for k in same}:
                raise ParameterError(f"resume: the state is of {theirs}, this loader is {mine}")
        return self._redealt(saved)

    @staticmethod
    def _loader_state(resume: Any) -> Dict[str, Any]:
        try:
            saved = json.loads(bytes(resume).decode("utf-8"))
        except (ValueError, UnicodeDecodeError, TypeError):
            raise ParameterError("resume: not the state of a sluice.ray.Loader") from None
        if not isinstance(saved, dict) or saved.get("format") != _STATE_FORMAT:
            raise ParameterError("resume: not the state of a sluice.ray.Loader")
        return saved

    def _redealt(self, saved: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The loader states of every rank of a job of another size (or of another
        ``num_workers``), as this rank's: each worker's state goes to the rank that owns
        it now; with another ``num_workers`` each new worker redeals all the old workers'
        states (the pipeline must be elastic: ``sluice explain``)."""
        world = {s["world_size"] for s in saved}
        workers = {s["num_workers"] for s in saved}
        ranks = sorted(s["rank"] for s in saved)
        if len(world) != 1 or len(workers) != 1:
            raise ParameterError(f"resume: the states are of jobs of {sorted(world)} rank(s) and {sorted(workers)} worker(s), not of one job")
        (old_world,), (old_workers,) = world, workers
        if ranks != list(range(old_world)):
            missing = sorted(set(range(old_world)) - set(ranks))
            why = f"no state of rank(s) {missing}" if missing else f"ranks {ranks} (one given twice)"
            raise ParameterError(
                f"resume: a loader of {self.world_size} rank(s) resumes from the states of every rank of a job of "
                f"{old_world}: {why}"
            )
        epochs = {s["epoch"] for s in saved}
        if len(epochs) != 1:
            raise ParameterError(
                f"resume: the ranks stopped in different epochs ({sorted(epochs)}): a job of another size "
                "resumes only from ranks in the same epoch"
            )
        (epoch,) = epochs
        state: Dict[int, Optional[str]] = {}
        done: Dict[int, bool] = {}
        for s in saved:
            for i, w in enumerate(range(s["rank"], old_workers, old_world)):
                state[w], done[w] = s["states"][i], bool(s["done"][i])
        if old_workers == self.num_workers:
            return {"epoch": epoch, "cursor": 0, "states": [state[w] for w in self.workers], "done": [done[w] for w in self.workers]}
        ended = sorted(w for w in done if done[w])
        if ended:
            raise ParameterError(
                f"resume: worker(s) {ended} of {old_workers} had ended epoch {epoch} and the others had not: a loader "
                f"of another num_workers ({self.num_workers}) resumes from workers in the same epoch (resume with "
                f"num_workers={old_workers}, or after the epoch)"
            )
        raw = []
        for w in range(old_workers):
            one = base64.b64decode(state[w]) if state[w] is not None else None
            if one is None or one.startswith(b"SLSS"):
                # A worker that had delivered nothing since it started (at the epoch's
                # start, or at what an earlier redeal gave it): its own state there.
                one = Pipeline(self.path, self.name, workers=old_workers, worker=w, resume=one, **self._worker_options, **self.params).state()
            raw.append(one)
        # Each new worker opens its pipeline from all of them, redealt to its shard. Tried
        # here first, so that a refusal (a pipeline that is not elastic, states that do
        # not belong together) says why at once, not as an actor's death.
        framed_bytes = _resume_bytes(raw)
        Pipeline(self.path, self.name, workers=self.num_workers, worker=self.workers[0], resume=framed_bytes, **self._worker_options, **self.params)
        framed = base64.b64encode(framed_bytes).decode("ascii")
        return {"epoch": epoch, "cursor": 0, "states": [framed] * len(self.workers), "done": [False] * len(self.workers)}

    def _new_actor(self, worker: int, state: Optional[bytes]) -> Any:
        return _WorkerActor.options(**self._actor_options).remote(self.path, self.name, self.num_workers, worker, self._worker_options, self.params, state)

    def _fill(self, shard: _Shard) -> None:
        while len(shard.pending) < self.in_flight:
            shard.pending.append(shard.actor.next.remote())

    def _recover(self, shard: _Shard, error: Exception) -> None:
        """Puts a worker whose actor failed back at its acknowledged state."""
        shard.pending.clear()
        shard.restarts += 1
        if shard.restarts > self.max_restarts:
            raise SluiceError(f"worker {shard.worker} failed {shard.restarts} times (max_restarts={self.max_restarts}): {error}") from error
        if shard.batches and shard.state is None:
            raise SluiceError(
                f"worker {shard.worker} failed and its pipeline `{self.name}` cannot be resumed exactly "
                f"(its state() is refused): {error}"
            ) from error
        try:  # Ray restarts it (max_restarts): calls wait for the new actor
            shard.info = ray.get(shard.actor.seek.remote(shard.state))
        except ray.exceptions.RayActorError:  # gone for good (or unreachable): a new one
            ray.kill(shard.actor, no_restart=True)
            shard.actor = self._new_actor(shard.worker, shard.state)
            shard.info = ray.get(shard.actor.info.remote())

    def _take(self, shard: _Shard) -> Tuple[Any, Optional[bytes], int, float]:
        while True:
            self._fill(shard)
            try:
                item = ray.get(shard.pending[0])
            except ray.exceptions.RayActorError as e:
                self._recover(shard, e)
                continue
            shard.pending.popleft()
            self._fill(shard)
            return item

    def __iter__(self) -> Iterator[Any]:
        last = self._epoch + self.epochs
        mark = time.perf_counter()  # the loader's wall time runs while it is iterated
        while self._epoch < last:
            while not all(s.done for s in self._shards):
                shard = self._shards[self._cursor]
                self._cursor = (self._cursor + 1) % len(self._shards)
                if shard.done:
                    continue
                t0 = time.perf_counter()
                element, state, records, seconds = self._take(shard)
                self._wait_s += time.perf_counter() - t0
                shard.state = state  # acknowledged: handed over below
                shard.busy_s += seconds
                if element is None:
                    shard.done = True
                    continue
                shard.records += records
                shard.batches += 1
                self._records += records
                self._batches += 1
                self._largest = max(self._largest, _nbytes(element))
                now = time.perf_counter()
                self._wall_s, mark = self._wall_s + now - mark, now
                yield self._convert(element)
            self._epoch += 1
            self._cursor = 0
            for s in self._shards:
                s.done = False
        self._wall_s += time.perf_counter() - mark

    def _convert(self, element: Any) -> Any:
        if self.format != "torch" or not isinstance(element, dict):
            return element
        import numpy
        import torch

        with warnings.catch_warnings():
            # Arrays over the object store are read-only; torch warns that it cannot
            # guard that.
            warnings.simplefilter("ignore", UserWarning)
            return {k: torch.from_numpy(v) if isinstance(v, numpy.ndarray) else v for k, v in element.items()}

    @property
    def epoch(self) -> int:
        """Epochs this rank finished (all of its workers' ends acknowledged)."""
        return self._epoch

    @property
    def bound_bytes(self) -> int:
        """The object-store bytes this rank's batches may pin at once, cluster-wide:
        ``(in_flight + 1) * workers * largest batch so far`` (0 before the first)."""
        return (self.in_flight + 1) * len(self.workers) * self._largest

    def state(self) -> bytes:
        """Where this rank is: each worker's ``PipelineState`` after the last batch
        handed over, which ended the epoch, and whose turn is next (JSON bytes, a few
        hundred). ``Loader(..., resume=state)`` goes on exactly there. Raises
        :class:`ParameterError` for a pipeline that cannot be resumed exactly."""
        if any(s.state is None and (s.batches or s.done) for s in self._shards):
            raise ParameterError(f"pipeline `{self.name}` cannot be resumed exactly: its workers' state() is refused")
        return json.dumps(
            {
                "format": _STATE_FORMAT,
                "pipeline": self.name,
                "num_workers": self.num_workers,
                "rank": self.rank,
                "world_size": self.world_size,
                "params": self.params,
                "epoch": self._epoch,
                "cursor": self._cursor,
                "states": [base64.b64encode(s.state).decode("ascii") if s.state is not None else None for s in self._shards],
                "done": [s.done for s in self._shards],
            },
            sort_keys=True,
        ).encode("utf-8")

    def stats(self) -> Dict[str, Any]:
        """``records``, ``batches``, ``seconds`` (the loader's wall time),
        ``records_per_sec`` and ``wait_s``/``wait_share`` (the trainer's time waiting for
        a batch: the data stall) of this rank; ``workers``: per worker its ``node``,
        ``records``, ``batches``, ``busy_s`` (its pipeline's time making them),
        ``records_per_sec`` (over ``busy_s``) and ``restarts``; ``slowest_worker`` (the
        lowest records/s); ``in_flight`` and ``bound_bytes``."""
        workers = [
            {
                "worker": s.worker,
                "node": s.info.get("node"),
                "records": s.records,
                "batches": s.batches,
                "busy_s": s.busy_s,
                "records_per_sec": s.records / s.busy_s if s.busy_s > 0 else 0.0,
                "restarts": s.restarts,
            }
            for s in self._shards
        ]
        slowest = min(workers, key=lambda w: w["records_per_sec"])["worker"] if self._records else None
        return {
            "pipeline": self.name,
            "rank": self.rank,
            "world_size": self.world_size,
            "epoch": self._epoch,
            "records": self._records,
            "batches": self._batches,
            "seconds": self._wall_s,
            "records_per_sec": self._records / self._wall_s if self._wall_s > 0 else 0.0,
            "wait_s": self._wait_s,
            "wait_share": self._wait_s / self._wall_s if self._wall_s > 0 else 0.0,
            "workers": workers,
            "slowest_worker": slowest,
            "in_flight": self.in_flight,
            "bound_bytes": self.bound_bytes,
        }

    def cluster_stats(self) -> Dict[str, Any]:
        """The statistics of every rank together: each rank's :meth:`stats` gathered over
        ``torch.distributed`` (a collective: every rank calls it; this rank's alone when
        it is not initialised). ``records`` and ``records_per_sec`` (the records over the
        slowest rank's seconds) of the job, ``workers`` of every rank with their
        ``rank``, ``slowest_worker`` among all, ``wait_share`` per rank (``ranks``) and
        the largest (``max_wait_share``: the rank the data stalls most)."""
        mine = self.stats()
        everyone = [mine]
        if _torch_distributed() is not None:
            import torch.distributed as dist

            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, mine)
        workers = [dict(w, rank=s["rank"]) for s in everyone for w in s["workers"]]
        records = sum(s["records"] for s in everyone)
        seconds = max(s["seconds"] for s in everyone)
        return {
            "pipeline": self.name,
            "records": records,
            "seconds": seconds,
            "records_per_sec": records / seconds if seconds > 0 else 0.0,
            "workers": sorted(workers, key=lambda w: w["worker"]),
            "slowest_worker": min(workers, key=lambda w: w["records_per_sec"])["worker"] if records else None,
            "ranks": [{"rank": s["rank"], "records": s["records"], "wait_share": s["wait_share"]} for s in everyone],
            "max_wait_share": max(s["wait_share"] for s in everyone),
        }

    def worker_info(self) -> List[Dict[str, Any]]:
        """Where each worker runs: ``worker``, ``node``, ``pid``, ``engine``, and
        ``cargo`` (the cargo its PATH reaches, or ``None``) and ``home_cargo``."""
        return [dict(s.info, worker=s.worker) for s in self._shards]

    def actors(self) -> Dict[int, Any]:
        """The worker actors by worker number (to watch them, or to test a failure)."""
        return {s.worker: s.actor for s in self._shards}

    def close(self) -> None:
        """Stops the workers (also when the loader is garbage-collected, as Ray does)."""
        for s in self._shards:
            s.pending.clear()
            ray.kill(s.actor, no_restart=True)
        self._shards = []

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"sluice.ray.Loader({self.path!r}, {self.name!r}, num_workers={self.num_workers}, "
            f"rank={self.rank}, world_size={self.world_size}, in_flight={self.in_flight})"
        )


def _default_format() -> str:
    try:
        import torch  # noqa: F401

        return "torch"
    except ImportError:
        return "numpy"


def object_store_usage() -> Dict[str, int]:
    """The cluster's object stores now (all nodes), as ``ray memory --stats-only``
    reports them: ``pinned`` (primary copies: bytes Ray can neither evict nor free while
    their owner holds them) and ``used`` (also the secondary copies other nodes pulled,
    a cache evicted when room is needed)."""
    from ray._private.internal_api import get_memory_info_reply, get_state_from_address

    stats = get_memory_info_reply(get_state_from_address(ray.get_runtime_context().gcs_address)).store_stats
    return {"pinned": int(stats.object_store_bytes_primary_copy), "used": int(stats.object_store_bytes_used)}


class Datasource(ray.data.Datasource):
    """The pipeline's records as a Ray Data dataset:
    ``ray.data.read_datasource(sluice.ray.Datasource(path, name, shards=S, **params))``.

    One read task per shard (``shards``, default the parallelism Ray asks for): task
    ``i`` runs ``shard(workers=S, worker=i)`` of the pipeline in the engine and gives
    each of its batches as a block (a pipeline without ``batch`` gives blocks of
    ``block_rows`` records). ``engine`` as :class:`Loader`'s.
    """

    def __init__(self, path: str, name: Optional[str] = None, **params: Any) -> None:
        super().__init__()
        options = _split_options(params, ("shards", "engine", "block_rows"))
        self.path = os.path.abspath(os.fspath(path))
        self.params = {k: _text(v) for k, v in params.items()}
        self.shards: Optional[int] = int(options["shards"]) if options.get("shards") is not None else None
        self.engine = options.get("engine", "interpreted")
        self.block_rows = int(options.get("block_rows", 1024))
        probe = Pipeline(self.path, name, workers=self.shards or 1, worker=0, engine="interpreted", format="numpy", **self.params)
        self.name = probe.name
        del probe

    def get_name(self) -> str:
        return f"Sluice({self.name})"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return None

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None, data_context: Any = None) -> List[Any]:
        from ray.data.block import BlockMetadata
        from ray.data.datasource import ReadTask

        shards = self.shards or max(1, parallelism)
        args = (self.path, self.name, shards, self.engine, self.params, self.block_rows)
        return [
            ReadTask(
                lambda worker=worker: _read_shard(*args, worker),
                BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None),
                per_task_row_limit=per_task_row_limit,
            )
            for worker in range(shards)
        ]


def _read_shard(path: str, name: str, shards: int, engine: str, params: Dict[str, str], block_rows: int, worker: int) -> Iterator[Any]:
    """The blocks of one shard of the pipeline (a Datasource's read task)."""
    import numpy
    from ray.data.block import BlockAccessor

    pipeline = Pipeline(path, name, workers=shards, worker=worker, engine=engine, format="numpy", **params)
    rows: List[Dict[str, Any]] = []
    for element in pipeline:
        if not isinstance(element, dict):
            element = {"value": element}
        if pipeline.stats()["batches"] > 0:
            yield BlockAccessor.batch_to_block({k: numpy.asarray(v) if not isinstance(v, list) else v for k, v in element.items()})
            continue
        rows.append(element)
        if len(rows) == block_rows:
            yield _rows_block(rows)
            rows = []
    if rows:
        yield _rows_block(rows)


def _rows_block(rows: List[Dict[str, Any]]) -> Any:
    import numpy
    from ray.data.block import BlockAccessor

    columns = {k: [r[k] for r in rows] for k in rows[0]}
    return BlockAccessor.batch_to_block(
        {k: numpy.stack(v) if isinstance(v[0], numpy.ndarray) else numpy.array(v, dtype=object) for k, v in columns.items()}
    )


# The file name ending of each `--format`, with and without gzip.
_SUFFIXES = {("tfrecord", "none"): ".tfrecord", ("tfrecord", "gzip"): ".tfrecord.gz"}


def _suffix(fmt: str, compression: str) -> str:
    return ".parquet" if fmt == "parquet" else _SUFFIXES[(fmt, compression)]


def _export_worker(path: str, name: str, output: str, workers: int, worker: int, first: int, count: int, total: int, flags: Dict[str, str], engine: str, params: Dict[str, str]) -> List[str]:
    """Worker ``worker``'s part of :func:`export`: its shard of the pipeline written by
    the ``sluice`` tool (``run --output``, with ``flags``: ``--format``, ``--compression``,
    ``--row-group``) as ``count`` files, numbered ``first`` .. of ``total`` in ``output``."""
    tool = sluice_binary()
    suffix = _suffix(flags["--format"], flags["--compression"])
    with tempfile.TemporaryDirectory(dir=output, prefix=f".worker-{worker:05d}-") as tmp:
        args = [tool, "run", path, name, "--engine", engine, "--no-progress", "--output", tmp, "--shards", str(count)]
        for k, v in flags.items():
            args += [k, v]
        for k, v in {**params, "workers": str(workers), "worker": str(worker)}.items():
            args += ["--set", f"{k}={v}"]
        done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        if done.returncode != 0:
            raise SluiceError(f"worker {worker}: `sluice run --output` failed: {done.stderr.decode('utf-8', 'replace').strip()}")
        written = []
        for j in range(count):
            src = os.path.join(tmp, f"{name}-{j:05d}-of-{count:05d}{suffix}")
            dst = os.path.join(output, f"{name}-{first + j:05d}-of-{total:05d}{suffix}")
            os.replace(src, dst)
            if os.path.exists(src + ".idx"):
                os.replace(src + ".idx", dst + ".idx")
            written.append(dst)
        return written


def export(path: str, name: Optional[str] = None, **params: Any) -> List[str]:
    """Writes the pipeline's records as ``shards`` TFRecord files
    ``OUTPUT/NAME-0000k-of-0000S.tfrecord`` (with ``.idx`` sidecars; Parquet files
    ``….parquet`` with ``format="parquet"``), each of
    ``num_workers`` Ray tasks writing its ``shard(workers, worker)`` of the pipeline into
    its share of the files (``shards // num_workers``, the first ``shards %
    num_workers`` one more); the union of the files' records is what a single-process
    ``sluice run --output`` writes. Returns the files' paths.

    ``output``: a directory every node sees (made when missing); ``format``:
    ``"tfrecord"`` (the default) or ``"parquet"`` (WebDataset shards are not offered here:
    each worker would number its samples' keys from 0); ``compression``: ``"none"`` or
    ``"gzip"`` for TFRecord, ``"snappy"`` (the default), ``"zstd"``, ``"gzip"``,
    ``"lz4"`` or ``"none"`` for Parquet; ``row_group``: Parquet's rows per row group;
    ``engine``, ``num_cpus`` and ``runtime_env`` as :class:`Loader`'s. The pipeline yields
    records (no ``batch``), as ``--output`` asks.
    """
    options = _split_options(params, ("output", "shards", "num_workers", "format", "compression", "row_group", "engine", "num_cpus", "runtime_env"))
    for required in ("output", "shards", "num_workers"):
        if required not in options:
            raise ParameterError(f"export: give {required}")
    output, shards, workers = os.path.abspath(os.fspath(options["output"])), int(options["shards"]), int(options["num_workers"])
    if shards < workers:
        raise ParameterError(f"export: shards={shards} is fewer than num_workers={workers}: each worker writes at least one")
    fmt = options.get("format", "tfrecord")
    if fmt not in ("tfrecord", "parquet"):
        raise ParameterError(f"export: format={fmt!r}: expected 'tfrecord' or 'parquet'")
    flags = {"--format": fmt, "--compression": options.get("compression", "snappy" if fmt == "parquet" else "none")}
    if fmt == "tfrecord" and flags["--compression"] not in ("none", "gzip"):
        raise ParameterError(f"export: compression={flags['--compression']!r}: expected 'none' or 'gzip' for TFRecord")
    if options.get("row_group") is not None:
        flags["--row-group"] = str(int(options["row_group"]))
    path = os.path.abspath(os.fspath(path))
    text = {k: _text(v) for k, v in params.items()}
    name = Pipeline(path, name, workers=workers, worker=0, engine="interpreted", format="numpy", **text).name
    os.makedirs(output, exist_ok=True)
    remote_options: Dict[str, Any] = {"num_cpus": options.get("num_cpus", 1), "scheduling_strategy": "SPREAD", "max_retries": 0}
    if options.get("runtime_env") is not None:
        remote_options["runtime_env"] = options["runtime_env"]
    task = ray.remote(_export_worker).options(**remote_options)
    refs, first = [], 0
    for w in range(workers):
        count = shards // workers + (1 if w < shards % workers else 0)
        refs.append(task.remote(path, name, output, workers, w, first, count, shards, flags, options.get("engine", "interpreted"), text))
        first += count
    return [f for part in ray.get(refs) for f in part]
