"""A command line read, and its dispatch, shared by the CLI and the ``%barca`` magic.

``parse`` raises ``UsageError`` instead of exiting; ``dispatch`` calls the API and returns a
result object. Neither prints. The grammar (argparse, barca.faces.grammar) is imported only for
a line the plain reader (barca.faces.argv) leaves to it: a cached ``barca get`` never loads it."""
from __future__ import annotations

from barca.core.errors import UsageError
from barca.faces.argv import COMMANDS, Namespace  # noqa: F401 (COMMANDS: re-exported)
from barca.faces.argv import read as read_plain
from barca.faces.outcome import (  # noqa: F401 (used, and re-exported)
    Outcome,
    history_limit,
    split_target,
)

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

    from barca.core.settings import Settings


_PARSED: dict[tuple[str, ...], Namespace] = {}


def parse(argv: list[str]) -> Namespace:
    """The command line as a namespace; flags may come before or after targets and files.
    A line parsed before is not parsed again (a kernel runs the same magic many times)."""
    got = _PARSED.get(tuple(argv))
    if got is None:
        plain = read_plain(argv)
        if plain is None:
            from barca.faces import grammar
            got = Namespace(**vars(grammar.read(argv)))
        else:
            got = plain
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[tuple(argv)] = got
    # a copy: a caller may change the namespace or its lists
    return Namespace(**{k: list(v) if isinstance(v, list) else v for k, v in vars(got).items()})


# commands that read no project setting: they run whatever barca.toml says (doctor reports
# an invalid file as one of its findings, so it resolves its settings itself)
_NO_PROJECT = ("docs", "version", "doctor")


def resolve(args: Namespace) -> Settings:
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
    import barca.api
    barca.api.keeping = False


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


def dispatch(args: Namespace, on_event: Any = None, load_values: bool = False,
             default_sql_limit: int | None = 100, settings: Settings | None = None) -> Outcome:
    """Run the command with ``settings`` (default: ``resolve(args)``), passed down as a value:
    nothing is written into the environment."""
    if settings is None:
        settings = resolve(args)
    return _dispatch(args, on_event, load_values, default_sql_limit, settings)


def _dispatch(args: Namespace, on_event: Any, load_values: bool,
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
        if args.fields is not None:  # before anything runs: a JSON-only option, checked
            from barca.present.results import STEP_FIELDS
            from barca.present.statusview import field_names
            field_names("--fields", args.fields, STEP_FIELDS)
            if args.pretty or args.output in ("pretty", "value", "path"):
                raise UsageError(f"--fields applies to JSON output, not to "
                                 f"{'--pretty' if args.pretty else '-o ' + args.output}.",
                                 "Drop --fields, or use --json.")
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
        from barca.present.listview import as_asked
        from barca.queries.listing import list_nodes
        return Outcome(cmd, as_asked(list_nodes(*args.args, settings=s, groups=args.groups),
                                     args), args, s)
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
        return Outcome(cmd, api.plan(*args.args, target=args.target, partition=args.partition,
                                     settings=s, on_event=on_event), args, s)
    if cmd == "stats":
        from barca.queries.stats import stats_report
        target, files = split_target(args.args)
        return Outcome(cmd, stats_report(target or "", *files, fields=args.fields,
                                         settings=s), args, s)
    if cmd == "history" and args.run is not None:  # one run in detail
        given = [f for f in ("status", "target", "triggered_by", "since", "fields")
                 if getattr(args, f) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UsageError(f"{flag} narrows the list of runs; `barca history {args.run}` "
                             "shows one run.", f"Drop {flag}, or the run id.")
        from barca.queries.runlog import run_detail
        return Outcome(cmd, run_detail(args.run, history_limit(args, 1000), settings=s),
                       args, s)
    if cmd == "history":
        # without --limit or --all: every run in JSON, the newest TABLE_RUNS in a table (as
        # barca 0.30.2)
        runs = api.history(history_limit(args, None), settings=s, status=args.status,
                           triggered_by=args.triggered_by, target=args.target,
                           since=args.since, fields=args.fields)
        if args.limit is None and not args.all:
            from barca.present.journal import TABLE_RUNS
            runs = type(runs)(runs.runs, runs.total, runs.fields, TABLE_RUNS)
        return Outcome(cmd, runs, args, s)
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
        from barca.queries.manual import every_page, page
        if args.all and args.topic:
            raise UsageError("barca docs --all shows every topic; it takes no topic.",
                             f"Write barca docs {args.topic}, or barca docs --all.")
        return Outcome(cmd, every_page() if args.all else page(args.topic), args, s)
    if cmd == "version":
        from barca.faces.grammar import version
        return Outcome(cmd, version(), args, s)
    if cmd == "serve":
        raise UsageError("barca serve runs from a terminal, not from here.",
                         "Start it in a shell: barca serve")
    raise UsageError(f"Unknown command '{cmd}'.", f"Commands: {', '.join(COMMANDS)}.")
