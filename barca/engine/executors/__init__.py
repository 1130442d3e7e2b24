"""Executors run steps somewhere (the local process pool, or Dask) and stream back records.

Every executor is an ``Executor`` (executors.protocol); ``start`` is the one place that picks
one, from the command's ``Settings``. The runner talks to the protocol only."""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Callable

    from barca.core.settings import Settings
    from barca.engine.executors.protocol import Executor as Executor


def __getattr__(name: str) -> object:
    """``Executor`` (the protocol, in executors.protocol), loaded when asked: the pool size a
    cached command reads from here needs no typing."""
    if name == "Executor":
        from barca.engine.executors.protocol import Executor
        return Executor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_pool_size(settings: Settings) -> int:
    """The number of workers: ``pool_size`` (flag, ``BARCA_POOL_SIZE``, ``[run] pool_size``),
    else one per core."""
    raw = str(settings.pool_size if settings.pool_size is not None else "").strip()
    if raw:
        where = settings.where("pool_size")
        fix = f"Set {where} to a positive integer, or unset it."
        try:
            n = int(raw)
        except ValueError:
            from barca.core.errors import UsageError
            raise UsageError(f"{where}={raw!r} is not a number", fix) from None
        if n < 1:
            from barca.core.errors import UsageError
            raise UsageError(f"{where}={raw!r} must be at least 1", fix)
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def capacity(settings: Settings, pool_size: int | None = None) -> tuple[int, str]:
    """How much step weight may run at once, and where that came from: ``BARCA_CAPACITY``,
    else ``[execution] capacity`` in barca.toml, else the pool size (``pool size``)."""
    raw = settings.capacity
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return (pool_size or default_pool_size(settings)), "pool size"
    where = settings.where("capacity")
    text = str(raw).strip()
    if isinstance(raw, bool) or not text.isdigit() or int(text) < 1:
        from barca.core.errors import UsageError
        raise UsageError(f"{where}={raw!r} is not a whole number >= 1",
                         f"Set {where} to the weight that may run at once (a whole number "
                         "such as 4), or unset it to use the pool size.")
    return int(text), where


def executor_name(settings: Settings) -> str:
    """``local`` (the process pool), ``dask`` (a LocalCluster) or a scheduler address: the
    ``executor`` setting (``--executor``, ``BARCA_EXECUTOR``, ``[run] executor``), else local."""
    name = str(settings.executor or "").strip() or "local"
    where = settings.where("executor", "BARCA_EXECUTOR")
    if name not in ("local", "dask") and "://" not in name:
        from barca.core.errors import UsageError
        raise UsageError(f"{where}={name!r} is not an executor",
                         "Use local, dask (a local Dask cluster) or a scheduler address such as "
                         "tcp://127.0.0.1:8786.")
    if "://" in name and settings.remote_uri is None:
        from barca.core.errors import UsageError
        raise UsageError(f"{where}={name} runs steps on other machines, which need "
                         "a shared store", "Set BARCA_REMOTE_URI (for example "
                         "s3://bucket/barca) so workers can read inputs and write results.")
    return name


def start(settings: Settings, on_import: Callable[[str], None],
          size: int | None = None, on_note: Callable[[str], None] | None = None) -> Executor:
    """The executor for a run, chosen here alone: the local process pool, or Dask when the
    ``executor`` setting says ``dask`` or a scheduler address. ``on_note``: a line for the
    user (a step still running), where the executor can tell."""
    size = size or default_pool_size(settings)
    kind = executor_name(settings)
    if kind == "local":
        from barca.engine.executors.process import ProcessPool
        return ProcessPool(settings, size, on_import, on_note)
    from barca.engine.executors.dask import DaskExecutor
    return DaskExecutor(settings, kind, size, on_import)
