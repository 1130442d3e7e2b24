"""A dict source's values row (engine.decision.values_row): beside the snapshot of a node whose
keys and values come from a dict source, the source's per-key value digests then. A tick where
one key's value moved hashes that key again, not every key; what runs and every run hash served
are what a decision without any memo finds; a barca whose rules changed (a new salt) ignores the
row. Times are the benchmark's business (bench/s08_sensor_dict_200k.py), never asserted here."""
from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from rulechange import rules

from barca import api
from barca.engine import decision

pytestmark = pytest.mark.slow  # every step runs in the worker processes of a real pool

N = 2100  # past a snapshot part (store.snapchunks) and the worker's values memo (MEMO_KEYS)

PIPELINE = '''import json
from pathlib import Path

from barca import asset, partitions_from, sensor


@sensor()
def versions() -> dict:
    return json.loads(Path("versions.json").read_text())


@asset(partitions={"key": partitions_from(versions)})
def fetched(key: str, versions: str) -> dict:
    return {"key": key, "version": versions}


@asset(partitions={"key": partitions_from(fetched)})
def parsed(key: str, fetched: dict) -> dict:
    return {"key": key, "seen": fetched["version"]}
'''


def name(i: int) -> str:
    return f"k{i:04d}"


@contextmanager
def inside(root: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(here)


@contextmanager
def hashed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many keys' run hashes each decision computed (the real function, counted)."""
    counts: list[int] = []
    real = decision.run_hashes

    def counting(definition: str, inputs: Any, keys: Any, values: Any = None) -> list[str]:
        counts.append(len(keys))
        return real(definition, inputs, keys, values)

    with monkeypatch.context() as m:
        m.setattr(decision, "run_hashes", counting)
        yield counts


def tick(root: Path, versions: dict[str, str]) -> dict[str, Any]:
    (root / "versions.json").write_text(json.dumps(versions))
    with inside(root):
        return api.materialize("parsed", "pipeline.py").to_json()


def ran(result: dict[str, Any]) -> dict[str, Any]:
    return {s["id"]: s.get("partitions", {}).get("will_run_keys") for s in result["steps"]}


def from_scratch(root: Path) -> dict[str, tuple[str, str | None]]:
    """Every step's action and run hash, as a decision with no memo layer finds them."""
    with inside(root):
        sess = api.Session(("pipeline.py",), write=False, memo=False)
        try:
            w = api._predict(sess, api._targets(sess.graph, None, "get"))
            return {s.id: (s.action, s.run_hash) for nid in w.order
                    if sess.graph.nodes[nid].kind == "asset"
                    for s in w.states[nid].steps.values()}
        finally:
            sess.close()


def values_rows(root: Path) -> int:
    with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
        names = [a for a, in conn.execute("SELECT CAST(asset AS BLOB) FROM snapshots")]
    return sum(a.endswith(b"\x00values") for a in names)


def test_one_changed_value_hashes_and_runs_that_key_only(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    versions = {name(i): "v1" for i in range(N)}
    assert tick(tmp_path, versions)["steps_executed"] == 2 * N + 1
    assert values_rows(tmp_path) == 1  # fetched's: its keys and values come from the sensor

    for t, i in enumerate((1234, 7, 1999)):
        versions[name(i)] = f"v{t + 2}"
        with hashed(monkeypatch) as counts:
            got = tick(tmp_path, versions)
        assert got["steps_executed"] == 3
        assert ran(got) == {"pipeline.py:versions": None,
                            "pipeline.py:fetched": [f"key={name(i)}"],
                            "pipeline.py:parsed": [f"key={name(i)}"]}
        assert max(counts) < 10, counts  # not one run hash per key of the 2,000
        scratch = from_scratch(tmp_path)
        assert all(a == "cached" for a, _ in scratch.values())  # every key served is current

    # a value changed back to one computed before: served from that result, nothing runs
    versions[name(7)] = "v1"
    with hashed(monkeypatch) as counts:
        got = tick(tmp_path, versions)
    assert got["steps_executed"] == 1  # the sensor
    assert max(counts) < 10, counts
    assert all(a == "cached" for a, _ in from_scratch(tmp_path).values())
    # the values served are the new ones (a --partition walk snapshots its narrowed keys:
    # after the ticks)
    for key, seen in ((name(1234), "v2"), (name(7), "v1"), (name(1999), "v4"),
                      (name(8), "v1")):
        with inside(tmp_path):
            served = api.materialize("parsed", "pipeline.py", partition=f"key={key}",
                                     load_values=True).to_json()
        assert served["final_output"] == {f"key={key}": {"key": key, "seen": seen}}


def test_a_barca_whose_rules_changed_ignores_the_values_row(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    versions = {name(i): "v1" for i in range(N)}
    assert tick(tmp_path, versions)["steps_executed"] == 2 * N + 1
    versions[name(5)] = "v2"
    with rules(1):
        with hashed(monkeypatch) as counts:
            got = tick(tmp_path, versions)
        assert counts.count(N) == 2, counts  # the older salt's row is not read
        # (the new rules give the functions new run hashes: every key runs under them)
        assert got["steps_executed"] == 2 * N + 1
        assert all(a == "cached" for a, _ in from_scratch(tmp_path).values())
        versions[name(6)] = "v2"  # the rows of this barca's rules serve this barca
        with hashed(monkeypatch) as counts:
            got = tick(tmp_path, versions)
        assert max(counts) < 10, counts
        assert ran(got)["pipeline.py:fetched"] == [f"key={name(6)}"]
    # barca's own rules again: the row made under rules 1 is not read either; the keys whose
    # value moved since barca's rules last ran (5 and 6) run, and only they
    versions[name(7)] = "v2"
    with hashed(monkeypatch) as counts:
        got = tick(tmp_path, versions)
    assert counts.count(N) == 2, counts
    assert ran(got)["pipeline.py:fetched"] == [f"key={name(i)}" for i in (5, 6, 7)]
    assert all(a == "cached" for a, _ in from_scratch(tmp_path).values())
