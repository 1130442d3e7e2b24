"""The cache size limit: ``.barca/`` -- every environment's store, ``.barca/envs/*`` included --
kept under ``[cache] max_size`` (default 10% of the filesystem) by evicting results from all of
them: first those superseded (not the current result of their step, see engine.current), then
current results, each least recently read first -- after the copies `sql --server` fetched from
the artifact store into ``.barca/sql-cache/``, which are not results here and can always be
fetched again. What the running command produced or read, a
Manual node's current result, and what another running command made are never evicted.
An evicted result is recorded as such: the planner treats it as a missing artifact (reason
``evicted``), computed again only where something reads it."""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Set

from barca.core.record import Record
from barca.store.cachereport import CacheReport, kind_of
from barca.store.metadata import Store, reads_write  # noqa: F401 - re-exported (moved there)

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:  # (nor pathlib: a cached command notes its reads here, with str paths)
    from pathlib import Path
    from typing import Any

    from barca.core.settings import Settings

DEFAULT = "10%"
GC_TARGET = 0.8   # `barca gc` evicts down to 80% of the limit
ESTIMATE = "cache-bytes"   # under .barca/: the size last measured, plus what runs wrote since
COPIES = "sql-cache"       # under .barca/: `sql --server`'s checked copies of the store's files
COPY_HOLD = 60.0           # seconds: a copy a query used this recently may be in its hands


def disk_size(root: Path) -> int:
    st = os.statvfs(root)
    return st.f_blocks * st.f_frsize


def limit(settings: Settings, override: str | int | None = None) -> int | None:
    """The limit in bytes (None: ``off``): ``override`` (``gc --max-size``), else the
    ``cache_max_size`` setting (``BARCA_CACHE_MAX_SIZE``, ``[cache] max_size``), else 10% of
    the filesystem."""
    from barca.core.sizes import parse_size
    root = settings.root
    if override is not None:
        return parse_size(override, "--max-size", disk_size(root))
    raw = settings.cache_max_size
    what = settings.where("cache_max_size", "[cache] max_size")
    return parse_size(raw if raw is not None else DEFAULT, what, disk_size(root))


def usage(folder: Path) -> int:
    """Bytes under ``folder`` (every file, the database included)."""
    return sum(usage_parts(folder).values())


def usage_parts(folder: Path) -> dict[str, int]:
    """Bytes under ``folder`` (``.barca/``) by what they are (``kind_of``): metadata, results,
    other."""
    # depth first, one open listing per level: a node's 200,000 key folders, listed or
    # stacked at once, cost the coordinator ~100 MB after a first run
    # each level: its listing, its path from .barca/, and the kind of every file under it
    # (None where the file's name decides: .barca/ itself, envs/ and envs/NAME/), so a
    # result's folder is classed once, never each of its files
    parts = {"metadata": 0, "results": 0, "other": 0}
    try:
        stack: list[tuple[Any, str, str | None]] = [(os.scandir(folder), "", None)]
    except OSError:
        return parts
    while stack:
        listing, rel, kind = stack[-1]
        try:
            e = next(listing, None)
        except OSError:
            e = None
        if e is None:
            stack.pop()[0].close()
            continue
        try:
            if e.is_dir(follow_symlinks=False):
                below = f"{rel}{e.name}/"
                stack.append((os.scandir(e.path), below, kind or _folder_kind(below)))
            elif e.is_file(follow_symlinks=False):
                parts[kind or kind_of(rel + e.name)] += e.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return parts


def _folder_kind(rel: str) -> str | None:
    """The kind of every file under a folder of ``.barca/`` (``rel``: its path from there,
    ending in /): results under a store's artifacts, other elsewhere; None for envs/ and
    envs/NAME/, whose files' own names decide."""
    if rel == "envs/" or rel.startswith("envs/") and rel.count("/") == 2:
        return None
    return kind_of(rel + "-")  # (any file under it: kind_of's one rule)


# an evictable file: (path from the project root, bytes, last created or read, its store, its
# node) -- a sql-cache copy: no store, no node
Candidate = tuple[str, int, float, "Store | None", "str | None"]


class Currency(Record):
    """What the decision says is current, for the cache limit's tiers (see engine.current):
    the paths of every environment's current results, the nodes whose every key was decided
    (a result of one of them that is not current is superseded), and the paths that must stay
    (what the running command produced or read; a Manual node's current result is kept by
    ``evict``'s ``manual``)."""
    __slots__ = ("current", "decided", "keep")
    current: frozenset[str]
    decided: frozenset[tuple[str, str]]   # (store prefix, node)
    keep: frozenset[str]


def stores(root: Path) -> list[Store]:
    """Every environment's store under ``root/.barca`` (the default one and ``envs/*``) that
    exists: the cache limit measures them all, so it evicts from them all."""
    out = [Store(root, create=False)]
    envs = root / ".barca" / "envs"
    if envs.is_dir():
        out += [Store(root, create=False, prefix=f".barca/envs/{d.name}")
                for d in sorted(envs.iterdir()) if (d / "metadata.db").is_file()]
    return [s for s in out if s.conn is not None]


def _candidates(store: Store, cur: Currency, manual: Set[str], since: float | None
                ) -> tuple[list[Candidate], list[Candidate], list[str]]:
    """(superseded, current, held) of one store: (path, size, last created or read, store,
    node). Superseded: a result of a decided node that is not its current one. A node not decided
    (not in the command's files, or a key not knowable without running) is never called
    superseded: its results count as current."""
    assert store.conn is not None
    rows = list(store.conn.execute(
        "SELECT m.id, m.asset, m.partition, m.path, m.size, m.created_at, r.at "
        "FROM materializations m LEFT JOIN reads r ON r.path = m.path "
        "WHERE m.status='success' AND m.path IS NOT NULL "
        "AND m.path NOT IN (SELECT path FROM evictions) ORDER BY m.id"))
    newest: dict[tuple[str, str], int] = {}
    for rid, asset, part, *_ in rows:
        newest[(asset, part)] = rid
    prefix = store.prefix
    superseded: dict[str, Candidate] = {}
    live: dict[str, Candidate] = {}
    held: dict[str, None] = {}   # in order, looked up often
    for rid, asset, part, path, size, created, read in rows:
        when = max(created or 0, read or 0)
        if path in cur.keep or path in held:
            continue
        if asset in manual and (path in cur.current or (
                (prefix, asset) not in cur.decided and newest[(asset, part)] == rid)):
            continue  # a Manual node's current result: only running it replaces it
        if since is not None and when >= since:
            held[path] = None
            live.pop(path, None)
            superseded.pop(path, None)
            continue
        if path in cur.current or (prefix, asset) not in cur.decided:
            superseded.pop(path, None)
            got = live.get(path)
            live[path] = (path, size or 0, max(when, got[2] if got else 0), store, asset)
        elif path not in live:
            got = superseded.get(path)
            superseded[path] = (path, size or 0, max(when, got[2] if got else 0), store,
                                asset)
    return list(superseded.values()), list(live.values()), list(held)


def evict(root: Path, budget: int | None, target: int, cur: Currency,
          manual: Set[str] = frozenset(), dry_run: bool = False,
          superseded_only: bool = False, gone: Callable[[str], bool] | None = None,
          only: str | None = None) -> CacheReport:
    """Evict until ``.barca/`` (every environment) is at most ``target`` bytes: the copies
    ``sql --server`` fetched first, then superseded results, then current ones, each tier least
    recently read first across every environment (every copy and every superseded result, and
    nothing else, with ``superseded_only``). With ``gone`` (``barca gc``), before all of them
    and whatever the target, the memos of the nodes it says are no longer in the pipeline
    (store.prune). With ``only`` (``gc --env NAME``), results of that environment's store alone
    (the copies are everyone's). The sizes reported add up: after = before - the bytes of the
    files deleted."""
    from barca.store import prune
    folder = root / ".barca"
    parts = usage_parts(folder)
    size = sum(parts.values())
    all_stores = stores(root)
    if only is not None:
        prefix = f".barca/envs/{only}"
        for other in all_stores:
            if other.prefix != prefix:
                other.close()
        all_stores = [st for st in all_stores if st.prefix == prefix]
    sizes: dict[str, int] = {}
    nodes: dict[str, str | None] = {}
    try:
        removed = [prune.find(s, gone) for s in all_stores] if gone is not None else []
        running_ids: list[str] = []
        superseded: list[Candidate] = []
        current: list[Candidate] = []
        held: list[str] = []
        for store in all_stores:
            running = store.running_runs()
            running_ids += [r["run_id"] for r in running]
            since = min((r["started_at"] or 0) for r in running) if running else None
            s, c, h = _candidates(store, cur, manual, since)
            superseded += s
            current += c
            held += h
        copies, kept = _copies(folder)
        held += kept
        tiers: dict[str, list[str]] = {"removed_nodes": [], "copies": [], "superseded": [],
                                       "least_recently_read": []}
        now, chosen = size, []
        copied: list[str] = []
        for found in removed:
            for memo, nbytes, node in found.files:
                tiers["removed_nodes"].append(memo)
                sizes[memo], nodes[memo] = nbytes, node
                now -= nbytes
        for tier, items in (("copies", copies), ("superseded", superseded),
                            ("least_recently_read", current)):
            if superseded_only and tier == "least_recently_read":
                break
            for path, nbytes, _, owner, of in sorted(items, key=lambda t: t[2]):
                if not superseded_only and now <= target:
                    break
                tiers[tier].append(path)
                sizes[path], nodes[path] = nbytes, of
                if owner is None:
                    copied.append(path)
                else:
                    chosen.append((path, owner))
                now -= nbytes
        failed: list[str] = []
        freed = 0
        if not dry_run:
            for found in removed:
                got, lost = prune.remove(found)
                freed += got
                failed += lost
            for path in copied:  # not results: nothing to record, fetched again when queried
                try:
                    p = root / path
                    nbytes = p.stat().st_size
                    p.unlink()
                    freed += nbytes
                except FileNotFoundError:
                    pass
                except OSError:
                    failed.append(path)
        if not dry_run and chosen:
            done: dict[Store, list[tuple[str, str, float]]] = {}
            for path, store in chosen:
                try:
                    p = root / path
                    nbytes = p.stat().st_size if p.is_file() else 0
                    p.unlink(missing_ok=True)
                    freed += nbytes
                    done.setdefault(store, []).append((path, nodes[path] or "", time.time()))
                except OSError:
                    failed.append(path)
            for store, rows in done.items():
                store._write("INSERT OR REPLACE INTO evictions (path, asset, at) "
                             "VALUES (?, ?, ?)", rows)
                store._evicted = None
            now = size - freed
        if not dry_run:
            _remember(root, now)
    finally:
        for store in all_stores:
            store.close()
    # paths as barca prints every path: from the project root (.barca/artifacts/...)
    rel = [p for p in tiers["removed_nodes"] + copied if p not in failed] + [
        p for p, _ in chosen if p not in failed]
    tiers = {t: [p for p in ps if p not in failed] for t, ps in tiers.items()}
    return CacheReport(size, budget, target, now, tiers, tuple(rel), tuple(failed),
                       tuple(held), dry_run, sizes, nodes, parts, only, tuple(running_ids))


def _copies(folder: Path) -> tuple[list[Candidate], list[str]]:
    """(evictable, held) copies under ``.barca/sql-cache/``: (path from the project root, size,
    last used, no store, no node). A copy a query used in the last minute is held: it may be between
    its digest check and DuckDB's read (``sql --server`` touches a copy each time it uses it)."""
    base = folder / COPIES
    if not base.is_dir():
        return [], []
    out: list[Candidate] = []
    held: list[str] = []
    recent = time.time() - COPY_HOLD
    for dirpath, _dirs, names in os.walk(base):
        for name in names:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            rel = os.path.join(".barca", os.path.relpath(p, folder)).replace(os.sep, "/")
            when = max(st.st_mtime, st.st_atime)
            if when >= recent:
                held.append(rel)
            else:
                out.append((rel, st.st_size, when, None, None))
    return out, held


def note_reads(store: Store, paths: Collection[str], more: Collection[str] = frozenset()
               ) -> None:
    """``Store.note_reads``."""
    store.note_reads(paths, more)


def _estimate(root: Path) -> float | None:
    """``.barca/``'s size as last measured plus what commands wrote since (an upper bound but
    for what the database grew by): measuring walks every file, which at 200,000 results
    costs more than the run. One figure for every environment (a file beside their stores),
    as the limit covers them all."""
    try:
        return float((root / ".barca" / ESTIMATE).read_text())
    except (OSError, ValueError):
        return None


def _remember(root: Path, size: float) -> None:
    path = root / ".barca" / ESTIMATE
    tmp = path.with_name(f".{ESTIMATE}.{os.getpid()}")
    try:
        tmp.write_text(str(int(size)))
        os.replace(tmp, path)
    except OSError:
        pass  # no estimate: the next run measures


def after_run(store: Store, settings: Settings, currency: Callable[[], Currency],
              manual: Set[str], written: int) -> CacheReport | None:
    """After a run that wrote ``written`` bytes of results: if ``.barca/`` is over the limit,
    evict until it is under it. ``.barca/`` is measured only when the estimate passes the
    limit (or was never taken); ``currency`` (what is current, what must stay) is asked only
    then: it decides every node."""
    budget = limit(settings)
    if budget is None or store.conn is None:
        return None
    root = store.root
    known = _estimate(root)
    if known is not None and known + written <= budget:
        _remember(root, known + written)
        return None
    size = usage(root / ".barca")
    if size <= budget:
        _remember(root, size)
        return None
    return evict(root, budget, budget, currency(), manual)
