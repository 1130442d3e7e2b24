"""The contracts `.ci/run` checks before the tests (`.ci/lint`): ruff, docs/design.md's layers as an
import-linter contract, one copy of the manual, no module past 520 lines. Each is shown to fail on
a copy of the checkout with one violation planted. And the inner loop stays fast."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from barca.core.errors import StepFailed

REPO = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())


def _checkout(tmp_path: Path) -> Path:
    copy = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".barca", "results")
    for name in ("barca", "tests", "bench", "docs", ".ci"):
        shutil.copytree(REPO / name, copy / name, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _lint(copy: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    # (mypy checks the copy from scratch: no cache)
    return subprocess.run([str(copy / ".ci" / "lint")], cwd=copy, env=env, text=True,
                          capture_output=True, timeout=300)


@pytest.mark.slow
def test_the_checkout_keeps_every_contract(tmp_path: Path) -> None:
    r = _lint(_checkout(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
def test_a_lint_error_fails_ci(tmp_path: Path) -> None:
    copy = _checkout(tmp_path)
    with (copy / "barca" / "core" / "render.py").open("a") as f:
        f.write("\nimport os\n")                      # F401: imported, never used
    r = _lint(copy)
    assert r.returncode != 0 and "F401" in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.slow
def test_an_import_that_breaks_a_layer_fails_ci(tmp_path: Path) -> None:
    copy = _checkout(tmp_path)
    store = copy / "barca" / "store" / "metadata.py"
    store.write_text(store.read_text() + "\n\ndef _show() -> None:\n"
                     "    from barca.faces.jupyter import widget  # noqa: F401\n")
    r = _lint(copy)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "not allowed to import" in out, out
    assert "barca.store.metadata -> barca.faces.jupyter.widget" in out, out


@pytest.mark.slow
def test_sqlite3_outside_the_store_fails_ci(tmp_path: Path) -> None:
    """The store package is the one owner of metadata.db (#27 item 4): a module above it that
    opens SQLite itself breaks a contract."""
    copy = _checkout(tmp_path)
    defcache = copy / "barca" / "engine" / "defcache.py"
    defcache.write_text(defcache.read_text() + "\n\ndef _rows() -> None:\n"
                        "    import sqlite3  # noqa: F401\n")
    r = _lint(copy)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "barca.engine.defcache -> sqlite3" in out, out


@pytest.mark.slow
def test_the_cli_reaching_past_commands_fails_ci(tmp_path: Path) -> None:
    copy = _checkout(tmp_path)
    cli = copy / "barca" / "faces" / "cli.py"
    cli.write_text(cli.read_text() + "\n\ndef _keep() -> None:\n"
                   "    from barca.api import warm  # noqa: F401\n")
    r = _lint(copy)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "barca.faces.cli -> barca.api.warm" in out, out


def test_the_cli_imports_only_the_faces_and_the_vocabulary() -> None:
    """``barca/faces/cli.py`` parses, calls ``faces.commands`` and renders (#27 item 4): of
    barca it imports only the faces and ``core`` (import-linter checks it too)."""
    import ast
    tree = ast.parse((REPO / "barca" / "faces" / "cli.py").read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    below = sorted(n for n in names if n.startswith("barca.")
                   and n.split(".")[1] not in ("core", "faces"))
    assert not below, f"barca/faces/cli.py imports {below} (go through barca.faces.commands)"


@pytest.mark.slow
def test_an_import_cycle_inside_a_layer_fails_ci(tmp_path: Path) -> None:
    """Modules of one package import in one direction (import-linter's acyclic_siblings):
    config reading settings back, as it once did, is a cycle."""
    copy = _checkout(tmp_path)
    config = copy / "barca" / "core" / "config.py"
    config.write_text(config.read_text() + "\n\ndef _size() -> None:\n"
                      "    from barca.core.settings import Settings  # noqa: F401\n")
    r = _lint(copy)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "No cycles are allowed in barca.core" in out, out


@pytest.mark.slow
def test_a_type_error_fails_ci(tmp_path: Path) -> None:
    copy = _checkout(tmp_path)
    with (copy / "barca" / "core" / "render.py").open("a") as f:
        f.write("\n\ndef _width() -> int:\n    return \"wide\"\n")
    r = _lint(copy)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "[return-value]" in out, out


@pytest.mark.slow
def test_a_fifteenth_type_ignore_fails_ci(tmp_path: Path) -> None:
    """``# type: ignore`` is kept for what typing cannot say: fewer than 15 in barca/ (each
    here silences a real error, so mypy itself passes)."""
    copy = _checkout(tmp_path)
    with (copy / "barca" / "core" / "render.py").open("a") as f:
        f.write("\n" + "".join(f"_X{i}: int = \"x\"  # type: ignore[assignment]\n"
                               for i in range(15)))
    r = _lint(copy)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "(fewer than 15)" in out, out


@pytest.mark.slow
def test_a_second_copy_of_the_manual_fails_ci(tmp_path: Path) -> None:
    copy = _checkout(tmp_path)
    shutil.copy(copy / "barca" / "docs" / "partitions.md", copy / "docs" / "partitions.md")
    r = _lint(copy)
    assert r.returncode != 0 and "a second copy of the manual: docs/partitions.md" in r.stderr, \
        r.stdout + r.stderr


@pytest.mark.slow
def test_a_module_past_its_size_fails_ci(tmp_path: Path) -> None:
    copy = _checkout(tmp_path)
    runner = copy / "barca" / "engine" / "runner.py"
    runner.write_text(runner.read_text() + "".join(f"# {i}\n" for i in range(600)))
    r = _lint(copy)
    assert r.returncode != 0 and "a module past 520 lines: barca/engine/runner.py" in r.stderr, \
        r.stdout + r.stderr


@pytest.mark.slow
def test_the_fast_subset_runs_in_under_a_minute() -> None:
    """`pytest -m "not slow"` is the inner loop: no subprocess, kernel or browser, and quick."""
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                        "not slow", str(REPO / "tests")], cwd=REPO, text=True,
                       capture_output=True, timeout=300)
    elapsed = time.monotonic() - start
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert " passed" in r.stdout and "deselected" in r.stdout, r.stdout[-500:]
    assert elapsed < 60, f"the fast subset took {elapsed:.0f} s"


def test_every_module_is_in_a_layer() -> None:
    """barca/ is its layers (docs/design.md): every subpackage is one layer of the contract, and
    beside them stand only the package's own entry points and its manual."""
    contract = next(c for c in CONFIG["tool"]["importlinter"]["contracts"]
                    if c["type"] == "layers")
    assert contract["containers"] == ["barca"] and contract["exhaustive"] is True
    entries = {p.name for p in (REPO / "barca").iterdir() if p.name != "__pycache__"}
    subpackages = {p.name for p in (REPO / "barca").iterdir() if (p / "__init__.py").is_file()}
    assert subpackages == set(contract["layers"]), subpackages ^ set(contract["layers"])
    assert entries - subpackages == {"__init__.py", "__main__.py", "docs"}, entries - subpackages
    assert len(entries) <= 15, sorted(entries)


def test_an_error_shows_itself_without_the_notebook_front_end() -> None:
    """Outside a kernel with %barca loaded, IPython asks the error itself: the step's traceback,
    the message and the fix, with no import of faces.jupyter (the engine's errors are a leaf)."""
    err = StepFailed("step 'sales' failed: RuntimeError: no feed", "Fix the cause.",
                     traceback='Traceback (most recent call last):\n  File "p.py", line 3, in '
                               'sales\nRuntimeError: no feed')
    lines = err._render_traceback_()
    assert lines == ["Traceback (most recent call last):", '  File "p.py", line 3, in sales',
                     "RuntimeError: no feed", "", "StepFailed: step 'sales' failed: "
                     "RuntimeError: no feed", "", "Fix the cause."]
