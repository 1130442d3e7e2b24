"""Run a notebook as a test: a fresh kernel (nbclient), one cell at a time, stopping at the first
cell that fails, with a message that names the notebook, the cell and the user's traceback.

Used by the pytest plugin (``pytest --barca-notebooks``) and the ``barca_project`` fixture's
``run_notebook``. nbclient and nbformat are imported when a notebook runs, never before: the
plugin is loaded by every pytest run of an environment that has barca installed."""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path
from typing import Any

# never copied into a test's project: the user's cache (the point of the copy), version
# control, caches and environments (large, and nothing a notebook reads)
SKIP_COPY = (".barca", ".git", "__pycache__", ".venv", ".ipynb_checkpoints", ".pytest_cache")
SKIP_TAG = "skip-test"
RAISES_TAG = "raises-exception"
PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_OUTPUT_LINES = 20  # the end of a failing cell's printed output, shown with its traceback


class NotebookFailed(AssertionError):
    """A cell failed (or did not raise when tagged ``raises-exception``); the message is the
    whole report: notebook, cell index, source, traceback."""


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def project_root(notebook: Path) -> Path:
    """The notebook's project: the nearest folder above it holding ``barca.toml``, else the
    notebook's own folder (where barca itself would look from the notebook's kernel)."""
    from barca.core.root import find_root
    return find_root(Path(notebook).resolve().parent)


def isolated_copy(notebook: Path, into: Path) -> Path:
    """Copy the notebook's project into ``into`` (without its ``.barca/``, so the run has a
    cache of its own and the user's is never read or written); the copy's notebook path."""
    root = project_root(notebook)
    dest = into / root.name
    copy_project(root, dest)
    return dest / notebook.resolve().relative_to(root)


def copy_project(source: Path, dest: Path) -> None:
    """Copy a project folder, without SKIP_COPY, nor the folder holding ``dest`` when it lies
    inside ``source`` (a temporary folder under the project: the copy would copy itself)."""
    dest = dest.resolve()
    skip = shutil.ignore_patterns(*SKIP_COPY)

    def ignore(folder: str, names: list[str]) -> set[str]:
        out = set(skip(folder, names))
        for name in names:
            p = Path(folder, name).resolve()
            if p == dest or p in dest.parents:
                out.add(name)
        return out
    shutil.copytree(source, dest, ignore=ignore, symlinks=True)


def parse_param(text: str) -> tuple[str, Any]:
    """``name=value``: the value as a Python literal (``3``, ``'a'``, ``[1, 2]``), else the
    text itself, as papermill's ``-p`` reads it."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise ValueError(f"--barca-param {text!r} is not NAME=VALUE with NAME a Python name")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw.strip()
    return name, value


def inject_parameters(nb: Any, parameters: dict[str, Any]) -> int | None:
    """Add a cell setting ``parameters`` after the cell tagged ``parameters`` (as papermill
    does: the notebook's defaults run first, the test's values override them). The new cell's
    index, or None when the notebook has no such cell."""
    import nbformat
    where = next((i for i, c in enumerate(nb.cells)
                  if PARAMETERS_TAG in c.get("metadata", {}).get("tags", ())), None)
    if where is None:
        return None
    source = "# parameters of this test run (barca's pytest plugin)\n" + "".join(
        f"{name} = {value!r}\n" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [INJECTED_TAG]})
    nb.cells.insert(where + 1, cell)
    return where + 1


def _report(name: str, index: int, cell: Any, what: str, body: str = "") -> str:
    source = "".join(cell.get("source", ""))
    lines = [f"{name}: cell {index} (counting from 0) {what}",
             "", "cell source:", *("    " + s for s in source.splitlines())]
    if body:
        lines += ["", body]
    return "\n".join(lines)


def _first_line(text: Any) -> str:
    lines = strip_ansi(str(text or "")).strip().splitlines()
    return lines[0] if lines else ""


def _printed(cell: Any) -> str:
    text = "".join(o.get("text", "") for o in cell.get("outputs", ())
                   if o.get("output_type") == "stream")
    tail = strip_ansi(text).rstrip().splitlines()[-_OUTPUT_LINES:]
    return ("output (its end):\n" + "\n".join(tail)) if tail else ""


def _error(cell: Any) -> dict[str, Any] | None:
    return next((o for o in cell.get("outputs", ()) if o.get("output_type") == "error"), None)


def run_notebook(path: Path, cwd: Path | None = None, parameters: dict[str, Any] | None = None,
                 timeout: float | None = None, kernel_name: str | None = None,
                 name: str | None = None) -> Any:
    """Execute the notebook at ``path`` in a fresh kernel whose working directory is ``cwd``
    (the notebook's folder by default); the executed notebook. Raises NotebookFailed at the
    first failing cell. ``skip-test`` cells are not run; ``raises-exception`` cells must raise."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    path = Path(path)
    name = name or path.name
    nb = nbformat.read(path, as_version=4)
    injected = None
    if parameters:
        injected = inject_parameters(nb, parameters)
        if injected is None:
            raise NotebookFailed(f"{name}: parameters {sorted(parameters)} were given, but no "
                                 f"cell is tagged '{PARAMETERS_TAG}' to override")
    kernel = kernel_name or nb.metadata.get("kernelspec", {}).get("name") or "python3"
    # allow_errors: the loop below judges each cell itself (tags, the report's wording)
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel, allow_errors=True,
                            resources={"metadata": {"path": str(cwd or path.parent)}})
    from jupyter_client.kernelspec import NoSuchKernel
    try:
        client.km = client.create_kernel_manager()
        client.km.kernel_spec  # noqa: B018 - a missing kernel: one line, not a traceback
    except NoSuchKernel:
        raise NotebookFailed(f"{name}: no Jupyter kernel named {kernel!r} (`jupyter kernelspec "
                             "list` shows them; --barca-kernel picks one)") from None
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            # the index the user sees in their own file: the injected cell is not in it
            shown = i if injected is None or i < injected else i - 1
            label = "(the injected parameters)" if i == injected else ""
            tags = set(cell.get("metadata", {}).get("tags", ()))
            if SKIP_TAG in tags:
                continue
            try:
                client.execute_cell(cell, i)
            except CellTimeoutError:
                raise NotebookFailed(_report(name, shown, cell,
                                             f"timed out after {timeout:g}s {label}".rstrip(),
                                             _printed(cell))) from None
            except DeadKernelError as exc:
                raise NotebookFailed(_report(name, shown, cell, "killed the kernel",
                                             str(exc))) from None
            err = _error(cell)
            if RAISES_TAG in tags:
                if err is None:
                    raise NotebookFailed(_report(
                        name, shown, cell, f"is tagged '{RAISES_TAG}' but raised nothing"))
            elif err is not None:
                tb = strip_ansi("\n".join(err.get("traceback", ()))).strip()
                tb = tb or f"{err.get('ename')}: {err.get('evalue')}"
                body = "\n\n".join(p for p in (_printed(cell), "traceback:\n" + tb) if p)
                raise NotebookFailed(_report(
                    name, shown, cell, f"failed {label}".rstrip() +
                    f": {err.get('ename')}: {_first_line(err.get('evalue'))}", body))
    return nb
