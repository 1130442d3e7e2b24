"""Executors run steps somewhere (the local process pool, or Dask) and stream back records."""
from __future__ import annotations

import os
from typing import Any


def default_pool_size() -> int:
    from barca.settings import value
    env = str(value("pool_size") or "").strip()  # BARCA_POOL_SIZE, else barca.toml
    if env:
        try:
            n = int(env)
        except ValueError:
            from barca.errors import UsageError
            raise UsageError(f"BARCA_POOL_SIZE={env!r} is not a number",
                             "Set BARCA_POOL_SIZE to a positive integer, or unset it.") from None
        if n < 1:
            from barca.errors import UsageError
            raise UsageError(f"BARCA_POOL_SIZE={env!r} must be at least 1",
                             "Set BARCA_POOL_SIZE to a positive integer, or unset it.")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def executor_name(flag: str | None = None) -> str:
    """``local`` (the process pool), ``dask`` (a LocalCluster) or a scheduler address: the
    ``--executor`` flag, else ``BARCA_EXECUTOR``, else barca.toml, else local."""
    from barca.settings import value
    name = str(value("executor", flag=flag or None) or "").strip() or "local"
    if name not in ("local", "dask") and "://" not in name:
        from barca.errors import UsageError
        raise UsageError(f"BARCA_EXECUTOR={name!r} is not an executor",
                         "Use local, dask (a local Dask cluster) or a scheduler address such as "
                         "tcp://127.0.0.1:8786.")
    if "://" in name:
        from barca import remote
        if remote.configured() is None:
            from barca.errors import UsageError
            raise UsageError(f"BARCA_EXECUTOR={name} runs steps on other machines, which need "
                             "a shared store", "Set BARCA_REMOTE_URI (for example "
                             "s3://bucket/barca) so workers can read inputs and write results.")
    return name


def start(root: str, size: int | None, on_import: Any, executor: str | None = None) -> Any:
    """The executor for a run: the local process pool, or Dask when ``--executor`` (else
    ``BARCA_EXECUTOR``, else barca.toml) says ``dask`` or a scheduler address."""
    size = size or default_pool_size()
    kind = executor_name(executor)
    if kind == "local":
        from barca.executors.process import ProcessPool
        return ProcessPool(root, size, on_import)
    from barca.executors.dask import DaskExecutor
    return DaskExecutor(root, kind, size, on_import)
