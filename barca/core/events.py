"""Progress events: the only way the engine reports progress to a front end.

Frozen records (``barca.core.record.Record``): compared, hashed and shown by their fields."""
from __future__ import annotations

from barca.core.record import Record

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Callable

_set = object.__setattr__


class Importing(Record):
    """A worker process imported a pipeline file."""
    __slots__ = ("path",)
    path: str

    def __init__(self, path: str) -> None:
        _set(self, "path", path)


class StepCompleted(Record):
    __slots__ = ("step", "elapsed", "done", "total", "output", "env")
    step: str
    elapsed: float
    done: int
    total: int
    output: str
    env: str      # the env= values it ran with, "A=1 B=<unset>" (secrets redacted), or ""

    def __init__(self, step: str, elapsed: float, done: int, total: int,
                 output: str = "", env: str = "") -> None:
        _set(self, "step", step)
        _set(self, "elapsed", elapsed)
        _set(self, "done", done)
        _set(self, "total", total)
        _set(self, "output", output)
        _set(self, "env", env)


class StepsStarted(Record):
    """Steps handed to the executor, with the run's counts at that moment: a front end can draw
    progress before any step finishes. ``unknown`` counts the nodes whose keys are not known yet
    (they come from an upstream's output): each is one step in ``total`` until then, so the
    total may still grow."""
    __slots__ = ("steps", "done", "cached", "failed", "total", "unknown")
    steps: tuple[str, ...]
    done: int
    cached: int
    failed: int
    total: int
    unknown: int

    def __init__(self, steps: tuple[str, ...], done: int, cached: int, failed: int, total: int,
                 unknown: int = 0) -> None:
        _set(self, "steps", tuple(steps))
        _set(self, "done", done)
        _set(self, "cached", cached)
        _set(self, "failed", failed)
        _set(self, "total", total)
        _set(self, "unknown", unknown)


class StepCached(Record):
    """An unpartitioned node served from cache."""
    __slots__ = ("step",)
    step: str

    def __init__(self, step: str) -> None:
        _set(self, "step", step)


class StepFailedEvent(Record):
    __slots__ = ("step", "error", "traceback", "output")
    step: str
    error: str
    traceback: str
    output: str

    def __init__(self, step: str, error: str, traceback: str = "", output: str = "") -> None:
        _set(self, "step", step)
        _set(self, "error", error)
        _set(self, "traceback", traceback)
        _set(self, "output", output)


class Note(Record):
    """A remark for the user (stderr in the CLI): skipped fan-ins, warnings."""
    __slots__ = ("text", "level")
    text: str
    level: str   # "note" | "warning"

    def __init__(self, text: str, level: str = "note") -> None:
        from barca.core.errors import redact
        _set(self, "text", redact(text))
        _set(self, "level", level)


class RunEnded(Record):
    __slots__ = ("done", "total", "elapsed", "failed")
    done: int
    total: int
    elapsed: float
    failed: bool

    def __init__(self, done: int, total: int, elapsed: float, failed: bool) -> None:
        _set(self, "done", done)
        _set(self, "total", total)
        _set(self, "elapsed", elapsed)
        _set(self, "failed", failed)


Event = Importing | StepsStarted | StepCompleted | StepCached | StepFailedEvent | Note | RunEnded
if TYPE_CHECKING:
    EventCallback = Callable[[Event], None]
else:  # (a name for annotations: no collections.abc at run time)
    EventCallback = None


def ignore(_event: Event) -> None:
    """The default callback: drop every event."""
