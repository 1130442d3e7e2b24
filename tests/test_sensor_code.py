"""Issue 28 item 7: editing a sensor's code without changing its value affects all its
consumers alike (engine.md §2: what reads a sensor hashes its run hash, code and value) -- an
asset that reads it as an input and one whose keys come from its value both run again; a new
value key still runs that key only. In process, on a real store in tmp_path."""
from __future__ import annotations

from pathlib import Path

import pytest

PIPELINE = '''\
from pathlib import Path

from barca import asset, collect, partitions_from, sensor


@sensor()
def regions() -> list:
    return Path("regions.txt").read_text().split()


@asset(inputs={"rs": regions})
def direct(rs: list) -> int:
    return len(rs)


@asset(partitions={"r": partitions_from(regions)})
def per(r: str) -> str:
    return r.upper()


@asset(inputs={"all": collect(per)})
def joined(all: list) -> str:
    return ",".join(sorted(all))
'''


def _ran(res: object) -> dict[str, int]:
    """Node -> steps run (a partitioned node's summary counts its keys)."""
    out = {}
    for s in res.steps:  # type: ignore[attr-defined]
        p = s.partitions
        n = p["total"] - p.get("cached", 0) if p else int(s.action == "ran")
        out[s.id.split(":")[-1]] = n
    return out


def test_a_sensor_code_edit_reruns_every_consumer(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from barca import api
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    (tmp_path / "regions.txt").write_text("a b")
    assert api.materialize(None, "pipeline.py").steps_executed == 5
    assert api.materialize(None, "pipeline.py").steps_executed == 1  # the sensor only
    # the same value, other code
    (tmp_path / "pipeline.py").write_text(PIPELINE.replace(
        '    return Path("regions.txt")', '    text = Path("regions.txt")\n    return text'))
    plan = {r.step.split(":")[-1]: r.action for r in api.plan_run(None, "pipeline.py").rows}
    assert plan["direct"] == plan["per"] != "cached", plan
    res = api.materialize(None, "pipeline.py", load_values=True)
    ran = _ran(res)
    assert ran["direct"] == 1 and ran["per"] == 2 and ran["joined"] == 1, ran
    assert res.steps_executed == 5
    # a new key in the value: that key only (and what reads every key)
    (tmp_path / "regions.txt").write_text("a b c")
    ran = _ran(api.materialize(None, "pipeline.py"))
    assert ran["per"] == 1 and ran["direct"] == 1 and ran["joined"] == 1, ran
    assert api.get("joined", "pipeline.py") == "A,B,C"
