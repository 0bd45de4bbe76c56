"""``sluice.Pipeline``: a pipeline as a Python iterable (see ``__init__``), run by the
engine the wheel ships (``_bin/libsluice_engine_py.so``, no cargo needed) or compiled
into a native library by the ``sluice`` tool (``_bin/sluice``) and cargo."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from typing import Any, Dict, Iterator, List, Optional

from . import _native
from ._native import CompileError, DataError, ParameterError, SluiceError

# Keyword arguments of Pipeline that are not pipeline parameters.
_OPTIONS = ("epochs", "resume", "workers", "worker", "device", "format", "memory_budget_mb", "engine")

# What the wheel ships beside this package: the `sluice` tool and the engine's library.
_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")
_ENGINE_LIB = "libsluice_engine_py.so"

ENGINES = ("auto", "interpreted", "compiled")


def sluice_binary() -> str:
    """The ``sluice`` tool: ``$SLUICE_BIN``, else the one the package ships
    (``sluice/_bin/sluice``), else ``sluice`` on ``PATH``."""
    for candidate in (os.environ.get("SLUICE_BIN"), os.path.join(_BIN, "sluice")):
        if candidate and os.path.isfile(candidate):
            return candidate
    found = shutil.which("sluice")
    if found:
        return found
    raise SluiceError("cannot find the `sluice` tool: set SLUICE_BIN, or install the sluice wheel (scripts/setup-python)")


_ENGINE: Optional["_native.Engine"] = None


def engine_library() -> "_native.Engine":
    """The engine's library the package ships (loaded once)."""
    global _ENGINE
    if _ENGINE is None:
        path = os.path.join(_BIN, _ENGINE_LIB)
        if not os.path.isfile(path):
            raise SluiceError(f"this sluice package has no engine library ({path}): install the wheel scripts/setup-python builds")
        _ENGINE = _native.Engine(path)
    return _ENGINE


def _raise_answer(answer: Dict[str, Any], path: str) -> None:
    """Raises what a failed answer of ``sluice python-lib`` (or the engine's compile) says."""
    if answer.get("kind") in ("build", "toolchain"):
        raise SluiceError(answer["message"])
    error = CompileError(answer["message"])
    error.file = answer.get("file", path)
    error.line = answer.get("line")
    error.column = answer.get("column")
    error.code = answer.get("code")
    raise error


def build_library(path: str, cached: bool = False) -> Optional[Dict[str, Any]]:
    """Compiles the ``.pipe`` file at ``path`` into its native library (cargo's progress
    on stderr the first time; cached after) and returns ``sluice python-lib``'s answer:
    ``{"lib": PATH, "pipelines": [...], "info": {NAME: {"params": [...], "cuda": bool}}}``.
    With ``cached``, only a library already built for this plan (``None`` when there is
    none, no tool or no cache directory). Raises :class:`CompileError` for a file with errors or that cannot
    be read, :class:`SluiceError` when the build fails or cargo or the sources are missing."""
    try:
        tool = sluice_binary()
    except SluiceError:
        if cached:
            return None
        raise
    args = [tool, "python-lib", os.fspath(path)] + (["--cached"] if cached else [])
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=None, check=False)
    try:
        answer = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SluiceError(f"`sluice python-lib {path}` failed (exit status {done.returncode})") from None
    if answer.get("ok"):
        return answer
    if cached:
        return None  # not built, or no cache directory: nothing cached to use
    _raise_answer(answer, os.fspath(path))
    return None


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
    """A pipeline of a ``.pipe`` file, iterated from Python.

    ``Pipeline(path, name=None, **params)``: ``name`` may be left out when the file has
    one pipeline; ``params`` set its parameters (as ``sluice run --set NAME=VALUE``;
    values are turned into text: ``True`` is ``true``). Options:

    - ``engine`` (default ``$SLUICE_ENGINE``, else ``"auto"``): ``"interpreted"`` runs
      the pipeline at once in the engine the package ships (no cargo; a pipeline it does
      not run yet raises its refusal); ``"compiled"`` builds it into a native library
      with cargo and the sluice sources (cached after the first time); ``"auto"`` uses
      a compiled library when one is already built for this plan, else the engine, and
      compiles only a pipeline the engine does not run. ``engine`` and ``stats()`` say
      which ran.

    - ``epochs`` (default 1): the passes each ``iter(pipeline)`` runs; the next ``iter``
      goes on with the following passes (a new epoch: new shuffles).
    - ``resume``: ``PipelineState`` bytes from :meth:`state`: the run goes on exactly
      where the one that saved them was (same parameters and files). Or a list of the
      states of every rank of a run with another number of ranks (``workers``): for an
      elastic pipeline (``sluice explain`` says ``elastic: yes``) they are redealt to this
      run's ``workers``, and the ranks together go on with what those had not delivered
      of their epoch, each element once.
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
        choice = options.get("engine") or os.environ.get("SLUICE_ENGINE") or "auto"
        if choice not in ENGINES:
            raise ParameterError(f"engine={choice!r}: expected one of {', '.join(ENGINES)}")
        program, built = None, None
        if choice == "compiled":
            built = build_library(self.path)
        else:
            program, text = engine_library().compile(self.path)
            built = json.loads(text)
            if program is None:
                _raise_answer(built, self.path)
        names: List[str] = built["pipelines"]
        if name is None:
            if len(names) != 1:
                raise ParameterError(f"{self.path}: name the pipeline: {', '.join(names) or 'none'}")
            name = names[0]
        if name not in names:
            raise ParameterError(f"{self.path}: no pipeline `{name}` (the file has {', '.join(names)})")
        self.name = name
        info = built.get("info", {}).get(name, {"params": [], "cuda": False})
        #: The compiled library that runs the pipeline (``None`` when the engine does).
        self.library_path: Optional[str] = built.get("lib")
        if program is not None:
            refusal = info.get("refusal")
            compiled = build_library(self.path, cached=True) if choice == "auto" else None
            if compiled is None and refusal is not None:
                if choice == "interpreted":
                    raise SluiceError(refusal)
                try:
                    compiled = build_library(self.path)
                except SluiceError as e:
                    raise SluiceError(f"{refusal}\n{e}") from None
            if compiled is not None:
                program, self.library_path = None, compiled["lib"]
        #: The backend that runs the pipeline: ``"interpreted"`` or ``"compiled"``.
        self.engine: str = "interpreted" if program is not None else "compiled"
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
        self._library = program if program is not None else _native.Library(self.library_path)
        self._session = self._library.open(
            name,
            [f"{k}={v}" for k, v in self.params.items()],
            _resume_bytes(options.get("resume")),
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
        records per second, the per-stage statistics (``stages``, ``bottleneck``) and the
        ``engine`` that ran (``interpreted`` or ``compiled``), as ``sluice run --json``
        reports them."""
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
        return f"sluice.Pipeline({self.path!r}, {self.name!r}, epochs={self.epochs}, engine={self.engine!r})"


def _resume_bytes(resume: Any) -> Optional[bytes]:
    """The ``resume`` option as the native side reads it: one state's bytes, or a list of
    states framed as a set (``SLSS``, a count, each state's length and bytes, u32 LE)."""
    if resume is None or isinstance(resume, (bytes, bytearray, memoryview)):
        return resume
    states = [bytes(s) for s in resume]
    framed = [b"SLSS", struct.pack("<I", len(states))]
    for s in states:
        framed += [struct.pack("<I", len(s)), s]
    return b"".join(framed)


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
