"""The ``barca`` command: parse, call the engine through ``faces.commands``, render the result.

Heavy libraries are never imported here; a fully cached ``barca get`` touches only the
standard library and barca's core."""
from __future__ import annotations

import os
import sys

from barca.core import jsontext  # (json's C half: no re, #31 item 2)
from barca.core.errors import BarcaError, Cancelled, InfrastructureError, StepFailed

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any, TextIO


def printable(text: str) -> str:
    """barca.core.render.printable, imported when a person's text is printed (a cached run
    printing JSON never loads the table module)."""
    from barca.core.render import printable
    return printable(text)


def _mode(settings: Any) -> str:
    """The ``output`` setting (``--json``/``--pretty``, then ``BARCA_OUTPUT``), else the human
    form for a terminal, JSON for a pipe; any other value is a usage error."""
    mode = str(settings.output or "").lower()
    if mode in ("json", "pretty"):
        return mode
    if mode:
        from barca.core.errors import UsageError
        raise UsageError(f"BARCA_OUTPUT={settings.output!r} is not an output mode.",
                         "Set BARCA_OUTPUT to json or pretty, or unset it.")
    return "pretty" if sys.stdout.isatty() else "json"


def _safe_mode(mode: str | None) -> str:
    """The mode to report an error in, even when the settings could not be resolved (an
    invalid barca.toml) or ``BARCA_OUTPUT`` itself is the error."""
    if mode is not None:
        return mode
    from barca.core.settings import value
    env = str(value("output") or "").lower()  # its one source besides the flags: no file read
    return env if env in ("json", "pretty") else ("pretty" if sys.stdout.isatty() else "json")


def _json_doc(res: Any, fields: str | None = None) -> str:
    """A run's JSON document: one compact line on a pipe (``tail -1 | jq`` and grep work), the
    indented form in a terminal; with ``fields`` (``--fields``, checked), only those keys of
    each step."""
    if fields is not None:
        from barca.faces.outcome import step_fields_doc
        doc = step_fields_doc(res, fields)
        return (jsontext.dumps(doc, indent=2, default=str, ensure_ascii=False)
                if sys.stdout.isatty() else
                jsontext.dumps(doc, separators=(",", ":"), default=str, ensure_ascii=False))
    if sys.stdout.isatty():
        return res.json_text()
    if hasattr(res, "json_line"):  # (a run's document written step by step: present.compact)
        return res.json_line()
    return jsontext.dumps(res.to_json(), separators=(",", ":"), default=str, ensure_ascii=False)


LIVE_AFTER = 0.5  # seconds into a run before the live bar appears: a quick run needs none


class EventPrinter:
    """Renders progress events on stderr: one line per event (--agent), or a live bar and the
    end line (people), or nothing but errors (JSON)."""

    def __init__(self, mode: str, agent: bool, stream: TextIO = sys.stderr) -> None:
        import time

        from barca.core import events
        self.ev = events
        self.mode, self.agent, self.out = mode, agent, stream
        # StepCached is said with --agent only: a settled walk makes none for this listener
        # (engine.settle.settle_batch; any listener without this attribute hears every one)
        self.cached_steps = agent
        self.live = stream.isatty() and not agent and mode == "pretty"
        self._bar = False
        self._drawn = 0.0   # when the bar was last drawn: at most ~20 times a second
        self._start = time.monotonic()
        self._rich: Any = None  # the live bar, once a run lasts long enough to want one
        self._running = 0   # steps handed to the executor and not yet finished

    def _line(self, text: str) -> None:
        if self._rich is not None:
            self._rich.stop()  # transient: the bar leaves the screen, the line takes its place
            self._rich = None
        if self._bar:
            self.out.write("\r\033[K")
            self._bar = False
        self.out.write(printable(text) + "\n")
        self.out.flush()

    def _step_output(self, step: str, output: str) -> None:
        if output and self.mode == "pretty" or (output and self.agent):
            for line in output.rstrip("\n").splitlines():
                self._line(f"[{step}] {line}")

    def _draw(self, done: int, total: int, step: str) -> None:
        """The live bar: rich's progress (percentage, N/M steps, elapsed, ETA, rate, the step
        just finished or handed out), started only once the run has lasted ``LIVE_AFTER``
        with a step still to finish -- a cached run never imports rich -- and a plain text bar
        where rich is not installed."""
        import time
        now = time.monotonic()
        if now - self._start < LIVE_AFTER:
            return
        if self._rich is None and not self._bar and (done >= total or not self._running):
            # the last step, or the only one running, just finished: a bar now would only
            # flash (and cost rich) -- the next steps handed out draw it if the run goes on
            return
        if self._rich is None and not self._bar:
            self._rich = live_bar(self.out, now - self._start)
            self._bar = self._rich is None
        if self._rich is not None:
            self._rich.update(done, total, step)
        elif now - self._drawn >= 0.05 or done == total:
            self._drawn = now
            self.out.write("\r\033[K" + progress_line(done, total, printable(step)))
            self.out.flush()

    def __call__(self, e: Any) -> None:
        ev = self.ev
        if type(e) is ev.StepCached:  # one per cached node (500 on a wide get): said first
            if self.agent:
                self._line(f"[barca] step:{e.step} cached")
            return
        if isinstance(e, ev.StepsStarted):
            self._running += len(e.steps)
            if self.live and e.steps:
                self._draw(e.done, e.total, e.steps[-1])
        elif isinstance(e, (ev.StepCompleted, ev.StepFailedEvent)):
            self._running = max(0, self._running - 1)
        if isinstance(e, ev.Importing):
            if self.agent:
                self._line(f"[barca] importing {e.path}")
        elif isinstance(e, ev.StepCompleted):
            self._step_output(e.step, e.output)
            if self.agent:
                env = f" env {e.env}" if e.env else ""
                self._line(f"[barca] step:{e.step} completed {e.elapsed:.1f}s "
                           f"({e.done}/{e.total}){env}")
            elif self.live:
                self._draw(e.done, e.total, e.step)
        elif isinstance(e, ev.StepFailedEvent):
            self._step_output(e.step, e.output)
            # a sink that could not be written is said in every mode: the step's value was
            # computed, but a file someone reads outside barca is not there
            if self.agent or self.mode == "pretty" or e.error.startswith("sink failed"):
                self._line(f"[barca] step:{e.step} failed: {e.error}")
        elif isinstance(e, ev.Note):  # notes and warnings reach stderr in every mode
            self._line(f"[barca] {e.text}" if e.level == "info"
                       else f"[barca] {e.level}: {e.text}")
        elif isinstance(e, ev.RunEnded) and (self.agent or self.mode == "pretty"):
            word = "failed" if e.failed else "done"
            self._line(f"[barca] {e.done}/{e.total} steps | {word} in {e.elapsed:.1f}s")


def live_bar(stream: TextIO, elapsed: float) -> Any:
    """A rich progress bar on ``stream`` that began ``elapsed`` seconds ago, or None without
    rich."""
    try:
        from barca.faces.richbar import RichBar
    except ImportError:
        return None
    return RichBar(stream, elapsed)


def progress_line(done: int, total: int, step: str, width: int = 24) -> str:
    """The live line in a terminal without rich: ``[barca] [#########......] 9/24 steps |
    <step>`` (the step id cut to keep the line on one 100-column row)."""
    filled = width * done // total if total else width
    line = f"[barca] [{'#' * filled}{'.' * (width - filled)}] {done}/{total} steps | "
    room = max(10, 99 - len(line))
    return line + (step if len(step) <= room else step[:room - 1] + "…")


def render(outcome: Any, mode: str) -> None:
    """Print a command's result object in ``mode``: its ``json_text()``, else its ``str()``
    (the text a person reads). A command without ``--json`` (docs, version) prints its text."""
    res, cmd, args = outcome.result, outcome.command, outcome.args
    if cmd == "logs":
        _print_logs(outcome, mode)
        return
    if getattr(args, "output", None) == "path" and hasattr(res, "outputs"):
        # the paths alone, one a line (a partitioned target's in key order), as the contract
        # and barca 0.30.2 print them: `-o path | xargs ...` works; --json maps keys to paths
        for o in res.outputs:
            for i in sorted(o.items, key=lambda i: i.key):
                print(printable(i.path))
        return
    if getattr(args, "output", None) == "value" and hasattr(res, "outputs"):
        text = outcome.value_text(2 if sys.stdout.isatty() else None)
        if outcome.settings.output == "json":  # JSON asked for, not merely a pipe: the run
            # document, whose final_output is the value
            doc = res.to_json()
            doc["final_output"] = jsontext.loads(text)
            text = (jsontext.dumps(doc, indent=2, ensure_ascii=False) if sys.stdout.isatty()
                    else jsontext.dumps(doc, separators=(",", ":"), ensure_ascii=False))
        print(text)
        return
    if cmd == "docs":  # the text, piped or not: JSON only when asked for
        print(res.json_text() if args.json else printable(str(res)))
        return
    if cmd == "graph" and not args.json:  # SVG unless --json: `barca graph > dag.svg` works
        print(res.svg())
        return
    if mode == "json" and cmd in ("get", "run"):
        print(_json_doc(res, getattr(args, "fields", None)))
    elif mode == "json" and hasattr(args, "json"):
        print(res.json_text())
    else:
        print(printable(str(res)))
        if cmd == "sql" and res.truncated:
            sys.stderr.write(printable(f"[barca] note: {res.note}") + "\n")
        elif cmd in ("list", "history") and hasattr(res, "cut_note") and res.cut_note():
            sys.stderr.write(f"[barca] note: {res.cut_note()}\n")


def _print_logs(outcome: Any, mode: str) -> None:
    """``barca logs``: the run is named on stderr; lines on stdout (JSON: one object each).
    With ``-f``, new lines are printed until the run ends."""
    log, args = outcome.result, outcome.args
    sys.stderr.write(f"[barca] {log.headline()}\n")
    if not log.lines and not args.follow and mode != "json":
        sys.stderr.write(f"[barca] {log.EMPTY}\n")
    from barca.faces.commands import log_parts
    for part in log_parts(outcome):
        if mode == "json":  # one array; following, one object per line as lines arrive
            text = part.json_lines() if args.follow else part.json_array()
        else:
            text = printable(part.text_lines())
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()


def _error(exc: BarcaError, mode: str, agent: bool) -> None:
    def say(text: str) -> None:  # a person's terminal: never a raw control character
        sys.stderr.write(printable(text) + "\n")
    if mode == "json":
        sys.stderr.write(exc.json_line() + "\n")
    if agent and isinstance(exc, StepFailed):  # --agent's own line, stderr's last
        say(f"[barca] run failed: {exc.message} (exit {exc.code})")
    if mode == "json":
        return
    if isinstance(exc, StepFailed):
        tb = exc.extra.get("traceback")
        if tb and not agent:
            say(tb.removesuffix("\n"))
        if not agent:
            say(f"[barca] run failed: {exc.message} (exit {exc.code})")
        return
    if isinstance(exc, Cancelled):
        say(f"[barca] {exc.message} (exit 130)")
        return
    say(str(exc))


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_cli(argv: list[str] | None = None) -> int:
    from barca.faces.commands import hold_collector, release_collector
    hold_collector()
    try:
        return _run_cli(argv)
    finally:
        release_collector()


def _run_cli(argv: list[str] | None) -> int:
    from barca.faces.commands import dispatch, parse, resolve
    argv = list(sys.argv[1:] if argv is None else argv)
    mode = "json" if "--json" in argv else ("pretty" if "--pretty" in argv else None)
    agent = "--agent" in argv
    args = None
    try:
        args = parse(argv)
        settings = resolve(args)  # once, for the whole command
        mode = _mode(settings)
        if args.command == "serve":  # the server's libraries are imported only here
            from barca.faces.commands import release_collector
            release_collector()  # a long-lived process
            from barca.faces.serve.main import serve
            return serve(args, settings)
        printer = EventPrinter(mode, getattr(args, "agent", False))
        outcome = dispatch(args, on_event=printer, settings=settings)
        if getattr(outcome.result, "steps_executed", 0) >= 10_000:
            # a big run's walk is held by a reference cycle until the collector passes: freed
            # before its output is built, not under it (the first run's peak, #31 item 4)
            import gc
            gc.collect()
        render(outcome, mode)
        if outcome.command == "doctor" and not outcome.result.ok:
            return 3  # a problem found (one line each, with its fix); 1 is a failed step
        return 0
    except StepFailed as exc:
        mode = _safe_mode(mode)
        value_only = getattr(args, "output", None) == "value"
        if exc.result is not None and mode == "json" and not value_only:
            # -o value prints nothing when a step failed
            print(_json_doc(exc.result, getattr(args, "fields", None)))
        _error(exc, mode, agent)
        return exc.code
    except BarcaError as exc:
        _error(exc, _safe_mode(mode), agent)
        return exc.code
    except KeyboardInterrupt:
        _error(Cancelled("cancelled", "Run the command again to finish."), mode or "pretty", agent)
        return 130
    except BrokenPipeError:  # the reader went away (`barca list | head`): not an error of ours
        raise
    except Exception as exc:  # a bug in barca: say so, with the traceback to report
        import traceback
        err = InfrastructureError(f"internal error: {type(exc).__name__}: {exc}",
                                  "This is a bug in barca; please report it with the traceback.",
                                  traceback=traceback.format_exc())
        if (mode or "json") != "json":
            sys.stderr.write(traceback.format_exc())
        _error(err, _safe_mode(mode), agent)
        return err.code


# what the process had loaded before barca (the interpreter's start, a .pth file's, the script)
_STARTED_WITH = frozenset(sys.modules)


def main(argv: list[str] | None = None) -> None:
    # through signal's C half, which the interpreter loaded at start-up: the signal module
    # itself makes enums of its constants on import (a tenth of what a cached get imported)
    signals: Any = sys.modules.get("_signal") or __import__("signal")
    signals.signal(signals.SIGTERM, _on_sigterm)
    from barca.faces.commands import hold_collector, one_command_per_process
    # The collector held (as run_cli does) before the engine loads, and not turned on again at
    # the end: the process exits next, where a collector on walks every object once more for
    # nothing (interpreter shutdown still collects). A step that runs turns it on (engine).
    hold_collector()
    one_command_per_process()
    try:
        code = _run_cli(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush to a closed pipe
        code = 0
    import gc
    # the process ends here: what it made is no garbage worth a walk, but the interpreter's
    # exit collects three times over every object (~4 % of a cached get of 500 assets);
    # frozen, they are left to the exit (which still flushes the standard streams)
    gc.freeze()
    sys.exit(code)


def command() -> None:
    """The installed ``barca`` command itself (scripts/barca): ``main``, and then the process
    ends at once when that loses nothing (``_nothing_left_to_end``): what the interpreter's end
    would still do, past its ``atexit`` callbacks (run here, in its order: after the threads),
    is free every object one by one, which no one sees (~2 % of a cached get of 500 assets).
    A caller of ``main`` gets its SystemExit, as ever, and so does one that runs the package
    as a module (``python -m barca``, ``runpy``: it may go on after it)."""
    try:
        main()
    except SystemExit as exc:
        code = exc.code
        if (code is None or type(code) is int) and _nothing_left_to_end():
            import atexit
            # a callback registered at start-up (a .pth file's library: certifi's, say) is
            # still run; it cannot run twice, as running them clears them
            atexit._run_exitfuncs()
            if _nothing_left_to_end():  # (a callback that started a thread or loaded a module)
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code or 0)
        raise


def _nothing_left_to_end() -> bool:
    """True when ending the process now loses nothing but its ``atexit`` callbacks, which the
    caller runs: no thread but this one, no module but those the process started with, barca's
    and the standard library's (another's objects may hold writes that only their finalizer
    makes), and an interpreter that can run the callbacks (CPython's ``atexit``)."""
    import atexit
    if not hasattr(atexit, "_run_exitfuncs") or "threading" in sys.modules and \
            sys.modules["threading"].active_count() != 1:
        return False
    stdlib, before = sys.stdlib_module_names, _STARTED_WITH
    return all(n in before or n.partition(".")[0] in stdlib or n == "barca"
               or n.startswith("barca.") for n in sys.modules)


if __name__ == "__main__":
    main()
