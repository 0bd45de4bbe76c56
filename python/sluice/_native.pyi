"""Type stubs of the extension module ``sluice._native``."""

from typing import Any, Dict, List, Optional, Tuple, Union

ABI_VERSION: int

class SluiceError(Exception): ...

class CompileError(SluiceError):
    file: str
    line: Optional[int]
    column: Optional[int]
    code: Optional[str]

class ParameterError(SluiceError): ...

class DataError(SluiceError):
    file: Optional[str]
    record: Optional[int]

class Tensor:
    """A DLPack producer over a buffer of Sluice's (exported once)."""

    @property
    def shape(self) -> List[int]: ...
    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Optional[bool] = None
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class Session:
    def next(self, passes: int) -> Union[None, str, Dict[str, Any]]: ...
    def stats(self) -> str: ...
    def state(self) -> bytes: ...
    def last_pointers(self) -> Dict[str, int]: ...

class Library:
    def __init__(self, path: str) -> None: ...
    def open(self, name: str, set: List[str], resume: Optional[bytes] = None, budget: int = 0) -> Session: ...

class Program:
    """A ``.pipe`` file the engine compiled."""

    def open(self, name: str, set: List[str], resume: Optional[bytes] = None, budget: int = 0) -> Session: ...

class Engine:
    """The engine's library the wheel ships."""

    def __init__(self, path: str) -> None: ...
    def compile(self, path: str) -> Tuple[Optional[Program], str]: ...
