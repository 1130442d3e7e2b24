"""The ``Executor`` protocol every executor is (the local pool, Dask): what the runner talks to."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from barca.engine.executors.job import StepJob, StepRecord


@runtime_checkable
class Executor(Protocol):
    """Runs steps: ``run`` hands each finished step's record to ``on_record`` (in the
    coordinator) as it lands, and returns when every step has one; ``on_lines``, if the
    executor can, gets the lines steps write while they run, (task index, time, stream, line),
    before their records (the record then carries none); ``close`` stops the workers (an
    executor is reused across the calls of one command); ``meanwhile``, if given, is called
    once in the coordinator while the steps run (work that does not wait for them)."""

    size: int

    def run(self, tasks: list[StepJob], on_record: Callable[[StepRecord], None],
            on_lines: Callable[[list[tuple[int, float, str, str]]], None] | None = None,
            meanwhile: Callable[[], None] | None = None) -> None: ...

    def close(self) -> None: ...
