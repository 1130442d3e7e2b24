"""Domain value types shared by every layer: node ids, run hashes, partition keys."""
from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2): a cached command
if TYPE_CHECKING:      # would load it for these three names alone
    from collections.abc import Iterable
    from typing import Any as Any  # (re-exported: see engine.runner)
    from typing import NewType
    from typing import cast as cast  # (re-exported: the engine imports it from here)

    NodeId = NewType("NodeId", str)          # "pipeline.py:prices"
    RunHash = NewType("RunHash", str)        # 64 hex chars (SHA-256)
    # "ticker=AAPL", "day=d1,region=amer"; "" = unpartitioned
    PartitionKey = NewType("PartitionKey", str)
else:  # at run time, what NewType and cast are: the value itself
    def NodeId(value: str) -> str:
        return value

    RunHash = PartitionKey = NodeId

    def cast(_type: object, value: object) -> object:
        """``typing.cast`` (for the engine's modules too, which import it from here)."""
        return value


# The words barca says about steps, nodes and runs (barca/docs/glossary.md, "What barca says
# about a step or a node"). StrEnums to a type checker; each member is its string (equal to it,
# hashed as it, written as it in JSON and text), so a reader may compare with either.

if TYPE_CHECKING:
    from enum import StrEnum as _Words
else:
    class _Words(str):
        """At run time, what these classes use of ``StrEnum``, without enum's class machinery
        (~6 M instructions for these five classes, at every start of a command, #31 item 2):
        each upper-case attribute of a subclass becomes an instance of it, a ``str``; ``value``
        is the plain string. (No lookup by value, no iteration: barca names its words.)"""
        __slots__ = ()

        def __init_subclass__(cls) -> None:
            for name, text in list(vars(cls).items()):
                if name.isupper() and isinstance(text, str):
                    setattr(cls, name, cls(text))

        @property
        def value(self) -> str:
            return str(self)


class Word(_Words):
    """A word of the vocabulary: its string everywhere a user sees it, ``repr`` included (a
    notebook cell showing ``row.state`` shows ``'cached'``, as before these were enums)."""

    def __repr__(self) -> str:
        return repr(self.value)


class Action(Word):
    """What a command does, or did, with a step."""
    RUN = "run"            # a prediction, or a step about to execute
    CACHED = "cached"
    UNKNOWN = "unknown"    # in a prediction: its inputs or keys are not known yet
    RAN = "ran"            # after a run
    FAILED = "failed"
    SKIPPED = "skipped"


class State(Word):
    """What ``barca status`` says of a node."""
    CACHED = "cached"
    STALE = "stale"
    NEVER_RUN = "never_run"
    PARTIAL = "partial"
    UNKNOWN = "unknown"
    ALWAYS_RUNS = "always_runs"


class Status(Word):
    """How a run (or a recorded step) ended."""
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RUNNING = "running"
    CRASHED = "crashed"    # its process ended without finishing it (marked by the next command)


class Reason(Word):
    """Why a step has its action (or a node its state); the detail says it in a sentence."""
    MATERIALIZED = "materialized"        # a successful result under the run hash now
    NO_RECORD = "no_record"              # never run (or only failed, see FAILED)
    FAILED = "failed"                    # the last run failed
    CHANGED = "changed"                  # an older result, made of other parts
    EVICTED = "evicted"                  # removed by the cache size limit
    REFRESH = "refresh"                  # --refresh / --refresh-all
    REFRESH_CASCADE = "refresh_cascade"  # below a refreshed node
    TASK = "task"                        # tasks always run
    SENSOR = "sensor"                    # sensors always run
    UPSTREAM_FAILED = "upstream_failed"  # an upstream step failed or was skipped
    PARTITIONS_UNKNOWN = "partitions_unknown"          # its keys come from an output not there
    SENSOR_OUTPUT_UNKNOWN = "sensor_output_unknown"    # a sensor's value is not known
    PARTITION_SELECTION = "partition_selection"        # --partition skips a fan-in
    PARTITIONS_MISSING = "partitions_missing"          # some keys cached, others not
    ARTIFACT_MISSING = "artifact_missing"              # its file is gone: computed again
    ARTIFACT_CORRUPT = "artifact_corrupt"              # its file's SHA-256 differs


def step_id(node: NodeId | str, key: str) -> str:
    """The id of one step: the node id, with ``[key]`` for a partition key."""
    return f"{node}[{key}]" if key else str(node)


def short_name(node: NodeId | str) -> str:
    """The function part of a node id (``pipeline.py:prices`` -> ``prices``)."""
    return str(node).rsplit(":", 1)[-1]


def ids_named(name: str, ids: Iterable[str]) -> list[str]:
    """The node ids ``name`` names: itself, when it is one of them (a full id,
    ``file:function``), else every id whose function name it is (several: ambiguous)."""
    ids = list(ids)
    if name in ids:
        return [name]
    return [i for i in ids if short_name(i) == name]


def key_strings(keys: Iterable[Any]) -> tuple[list[str], list[tuple[Any, Any]]]:
    """Partition keys as strings, and the keys that break the rule: a key is a string or an
    integer (which becomes its string; a bool is neither), unique once a string and
    case-folded (so ``1`` and ``"1"`` collide, and ``AAPL`` and ``aapl``). Each problem is
    ``(key, earlier)``: ``earlier`` the key it collides with, or None for a key of the wrong
    type."""
    out: list[str] = []
    problems: list[tuple[Any, Any]] = []
    seen: dict[str, Any] = {}
    for k in keys:
        if isinstance(k, bool) or not isinstance(k, (str, int)):
            problems.append((k, None))
            continue
        s = str(k)
        fold = s.casefold()  # AAPL and aapl would share a folder on a case-blind filesystem
        if fold in seen:
            problems.append((k, seen[fold]))
            continue
        seen[fold] = k
        out.append(s)
    return out, problems


PREVIEW_KEYS = 20   # a preview of partition keys: the first twenty, in lexical order


def key_preview(keys: Iterable[str]) -> list[str]:
    """The first :data:`PREVIEW_KEYS` keys in lexical order: what status, dry runs, plans and
    run results show of a key list (the total is given beside it)."""
    import heapq
    return heapq.nsmallest(PREVIEW_KEYS, keys)


_SPECIAL = "\\,="


def _escape(text: str) -> str:
    """``,`` and ``=`` get a backslash; a backslash only where it could be read as one (before
    ``\\``, ``,``, ``=`` or at the end): ``back\\slash`` stays as written."""
    if "\\" not in text:
        return text.replace(",", "\\,").replace("=", "\\=")
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            after = text[i + 1] if i + 1 < len(text) else ""
            out.append("\\\\" if after == "" or after in _SPECIAL else c)
        elif c in ",=":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def format_key(values: dict[str, str]) -> PartitionKey:
    """``{"region": "amer", "day": "d1"}`` -> ``day=d1,region=amer`` (dimensions sorted; a
    ``,`` or ``=`` inside a value is escaped with a backslash, and a backslash where it could
    be read as an escape)."""
    return PartitionKey(",".join(f"{_escape(d)}={_escape(values[d])}" for d in sorted(values)))


def one_dim_keys(dim: str, values: list[str], joined: str | None = None
                 ) -> list[PartitionKey]:
    """``format_key({dim: v})`` for each value (one string scan, not a dict per key, when no
    value needs escaping); ``joined``: the values joined by NUL, when made already."""
    if joined is None:
        joined = "".join(values)
    if "\\" in joined or "," in joined or "=" in joined:
        return [format_key({dim: v}) for v in values]
    prefix = _escape(dim) + "="
    return cast(list[PartitionKey], list(map(prefix.__add__, values)))


_PARSED: dict[str, dict[str, str]] = {}  # parse_key's memo (a dict: no functools, #31 item 2)


def parse_key(key: str) -> dict[str, str]:
    """Inverse of :func:`format_key` (memoised: do not mutate the result)."""
    got = _PARSED.get(key)
    if got is None:
        if len(_PARSED) >= 1 << 16:  # bounded: 65,536 keys, then it starts again
            _PARSED.clear()
        got = _PARSED[key] = _parse_key(key)
    return got


def _parse_key(key: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if not key:
        return out
    if "\\" not in key:  # nothing escaped: the common, fast case
        for part in key.split(","):
            d, _, v = part.partition("=")
            out[d] = v
        return out
    parts: list[list[str]] = [[""]]
    i = 0
    while i < len(key):
        c = key[i]
        if c == "\\" and i + 1 < len(key) and key[i + 1] in _SPECIAL:
            parts[-1][-1] += key[i + 1]
            i += 2
            continue
        if c == "," :
            parts.append([""])
        elif c == "=" and len(parts[-1]) == 1:
            parts[-1].append("")
        else:
            parts[-1][-1] += c
        i += 1
    for p in parts:
        out[p[0]] = p[1] if len(p) > 1 else ""
    return out
