"""retry_backoff=: after failed attempt k a step waits retry_backoff * k seconds; the step's
JSON says how many attempts it took; the value is validated and never hashed."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import Project

from barca.core.errors import UsageError
from barca.model.discovery import parse_file

FLAKY = """
from pathlib import Path
from barca import asset


@asset(retries=3, retry_backoff=0.5)
def flaky() -> int:
    p = Path("attempts")
    n = int(p.read_text()) + 1 if p.exists() else 1
    p.write_text(str(n))
    if n < 3:
        raise RuntimeError(f"attempt {n}")
    return n
"""


def _model(tmp_path: Path, args: str) -> object:
    (tmp_path / "pipeline.py").write_text(
        f"from barca import asset\n\n@asset({args})\ndef a() -> int:\n    return 1\n")
    return parse_file(tmp_path / "pipeline.py", tmp_path).nodes[0]


def test_retry_backoff_is_read_from_the_decorator(tmp_path: Path) -> None:
    assert _model(tmp_path, "retries=2, retry_backoff=0.25").retry_backoff == 0.25
    assert _model(tmp_path, "retries=2").retry_backoff == 0.0


@pytest.mark.parametrize("bad", ['"x"', "-1", "True", "None", "[1]"])
def test_a_bad_retry_backoff_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="retry_backoff= must be a non-negative number"):
        _model(tmp_path, f"retries=2, retry_backoff={bad}")


@pytest.mark.slow
def test_backoff_waits_between_attempts_and_counts_them(project: Project) -> None:
    project.write("pipeline.py", FLAKY)
    start = time.monotonic()
    r = project.barca("get", "flaky", "pipeline.py", "--json")
    took = time.monotonic() - start
    assert r.code == 0, r.err
    body = r.json()
    assert body["final_output"] == 3
    assert body["steps"][0]["attempts"] == 3
    assert took >= 1.5  # 0.5 s after attempt 1, 1.0 s after attempt 2

    # not in the run hash: editing it leaves the step cached
    project.edit("pipeline.py", "retry_backoff=0.5", "retry_backoff=2")
    r = project.barca("get", "flaky", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["steps"][0]["status"] == "cached"
    assert "attempts" not in r.json()["steps"][0]


@pytest.mark.slow
def test_a_bad_retry_backoff_exits_2_through_the_cli(project: Project) -> None:
    project.write("pipeline.py", FLAKY.replace("retry_backoff=0.5", 'retry_backoff="soon"'))
    for cmd in (["get", "flaky"], ["plan"], ["list"]):
        r = project.barca(*cmd, "pipeline.py")
        assert r.code == 2, (cmd, r.err)
        assert "retry_backoff=" in r.err
    assert not (project.path / "attempts").exists()
