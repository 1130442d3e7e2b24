"""The one-line JSON document of a run (``barca get --json`` on a pipe) is written step by step
(barca.present.compact), and is byte for byte what ``json.dumps`` makes of ``to_json()``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from barca import api
from barca.core.settings import Settings
from barca.present.compact import run_line, step_entry
from barca.present.results import RunResult, StepSummary

PIPELINE = """
from barca import asset, partitions


@asset()
def source() -> dict:
    return {"n": 1, "text": "caf\\u00e9 \\"quoted\\" \\\\ tab\\t"}


@asset(inputs={"source": source})
def r0(source: dict) -> int:
    return source["n"]


@asset(inputs={"source": source}, partitions={"k": partitions(["a", "b"])})
def parts(source: dict, k: str) -> str:
    return k
"""


def _dumps(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"), default=str, ensure_ascii=False)


def test_a_run_document_is_what_json_dumps_writes(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    settings = Settings.resolve(pool_size=1)
    first = api.materialize(None, "pipeline.py", settings=settings)  # steps that ran
    again = api.materialize(None, "pipeline.py", settings=settings)  # settled: all cached
    for res in (first, again):
        assert run_line(res) == res.json_line() == _dumps(res.to_json())
    assert any(s.partitions is not None for s in again.steps)  # (the general way, too)


@pytest.mark.parametrize("step", [
    StepSummary("p.py:a", "asset", "cached", "materialized", "-", "ab" * 32),
    StepSummary("dir/\u00e9t\u00e9.py:f\"x\\", "asset", "ran", "changed", "line\nbreak\t\x01",
                None),
    StepSummary("p.py:b", "task", "failed", "failed", "\ud800 lone surrogate", None),
    StepSummary("p.py:c", "asset", "partial", "changed", "", "h",
                {"cached": 1, "total": 2, "will_run": 1, "will_run_keys": ["k"]}),
    StepSummary("p.py:d", "asset", "ran", "changed", "", "h", None, {"attempts": 3}),
    StepSummary("p.py:e", "asset", "ran", "changed", "", 12),  # not a str: the general way
    # an artifact: written as it is when plain, through the encoder when it needs escapes
    StepSummary("p.py:f", "asset", "cached", "materialized", "-", "cd" * 32, None, None,
                ".barca/artifacts/p.py--f/" + "cd" * 32 + ".json"),
    StepSummary("déjà.py:g", "asset", "ran", "changed", "", "h", None, None,
                '.barca/artifacts/a "quoted" \\ back\x7f\x1f/é.json'),
    StepSummary("p.py:h\x7f", "asset", "ran", "changed", "", "h\u2028", None, None, 7),
])
def test_a_step_entry_is_what_json_dumps_writes(step: StepSummary) -> None:
    assert step_entry(step) == _dumps(step.entry())
    res = RunResult("get", "r1", "failed", 0.123456, 1, 2, 1, (step,), (), (), "p.py:a",
                    "boom \u2603", 0, "got", (), {"evicted": 1})
    assert run_line(res) == _dumps(res.to_json())


def test_a_plan_document_is_what_json_dumps_writes(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    plan = api.plan_run(None, "pipeline.py", settings=Settings.resolve(pool_size=1))
    assert plan.json_line() == _dumps(plan.to_json())
