"""`barca sql`'s tables of barca's own records in the columns barca 0.30.2 documents:
`barca.runs` (the keys of `history --json`'s runs), `barca.materializations` (`node_id`,
`partition`, `created_at` as text, `size_bytes`, `artifact`, `content_hash`, `error_type`,
`error_message`, ... beside this barca's own `node`, `asset`, `path`, `sha256`, `size`) and
`barca.nodes` (`status --json` flattened); joins across them; and `status --json`'s
`cache.run_hash` and `cache.artifact` for a node of one key. In process."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import barca
from barca import api

pytest.importorskip("duckdb")

PIPELINE = '''from barca import asset, partitions


@asset(partitions={"k": partitions(["x", "y"])})
def per(k: str) -> str:
    return k * 2


@asset()
def one() -> int:
    return 1


@asset()
def bad() -> int:
    raise ValueError("nope")
'''


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    with pytest.raises(barca.StepFailed):
        api.get(None, "pipeline.py")
    return tmp_path


def _rows(sql: str) -> list[dict]:
    res = api.sql_result(sql, "pipeline.py", limit=None)
    return [dict(zip(res.columns, r, strict=True)) for r in res.rows]


def test_materializations_in_both_vocabularies(here: Path) -> None:
    rows = {r["node_id"]: r for r in _rows("select * from barca.materializations")}
    assert set(rows) == {"pipeline.py:per[k=x]", "pipeline.py:per[k=y]", "pipeline.py:one",
                         "pipeline.py:bad"}
    per = rows["pipeline.py:per[k=x]"]
    assert per["partition"] == "k=x" and per["status"] == "success"
    dt.datetime.strptime(per["created_at"], "%Y-%m-%d %H:%M:%S")
    assert per["size_bytes"] == per["size"] > 0 and per["artifact"] == per["path"]
    assert (here / per["artifact"]).is_file() and len(per["content_hash"]) == 64
    assert per["node"] == "pipeline.py:per[k=x]" and per["asset"] == "pipeline.py:per"
    assert rows["pipeline.py:one"]["partition"] is None
    bad = rows["pipeline.py:bad"]
    assert (bad["status"], bad["error_type"], bad["error_message"]) == \
        ("failed", "ValueError", "nope")
    assert bad["cpu_seconds"] is None and bad["attempts"] == 1


def test_runs_are_history_and_join_their_results(here: Path) -> None:
    (run,) = _rows("select * from barca.runs")
    assert run["job"] == "all" and run["files"] == ["pipeline.py"]
    assert run["failure"] == {"node": "pipeline.py:bad", "error": "ValueError: nope"}
    assert run["steps_executed"] == 4 and run["status"] == "failed"
    dt.datetime.strptime(run["started_at"], "%Y-%m-%d %H:%M:%S")
    joined = _rows("select r.job, m.node_id from barca.runs r join barca.materializations m "
                   "using (run_id) order by m.node_id")
    assert [j["node_id"] for j in joined] == ["pipeline.py:bad", "pipeline.py:one",
                                              "pipeline.py:per[k=x]", "pipeline.py:per[k=y]"]


def test_nodes_are_status_flattened(here: Path) -> None:
    nodes = {r["name"]: r for r in _rows("select * from barca.nodes")}
    status = {r.name: r for r in api.status(None, "pipeline.py").rows}
    assert set(nodes) == set(status) == {"per", "one", "bad"}
    for name, n in nodes.items():
        assert n["state"] == status[name].state and n["reason"] == status[name].reason
    assert nodes["per"]["partitioned"] is True and nodes["per"]["partitions_total"] == 2
    assert nodes["per"]["partitions_cached"] == 2 and nodes["per"]["run_hash"] is None
    one = nodes["one"]
    assert one["state"] == "cached" and len(one["run_hash"]) == 64
    assert one["artifact"] == one["last_artifact"] and (here / one["artifact"]).is_file()
    assert one["last_status"] == "success" and one["local"] is None
    assert nodes["bad"]["state"] == "never_run" and nodes["bad"]["artifact"] is None
    assert nodes["bad"]["last_error"] == "ValueError: nope"
    # status --json itself: the one-key node's current run hash and result
    doc = api.status(None, "pipeline.py").to_json()
    cache = {n["name"]: n["cache"] for n in doc["nodes"]}
    assert cache["one"]["run_hash"] == one["run_hash"]
    assert cache["one"]["artifact"] == one["artifact"] and "run_hash" not in cache["per"]


def test_show_tables_names_the_three(here: Path) -> None:
    names = [r["name"] for r in _rows("show tables")]
    assert names[-3:] == ["barca.materializations", "barca.nodes", "barca.runs"]
