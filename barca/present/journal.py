"""Result objects for what runs left behind besides results: the runs themselves (``barca
history``) and the lines their steps wrote (``barca logs``). Plain data with their renderings,
like ``barca.present.results``."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from barca.core.record import Record
from barca.core.render import html_table, rich_table, text_table
from barca.core.when import utc_text
from barca.present.display import cut_note, more_hint
from barca.present.results import _Displayable


def utc_ms(ts: float) -> str:
    """``2026-11-30T17:04:05.123Z``: a UTC timestamp with milliseconds."""
    ms = int(round(ts * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def utc_table(ts: float) -> str:
    """``2026-11-30 17:04:05.123 UTC``: a time as every table shows it, to the millisecond."""
    ms = int(round(ts * 1000))
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d} UTC"


class LogLine(Record):
    __slots__ = ("id", "step", "stream", "ts", "line")
    id: int          # the order lines were recorded in
    step: str        # node id, with [key] for a partition key
    stream: str      # stdout | stderr
    ts: float
    line: str

    def to_json(self) -> dict[str, Any]:
        return {"node_id": self.step, "stream": self.stream, "ts": utc_ms(self.ts),
                "line": self.line}


class StepLog(Record):
    """The lines a run's steps wrote (all of them, or those a filter kept), in order."""
    __slots__ = ("run_id", "command", "target", "status", "lines", "timestamps")
    _defaults = {"timestamps": False}
    run_id: str
    command: str
    target: str
    status: str
    lines: tuple[LogLine, ...]
    timestamps: bool

    def headline(self) -> str:
        return f"logs of run {self.run_id} ({self.command} {self.target}, {self.status})"

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status,
                "lines": [x.to_json() for x in self.lines]}

    def json_lines(self) -> str:
        """``barca logs -f --json``: one object per line, as lines arrive."""
        return "".join(json.dumps(x.to_json(), ensure_ascii=False) + "\n" for x in self.lines)

    def json_array(self) -> str:
        """``barca logs --json``: one JSON array of the lines (``[]`` when none were
        printed), as barca prints it."""
        return json.dumps([x.to_json() for x in self.lines], ensure_ascii=False) + "\n"

    def text_lines(self) -> str:
        stamp = (lambda x: utc_ms(x.ts) + " ") if self.timestamps else (lambda x: "")
        return "".join(f"{stamp(x)}[{x.step}] {x.line}\n" for x in self.lines)

    EMPTY = "no output recorded for this run"

    def __str__(self) -> str:
        return self.text_lines().rstrip("\n") or self.EMPTY

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        rows = [[utc_table(x.ts), x.step, x.stream, x.line] for x in self.lines]
        return ["TIME", "STEP", "STREAM", "LINE"], rows, None, self.headline()

    def _repr_html_(self) -> str:
        headers, rows, col, summary = self._table()
        if not rows:  # not a header-only table: say so
            import html
            return (f'<div class="barca-summary">{html.escape(summary)}: '
                    f"{self.EMPTY}</div>")
        return html_table(headers, rows, col, summary)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}

    def __rich__(self) -> object:
        headers, rows, col, summary = self._table()
        return rich_table(headers, rows, col, summary)


TABLE_RUNS = 10  # the runs a history table shows without --limit or --all (JSON: every run)

def error_parts(error: str | None) -> tuple[str | None, str | None]:
    """An error text's two parts as barca 0.30.2 names them (``error_type``, ``error_message``:
    "ValueError: no"); a text that names no type is all message."""
    kind, sep, message = (error or "").partition(": ")
    return (kind if sep else None), ((message if sep else error) or None)


def run_counts(ran: int | None, cached: int | None, failed: int | None
               ) -> tuple[int | None, int | None]:
    """(steps_executed, steps_total) of a run's counts: executed, the steps whose function ran,
    failed ones too; None while it has recorded none (queued, running)."""
    if ran is None and cached is None and failed is None:
        return None, None
    return (ran or 0) + (failed or 0), (ran or 0) + (cached or 0) + (failed or 0)


# the keys of a run's JSON, in order (its fields and the run documents' words for the same)
RUN_FIELDS = ("run_id", "command", "target", "status", "started_at", "finished_at", "steps_run",
              "steps_cached", "steps_failed", "pool_size", "error", "triggered_by", "files",
              "job", "attempts", "failure", "scheduled_at", "schedule_id", "client_run_id",
              "steps_executed", "steps_total", "elapsed_seconds")


class RunRow(Record):
    """One run as the store recorded it; the fields, in order, are ``history --json``'s."""
    __slots__ = ("run_id", "command", "target", "status", "started_at", "finished_at",
                 "steps_run", "steps_cached", "steps_failed", "pool_size", "error",
                 "triggered_by", "files", "job", "attempts", "failure", "scheduled_at",
                 "schedule_id", "client_run_id", "elapsed")
    _defaults: ClassVar[dict[str, Any]] = {
        "triggered_by": None, "files": None, "job": None, "attempts": None, "failure": None,
        "scheduled_at": None, "schedule_id": None, "client_run_id": None, "elapsed": None}
    run_id: str
    command: str | None
    target: str | None
    status: str | None     # success | failed | cancelled | running | crashed (its process died)
    started_at: float      # Unix seconds
    finished_at: float | None
    steps_run: int | None
    steps_cached: int | None
    steps_failed: int | None
    pool_size: int | None
    error: str | None
    triggered_by: str | None  # manual (typed here), api, schedule (barca serve); None: older
    files: Any                # the pipeline files it read: a JSON list's text, or a list
    job: str | None           # what it was for: "all", or the node ids asked for
    attempts: int | None      # calls of its steps' functions (retries too)
    failure: Any              # its first failed step: {node, error} (or that as JSON text)
    scheduled_at: str | None  # barca serve's: the tick that started it
    schedule_id: str | None
    client_run_id: str | None  # a run a client recorded on a server: the client's own id
    elapsed: float | None     # seconds, when known apart from the times (a document read back)

    def to_json(self) -> dict[str, Any]:
        doc = {f: getattr(self, f) for f in self.__slots__ if f != "elapsed"}
        # times as barca's other documents (and 0.30.2's history) write them, UTC, to the
        # second (elapsed_seconds keeps the fraction)
        doc["started_at"], doc["finished_at"] = utc_text(self.started_at), \
            utc_text(self.finished_at)
        doc["files"] = _json_of(self.files) or []
        doc["failure"] = _json_of(self.failure)
        # the words a run document (get/run --json) and barca 0.30.2's history use for the
        # same counts and time: a script reads a run the same way wherever it finds one
        executed, total = run_counts(self.steps_run, self.steps_cached, self.steps_failed)
        doc["steps_executed"], doc["steps_total"] = executed, total or 0
        doc["elapsed_seconds"] = (
            self.elapsed if self.elapsed is not None else None
            if self.finished_at is None or not self.started_at
            else round(self.finished_at - self.started_at, 4))
        return doc


def _json_of(value: Any) -> Any:
    """A column that holds JSON text, as its value (a value already: as it is)."""
    return json.loads(value) if isinstance(value, str) else value


class History(_Displayable, Record):
    """``barca history``: the most recent runs, newest first; ``total``: every run the
    filters kept (None: not counted); ``fields``: the keys kept of each run's JSON;
    ``table_limit``: the runs a table shows (None: all; JSON: every one it holds)."""
    __slots__ = ("runs", "total", "fields", "table_limit")
    _defaults: ClassVar[dict[str, Any]] = {"total": None, "fields": None, "table_limit": None}
    runs: tuple[RunRow, ...]
    total: int | None
    fields: tuple[str, ...] | None
    table_limit: int | None

    # a sequence of its runs, as the list barca.history() returned before it was an object
    def __len__(self) -> int:
        return len(self.runs)

    def __iter__(self) -> Iterator[RunRow]:
        return iter(self.runs)

    def __getitem__(self, i: int) -> RunRow:
        return self.runs[i]

    def to_json(self) -> dict[str, Any]:
        runs = [r.to_json() for r in self.runs]
        if self.fields is not None:
            runs = [{k: run[k] for k in self.fields} for run in runs]
        doc: dict[str, Any] = {"runs": runs}
        if self.total is not None:  # (as barca 0.30.2's: how many there are, and if cut)
            doc["total"] = self.total
            doc["truncated"] = self.total > len(self.runs)
            if doc["truncated"]:
                doc["hint"] = more_hint(self.total, "runs")
        return doc

    def _shown(self) -> tuple[RunRow, ...]:
        return self.runs if self.table_limit is None else self.runs[:self.table_limit]

    def cut_note(self) -> str:
        """What a table of fewer runs than the filters kept says of the rest ("" if none)."""
        total = len(self.runs) if self.total is None else self.total
        return cut_note(len(self._shown()), total, "runs")

    def json_text(self) -> str:
        # non-ASCII escaped, unlike the other results: the form `history --json` always had
        return json.dumps(self.to_json(), indent=2, default=str)

    def to_pandas(self) -> Any:
        """One row per run, the JSON fields as columns; its times as UTC timestamps."""
        import pandas as pd
        frame = pd.DataFrame([r.to_json() for r in self.runs],
                             columns=list(RUN_FIELDS))
        for column in ("started_at", "finished_at"):
            frame[column] = pd.to_datetime([r.started_at if column == "started_at"
                                            else r.finished_at for r in self.runs],
                                           unit="s", utc=True)
        return frame

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        rows = [[r.run_id, r.command or "", r.target or "", r.status or "",
                 str(r.steps_run or 0), str(r.steps_cached or 0),
                 time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(r.started_at))]
                for r in self._shown()]
        return (["RUN", "COMMAND", "TARGET", "STATUS", "RAN", "CACHED", "STARTED"], rows, 3,
                self.cut_note())

    def __str__(self) -> str:
        headers, rows, _, _ = self._table()
        return text_table(headers, rows)


class StepRow(Record):
    """One step a run recorded (a result or a failure), for ``barca history RUN_ID``."""
    __slots__ = ("node_id", "partition_key", "run_hash", "status", "attempts",
                 "elapsed_seconds", "artifact_path", "artifact_format", "artifact_size_bytes",
                 "error", "error_traceback")
    node_id: str
    partition_key: str | None     # None: a node without partitions
    run_hash: str
    status: str                   # success | failed
    attempts: int | None
    elapsed_seconds: float | None
    artifact_path: str | None     # from the project root: .barca/artifacts/...
    artifact_format: str | None
    artifact_size_bytes: int | None
    error: str | None             # "ValueError: no": the exception's type and message
    error_traceback: str | None

    def to_json(self) -> dict[str, Any]:
        doc = {f: getattr(self, f) for f in self.__slots__}
        doc["error_type"], doc["error_message"] = error_parts(self.error)
        return doc


class RunDetail(_Displayable, Record):
    """``barca history RUN_ID``: one run's row and the steps it recorded (``steps``: the first
    ``limit`` and every failed one; ``steps_recorded``: how many there are)."""
    __slots__ = ("run", "steps", "steps_recorded")
    run: RunRow
    steps: tuple[StepRow, ...]
    steps_recorded: int

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "run": self.run.to_json(), "steps": [s.to_json() for s in self.steps],
            "steps_page": {"total": self.steps_recorded,
                           "truncated": self.steps_recorded > len(self.steps)}}
        failed = next((s for s in self.steps if s.status == "failed"), None)
        if failed is not None:  # where to read what the failed step printed
            doc["hint"] = (f"barca logs {self.run.run_id} --step "
                           f"{failed.node_id.rsplit(':', 1)[-1]} --stream stderr")
        return doc

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        from barca.store.remote import human_bytes
        rows = []
        for s in self.steps:
            where = "-" if not s.artifact_path else (
                f"{s.artifact_path} ({s.artifact_format}, "
                f"{human_bytes(s.artifact_size_bytes or 0)})")
            step = f"{s.node_id}[{s.partition_key}]" if s.partition_key else s.node_id
            rows.append([step, s.status, str(s.attempts) if s.attempts else "-",
                         "-" if s.elapsed_seconds is None else f"{s.elapsed_seconds:.1f}s",
                         s.run_hash[:12], where])
        return (["STEP", "STATUS", "ATTEMPTS", "TIME", "RUN_HASH", "ARTIFACT"], rows, 1,
                self._cut())

    def _cut(self) -> str:
        left = self.steps_recorded - len(self.steps)
        return (f"showing {len(self.steps)} of {self.steps_recorded} steps; pass --limit N for "
                "more, or --all for every step") if left > 0 else ""

    def _head(self) -> list[str]:
        """The run in four lines: what and how it ended, when, who started it, its counts."""
        r = self.run

        def utc(ts: float | None) -> str:
            return "-" if not ts else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
        took = r.to_json()["elapsed_seconds"]
        return [f"run {r.run_id}  {r.command or ''} {r.target or ''}  {r.status or ''}  "
                + ("-" if took is None else f"{took:.1f}s"),
                f"started {utc(r.started_at)}  finished {utc(r.finished_at)}",
                f"triggered by {r.triggered_by or '-'}",
                # (executed, as the JSON says it: those that ran, failed ones too)
                f"steps: {r.steps_run or 0} ran, {r.steps_failed or 0} failed, "
                f"{r.steps_cached or 0} cached"]

    def _repr_html_(self) -> str:
        """The table with an ERROR column (its first line; the traceback folded under it),
        the run's lines above and below it; steps by their function's name, as a notebook's
        other tables name nodes."""
        from barca.core.render import html_table
        from barca.core.types import short_name, step_id
        headers, rows, col, cut = self._table()
        for row, s in zip(rows, self.steps, strict=True):
            row[0] = step_id(short_name(s.node_id), s.partition_key or "")
        errors = [f"{s.error}\n{s.error_traceback or ''}" if s.status == "failed" else ""
                  for s in self.steps]
        head = self._head()
        return html_table([*headers, "ERROR"], [[*row, e] for row, e in zip(
            rows, errors, strict=True)], col, " · ".join([*head[1:], *filter(None, [cut])]),
            title=head[0], why_col=len(headers))

    def __str__(self) -> str:
        failed = [s for s in self.steps if s.status == "failed"]
        lines = [*self._head(), ""]
        headers, rows, _, cut = self._table()
        lines.append(text_table(headers, rows) if rows else "no step recorded")
        if cut:
            lines.append(cut)
        for s in failed:
            lines += ["", f"{s.node_id} failed: {s.error}"]
            lines += ["  " + t for t in (s.error_traceback or "").rstrip("\n").splitlines()]
        return "\n".join(lines)
