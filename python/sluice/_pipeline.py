"""``sluice.Pipeline``: a compiled pipeline as a Python iterable (see ``__init__``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from typing import Any, Dict, Iterator, List, Optional

from . import _native
from ._native import CompileError, DataError, ParameterError, SluiceError

# Keyword arguments of Pipeline that are not pipeline parameters.
_OPTIONS = ("epochs", "resume", "workers", "worker", "device", "format", "memory_budget_mb")


def sluice_binary() -> str:
    """The ``sluice`` tool that compiles pipelines: ``$SLUICE_BIN``, else the one this
    package was built with (``scripts/setup-python``), else ``sluice`` on ``PATH``."""
    for candidate in (os.environ.get("SLUICE_BIN"), _native.BUILT_SLUICE_BIN):
        if candidate and os.path.isfile(candidate):
            return candidate
    found = shutil.which("sluice")
    if found:
        return found
    raise SluiceError(
        "cannot find the `sluice` tool: set SLUICE_BIN or run scripts/setup-python, which builds it"
    )


def build_library(path: str) -> Dict[str, Any]:
    """Compiles the ``.pipe`` file at ``path`` into its native library (cargo's progress
    on stderr the first time; cached after) and returns ``sluice python-lib``'s answer:
    ``{"lib": PATH, "pipelines": [...], "info": {NAME: {"params": [...], "cuda": bool}}}``.
    Raises :class:`CompileError` for a file with errors or that cannot be read."""
    done = subprocess.run(
        [sluice_binary(), "python-lib", os.fspath(path)], stdout=subprocess.PIPE, stderr=None, check=False
    )
    try:
        answer = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SluiceError(f"`sluice python-lib {path}` failed (exit status {done.returncode})") from None
    if answer.get("ok"):
        return answer
    if answer.get("kind") == "build":
        raise SluiceError(answer["message"])
    error = CompileError(answer["message"])
    error.file = answer.get("file", os.fspath(path))
    error.line = answer.get("line")
    error.column = answer.get("column")
    error.code = answer.get("code")
    raise error


# `PATH: record N` and `PATH: corrupt record N at byte offset B` (the runtime's forms).
_LOCATION = re.compile(r"(?P<file>[^\s:`]+): (?:corrupt )?record (?P<record>\d+)")


def _locate(error: DataError) -> DataError:
    """Sets ``file`` and ``record`` on a data error whose message names them."""
    m = _LOCATION.search(str(error))
    error.file = m.group("file") if m else None
    error.record = int(m.group("record")) if m else None
    return error


def _torch_distributed():
    """``(world_size, rank)`` when torch.distributed is initialised, else ``None``."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return None


class Pipeline:
    """A pipeline of a ``.pipe`` file, compiled to native code, iterated from Python.

    ``Pipeline(path, name=None, **params)``: ``name`` may be left out when the file has
    one pipeline; ``params`` set its parameters (as ``sluice run --set NAME=VALUE``;
    values are turned into text: ``True`` is ``true``). Options:

    - ``epochs`` (default 1): the passes each ``iter(pipeline)`` runs; the next ``iter``
      goes on with the following passes (a new epoch: new shuffles).
    - ``resume``: ``PipelineState`` bytes from :meth:`state`: the run goes on exactly
      where the one that saved them was (same parameters and files).
    - ``workers``, ``worker``: the shard to read, for a pipeline with ``shard(workers,
      worker)``; when left out and ``torch.distributed`` is initialised, its world size
      and rank.
    - ``device``: ``"cuda"`` moves number fields to the GPU when torch has one (a
      ``device cuda`` pipeline's tail runs as its CPU twin); without a GPU they stay on
      the CPU.
    - ``format``: ``"torch"`` (default when torch is installed), ``"numpy"`` or
      ``"dlpack"`` (:class:`sluice.Tensor` producers, for ``jax.dlpack`` or others).
    - ``memory_budget_mb``: RAM AUTOTUNE may spend on buffers (else the declared budget).

    Number fields are arrays over Sluice's own buffers (no copy; freed when the last
    array over them goes), byte-string fields ``bytes`` (lists of them in a batch),
    string fields ``str``; elements without fields are their ``sluice show`` JSON.
    """

    def __init__(self, path: str, name: Optional[str] = None, **params: Any) -> None:
        options = {k: params.pop(k) for k in _OPTIONS if k in params}
        self.path = os.fspath(path)
        built = build_library(self.path)
        names: List[str] = built["pipelines"]
        if name is None:
            if len(names) != 1:
                raise ParameterError(f"{self.path}: name the pipeline: {', '.join(names) or 'none'}")
            name = names[0]
        if name not in names:
            raise ParameterError(f"{self.path}: no pipeline `{name}` (the file has {', '.join(names)})")
        self.name = name
        info = built.get("info", {}).get(name, {"params": [], "cuda": False})
        self.library_path: str = built["lib"]
        self.epochs = int(options.get("epochs", 1))
        if self.epochs < 1:
            raise ParameterError("epochs must be at least 1")
        workers, worker = options.get("workers"), options.get("worker")
        if (workers is None) != (worker is None):
            raise ParameterError("give both `workers` and `worker`, or neither")
        if workers is None and "workers" in info["params"] and "worker" in info["params"]:
            world = _torch_distributed()
            if world is not None:
                workers, worker = world
        if workers is not None:
            params["workers"], params["worker"] = workers, worker
        self.params = {k: _text(v) for k, v in params.items()}
        self.device = options.get("device")
        self.format = options.get("format") or _default_format()
        self._cuda = self.device == "cuda" and _torch_has_cuda()
        budget = options.get("memory_budget_mb")
        self._library = _native.Library(self.library_path)
        self._session = self._library.open(
            name,
            [f"{k}={v}" for k, v in self.params.items()],
            options.get("resume"),
            int(budget * 2**20) if budget else 0,
        )
        self._passes = 0

    def __iter__(self) -> Iterator[Any]:
        self._passes += self.epochs
        passes = self._passes
        session = self._session
        while True:
            try:
                element = session.next(passes)
            except DataError as e:
                raise _locate(e) from None
            if element is None:
                return
            yield self._convert(element)

    def _convert(self, element: Any) -> Any:
        if isinstance(element, str):
            return json.loads(element)
        for key, value in element.items():
            if isinstance(value, _native.Tensor):
                element[key] = self._array(value)
        return element

    def _array(self, tensor: "_native.Tensor") -> Any:
        if self.format == "torch":
            import torch

            t = torch.from_dlpack(tensor)
            return t.to("cuda", non_blocking=True) if self._cuda else t
        if self.format == "numpy":
            import numpy

            return numpy.from_dlpack(tensor)
        return tensor

    def stats(self) -> Dict[str, Any]:
        """Records, batches, epoch, position, seconds spent in the pipeline's ``next``,
        records per second and the per-stage statistics (``stages``, ``bottleneck``), as
        ``sluice run --json`` reports them."""
        return json.loads(self._session.stats())

    def state(self) -> bytes:
        """The ``PipelineState`` bytes of the position reached (epoch and elements of it
        consumed): ``Pipeline(..., resume=state)`` goes on from there. Raises
        :class:`ParameterError` for a pipeline that cannot be resumed exactly."""
        return self._session.state()

    def last_pointers(self) -> Dict[str, int]:
        """The data pointers of the last element's number fields as Sluice's buffers had
        them (compare with ``tensor.data_ptr()``: zero copy)."""
        return self._session.last_pointers()

    def __repr__(self) -> str:
        return f"sluice.Pipeline({self.path!r}, {self.name!r}, epochs={self.epochs})"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def _default_format() -> str:
    try:
        import torch  # noqa: F401

        return "torch"
    except ImportError:
        pass
    try:
        import numpy  # noqa: F401

        return "numpy"
    except ImportError:
        return "dlpack"


def _torch_has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False
