"""Schedule(cron, max_failures=N): checked when the file is read (a bad cron is exit 2 quoting
it, not a syntax error); list and status JSON show the schedule."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from conftest import Project

from barca.core.cron import CronError, parse
from barca.core.errors import UsageError
from barca.model.discovery import parse_file

PIPELINE = """
from barca import Schedule, asset


@asset(freshness=Schedule(FRESH))
def daily() -> int:
    return 1
"""


def _model(tmp_path: Path, fresh: str) -> object:
    (tmp_path / "pipeline.py").write_text(PIPELINE.replace("FRESH", fresh))
    return parse_file(tmp_path / "pipeline.py", tmp_path).nodes[0]


def test_cron_next_fire() -> None:
    now = dt.datetime(2026, 12, 1, 14, 20, 5)
    assert parse("0 5 * * *").next_fire(now) == dt.datetime(2026, 12, 2, 5, 0)
    assert parse("*/15 * * * *").next_fire(now) == dt.datetime(2026, 12, 1, 14, 30)
    assert parse("30 0 5 * * MON-FRI").next_fire(now) == dt.datetime(2026, 12, 2, 5, 0, 30)
    assert parse("0 9 * * 0").next_fire(now) == dt.datetime(2026, 12, 6, 9, 0)  # a Sunday
    assert parse("0 0 30 2 *").next_fire(now) is None
    for bad in ("not a cron", "61 5 * * *", "* * * *", "5-1 * * * *", "*/0 * * * *",
                "0 0 * * 8", "1 2 3 4 5 6 7"):
        with pytest.raises(CronError):
            parse(bad)


def test_a_schedule_is_read_with_its_max_failures(tmp_path: Path) -> None:
    m = _model(tmp_path, '"0 5 * * *", max_failures=2')
    assert (m.freshness, m.schedule, m.max_failures) == ("schedule", "0 5 * * *", 2)
    m = _model(tmp_path, '"0 0 5 * * *"')
    assert (m.schedule, m.max_failures) == ("0 0 5 * * *", 5)


@pytest.mark.parametrize(("fresh", "names"), [
    ('"not a cron"', "'not a cron'"), ('"61 5 * * *"', "'61 5 * * *'"),
    ('"0 5 * * *", max_failures=0', "max_failures"),
    ('"0 5 * * *", max_failures=-1', "max_failures"),
    ('"0 5 * * *", max_failures=1.5', "max_failures"),
    ('"0 5 * * *", max_failures=True', "max_failures"),
    ('"0 5 * * *", max_failures="3"', "max_failures"),
    ('"0 5 * * *", retries=2', "retries"), ('cron="0 5 * * *"', "cron"),
])
def test_a_bad_schedule_is_a_usage_error(tmp_path: Path, fresh: str, names: str) -> None:
    with pytest.raises(UsageError) as err:
        _model(tmp_path, fresh)
    assert names in str(err.value)
    assert "syntax error" not in str(err.value).lower()


@pytest.mark.slow
def test_list_and_status_show_the_schedule(project: Project) -> None:
    project.write("pipeline.py", PIPELINE.replace("FRESH", '"0 5 * * *", max_failures=3'))
    r = project.barca("list", "pipeline.py", "--json")
    assert r.code == 0, r.err
    node = r.json()["nodes"][0]
    assert (node["freshness"], node["schedule"]) == ("schedule", "0 5 * * *")
    assert node["next_fire"].endswith("05:00:00")
    r = project.barca("get", "daily", "pipeline.py", "-o", "value")  # works like any other
    assert (r.code, r.out.strip()) == (0, "1")
    r = project.barca("status", "pipeline.py", "--json")
    assert r.code == 0, r.err
    sched = r.json()["nodes"][0]["schedule"]
    assert {k: sched[k] for k in ("cron", "failures", "max_failures", "failing", "paused")} == {
        "cron": "0 5 * * *", "failures": 0, "max_failures": 3, "failing": False,
        "paused": False}
    assert sched["next_fire"].endswith("05:00:00")


@pytest.mark.slow
def test_a_bad_cron_exits_2_on_every_command(project: Project) -> None:
    project.write("pipeline.py", PIPELINE.replace("FRESH", '"61 5 * * *"'))
    for cmd in (["list"], ["plan"], ["status"], ["get", "daily"], ["get", "daily", "--dry-run"]):
        r = project.barca(*cmd, "pipeline.py")
        assert r.code == 2, (cmd, r.err)
        assert "61 5 * * *" in r.err and "cron" in r.err
        assert "syntax error" not in r.err.lower()
