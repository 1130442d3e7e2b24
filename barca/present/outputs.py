"""What a command returns of its targets: their stored results located, previewed, or read
back as values."""
from __future__ import annotations

import os
import sys

from barca.core import jsontext  # (json's C half: no re, #31 item 2)
from barca.present.results import MAX_KEYS_IN_OUTPUT, Output, OutputItem, OutputItems
from barca.store.metadata import Store

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from barca.core.settings import Settings
    from barca.core.types import NodeId
    from barca.engine.states import NodeState
    from barca.model.topology import Graph

PREVIEW_BYTES = 2048


def _preview_bytes(root: str, path: str, small: dict[str, bytes]) -> bytes | None:
    """An artifact's bytes if it is small enough to preview (the runner has just verified most
    of them: not read twice)."""
    data = small.get(path)
    if data is not None:
        return data
    with open(os.path.join(root, path), "rb") as f:  # (str paths: no pathlib, #31 item 2)
        data = f.read(PREVIEW_BYTES + 1)
    return data if len(data) <= PREVIEW_BYTES else None


def node_output(graph: Graph, settings: Settings, prefix: str, ns: NodeState, load: bool,
                small: dict[str, bytes] | None = None) -> Output:
    """What a command shows of one target: its items (key, path, format, whether it ran now)
    and, with ``load``, its values (a partitioned one as key -> value); else a preview of small
    JSON values. ``prefix`` is the store's folder (its environment's)."""
    small = small or {}
    m = graph.nodes[ns.node]
    partitioned = bool(m.dims)  # (m.partitioned, read once per target)
    items: Any
    if partitioned and not load and ns.lazy and len(ns.keys or ()) > MAX_KEYS_IN_OUTPUT:
        t = ns.tally()  # every key's path is read from the store only if it is asked for
        root = graph.root_dir

        def every_item() -> Any:
            store = Store(root, create=False, prefix=prefix)  # the command's store is closed
            try:
                where = store.success_locations(ns.node)
            finally:
                store.close()
            return (OutputItem(*i) for i in ns.located(where))

        items = OutputItems(
            t.count("cached") + t.count("ran"),
            tuple(OutputItem(s.key, s.path, s.format, True) for s in t.steps("ran")),
            every_item)
    else:
        one = None if partitioned else ns.only_cached()
        steps = ns.steps if one is None else None
        if one is not None:  # a settled node: where its row says, no StepState made for it
            got = ns.where(one[1])
            items = (OutputItem(one[0], got[0], got[1], False),) if got and got[0] else ()
        elif steps is not None and len(steps) == 1:  # (most targets: one key, each field once)
            s = next(iter(steps.values()))
            path = s.path
            items = (OutputItem(s.key, path, s.format, s.action == "ran"),) if path else ()
        else:
            items = tuple(OutputItem(s.key, s.path, s.format, s.action == "ran")
                          for s in (steps or {}).values() if s.path)
    values: Any = None
    preview: str | None = ""
    root = graph.root_dir
    if load:
        values = ({i.key: _loaded(settings, i.path, i.format, small) for i in items}
                  if partitioned else
                  (_loaded(settings, items[0].path, items[0].format, small) if items else None))
    elif items and not partitioned and items[0].format == "json":
        try:  # (most: verified just now, in memory)
            data = small.get(items[0].path) or _preview_bytes(root, items[0].path, small)
            if data is not None:
                values = _json_value(data)
                preview = None  # its text made only if shown (Output.shown_preview)
        except (OSError, ValueError):
            values = None
    elif items and partitioned and len(items) <= 1000:
        vals = {}
        for i in items:
            if i.format == "json":
                try:
                    data = _preview_bytes(root, i.path, small)
                    if data is not None:
                        vals[i.key] = _json_value(data)
                except (OSError, ValueError):
                    pass
        values = vals
    return Output(ns.node, partitioned, items, values, preview, root)


def node_outputs(graph: Graph, settings: Settings, prefix: str,
                 states: dict[NodeId, NodeState], targets: Sequence[NodeId], load: bool,
                 small: dict[str, bytes] | None = None) -> tuple[Output, ...]:
    """``node_output`` of each target, in order: a settled node of one key whose small JSON
    result was verified just now (most targets of a cached ``get``) in one loop, its lookups
    made once (500 of them were a call and its setup each); every other by ``node_output``."""
    small = small or {}
    nodes, root, out = graph.nodes, graph.root_dir, []
    for t in targets:
        ns = states[t]
        one = None if load or nodes[t].dims else ns.only_cached()
        got = ns.where(one[1]) if one is not None else None
        data = small.get(got[0]) if got is not None and got[0] and got[1] == "json" else None
        if one is None or got is None or data is None:  # (anything else: as node_output says)
            out.append(node_output(graph, settings, prefix, ns, load, small))
            continue
        try:
            value: Any = _json_value(data)
            preview: str | None = None  # its text made only if shown (Output.shown_preview)
        except ValueError:
            value, preview = None, ""
        out.append(Output(t, False, (OutputItem(one[0], got[0], got[1], False),), value,
                          preview, root))
    return tuple(out)


_scan = jsontext.scanner()  # json.loads' own scanner (C), its defaults


def _json_value(data: bytes) -> Any:
    """A JSON artifact's value: barca writes UTF-8, decoded as such (``json.loads`` of bytes
    sniffs the encoding of each of 500 small values first); any other encoding JSON allows, or
    a BOM, takes that route. Raises ValueError as ``json.loads`` does. A text that is one value
    from its first character to its last (barca's own) is scanned as ``json.loads`` scans it,
    without its two whitespace searches around; anything else is what ``json.loads`` says."""
    try:
        text = data.decode("utf-8")
        try:
            value, end = _scan(text, 0)
        except StopIteration:  # (whitespace or a BOM first, or no value: json.loads says)
            end = -1
        return value if end == len(text) else jsontext.loads(text)
    except ValueError:
        return jsontext.loads(data)


def _loaded(settings: Settings, path: str | None, fmt: str | None,
            small: dict[str, bytes]) -> Any:
    """A value from the bytes its SHA-256 was just checked on, when they were kept (a small
    artifact): no second read, and never other bytes than the ones verified."""
    data = small.get(path or "") if fmt not in ("parquet", "csv") else None
    if data is None:
        return read_value(settings, path, fmt)
    from barca.store.artifacts import deserialize
    if fmt == "pickle" and settings.root_dir not in sys.path:
        sys.path.insert(0, settings.root_dir)  # as read_value: classes of the pipeline
    return deserialize(data, fmt or "json")


def read_value(settings: Settings, path: str | None, fmt: str | None,
               as_type: str | None = None) -> Any:
    """One stored result's value (fetched from the remote store when this machine lacks it); a
    table in the type it was written, or ``as_type``."""
    from barca.core.errors import InfrastructureError
    from barca.store.artifacts import deserialize
    root = settings.root_dir
    if path is None:
        return None
    if fmt == "pickle" and root not in sys.path:
        sys.path.insert(0, root)  # a pickled value may name classes of the pipeline
    where = os.path.join(root, path)
    if not os.path.exists(where):  # computed by a worker on another machine
        from barca.store import remote
        store = remote.open_store(settings)
        if store is not None:
            store.fetch(settings.root, path)
    try:
        if fmt in ("parquet", "csv"):  # a table, in the type it was written
            from barca.store import frames
            return frames.read(settings.root / path, fmt, as_type)
        with open(where, "rb") as f:
            return deserialize(f.read(), fmt or "json")
    except OSError as exc:
        raise InfrastructureError(f"cannot read {path}: {exc.strerror or exc}",
                                  "Run the command again to recompute it.", path=path) from None
