"""``barca stats TARGET``: how a node's executions went (counts, timings, cache hits, the
recent runs), as JSON and as a table."""
from __future__ import annotations

from typing import Any

from barca.core.record import Record
from barca.core.render import text_table
from barca.present.display import _Displayable

RUN_FIELDS = ("elapsed_seconds", "status", "created_at", "error_message", "attempts")


class StatsReport(_Displayable, Record):
    __slots__ = ("id", "total_runs", "avg", "median", "p95", "max", "cache_hit_rate",
                 "recent_runs", "fields")
    _defaults = {"fields": None}
    id: str
    total_runs: int
    avg: float | None
    median: float | None
    p95: float | None
    max: float | None
    cache_hit_rate: float
    recent_runs: tuple[dict[str, Any], ...]   # newest first, RUN_FIELDS each
    fields: tuple[str, ...] | None            # --fields: only these keys of each recent run

    def to_json(self) -> dict[str, Any]:
        keep = self.fields or RUN_FIELDS
        return {"id": self.id, "total_runs": self.total_runs,
                "avg_elapsed_seconds": self.avg, "median_elapsed_seconds": self.median,
                "p95_elapsed_seconds": self.p95, "max_elapsed_seconds": self.max,
                "cache_hit_rate": self.cache_hit_rate,
                "recent_runs": [{k: r[k] for k in keep} for r in self.recent_runs]}

    def summary_line(self) -> str:
        def sec(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}s"
        return (f"{self.id}: {self.total_runs} run{'s' if self.total_runs != 1 else ''}, "
                f"avg {sec(self.avg)}, median {sec(self.median)}, p95 {sec(self.p95)}, "
                f"max {sec(self.max)}, cache hit rate {self.cache_hit_rate:.0%}")

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        keep = self.fields or RUN_FIELDS
        rows = [["-" if r[k] is None else (f"{r[k]:.3f}" if k == "elapsed_seconds" else
                                            str(r[k])) for k in keep]
                for r in self.recent_runs]
        return ([k.upper().replace("_", " ") for k in keep], rows, None, self.summary_line())

    def __str__(self) -> str:
        headers, rows, _, summary = self._table()
        if not rows:
            return summary + "\n\n(never executed)"
        return summary + "\n\n" + text_table(headers, rows)
