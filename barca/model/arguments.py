"""Decorator arguments read from the source that say how a step runs, not what it computes
(``weight=``, ...): checked here when the file is read, so a bad value is a usage error on every
command, before any step runs. None of them is in the run hash."""
from __future__ import annotations

import ast
from typing import Any, TypeGuard

from barca.core.errors import UsageError

HANDLED = ("weight",)
MAX_FAILURES = 5  # a schedule's default: consecutive failures before it stops firing


def fail(path: str, line: int, message: str, remediation: str) -> UsageError:
    return UsageError(f"{path}:{line}: {message}", remediation, file=path, line=line)


def read(path: str, node: Any, name: str, value: ast.expr) -> None:
    """Sets what ``name=value`` says on ``node`` (a ``NodeModel``)."""
    if name == "weight":
        node.weight = _weight(path, value)


def _weight(path: str, value: ast.expr) -> int:
    """An integer literal >= 1 (``True`` is not one, although Python says it is an int)."""
    num = value.value if isinstance(value, ast.Constant) else None
    if type(num) is not int or num < 1:
        raise fail(path, value.lineno, f"weight={ast.unparse(value)} is not a whole number >= 1",
                   "Write weight=2: how much of the capacity the step takes while it runs "
                   "(default 1; barca docs capacity).")
    return num


def schedule_call(value: ast.expr) -> TypeGuard[ast.Call]:
    """``Schedule(...)`` or ``barca.Schedule(...)``."""
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    return (isinstance(f, ast.Name) and f.id == "Schedule") or (
        isinstance(f, ast.Attribute) and f.attr == "Schedule")


def schedule(path: str, node: Any, call: ast.Call) -> None:
    """``Schedule("<cron>", max_failures=N)``: the cron by position, checked now (a bad one is
    exit 2 quoting it), and one keyword."""
    from barca.core.cron import CronError, parse
    line = call.lineno
    fix = 'Write freshness=Schedule("0 5 * * *") or Schedule("0 5 * * *", max_failures=3).'
    for kw in call.keywords:
        if kw.arg == "cron":
            raise fail(path, line, "Schedule() takes the cron by position, not as cron=", fix)
        if kw.arg != "max_failures":
            raise fail(path, line, f"Schedule() got an unexpected argument "
                       f"'{kw.arg or '**'}'; it takes a cron and max_failures=", fix)
        n = kw.value.value if isinstance(kw.value, ast.Constant) else None
        if type(n) is not int or n < 1:
            raise fail(path, line, f"Schedule(max_failures={ast.unparse(kw.value)}): "
                       "max_failures must be a whole number >= 1", fix)
        node.max_failures = n
    if len(call.args) != 1:
        raise fail(path, line, "Schedule() takes exactly one cron expression", fix)
    arg = call.args[0]
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        raise fail(path, line, f"Schedule({ast.unparse(arg)}): the cron must be a string "
                   "literal", fix)
    try:
        parse(arg.value)
    except CronError as exc:
        raise fail(path, line, f"Schedule({arg.value!r}): not a valid cron expression: {exc}",
                   "A cron has 5 fields (minute hour day-of-month month day-of-week) or 6 "
                   'with seconds first, e.g. "0 5 * * *" (05:00 every day); see barca docs '
                   "scheduling.") from None
    node.schedule = arg.value


def asset_ref(path: str, barca_attr: Any, fm: Any, value: ast.expr) -> str | None:
    """The node id an ``asset_ref("file.py:fn")`` input names, as written; None for any other
    expression. Exactly one positional string."""
    if not (isinstance(value, ast.Call) and barca_attr(fm, value.func) == "asset_ref"):
        return None
    arg = value.args[0] if len(value.args) == 1 and not value.keywords else None
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        raise fail(path, value.lineno, "asset_ref() takes exactly one positional string, the "
                   "node id", 'Write asset_ref("other.py:prices") (the file relative to the '
                   "project root, a colon, the function).")
    return arg.value
