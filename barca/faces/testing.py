"""Testing a barca project from pytest: the ``barca_project`` fixture's object and
``assert_steps``.

A ``BarcaProject`` is a folder under the test's ``tmp_path``; its ``get``/``run``/``status``
call ``barca.api`` with the folder as working directory (for the call alone) and return the
engine's result objects. ``get`` and ``run`` wrap the ``RunResult`` in a ``StepsResult``, which
also says, step by step (partition keys included), what ran and what was served from cache."""
from __future__ import annotations

import contextlib
import os
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

# options of a get/run that shape the run itself; the rest are settings (env=, executor=...)
_RUN_OPTIONS = ("refresh", "refresh_all", "no_cascade", "partition", "on_event")


class StepsResult:
    """A get's or run's ``RunResult`` (every attribute of it reads through), plus ``ran`` and
    ``cached``: the step ids (``pipeline.py:prices[ticker=AAPL]``) in each, sorted, and
    ``value``: what ``barca.get`` would have returned."""
    __slots__ = ("result", "ran", "cached", "_why")

    def __init__(self, result: Any, ran: tuple[str, ...], cached: tuple[str, ...],
                 why: dict[str, tuple[str, str, str]]) -> None:
        self.result = result
        self.ran = ran
        self.cached = cached
        self._why = why  # step id -> (action, reason, detail)

    @property
    def value(self) -> Any:
        return self.result.value()

    def actions(self) -> dict[str, tuple[str, str, str]]:
        """Every step of the run: id -> (action, reason, detail)."""
        return dict(self._why)

    def __getattr__(self, name: str) -> Any:
        if name == "result":  # unset (a copy being built): no endless lookup through itself
            raise AttributeError(name)
        return getattr(self.result, name)

    def __repr__(self) -> str:
        return f"StepsResult(ran={list(self.ran)}, cached={list(self.cached)})"


def _node_of(step: str) -> str:
    return step.split("[", 1)[0]


def _steps_result(result: Any, events: list[Any], plan: Any) -> StepsResult:
    """Per-step actions: the steps that ran are the engine's StepCompleted events; the cached
    keys of a partitioned node are its steps in a plan taken after the run (the run reports
    them as a count), minus the ones that ran."""
    from barca.core import events as ev
    summaries = {s.id: s for s in result.steps}
    why: dict[str, tuple[str, str, str]] = {}
    for e in events:
        if isinstance(e, ev.StepCompleted):
            s = summaries.get(_node_of(e.step))
            why[e.step] = ("ran", s.reason if s else "", s.detail if s else "")
    for s in result.steps:
        if s.partitions is None and s.action in ("cached", "skipped"):
            why[s.id] = (s.action, s.reason, s.detail)
    if plan is not None:
        keyed: dict[str, list[tuple[str, str]]] = {}
        for phase in plan.phases:
            for p in phase:
                keyed.setdefault(p["node"], []).append((p["id"], p["reason"]))
        for s in result.steps:
            n_cached = (s.partitions or {}).get("cached", 0)
            if not n_cached:
                continue
            rest = [(i, r) for i, r in keyed.get(s.id, ()) if i not in why]
            if len(rest) == n_cached:
                why.update((i, ("cached", r, "")) for i, r in rest)
            else:  # the keys moved since the run (a sensor's keys): the node, not its keys
                why[s.id] = ("cached", "", f"{n_cached} of its keys")
    return StepsResult(result, tuple(sorted(i for i, w in why.items() if w[0] == "ran")),
                       tuple(sorted(i for i, w in why.items() if w[0] == "cached")), why)


class BarcaProject:
    """A barca project in a temporary folder. ``get``/``run``/``status`` take what
    ``barca.get``/``barca.run``/``barca.status`` take."""

    def __init__(self, root: Path, timeout: float | None = None) -> None:
        self.root = Path(root)
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"BarcaProject({str(self.root)!r})"

    def path(self, relative: str | os.PathLike[str]) -> Path:
        return self.root / relative

    def write(self, path: str | os.PathLike[str], text: str) -> Path:
        """Write a file of the project (its text dedented, folders made); its path."""
        p = self.root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
        return p

    def read(self, path: str | os.PathLike[str]) -> str:
        return (self.root / path).read_text()

    def edit(self, path: str | os.PathLike[str], old: str, new: str) -> Path:
        """Replace ``old`` (which must be there) by ``new`` in a file of the project."""
        text = self.read(path)
        if old not in text:
            raise AssertionError(f"{old!r} is not in {path}")
        return self.write(path, text.replace(old, new, 1))

    @contextlib.contextmanager
    def _inside(self) -> Iterator[None]:
        """The project root as working directory, for one call: barca finds the project (and
        resolves relative paths) from it; the test's own directory is restored after."""
        before = os.getcwd()
        os.chdir(self.root)
        try:
            yield
        finally:
            os.chdir(before)

    def _materialize(self, command: str, target: Any, files: tuple[str, ...],
                     options: dict[str, Any]) -> StepsResult:
        from barca import api
        events: list[Any] = []
        theirs = options.pop("on_event", None)

        def on_event(e: Any) -> None:
            events.append(e)
            if theirs is not None:
                theirs(e)
        settings = {k: v for k, v in options.items() if k not in _RUN_OPTIONS}
        with self._inside():
            result = api.materialize(target, *files, command=command, load_values=True,
                                     on_event=on_event, **options)
            keyed = any((s.partitions or {}).get("cached") for s in result.steps)
            plan = api.plan(*files, **settings) if keyed else None
        return _steps_result(result, events, plan)

    def get(self, target: str | list[str] | None = None, *files: str,
            **options: Any) -> StepsResult:
        """``barca get``: the result, with ``ran``, ``cached`` and ``value``. A failed step
        raises ``barca.StepFailed`` (its ``result`` is the run's RunResult)."""
        return self._materialize("get", target, files, options)

    def run(self, task: str, *files: str, **options: Any) -> StepsResult:
        """``barca run``: a task (always) and its cone (cache-aware)."""
        return self._materialize("run", task, files, options)

    def status(self, target: str | None = None, *files: str, **options: Any) -> Any:
        """``barca status``: the StatusReport (read-only)."""
        from barca import api
        with self._inside():
            return api.status(target, *files, **options)

    def plan(self, target: str | None = None, *files: str, **options: Any) -> Any:
        """``barca get --dry-run``: the Plan; nothing runs."""
        from barca import api
        with self._inside():
            return api.plan_run(target, *files, **options)

    def run_notebook(self, path: str | os.PathLike[str],
                     parameters: Mapping[str, Any] | None = None,
                     timeout: float | None = None) -> Any:
        """Execute a notebook of the project, in place (its cells see this project and its
        ``.barca/``), in a fresh kernel; the executed notebook (nbformat). A failing cell
        raises an AssertionError naming it, with the kernel's traceback."""
        from barca.faces.nbrun import run_notebook
        nb = self.root / path
        return run_notebook(nb, cwd=nb.parent, parameters=dict(parameters or {}),
                            timeout=timeout if timeout is not None else self.timeout,
                            name=str(path))


def new_project(into: Path, source: str | os.PathLike[str] | Mapping[str, str],
                timeout: float | None = None) -> BarcaProject:
    """A project in a new folder under ``into``: a copy of the folder ``source`` (without its
    ``.barca/``), or the files of a ``{relative path: text}`` dict."""
    from barca.faces.nbrun import copy_project
    if isinstance(source, Mapping):
        base = "project"
    else:
        source = Path(source)
        if not source.is_dir():
            raise FileNotFoundError(f"barca_project: {source} is not a folder")
        base = source.resolve().name
    root, n = into / base, 1
    while root.exists():
        n += 1
        root = into / f"{base}-{n}"
    if isinstance(source, Mapping):
        root.mkdir(parents=True)
        project = BarcaProject(root, timeout)
        for rel, text in source.items():
            project.write(rel, text)
        return project
    copy_project(source, root)
    return BarcaProject(root, timeout)


# ---------------------------------------------------------------------------- assert_steps

def _split(name: str) -> tuple[str, str | None]:
    node, sep, key = name.partition("[")
    return node.strip(), key.rstrip("]").strip() if sep else None


def _matches(name: str, step: str) -> bool:
    """``prices``, ``pipeline.py:prices``, ``prices[ticker=AAPL]`` all name
    ``pipeline.py:prices[ticker=AAPL]``; a name without a key names every key."""
    want_node, want_key = _split(name)
    node, key = _split(step)
    same = node == want_node or node.rsplit(":", 1)[-1] == want_node \
        or node.endswith("/" + want_node)
    return same and (want_key is None or want_key == key)


def _actions(result: Any) -> dict[str, tuple[str, str, str]]:
    if isinstance(result, StepsResult):
        return result.actions()
    # a bare RunResult (a StepFailed's .result): one entry per node
    return {s.id: (s.action, s.reason, s.detail) for s in result.steps}


def assert_steps(result: Any, ran: Iterable[str] | None = None,
                 cached: Iterable[str] | None = None) -> None:
    """Check which steps ran and which were cached. Each list is exact: the steps it names
    (a bare function name, a node id, either with a ``[key]``) must have that action, and no
    other step may have it. The failure message gives each differing step's action and why."""
    __tracebackhide__ = True  # pytest shows the test's line, not this function's body
    actions = _actions(result)
    problems: list[str] = []

    def why(step: str) -> str:
        action, reason, detail = actions[step]
        text = detail or reason  # the detail is the WHY cell; it starts with the reason
        return f"{step}: {action}" + (f" (why: {text})" if text else "")

    for want, names in (("ran", ran), ("cached", cached)):
        if names is None:
            continue
        names = [names] if isinstance(names, str) else list(names)
        for name in names:
            hits = [s for s in actions if _matches(name, s)]
            if not hits:
                problems.append(f"expected {want}: {name}, but no step of the run is named so")
            problems += [f"expected {want}, was {why(s)}" for s in hits
                         if actions[s][0] != want]
        problems += [f"not expected to be {want}: {why(s)}" for s, a in actions.items()
                     if a[0] == want and not any(_matches(n, s) for n in names)]
    if problems:
        listing = "\n".join(f"  {why(s)}" for s in sorted(actions))
        raise AssertionError("the run's steps differ from the test's:\n"
                             + "\n".join(f"- {p}" for p in problems)
                             + f"\nevery step of the run:\n{listing}")
