"""What a command produced (``Outcome``), for a front end to render, and how a command line's
words are read (its first one a target, or a file; ``history``'s limit). Shared by the local
commands and ``--server``."""
from __future__ import annotations

from barca.core import jsontext  # (json's C half: no re, #31 item 2)

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

    from barca.core.settings import Settings
    from barca.faces.argv import Namespace


def history_limit(args: Namespace, default: int | None = 20) -> int | None:
    """``barca history``'s ``--limit N``, ``--all`` (None: every one) or ``default`` (runs;
    with a RUN_ID, steps); both at once, or ``--fields`` with ``--pretty``, is a usage
    error."""
    from barca.core.errors import UsageError
    if args.limit is not None and args.all:
        raise UsageError("--limit and --all cannot be used together.",
                         "Write --limit N for the newest N runs, or --all for every run.")
    if args.fields is not None and args.pretty:
        raise UsageError("--fields applies to JSON output.", "Drop --pretty, or use --json.")
    return None if args.all else default if args.limit is None else args.limit


def step_fields_doc(res: Any, fields: str) -> dict[str, Any]:
    """A run's (or a dry run's) JSON with only these keys of each step (``--fields``, checked
    before the run by faces.commands)."""
    from barca.present.results import keep_step_fields
    return keep_step_fields(res.to_json(), tuple(f.strip() for f in fields.split(",")
                                                 if f.strip()))


def split_target(args: list[str], takes_target: bool = True) -> tuple[str | None, list[str]]:
    """The first positional is a target unless it names a file or directory."""
    if not args or not takes_target:
        return None, list(args)
    from barca.api import looks_like_file
    if args[0].strip() and looks_like_file(args[0]):  # "" is an empty target, not the cwd
        return None, list(args)
    return args[0], list(args[1:])


class Outcome:
    """What a command produced, for a front end to render."""

    def __init__(self, command: str, result: Any, args: Namespace,
                 settings: Settings) -> None:
        self.command, self.result, self.args = command, result, args
        self.settings = settings

    def value_text(self, indent: int | None) -> str:
        """The targets' value as JSON (``-o value``); a value JSON cannot print is a usage
        problem: the result is cached, and ``-o path`` or ``barca.get()`` reach it."""
        from barca.identity.hashing import is_json_value
        value = self.result.value()

        def default(v: Any) -> Any:
            from barca.store import frames
            if frames.kind(v) is not None:  # a table: a list of row objects
                return frames.to_rows(v)
            if hasattr(v, "isoformat"):  # datetime, date, time, pandas Timestamp: ISO strings
                return v.isoformat()
            if hasattr(v, "item") and callable(v.item):  # a numpy scalar
                return v.item()
            if hasattr(v, "to_dict"):
                try:
                    return v.to_dict(orient="records")
                except TypeError:
                    return v.to_dict()
            raise TypeError(type(v).__name__)

        if is_json_value(value):
            return jsontext.dumps(value, ensure_ascii=False, indent=indent)
        try:
            return jsontext.dumps(value, default=default, ensure_ascii=False, indent=indent,
                              allow_nan=False)
        except (TypeError, ValueError) as exc:
            from barca.core.errors import UsageError
            kind = type(value).__name__
            why = "" if str(exc) == kind else f" ({exc})"
            raise UsageError(f"-o value: the value is a {kind}{why}, which JSON cannot print.",
                             "Use -o path for the artifact, or barca.get() in Python for the "
                             "value.") from None
