"""The parts of a node's model that name other things: an input (``InputRef``) and a partition
dimension (``DimSpec``).

Pickled (the model cache, the kept graph) as a tuple of their fields, set back in one
assignment: the default state of a slotted object, a dict set attribute by attribute, was
~8 k instructions per reader of a wide graph, unpickled by every cached command."""
from __future__ import annotations

from barca.core.record import Fields
from barca.core.types import TYPE_CHECKING, NodeId, cast

if TYPE_CHECKING:
    from typing import Any


class InputRef(Fields):
    __slots__ = ("param", "ref", "collect", "line", "target", "by_id")

    def __init__(self, param: str, ref: str, collect: bool, line: int,
                 target: NodeId | None = None, by_id: bool = False) -> None:
        self.param = param
        self.ref = ref            # the expression as written: "feed_version", "mod.fn"
        self.collect = collect
        self.line = line
        # None until the graph resolves the reference (model.topology); typed as resolved,
        # since only the graph's readers read it, and they run after
        self.target: NodeId = cast(NodeId, target)
        self.by_id = by_id        # asset_ref("file.py:fn"): ref is that node id, as written

    def __getstate__(self) -> tuple[Any, ...]:
        return self.param, self.ref, self.collect, self.line, self.target, self.by_id

    def __setstate__(self, st: tuple[Any, ...]) -> None:  # (one assignment: the module text)
        self.param, self.ref, self.collect, self.line, self.target, self.by_id = st


class DimSpec(Fields):
    __slots__ = ("name", "kind", "line", "keys", "expr", "source_ref", "source")

    def __init__(self, name: str, kind: str, line: int, keys: list[Any] | None = None,
                 expr: str | None = None, source_ref: str | None = None,
                 source: NodeId | None = None) -> None:
        self.name = name
        self.kind = kind                # "list" | "from"
        self.line = line
        self.keys = keys                # literal keys, when the source says them statically
        self.expr = expr                # the source text, for a key list that must be evaluated
        self.source_ref = source_ref    # partitions_from(<ref>)
        # a "from" dimension's node: None until the graph resolves source_ref (as InputRef)
        self.source: NodeId = cast(NodeId, source)

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.name, self.kind, self.line, self.keys, self.expr, self.source_ref,
                self.source)

    def __setstate__(self, st: tuple[Any, ...]) -> None:
        self.name, self.kind, self.line, self.keys, self.expr, self.source_ref, self.source = st
