"""A walk with a sensor in its cone (no settle record can vouch for it) reads its snapshots,
and the values row of a node fed by a dict source, while the sensor's step runs on the pool --
not before it -- and decides exactly as a walk that read them first. In process, real store."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from barca import api
from barca.engine.executors.process import ProcessPool
from barca.store.metadata import Store

PIPELINE = (Path(__file__).parent / "pipelines" / "dict_chain.py").read_text()


def test_snapshots_are_read_while_the_sensor_runs(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    versions = {f"k{i:02d}": "v1" for i in range(12)}
    (tmp_path / "versions.json").write_text(json.dumps(versions))
    monkeypatch.chdir(tmp_path)
    assert api.materialize("parsed", "pipeline.py").steps_executed == 25

    events: list[Any] = []
    real_run, real_snapshots = ProcessPool.run, Store.snapshots

    def run(self: ProcessPool, tasks: list[Any], *args: Any, **kwargs: Any) -> None:
        events.append(("run", [t.node for t in tasks]))
        real_run(self, tasks, *args, **kwargs)
        events.append("ran")

    def snapshots(self: Store, assets: list[str], *args: Any, **kwargs: Any) -> Any:
        events.append(("snapshots", sorted(assets)))
        return real_snapshots(self, assets, *args, **kwargs)

    monkeypatch.setattr(ProcessPool, "run", run)
    monkeypatch.setattr(Store, "snapshots", snapshots)
    versions["k05"] = "v2"
    (tmp_path / "versions.json").write_text(json.dumps(versions))
    got = api.materialize("parsed", "pipeline.py")
    assert got.steps_executed == 3  # the sensor, k05 of fetched, k05 of parsed
    # read once, during the sensor's run: both nodes' snapshots and fetched's values row
    assert events[:3] == [("run", ["pipeline.py:versions"]),
                          ("snapshots", ["pipeline.py:fetched", "pipeline.py:fetched\x00values",
                                         "pipeline.py:parsed"]),
                          "ran"]
    assert sum(1 for e in events if e[0] == "snapshots") == 1
    # and the next tick, one more key moved, runs that key's steps only
    versions["k09"] = "v2"
    (tmp_path / "versions.json").write_text(json.dumps(versions))
    assert api.materialize("parsed", "pipeline.py").steps_executed == 3
    assert api.materialize("parsed", "pipeline.py").steps_executed == 1  # the sensor only
