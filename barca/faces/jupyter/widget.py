"""``barca.StatusWidget``: the status table, the DAG picture, and Get / Refresh / Dry run, in
standard ipywidgets.

The engine does the work (``barca.api``) and returns result objects; this module only renders
them. Actions run on a background thread so the kernel never blocks; that thread (and the
polling thread) only ever set widget trait values, which ipywidgets syncs to the front end."""
from __future__ import annotations

import html
import threading
import traceback
import weakref
from typing import Any

import ipywidgets as widgets

from barca.core import events as ev
from barca.core.errors import BarcaError, StepFailed
from barca.core.render import COLOURS
from barca.core.types import ids_named, short_name

POLL_SECONDS = 1.0
PREVIEW_CHARS = 2000   # a value longer than this when printed is shown cut, with a note
# widget-only layout: the HTML widget's own line height would double the table's row height;
# the WHY column is cut to keep the table within the notebook's width (full text on hover);
# the selected node is outlined in the DAG
_CSS = ("<style>.barca-status-widget .barca-table td,.barca-status-widget .barca-table th"
        "{line-height:1.5}.barca-status-widget .barca-table th{white-space:nowrap}"
        ".barca-status-widget .barca-badge{line-height:1.5}"
        ".barca-status-widget .barca-table td.barca-why{max-width:22em;"
        "overflow:hidden;text-overflow:ellipsis;white-space:nowrap}"
        # the widget keeps its table within its width: other cells wrap, between words only
        ".barca-status-widget .barca-table td.barca-cell{white-space:normal;max-width:16em;"
        "overflow-wrap:normal;word-break:normal}"
        ".barca-status-widget g.barca-node{cursor:pointer}"
        ".barca-status-widget g.barca-node[data-selected] rect{stroke:var(--jp-brand-color1,"
        "#1976d2);stroke-width:4px}.barca-status-widget pre.barca-value{font-size:12px;"
        "max-height:20em;overflow:auto;margin:4px 0;text-align:left}</style>")
# a click on a node of the DAG selects it in the node menu: the menu is a standard ipywidgets
# Dropdown, which listens to its <select>'s change event (no extension, no custom JavaScript)
_SELECT_ON_CLICK = ("var w=this.closest('.barca-status-widget'),s=w&&w.querySelector('select');"
                    "if(s){{s.selectedIndex={index};s.dispatchEvent(new Event('change',"
                    "{{bubbles:true}}))}}")


def _poll(ref: weakref.ref[StatusWidget], stop: threading.Event, interval: float) -> None:
    """The auto-refresh loop. Holds the widget only through a weak reference, so it ends when
    the widget is closed or garbage collected."""
    while not stop.wait(interval):
        widget = ref()
        if widget is None:
            return
        try:
            if widget._stamp() != widget._seen:
                widget.refresh_view()
                widget._update_saved()
        except Exception:  # never let the poller die on a transient error (a file mid-write)
            pass
        del widget


def _error_html(title: str, text: str, detail: str = "") -> str:
    red = COLOURS["failed"]
    out = (f'<div class="barca-error" style="color:{red};font-family:monospace;font-size:12px">'
           f"<b>{html.escape(title)}</b>: {html.escape(text)}</div>")
    if detail:
        out += (f'<pre style="font-size:11px;max-height:16em;overflow:auto">'
                f"{html.escape(detail)}</pre>")
    return out


def _value_html(name: str, files: tuple[str, ...], command: str, value: Any) -> str:
    """The value a Get returned (cut when long), and how to have it in Python."""
    text = _preview(value)
    args = ", ".join(repr(a) for a in (name, *files))
    magic = " ".join((command, name, *files))
    return (f'<div class="barca-value-box" style="font-family:monospace;font-size:12px;'
            f'margin-top:6px;text-align:left"><b>value of {html.escape(name)}</b>'
            f'<pre class="barca-value">{html.escape(text)}</pre>'
            f"In Python: <code>value = barca.{'get' if command == 'get' else 'run'}"
            f"({html.escape(args)})</code> or <code>value = %barca {html.escape(magic)}</code>"
            "</div>")


def _preview(value: Any) -> str:
    """A readable excerpt: a table's first rows, a value's pretty print, cut at
    ``PREVIEW_CHARS``."""
    import pprint
    if hasattr(value, "head") and hasattr(value, "shape"):  # a DataFrame and its kin
        text = f"{type(value).__name__} {value.shape}\n{value.head(10)!r}"
    else:
        text = pprint.pformat(value, width=100, compact=True, sort_dicts=False)
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS] + f"\n… ({len(text) - PREVIEW_CHARS} more characters)"
    return text


LOG_LINES = 10   # the selected node's last lines under the widget


class StatusWidget(widgets.VBox):
    """A live status view of a project: table, DAG, node selector and actions.

    ``StatusWidget("pipeline.py")``; ``StatusWidget("report", "pipeline.py")`` preselects
    ``report``. Polls the store's stamp (``barca.queries.runlog.stamp``) about once a second and
    re-renders when a run from anywhere, or an edit of the files, changes it; ``close()`` stops
    the polling."""

    def __init__(self, *files: str, poll_interval: float = POLL_SECONDS, env: str | None = None,
                 settings: Any = None, **kw: Any) -> None:
        from barca.core.settings import settings_of
        from barca.faces.commands import split_target

        # the settings it was opened with (``--env``, ...), used by every call it makes
        self.settings = settings_of(settings, env=env)

        target, rest = split_target([str(f) for f in files if f is not None])
        self.files = tuple(rest)
        self.report: Any = None          # the last StatusReport
        self.dag: Any = None             # the last DagPicture
        self.last_result: Any = None     # the last RunResult or Plan
        self.last_error: BaseException | None = None
        self._live: dict[str, str] = {}  # node -> running | failed, drawn over the status
        self._pending: dict[str, int] = {}
        self._lock = threading.RLock()
        self._doing = ""
        self._busy = False
        self._worker: threading.Thread | None = None
        self._seen: Any = None           # the stamp the drawn status was read at
        self._handles: list[Any] = []    # where it is displayed (see _ipython_display_)
        self._cached = 0                 # steps of the running action served from cache

        self.table = widgets.HTML(layout=widgets.Layout(overflow="auto"))
        self.picture = widgets.HTML(layout=widgets.Layout(overflow="auto"))
        self.selector = widgets.Dropdown(description="node", options=[],
                                         layout=widgets.Layout(width="auto"))
        self.get_button = widgets.Button(description="Get", button_style="success",
                                         tooltip="bring the node up to date",
                                         layout=widgets.Layout(width="96px"))
        self.refresh_button = widgets.Button(description="Refresh", button_style="warning",
                                             tooltip="recompute the node (--refresh) and below",
                                             layout=widgets.Layout(width="96px"))
        self.dry_run_button = widgets.Button(description="Dry run",
                                             tooltip="say what Get would run; run nothing",
                                             layout=widgets.Layout(width="96px"))
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="",
                                            layout=widgets.Layout(width="240px",
                                                                  visibility="hidden"))
        self.progress_label = widgets.HTML()   # what the bar is doing: "Get report: 3/8 steps"
        self.message = widgets.HTML()
        self.logs = widgets.HTML()             # the selected node's last lines (barca logs)
        self.last_value: Any = None            # the value the last Get returned
        self.get_button.on_click(lambda _b: self._start("get"))
        self.refresh_button.on_click(lambda _b: self._start("refresh"))
        self.dry_run_button.on_click(lambda _b: self._start("dry_run"))
        self.selector.observe(lambda _change: self._draw(), names="value")
        bar = widgets.HBox([self.selector, self.get_button, self.refresh_button,
                            self.dry_run_button, self.progress, self.progress_label],
                           layout=widgets.Layout(align_items="center", flex_flow="row wrap"))
        super().__init__(children=[self.table, self.picture, bar, self.message, self.logs],
                         **kw)
        self.add_class("barca-status-widget")
        self.refresh_view()
        if target is not None:
            self.select(target)

        self._stop = threading.Event()
        self._poller = threading.Thread(
            target=_poll, args=(weakref.ref(self), self._stop, poll_interval),
            name="barca-status-poll", daemon=True)
        self._poller.start()

    # ------------------------------------------------------------------ rendering

    def refresh_view(self) -> None:
        """Read the status again and redraw the table, the picture and the selector."""
        from barca import api

        with self._lock:
            seen = self._stamp()
            try:
                report = api.status(None, *self.files, settings=self.settings)
            except BarcaError as exc:
                self._seen = seen
                self.message.value = _error_html(type(exc).__name__, exc.message,
                                                 exc.remediation)
                return
            self.report = report
            self._seen = seen
            self._draw()
            ids = [(r.name if sum(x.name == r.name for x in report.rows) == 1 else r.id, r.id)
                   for r in report.rows]
            if list(self.selector.options) != ids:
                keep = self.selector.value
                self.selector.options = ids
                values = [v for _, v in ids]
                if keep in values:
                    self.selector.value = keep
                elif values:
                    self.selector.value = values[-1]
                self._draw()  # the picture's click targets follow the menu

    def _stamp(self) -> Any:
        """What the engine says the status depends on, now (compared with ``_seen``)."""
        from barca.queries.runlog import stamp
        seen = stamp(*self.files, settings=self.settings)
        if not self.files:  # the notebook's own assets: the cells are part of what it shows
            from barca.model import notebook
            if notebook.interactive():
                return seen, notebook.cells_stamp()
        return seen

    def _draw(self) -> None:
        from barca.core.render import html_table
        from barca.queries.picture import DagPicture

        with self._lock:
            if self.report is None:
                return
            self.dag = DagPicture.from_status(self.report, states=self._live)
            headers, rows, col, summary, why = self.report._html_table()
            for row, r in zip(rows, self.report.rows, strict=False):
                live = self._live.get(r.id)
                if live is not None and col is not None:  # as the DAG draws it
                    row[col] = live
            summary = self.summary_line()  # badge, picture and count: one state
            self.table.value = _CSS + html_table(headers, rows, col, summary, why_col=why)
            self.picture.value = self._clickable(self.dag.svg())
            self._draw_logs()

    def states(self) -> dict[str, str]:
        """Each node's state as the widget draws it: the status, or what a run of the widget
        is doing to it (running, failed)."""
        report = self.report
        return {} if report is None else {r.id: self._live.get(r.id, r.state)
                                          for r in report.rows}

    def summary_line(self, short: bool = False) -> str:
        """The drawn states counted (never a count the badges contradict), as ``status``
        writes its line (``1 failed, 3 cached, 0 stale, …``); ``short``: the states present
        only (``1 failed, 3 cached``)."""
        from barca.present.results import SUMMARY_ORDER
        counts: dict[str, int] = {}
        for state in self.states().values():
            counts[state] = counts.get(state, 0) + 1
        words = dict(SUMMARY_ORDER, running="running", failed="failed")
        order = ["running", "failed", *(k for k, _ in SUMMARY_ORDER)]
        always = () if short else {k for k, _ in SUMMARY_ORDER}
        return ", ".join(f"{counts.get(k, 0)} {words[k]}" for k in order
                         if counts.get(k) or k in always) or "no nodes"

    def _repr_mimebundle_(self, **kw: Any) -> Any:
        """The widget, and for a page that cannot draw it (GitHub, nbviewer, a reload without
        the widgets' state) the last state drawn: ``barca status: 3 cached, 1 failed`` and
        the table."""
        data = super()._repr_mimebundle_(**kw)
        if isinstance(data, dict):
            data["text/plain"] = f"barca status: {self.summary_line(short=True)}"
            data["text/html"] = self.table.value
        return data

    def _ipython_display_(self) -> None:
        """Shown under a display id, so the saved output follows the widget's last state."""
        from IPython.display import display
        self._handles.append(display(self._repr_mimebundle_(), raw=True, display_id=True))

    def _update_saved(self) -> None:
        """The displays' fallbacks take the state drawn now (the view is the same model)."""
        import contextlib
        for handle in self._handles:
            # a kernel gone, a closed comm: the live view is what matters
            with contextlib.suppress(Exception):
                handle.update(self._repr_mimebundle_(), raw=True)

    def _draw_logs(self) -> None:
        """The selected node's last lines, as `barca logs --step NODE` prints them."""
        from barca.queries.runlog import last_lines
        node = self.selector.value
        if not node:
            self.logs.value = ""
            return
        try:
            log = last_lines(node, LOG_LINES, settings=self.settings)
        except BarcaError:
            self.logs.value = ""
            return
        if not log.lines:
            self.logs.value = ""
            return
        text = html.escape(log.text_lines())
        self.logs.value = (f'<div class="barca-logs"><b>{html.escape(node)}</b>: last lines of '
                           f'run {html.escape(log.run_id)} (<code>%barca logs {log.run_id} '
                           f'--step {html.escape(node)}</code> for all)<pre style="margin:0;'
                           f'white-space:pre-wrap;max-height:12em;overflow:auto">{text}</pre>'
                           '</div>')

    def _clickable(self, svg: str) -> str:
        """Each node of the picture selects itself in the menu when clicked; the selected one
        is outlined."""
        import re
        index = {v: i for i, (_, v) in enumerate(self.selector.options)}
        chosen = self.selector.value

        def node(m: re.Match[str]) -> str:
            nid = html.unescape(m.group(1))
            if nid not in index:
                return m.group(0)
            click = html.escape(_SELECT_ON_CLICK.format(index=index[nid]), quote=True)
            selected = " data-selected=\"true\"" if nid == chosen else ""
            return f'{m.group(0)}{selected} onclick="{click}"'
        return re.sub(r'<g class="barca-node" data-node="([^"]*)"', node, svg)

    def select(self, node: str) -> str:
        """Select a node by id (``pipeline.py:report``) or name (``report``); its id."""
        values = [v for _, v in self.selector.options]
        match = ids_named(node, values)
        if not match:
            raise ValueError(f"no node {node!r} in this widget; nodes: {', '.join(values)}")
        self.selector.value = match[0]
        return match[0]

    # ------------------------------------------------------------------ actions

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def polling(self) -> bool:
        return self._poller.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the running action (if any) to finish; True when none is running."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return not self._busy

    def _start(self, action: str) -> None:
        node = self.selector.value
        if not node:
            self.message.value = _error_html("barca", "select a node first")
            return
        with self._lock:
            if self._busy:
                self.message.value = _error_html("barca", "a run is in progress; wait for it")
                return
            self._busy = True
        self._set_buttons(False)
        self._worker = threading.Thread(target=self._run, args=(action, node),
                                        name=f"barca-widget-{action}", daemon=True)
        self._worker.start()

    def _set_buttons(self, enabled: bool) -> None:
        for b in (self.get_button, self.refresh_button, self.dry_run_button):
            b.disabled = not enabled

    def _run(self, action: str, node: str) -> None:
        """The background thread: call the engine, update widget values only."""
        from barca import api

        name = short_name(node)
        try:
            kind = next((r.kind for r in self.report.rows if r.id == node), "asset")
            command = "run" if kind == "task" else "get"
            refresh = node if action == "refresh" else None
            self._live = {k: v for k, v in self._live.items() if v != "failed"}
            self.last_error = None
            plan = api.plan_run(node, *self.files, command=command, refresh=refresh,
                                settings=self.settings)
            if action == "dry_run":
                self.last_result = plan
                self.message.value = _CSS + plan._repr_html_()
                return
            self._pending = {r.step: r.will_run for r in plan.rows if r.will_run}
            self._live = {n: "running" for n in self._pending}
            total = max(1, plan.summary()["will_run"])
            self._doing = f"{command.capitalize()} {name}{' --refresh' if refresh else ''}"
            self.progress.bar_style = "info"
            self.progress.max, self.progress.value = total, 0
            self.progress.description = command.capitalize()
            self.progress.layout.visibility = "visible"
            self._label(0, total)
            self.message.value = (f'<span style="font-family:monospace;font-size:12px">'
                                  f"running {html.escape(command)} {html.escape(name)}"
                                  f"{' --refresh' if refresh else ''}…</span>")
            self._draw()
            result = api.materialize(node, *self.files, command=command, refresh=refresh,
                                     on_event=self._on_event, load_values=True,
                                     settings=self.settings)
            self.last_result = result
            ran = result.steps_executed
            self.progress.max = self.progress.value = max(1, ran)  # a finished run is full
            self.progress.bar_style = "success"
            self._label(ran, ran, f"{ran} ran, {result.steps_total - ran} cached")
            self.last_value = result.value()
            self.message.value = (_CSS + result._repr_html_()
                                  + _value_html(name, self.files, command, self.last_value))
        except StepFailed as exc:
            self.last_error = exc
            self.last_result = exc.result
            self.progress.bar_style = "danger"
            self._label(self.progress.value, self.progress.max, "failed")
            self.message.value = _error_html("step failed", exc.message,
                                             str(exc.extra.get("traceback") or ""))
        except BarcaError as exc:
            self.last_error = exc
            self.progress.bar_style = "danger"
            self.message.value = _error_html(type(exc).__name__, exc.message, exc.remediation)
        except Exception as exc:  # a bug: show it rather than lose it in a thread
            self.last_error = exc
            self.progress.bar_style = "danger"
            self.message.value = _error_html(type(exc).__name__, str(exc),
                                             traceback.format_exc())
        finally:
            self._live = {k: v for k, v in self._live.items() if v == "failed"}
            self._pending = {}
            try:
                self.refresh_view()
                self._update_saved()
            finally:
                self._busy = False
                self._set_buttons(True)

    def _label(self, done: int, total: int, note: str = "") -> None:
        """``Get report: 3/8 steps (37%)``: steps run of the steps to run."""
        pct = 100 * done // total if total else 100
        text = f"{self._doing}: {done}/{total} steps ({pct}%)" + (f" | {note}" if note else "")
        self.progress_label.value = (f'<span class="barca-progress-label" style="font-family:'
                                     f'monospace;font-size:12px">{html.escape(text)}</span>')

    def _on_event(self, e: ev.Event) -> None:
        if isinstance(e, ev.StepsStarted):  # the steps to run, as the walk knows them now
            self._cached = e.cached
            self.progress.max = max(1, e.total - e.cached)
        elif isinstance(e, ev.StepCompleted):
            self.progress.max = max(self.progress.max, e.total - self._cached)
            self.progress.value = min(e.done, self.progress.max)
            self._label(self.progress.value, self.progress.max, e.step)
            self._step_done(e.step.split("[", 1)[0], None)
        elif isinstance(e, ev.StepFailedEvent):
            self._step_done(e.step.split("[", 1)[0], "failed")

    def _step_done(self, node: str, state: str | None) -> None:
        with self._lock:
            left = self._pending.get(node, 0) - 1
            self._pending[node] = left
            if state is not None:
                self._live = {**self._live, node: state}
            elif left <= 0 and self._live.get(node) == "running":
                self._live = {k: v for k, v in self._live.items() if k != node}
            else:
                return
            self.refresh_view()  # the node finished (or failed): redraw it now

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Stop polling and close the widget and its parts."""
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        for w in (self.table, self.picture, self.selector, self.get_button,
                  self.refresh_button, self.dry_run_button, self.progress,
                  self.progress_label, self.message,
                  *self.children):
            w.close()
        super().close()  # ipywidgets' __del__ calls close() too
