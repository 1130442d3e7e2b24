"""A cached command over many nodes does little per node (issue #31): a small JSON value's text
is made only when shown (``--json`` never formats 500 previews), and the graph's checks still
say what is wrong. In process, with a real store."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from barca import api
from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.present.results import Output

PIPELINE = """
from barca import asset


@asset()
def source() -> dict:
    return {"n": 1, "b": [1, 2]}


@asset(inputs={"source": source})
def r0(source: dict) -> int:
    return source["n"]


@asset(inputs={"source": source})
def r1(source: dict) -> str:
    return "x" + str(source["n"])
"""


def test_json_previews_are_made_only_when_shown(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    api.materialize(None, "pipeline.py", settings=Settings.resolve(pool_size=1))
    made: list[object] = []
    from barca.core import render
    real = render.json_preview
    monkeypatch.setattr(render, "json_preview", lambda v: made.append(v) or real(v))
    result = api.materialize(None, "pipeline.py", settings=Settings.resolve(pool_size=1))
    doc = result.to_json()  # what --json prints: values, no preview text
    assert doc["final_output"] == {"pipeline.py:source": {"n": 1, "b": [1, 2]},
                                   "pipeline.py:r0": 1, "pipeline.py:r1": "x1"}
    assert made == []
    text = str(result)  # what a terminal shows: each value's text under its path
    assert '  {\n    "b": [\n      1,\n      2\n    ],\n    "n": 1\n  }' in text
    assert "\n  1\n" in text and '\n  "x1"' in text
    assert len(made) == 3
    out = next(o for o in result.outputs if o.target == "pipeline.py:r1")
    assert isinstance(out, Output) and out.values == "x1"
    assert json.loads(out.shown_preview()) == "x1"


@pytest.mark.parametrize(("source", "said"), [
    ("""
from barca import asset

@asset()
def a(x: int) -> int:
    return x
""", "parameter 'x' of 'a' is not filled by any input or partition dimension"),
    ("""
from barca import asset, partitions, partitions_from

@asset(partitions={"k": partitions(["a"])})
def keys(k: str) -> str:
    return k

@asset(inputs={"keys": keys})
def b(keys: str) -> str:
    return keys
""", "'b' reads the partitioned asset 'keys' without collect()"),
    ("""
from barca import asset, partitions, partitions_from

@asset(partitions={"k": partitions(["a"])})
def keys(k: str) -> str:
    return k

@asset(partitions={"j": partitions_from(keys)})
def c(j: str) -> str:
    return j
""", "partitions_from(keys) must keep the upstream's dimension name"),
])
def test_the_graph_still_says_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            source: str, said: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(source)
    with pytest.raises(UsageError, match=re.escape(said)):
        api.materialize(None, "pipeline.py", settings=Settings.resolve(pool_size=1))


RICH = '''
from barca import asset, partitions, collect


@asset(partitions={"k": partitions(["a", "b"])}, retries=2, description="keys")
def keyed(k: str, scale: int = 3) -> int:
    import os
    return len(k) * scale + len(os.environ.get("HOME", ""))


@asset(inputs={"keyed": collect(keyed)}, serializer="pickle")
def total(keyed: list, **kw) -> int:
    return sum(keyed)
'''


def test_a_cached_node_model_is_the_parsed_one(tmp_path: Path) -> None:
    """The discovery cache keeps every field of every node (a node's state is one tuple in
    its slots' order, restored by one assignment): a field added to NodeModel but not to
    its ``__setstate__`` fails here, not as a model cache that never hits."""
    import pickle

    from barca.model.discovery import NodeModel, parse_file
    (tmp_path / "pipeline.py").write_text(RICH)
    fm = parse_file(tmp_path / "pipeline.py", tmp_path)
    back = pickle.loads(pickle.dumps(fm, protocol=5))
    assert [n.id for n in back.nodes] == ["pipeline.py:keyed", "pipeline.py:total"]
    for a, b in zip(fm.nodes, back.nodes, strict=True):
        for k in NodeModel.__slots__:
            if k == "_fn":
                assert b._fn is None  # the tree is not kept: found again when asked for
            elif k == "_file":
                assert b._file is back
            else:
                assert getattr(b, k) == getattr(a, k), k
        assert b.fn.name == a.function and b.fn.lineno == a.line
    assert back.nodes[0].dims and back.nodes[0].retries == 2 and back.nodes[1].var_kw


def _wide(n: int) -> str:
    return "import time\n\nfrom barca import asset\n\n\n@asset()\ndef source() -> dict:\n" \
           "    return {'n': 1}\n\n\n@asset()\ndef stamp() -> int:\n    return time.time_ns()\n" \
           + "".join(
               f"\n\n@asset(inputs={{'source': source}})\ndef r{i:03d}(source: dict) -> int:\n"
               f"    return source['n'] + {i}\n" for i in range(n))


def test_a_settled_wide_walk_still_checks_every_result(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk a settle record vouches for checks each result it returns against its recorded
    SHA-256 as any walk does (reliability.md): a corrupted, a deleted and a replaced artifact
    among 120 settled readers are each found, said, computed again and returned intact; a
    result computed again with other bytes (``stamp``) is then read from its newest row."""
    monkeypatch.chdir(tmp_path)
    n = 120
    (tmp_path / "pipeline.py").write_text(_wide(n))
    settings = Settings.resolve(pool_size=1)
    first = api.materialize(None, "pipeline.py", settings=settings)
    assert first.steps_executed == n + 2
    api.materialize(None, "pipeline.py", settings=settings)  # decided: its record written
    from barca.engine import settle
    settled: list[int] = []
    real = settle.settle_batch
    monkeypatch.setattr(settle, "settle_batch",
                        lambda runner, batch: settled.append(len(batch)) or real(runner, batch))
    from barca.engine import runner as runner_module
    monkeypatch.setattr(runner_module, "settle_batch", settle.settle_batch)
    again = api.materialize(None, "pipeline.py", settings=settings)
    assert sum(settled) == n + 2 and again.steps_executed == 0  # the settled path was taken
    values = {o.target: o.values for o in again.outputs}
    assert values == {o.target: o.values for o in first.outputs}
    paths = {o.target: o.items[0].path for o in again.outputs}
    corrupt, gone, folder = (tmp_path / paths[f"pipeline.py:r{i:03d}"] for i in (37, 50, 51))
    corrupt.write_bytes(b"99")  # as long as "38": the same size, other bytes
    stamp = tmp_path / paths["pipeline.py:stamp"]
    stamp.write_bytes(b"1" * len(stamp.read_bytes()))
    gone.unlink()
    folder.unlink()
    folder.mkdir()
    settled.clear()
    repaired = api.materialize(None, "pipeline.py", settings=settings)
    assert sum(settled) == n + 2  # still vouched for: the files are what changed
    assert repaired.steps_executed == 4
    said = " ".join(w["message"] for w in repaired.to_json()["warnings"])
    corrupt_said = "artifact corrupt (SHA-256 differs from the one recorded)"
    assert f"{corrupt_said}: {paths['pipeline.py:r037']}" in said
    assert f"artifact missing: {paths['pipeline.py:r050']}" in said
    assert "pipeline.py:r051" in said and "a directory" in said
    now = {o.target: o.values for o in repaired.outputs}
    assert now.pop("pipeline.py:stamp") != values.pop("pipeline.py:stamp")  # other bytes
    assert now == values
    assert corrupt.read_bytes() == b"38" and gone.read_bytes() == b"51"
    steps = {s["id"]: s for s in repaired.to_json()["steps"]}
    assert steps["pipeline.py:r037"]["reason"] == "artifact_corrupt"
    assert steps["pipeline.py:r036"] == dict(steps["pipeline.py:r036"], status="cached",
                                              reason="materialized", detail="-")
    for _ in range(2):  # decided (its record written), then settled: each reads the new row
        settled.clear()
        last = api.materialize(None, "pipeline.py", settings=settings)
        assert last.steps_executed == 0 and not last.warnings
        got = {o.target: o.values for o in last.outputs}
        assert got.pop("pipeline.py:stamp") == json.loads(stamp.read_bytes())
        assert got == values
    assert sum(settled) == n + 2
