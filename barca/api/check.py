"""A run request checked as ``barca get``/``barca run`` would check it, without running or
writing anything: what ``barca serve`` does before it queues a run, so a refused request
records nothing."""
from __future__ import annotations

from typing import Any

from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.core.types import NodeId


def check_run(target: str | list[str] | None, *files: str, command: str = "get",
              refresh: str | list[str] | None = None, no_cascade: bool = False,
              partition: str | dict[str, Any] | None = None,
              settings: Settings | None = None) -> list[NodeId]:
    """The targets' node ids; a ``UsageError`` as the command would raise it. A name that
    names no node carries ``reason="unknown_target"`` (an HTTP 404, not a 400)."""
    from barca.api import _check_flags, _files, _names, _only_tasks, _targets, parse_partition
    from barca.model.topology import load_graph
    _check_flags(target, refresh, no_cascade)
    if command not in ("get", "run"):
        raise UsageError(f"'{command}' is not a run command.", "Use get or run.")
    if command == "run" and not _names(target):
        raise UsageError("barca run needs a task name.", "Name the task in targets.")
    graph = load_graph(_files(files), settings)
    what = "Task" if command == "run" else "Asset"
    for name in [*_names(target), *_names(refresh)]:
        try:
            graph.resolve(name, what, command)
        except UsageError as exc:
            if "several files" not in exc.message:
                exc.extra.setdefault("reason", "unknown_target")
            raise
    parse_partition(partition)
    if _only_tasks(graph, target, command, _files(files)) is not None:
        return []
    return _targets(graph, target, command)
