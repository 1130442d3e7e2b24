"""Executors run steps somewhere (the local process pool, or Dask) and stream back records."""
from __future__ import annotations

import os


def default_pool_size() -> int:
    env = os.environ.get("BARCA_POOL_SIZE", "").strip()
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
