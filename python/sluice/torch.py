"""``sluice.torch.dataset(...)``: a Sluice pipeline as a ``torch.utils.data.IterableDataset``.

The pipeline batches, so the loader must not::

    loader = torch.utils.data.DataLoader(sluice.torch.dataset("train.pipe", data="data/"),
                                         batch_size=None, num_workers=0)

Sluice runs its own threads (the GIL released while they work); DataLoader worker
processes would each run a whole copy of the pipeline, so they are refused.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

import torch.utils.data

from ._pipeline import Pipeline


class SluiceDataset(torch.utils.data.IterableDataset):
    """A :class:`sluice.Pipeline` as an ``IterableDataset``: each ``iter`` (each epoch of
    a ``DataLoader``) runs the next ``epochs`` passes. The pipeline is compiled and opened
    on first iteration."""

    def __init__(self, path: str, name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__()
        self._args = (path, name)
        self._kwargs = kwargs
        self._pipeline: Optional[Pipeline] = None

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline (compiled and opened on first use)."""
        if self._pipeline is None:
            self._pipeline = Pipeline(*self._args, **self._kwargs)
        return self._pipeline

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        if info is not None:
            raise RuntimeError(
                "sluice.torch.dataset runs its own threads: use DataLoader(batch_size=None, num_workers=0)"
            )
        return iter(self.pipeline)

    def stats(self) -> Dict[str, Any]:
        """The pipeline's statistics (:meth:`sluice.Pipeline.stats`)."""
        return self.pipeline.stats()

    def state(self) -> bytes:
        """The position reached (:meth:`sluice.Pipeline.state`)."""
        return self.pipeline.state()


def dataset(path: str, name: Optional[str] = None, **kwargs: Any) -> SluiceDataset:
    """The pipeline ``name`` of the ``.pipe`` file at ``path`` (arguments as
    :class:`sluice.Pipeline`'s) as an ``IterableDataset`` for
    ``DataLoader(batch_size=None, num_workers=0)``."""
    return SluiceDataset(path, name, **kwargs)
