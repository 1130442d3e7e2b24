"""barca: plain Python functions as a cached dependency graph.

Only the errors are imported eagerly, so ``import barca`` stays cheap in worker processes and
notebooks; the decorators load on first use (a cached command, which reads its pipelines'
models and never imports them, loads none: #31 item 2), the engine's functions too.
"""
from barca.core.errors import BarcaError, Cancelled, InfrastructureError, StepFailed, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:  # what a type checker (and an editor) sees: the decorators, typed
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
del TYPE_CHECKING  # (not a public name)

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

_DECORATORS = ("Always", "Manual", "Schedule", "asset", "asset_ref", "collect", "group",
               "partitions", "partitions_from", "sensor", "sink", "task", "unsafe")


def __getattr__(name: str) -> object:
    if name in _DECORATORS:  # bound here once loaded: later reads are plain attributes
        from barca.model import decorators
        globals().update((n, getattr(decorators, n)) for n in _DECORATORS)
        return getattr(decorators, name)
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
