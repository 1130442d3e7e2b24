"""Domain value types shared by every layer: node ids, run hashes, partition keys."""
from __future__ import annotations

from typing import NewType

NodeId = NewType("NodeId", str)          # "pipeline.py:prices"
RunHash = NewType("RunHash", str)        # 64 hex chars (SHA-256)
PartitionKey = NewType("PartitionKey", str)  # "ticker=AAPL", "day=d1,region=amer"; "" = unpartitioned


def step_id(node: NodeId | str, key: str) -> str:
    """The id of one step: the node id, with ``[key]`` for a partition key."""
    return f"{node}[{key}]" if key else str(node)


def short_name(node: NodeId | str) -> str:
    """The function part of a node id (``pipeline.py:prices`` -> ``prices``)."""
    return str(node).rsplit(":", 1)[-1]


def format_key(values: dict[str, str]) -> PartitionKey:
    """``{"region": "amer", "day": "d1"}`` -> ``day=d1,region=amer`` (dimensions sorted)."""
    return PartitionKey(",".join(f"{d}={values[d]}" for d in sorted(values)))


def parse_key(key: str) -> dict[str, str]:
    """Inverse of :func:`format_key` for keys whose values hold no ``,`` or ``=``."""
    out: dict[str, str] = {}
    if not key:
        return out
    for part in key.split(","):
        d, _, v = part.partition("=")
        out[d] = v
    return out
