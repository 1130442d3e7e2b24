"""Node snapshots (a fully cached node is settled without per-key work) must never change a
decision: every plan, status and run agrees with the same store without its snapshots."""
from __future__ import annotations

import json
import shutil
import sqlite3

from conftest import Project

PIPELINE = """
    import json
    from pathlib import Path

    from barca import asset, collect, partitions, partitions_from

    KEYS = ["a", "b", "c", "d"]


    @asset(partitions={"k": partitions(KEYS)})
    def item(k: str) -> dict:
        return {"k": k, "n": len(k)}


    @asset(inputs={"item": item}, partitions={"k": partitions_from(item)})
    def double(item: dict) -> int:
        return item["n"] * 2


    @asset()
    def prices() -> dict:
        return json.loads(Path("prices.json").read_text())


    @asset(partitions={"ticker": partitions_from(prices)})
    def quote(ticker: str, prices: str) -> str:
        return f"{ticker}:{prices}"


    @asset(inputs={"doubles": collect(double), "quotes": collect(quote)})
    def total(doubles: list, quotes: list) -> dict:
        return {"sum": sum(doubles), "quotes": sorted(quotes)}
"""


def _snapshot_rows(project: Project) -> list[tuple[str, int]]:
    with sqlite3.connect(project.path / ".barca" / "metadata.db") as conn:
        return conn.execute("SELECT asset, length(hashes) FROM snapshots ORDER BY asset").fetchall()


def _without_snapshots(project: Project, name: str) -> Project:
    """A copy of the project whose store has every row but no snapshot."""
    copy = Project(project.path.parent / name)
    if copy.path.exists():
        shutil.rmtree(copy.path)
    shutil.copytree(project.path, copy.path)
    with sqlite3.connect(copy.path / ".barca" / "metadata.db") as conn:
        conn.execute("DELETE FROM snapshots")
    return copy


def _plan(project: Project) -> list[dict]:
    r = project.barca("get", "total", "pipeline.py", "--dry-run", "--json")
    assert r.code == 0, r.err
    return r.json()["nodes"] if "nodes" in r.json() else r.json()


def _status(project: Project) -> dict:
    r = project.barca("status", "pipeline.py", "--json")
    assert r.code == 0, r.err
    out = r.json()
    out.pop("root")  # the project's own folder: two copies of one project differ there only
    for n in out["nodes"]:  # the same rows: even the last materializations agree
        assert n["cache"]["state"] in ("cached", "stale", "partial", "never_run", "always_runs")
    return out


def _get(project: Project) -> tuple[int, list[str], dict]:
    r = project.barca("get", "total", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    out = r.json()
    return out["steps_executed"], sorted(r.completed()), out["final_output"]


def _agree(project: Project, edit_no: int) -> tuple[int, list[str], dict]:
    """Plan, status and the run itself are the same with and without snapshots."""
    bare = _without_snapshots(project, f"bare-{edit_no}")
    assert _plan(project) == _plan(bare)
    assert _status(project) == _status(bare)
    got = _get(project)
    assert got == _get(bare)
    return got


def test_snapshots_never_change_a_decision(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    project.write("prices.json", json.dumps({"AAPL": 1, "MSFT": 2}))
    ran, _, out = _get(project)
    assert ran == 4 + 4 + 1 + 2 + 1 and out["sum"] == 8
    assert [a.rsplit(":", 1)[1] for a, _ in _snapshot_rows(project)] == [
        "double", "item", "prices", "quote", "quote\x00values", "total"]  # (values: its dict)

    # nothing changed: every node settled from its snapshot
    assert _agree(project, 0)[:2] == (0, [])

    # a key added: the new key and the fan-in, nothing else
    project.edit("pipeline.py", '"c", "d"]', '"c", "d", "ee"]')
    ran, done, out = _agree(project, 1)
    assert ran == 3 and out["sum"] == 12
    assert done == ["pipeline.py:double[k=ee]", "pipeline.py:item[k=ee]", "pipeline.py:total"]

    # a key removed again: no step runs but the fan-in (its input set changed back)
    project.edit("pipeline.py", '"c", "d", "ee"]', '"c", "d"]')
    ran, done, out = _agree(project, 2)
    assert done == [] and out["sum"] == 8  # the 4-key total is still cached

    # the downstream code changes: it reruns, its upstream stays settled
    project.edit("pipeline.py", 'item["n"] * 2', 'item["n"] * 3')
    ran, done, out = _agree(project, 3)
    assert ran == 5 and out["sum"] == 12 and "pipeline.py:item[k=a]" not in done

    # a key source refreshed: same run hash, new output -- the keys that read it rerun
    project.write("prices.json", json.dumps({"AAPL": 1, "MSFT": 3}))
    r = project.barca("get", "prices", "pipeline.py", "--refresh", "prices", "--json")
    assert r.code == 0, r.err
    ran, done, out = _agree(project, 4)
    assert done == ["pipeline.py:quote[ticker=MSFT]", "pipeline.py:total"]
    assert out["quotes"] == ["AAPL:1", "MSFT:3"]


def test_a_failed_key_leaves_no_snapshot_and_is_retried(project: Project) -> None:
    project.write("pipeline.py", """
        from pathlib import Path

        from barca import asset, partitions


        @asset(partitions={"k": partitions(["a", "b", "c"])})
        def item(k: str) -> str:
            if k == "b" and not Path("ok").exists():
                raise ValueError("b is not ready")
            return k
    """)
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.code == 1
    assert _snapshot_rows(project) == []
    project.write("ok", "")
    r = project.barca("get", "item", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    assert r.completed() == ["pipeline.py:item[k=b]"]
    assert _snapshot_rows(project) == [("pipeline.py:item", 3 * 64)]
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.json()["steps_executed"] == 0
    assert sorted(r.json()["final_output"]) == ["k=a", "k=b", "k=c"]


def test_a_store_from_before_snapshots_still_reads_and_runs(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset, partitions


        @asset(partitions={"k": partitions(["a", "b"])})
        def item(k: str) -> str:
            return k
    """)
    assert project.barca("get", "item", "pipeline.py", "--json").code == 0
    with sqlite3.connect(project.path / ".barca" / "metadata.db") as conn:
        conn.execute("DROP TABLE snapshots")
    status = project.barca("status", "pipeline.py", "--json")  # read-only: no table made
    assert status.code == 0, status.err
    assert status.json()["nodes"][0]["cache"]["state"] == "cached"
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["steps_executed"] == 0
    assert _snapshot_rows(project) == [("pipeline.py:item", 2 * 64)]


def _decisions(project: Project, monkeypatch, per_step: bool) -> dict[str, list[tuple]]:
    """Every step's decision for ``get total`` as predicted in-process; with ``per_step`` the
    memo layers (snapshots, the definition cache) are switched off: every key decided alone."""
    from barca import api

    with monkeypatch.context() as mp:
        mp.chdir(project.path)
        sess = api.Session(("pipeline.py",), write=False, memo=not per_step)
        try:
            w = api._predict(sess, api._targets(sess.graph, "total", "get"))
            return {n: sorted((s.key, s.action, s.reason, s.detail, s.run_hash, s.path)
                              for s in w.states[n].steps.values()) for n in w.order}
        finally:
            sess.close()


def test_the_compact_plan_equals_the_per_step_plan(project: Project, monkeypatch) -> None:
    project.write("pipeline.py", PIPELINE)
    project.write("prices.json", json.dumps({"AAPL": 1, "MSFT": 2}))
    edits = [
        lambda: None,                                                    # nothing run yet
        lambda: project.barca("get", "total", "pipeline.py", "--json"),  # all cached
        lambda: project.edit("pipeline.py", '"c", "d"]', '"c", "d", "ee"]'),
        lambda: project.edit("pipeline.py", 'item["n"] * 2', 'item["n"] * 5'),
        lambda: project.write("prices.json", json.dumps({"AAPL": 1, "MSFT": 3, "IBM": 4})),
        lambda: project.barca("get", "prices", "pipeline.py", "--refresh", "prices", "--json"),
        lambda: project.edit("pipeline.py", "return {\"k\": k,",
                             "assert k != 'b'\n    return {\"k\": k,"),
        lambda: project.barca("get", "total", "pipeline.py", "--json"),  # item[b] fails
    ]
    for i, edit in enumerate(edits):
        edit()
        compact = _decisions(project, monkeypatch, per_step=False)
        assert compact == _decisions(project, monkeypatch, per_step=True), f"after edit {i}"
        assert any(steps for steps in compact.values())
