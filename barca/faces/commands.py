"""The command grammar (argparse) and its dispatch, shared by the CLI and the ``%barca`` magic.

``parse`` raises ``UsageError`` instead of exiting; ``dispatch`` calls the API and returns a
result object. Neither prints."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from barca.core.errors import UsageError
from barca.faces.outcome import Outcome, split_target  # noqa: F401 (used, and re-exported)

if TYPE_CHECKING:
    from barca.core.settings import Settings


def _close_matches(word: str, choices: list[str], n: int, cutoff: float) -> list[str]:
    """Close choices only: options are compared without their dashes, which every option
    shares (with them, ``--bogus`` looked half like ``--output``)."""
    import difflib  # only on an error: keeps `barca --help` cheap
    if word.startswith("-"):
        bare = {c.lstrip("-"): c for c in choices if c.startswith("-")}
        found = difflib.get_close_matches(word.lstrip("-"), list(bare), n=n, cutoff=0.75)
        return [bare[f] for f in found]
    found = difflib.get_close_matches(word, choices, n=len(choices), cutoff=max(cutoff, 0.6))
    # two letters swapped (stauts) means the word with the same letters (status), even where
    # another one (stats) scores a little higher
    found.sort(key=lambda c: sorted(c) != sorted(word))
    return found[:n]


COMMANDS = ("get", "run", "list", "status", "graph", "sql", "plan", "history", "logs", "gc",
            "doctor", "docs", "version", "stats", "serve")


def _columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing shutil (and bz2, lzma)."""
    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            # (no __stdout__, under pythonw or a host that closed it: the AttributeError)
            cols = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            cols = 0
    return cols or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the width: its own default asks ``shutil`` on every
    ``add_argument``, importing it (and bz2, lzma) on every command, help or not."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
    def error(self, message: str) -> NoReturn:
        if "unrecognized arguments" in message or "invalid choice" in message:
            import re
            m = re.search(r"invalid choice: '([^']*)'", message)
            bad = m.group(1) if m else message.split(":", 1)[-1].strip().split()[0].strip("'")
            options = [o for a in self._actions for o in a.option_strings]
            choices = list(COMMANDS) if "invalid choice" in message else options
            close = _close_matches(bad, choices, n=1, cutoff=0.5)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            if "invalid choice" in message:
                raise UsageError(f"Unknown command '{bad}'.{hint}",
                                 f"Commands: {', '.join(COMMANDS)}. See `barca --help`.")
            raise UsageError(f"Unknown option '{bad}' for `{self.prog}`.{hint}",
                             f"See `{self.prog} --help` for the options it accepts.")
        raise UsageError(f"{self.prog}: {message}", f"See `{self.prog} --help`.")


def _env_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", metavar="NAME",
                   help="a named environment: a cache of its own in .barca/envs/NAME "
                        "(default: BARCA_ENV, else .barca)")


def _output_flags(p: argparse.ArgumentParser) -> None:
    _env_flag(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    g.add_argument("--pretty", action="store_true", help="print the result for people")


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("args", nargs="*", metavar="TARGET|FILE",
                   help="targets (comma-separated) and pipeline files")
    p.add_argument("--refresh", metavar="A,B", help="recompute these (and what is below them)")
    p.add_argument("--no-cascade", action="store_true",
                   help="with --refresh: recompute only the named assets")
    p.add_argument("--refresh-all", action="store_true", help="recompute everything in the cone")
    p.add_argument("--partition", metavar="DIM=V[,V]",
                   help="narrow the run to these keys (or a JSON object)")
    p.add_argument("--dry-run", action="store_true", help="say what would run; run nothing")
    p.add_argument("--agent", action="store_true", help="one line per event on stderr")
    p.add_argument("--executor", metavar="local|dask|tcp://HOST:PORT",
                   help="where steps run (default: BARCA_EXECUTOR, else the local pool)")
    p.add_argument("-o", "--output", choices=("value", "path", "json", "pretty"),
                   help="print only the value, or only the artifact path(s); -o json and "
                        "-o pretty are --json and --pretty")
    p.add_argument("--run-id", help=argparse.SUPPRESS)  # barca serve: the run it queued
    p.add_argument("--schedule-id", help=argparse.SUPPRESS)  # barca serve: a tick of this node
    p.add_argument("--as", dest="as_type", metavar="pandas|polars|lazy|pyarrow|duckdb",
                   help="a stored table in this type (%%barca get; default: as written)")
    _output_flags(p)
    _server_flags(p)


_PARSERS: dict[str | None, argparse.ArgumentParser] = {}


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The grammar: every command (for ``--help``), or only ``command`` -- a command line
    builds one sub-grammar, not ten. Built once per process: a kernel runs many magics."""
    if command not in _PARSERS:
        _PARSERS[command] = _build_parser(command)
    return _PARSERS[command]


def _build_parser(only: str | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog="barca", description="Run plain Python functions as a cached dependency "
                "graph. `barca docs` is the manual.")
    if only is None:  # a command's own grammar never reads --version (see parse)
        p.add_argument("--version", action="version", version=str(_version()))
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (text, add_flags) in _COMMAND_FLAGS.items():
        if only is None or name == only:
            s = sub.add_parser(name, help=text)
            if add_flags is not None:
                add_flags(s)
    return p


def _server_flags(p: argparse.ArgumentParser) -> None:
    """``--server [URL]`` and ``--local`` (barca.faces.remote, imported only when given)."""
    p.add_argument("--server", nargs="?", const="", metavar="URL",
                   help="run on a barca serve (bare: BARCA_SERVER, else [server] url)")
    p.add_argument("--local", action="store_true", help="run here, even with --server")


def _list_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("args", nargs="*", metavar="FILE")
    s.add_argument("--groups", action="store_true",
                   help="the groups (group()) instead of the nodes: JSON, or a tree")
    _output_flags(s)


def _listing_flags(s: argparse.ArgumentParser) -> None:
    _list_flags(s)
    _server_flags(s)


def _status_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("args", nargs="*", metavar="TARGET|FILE")
    s.add_argument("--widget", action="store_true", help="(notebooks) a live status widget")
    s.add_argument("-l", "--limit", type=int, default=None,
                   help="at most N nodes (default: 100 in a table, every one in JSON)")
    s.add_argument("--all", action="store_true", help="every node")
    s.add_argument("--fields", metavar="A,B", default=None,
                   help="JSON with only these keys of each node")
    s.add_argument("--state", metavar="S1,S2", default=None,
                   help="only nodes in these states (cached, stale, never_run, partial, "
                        "unknown, always_runs)")
    s.add_argument("--problems", action="store_true",
                   help="only nodes that need attention")
    s.add_argument("--sample", type=int, metavar="N", default=None,
                   help="JSON: up to N rows of each json, parquet or csv result")
    _output_flags(s)
    _server_flags(s)


def _sql_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("query")
    s.add_argument("args", nargs="*", metavar="FILE")
    s.add_argument("--limit", type=int, default=None, help="at most N rows (default 100)")
    s.add_argument("--all", action="store_true", help="every row")
    _output_flags(s)
    _server_flags(s)  # the views from a server; the query still runs here


def _doctor_flags(s: argparse.ArgumentParser) -> None:
    _list_flags(s)
    _server_flags(s)  # check a server too


def _plan_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("args", nargs="*", metavar="FILE")
    s.add_argument("--target")
    _output_flags(s)


def _history_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("--limit", type=int, default=20)
    _output_flags(s)
    _server_flags(s)


def _logs_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("run_id", nargs="?", metavar="RUN_ID",
                   help="a run id from `barca history` (default: the most recent run)")
    s.add_argument("--step", metavar="NAME|ID|ID[key]",
                   help="only this step (a base name selects every key)")
    s.add_argument("--stream", choices=("stdout", "stderr"), help="only this stream")
    s.add_argument("--timestamps", action="store_true", help="a UTC time before each line")
    s.add_argument("-f", "--follow", action="store_true",
                   help="keep printing lines while the run goes on")
    _output_flags(s)
    _server_flags(s)


def _stats_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("args", nargs="*", metavar="TARGET [FILE]")
    s.add_argument("--fields", metavar="A,B",
                   help="only these keys of each recent run (implies --json): elapsed_seconds, "
                        "status, created_at, error_message, attempts")
    _output_flags(s)
    _server_flags(s)


def _gc_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("args", nargs="*", metavar="FILE")
    s.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")
    s.add_argument("--max-size", metavar="SIZE|off",
                   help="a one-off budget (off: every superseded result, nothing else)")
    _output_flags(s)


def _serve_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("args", nargs="*", metavar="FILE",
                   help="pipeline files or folders (default: every pipeline in the project)")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; another needs a token)")
    s.add_argument("-p", "--port", type=int, default=8274, help="TCP port (default 8274)")
    s.add_argument("--watch", action="store_true",
                   help="read the pipeline files again when they change (new ones too)")
    s.add_argument("--no-schedule", action="store_true", help="scheduled nodes never fire")
    s.add_argument("--timezone", default="local", metavar="local|utc|ZONE",
                   help="the zone cron expressions are read in (default: local)")
    s.add_argument("--read-only", action="store_true",
                   help="inspect only: runs, cancels and pauses are refused (403)")
    s.add_argument("--drain-timeout", type=float, metavar="SECONDS",
                   help="grace for runs in flight after SIGTERM/SIGINT (default: "
                        "[server] drain_timeout, else 30)")
    s.add_argument("--max-runs", type=int, metavar="N",
                   help="runs executing at once (default: [server] max_runs, else one per "
                        "core)")
    s.add_argument("--insecure", action="store_true",
                   help="listen on a public address without a token")
    s.add_argument("--server", nargs="?", const="", help=argparse.SUPPRESS)  # refused: see
    s.add_argument("--local", action="store_true", help=argparse.SUPPRESS)  # faces.serve.main
    _env_flag(s)


def _docs_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("topic", nargs="?")


_COMMAND_FLAGS: dict[str, tuple[str, Any]] = {
    "get": ("bring assets up to date and return them", _run_flags),
    "run": ("run a task (always) and its cone", _run_flags),
    "list": ("one row per node", _listing_flags),
    "status": ("one row per node: state, why, last run", _status_flags),
    "graph": ("the DAG as a picture (SVG), nodes coloured by state", _list_flags),
    "sql": ("query cached results with DuckDB", _sql_flags),
    "plan": ("the execution plan by phase (JSON; a table in a notebook)", _plan_flags),
    "history": ("recent runs", _history_flags),
    "stats": ("a node's run count, durations, cache hit rate and recent runs", _stats_flags),
    "logs": ("what a run's steps printed", _logs_flags),
    "gc": ("evict cached results now, down to 80%% of the cache size limit", _gc_flags),
    "doctor": ("check the project's health without running anything", _doctor_flags),
    "docs": ("the manual", _docs_flags),
    "serve": ("an HTTP API, a web UI and the schedules, for one project", _serve_flags),
    "version": ("the version", None),
}

def _version() -> Any:
    """``barca version``'s result; its text is ``--version``'s."""
    from barca import __version__
    from barca.queries.manual import Version
    return Version(__version__)


_PARSED: dict[tuple[str, ...], argparse.Namespace] = {}


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line as a namespace; flags may come before or after targets and files.
    A line parsed before is not parsed again (a kernel runs the same magic many times)."""
    got = _PARSED.get(tuple(argv))
    if got is None:
        got = _parse(argv)
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[tuple(argv)] = got
    # a copy: a caller may change the namespace or its lists
    return argparse.Namespace(**{k: list(v) if isinstance(v, list) else v
                                 for k, v in vars(got).items()})


def _parse(argv: list[str]) -> argparse.Namespace:
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if at is None:
        parser().parse_args(argv)  # --help / --version exit here; else an error below
        raise UsageError("No command given.",
                         f"Commands: {', '.join(COMMANDS)}. See `barca --help`.")
    if at > 0:
        parser().parse_args(argv[:at] + ["version"])  # only --help/--version may come first
    cmd = argv[at]
    if cmd not in COMMANDS and cmd.endswith(".py"):  # `barca pipeline.py`: get, as barca reads it
        argv = [*argv[:at], "get", *argv[at:]]
        cmd = "get"
    if cmd not in COMMANDS:
        close = _close_matches(cmd, list(COMMANDS), n=1, cutoff=0.5)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise UsageError(f"Unknown command '{cmd}'.{hint}",
                         f"Commands: {', '.join(COMMANDS)}. See `barca --help`.")
    # argparse has no public way to reach a subcommand's parser; the grammar made it, so it is
    # there
    sub = parser(cmd)._subparsers._group_actions[0].choices[cmd]  # type: ignore[union-attr, index]
    if "--server" in argv:
        from barca.faces.remote import server_argv
        argv = server_argv(argv)
    args, extras = sub.parse_known_intermixed_args(argv[at + 1:])
    args.command = cmd
    if getattr(args, "output", None) in ("json", "pretty"):  # -o json: the --json flag
        other = "json" if args.output == "pretty" else "pretty"
        if getattr(args, other, False):
            raise UsageError(f"-o {args.output} and --{other} ask for two output modes.",
                             "Give one of them.")
        setattr(args, args.output, True)
        args.output = None
    if extras:
        bad = next((e for e in extras if e.startswith("-")), extras[0])
        options = [o for a in sub._actions for o in a.option_strings]
        close = _close_matches(bad, options, n=1, cutoff=0.5)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        what = "option" if bad.startswith("-") else "argument"
        raise UsageError(f"Unknown {what} '{bad}' for `barca {cmd}`.{hint}",
                         f"See `barca {cmd} --help` for the options it accepts.")
    return args


# commands that read no project setting: they run whatever barca.toml says (doctor reports
# an invalid file as one of its findings, so it resolves its settings itself)
_NO_PROJECT = ("docs", "version", "doctor")


def resolve(args: argparse.Namespace) -> Settings:
    """The command's ``Settings``, resolved once: its flags (``--env``, ``--executor``,
    ``--json``/``--pretty``), then the environment, then ``barca.toml``."""
    from barca.core.settings import Settings
    output = "json" if getattr(args, "json", False) or getattr(args, "fields", None) else (
        "pretty" if getattr(args, "pretty", False) else None)
    settings = Settings.resolve(project=args.command not in _NO_PROJECT,
                                env=getattr(args, "env", None), output=output,
                                executor=getattr(args, "executor", None))
    if getattr(args, "env", None) is not None:
        settings.store_prefix  # noqa: B018 - not a plain folder name: exit 2 before anything
    return settings


def log_parts(outcome: Outcome) -> Any:
    """``barca logs``: the log, then (``-f``) each part of it that arrives until the run ends
    (from the server with ``--server``)."""
    args, settings = outcome.args, outcome.settings
    if not args.follow:
        return [outcome.result]
    from barca.queries.runlog import follow
    fetch = None
    if getattr(args, "server", None) is not None:
        from barca.faces import remote
        if remote.wanted(args):  # the lines come from the server
            def fetch(run_id: str, after: int = 0, **_: Any) -> Any:
                return remote.more_logs(args, run_id, after, settings)
    return follow(outcome.result, settings=settings, step=args.step, stream=args.stream,
                  fetch=fetch)


def one_command_per_process() -> None:
    """The CLI: this process answers one command, so no warm state is kept for a next ask."""
    from barca.api import warm
    warm.keeping = False


def hold_collector() -> None:
    """A command that only reads (a cached get, status) builds its objects once and exits: the
    cyclic collector would walk them again and again for nothing (5 % of a cached get of 500
    assets). The engine turns it on again for anything that runs: a step, the server."""
    import gc

    from barca import engine
    if gc.isenabled():
        gc.disable()
        engine.gc_held = True


def release_collector() -> None:
    """The collector on again if ``hold_collector`` held it off."""
    from barca.engine import release_gc
    release_gc()


def dispatch(args: argparse.Namespace, on_event: Any = None, load_values: bool = False,
             default_sql_limit: int | None = 100, settings: Settings | None = None) -> Outcome:
    """Run the command with ``settings`` (default: ``resolve(args)``), passed down as a value:
    nothing is written into the environment."""
    if settings is None:
        settings = resolve(args)
    return _dispatch(args, on_event, load_values, default_sql_limit, settings)


def _dispatch(args: argparse.Namespace, on_event: Any, load_values: bool,
              default_sql_limit: int | None, settings: Settings) -> Outcome:
    from barca.core import events as ev
    on_event = on_event or ev.ignore
    cmd = args.command
    s = settings
    if getattr(args, "server", None) is not None:
        from barca.faces import remote
        if remote.wanted(args):  # run on a barca serve: the same Outcome, from its answer
            return remote.dispatch(args, on_event, load_values, s, default_sql_limit)

    if cmd not in ("list", "docs", "version"):
        from barca import api
    if cmd in ("get", "run"):
        if args.as_type is not None:
            from barca.store.frames import check_type
            check_type(args.as_type)
        target, files = split_target(args.args)
        stray = [f for f in files if not api.looks_like_file(f)]
        if args.refresh and stray:  # `--refresh src mid`: the shell split one list in two
            raise UsageError(f"--refresh takes one comma-separated list; '{stray[0]}' is not a "
                             "pipeline file.",
                             f"Join the names with commas: --refresh "
                             f"{','.join([args.refresh, *stray])}")
        if cmd == "run" and target is None:
            raise UsageError("barca run needs a task name.", "Write: barca run TASK [files]")
        if args.dry_run:
            res: Any = api.plan_run(target, *files, command=cmd, refresh=args.refresh,
                                    refresh_all=args.refresh_all, no_cascade=args.no_cascade,
                                    partition=args.partition, settings=s,
                                    on_event=on_event)
        else:
            res = api.materialize(target, *files, command=cmd, refresh=args.refresh,
                                  refresh_all=args.refresh_all, no_cascade=args.no_cascade,
                                  partition=args.partition, on_event=on_event, settings=s,
                                  load_values=load_values or args.output == "value",
                                  run_id=args.run_id, schedule_id=args.schedule_id)
        return Outcome(cmd, res, args, s)
    if cmd == "list":
        from barca.queries.listing import list_nodes
        return Outcome(cmd, list_nodes(*args.args, settings=s, groups=args.groups), args, s)
    if cmd == "status":
        target, files = split_target(args.args)
        from barca.present.statusview import narrow, other_envs
        report = other_envs(api.status(target, *files, settings=s), s.env,
                            s.where("env", "default"))
        return Outcome(cmd, narrow(report, args.state, args.problems, args.limit, args.all,
                                   args.fields, args.sample), args, s)
    if cmd == "graph":
        return Outcome(cmd, api.graph(*args.args, settings=s), args, s)
    if cmd == "plan":
        return Outcome(cmd, api.plan(*args.args, target=args.target, settings=s,
                                     on_event=on_event), args, s)
    if cmd == "stats":
        from barca.queries.stats import stats_report
        target, files = split_target(args.args)
        return Outcome(cmd, stats_report(target or "", *files, fields=args.fields,
                                         settings=s), args, s)
    if cmd == "history":
        return Outcome(cmd, api.history(args.limit, settings=s), args, s)
    if cmd == "gc":
        return Outcome(cmd, api.gc(*args.args, max_size=args.max_size, dry_run=args.dry_run,
                               settings=s), args, s)
    if cmd == "doctor":
        from barca.queries.doctor import checkup
        return Outcome(cmd, checkup(*args.args, env=args.env), args, s)
    if cmd == "logs":
        from barca.queries.runlog import logs
        return Outcome(cmd, logs(args.run_id, step=args.step, stream=args.stream,
                                 timestamps=args.timestamps, settings=s), args, s)
    if cmd == "sql":
        limit = None if args.all else (args.limit if args.limit is not None else default_sql_limit)
        return Outcome(cmd, api.sql_result(args.query, *args.args, limit=limit, settings=s),
                       args, s)
    if cmd == "docs":
        from barca.queries.manual import page
        return Outcome(cmd, page(args.topic), args, s)
    if cmd == "version":
        return Outcome(cmd, _version(), args, s)
    if cmd == "serve":
        raise UsageError("barca serve runs from a terminal, not from here.",
                         "Start it in a shell: barca serve")
    raise UsageError(f"Unknown command '{cmd}'.", f"Commands: {', '.join(COMMANDS)}.")
