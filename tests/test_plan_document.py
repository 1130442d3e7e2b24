"""`barca plan`'s document, as scripts written for barca 0.30.2 read it: `plan_version`,
`total_steps`, each phase's `reason` (`initial`, or `fan_in` with the node that waits for the
phase before) and `streams` (how its steps to run spread over the pool's workers), `warnings`;
and `--partition`, which plans only the selected keys and lists the fan-ins it leaves out in
`partition_selection`. Besides, ours: each step's action against the cache."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import barca
from barca.core.errors import UsageError

PIPELINE = '''
from barca import asset, collect, partitions, sensor

@sensor()
def feed() -> tuple[bool, int]:
    return (True, 1)

@asset(inputs={"feed": feed})
def scaled(feed: int) -> int:
    return feed * 2

@asset(partitions={"region": partitions(["emea", "apac", "amer", "latam", "nordics"])})
def sales(region: str) -> int:
    return len(region)

@asset(inputs={"s": collect(sales)})
def total(s: list) -> int:
    return sum(s)

@asset(inputs={"t": total})
def after(t: int) -> int:
    return t
'''


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _doc(**kw: object) -> dict:
    return json.loads(json.dumps(barca.plan("pipeline.py", **kw).to_json()))


def test_phases_say_why_they_start_and_how_their_steps_spread(here: Path) -> None:
    doc = _doc()
    assert doc["plan_version"] == 1
    assert doc["total_steps"] == doc["steps_total"] == 1 + 1 + 5 + 1 + 1
    assert isinstance(doc["warnings"], list)
    phases = doc["phases"]
    # sensors first; then what reads them and the keys; then the fan-in and what is below it
    assert [p["reason"] for p in phases] == [
        {"type": "initial"},
        {"type": "fan_in", "node_id": "pipeline.py:scaled"},
        {"type": "fan_in", "node_id": "pipeline.py:total"}]
    assert [sorted({s["node"] for s in p["steps"]}) for p in phases] == [
        ["pipeline.py:feed"], ["pipeline.py:sales", "pipeline.py:scaled"],
        ["pipeline.py:after", "pipeline.py:total"]]
    pool = doc["pool_size"]
    for i, p in enumerate(phases):
        ids = [s["stream_id"] for s in p["streams"]]
        assert ids == [f"p{i}-w{j}" for j in range(len(ids))] and len(ids) <= pool
        # every node with a step to run (or whose run waits on a sensor's value: unknown) is
        # in a stream, and nothing else
        assert {n for s in p["streams"] for n in s["steps"]} == \
            {s["node"] for s in p["steps"] if s["action"] in ("run", "unknown")}
        for s in p["streams"]:
            assert len(s["steps"]) == len(set(s["steps"]))   # each node once a stream


def test_streams_hold_only_what_would_run(here: Path) -> None:
    barca.get("sales", "pipeline.py")
    phases = _doc()["phases"]
    second = phases[1]
    assert {s["node"] for s in second["steps"] if s["action"] == "cached"} == \
        {"pipeline.py:sales"}
    assert [n for s in second["streams"] for n in s["steps"]] == ["pipeline.py:scaled"]


def test_a_partition_selection_plans_its_keys_and_names_the_fan_ins_it_leaves_out(
        here: Path) -> None:
    doc = _doc(partition="region=emea,apac")
    assert doc["total_steps"] == 1 + 1 + 2
    ids = [s["id"] for p in doc["phases"] for s in p["steps"]]
    assert "pipeline.py:sales[region=emea]" in ids and "pipeline.py:sales[region=apac]" in ids
    assert not any(i.startswith(("pipeline.py:total", "pipeline.py:after")) for i in ids)
    assert doc["partition_selection"] == {
        "selection": {"region": ["emea", "apac"]},
        "nodes": [{"id": "pipeline.py:sales", "selected": 2, "skipped": 3}],
        "skipped_nodes": ["pipeline.py:total", "pipeline.py:after"]}
    assert "partition_selection" not in _doc()
    with pytest.raises(UsageError):  # a key that is not one: a usage error, as get's
        barca.plan("pipeline.py", partition="region=mars")


@pytest.mark.slow
def test_the_command_takes_partition_and_says_what_it_skips(tmp_path: Path) -> None:
    from conftest import Project
    p = Project(tmp_path)
    p.write("pipeline.py", PIPELINE)
    r = p.barca("plan", "pipeline.py", "--partition", "region=emea", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["partition_selection"]["skipped_nodes"] == ["pipeline.py:total",
                                                           "pipeline.py:after"]
    assert "--partition skips a fan-in that reads every key: total" in r.err
    bad = p.barca("plan", "pipeline.py", "--partition", "region=mars", "--json")
    assert bad.code == 2 and json.loads(bad.err)["kind"] == "usage" and bad.out == ""
