"""A scheduled node as ``list`` and ``status`` show it: its cron, when it fires next, and how
its recent runs went (``barca docs scheduling``). Schedules fire under ``barca serve``."""
from __future__ import annotations

import datetime as dt
from typing import Any

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # UTC, as barca stats and history write times


def next_fire(cron: str, now: dt.datetime | None = None) -> str | None:
    """When ``cron`` fires next after ``now`` (default: now), in UTC; None if never."""
    from barca.core.cron import parse
    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    when = parse(cron).next_fire(now)
    return when.strftime(TIME_FORMAT) if when is not None else None


def schedule_state(m: Any, statuses: list[str]) -> dict[str, Any]:
    """``status --json``'s ``schedule`` of node model ``m``; ``statuses``: its executions'
    statuses, newest first. ``failures`` counts the failures in a row since the last success;
    at ``max_failures`` the schedule is paused (it stops firing until a run succeeds)."""
    failures = 0
    for s in statuses:
        if s != "failed":
            break
        failures += 1
    paused = failures >= m.max_failures
    return {"cron": m.schedule, "failures": failures, "max_failures": m.max_failures,
            "failing": failures > 0, "paused": paused,
            "next_fire": None if paused else next_fire(m.schedule)}
