"""The records the metadata database holds, as the store returns them: named tuples (thousands
are read per command; ``core.record.Tuple``, a NamedTuple made cheaply at import)."""
from __future__ import annotations

from barca.core import jsontext  # (json's C half: no re, #31 item 2)
from barca.core.record import Tuple


class Row(Tuple):
    """One recorded materialization (one step of one run). A named tuple: thousands are read
    per command."""
    id: int
    node: str
    asset: str
    partition: str
    run_hash: str
    path: str | None
    format: str | None
    size: int | None
    sha256: str | None
    parts: str | None
    status: str
    error: str | None
    elapsed: float | None
    run_id: str | None
    created_at: float
    shape: str | None
    value_hash: str | None

    def part_digests(self) -> dict[str, str]:
        return jsontext.loads(self.parts) if self.parts else {}


class Snapshot(Tuple):
    """A node's last complete walk: what a decision reads to settle the whole node at once."""
    digest: str     # the digest every run hash of the node was a function of (its identity)
    combined: str   # the digest of all its keys' run hashes
    keys: str       # its keys, joined by NUL
    hashes: str     # their run hashes in that order, concatenated (64 hex digits each)
