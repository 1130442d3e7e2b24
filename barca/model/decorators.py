"""The decorators and markers users write: @asset, @sensor, @task, @sink, partitions(), ...

At run time they only tag the function (``fn.__barca__``) and return it unchanged, so a
decorated function can still be called directly. Planning reads the same facts statically from
the source (``model.discovery``); these runtime tags serve the rare case where a key list must be
evaluated by importing the module.
"""
from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

ASSET_ARGS = ("inputs", "partitions", "serializer", "freshness", "retries", "retry_backoff",
              "timeout_seconds", "description", "tags", "env", "name", "weight")
SENSOR_ARGS = tuple(a for a in ASSET_ARGS if a != "inputs")

# Decorated functions defined in an interactive ``__main__`` (notebook cells), by name; the
# last definition wins (see barca.model.notebook).
NOTEBOOK: dict[str, Callable[..., Any]] = {}


class _Marker:
    """A small immutable marker (plain class: ``import barca`` stays cheap in workers)."""
    __slots__ = ("value",)
    value: Any

    def __init__(self, value: Any) -> None:
        object.__setattr__(self, "value", value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value

    def __hash__(self) -> int:
        return hash((type(self).__name__, id(self.value)))

    def __repr__(self) -> str:
        return f"{type(self).__name__.lower()}({self.value!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (e.g. with a notebook function) by value
        return (type(self), (self.value,))


class Partitions(_Marker):
    """``partitions([...])``: an explicit list of keys."""

    @property
    def keys(self) -> Any:
        return self.value


class PartitionsFrom(_Marker):
    """``partitions_from(upstream)``: keys taken from another node."""

    @property
    def source(self) -> Any:
        return self.value


class Collect(_Marker):
    """``collect(asset)``: every key's value of a partitioned asset, as one list."""

    @property
    def source(self) -> Any:
        return self.value


class AssetRef(_Marker):
    """``asset_ref("file.py:fn")``: a node of another file as an input, by its id (the file is
    read, never imported, to find it)."""

    @property
    def id(self) -> Any:
        return self.value


class _Freshness:
    def __init__(self, name: str, cron: str | None = None, max_failures: int = 5) -> None:
        self.name, self.cron, self.max_failures = name, cron, max_failures

    def __repr__(self) -> str:
        if not self.cron:
            return self.name
        extra = f", max_failures={self.max_failures}" if self.max_failures != 5 else ""
        return f"Schedule({self.cron!r}{extra})"


Always = _Freshness("Always")
Manual = _Freshness("Manual")


def Schedule(cron: str, /, *, max_failures: int = 5) -> _Freshness:  # noqa: N802 - a value
    """Fire on ``cron`` under ``barca serve``; stop after ``max_failures`` failures in a row
    (both checked when the file is read: ``barca docs scheduling``)."""
    return _Freshness("Schedule", cron, max_failures)


def partitions(keys: Any, /) -> Partitions:
    return Partitions(keys)


def partitions_from(source: Any, /) -> PartitionsFrom:
    return PartitionsFrom(source)


def collect(source: Any, /) -> Collect:
    return Collect(source)


def asset_ref(node_id: str, /) -> AssetRef:
    return AssetRef(node_id)


def unsafe(fn: Callable[..., Any], /) -> Callable[..., Any]:
    """``@unsafe``, above or below ``@asset``/``@task``/``@sensor``: the function runs as it is
    (only tagged ``__barca_unsafe__``), and the marker is not in the run hash."""
    vars(fn)["__barca_unsafe__"] = True  # a function attribute, as setattr would
    return fn


class Group:
    """``group("Title", members=[...], output=..., description="")``: metadata read from the
    source (``barca list --groups``); at run time only this record of it."""
    __slots__ = ("title", "members", "output", "description")

    def __init__(self, title: str, /, *, members: Any = (), output: Any = None,
                 description: str = "") -> None:
        self.title, self.members = title, tuple(members)
        self.output, self.description = output, description

    def __repr__(self) -> str:
        return f"group({self.title!r})"


group = Group


def _decorator(kind: str, accepted: tuple[str, ...]) -> Callable[..., Any]:
    def make(fn: Callable[..., Any] | None = None, /, **kwargs: Any) -> Any:
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise TypeError(f"@{kind} got unexpected argument(s) {', '.join(unknown)}; "
                            f"accepted: {', '.join(accepted)}")

        def tag(f: Callable[..., Any]) -> Callable[..., Any]:
            vars(f)["__barca__"] = {"kind": kind, **kwargs}
            if getattr(f, "__module__", None) == "__main__":
                NOTEBOOK[f.__name__] = f
            return f

        return tag(fn) if fn is not None else tag

    make.__name__ = kind
    return make


asset = _decorator("asset", ASSET_ARGS)
sensor = _decorator("sensor", SENSOR_ARGS)
task = _decorator("task", ASSET_ARGS)


def sink(path: str, /) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@sink("out.parquet")``: also write the asset's value to ``path``
    (see ``barca docs sinks``)."""
    def tag(f: Callable[..., Any]) -> Callable[..., Any]:
        sinks = list(getattr(f, "__barca_sinks__", []))
        sinks.append(path)
        vars(f)["__barca_sinks__"] = sinks
        return f
    return tag
