"""What a command produced (``Outcome``), for a front end to render, and how a command line's
first word is read (a target, or a file). Shared by the local commands and ``--server``."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from barca.core.settings import Settings


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

    def __init__(self, command: str, result: Any, args: argparse.Namespace,
                 settings: Settings) -> None:
        self.command, self.result, self.args = command, result, args
        self.settings = settings
