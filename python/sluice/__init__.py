"""Sluice from Python: input pipelines feeding PyTorch, JAX or NumPy loops.

A ``.pipe`` file's pipeline runs at once in the engine this package ships (no Rust
toolchain needed), or compiled by the same code generator ``sluice run`` uses into a
native library (built with cargo, cached after; ``engine="compiled"``, or ``"auto"``
when such a library is built already or the engine does not run the pipeline), and
iterating a :class:`Pipeline` yields its batches as dicts of arrays by field name,
handed over without a copy (DLPack)::

    import sluice
    for batch in sluice.Pipeline("examples/digits/digits.pipe", "train", data="examples/digits/data"):
        x, y = batch["image"], batch["label"]   # torch tensors over Sluice's buffers

Errors: :class:`CompileError` (a bad ``.pipe`` file: the rendered diagnostics, with
``file``, ``line``, ``column`` and ``code``), :class:`ParameterError` (a bad parameter or
saved state) and :class:`DataError` (the data: the message names the file and record),
all :class:`SluiceError`.
"""

from ._native import CompileError, DataError, ParameterError, SluiceError, Tensor
from ._pipeline import Pipeline, build_library, sluice_binary

__all__ = [
    "CompileError",
    "DataError",
    "ParameterError",
    "Pipeline",
    "SluiceError",
    "Tensor",
    "build_library",
    "sluice_binary",
]
