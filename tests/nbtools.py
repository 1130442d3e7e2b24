"""Run notebooks for real: nbclient, a fresh kernel, every iopub message recorded."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # nbformat and nbclient are imported when a notebook is made or run: their
    import nbformat  # import (jsonschema's format checkers) costs seconds at every collection
    from nbclient import NotebookClient


def _recording_client(*a: Any, **kw: Any) -> NotebookClient:
    """An nbclient that keeps every output message per cell (display updates included)."""
    from nbclient import NotebookClient

    class RecordingClient(NotebookClient):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.messages: dict[int, list[dict[str, Any]]] = {}

        def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
            self.messages.setdefault(cell_index, []).append(msg)
            return super().process_message(msg, cell, cell_index)

    return RecordingClient(*a, **kw)


def notebook(*cells: str) -> nbformat.NotebookNode:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path, allow_errors: bool = True,
            kernel_name: str = "python3", timeout: int = 120) -> Any:
    client = _recording_client(nb, timeout=timeout, kernel_name=kernel_name,
                               allow_errors=allow_errors,
                               resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return client


def outputs(nb: nbformat.NotebookNode, i: int) -> list[dict[str, Any]]:
    return nb.cells[i].get("outputs", [])


def result(nb: nbformat.NotebookNode, i: int) -> dict[str, Any]:
    """The execute_result data of cell i."""
    for o in outputs(nb, i):
        if o["output_type"] == "execute_result":
            return o["data"]
    raise AssertionError(f"cell {i} has no result: {outputs(nb, i)}")


def error(nb: nbformat.NotebookNode, i: int) -> dict[str, Any] | None:
    for o in outputs(nb, i):
        if o["output_type"] == "error":
            return o
    return None


def text(nb: nbformat.NotebookNode, i: int) -> str:
    parts = []
    for o in outputs(nb, i):
        if o["output_type"] == "stream":
            parts.append(o["text"])
        elif "data" in o and "text/plain" in o["data"]:
            parts.append(o["data"]["text/plain"])
    return "\n".join(parts)
