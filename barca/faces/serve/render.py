"""The server's JSON: run rows, steps and logs as ``GET /runs`` shows them, timestamps in RFC
3339 UTC (one format on every route), and the CLI's error envelope."""
from __future__ import annotations

import datetime as dt
import json
from typing import Any

from barca.core.errors import BarcaError, UsageError
from barca.present.journal import run_counts
from barca.store.database import Connection

STEP_LIMIT = 1000


def rfc3339(t: float | None) -> str | None:
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def parse_time(text: str) -> float:
    """An RFC 3339 time (``Z`` or an offset; a bare date is midnight UTC) as Unix seconds."""
    from barca.core.when import utc_seconds
    try:
        return utc_seconds(text)
    except ValueError:
        raise UsageError(f"'{text}' is not an RFC 3339 time.",
                         "Write 2026-01-31T05:00:00Z or 2026-01-31.") from None


def run_summary(row: dict[str, Any]) -> dict[str, Any]:
    """A run row without its request and outcome: ``GET /runs``, ``/queue``, ``/history``."""
    request = json.loads(row["request"]) if row.get("request") else None
    started, finished = row.get("started_at"), row.get("finished_at")
    executed, total = run_counts(row.get("steps_run"), row.get("steps_cached"),
                                 row.get("steps_failed"))
    return {
        "run_id": row["run_id"], "status": row["status"], "command": row["command"],
        "target": row["target"],
        "files": (request or {}).get("files") or json.loads(row.get("files") or "[]"),
        "job": row.get("job"), "attempts": row.get("attempts"),
        "failure": json.loads(row["failure"]) if row.get("failure") else None,
        "triggered_by": row.get("triggered_by"), "client_run_id": row.get("client_run_id"),
        "scheduled_at": row.get("scheduled_at"),
        "schedule_id": row.get("schedule_id"), "queued_at": rfc3339(row.get("queued_at")),
        "started_at": rfc3339(started), "finished_at": rfc3339(finished),
        "elapsed_seconds": round(finished - started, 4) if started and finished else None,
        "steps_executed": executed, "steps_total": total,
        "steps_run": row.get("steps_run"), "steps_cached": row.get("steps_cached"),
        "steps_failed": row.get("steps_failed"), "error": row.get("error"),
        "exit_code": row.get("exit_code"),  # the command's: 0, 1 failed step, 2, 3, 130
    }


def run_detail(conn: Connection, row: dict[str, Any], limit: int | None
               ) -> dict[str, Any]:
    """``GET /runs/{id}``: the row, the CLI's JSON outcome once finished, steps and logs."""
    out = run_summary(row)
    outcome = json.loads(row["outcome"]) if row.get("outcome") else None
    out["outcome"] = outcome
    if isinstance(outcome, dict):
        out["steps_total"] = outcome.get("steps_total")
        out["failure"] = outcome.get("envelope")
    steps = steps_of(conn, row["run_id"])
    total = len(steps)
    out["steps"] = steps if limit is None else steps[:limit]
    out["steps_page"] = {"total": total, "truncated": limit is not None and total > limit}
    out["logs"] = logs_of(conn, row["run_id"])
    return out


def steps_of(conn: Connection, run_id: str, after: int = 0) -> list[dict[str, Any]]:
    """The steps a run recorded (executed ones: a cache hit writes no row), in order."""
    from barca.store.serverq import run_steps
    return [{"seq": i, "node_id": a, "key": k or None, "status": s,
             "ok": s == "success", "elapsed_seconds": e, "error": err,
             "finished_at": rfc3339(t), "attempts": n}
            for i, a, k, s, e, err, t, n in run_steps(conn, run_id, after)]


def logs_of(conn: Connection, run_id: str, after: int = 0) -> list[dict[str, Any]]:
    """What a run's steps printed, stdout and stderr, in the order it was recorded."""
    from barca.store.serverq import run_logs
    return [{"seq": i, "node_id": n, "stream": s, "ts": rfc3339(t), "line": line}
            for i, n, s, t, line in run_logs(conn, run_id, after)]


class Answer(Exception):
    """An HTTP answer other than 200, with the CLI's envelope as its body."""

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        super().__init__(body.get("error"))
        self.status, self.body, self.headers = status, body, headers or {}


def envelope(exc: BarcaError) -> dict[str, Any]:
    out = exc.to_json()
    out.pop("traceback", None)
    return out


def error(message: str, remediation: str = "", code: int = 2, kind: str = "usage",
          **extra: Any) -> dict[str, Any]:
    return {"error": message, "code": code, "kind": kind, "remediation": remediation, **extra}
