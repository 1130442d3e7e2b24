"""barca's pytest plugin (the ``pytest11`` entry point ``barca``): notebooks as tests, and the
``barca_project`` fixture. See ``barca docs testing``.

- ``pytest --barca-notebooks [PATHS]``: every ``*.ipynb`` under PATHS is one test item, run in
  a fresh kernel inside a temporary copy of its project, with a ``.barca/`` of its own.
- ``barca_project(path_or_dict)``: a project in ``tmp_path``; ``.get``/``.run``/``.status``.

pytest loads this module in every run of an environment with barca installed, so it imports
nothing but pytest and the standard library; barca, nbclient and nbformat load when a notebook
item runs or the fixture is used."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

_PARAMS = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("barca", "barca notebooks")
    group.addoption("--barca-notebooks", action="store_true", default=False,
                    help="collect every *.ipynb under the given paths as a test: it runs in a "
                         "fresh kernel, in a temporary copy of its project")
    group.addoption("--barca-timeout", type=float, default=None, metavar="SECONDS",
                    help="fail a notebook cell that runs longer than this (default: no limit)")
    group.addoption("--barca-param", action="append", default=[], metavar="NAME=VALUE",
                    help="override a variable of the cell tagged 'parameters' (VALUE is read "
                         "as a Python literal, else as text); repeatable")
    group.addoption("--barca-kernel", default=None, metavar="NAME",
                    help="the Jupyter kernel to run notebooks in (default: the notebook's own)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "barca_notebook: a notebook run by --barca-notebooks")
    params: dict[str, Any] = {}
    for text in config.getoption("barca_param") or ():
        from barca.faces.nbrun import parse_param  # only when asked: every pytest run is here
        try:
            name, value = parse_param(text)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        params[name] = value
    config.stash[_PARAMS] = params


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix == ".ipynb" and parent.config.getoption("barca_notebooks") \
            and ".ipynb_checkpoints" not in file_path.parts:
        return NotebookFile.from_parent(parent, path=file_path)
    return None


class NotebookFile(pytest.File):
    def collect(self) -> Any:
        item = NotebookItem.from_parent(self, name=self.path.name)
        item.add_marker("barca_notebook")  # -m "not barca_notebook" leaves them out
        yield item


class NotebookItem(pytest.Item):
    """One notebook, run top to bottom. Its project is copied without ``.barca/`` into a
    temporary folder, removed after: the user's cache is neither read nor written."""

    def runtest(self) -> None:
        from barca.faces.nbrun import PARAMETERS_TAG, run_notebook
        config = self.config
        stored = config.stash.get(_PARAMS, None)
        params = dict(stored) if stored is not None else {}
        with tempfile.TemporaryDirectory(prefix="barca-notebook-") as tmp:
            from barca.faces.nbrun import isolated_copy
            copy = isolated_copy(self.path, Path(tmp))
            if params and not _has_tag(copy, PARAMETERS_TAG):
                params = {}  # --barca-param is for the notebooks that declare parameters
            run_notebook(copy, cwd=copy.parent, parameters=params,
                         timeout=config.getoption("barca_timeout"),
                         kernel_name=config.getoption("barca_kernel"),
                         name=self._display_name())

    def _display_name(self) -> str:
        try:
            return str(self.path.relative_to(self.config.rootpath))
        except ValueError:
            return str(self.path)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        from barca.faces.nbrun import NotebookFailed
        if isinstance(excinfo.value, NotebookFailed):
            return str(excinfo.value)  # the kernel's traceback; nbclient's frames say nothing
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"notebook {self._display_name()}"


def _has_tag(path: Path, tag: str) -> bool:
    import json
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", ())
    return any(tag in c.get("metadata", {}).get("tags", ()) for c in cells)


@pytest.fixture
def barca_project(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """``barca_project(path_or_dict)``: a copy of a project folder (without its ``.barca/``),
    or ``{relative path: text}`` written out, under ``tmp_path``; a BarcaProject
    (``barca.faces.testing``) with ``.root``, ``.write``, ``.get``, ``.run``, ``.status``,
    ``.run_notebook``."""
    from barca.faces.testing import new_project
    timeout = request.config.getoption("barca_timeout", None)

    def make(source: Any) -> Any:
        return new_project(tmp_path, source, timeout=timeout)
    return make
