"""What an eviction did (or, for ``gc --dry-run``, would do): ``CacheReport``, whose JSON is
the document ``barca gc --json`` prints (and a run's ``cache`` when it evicted), in the words
barca 0.30.2's scripts read: each evicted file with its tier, bytes and node, the bytes per
tier, and what ``.barca/`` holds afterwards (metadata, results, other)."""
from __future__ import annotations

from barca.core.record import Record

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

# what `.barca/` holds, by kind (held[]), and whether eviction may ever remove it
KINDS = (("metadata", False), ("results", True), ("other", True))


def human(n: int) -> str:
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def kind_of(rel: str) -> str:
    """What a file under ``.barca/`` is (``rel``: its path from there, or from the project
    root): ``metadata`` (a store's database and its journal), ``results`` (a store's
    artifacts) or ``other`` (memos, sql-cache copies, logs, leftovers)."""
    parts = rel.split("/")
    if parts[0] == ".barca":
        parts = parts[1:]
    if parts[0] == "envs" and len(parts) > 2:  # an environment's store: .barca/envs/NAME/...
        parts = parts[2:]
    if parts[0] == "artifacts" and len(parts) > 1:
        return "results"
    return "metadata" if len(parts) == 1 and parts[0].startswith("metadata.db") else "other"


class CacheReport(Record):
    """What an eviction did (or would do). ``tiers``: tier -> the paths (from the project
    root) evicted from it, in order; ``evicted``: every one; ``sizes`` and ``nodes``: each
    evicted path's bytes and the node it was a result or memo of (None: a copy); ``held``:
    paths kept because a command in progress may read them; ``parts``: ``.barca/``'s bytes by
    kind before; ``env``: the one environment it evicted from (None: every one); ``running``:
    the runs in progress, whose results from their start on it left alone."""
    __slots__ = ("size_bytes", "limit_bytes", "target_bytes", "after_bytes", "tiers", "evicted",
                 "failed", "held", "dry_run", "sizes", "nodes", "parts", "env", "running")
    _defaults = {"sizes": None, "nodes": None, "parts": None, "env": None, "running": ()}
    size_bytes: int
    limit_bytes: int | None
    target_bytes: int
    after_bytes: int
    tiers: dict[str, list[str]]
    evicted: tuple[str, ...]
    failed: tuple[str, ...]
    held: tuple[str, ...]
    dry_run: bool
    sizes: dict[str, int] | None
    nodes: dict[str, str | None] | None
    parts: dict[str, int] | None
    env: str | None
    running: tuple[str, ...]

    def freed(self) -> int:
        return self.size_bytes - self.after_bytes

    def to_json(self) -> dict[str, Any]:
        sizes, nodes = self.sizes or {}, self.nodes or {}
        evicted = [{"tier": tier, "path": p, "bytes": sizes.get(p, 0), "node": nodes.get(p)}
                   for tier, paths in self.tiers.items() for p in paths]
        tiers = [{"tier": tier, "files": len(paths), "bytes": sum(sizes.get(p, 0) for p in paths)}
                 for tier, paths in self.tiers.items() if paths]
        return {"dry_run": self.dry_run, "size_bytes": self.size_bytes,
                "limit_bytes": self.limit_bytes,
                "target_bytes": None if self.limit_bytes is None else self.target_bytes,
                "after_bytes": self.after_bytes, "evicted_files": len(evicted),
                "evicted_bytes": sum(e["bytes"] for e in evicted), "tiers": tiers,
                "restricted": ({"reason": "run_in_progress", "runs": list(self.running)}
                               if self.running else None),
                "evicted": evicted, "failed": list(self.failed), "held": self._held(evicted),
                "in_use": list(self.held), "env": self.env}

    def _held(self, evicted: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What ``.barca/`` holds afterwards (would hold, for a dry run), by kind."""
        left = dict(self.parts or {})
        if not left:
            return []
        for e in evicted:
            kind = kind_of(e["path"])
            left[kind] = max(0, left.get(kind, 0) - e["bytes"])
        return [{"what": kind, "bytes": left.get(kind, 0), "evictable": evictable}
                for kind, evictable in KINDS]

    def json_text(self) -> str:
        import json
        return json.dumps(self.to_json(), indent=2)

    def line(self) -> str:
        """The one line a run prints on stderr when it evicted."""
        from barca.core.render import plural  # the text module: only once something is said
        lim = "no" if self.limit_bytes is None else human(self.limit_bytes)
        shown = ", ".join(p.rsplit("/", 2)[-2] for p in self.evicted[:3])
        more = f" (+{len(self.evicted) - 3} more)" if len(self.evicted) > 3 else ""
        return (f"cache {human(self.size_bytes)} over its {lim} limit; evicted "
                f"{plural(len(self.evicted), 'file')} ({human(self.freed())}): {shown}{more}")

    def __str__(self) -> str:
        from barca.core.render import plural
        verb = "would evict" if self.dry_run else "evicted"
        if not self.evicted:
            return (f"nothing to evict: .barca/ holds {human(self.size_bytes)}"
                    + (f", limit {human(self.limit_bytes)}" if self.limit_bytes is not None
                       else ""))
        lines = [f"{verb} {plural(len(self.evicted), 'file')} ({human(self.freed())}): "
                 f"{human(self.size_bytes)} -> {human(self.after_bytes)}"]
        for tier, paths in self.tiers.items():
            if paths:
                lines.append(f"  {tier}: {plural(len(paths), 'file')}")
                if self.dry_run:
                    lines.extend(f"    {p}" for p in paths)
        if self.failed:
            lines.append(f"  could not delete: {', '.join(self.failed)}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """In a notebook (``%barca gc``): the CLI's text, not the record's repr."""
        import html
        return {"text/plain": str(self),
                "text/html": f'<pre class="barca-gc">{html.escape(str(self))}</pre>'}
