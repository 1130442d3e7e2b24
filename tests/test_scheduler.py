"""The scheduler of ``barca serve`` (barca.faces.serve.scheduler), in process: a tick's reach
(the scheduled node and the Always nodes below it, Manual crossed, a node with its own schedule
ends the walk), what a tick's run does (brings things up to date, forces nothing), six-field
cron with seconds first, max_failures, pause/resume kept in the metadata DB across a new
scheduler, and a tick skipped while its node is in flight. Real pipelines read by
``barca list``'s code, a real SQLite file in tmp_path, real croniter; time is a clock the test
moves, never a sleep."""
from __future__ import annotations

import datetime as dt
import textwrap
import zoneinfo
from pathlib import Path
from typing import Any

import pytest

from barca import api
from barca.faces.serve.scheduler import Scheduler, croniter_expr, next_after, tick_plan
from barca.queries.listing import list_nodes

PIPELINE = """
    from pathlib import Path

    from barca import Manual, Schedule, asset, sensor, task


    @sensor(freshness=Schedule("*/5 * * * *", max_failures=2))
    def feed() -> str:
        return Path("feed.txt").read_text()


    @asset(inputs={"feed": feed})
    def orders(feed: str) -> str:
        Path("orders.log").open("a").write("x")
        return feed.upper()


    @asset(inputs={"orders": orders}, freshness=Manual)
    def baseline(orders: str) -> str:
        return "base:" + orders


    @asset(inputs={"baseline": baseline})
    def report(baseline: str) -> str:
        return baseline + "!"


    @task(inputs={"orders": orders})
    def publish(orders: str) -> None:
        Path("published.log").open("a").write(orders + "\\n")


    @asset(inputs={"orders": orders}, freshness=Schedule("0 5 * * *"))
    def daily(orders: str) -> int:
        return len(orders)


    @asset(inputs={"daily": daily})
    def after_daily(daily: int) -> int:
        return daily + 1


    @asset()
    def lone() -> int:
        return 1


    @task(freshness=Schedule("*/1 * * * * *"))
    def heartbeat() -> None:
        print("tick")
"""

UTC = dt.UTC


@pytest.fixture
def nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    (tmp_path / "pipeline.py").write_text(textwrap.dedent(PIPELINE))
    (tmp_path / "feed.txt").write_text("v1")
    monkeypatch.chdir(tmp_path)
    return list_nodes("pipeline.py").to_json()["nodes"]


def ids(*names: str) -> list[str]:
    return [f"pipeline.py:{n}" for n in names]


def test_tick_reach(nodes: list[dict[str, Any]]) -> None:
    # Always below (orders, report through the Manual baseline, the task publish); Manual
    # crossed but not a target; daily has its own schedule: neither it nor what is below it
    assert tick_plan(nodes, "pipeline.py:feed") == (
        "get", ids("feed", "orders", "report", "publish"))
    assert tick_plan(nodes, "pipeline.py:daily") == ("get", ids("daily", "after_daily"))
    assert tick_plan(nodes, "pipeline.py:heartbeat") == ("run", ids("heartbeat"))
    # a node with no scheduled node above it is in no tick
    reached = {t for n in nodes if n["freshness"] == "schedule"
               for t in tick_plan(nodes, n["id"])[1]}
    assert "pipeline.py:lone" not in reached and "pipeline.py:baseline" not in reached
    with pytest.raises(KeyError):
        tick_plan(nodes, "pipeline.py:nope")


def test_list_json_gives_the_schedule_and_max_failures(nodes: list[dict[str, Any]]) -> None:
    by = {n["name"]: n for n in nodes}
    assert (by["feed"]["schedule"], by["feed"]["max_failures"]) == ("*/5 * * * *", 2)
    assert by["daily"]["max_failures"] == 5 and "max_failures" not in by["lone"]


def test_a_tick_brings_up_to_date_and_forces_nothing(nodes: list[dict[str, Any]],
                                                     tmp_path: Path) -> None:
    command, targets = tick_plan(nodes, "pipeline.py:feed")

    def tick() -> dict[str, str]:
        res = api.materialize(targets, command=command, schedule_id="pipeline.py:feed")
        return {s["id"].split(":")[1]: s["status"] for s in res.to_json()["steps"]}

    first = tick()
    assert first == {"feed": "ran", "orders": "ran", "baseline": "ran", "report": "ran",
                     "publish": "ran"}
    # the same sensor value: nothing but the poll; the Always task below does not run again
    assert tick() == {"feed": "ran", "orders": "cached", "baseline": "cached",
                      "report": "cached", "publish": "cached"}
    (tmp_path / "feed.txt").write_text("v2")
    # a new value: its readers run; the Manual baseline keeps its result (so report too)
    assert tick() == {"feed": "ran", "orders": "ran", "baseline": "cached", "report": "cached",
                      "publish": "ran"}
    assert (tmp_path / "published.log").read_text() == "V1\nV2\n"
    assert api.get("baseline") == "base:V1"


def test_six_fields_are_seconds_first() -> None:
    assert croniter_expr("*/15 1 * * * *") == "1 * * * * */15"
    assert croniter_expr("0 5 * * *") == "0 5 * * *"
    assert croniter_expr("@hourly") == "@hourly"
    t0 = dt.datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC).timestamp()
    # every 15 seconds of minute 1 of each hour (not: minute */15, every second)
    assert next_after("*/15 1 * * * *", t0, UTC) == t0 + 60
    assert next_after("*/15 1 * * * *", t0 + 60, UTC) == t0 + 75
    assert next_after("*/1 * * * * *", t0, UTC) == t0 + 1
    assert next_after("0 5 * * *", t0, UTC) == t0 + 5 * 3600
    assert next_after("@hourly", t0, UTC) == t0 + 3600


def test_cron_is_read_in_the_servers_zone() -> None:
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    t0 = dt.datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC).timestamp()  # 01:00 in Paris
    assert next_after("0 5 * * *", t0, paris) == t0 + 4 * 3600      # 05:00 Paris = 04:00 UTC


class Server:
    """What the scheduler calls: a queue that records requests, and the nodes in flight."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.busy: dict[str, str] = {}
        self.now = dt.datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC).timestamp()
        self.lines: list[str] = []

    def submit(self, request: dict[str, Any]) -> str:
        self.requests.append(request)
        return f"run{len(self.requests)}"

    def scheduler(self, nodes: list[dict[str, Any]], db: Path, enabled: bool = True
                  ) -> Scheduler:
        return Scheduler(db.parent, nodes, UTC, self.submit, self.busy.get, enabled, db,
                         clock=lambda: self.now, log=self.lines.append)


def entry(s: Scheduler, name: str) -> dict[str, Any]:
    return next(e for e in s.entries() if e["id"] == f"pipeline.py:{name}")


def test_ticks_fire_on_the_cron(nodes: list[dict[str, Any]], tmp_path: Path) -> None:
    srv = Server()
    s = srv.scheduler(nodes, tmp_path / ".barca" / "metadata.db")
    assert {e["id"] for e in s.entries()} == set(ids("feed", "daily", "heartbeat"))
    assert entry(s, "heartbeat")["next_fire"] == srv.now + 1
    assert s.fire_due() == []                      # nothing due at the start
    srv.now += 1
    assert s.fire_due() == ["run1"]
    assert srv.requests[0] == {"command": "run", "targets": ids("heartbeat"),
                               "triggered_by": "schedule",
                               "scheduled_at": "2026-01-01T00:00:01Z",
                               "schedule_id": "pipeline.py:heartbeat"}
    srv.now += 299
    fired = s.fire_due()                           # feed at 00:05 and heartbeat, once each
    assert len(fired) == 2
    assert {r["schedule_id"] for r in srv.requests[1:]} == set(ids("heartbeat", "feed"))
    e = entry(s, "heartbeat")                      # 298 missed seconds: not caught up
    last = [i + 1 for i, r in enumerate(srv.requests) if r["schedule_id"] == e["id"]][-1]
    assert (e["last_fired"], e["next_fire"], e["last_run"]) == (srv.now, srv.now + 1,
                                                                f"run{last}")
    off = srv.scheduler(nodes, tmp_path / "other" / "metadata.db", enabled=False)
    assert not off.fire_due(srv.now + 5)
    assert not (tmp_path / "other").exists()      # --read-only: nothing written, not even it


def test_a_late_tick_fires_once_for_the_latest_time(nodes: list[dict[str, Any]],
                                                    tmp_path: Path) -> None:
    srv = Server()
    s = srv.scheduler(nodes, tmp_path / ".barca" / "metadata.db")
    srv.now += 3 * 300 + 7                         # feed (every 5 min) missed 00:05 and 00:10
    s.fire_due()
    feed = [r for r in srv.requests if r["schedule_id"] == "pipeline.py:feed"]
    assert [r["scheduled_at"] for r in feed] == ["2026-01-01T00:15:00Z"]
    assert entry(s, "feed")["next_fire"] == srv.now - 7 + 300


def test_a_tick_that_cannot_be_queued_holds_no_other_back(nodes: list[dict[str, Any]],
                                                          tmp_path: Path) -> None:
    srv = Server()

    def submit(request: dict[str, Any]) -> str:
        if request["schedule_id"] == "pipeline.py:feed":
            raise RuntimeError("the queue is broken")
        return srv.submit(request)
    s = Scheduler(tmp_path, nodes, UTC, submit, srv.busy.get, True,
                  tmp_path / ".barca" / "metadata.db", clock=lambda: srv.now,
                  log=srv.lines.append)
    srv.now += 300
    assert len(s.fire_due()) == 1                  # heartbeat, after feed's trouble
    assert any("pipeline.py:feed not queued: RuntimeError" in line for line in srv.lines)


def test_max_failures_makes_a_schedule_failing_until_a_success(nodes: list[dict[str, Any]],
                                                               tmp_path: Path) -> None:
    srv = Server()
    db = tmp_path / ".barca" / "metadata.db"
    s = srv.scheduler(nodes, db)
    for _ in range(2):                             # feed: max_failures=2
        srv.now += 300
        s.fire_due()
        s.run_finished("pipeline.py:feed", False)
    e = entry(s, "feed")
    assert (e["failures"], e["max_failures"], e["failing"]) == (2, 2, True)
    assert any("failing: 2 consecutive failed ticks" in line for line in srv.lines)
    before = len(srv.requests)
    srv.now += 300
    s.fire_due()
    assert [r["schedule_id"] for r in srv.requests[before:]] == ["pipeline.py:heartbeat"]
    # the count is kept: a new scheduler (a restart) still skips it
    srv.requests.clear()
    s2 = srv.scheduler(nodes, db)
    assert entry(s2, "feed")["failing"]
    srv.now += 300
    s2.fire_due()
    assert "pipeline.py:feed" not in {r["schedule_id"] for r in srv.requests}
    s2.run_finished("pipeline.py:feed", True)      # a success resets it
    assert (entry(s2, "feed")["failures"], entry(s2, "feed")["failing"]) == (0, False)
    srv.now += 300
    s2.fire_due()
    assert "pipeline.py:feed" in {r["schedule_id"] for r in srv.requests}


def test_a_failing_schedule_ends_when_its_node_succeeds_elsewhere(
        nodes: list[dict[str, Any]], tmp_path: Path) -> None:
    srv = Server()
    srv.now = dt.datetime.now(UTC).timestamp() - 3600  # before the run below
    s = srv.scheduler(nodes, tmp_path / ".barca" / "metadata.db")
    for _ in range(2):
        s.run_finished("pipeline.py:feed", False)
    assert entry(s, "feed")["failing"]
    api.get("feed")                                # an explicit request (a CLI run) succeeds
    srv.now = dt.datetime.now(UTC).timestamp() + 300
    s.fire_due()
    assert "pipeline.py:feed" in {r["schedule_id"] for r in srv.requests}
    assert entry(s, "feed")["failures"] == 0


def test_pause_and_resume_are_kept_across_a_restart(nodes: list[dict[str, Any]],
                                                    tmp_path: Path) -> None:
    srv = Server()
    db = tmp_path / ".barca" / "metadata.db"
    s = srv.scheduler(nodes, db)
    e = s.pause("heartbeat", None)                 # by name
    assert (e["id"], e["paused"], e["paused_until"]) == ("pipeline.py:heartbeat", True, None)
    until = dt.datetime.fromtimestamp(srv.now + 10, UTC)
    assert s.pause("pipeline.py:feed", until)["paused_until"] == srv.now + 10
    with pytest.raises(KeyError):
        s.pause("lone", None)                      # not scheduled
    s.stop()
    s2 = srv.scheduler(nodes, db)                  # a restart
    assert entry(s2, "heartbeat")["paused"] and entry(s2, "feed")["paused_until"] == srv.now + 10
    srv.now += 1
    assert s2.fire_due() == []
    e = entry(s2, "heartbeat")
    assert (e["skip_reason"], e["last_skipped"], e["skipped_for"]) == ("paused", srv.now, None)
    srv.now += 299                                 # feed's pause ran out: it fires at 00:05
    s2.fire_due()
    assert [r["schedule_id"] for r in srv.requests] == ["pipeline.py:feed"]
    assert not entry(s2, "feed")["paused"]
    s2.resume("heartbeat")
    srv.now += 1
    s2.fire_due()
    assert srv.requests[-1]["schedule_id"] == "pipeline.py:heartbeat"
    assert not entry(srv.scheduler(nodes, db), "heartbeat")["paused"]   # kept too
    s2.pause("daily", None)
    assert entry(srv.scheduler(nodes, db, enabled=False), "daily")["paused"]  # read only


def test_after_a_reset_the_schedules_start_over_in_the_new_database(
        nodes: list[dict[str, Any]], tmp_path: Path) -> None:
    """POST /state/reset moves metadata.db aside: what the scheduler keeps from then on goes
    into the new file, not the one moved aside, and nothing of the old state is held."""
    import sqlite3
    srv = Server()
    db = tmp_path / ".barca" / "metadata.db"
    s = srv.scheduler(nodes, db)
    s.pause("heartbeat", None)
    aside = db.with_name("metadata.db.reset-1")
    db.rename(aside)                               # as the queue's reset does
    api.get("lone")                                # a new database
    s.database_replaced()
    assert not entry(s, "heartbeat")["paused"]
    s.pause("feed", None)
    def paused(path: Path) -> set[str]:
        with sqlite3.connect(path) as conn:
            return {r[0] for r in conn.execute("SELECT id FROM schedule_state WHERE paused=1")}
    assert paused(db) == {"pipeline.py:feed"}
    assert paused(aside) == {"pipeline.py:heartbeat"}
    assert not entry(srv.scheduler(nodes, db), "heartbeat")["paused"]


def test_a_tick_is_skipped_while_its_node_is_in_flight(nodes: list[dict[str, Any]],
                                                       tmp_path: Path) -> None:
    srv = Server()
    s = srv.scheduler(nodes, tmp_path / ".barca" / "metadata.db")
    srv.busy["pipeline.py:heartbeat"] = "abc123"
    srv.now += 1
    assert s.fire_due() == []
    e = entry(s, "heartbeat")
    assert (e["skip_reason"], e["skipped_for"], e["last_skipped"]) == ("in_flight", "abc123",
                                                                       srv.now)
    assert any("run abc123 of the same node still in flight" in line for line in srv.lines)
    del srv.busy["pipeline.py:heartbeat"]
    srv.now += 1
    assert s.fire_due() == ["run1"]                # the next tick after it ended fires


def test_reload_keeps_state_and_reads_new_crons(nodes: list[dict[str, Any]],
                                                tmp_path: Path) -> None:
    srv = Server()
    s = srv.scheduler(nodes, tmp_path / ".barca" / "metadata.db")
    s.pause("daily", None)
    changed = [dict(n, schedule="0 6 * * *") if n["name"] == "daily" else n for n in nodes
               if n["name"] != "heartbeat"]
    s.reload(changed)
    assert {e["id"] for e in s.entries()} == set(ids("feed", "daily"))
    e = entry(s, "daily")
    assert (e["cron"], e["paused"], e["next_fire"]) == ("0 6 * * *", True, srv.now + 6 * 3600)


def test_the_thread_starts_and_stops(nodes: list[dict[str, Any]], tmp_path: Path) -> None:
    srv = Server()
    s = srv.scheduler(nodes, tmp_path / ".barca" / "metadata.db")
    s.start()
    srv.now += 1
    s.reload(nodes)  # wakes the thread, which finds heartbeat due
    for _ in range(200):
        if srv.requests:
            break
        import time
        time.sleep(0.01)
    s.stop()
    assert srv.requests and srv.requests[0]["schedule_id"] == "pipeline.py:heartbeat"


def test_a_cron_that_never_matches_never_fires(nodes: list[dict[str, Any]],
                                              tmp_path: Path) -> None:
    srv = Server()
    never = [dict(n, schedule="0 0 30 2 *") if n["name"] == "daily" else n for n in nodes]
    s = srv.scheduler(never, tmp_path / ".barca" / "metadata.db")
    assert entry(s, "daily")["next_fire"] is None
    srv.now += 10 ** 8
    s.fire_due()
    assert "pipeline.py:daily" not in {r["schedule_id"] for r in srv.requests}
    assert croniter_expr("@HOURLY") == "@hourly"


def test_a_manual_node_with_inputs_is_read_below(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # its inputs are walked before it: a get below it stopped with "missing run hash"
    (tmp_path / "pipeline.py").write_text(textwrap.dedent("""
        from barca import Manual, asset

        VALUE = 1


        @asset()
        def source() -> int:
            return VALUE


        @asset(inputs={"source": source}, freshness=Manual)
        def pinned(source: int) -> int:
            return source * 10


        @asset(inputs={"pinned": pinned})
        def below(pinned: int) -> int:
            return pinned + 1
    """))
    monkeypatch.chdir(tmp_path)
    assert api.get("below") == 11
    (tmp_path / "pipeline.py").write_text(
        (tmp_path / "pipeline.py").read_text().replace("VALUE = 1", "VALUE = 2"))
    assert api.get("below") == 11                  # pinned keeps its result
    assert api.get("below", refresh="pinned") == 21


def test_status_says_what_the_scheduler_keeps(nodes: list[dict[str, Any]],
                                              tmp_path: Path) -> None:
    api.get("lone")  # a metadata DB
    srv = Server()
    s = srv.scheduler(nodes, tmp_path / ".barca" / "metadata.db")

    def sched(name: str) -> dict[str, Any]:
        rows = api.status(None, "pipeline.py").to_json()["nodes"]
        return next(r for r in rows if r["id"] == f"pipeline.py:{name}")["schedule"]

    assert {k: sched("feed")[k] for k in ("failures", "failing", "paused")} == {
        "failures": 0, "failing": False, "paused": False}
    s.pause("daily", None)
    s.run_finished("pipeline.py:feed", False)
    s.run_finished("pipeline.py:feed", False)
    feed, daily = sched("feed"), sched("daily")
    assert (feed["failures"], feed["max_failures"], feed["failing"], feed["next_fire"]) == (
        2, 2, True, None)
    assert (daily["paused"], daily["failing"], daily["next_fire"]) == (True, False, None)
    s.resume("daily")
    assert sched("daily")["paused"] is False and sched("daily")["next_fire"] is not None
