"""``--server [URL]`` on the command line and in ``%barca``: the parsed command sent to a
``barca serve`` (``barca.api.server``), its answer returned as the same ``Outcome`` a local
command gives, so ``faces.cli.render`` prints it unchanged."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from barca.core.errors import UsageError

if TYPE_CHECKING:
    from barca.core.settings import Settings
    from barca.faces.argv import Namespace
    from barca.faces.outcome import Outcome

# the commands that run on a server with --server
SERVER_COMMANDS = ("get", "run", "status", "list", "history", "stats", "logs", "sql", "doctor")

# what follows a bare --server only when it is an address, never a target (`get --server
# report` is the target report on the default server)
_ADDRESS = re.compile(r"^(https?://|\[[0-9a-fA-F:]+\]|localhost(:\d+)?(/|$)|"
                      r"[A-Za-z0-9.-]+:\d+(/|$)|\d+\.\d+\.\d+\.\d+)")


def server_argv(argv: list[str]) -> list[str]:
    """``--server`` followed by an address becomes ``--server=ADDRESS``; a bare one
    ``--server=``: argparse never takes a target for the URL."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--server":
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is not None and _ADDRESS.match(nxt):
                out.append("--server=" + nxt)
                i += 2
                continue
            out.append("--server=")
        else:
            out.append(a)
        i += 1
    return out


def wanted(args: Namespace) -> bool:
    return getattr(args, "server", None) is not None and not getattr(args, "local", False)


def _refuse(args: Namespace) -> None:
    """Flags that mean something only here: the server runs with its own settings."""
    for attr, flag in (("env", "--env"), ("executor", "--executor")):
        if getattr(args, attr, None):
            raise UsageError(f"{flag} does not apply with --server: the server runs with its "
                             "own environment and executor.",
                             f"Drop {flag}, or run the command here with --local.")
    if getattr(args, "output", None) == "path":
        raise UsageError("-o path with --server: the artifacts are on the server, not here.",
                         "Use -o value for the value, or --json for the run document.")
    if getattr(args, "widget", False):
        raise UsageError("--widget with --server: the widget watches a local project.",
                         "Open the server's web UI (/ui/), or drop --widget.")


def dispatch(args: Namespace, on_event: Any, load_values: bool,
             settings: Settings, sql_limit: int | None = 100) -> Outcome:
    """The command run on the server: the Outcome a local run gives."""
    from barca.api import served as remote
    from barca.faces.outcome import Outcome, split_target
    cmd = args.command
    if cmd != "doctor":  # doctor checks this machine too, with its own --env
        _refuse(args)
    srv = remote.Server.at(args.server, settings.root)
    if cmd in ("get", "run"):
        if args.as_type is not None:
            from barca.store.frames import check_type
            check_type(args.as_type)
        target, files = split_target(args.args)
        if cmd == "run" and target is None:
            raise UsageError("barca run needs a task name.", "Write: barca run TASK [files]")
        res = remote.materialize(srv, target, *files, command=cmd, refresh=args.refresh,
                                 refresh_all=args.refresh_all, no_cascade=args.no_cascade,
                                 partition=args.partition, dry_run=args.dry_run,
                                 values=args.output == "value", fetch=load_values,
                                 on_event=on_event)
    elif cmd == "status":
        target, _files = split_target(args.args)
        res = remote.status(srv, target)
    elif cmd == "list":
        from barca.present.listview import as_asked
        res = as_asked(remote.list_nodes(srv, groups=args.groups), args)
    elif cmd == "history":
        if args.run is not None:  # (the server answers the list of runs, not one in detail)
            raise UsageError(f"`barca history {args.run}` reads this machine's records; a "
                             "server answers the list of runs.",
                             f"Run: barca history {args.run} --local")
        from barca.faces.outcome import history_limit
        res = remote.history(srv, history_limit(args), status=args.status,
                             triggered_by=args.triggered_by, target=args.target,
                             since=args.since, fields=args.fields)
    elif cmd == "stats":
        target, _files = split_target(args.args)
        res = remote.stats(srv, target or "", fields=args.fields)
    elif cmd == "logs":
        res = remote.logs(srv, args.run_id, step=args.step, stream=args.stream,
                          timestamps=args.timestamps)
    elif cmd == "sql":  # the views from the server; the query runs here
        limit = None if args.all else (args.limit if args.limit is not None else sql_limit)
        res = remote.sql(srv, args.query, *args.args, limit=limit, settings=settings)
    elif cmd == "doctor":  # this machine's checks, then the server's
        from barca.core.errors import BarcaError
        from barca.queries.doctor import Checkup, checkup
        here = checkup(*args.args, env=args.env)
        try:  # the project's store, to compare with the server's (doctor resolves no file)
            mine = type(settings).resolve(settings.root, env=args.env)
        except BarcaError:  # an invalid barca.toml: a finding of the checks above
            mine = settings
        from barca import __version__
        res = Checkup(here.checks + tuple(remote.server_checks(srv, mine, __version__)))
    else:
        raise UsageError(f"`barca {cmd}` does not take --server.",
                         f"--server applies to: {', '.join(SERVER_COMMANDS)}.")
    return Outcome(cmd, res, args, settings)


def more_logs(args: Namespace, run_id: str, after: int, settings: Settings) -> Any:
    """``logs -f --server``: the run's lines after line ``after``."""
    from barca.api import served as remote
    from barca.present.journal import StepLog
    log = remote.logs(remote.Server.at(args.server, settings.root), run_id, step=args.step,
                      stream=args.stream, timestamps=args.timestamps)
    fields = {f: getattr(log, f) for f in StepLog.__slots__}
    fields["lines"] = tuple(x for x in log.lines if x.id > after)
    return StepLog(**fields)
