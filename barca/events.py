"""Progress events: the only way the engine reports progress to a front end."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union


@dataclass(frozen=True)
class Importing:
    """A worker process imported a pipeline file."""
    path: str


@dataclass(frozen=True)
class StepStarted:
    step: str
    done: int
    total: int


@dataclass(frozen=True)
class StepCompleted:
    step: str
    elapsed: float
    done: int
    total: int
    output: str = ""


@dataclass(frozen=True)
class StepCached:
    """An unpartitioned node served from cache."""
    step: str


@dataclass(frozen=True)
class StepFailedEvent:
    step: str
    error: str
    traceback: str = ""
    output: str = ""


@dataclass(frozen=True)
class Note:
    """A remark for the user (stderr in the CLI): skipped fan-ins, warnings."""
    text: str
    level: str = "note"   # "note" | "warning"


@dataclass(frozen=True)
class RunEnded:
    done: int
    total: int
    elapsed: float
    failed: bool


Event = Union[Importing, StepStarted, StepCompleted, StepCached, StepFailedEvent, Note, RunEnded]
EventCallback = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """The default callback: drop every event."""
