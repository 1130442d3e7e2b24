"""The cache size limit: ``.barca/`` kept under ``[cache] max_size`` (default 10% of the
filesystem) by evicting results -- first those superseded by a newer result of the same step
and key, then current results least recently read. What the running command produced or read,
a Manual node's current result, and what another running command made are never evicted.
An evicted result is recorded as such: the planner treats it as a missing artifact (reason
``evicted``), computed again only where something reads it."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from barca.core.record import Record
from barca.core.render import plural
from barca.store.metadata import Store

if TYPE_CHECKING:
    from barca.core.settings import Settings

DEFAULT = "10%"
GC_TARGET = 0.8   # `barca gc` evicts down to 80% of the limit


def human(n: int) -> str:
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def disk_size(root: Path) -> int:
    st = os.statvfs(root)
    return st.f_blocks * st.f_frsize


def limit(settings: Settings, override: str | int | None = None) -> int | None:
    """The limit in bytes (None: ``off``): ``override`` (``gc --max-size``), else the
    ``cache_max_size`` setting (``BARCA_CACHE_MAX_SIZE``, ``[cache] max_size``), else 10% of
    the filesystem."""
    from barca.core.settings import parse_size
    root = settings.root
    if override is not None:
        return parse_size(override, "--max-size", disk_size(root))
    raw = settings.cache_max_size
    what = settings.where("cache_max_size", "[cache] max_size")
    return parse_size(raw if raw is not None else DEFAULT, what, disk_size(root))


def usage(folder: Path) -> int:
    """Bytes under ``folder`` (every file, the database included)."""
    total = 0
    stack = [folder]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=False):
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


class CacheReport(Record):
    """What an eviction did (or, for ``gc --dry-run``, would do)."""
    __slots__ = ("size_bytes", "limit_bytes", "target_bytes", "after_bytes", "tiers", "evicted",
                 "failed", "held", "dry_run")
    size_bytes: int
    limit_bytes: int | None
    target_bytes: int
    after_bytes: int
    tiers: dict[str, list[str]]      # tier -> paths (under .barca/) evicted from it
    evicted: tuple[str, ...]
    failed: tuple[str, ...]
    held: tuple[str, ...]
    dry_run: bool

    def freed(self) -> int:
        return self.size_bytes - self.after_bytes

    def to_json(self) -> dict[str, Any]:
        return {"size_bytes": self.size_bytes, "limit_bytes": self.limit_bytes,
                "target_bytes": self.target_bytes, "after_bytes": self.after_bytes,
                "tiers": self.tiers, "evicted": list(self.evicted), "failed": list(self.failed),
                "held": list(self.held), "dry_run": self.dry_run}

    def json_text(self) -> str:
        import json
        return json.dumps(self.to_json(), indent=2)

    def line(self) -> str:
        """The one line a run prints on stderr when it evicted."""
        lim = "no" if self.limit_bytes is None else human(self.limit_bytes)
        shown = ", ".join(p.rsplit("/", 2)[-2] for p in self.evicted[:3])
        more = f" (+{len(self.evicted) - 3} more)" if len(self.evicted) > 3 else ""
        return (f"cache {human(self.size_bytes)} over its {lim} limit; evicted "
                f"{plural(len(self.evicted), 'file')} ({human(self.freed())}): {shown}{more}")

    def __str__(self) -> str:
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


def _candidates(store: Store, keep: set[str], manual: set[str], since: float | None
                ) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]], list[str]]:
    """(superseded, current by least recent read, held): (path, asset, size) each."""
    assert store.conn is not None
    rows = list(store.conn.execute(
        "SELECT m.id, m.asset, m.partition, m.path, m.size, m.created_at, r.at "
        "FROM materializations m LEFT JOIN reads r ON r.path = m.path "
        "WHERE m.status='success' AND m.path IS NOT NULL "
        "AND m.path NOT IN (SELECT path FROM evictions) ORDER BY m.id"))
    newest: dict[tuple[str, str], int] = {}
    for rid, asset, part, *_ in rows:
        newest[(asset, part)] = rid
    current = {r[3] for r in rows if newest[(r[1], r[2])] == r[0]}
    superseded, live, held = [], {}, []
    seen: set[str] = set()
    for rid, asset, part, path, size, created, read in rows:
        if path in seen:
            continue
        if path in keep or (path in current and asset in manual):
            continue
        if since is not None and max(created or 0, read or 0) >= since:
            held.append(path)
            seen.add(path)
            continue
        if path in current:
            live[path] = (path, asset, size or 0, max(created or 0, read or 0))
        elif newest[(asset, part)] != rid:
            superseded.append((path, asset, size or 0))
            seen.add(path)
    order = sorted(live.values(), key=lambda t: t[3])
    return superseded, [(p, a, s) for p, a, s, _ in order], held


def evict(store: Store, budget: int | None, target: int, keep: set[str] = frozenset(),  # type: ignore[assignment]
          manual: set[str] = frozenset(), dry_run: bool = False,  # type: ignore[assignment]
          superseded_only: bool = False) -> CacheReport:
    """Evict until ``.barca/`` is at most ``target`` bytes (every superseded result, and
    nothing else, with ``superseded_only``)."""
    folder = store.root / ".barca"
    size = usage(folder)
    if store.conn is None:
        return CacheReport(size, budget, target, size, {}, (), (), (), dry_run)
    running = [r for r in store.runs(50) if r["status"] == "running"]
    since = min((r["started_at"] or 0) for r in running) if running else None
    superseded, current, held = _candidates(store, set(keep), set(manual), since)
    tiers: dict[str, list[str]] = {"superseded": [], "least_recently_read": []}
    now, chosen = size, []
    for tier, items in (("superseded", superseded), ("least_recently_read", current)):
        if superseded_only and tier != "superseded":
            break
        for path, asset, nbytes in items:
            if not superseded_only and now <= target:
                break
            tiers[tier].append(path)
            chosen.append((path, asset))
            now -= nbytes
    failed: list[str] = []
    if not dry_run and chosen:
        done = []
        for path, asset in chosen:
            try:
                (store.root / path).unlink(missing_ok=True)
                done.append((path, asset, time.time()))
            except OSError:
                failed.append(path)
        store._write("INSERT OR REPLACE INTO evictions (path, asset, at) VALUES (?, ?, ?)", done)
        store._evicted = None
        now = usage(folder)
    if not dry_run:
        _remember(store, now)
    rel = [p.removeprefix(".barca/") for p, _ in chosen if p not in failed]
    tiers = {t: [p.removeprefix(".barca/") for p in ps if p not in failed]
             for t, ps in tiers.items()}
    return CacheReport(size, budget, target, now, tiers, tuple(rel), tuple(failed),
                       tuple(p.removeprefix(".barca/") for p in held), dry_run)


def note_reads(store: Store, paths: set[str]) -> None:
    """What this command read or produced, for "least recently read"."""
    if paths and store.conn is not None:
        store._write_all([reads_write(paths)])


def reads_write(paths: set[str]) -> tuple[str, list[tuple[Any, ...]]]:
    """The write that notes ``paths`` as read now."""
    at = time.time()
    return "INSERT OR REPLACE INTO reads (path, at) VALUES (?, ?)", [(p, at) for p in paths]


def _estimate(store: Store) -> float | None:
    """``.barca/``'s size as last measured plus what commands wrote since (an upper bound but
    for what the database grew by): measuring walks every file, which at 200,000 results
    costs more than the run."""
    assert store.conn is not None
    got = store.conn.execute("SELECT value FROM settled WHERE name='cache_bytes'").fetchone()
    return None if got is None else got[0]


def _remember(store: Store, size: float) -> None:
    store._write("INSERT OR REPLACE INTO settled (name, value) VALUES ('cache_bytes', ?)",
                 [(size,)])


def after_run(store: Store, settings: Settings, keep: set[str], manual: set[str], written: int
              ) -> CacheReport | None:
    """After a run that wrote ``written`` bytes of results: if ``.barca/`` is over the limit,
    evict until it is under it. ``.barca/`` is measured only when the estimate passes the
    limit (or was never taken)."""
    budget = limit(settings)
    if budget is None or store.conn is None:
        return None
    known = _estimate(store)
    if known is not None and known + written <= budget:
        _remember(store, known + written)
        return None
    size = usage(store.root / ".barca")
    if size <= budget:
        _remember(store, size)
        return None
    report = evict(store, budget, budget, keep, manual)
    _remember(store, report.after_bytes)
    return report


def gc(*files: str, max_size: str | None = None, dry_run: bool = False,
       settings: Settings | None = None, **flags: Any) -> CacheReport:
    """``barca gc``: evict now, down to 80% of the cache size limit (``max_size``: a one-off
    budget; ``"off"``: every superseded result and nothing else). A CacheReport. ``flags``:
    settings of this call (``env="dev"``), on top of ``settings``."""
    from barca.core.settings import settings_of
    from barca.model.topology import load_graph
    settings = settings_of(settings, **flags)
    root = settings.root
    budget = limit(settings, max_size)  # an invalid size: exit 2 before anything
    graph = load_graph(files, settings)  # which nodes are Manual: never evicted
    manual = {n for n, m in graph.nodes.items() if m.freshness == "manual"}
    store = Store(root, create=False, prefix=settings.store_prefix)
    try:
        if budget is None:
            return evict(store, None, 0, manual=manual, dry_run=dry_run, superseded_only=True)
        return evict(store, budget, int(budget * GC_TARGET), manual=manual, dry_run=dry_run)
    finally:
        store.close()
