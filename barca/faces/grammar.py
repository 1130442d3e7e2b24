"""The command grammar (argparse): every command's flags, ``--help`` and the exact usage
errors. The common lines are read without it (barca.faces.argv); ``barca.faces.commands``
comes here for the rest."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from barca.core.errors import UsageError
from barca.faces.argv import COMMANDS


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
    p.add_argument("--fields", metavar="A,B", default=None,
                   help="JSON with only these keys of each step (id, kind, status, action, "
                        "reason, detail, run_hash, partitions, attempts, env, ...)")
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
        p.add_argument("--version", action="version", version=str(version()))
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


def _cut_flags(s: argparse.ArgumentParser, limit: str, every: str, fields: str) -> None:
    """``-l/--limit N``, ``--all`` and ``--fields A,B`` of a command that lists things."""
    s.add_argument("-l", "--limit", type=int, default=None, help=limit)
    s.add_argument("--all", action="store_true", help=every)
    s.add_argument("--fields", metavar="A,B", default=None, help=fields)


def _listing_flags(s: argparse.ArgumentParser) -> None:
    _list_flags(s)
    _cut_flags(s, "at most N nodes, in topological order (default: 100 in a table, every one "
                  "in JSON)", "every node",
               "JSON with only these keys of each node (id, kind, freshness, schedule, inputs, "
               "env, next_fire, name, deps, partitions, max_failures)")
    _server_flags(s)


def _status_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("args", nargs="*", metavar="TARGET|FILE")
    s.add_argument("--widget", action="store_true", help="(notebooks) a live status widget")
    _cut_flags(s, "at most N nodes (default: 100 in a table, every one in JSON)", "every node",
               "JSON with only these keys of each node")
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
    s.add_argument("--partition", metavar="DIM=V[,V]",
                   help="plan only these keys, as get --partition: the fan-ins over them "
                        "are left out (listed in partition_selection)")
    _output_flags(s)


def _history_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("run", nargs="?", metavar="RUN_ID",
                   help="one run in detail: its row, the steps it recorded, its errors")
    _cut_flags(s, "at most N runs, newest first (default: 10 in a table, every one in "
                  "JSON); with a RUN_ID, N steps (default 1000; failed steps always)",
               "every recorded run (or step)",
               "JSON with only these keys of each run")
    s.add_argument("--status", metavar="S1,S2", default=None,
                   help="only runs with one of these statuses (success, failed, cancelled, "
                        "running, crashed or interrupted, error, pending)")
    s.add_argument("--target", metavar="NAME", default=None,
                   help="only runs asked for this node (its name or id)")
    s.add_argument("--triggered-by", metavar="T1,T2", default=None,
                   help="only runs started this way (manual, api, schedule, client)")
    s.add_argument("--since", metavar="WHEN", default=None,
                   help="only runs begun since: 30m, 24h, 7d, 2w, a date or an RFC 3339 time")
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
    s.add_argument("--all", action="store_true", help="every topic, one after the other")
    g = s.add_mutually_exclusive_group()  # (the text on a pipe too: JSON only when asked)
    g.add_argument("--json", action="store_true",
                   help="the topics (name, summary), or a topic's name, summary and content")
    g.add_argument("--pretty", action="store_true", help="the text (the default)")


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

def version() -> Any:
    """``barca version``'s result; its text is ``--version``'s."""
    from barca import __version__
    from barca.queries.manual import Version
    return Version(__version__)

def read(argv: list[str]) -> argparse.Namespace:
    """``argv`` by the full grammar (``barca.faces.commands.parse`` caches and copies it)."""
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
