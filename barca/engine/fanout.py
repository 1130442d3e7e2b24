"""``parallel`` and ``parallel_map``: run ``@task`` functions as branches of the calling step,
at the same time, on the worker pool (``barca docs parallel``)."""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any


class ParallelError(Exception):
    """The value in a raising branch's slot: ``.error`` (and ``str()``) is the exception's
    type and message followed by its traceback frames; ``.branch`` names the branch."""

    def __init__(self, error: str, branch: str = "") -> None:
        super().__init__(error)
        self.error, self.branch = error, branch

    def __str__(self) -> str:
        return self.error

    def __repr__(self) -> str:
        first = self.error.splitlines()[0] if self.error else ""
        return f"ParallelError({first!r})"


class BranchResultError(Exception):
    """Raised in the caller: a branch returned a value that cannot be sent back to it."""


def parallel(*partials: Any) -> list[Any]:
    """Run each ``functools.partial(task_fn, ...)`` as a branch; their values in argument
    order, a ``ParallelError`` in the slot of a branch that raised."""
    from barca.engine.executors.branches import job_for, run_all
    from barca.store import artifacts
    jobs = [job_for(-(i + 1), p) for i, p in enumerate(partials)]
    records = run_all(jobs, [p.func for p in partials])
    out: list[Any] = []
    for job, rec in zip(jobs, records, strict=True):
        if rec.status == "success":
            assert rec.data is not None and rec.format is not None  # a success carries both
            out.append(artifacts.deserialize(rec.data, rec.format))
        elif rec.status == "unserialisable":
            raise BranchResultError(rec.error)
        else:
            out.append(ParallelError(rec.error or "", job.step))
    return out


def parallel_map(f: Callable[..., Any], items: Iterable[Any]) -> list[Any]:
    """``parallel(*(partial(f, i) for i in items))``."""
    return parallel(*(functools.partial(f, i) for i in items))
