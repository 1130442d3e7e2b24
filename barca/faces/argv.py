"""The everyday command lines read without argparse: ``barca get|run|status`` with targets,
files and plain on/off flags (``--json``, ``--agent``, ...). Importing and running argparse
(with gettext and locale, which it loads to translate its messages) cost a cached ``barca get``
more than its own work; anything else -- an option with a value, ``--help``, two output modes,
a flag given twice, an abbreviation, a typo -- goes to the full grammar
(barca.faces.commands), which says what is wrong exactly as before.

``FAST`` holds, per command, the namespace the grammar makes when no flag is given (in its
order) and the on/off flags read here; tests/test_cli_argv.py checks both against the grammar,
so a flag added there and not here fails a test rather than reading a line differently."""
from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from types import SimpleNamespace as Namespace
else:  # types.SimpleNamespace without importing types: sys.implementation is one
    Namespace = type(sys.implementation)

COMMANDS = ("get", "run", "list", "status", "graph", "sql", "plan", "history", "logs", "gc",
            "doctor", "docs", "version", "stats", "serve")

_RUN: dict[str, bool | None] = {
    "refresh": None, "no_cascade": False, "refresh_all": False, "partition": None,
    "dry_run": False, "fields": None, "agent": False, "executor": None, "output": None,
    "run_id": None,
    "schedule_id": None, "as_type": None, "env": None, "json": False, "pretty": False,
    "server": None, "local": False}
_RUN_FLAGS = ("--no-cascade", "--refresh-all", "--dry-run", "--agent", "--json", "--pretty",
              "--local")

FAST: dict[str, tuple[dict[str, bool | None], tuple[str, ...]]] = {
    "get": (_RUN, _RUN_FLAGS),
    "run": (_RUN, _RUN_FLAGS),
    "status": ({"widget": False, "limit": None, "all": False, "fields": None, "state": None,
                "problems": False, "sample": None, "env": None, "json": False, "pretty": False,
                "server": None, "local": False},
               ("--widget", "--all", "--problems", "--json", "--pretty", "--local")),
}


def read(argv: list[str]) -> Namespace | None:
    """``argv`` as the grammar reads it, or None where only the grammar may say (see above)."""
    if not argv or argv[0] not in FAST:
        return None
    defaults, flags = FAST[argv[0]]
    got: dict[str, object] = dict(defaults)
    positional: list[str] = []
    seen: set[str] = set()
    for a in argv[1:]:
        if not a.startswith("-"):
            positional.append(a)
        elif a in flags and a not in seen:
            seen.add(a)
            got[a[2:].replace("-", "_")] = True
        else:
            return None
    if "--json" in seen and "--pretty" in seen:  # the grammar's error, in its words
        return None
    got["args"] = positional
    got["command"] = argv[0]
    return Namespace(**got)
