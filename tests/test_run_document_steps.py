"""A run document's steps as barca 0.30.2's scripts read them: a node of one key says where
its result is (`artifact`), whether it ran now or was cached (the settled walk of a fully
cached run too), and a step that ran says how long its call took (`elapsed_seconds`). A
partitioned node's entry has its counts instead. Through the CLI's own document, in process."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

PIPELINE = '''from barca import asset, partitions


@asset()
def one() -> int:
    return 1


@asset(inputs={"one": one})
def two(one: int) -> int:
    return one + 1


@asset(partitions={"k": partitions(["x", "y"])})
def per(k: str) -> str:
    return k
'''


def _doc(*argv: str) -> dict:
    from barca.faces.commands import dispatch, parse
    from barca.present.compact import run_line
    res = dispatch(parse(list(argv)), on_event=lambda e: None).result
    return json.loads(run_line(res))   # the one-line document a pipe gets


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    return tmp_path


def test_one_key_steps_say_their_artifact_ran_or_cached(here: Path) -> None:
    first = {s["id"]: s for s in _doc("get", "pipeline.py", "--json")["steps"]}
    for name in ("one", "two"):
        step = first[f"pipeline.py:{name}"]
        assert step["status"] == "ran" and (here / step["artifact"]).is_file()
        assert step["artifact"].startswith(f".barca/artifacts/pipeline.py--{name}/")
        assert step["elapsed_seconds"] >= 0
    assert "artifact" not in first["pipeline.py:per"] and \
        first["pipeline.py:per"]["partitions"]["total"] == 2
    for _ in range(2):  # cached; the second time through the settle record
        again = {s["id"]: s for s in _doc("get", "pipeline.py", "--json")["steps"]}
        for name in ("one", "two"):
            step = again[f"pipeline.py:{name}"]
            assert step["status"] == "cached"
            assert step["artifact"] == first[f"pipeline.py:{name}"]["artifact"]
            assert "elapsed_seconds" not in step
