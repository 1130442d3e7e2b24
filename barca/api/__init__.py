"""The Python API: get / run / status / plan / list_nodes / history. Composes the engine and
returns result objects (or values); decides nothing itself.

Every function takes the command's settings as keyword arguments (``env="dev"``,
``executor="dask"``, ``pool_size=4``, ``remote_uri=...``, ``cache_max_size=...``: the flags of
``barca.core.settings.SOURCES``), or a resolved ``settings=Settings(...)`` with them on top; they
apply to that call alone."""
from __future__ import annotations

import os
import time

from barca.api.check import (  # the request's parts, as every run command reads them
    _check_flags,
    _files,
    _names,
    _only_tasks,
    _targets,
    parse_partition,
)
from barca.core import events as ev
from barca.core.errors import StepFailed, UsageError
from barca.core.settings import Settings, settings_of
from barca.core.types import NodeId, Status, short_name
from barca.engine.planner import Context
from barca.engine.runner import Runner
from barca.engine.selection import check_selection, resolve_refresh, walk_order
from barca.model.topology import Graph, load_graph
from barca.present.outputs import node_outputs
from barca.present.results import RunResult, StatusReport
from barca.present.verdicts import plan_row, run_result, status_row
from barca.store.metadata import Store
from barca.store.process import new_run_id

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable  # (annotations: not collections at run time)
    from typing import Any

    from barca.present.plans import PhasePlan, Plan  # imported by plan and --dry-run only
    from barca.present.results import SqlResult
    from barca.queries.picture import DagPicture
    from barca.store.cachelimit import CacheReport

# False in a process that runs one command (the CLI): no warm state to keep for a next ask, and
# barca.api.warm is not even loaded (#31 item 2)
keeping = True


def __getattr__(name: str) -> Any:
    if name == "list_nodes":  # part of the API, its module loaded when asked (not by get)
        from barca.queries.listing import list_nodes
        return list_nodes
    raise AttributeError(f"module 'barca.api' has no attribute {name!r}")


class Session:
    """One command's view of a project: graph, store and planner context."""

    def __init__(self, files: Iterable[str] = (), write: bool = True, memo: bool = True,
                 settings: Settings | None = None) -> None:
        self.settings = settings or Settings.resolve()
        self.graph = load_graph(_files(files), self.settings)
        self.store = Store(self.graph.root_dir, create=write, prefix=self.settings.store_prefix)
        self.ctx = Context(self.graph, self.store, self.settings, memo=memo)  # memo: see Context
        from barca.model.discovery import PSEUDO_ABSPATH
        if any(fm.abspath == PSEUDO_ABSPATH for fm in self.graph.files.values()):
            # a renamed notebook keeps its results: rows of this very definition under the
            # notebook's old name (never another notebook's function of the same name)
            import functools

            from barca.model.notebook import is_notebook_id
            for n, m in self.graph.nodes.items():
                if self.graph.files[m.file].abspath == PSEUDO_ABSPATH and self.store.is_open:
                    self.store.adopt(n, is_notebook_id, functools.partial(self._parts, n))

    def _parts(self, n: NodeId) -> dict[str, str]:
        """A node's definition parts now (what an adopted row must have been made from)."""
        return self.ctx.definition(n)[1]

    def close(self) -> None:
        self.store.close()


# ---------------------------------------------------------------------------- get / run

def materialize(target: str | list[str] | None = None, *files: str, command: str = "get",
                refresh: str | list[str] | None = None, refresh_all: bool = False,
                no_cascade: bool = False, partition: str | dict[str, Any] | None = None,
                on_event: ev.EventCallback = ev.ignore, load_values: bool = False,
                settings: Settings | None = None, run_id: str | None = None,
                schedule_id: str | None = None, **flags: Any) -> RunResult:
    """Bring targets up to date (or run a task); the RunResult, raising StepFailed on failure.
    ``run_id``: the id of a run ``barca serve`` queued (its row exists, pending).
    ``schedule_id``: a tick of that node (barca serve): targets of any kind, and a task but
    the scheduled one runs only when out of date."""
    start = time.perf_counter()
    settings = settings_of(settings, **flags)
    _check_flags(target, refresh, no_cascade)
    ask = None
    if run_id is None and keeping:
        from barca.api import warm
        if warm.Ask.wanted(files, settings, refresh, refresh_all, no_cascade, partition):
            ask = warm.Ask(target, files, command, settings, load_values)
    if ask is not None:
        served = ask.serve(on_event, start)  # the same state as a call before: its outcome
        if served is not None:
            return served
        on_event = ask.listen(on_event)
    sess = Session(files, write=False, settings=settings)
    try:
        only_tasks = _only_tasks(sess.graph, target, command, files)
        if only_tasks is not None:
            on_event(ev.Note(only_tasks))
            from barca.present.notices import warning_object
            return RunResult(command, run_id or new_run_id(), "success",
                             time.perf_counter() - start,
                             0, 0, 0, (), (), (warning_object("note", only_tasks),))
        targets = _targets(sess.graph, target, command, schedule_id is not None)
        label = ",".join(short_name(t) for t in targets) if target else "all"
        if command == "get" and not _names(target) and sess.graph.available("run"):
            # a bare get brings assets and sensors up to date; tasks run only when asked
            tasks = sess.graph.available("run")
            on_event(ev.Note(f"skipped {len(tasks)} task{'s' if len(tasks) != 1 else ''} "
                             f"(tasks run only with `barca run TASK`): "
                             + ", ".join(short_name(t) for t in tasks)))
        order = walk_order(sess.ctx, targets)
        refresh_ids = resolve_refresh(sess.ctx, order, _names(refresh), label)
        selection = parse_partition(partition)
        if selection is not None:
            check_selection(sess.ctx, order, selection, label)
        store = sess.store = sess.ctx.reopen_for_writing()  # read-only until now
        if ask is not None:
            ask.generation = store.generation()
        from barca.present.notices import Capacity, announce_warnings, warning_object
        Capacity(settings).announce(sess.graph, order, on_event)
        said = announce_warnings(sess.graph, order, on_event)
        runner = Runner(sess.ctx, targets, execute=True, refresh=refresh_ids,
                        cascade=not no_cascade, refresh_all=refresh_all, selection=selection,
                        on_event=on_event, verify_all=load_values, lazy_tasks=frozenset(
                            t for t in targets if schedule_id not in (None, t)))
        runner.run_id = run_id or new_run_id()
        runner.prepare_remote()
        from barca.engine.executors import default_pool_size
        sess.store.begin_run(runner.run_id, command, label, default_pool_size(settings),
                             sorted(sess.graph.files), ",".join(targets) if target else "all")
        status = Status.CANCELLED
        try:
            w = runner.run()
            status = Status.FAILED if w.failed else Status.SUCCESS
        except UsageError:  # --partition naming a key the walk found not to exist
            status = Status.FAILED
            raise
        finally:
            wd = runner.w
            sess.store.end_run(runner.run_id, status, wd.done, wd.cached, wd.failed)
            sess.ctx.defcache.flush(sess.store)
        cache = _keep_under_limit(sess, runner, on_event)
        elapsed = time.perf_counter() - start
        # the plan's warnings, then the run's notes as stderr showed them
        warnings = said + [warning_object("run", n) for n in w.notes]
        if cache is not None:
            warnings.append(warning_object("cache_limit", cache.line()))
        if refresh_ids and no_cascade:
            for nid, ups in _kept_dependants(sess.graph, w, refresh_ids, order):
                text = (f"'{short_name(nid)}' was served from cache but depends on "
                        f"refreshed {', '.join(repr(short_name(u)) for u in ups)}")
                warnings.append(warning_object("no_cascade", text, nid))
                on_event(ev.Note(text, "warning"))
        warnings.extend(warning_object("remote", n) for n in runner.remote_notes())
        if w.done:
            on_event(ev.RunEnded(w.done, w.total, elapsed, bool(w.failed)))
        outputs = node_outputs(sess.graph, sess.settings, sess.store.prefix, w.states,
                               [t for t in targets if t not in w.skipped_fanins], load_values,
                               runner.small)
        if w.infra:
            from barca.core.errors import InfrastructureError
            raise InfrastructureError(
                f"barca could not write its own files: {w.infra[0]}"
                + (f" (+{len(w.infra) - 1} more)" if len(w.infra) > 1 else ""),
                "Check free disk space and the permissions of the project's .barca/ folder, "
                "then run again: finished steps are kept.")
        result = run_result(sess.ctx, runner, command, elapsed, outputs, warnings,
                            cache.to_json() if cache is not None else None)
        failures = result.failures
        if failures:
            more = f" (+{len(failures) - 1} more failed)" if len(failures) > 1 else ""
            raise StepFailed(  # the CLI contract's line: N downstream steps, 0 included
                f"step '{failures[0][0]}' failed: {failures[0][1]}{more}; "
                f"{result.skipped_downstream} downstream steps skipped",
                "Fix the cause and run the same command again: finished keys are cached.",
                result=result, node=failures[0][0], traceback=failures[0][2])
        if ask is not None:
            ask.keep(sess.ctx, runner, label, result)
        return result
    finally:
        sess.close()


def _keep_under_limit(sess: Session, runner: Runner, on_event: ev.EventCallback) -> Any:
    """After a run: note what it read and wrote; if it made ``.barca/`` grow past the cache
    size limit, evict down to it (one line on stderr). The report, or None."""
    produced, verified = runner.produced, runner.integrity.verified
    sess.store.note_reads(produced, verified.difference(produced))
    if not runner.w.done:
        return None  # nothing was written: the cache did not grow
    from barca.engine.current import currency
    from barca.store import cachelimit
    manual = {n for n, m in sess.graph.nodes.items() if m.freshness == "manual"}
    report = cachelimit.after_run(sess.store, sess.settings,
                                  lambda: currency(sess.graph, sess.settings,
                                                   verified.union(produced)),
                                  manual, runner.produced_bytes)
    if report is None or not report.evicted:
        return None
    on_event(ev.Note(report.line(), "info"))
    return report


def _kept_dependants(graph: Graph, w: Any, refreshed: list[NodeId], order: list[NodeId]
                     ) -> list[tuple[NodeId, list[NodeId]]]:
    """Under ``--no-cascade``: the dependants of the refreshed assets that were served from
    cache (a dependant that ran anyway, for its own reasons, is not named), each with the
    refreshed assets it depends on."""
    below = graph.downstream_cone(refreshed, set(order)) - set(refreshed)
    out = []
    for nid in [n for n in order if n in below]:
        ns = w.states.get(nid)
        if ns is not None and ns.keys is not None:
            t = ns.tally()
            if t.total and t.count("cached") == t.total:
                ups = graph.upstream_cone([nid])
                out.append((nid, [r for r in refreshed if r in ups]))
    return out


def get(target: str | list[str] | None = None, *files: str, refresh: str | list[str] | None = None,
        refresh_all: bool = False, no_cascade: bool = False,
        partition: str | dict[str, Any] | None = None, dry_run: bool = False,
        on_event: ev.EventCallback = ev.ignore, as_type: str | None = None,
        env: str | None = None, executor: str | None = None,
        settings: Settings | None = None, cascade: bool = True, **flags: Any) -> Any:
    """Bring ``target`` up to date and return its value (a dict of key -> value for a
    partitioned target); with ``dry_run=True``, the Plan instead. A stored table comes back
    in the type it was written, or in ``as_type`` (pandas, polars, lazy, pyarrow, duckdb).
    ``env``, ``executor`` (and any other setting) are the ``--env`` and ``--executor`` of this
    call alone. ``cascade=False`` is ``--no-cascade``; ``server=URL`` is ``--server``."""
    no_cascade = no_cascade or not cascade
    if flags.get("server") is not None:  # server=URL: run on that barca serve
        from barca.api.served import on_server
        return on_server("get", locals())
    if as_type is not None:
        from barca.store.frames import check_type
        check_type(as_type)
    if isinstance(target, str) and target.endswith(".py") and looks_like_file(target):
        files, target = (target, *files), None  # get("pipeline.py"): every asset of the file
    settings = settings_of(settings, env=env, executor=executor, **flags)
    settings.store_prefix  # noqa: B018 - not a plain folder name: a usage error, first
    if dry_run:
        return plan_run(target, *files, refresh=refresh, refresh_all=refresh_all,
                        no_cascade=no_cascade, partition=partition, settings=settings)
    result = materialize(target, *files, refresh=refresh, refresh_all=refresh_all,
                         no_cascade=no_cascade, partition=partition, on_event=on_event,
                         load_values=True, settings=settings)
    return result.value(as_type)


def run(task: str, *files: str, refresh: str | list[str] | None = None, refresh_all: bool = False,
        partition: str | dict[str, Any] | None = None, dry_run: bool = False,
        on_event: ev.EventCallback = ev.ignore, env: str | None = None,
        executor: str | None = None, settings: Settings | None = None, **flags: Any) -> Any:
    """Run a task (always) and its cone (cache-aware); its return value (``server=``: get)."""
    if flags.get("server") is not None:  # server=URL: run on that barca serve
        from barca.api.served import on_server
        return on_server("run", locals())
    settings = settings_of(settings, env=env, executor=executor, **flags)
    settings.store_prefix  # noqa: B018 - not a plain folder name: a usage error, first
    if dry_run:
        return plan_run(task, *files, command="run", refresh=refresh,
                        refresh_all=refresh_all, partition=partition, settings=settings)
    result = materialize(task, *files, command="run", refresh=refresh,
                         refresh_all=refresh_all, partition=partition, on_event=on_event,
                         load_values=True, settings=settings)
    return result.value()


# ---------------------------------------------------------------------------- predictions

def _predict(sess: Session, targets: list[NodeId], **kw: Any) -> Any:
    runner = Runner(sess.ctx, targets, execute=False, **kw)
    return runner.run()


def plan_run(target: str | list[str] | None = None, *files: str, command: str = "get",
             refresh: str | list[str] | None = None, refresh_all: bool = False,
             no_cascade: bool = False, partition: str | dict[str, Any] | None = None,
             settings: Settings | None = None, on_event: ev.EventCallback = ev.ignore,
             **flags: Any) -> Plan:
    """``--dry-run``: what a run would do. Runs nothing, writes nothing."""
    settings = settings_of(settings, **flags)
    _check_flags(target, refresh, no_cascade)
    sess = Session(files, write=False, settings=settings)
    try:
        targets = _targets(sess.graph, target, command)
        label = ",".join(short_name(t) for t in targets) if target else "all"
        order = walk_order(sess.ctx, targets)
        refresh_ids = resolve_refresh(sess.ctx, order, _names(refresh), label)
        selection = parse_partition(partition)
        if selection is not None:
            check_selection(sess.ctx, order, selection, label)
        w = _predict(sess, targets, refresh=refresh_ids, cascade=not no_cascade,
                     refresh_all=refresh_all, selection=selection)
        cmd = f"barca {command}" + (f" {','.join(_names(target))}" if target else "")
        from barca.present.notices import Capacity, announce_warnings, undeclared_env
        from barca.present.plans import Plan
        cap = Capacity(settings)
        cap.announce(sess.graph, w.order, on_event)
        said = announce_warnings(sess.graph, w.order, on_event)
        weights, env = cap.weights(sess.graph, w.order), undeclared_env(said)
        return Plan(cmd, label, tuple(plan_row(sess.ctx, w.states[n], weights.get(n),
                                               env.get(n)) for n in w.order),
                    cap.capacity, tuple(said))
    finally:
        sess.close()


def stats(*args: Any, **kwargs: Any) -> Any:
    """``barca stats``: barca.queries.stats.stats, imported when asked (not at every start)."""
    from barca.queries.stats import stats as report
    return report(*args, **kwargs)


def history(*args: Any, **kwargs: Any) -> Any:
    """``barca history``: barca.queries.runlog.history, imported when asked (not at every
    start)."""
    from barca.queries.runlog import history as runs
    return runs(*args, **kwargs)


def looks_like_file(arg: str) -> bool:
    """A ``.py`` name, or an existing file or folder (``Path.is_dir() or Path.is_file()``, with
    one ``stat``: a kernel asks this at every ``%barca get``)."""
    if arg.endswith(".py"):
        return True
    import errno
    import stat
    try:  # the path as pathlib reads it: "" is ".", a trailing "/" is dropped
        mode = os.stat(arg.rstrip("/") or ("/" if arg.startswith("/") else ".")).st_mode
    except ValueError:  # an embedded NUL: no such file
        return False
    except OSError as exc:  # as pathlib: only "no such file" is an answer
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


def status(target: str | None = None, *files: str, settings: Settings | None = None,
           **flags: Any) -> StatusReport:
    """One row per node: state, why, last run, shape. Read-only. ``target`` may be omitted:
    ``barca.status("pipeline.py")`` reads the file's every node."""
    settings = settings_of(settings, **flags)
    if target is not None and target.strip() and looks_like_file(target):
        files, target = (target, *files), None
    _check_flags(target, None, False)
    sess = Session(files, write=False, settings=settings)
    try:
        if target:
            targets = [sess.graph.resolve(n, "Asset", "status") for n in _names(target)]
        else:
            targets = list(sess.graph.order)
        w = _predict(sess, targets)
        order = [n for n in sess.graph.order if n in w.states]
        from barca.present.statusview import mark_upstream
        return StatusReport(mark_upstream(tuple(status_row(sess.ctx, w.states[n])
                                                for n in order)),
                            tuple(_names(target)), sess.graph.root_dir)
    finally:
        sess.close()


def plan(*args: Any, **kwargs: Any) -> PhasePlan:
    """``barca plan``: barca.api.phases.plan (the phases, each step's action, the streams of
    steps over the pool, the warnings), imported when asked (not at every start)."""
    from barca.api.phases import plan as phases
    return phases(*args, **kwargs)


def sql_result(query: str, *files: str, limit: int | None = 100,
               settings: Settings | None = None, **flags: Any) -> SqlResult:
    """``barca sql``: the query's columns and rows (at most ``limit``; None for all)."""
    from barca.present.results import SqlResult
    from barca.queries.sql import query as run_query
    sess = Session(files, write=False, settings=settings_of(settings, **flags))
    try:
        columns, rows, total = run_query(sess.ctx, query, limit)
        return SqlResult(query, tuple(columns), tuple(tuple(r) for r in rows), total)
    finally:
        sess.close()


def sql_views(*files: str, names: set[str] | None = None, settings: Settings | None = None,
              **flags: Any) -> dict[str, Any]:
    """Which result each ``barca sql`` view of ``names`` (None: all) reads: what ``barca serve``
    answers on ``GET /sql/views`` (barca.queries.sqlviews)."""
    from barca.queries.sqlviews import views
    sess = Session(files, write=False, settings=settings_of(settings, **flags))
    try:
        return views(sess.ctx, names)
    finally:
        sess.close()


def sql(query: str, *files: str, settings: Settings | None = None, **flags: Any) -> Any:
    """Query cached results with DuckDB; a pandas DataFrame of every row."""
    return sql_result(query, *files, limit=None, settings=settings, **flags).to_pandas()


def gc(*files: str, max_size: str | None = None, dry_run: bool = False,
       settings: Settings | None = None, **flags: Any) -> CacheReport:
    """``barca gc``: evict now, down to 80% of the cache size limit (``max_size``: a one-off
    budget; ``"off"``: every superseded result and nothing else), from every environment --
    or, with an environment named for this command (``env="dev"``, ``--env``, ``BARCA_ENV``;
    not barca.toml's standing ``default_env``), from its store alone. A CacheReport.
    ``flags``: settings of this call, on top of ``settings``."""
    from barca.engine.current import currency
    from barca.store import cachelimit
    settings = settings_of(settings, **flags)
    budget = cachelimit.limit(settings, max_size)  # an invalid size: exit 2 before anything
    graph = load_graph(_files(files), settings)
    manual = {n for n, m in graph.nodes.items() if m.freshness == "manual"}
    cur = currency(graph, settings)
    gone = _gone(graph)
    only = settings.env if settings.where("env") in ("--env", "BARCA_ENV") else None
    if budget is None:
        return cachelimit.evict(settings.root, None, 0, cur, manual, dry_run=dry_run,
                                superseded_only=True, gone=gone, only=only)
    return cachelimit.evict(settings.root, budget, int(budget * cachelimit.GC_TARGET), cur,
                            manual, dry_run=dry_run, gone=gone, only=only)


def _gone(graph: Graph) -> Callable[[str], bool]:
    """Whether a node id the store names is no longer in the pipeline: its file was read and
    does not define it, or its file is not there. A notebook's node, or one of a file this
    command did not read, is not known to be gone."""
    from barca.model.notebook import is_notebook_id

    def gone(node: str) -> bool:
        if node in graph.nodes or ":" not in node or is_notebook_id(node):
            return False
        file = node.rsplit(":", 1)[0]
        return file in graph.files or not (graph.root / file).exists()
    return gone


def graph(*files: str, settings: Settings | None = None, **flags: Any) -> DagPicture:
    """The DAG picture: every node laid out by dependency and coloured by its status state
    (SVG in its mime bundle). Read-only."""
    from barca.queries.picture import DagPicture
    return DagPicture.from_status(status(None, *files, settings=settings, **flags))
