"""Type stubs of ``sluice.ray``."""

from typing import Any, Dict, Iterator, List, Optional

import ray.data

DEFAULT_IN_FLIGHT: int

class Loader:
    path: str
    name: str
    num_workers: int
    rank: int
    world_size: int
    in_flight: int
    epochs: int
    format: str
    max_restarts: int
    params: Dict[str, str]
    workers: List[int]
    def __init__(
        self,
        path: str,
        name: Optional[str] = None,
        *,
        num_workers: int,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        in_flight: int = 2,
        epochs: int = 1,
        resume: Optional[bytes] = None,
        format: Optional[str] = None,
        engine: str = "interpreted",
        num_cpus: float = 1,
        runtime_env: Optional[Dict[str, Any]] = None,
        max_restarts: int = 3,
        actor_options: Optional[Dict[str, Any]] = None,
        **params: Any,
    ) -> None: ...
    def __iter__(self) -> Iterator[Any]: ...
    @property
    def epoch(self) -> int: ...
    @property
    def bound_bytes(self) -> int: ...
    def state(self) -> bytes: ...
    def stats(self) -> Dict[str, Any]: ...
    def cluster_stats(self) -> Dict[str, Any]: ...
    def worker_info(self) -> List[Dict[str, Any]]: ...
    def actors(self) -> Dict[int, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Loader": ...
    def __exit__(self, *exc: Any) -> None: ...

class Datasource(ray.data.Datasource):
    path: str
    name: str
    params: Dict[str, str]
    shards: Optional[int]
    engine: str
    block_rows: int
    def __init__(
        self,
        path: str,
        name: Optional[str] = None,
        *,
        shards: Optional[int] = None,
        engine: str = "interpreted",
        block_rows: int = 1024,
        **params: Any,
    ) -> None: ...
    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None, data_context: Any = None) -> List[Any]: ...
    def estimate_inmemory_data_size(self) -> Optional[int]: ...

def object_store_usage() -> Dict[str, int]: ...
def export(
    path: str,
    name: Optional[str] = None,
    *,
    output: str,
    shards: int,
    num_workers: int,
    compression: str = "none",
    engine: str = "interpreted",
    num_cpus: float = 1,
    runtime_env: Optional[Dict[str, Any]] = None,
    **params: Any,
) -> List[str]: ...
