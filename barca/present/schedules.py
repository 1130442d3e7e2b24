"""A scheduled node as ``list`` and ``status`` show it: its cron, when it fires next, and how
its recent runs went (``barca docs scheduling``). Schedules fire under ``barca serve``."""
from __future__ import annotations

import datetime as dt
import time
from typing import Any

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # UTC, as barca stats and history write times


def next_fire(cron: str, now: dt.datetime | None = None) -> str | None:
    """When ``cron`` fires next after ``now`` (default: now), in UTC; None if never."""
    from barca.core.cron import parse
    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    when = parse(cron).next_fire(now)
    return when.strftime(TIME_FORMAT) if when is not None else None


def schedule_state(m: Any, statuses: list[str], kept: dict[str, Any] | None = None,
                   now: float | None = None) -> dict[str, Any]:
    """``status --json``'s ``schedule`` of node model ``m``, in ``GET /schedule``'s words.
    ``kept``: what ``barca serve`` kept of it (``barca.store.schedstate``): its failed ticks in
    a row and its pause. Without it (no server ever ran the schedule), ``failures`` counts the
    failures in a row since the last success among ``statuses`` (its executions, newest first).
    ``failing``: ``failures`` reached ``max_failures`` (ticks are skipped until a success)."""
    if kept is not None:
        failures = int(kept["failures"] or 0)
        until = kept.get("paused_until")
        paused = bool(kept["paused"]) and (until is None or until > (now or time.time()))
    else:
        failures, paused = 0, False
        for s in statuses:
            if s != "failed":
                break
            failures += 1
    failing = failures >= m.max_failures
    return {"cron": m.schedule, "failures": failures, "max_failures": m.max_failures,
            "failing": failing, "paused": paused,
            "next_fire": None if failing or paused else next_fire(m.schedule)}
