"""The cache size limit and `barca gc`: superseded results go first, then current results least
recently read; what a command just produced, a Manual node's current result and what another
running command holds are never evicted; an evicted result is computed again only where
something needs it. Through the CLI in subprocesses."""
from __future__ import annotations

import json

from conftest import Project, evicted

PIPELINE = """
from barca import asset, sensor

VERSION = 1


@sensor()
def feed() -> str:
    return "v1"


@asset()
def x() -> str:
    return "x" * 50_000 + str(VERSION)


@asset()
def y() -> str:
    return "y" * 50_000


@asset(inputs={"f": feed})
def small(f: str) -> str:
    return f
"""


def _size(p: Project) -> int:
    return sum(f.stat().st_size for f in (p.path / ".barca").rglob("*") if f.is_file())


def _art(p: Project, node: str) -> set[str]:
    return {f.relative_to(p.path).as_posix()  # as barca names them: from the project root
            for f in (p.path / ".barca" / "artifacts" / f"pipeline.py--{node}").glob("*.json")}


def test_a_run_over_the_limit_evicts_superseded_results_first(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    assert project.barca("get", "x,y", "pipeline.py").code == 0
    old_x = _art(project, "x")
    project.edit("pipeline.py", "VERSION = 1", "VERSION = 2")
    limit = _size(project) + 20_000  # the new x (50 kB) takes .barca/ past it
    r = project.barca("get", "x,y", "pipeline.py", env={"BARCA_CACHE_MAX_SIZE": str(limit)})
    assert r.code == 0, r.err
    doc = r.json()
    assert evicted(doc["cache"]) == sorted(old_x)  # the superseded x, and nothing else
    assert evicted(doc["cache"], "least_recently_read") == []
    line = next(x for x in r.err.splitlines() if "over its" in x)
    assert line.startswith("[barca] cache ") and "evicted 1 file" in line
    assert line in [f"[barca] {w['message']}" for w in doc["warnings"]]
    assert all(not (project.path / f).exists() for f in old_x)
    assert len(_art(project, "x")) == 1 and len(_art(project, "y")) == 1  # current: kept
    # no eviction under the limit: no line, no cache object
    quiet = project.barca("get", "x,y", "pipeline.py", "--refresh", "y")
    assert quiet.code == 0 and "over its" not in quiet.err and "cache" not in quiet.json()
    # far over the limit: current results go too, least recently read first, but never the
    # one this command just produced
    y_art = _art(project, "y")
    project.edit("pipeline.py", "VERSION = 2", "VERSION = 3")
    r = project.barca("get", "x", "pipeline.py", env={"BARCA_CACHE_MAX_SIZE": "1"})
    assert r.code == 0, r.err
    lrr = evicted(r.json()["cache"], "least_recently_read")
    assert sorted(y_art) == [p for p in lrr if "--y/" in p]
    new_x = {f for f in _art(project, "x") if (project.path / f).exists()}
    assert len(new_x) == 1 and not (new_x & set(evicted(r.json()["cache"])))


def test_gc_least_recently_read_and_what_is_never_evicted(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    assert project.barca("get", "y", "pipeline.py").code == 0
    assert project.barca("get", "x,small", "pipeline.py").code == 0  # x read after y
    y_art, x_art = _art(project, "y"), _art(project, "x")
    feed_art = _art(project, "feed")

    # --dry-run deletes nothing and lists per tier
    before = sorted(p.as_posix() for p in project.path.rglob("*"))
    dry = project.barca("gc", "--max-size", "1", "--dry-run", "--json").json()
    assert sorted(p.as_posix() for p in project.path.rglob("*")) == before
    assert dry["dry_run"] is True and evicted(dry, "superseded") == []
    lrr = evicted(dry, "least_recently_read")
    assert set(lrr) >= y_art | x_art
    assert lrr.index(sorted(y_art)[0]) < lrr.index(sorted(x_art)[0])  # y was read longer ago
    assert not (set(lrr) & feed_art)  # a sensor is Manual: its current result stays
    assert {"size_bytes", "limit_bytes", "target_bytes", "after_bytes", "tiers", "evicted",
            "failed", "held"} <= set(dry)

    # a budget that one 50 kB file meets: y goes (least recently read); read y, then x goes
    size = _size(project)
    r = project.barca("gc", "--max-size", str(int((size - 30_000) / 0.8)), "--json")
    assert r.code == 0, r.err
    assert evicted(r.json()) == sorted(y_art)
    assert project.barca("get", "y", "pipeline.py").code == 0  # computed again, read now
    size = _size(project)
    r = project.barca("gc", "--max-size", str(int((size - 30_000) / 0.8)), "--json")
    assert evicted(r.json()) == sorted(x_art)
    pretty = project.barca("gc", "--max-size", "100GB", "--pretty")
    assert pretty.code == 0 and pretty.out.startswith("nothing to evict")


def test_an_evicted_result_is_recomputed_only_where_needed(project: Project) -> None:
    project.write("pipeline.py", PIPELINE + """

@asset(inputs={"y": y})
def below(y: str) -> int:
    return len(y)
""")
    assert project.barca("get", "below", "pipeline.py").code == 0  # y read here, then
    assert project.barca("get", "x", "pipeline.py").code == 0      # x, then
    assert project.barca("get", "below", "pipeline.py").code == 0  # below alone (cached)
    y_art = _art(project, "y")
    budget = str(int((_size(project) - 30_000) / 0.8))  # one 50 kB file must go: y
    assert evicted(project.barca("gc", "--max-size", budget, "--json").json()) == sorted(y_art)
    assert not any((project.path / f).exists() for f in y_art)
    st = {n["name"]: n["cache"] for n in project.barca("status", "--json").json()["nodes"]}
    assert st["y"]["state"] == "stale" and st["y"]["reason"] == "evicted"
    dry = project.barca("get", "y", "pipeline.py", "--dry-run", "--json").json()
    assert {s["id"]: s["reason"] for s in dry["steps"]}["pipeline.py:y"] == "evicted"
    assert dry["summary"]["will_run"] == 1
    # below is cached and nothing reads y: y is not computed again
    r = project.barca("get", "below", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["steps_executed"] == 0 and r.json()["final_output"] == 50_000
    # asked for, it is computed again under the same run hash, with a warning
    r = project.barca("get", "y", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["steps_executed"] == 1 and "evicted" in r.err
    assert _art(project, "y") == y_art
    st = {n["name"]: n["cache"] for n in project.barca("status", "--json").json()["nodes"]}
    assert st["y"]["state"] == "cached"


def test_gc_max_size_off_evicts_every_superseded_result_only(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    assert project.barca("get", "x,y", "pipeline.py").code == 0
    old_x = _art(project, "x")
    project.edit("pipeline.py", "VERSION = 1", "VERSION = 2")
    assert project.barca("get", "x,y", "pipeline.py").code == 0
    r = project.barca("gc", "--max-size", "off", "--json").json()
    assert evicted(r) == sorted(old_x) and evicted(r, "least_recently_read") == []


def test_an_invalid_size_is_exit_2_naming_it(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    r = project.barca("gc", "--max-size", "12 parsecs")
    assert r.code == 2 and "--max-size" in json.loads(r.err)["error"]
    r = project.barca("get", "x", "pipeline.py", env={"BARCA_CACHE_MAX_SIZE": "lots"})
    assert r.code == 2 and "BARCA_CACHE_MAX_SIZE" in r.err
    project.write("barca.toml", '[cache]\nmax_size = "lots"\n')
    r = project.barca("gc")
    assert r.code == 2 and "max_size" in r.err and "barca.toml:2" in r.err
