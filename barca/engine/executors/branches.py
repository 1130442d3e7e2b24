"""In-step fan-out: a step calls ``barca.parallel(partial(task_fn, x), ...)`` and its branches
run on the pool's other workers (``barca docs parallel``).

The caller's worker sends the branches to the coordinator over its pipe and waits; while it
waits it does not count against the pool size or the capacity. Each branch runs like a step
in some worker -- import the file, call the ``@task`` function -- but is never cached, never
retried, and never recorded: its value (or its error) travels back over the pipes to the
caller, serialised as a step's output would be (JSON, else pickle), and nothing is written to
disk. Outside a pool (a plain Python call, a Dask worker) the branches run one after another
in the caller, with the same results."""
from __future__ import annotations

import json
import os
import sys
import traceback as tb
from typing import Any

from barca.core.record import Fields

BRANCH_TIMEOUT = 300.0   # seconds: a branch running longer comes back as a TimeoutError
CHANNEL: Any = None      # the worker's pipe to the coordinator, when it runs in a pool
_BARCA = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BranchJob(Fields):
    """One branch, as a worker is handed it (the parts of a ``StepJob`` the loader uses)."""
    __slots__ = ("index", "step", "file", "module", "function", "args", "kwargs", "shipped",
                 "timeout", "weight", "retries")

    def __init__(self, index: int, step: str, file: str, module: str, function: str,
                 args: str, kwargs: str, shipped: bytes | None = None) -> None:
        self.index, self.step, self.file, self.module = index, step, file, module
        self.function, self.args, self.kwargs, self.shipped = function, args, kwargs, shipped
        self.timeout = BRANCH_TIMEOUT
        self.weight = 1     # the coordinator gives it the caller's
        self.retries = 0    # never retried


class BranchRecord(Fields):
    """What came back: ``status`` success (``data`` in ``format``), failed (``error``: the
    exception and its frames) or unserialisable (``error`` says why)."""
    __slots__ = ("index", "status", "format", "data", "error")

    def __init__(self, index: int, status: str, format: str | None = None,  # noqa: A002
                 data: bytes | None = None, error: str | None = None) -> None:
        self.index, self.status, self.format, self.data, self.error = (
            index, status, format, data, error)


def error_text(exc: BaseException) -> str:
    """``ValueError: bad value 2`` then the user's frames (barca's own left out)."""
    frames = [f for f in tb.extract_tb(exc.__traceback__)
              if not f.filename.startswith(_BARCA) and not f.filename.startswith("<frozen ")]
    return f"{type(exc).__name__}: {exc}\n" + "".join(tb.format_list(frames))


def pack(index: int, label: str, value: Any) -> BranchRecord:
    """A branch's value as it travels: JSON if JSON holds it, else pickle."""
    from barca.identity.hashing import is_json_value
    from barca.store import artifacts
    fmt = "json" if is_json_value(value) else "pickle"
    try:
        return BranchRecord(index, "success", fmt, artifacts.serialize(value, fmt))
    except Exception as exc:  # noqa: BLE001 - said to the caller as BranchResultError
        kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")
        return BranchRecord(index, "unserialisable", error=(
            f"the result of branch {label} is a {kind}, which cannot be sent back to the "
            f"caller ({type(exc).__name__}: {exc})"))


def call(fn: Any, job: BranchJob) -> BranchRecord:
    """Run one branch here and pack what it gives."""
    try:
        value = fn(*json.loads(job.args), **json.loads(job.kwargs))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a branch's exception is its slot's value
        return BranchRecord(job.index, "failed", error=error_text(exc))
    return pack(job.index, job.step, value)


def run_branch(worker: Any, job: BranchJob) -> BranchRecord:
    """In a pool worker: import (once) and run the branch's function."""
    try:
        fn = worker.function(job)
    except BaseException as exc:  # noqa: BLE001 - the file failed to import: the slot says so
        if isinstance(exc, KeyboardInterrupt):
            raise
        return BranchRecord(job.index, "failed", error=error_text(exc))
    from barca.engine.executors.capture import StepOutput, captured
    with captured(StepOutput()):  # what a branch prints is not the coordinator's
        return call(fn, job)


def job_for(index: int, part: Any) -> BranchJob:
    """The job of one ``functools.partial`` over a ``@task`` function (a TypeError else)."""
    import functools
    fn = getattr(part, "func", None)
    meta = getattr(fn, "__barca__", None)
    if not isinstance(part, functools.partial) or not meta or meta.get("kind") != "task":
        raise TypeError("parallel() takes functools.partial objects over @task functions, "
                        f"got {part!r}")
    fn = part.func  # (the same function, now known to be a partial's)
    try:
        args, kwargs = json.dumps(list(part.args)), json.dumps(dict(part.keywords))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the arguments of a branch of {fn.__name__} must be JSON values "
                        f"({exc})") from None
    module = sys.modules.get(fn.__module__)
    file = os.path.abspath(getattr(module, "__file__", "") or "")
    shipped = None
    if fn.__module__ == "__main__" or not os.path.isfile(file):
        import cloudpickle  # a function defined in a notebook: sent by value
        shipped = cloudpickle.dumps(fn)
    try:
        rel = os.path.relpath(file, os.getcwd()).replace(os.sep, "/")
    except ValueError:
        rel = file
    return BranchJob(index, f"{rel}:{fn.__name__}", file, fn.__module__, fn.__name__, args,
                     kwargs, shipped)


def run_all(jobs: list[BranchJob], fns: list[Any]) -> list[BranchRecord]:
    """Every branch: on the pool when this process is a pool worker, else here in turn."""
    if not jobs:
        return []
    if CHANNEL is not None:
        CHANNEL.send(("branches", jobs))
        kind, records = CHANNEL.recv()
        assert kind == "branch_results", kind
        return records
    return [call(fn, job) for fn, job in zip(fns, jobs, strict=True)]
