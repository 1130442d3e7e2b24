"""``barca serve``'s scheduler end to end (#32): a real server in a subprocess on a free port.
A six-field cron (seconds first) fires every second; a tick's run is recorded with
``triggered_by: schedule``, reaches the Always nodes below (Manual crossed, a node with its own
schedule left out) and forces nothing; ``--no-schedule`` fires nothing; a pause over HTTP is
kept across a restart."""
from __future__ import annotations

import time

import pytest
from serving import Served

pytestmark = pytest.mark.slow

PIPE = """
from pathlib import Path

from barca import Manual, Schedule, asset, sensor, task


@sensor(freshness=Schedule("*/1 * * * * *"))
def feed() -> str:
    return Path("feed.txt").read_text()


@asset(inputs={"feed": feed})
def orders(feed: str) -> str:
    return feed.upper()


@asset(inputs={"orders": orders}, freshness=Manual)
def baseline(orders: str) -> str:
    return "base:" + orders


@asset(inputs={"baseline": baseline})
def report(baseline: str) -> str:
    return baseline + "!"


@task(inputs={"orders": orders})
def publish(orders: str) -> None:
    with open("published.log", "a") as f:
        f.write(orders + "\\n")


@asset(inputs={"orders": orders}, freshness=Schedule("0 5 1 1 *"))
def yearly(orders: str) -> int:
    return len(orders)
"""


def schedule_runs(srv: Served) -> list[dict]:
    code, body, _ = srv.get("/history?triggered_by=schedule&limit=100")
    assert code == 200, body
    return body["runs"]


def wait_for(srv: Served, n: int, timeout: float = 40) -> list[dict]:
    """At least ``n`` finished scheduled runs (a loaded machine starts children slowly)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = [r for r in schedule_runs(srv) if r["status"] in ("success", "failed")]
        if len(done) >= n:
            return done
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} scheduled runs finished: {schedule_runs(srv)}")


@pytest.fixture
def proj(project):
    project.write("pipe.py", PIPE)
    project.write("feed.txt", "v1")
    return project


def test_a_six_field_cron_fires_every_second(proj):
    with Served(proj.path, "--timezone", "utc") as srv:
        done = wait_for(srv, 2)
        assert all(r["schedule_id"] == "pipe.py:feed" and r["scheduled_at"].endswith("Z")
                   for r in done)
        assert len({r["scheduled_at"] for r in done}) == len(done)  # one run per tick
        # the reach: feed, the Always nodes below (through the Manual baseline), not yearly
        assert done[0]["target"] == "pipe.py:feed,pipe.py:orders,pipe.py:report,pipe.py:publish"
        assert all(r["status"] == "success" for r in done)
        code, entries, _ = srv.get("/schedule")
        assert code == 200
        feed = next(e for e in entries if e["id"] == "pipe.py:feed")
        assert feed["cron"] == "*/1 * * * * *" and feed["last_fired"] is not None
        assert feed["next_fire"] >= feed["last_fired"] and not feed["failing"]
    # the task below ran once: later ticks read the same feed value and force nothing
    assert (proj.path / "published.log").read_text() == "V1\n"


def test_no_schedule_fires_nothing(proj):
    with Served(proj.path, "--no-schedule") as srv:
        time.sleep(4)
        assert schedule_runs(srv) == []
        code, health, _ = srv.get("/health")
        assert health["scheduler_enabled"] is False
        code, entries, _ = srv.get("/schedule")
        assert {e["id"] for e in entries} == {"pipe.py:feed", "pipe.py:yearly"}
        assert all(e["last_fired"] is None for e in entries)


def test_a_pause_is_kept_across_a_restart(proj):
    with Served(proj.path, "--timezone", "utc") as srv:
        code, entry, _ = srv.post("/schedule/feed/pause")
        assert code == 200 and entry["paused"] is True and entry["id"] == "pipe.py:feed"
    with Served(proj.path, "--timezone", "utc") as srv:
        before = len(schedule_runs(srv))
        time.sleep(3)
        assert len(schedule_runs(srv)) == before    # paused: nothing fires
        feed = next(e for e in srv.get("/schedule")[1] if e["id"] == "pipe.py:feed")
        assert feed["paused"] and feed["skip_reason"] == "paused"
        code, entry, _ = srv.post("/schedule/pipe.py:feed/resume")
        assert code == 200 and entry["paused"] is False
        wait_for(srv, before + 1)
