"""Type stubs of the ``sluice`` package."""

from typing import Any, Dict, Iterator, Optional

from ._native import CompileError as CompileError
from ._native import DataError as DataError
from ._native import ParameterError as ParameterError
from ._native import SluiceError as SluiceError
from ._native import Tensor as Tensor

def sluice_binary() -> str: ...
def build_library(path: str, cached: bool = False) -> Optional[Dict[str, Any]]: ...

class Pipeline:
    path: str
    name: str
    epochs: int
    params: Dict[str, str]
    device: Optional[str]
    format: str
    library_path: Optional[str]
    engine: str
    def __init__(
        self,
        path: str,
        name: Optional[str] = None,
        *,
        epochs: int = 1,
        resume: Optional[bytes] = None,
        workers: Optional[int] = None,
        worker: Optional[int] = None,
        device: Optional[str] = None,
        format: Optional[str] = None,
        memory_budget_mb: Optional[int] = None,
        engine: Optional[str] = None,
        **params: Any,
    ) -> None: ...
    def __iter__(self) -> Iterator[Any]: ...
    def stats(self) -> Dict[str, Any]: ...
    def state(self) -> bytes: ...
    def last_pointers(self) -> Dict[str, int]: ...
