"""A tick of a large dict source (bench S8's shape, at sizes the suite can afford): a sensor
returns a dict of key -> version, two or three partitioned assets follow it key by key. When one
key's version changes, exactly that key's steps run and every other key's result is served as
it was; the keys a node settles from its snapshot and its upstreams' (see decision._delta) are
the ones a decision without any snapshot makes. Times and memory are the benchmark's business
(bench/s08_sensor_dict_200k.py), never asserted here."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

PIPELINE = (Path(__file__).parent / "pipelines" / "dict_chain.py").read_text()

CHECKED = '''

@asset(partitions={"key": partitions_from(parsed)})
def checked(key: str, parsed: dict) -> str:
    return f"{key}:{parsed['seen']}"
'''


def name(i: int) -> str:
    return f"k{i:04d}"


def rows(project: Any) -> list[tuple[str, str, str, str]]:
    """(node, run hash, path, status) of every recorded step, oldest first."""
    with sqlite3.connect(project.path / ".barca" / "metadata.db") as conn:
        return conn.execute("SELECT node, run_hash, path, status FROM materializations "
                            "ORDER BY id").fetchall()


def test_one_key_tick_runs_three_steps_and_serves_every_other_key(project) -> None:
    n = 5000
    project.write("pipeline.py", PIPELINE)
    versions = {name(i): "v1" for i in range(n)}
    (project.path / "versions.json").write_text(json.dumps(versions))
    first = project.barca("get", "parsed", "pipeline.py", "--agent", "--json", timeout=900)
    assert first.code == 0, first.err
    assert len(first.completed()) == 2 * n + 1
    before = rows(project)

    versions[name(1234)] = "v2"
    (project.path / "versions.json").write_text(json.dumps(versions))
    tick = project.barca("get", "parsed", "pipeline.py", "--agent", "--json", timeout=300)
    assert tick.code == 0, tick.err
    assert tick.completed() == ["pipeline.py:versions", "pipeline.py:fetched[key=k1234]",
                                "pipeline.py:parsed[key=k1234]"]
    by_node = {s["id"]: s for s in tick.json()["steps"]}
    assert by_node["pipeline.py:parsed"]["partitions"]["cached"] == n - 1
    assert rows(project)[:len(before)] == before  # nothing recorded again
    assert len(rows(project)) == len(before) + 3

    # the changed key's value is the new one; another key's is the one computed at first
    for key, seen in ((name(1234), "v2"), (name(4321), "v1")):
        got = project.barca("get", "parsed", "pipeline.py", "--partition", f"key={key}",
                            "--json")
        assert got.code == 0, got.err
        assert got.json()["final_output"] == {f"key={key}": {"key": key, "ok": True,
                                                             "seen": seen}}
    # the next command settles every key (only the sensor runs)
    again = project.barca("get", "parsed", "pipeline.py", "--agent", "--json", timeout=300)
    assert again.code == 0, again.err
    assert again.completed() == ["pipeline.py:versions"]


def decisions(root: Path, memo: bool) -> dict[str, tuple]:
    """Every step's decision and run hash for ``get`` of every asset, as the API predicts it;
    without memo layers, with the store's snapshots deleted first."""
    from barca import api
    if not memo:
        with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
            conn.execute("DELETE FROM snapshots")
    here = os.getcwd()
    os.chdir(root)
    try:
        sess = api.Session(("pipeline.py",), write=False, memo=memo)
        try:
            w = api._predict(sess, api._targets(sess.graph, None, "get"))
            return {s.id: (s.action, s.reason, s.run_hash)
                    for nid in w.order for s in w.states[nid].steps.values()}
        finally:
            sess.close()
    finally:
        os.chdir(here)


def test_keys_settled_from_upstream_snapshots_are_the_ones_a_full_decision_makes(
        project) -> None:
    """Ticks that change a few keys' versions, parsed's code, or add a key, down a chain of
    three partitioned assets: what runs, and the run hashes served, are what a decision
    without any snapshot finds."""
    n = 40
    project.write("pipeline.py", PIPELINE + CHECKED)
    versions = {name(i): "v1" for i in range(n)}
    (project.path / "versions.json").write_text(json.dumps(versions))
    assert project.barca("get", "checked", "pipeline.py").code == 0
    keys = [name(i) for i in range(n)]
    # (keys whose version changes, parsed's code edited, a key added)
    ticks = [([3], False, False), ([0, 17, 39], False, False), ([], True, False),
             ([5, 6], True, False), ([], False, True)]
    for t, (changed, code, added) in enumerate(ticks):
        for i in changed:
            versions[name(i)] = f"v{t + 2}"
        if code:
            project.edit("pipeline.py", '"ok": bool(', f'"edit": {t}, "ok": bool(')
        if added:  # no key-for-key comparison with the snapshot
            versions[name(n)] = "v1"
            keys.append(name(n))
        (project.path / "versions.json").write_text(json.dumps(versions))
        r = project.barca("get", "checked", "pipeline.py", "--agent")
        assert r.code == 0, r.err
        new = [name(i) for i in changed] + ([name(n)] if added else [])
        below = keys if code else new  # parsed's code: every key of parsed and checked
        assert sorted(r.completed()) == sorted(
            ["pipeline.py:versions"] + [f"pipeline.py:fetched[key={k}]" for k in new]
            + [f"pipeline.py:{node}[key={k}]" for node in ("parsed", "checked") for k in below])
        with_memo = decisions(project.path, memo=True)
        assert all(a == "cached" or r == "sensor" for a, r, _ in with_memo.values())
        assert decisions(project.path, memo=False) == with_memo
        assert project.barca("get", "checked", "pipeline.py").code == 0  # snapshots again
