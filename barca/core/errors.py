"""The errors barca raises on purpose; each knows its exit code and how to render itself."""
from __future__ import annotations

from barca.core import jsontext  # (json's C half: no re, #31 item 2)

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any


def redact(text: str) -> str:
    """Text with every URL's user and password parts shown as ``***``
    (``ftp://user:pw@host/x`` -> ``ftp://***@host/x``): a store or scheduler address with
    credentials in it is never echoed by a message, JSON or log."""
    if "@" not in text:
        return text
    import re
    return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]+@", r"\1***@", text)


class BarcaError(Exception):
    """Base of every error barca raises on purpose."""

    kind = "error"
    code = 1

    def __init__(self, message: str, remediation: str = "", tight: bool = False,
                 **extra: Any) -> None:
        message, remediation = redact(message), redact(remediation)
        super().__init__(message)
        self.message = message
        self.remediation = remediation
        self.tight = tight          # the remediation follows on the next line, no blank line
        self.extra = extra

    def __str__(self) -> str:
        if self.remediation:
            return f"{self.message}{chr(10) if self.tight else chr(10) * 2}{self.remediation}"
        return self.message

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "error": self.message,
            "code": self.code,
            "kind": self.kind,
            "remediation": self.remediation,
        }
        out.update(self.extra)
        return out

    def json_line(self) -> str:
        return jsontext.dumps(self.to_json(), default=str)

    def _render_traceback_(self) -> list[str]:
        """How IPython shows this error: the step's own traceback (if any), the message and
        the fix, not barca's internals. With the ``%barca`` extension loaded, the kernel draws
        it coloured, as IPython draws a cell's (``barca.faces.jupyter.tracebacks``); this plain form
        is for shells without it, and keeps the engine free of front-end imports."""
        lines = str(self.extra["traceback"]).splitlines() + [""] if self.extra.get(
            "traceback") else []
        lines.append(f"{type(self).__name__}: {self.message}")
        if self.remediation:
            lines += ["", self.remediation]
        return lines


class UsageError(BarcaError):
    """Bad flags, unknown targets, files that do not parse, DAG and partition errors (exit 2)."""

    kind = "usage"
    code = 2


class StepFailed(BarcaError):
    """A user function raised; carries the partial result (exit 1)."""

    kind = "step_failed"
    code = 1

    def __init__(self, message: str, remediation: str = "", result: Any = None, **extra: Any):
        super().__init__(message, remediation, **extra)
        self.result = result


class InfrastructureError(BarcaError):
    """The store, the metadata database or the workers failed (exit 3)."""

    kind = "infrastructure"
    code = 3


class Cancelled(BarcaError):
    """Ctrl-C or SIGTERM (exit 130)."""

    kind = "cancelled"
    code = 130


def did_you_mean(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """`` Did you mean 'x'?`` for the closest choice, or an empty string."""
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""
