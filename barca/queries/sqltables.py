"""``barca sql``'s tables of barca's own records -- ``barca.runs``, ``barca.materializations``
and ``barca.nodes`` -- as rows of JSON documents that DuckDB reads, in the columns barca 0.30.2
documents for them (the keys of ``history --json``'s runs; each step result's ``node_id``,
``created_at`` as text, ``size_bytes``, ``artifact``, ``content_hash``, ``error_type``...;
``status --json`` flattened), and for a query written for this barca, its own words beside
them (``node``, ``asset``, ``path``, ``sha256``, ``size``, ``elapsed``...)."""
from __future__ import annotations

from typing import Any

from barca.core.when import utc_text
from barca.present.journal import error_parts

TABLES = ("runs", "materializations", "nodes")
# read_json's options for these tables: times stay text, as the documents write them (a format
# no value has: DuckDB then detects no date or timestamp in a string)
AS_WRITTEN = "format='newline_delimited', dateformat='%%text', timestampformat='%%text'"


def run_rows(store: Any) -> list[dict[str, Any]]:
    """One row per run, newest first: the keys of ``barca history --json``'s runs."""
    from barca.present.journal import RunRow
    from barca.store.serverq import store_history
    rows, _ = store_history(store, None)
    return [RunRow(**r).to_json() for r in rows]


def materialization_rows(store: Any) -> list[dict[str, Any]]:
    """One row per recorded step result (a success or a failure; a cache hit records none)."""
    return [materialization(r) for r in store.table_rows("materializations")]


def materialization(raw: dict[str, Any]) -> dict[str, Any]:
    """A ``materializations`` row as the table shows it: barca 0.30.2's columns, then this
    barca's own (``id``, ``node``: the step, ``asset``: the node, ``path``, ``sha256``,
    ``size``, ``elapsed``, ``traceback``, ``shape``)."""
    kind, message = error_parts(raw.get("error"))
    return {
        "node_id": raw.get("node"), "partition": raw.get("partition") or None,
        "run_id": raw.get("run_id"), "run_hash": raw.get("run_hash"),
        "status": raw.get("status"), "created_at": utc_text(raw.get("created_at")),
        "elapsed_seconds": raw.get("elapsed"), "cpu_seconds": None, "max_rss_bytes": None,
        "attempts": raw.get("attempts"), "format": raw.get("format"),
        "size_bytes": raw.get("size"), "artifact": raw.get("path"),
        "content_hash": raw.get("sha256"), "error_type": kind, "error_message": message,
        "id": raw.get("id"), "node": raw.get("node"), "asset": raw.get("asset"),
        "path": raw.get("path"), "sha256": raw.get("sha256"), "size": raw.get("size"),
        "elapsed": raw.get("elapsed"), "error": raw.get("error"),
        "traceback": raw.get("traceback"), "shape": raw.get("shape"),
    }


def node_rows(status_doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per node: ``barca status --json``'s nodes, flattened (``local``: null without
    a server)."""
    out = []
    for n in status_doc.get("nodes", []):
        cache = n.get("cache") or {}
        parts = n.get("partitions") or {}
        last = n.get("last_materialization") or {}
        out.append({
            "id": n.get("id"), "name": n.get("name"), "kind": n.get("kind"),
            "partitioned": bool(n.get("partitioned")), "inputs": list(n.get("inputs") or []),
            "env": list(n.get("env") or []), "state": cache.get("state"),
            "reason": cache.get("reason"), "detail": cache.get("detail"),
            "run_hash": cache.get("run_hash"), "artifact": cache.get("artifact"),
            "local": None, "partitions_total": parts.get("total"),
            "partitions_cached": parts.get("cached"), "partitions_missing": parts.get("missing"),
            "last_status": last.get("status"), "last_created_at": last.get("created_at"),
            "last_elapsed_seconds": last.get("elapsed_seconds"),
            "last_run_hash": last.get("run_hash"), "last_artifact": last.get("artifact"),
            "last_format": last.get("format"), "last_size_bytes": last.get("size_bytes"),
            "last_content_hash": last.get("content_hash"), "last_error": last.get("error"),
        })
    return out
