"""A run request checked as ``barca get``/``barca run`` would check it, without running or
writing anything: what ``barca serve`` does before it queues a run, so a refused request
records nothing."""
from __future__ import annotations

from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.core.types import NodeId, short_name
from barca.engine.selection import Selection

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from barca.model.topology import Graph


def check_run(target: str | list[str] | None, *files: str, command: str = "get",
              refresh: str | list[str] | None = None, no_cascade: bool = False,
              partition: str | dict[str, Any] | None = None,
              settings: Settings | None = None) -> list[NodeId]:
    """The targets' node ids; a ``UsageError`` as the command would raise it. A name that
    names no node carries ``reason="unknown_target"`` (an HTTP 404, not a 400)."""
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


def _files(files: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(f) for f in files if f is not None)


def _names(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    return [n.strip() for item in items for n in item.split(",") if n.strip()]


def _check_flags(target: str | list[str] | None, refresh: str | list[str] | None,
                 no_cascade: bool) -> None:
    """Usage errors a command line can have before any file is read."""
    if target is not None and not _names(target):
        raise UsageError("The target is empty: it names no asset.",
                         "Name an asset (`barca list` shows them), or leave the target out to "
                         "bring every asset up to date.")
    if no_cascade and not _names(refresh):
        raise UsageError("--no-cascade applies only with --refresh: it keeps the refreshed "
                         "assets' dependants as they are.",
                         "Add --refresh NAME (the assets to recompute), or drop --no-cascade.")


def _only_tasks(graph: Graph, target: str | list[str] | None, command: str,
                files: tuple[str, ...]) -> str | None:
    """``barca get FILE`` on a file that defines only tasks: nothing to get, which is not an
    error; the note says how to run them."""
    if command != "get" or _names(target) or graph.available("get"):
        return None
    tasks = graph.available("run")
    if not tasks:
        return None
    where = " ".join(files) or "the project"
    names = ", ".join(short_name(t) for t in tasks)
    run = f"barca run {short_name(tasks[0])}" + (f" {' '.join(files)}" if files else "")
    return f"{where} defines only tasks ({names}): nothing to get. Run a task with `{run}`."


def _targets(graph: Graph, target: str | list[str] | None, command: str,
             tick: bool = False) -> list[NodeId]:
    names = _names(target)
    if not names:
        found = graph.available(command)
        if not found:
            what = "task" if command == "run" else "asset or sensor"
            where = ', '.join(sorted(graph.files)) or 'the project'
            raise UsageError(f"No {what} found in {where}",
                             "Decorate a function with @asset, @sensor or @task, or pass the "
                             "pipeline file.")
        return found
    out = []
    for name in names:
        nid = graph.resolve(name, "Task" if command == "run" else "Asset", command)
        kind = graph.nodes[nid].kind
        if command == "get" and kind == "task" and not tick:  # a tick's targets: any kind
            raise UsageError(f"'{name}' is a task: tasks always run and are not cached.",
                             f"Run it with: barca run {name}")
        if command == "run" and kind != "task" and not tick:
            raise UsageError(f"'{name}' is an {kind}, not a task.",
                             f"Bring it up to date with: barca get {name}")
        out.append(nid)
    return out


def parse_partition(spec: str | dict[str, Any] | None) -> Selection | None:
    """``region=emea``, ``region=emea,amer``, ``day=d1,region=amer`` or a JSON object."""
    if spec is None or spec == "" or spec == {}:
        return None
    if isinstance(spec, str) and spec.strip().startswith("{"):
        import json  # (a --partition in JSON only)
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--partition: not valid JSON ({exc.msg})",
                             'Write --partition region=emea or --partition \'{"region": "emea"}\'.'
                             ) from None
    dims: dict[str, list[str]] = {}
    if isinstance(spec, dict):
        for d, v in spec.items():
            vals = v if isinstance(v, list) else [v]
            dims[str(d)] = [str(x) for x in vals]
        return Selection(dims)
    current = None
    for token in str(spec).split(","):
        token = token.strip()
        if "=" in token:
            current, _, value = token.partition("=")
            current = current.strip()
            if not current:
                raise UsageError(f"--partition: '{token}' names no dimension",
                                 "Write --partition DIM=VALUE[,VALUE], e.g. region=emea.")
            dims.setdefault(current, []).append(value.strip())
        elif current is not None and token:
            dims[current].append(token)
        else:
            raise UsageError(f"--partition: '{spec}' is not DIM=VALUE",
                             "Write --partition DIM=VALUE[,VALUE], e.g. region=emea.")
    return Selection(dims)
