"""barca: plain Python functions as a cached dependency graph.

Only the decorators and errors are imported eagerly, so ``import barca`` stays cheap in worker
processes and notebooks; the engine's functions load on first use.
"""
from barca.core.errors import BarcaError, Cancelled, InfrastructureError, StepFailed, UsageError
from barca.model.decorators import (
    Always,
    Manual,
    Schedule,
    asset,
    asset_ref,
    collect,
    group,
    partitions,
    partitions_from,
    sensor,
    sink,
    task,
    unsafe,
)

__version__ = "0.1.0"

__all__ = [
    "Always", "BarcaError", "Cancelled", "InfrastructureError", "Manual", "Schedule",
    "StepFailed", "UsageError", "__version__", "asset", "asset_ref", "collect", "group", "get",
    "history", "list_nodes", "load_ipython_extension", "partitions", "partitions_from", "plan",
    "run", "sensor", "sink", "sql", "status", "task", "graph", "unsafe", "stats",
    "parallel", "parallel_map", "ParallelError", "BranchResultError", "duckdb_connection",
]  # StatusWidget (barca.StatusWidget) needs the [jupyter] extra: not star-imported

_API = {"get", "run", "status", "list_nodes", "plan", "history", "sql", "graph", "stats"}


_FANOUT = {"parallel", "parallel_map", "ParallelError", "BranchResultError"}


def __getattr__(name: str) -> object:
    if name in _FANOUT:  # loaded on first use: a worker that never fans out never imports it
        from barca.engine import fanout
        return getattr(fanout, name)
    if name == "duckdb_connection":
        from barca.store.duck import duckdb_connection
        return duckdb_connection
    if name in _API:
        from barca import api
        return getattr(api, name)
    if name == "StatusWidget":
        from barca.faces.jupyter.widget import StatusWidget
        return StatusWidget
    raise AttributeError(f"module 'barca' has no attribute {name!r}")


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext barca``: register the ``%barca`` magics."""
    from barca.faces.jupyter.magics import load_ipython_extension as load
    load(ipython)
