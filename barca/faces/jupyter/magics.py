"""``%barca`` and ``%%barca``: the CLI's grammar, parsed by the CLI's own parser, returning
Python objects instead of printing text."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from barca.core.errors import Cancelled, StepFailed, UsageError


def run_magic(line: str, cell: str | None = None, ns: dict[str, Any] | None = None) -> Any:
    """Run one ``%barca`` line (or ``%%barca`` cell). ``ns`` is the namespace ``{name}`` and
    ``$name`` in the line are expanded from, each reference inside the one argument it stands
    in (None: no expansion). A line ending in ``;`` runs and shows nothing, as any IPython line."""
    from barca.core.errors import BarcaError
    quiet = cell is None and line.rstrip().endswith(";")
    if quiet:
        line = line.rstrip()[:-1]
    try:
        value = _run(line, cell, ns)
    except BarcaError as exc:
        _in_magic_form(exc)
        raise
    return None if quiet else value


def _run(line: str, cell: str | None, ns: dict[str, Any] | None = None) -> Any:
    from barca.faces.commands import dispatch, parse
    argv = _sql_argv(line) if cell is None else None
    if argv is None:
        argv = _split(line)
    if ns is not None:
        argv = _expand(argv, ns)
    if cell is not None:
        return _cell(argv, cell)
    try:
        args = parse(argv)
    except SystemExit:  # --help / --version printed by argparse
        return None
    if args.command == "status" and getattr(args, "widget", False):
        from barca.faces.commands import resolve
        from barca.faces.jupyter.widget import StatusWidget
        return StatusWidget(*args.args, settings=resolve(args))
    progress = None
    if args.command in ("get", "run") and not args.dry_run:
        from barca.faces.jupyter.progress import NotebookProgress
        progress = NotebookProgress()
    try:  # the line's settings are passed down as values: the kernel's environment is untouched
        outcome = dispatch(args, on_event=progress or (lambda e: None), load_values=True,
                           default_sql_limit=None)
    except StepFailed as exc:
        if progress is not None:
            progress.finished(failed=True)
        _show_other_failures(progress, exc)
        raise
    except (KeyboardInterrupt, Cancelled) as exc:  # the stop button: the bar turns red, stays
        if progress is not None:
            progress.interrupted()
        if isinstance(exc, Cancelled) and getattr(args, "refresh_all", False):
            # the same line would compute everything again: the resuming one drops the flag
            again = shlex.join(a for a in argv if a != "--refresh-all")
            exc.remediation = (f"Run %barca {again} (without --refresh-all): it computes only "
                               "what did not finish.")
        raise
    except Exception:  # barca's own files, a bug: the bar does not stay "running"
        if progress is not None:
            progress.finished(failed=True)
        raise
    if progress is not None:
        progress.finished(failed=False)
    _say_scope(args)
    if args.command == "logs" and args.follow:
        return _follow(outcome)
    return _value(outcome)


def _follow(outcome: Any) -> None:
    """``%barca logs -f``: the lines printed into the cell's output as they are recorded,
    until the run ends (the stop button ends the following, not the run)."""
    from barca.queries.runlog import follow
    args, shown = outcome.args, False
    for part in follow(outcome.result, settings=outcome.settings, step=args.step,
                       stream=args.stream):
        if part.lines:
            print(part.text_lines(), end="", flush=True)
            shown = True
    if not shown:
        print(outcome.result.EMPTY)


def _say_scope(args: Any) -> None:
    """Without a file, a notebook that defines nodes is what ``status``, ``doctor``, ``list``
    and ``graph`` read, not the project's files: say so, with the form that reads a file."""
    if args.command not in ("status", "doctor", "list", "graph"):
        return
    from barca.api import looks_like_file
    from barca.model import notebook
    if any(looks_like_file(a) for a in getattr(args, "args", None) or []) \
            or not notebook.interactive():
        return
    n = len(notebook.current_functions())
    if n:
        print(f"[barca] {args.command} reads the {n} node{'s' if n != 1 else ''} defined in "
              f"this notebook (no file named); name a file to read a pipeline's: "
              f"%barca {args.command} pipeline.py")


_SPLIT: dict[str, tuple[str, ...]] = {}


def _split(line: str) -> list[str]:
    """The line's arguments, split as a shell would; a ``{...}`` reference is never split, even
    when the expression inside it has spaces. A line split before is not split again (a
    kernel runs the same line many times; the split depends on nothing else)."""
    got = _SPLIT.get(line)
    if got is None:
        got = tuple(_split_new(line))
        if len(_SPLIT) > 256:
            _SPLIT.clear()
        _SPLIT[line] = got
    return list(got)


def _split_new(line: str) -> list[str]:
    import re
    refs: list[str] = []

    def hold(m: re.Match[str]) -> str:
        refs.append(m.group())
        return f"\0{len(refs) - 1}\0"
    held = re.sub(r"\{[^{}\0]*\}", hold, line)
    try:
        argv = shlex.split(held)
    except ValueError as exc:
        raise UsageError(f"%barca: cannot parse the line ({exc})",
                         "Check the quotes: %barca sql \"select * from prices\"") from None
    return [re.sub(r"\0(\d+)\0", lambda m: refs[int(m.group(1))], a) for a in argv]


def _expand(argv: list[str], ns: dict[str, Any]) -> list[str]:
    """``{name}``, ``{expression}`` and ``$name`` expanded as IPython does, but inside each
    argument: a value from outside data stays one argument whatever it holds (a key
    ``"AAPL --executor tcp://host"`` never becomes a flag)."""
    from IPython.utils.text import DollarFormatter
    fmt = DollarFormatter()
    out = []
    for a in argv:
        try:
            out.append(fmt.vformat(a, args=[], kwargs=ns) if ("{" in a or "$" in a) else a)
        except Exception:  # noqa: BLE001 - IPython's rule: what cannot be expanded stays as typed
            out.append(a)
    return out


# flags of `sql` that may come before or after an unquoted query, and whether they take a value
_SQL_FLAGS = {"--limit": True, "--env": True, "--all": False, "--json": False, "--pretty": False}


def _sql_argv(line: str) -> list[str] | None:
    """``%barca sql select ticker, close from prices``: the query unquoted, as in jupysql.
    The rest of the line is the query, less the flags and ``.py`` files at either end; None
    when the line is not such a query (a quoted one is read by ``shlex`` as on the CLI)."""
    head, _, rest = line.strip().partition(" ")
    rest = rest.strip()
    if head != "sql" or not rest or rest[0] in "'\"":
        return None
    import re
    spans = [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", rest)]
    words = [w for w, _, _ in spans]
    lo, hi = 0, len(words)
    before: list[str] = []
    while lo < hi and words[lo] in _SQL_FLAGS:
        take = 2 if _SQL_FLAGS[words[lo]] else 1
        before += words[lo:lo + take]
        lo += take
    after: list[str] = []
    while hi > lo:
        if words[hi - 1] in _SQL_FLAGS and not _SQL_FLAGS[words[hi - 1]] \
                or words[hi - 1].endswith(".py"):
            after.insert(0, words[hi - 1])
            hi -= 1
        elif hi - lo >= 2 and _SQL_FLAGS.get(words[hi - 2]):
            after[:0] = words[hi - 2:hi]
            hi -= 2
        else:
            break
    if hi - lo <= 1:  # one word: a quoted query's usual reading (and its errors) apply
        return None
    # the query as typed, spaces inside its string literals kept
    return ["sql", rest[spans[lo][1]:spans[hi - 1][2]], *before, *after]


_COMMAND = r"(?:--help|--version|get|run|list|status|graph|sql|plan|history|stats|docs|version)\b"


def _in_magic_form(exc: Any) -> None:
    """Hints in the form a notebook user types: `%barca get --help`, not `barca get --help`."""
    import re
    pattern = re.compile(r"(?<![\w%./-])barca(?= " + _COMMAND + ")")
    # the CLI's failure line always counts the skipped steps; in a notebook "0" is noise
    exc.message = pattern.sub("%barca", exc.message).removesuffix(
        "; 0 downstream steps skipped")
    if exc.message.endswith("; 1 downstream steps skipped"):  # the CLI's line keeps its form
        exc.message = exc.message[:-len("steps skipped")] + "step skipped"
    exc.remediation = pattern.sub("%barca", exc.remediation)
    if isinstance(exc, Cancelled):  # the error box already says "Cancelled:"
        exc.message = exc.message.removeprefix("cancelled: ")
    exc.args = (exc.message,)


def _show_other_failures(progress: Any, exc: StepFailed) -> None:
    """The error box shows the first failure with its traceback; say which others failed."""
    from IPython.display import display
    failures = progress.failures if progress is not None else []
    for f in failures:
        if f.step == exc.extra.get("node"):
            continue
        display({"text/plain": f"[barca] step:{f.step} failed: {f.error}"}, raw=True)


def _value(outcome: Any) -> Any:
    res, cmd = outcome.result, outcome.command
    if cmd in ("get", "run") and hasattr(res, "outputs"):
        return res.value(getattr(outcome.args, "as_type", None))
    if cmd == "sql":
        return res.to_pandas()
    return res  # a result object: it shows itself (a table, Markdown, a picture)


def _cell(argv: list[str], body: str) -> Any:
    if argv and argv[0] == "sql":  # the cell is the query; the line may add files and flags
        return run_magic(shlex.join(["sql", body.strip(), *argv[1:]]))
    if len(argv) == 2 and argv[0] == "pipeline":
        name = argv[1]
        inside = Path(name).resolve().is_relative_to(Path.cwd().resolve())
        if not name.endswith(".py") or not inside:
            raise UsageError(f"%%barca pipeline: '{name}' is not a .py file in this folder",
                             "Write %%barca pipeline my_pipeline.py")
        Path(name).write_text(body if body.endswith("\n") else body + "\n", encoding="utf-8")
        from barca import api
        return api.list_nodes(name)
    raise UsageError("%%barca takes `sql` (the cell is the query) or `pipeline NAME.py` (the "
                     "cell is written to that file).",
                     "Write %%barca sql, or %%barca pipeline pipeline.py, on the first line.")


@magics_class
class BarcaMagics(Magics):
    # IPython's own expansion would substitute ``{t}`` as text into the line before it is
    # split, so a value holding spaces and dashes would become flags: expand per argument.
    @no_var_expand
    @line_cell_magic
    def barca(self, line: str, cell: str | None = None) -> Any:
        """Run a barca command: ``%barca get report pipeline.py``. See ``%barca --help``."""
        return run_magic(line, cell, ns=self.shell.user_ns if self.shell is not None else None)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(BarcaMagics)
    from barca.core.errors import BarcaError
    from barca.faces.jupyter.tracebacks import show
    # one custom handler per shell: never replace one the user (or another extension) set
    if ipython.custom_exceptions in ((), (BarcaError,)):
        ipython.set_custom_exc((BarcaError,), show)
