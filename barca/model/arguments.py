"""Decorator arguments read from the source that say how a step runs, not what it computes
(``weight=``, ...): checked here when the file is read, so a bad value is a usage error on every
command, before any step runs. None of them is in the run hash."""
from __future__ import annotations

import ast
from typing import Any

from barca.core.errors import UsageError

HANDLED = ("weight",)


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
