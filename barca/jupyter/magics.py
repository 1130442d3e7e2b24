"""``%barca`` and ``%%barca``: the CLI's grammar, parsed by the CLI's own parser, returning
Python objects instead of printing text."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class

from barca.errors import StepFailed, UsageError


def run_magic(line: str, cell: str | None = None) -> Any:
    from barca.commands import dispatch, parse
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%barca: cannot parse the line ({exc})",
                         "Check the quotes: %barca sql \"select * from prices\"") from None
    if cell is not None:
        return _cell(argv, cell)
    try:
        ns = parse(argv)
    except SystemExit:  # --help / --version printed by argparse
        return None
    if ns.command == "status" and getattr(ns, "widget", False):
        from barca.jupyter.widget import StatusWidget
        return StatusWidget(*ns.args, env=getattr(ns, "env", None))
    progress = None
    if ns.command in ("get", "run") and not ns.dry_run:
        from barca.jupyter.progress import NotebookProgress
        progress = NotebookProgress()
    import os
    saved = {k: os.environ.get(k) for k in ("BARCA_ENV", "BARCA_EXECUTOR")}
    try:
        outcome = dispatch(ns, on_event=progress or (lambda e: None), load_values=True,
                           default_sql_limit=None)
    except StepFailed as exc:
        _show_failures(progress, exc)
        raise
    finally:  # --env / --executor apply to this command, not to the rest of the kernel
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return _value(outcome)


def _show_failures(progress: Any, exc: StepFailed) -> None:
    from IPython.display import display
    failures = progress.failures if progress is not None else []
    for f in failures:
        text = f"[barca] step:{f.step} failed: {f.error}"
        if f.traceback:
            text = f.traceback.rstrip() + "\n" + text
        display({"text/plain": text}, raw=True)


def _value(outcome: Any) -> Any:
    res, cmd = outcome.result, outcome.command
    if cmd in ("get", "run") and hasattr(res, "outputs"):
        name = getattr(outcome.args, "as_type", None)
        if name is not None:
            from barca.frames import as_type
            if len(res.outputs) == 1:
                return as_type(res.outputs[0].values, name, res.outputs[0].partitioned)
            return {o.target: as_type(o.values, name, o.partitioned) for o in res.outputs}
        if len(res.outputs) == 1:
            return res.outputs[0].values
        return {o.target: o.values for o in res.outputs}
    if cmd == "sql":
        return res.to_pandas()
    if cmd == "docs":
        from IPython.display import Markdown
        return Markdown(res)
    if cmd == "history":
        try:
            import pandas as pd
            return pd.DataFrame(res)
        except ImportError:  # pragma: no cover
            return res
    return res


def _cell(argv: list[str], body: str) -> Any:
    if argv and argv[0] == "sql":  # the cell is the query; the line may add files and flags
        return run_magic(shlex.join(["sql", body.strip(), *argv[1:]]))
    if len(argv) == 2 and argv[0] == "pipeline":
        name = argv[1]
        inside = Path(name).resolve().is_relative_to(Path.cwd().resolve())
        if not name.endswith(".py") or not inside:
            raise UsageError(f"%%barca pipeline: '{name}' is not a .py file in this folder",
                             "Write %%barca pipeline my_pipeline.py")
        Path(name).write_text(body if body.endswith("\n") else body + "\n", encoding="utf-8")
        from barca import api
        return api.list_nodes(name)
    raise UsageError("%%barca takes `sql` (the cell is the query) or `pipeline NAME.py` (the "
                     "cell is written to that file).",
                     "Write %%barca sql, or %%barca pipeline pipeline.py, on the first line.")


@magics_class
class BarcaMagics(Magics):
    @line_cell_magic
    def barca(self, line: str, cell: str | None = None) -> Any:
        """Run a barca command: ``%barca get report pipeline.py``. See ``%barca --help``."""
        return run_magic(line, cell)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(BarcaMagics)
