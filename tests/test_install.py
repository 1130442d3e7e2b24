"""Installs as a newcomer makes them: a core install (no extras), and the README's install in a
fresh virtualenv, whose new kernels have %barca without %load_ext."""
from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO
from nbtools import execute, notebook, result

import barca

# The documented API (README, engine.md): decorators, errors, the engine's functions.
PUBLIC = {
    "Always", "Manual", "Schedule", "asset", "sensor", "task", "sink", "collect", "partitions",
    "partitions_from", "BarcaError", "UsageError", "StepFailed", "InfrastructureError",
    "Cancelled", "get", "run", "status", "list_nodes", "plan", "sql", "history", "graph",
    "load_ipython_extension", "__version__",
    # the pipeline vocabulary (barca docs references, ...)
    "asset_ref", "group", "unsafe", "stats", "parallel", "parallel_map", "ParallelError",
    "BranchResultError", "duckdb_connection",
}


def test_all_is_exactly_the_public_names() -> None:
    assert set(barca.__all__) == PUBLIC
    assert len(barca.__all__) == len(set(barca.__all__))
    # every public name that the module binds itself is in __all__ (no stray imports)
    bound = {n for n, v in vars(barca).items()
             if not n.startswith("_") and not inspect.ismodule(v)}
    assert bound <= PUBLIC, bound - PUBLIC
    # the widget needs the [jupyter] extra: reachable as barca.StatusWidget, not star-imported
    assert "StatusWidget" not in barca.__all__
    assert barca.StatusWidget.__name__ == "StatusWidget"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """barca built as a wheel, once for this module, without the network."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(REPO)], check=True, timeout=300)
    return next(out.glob("*.whl"))


def _venv(path: Path, see_outer: bool) -> Path:
    """A fresh virtualenv. With ``see_outer``, it also sees the packages of the environment
    running the tests (a ``.pth`` line per site directory: that works whether the tests run
    in a virtualenv or not, unlike ``--system-site-packages``), but not its barca."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    py = path / "bin" / "python"
    if see_outer:
        purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig."
                                  "get_paths()['purelib'])"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        outer = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"],
                               sysconfig.get_paths()["platlib"]])
        Path(purelib, "_outer_env.pth").write_text("".join(f"{d}\n" for d in outer))
    return py


@pytest.mark.slow
def test_core_install_star_import_and_seed(tmp_path: Path, wheel: Path) -> None:
    """A core install has no dependency at all: `from barca import *` and the seed page's
    first command work with the standard library alone."""
    py = _venv(tmp_path / "venv", see_outer=False)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   timeout=300)
    code = ("import importlib.util, barca\n"
            "from barca import *\n"
            "missing = [n for n in barca.__all__ if n not in globals()]\n"
            "print(missing, importlib.util.find_spec('ipywidgets') is None, "
            "importlib.util.find_spec('pandas') is None)")
    proc = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "True", "True"]
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(REPO / "examples" / "seed" / "pipeline.py", work)
    (work / "feed_version.txt").write_text("v1\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BARCA_OUTPUT")}
    run = subprocess.run([str(py), "-m", "barca", "get", "report", "pipeline.py", "--pretty"],
                         capture_output=True, text=True, cwd=work, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert "[barca] 8/8 steps" in run.stderr
    # the barca command is barca's own script, whichever pip installed it (this venv's own,
    # pip 23 on Python 3.11, writes an entry point's launcher that imports re first)
    script = py.parent / "barca"
    assert script.read_text().splitlines()[0] == f"#!{py}"
    run = subprocess.run([str(script), "status", "pipeline.py", "--json"], capture_output=True,
                         text=True, cwd=work, timeout=120,
                         env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert run.returncode == 0 and json.loads(run.stdout)["nodes"], run.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:")}
    assert "barca.faces.cli" in imported and "re" not in imported, sorted(imported)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["editable", "regular"])
def test_readme_install_autoloads_the_magic(tmp_path: Path, wheel: Path, how: str) -> None:
    """The README's install (`pip install -e ...`; a regular install too) in a fresh
    virtualenv: a new kernel of that environment has %barca with no %load_ext."""
    venv = tmp_path / "venv"
    py = _venv(venv, see_outer=True)  # ipykernel and the rest come from the test environment
    target = ["-e", str(REPO)] if how == "editable" else [str(wheel)]
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    *target], check=True, timeout=300)
    assert (venv / "etc" / "ipython" / "ipython_kernel_config.json").is_file()
    kernels = tmp_path / "jupyter" / "kernels" / "barca-venv"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "barca venv", "language": "python"}))
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(REPO / "examples" / "seed" / "pipeline.py", work)
    (work / "feed_version.txt").write_text("v1\n")
    # the kernel is started with this process's environment: point Jupyter at the venv's
    # kernel, and let nothing but the venv decide which barca it imports
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "PYTHONPATH")}
    os.environ["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    os.environ.pop("PYTHONPATH", None)
    try:
        nb = notebook("import barca, sys\nsys.prefix", "%barca get report pipeline.py",
                      "barca.__file__")
        execute(nb, work, kernel_name="barca-venv", allow_errors=False)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert ast.literal_eval(result(nb, 0)["text/plain"]) == str(venv)
    assert ast.literal_eval(result(nb, 1)["text/plain"])["tickers"] == 3
    where = ast.literal_eval(result(nb, 2)["text/plain"])
    expected = REPO if how == "editable" else venv
    assert Path(where).resolve().is_relative_to(expected.resolve()), where


def test_the_manual_has_one_copy() -> None:
    """`barca/docs/` is the manual (packaged, printed by `barca docs`); `docs/` only points at
    it: no page there repeats one of the package's."""
    pages = {p.name: p.read_bytes() for p in (REPO / "barca" / "docs").glob("*.md")}
    others = [p for p in (REPO / "docs").rglob("*") if p.is_file()]
    assert not [p.name for p in others if p.name in pages or p.read_bytes() in pages.values()]
    index = (REPO / "docs" / "README.md").read_text()
    assert all(f"../barca/docs/{name}" in index for name in pages if name != "index.md"), \
        [n for n in pages if f"../barca/docs/{n}" not in index]


@pytest.mark.slow
def test_a_command_whose_install_is_gone_says_so(tmp_path: Path) -> None:
    """The installed ``barca`` script run by a Python that cannot import barca (an editable
    install whose checkout was deleted): one line naming the fix, exit 3, no traceback."""
    got = subprocess.run([sys.executable, "-I", "-S", str(REPO / "scripts" / "barca"), "status"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert got.returncode == 3, got.stderr
    assert "cannot import barca" in got.stderr and "pip install" in got.stderr
    assert "Traceback" not in got.stderr and got.stdout == ""
